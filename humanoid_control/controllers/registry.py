"""Controllers found by name: the entry-point group ``humanoid_stack.controllers``.

A package adds a controller without touching this one by declaring, in its packaging metadata::

    [project.entry-points."humanoid_stack.controllers"]
    arm_sine = "my_package.arm_sine:ArmSineController"

The object named is either a :class:`~humanoid_control.controllers.interface.Controller` subclass (hosted by
the generic node adapter or called from the driver's loop) or, for the stack's controllers that still have a
node of their own (``policy``, ``wbc_stand``, ``mpc_walk``), that node's class; such a class offers a
classmethod ``in_loop_node(driver, kwargs)`` when it can run in the driver's loop. The registry imports
nothing of any particular controller: names resolve at run time.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from humanoid_control.controllers.interface import Controller

GROUP = "humanoid_stack.controllers"
#: accepted names that mean "no controller" (the driver holds the default pose)
NO_CONTROLLER = "none"
#: older names of registered controllers (the driver parameter ``in_loop_controller`` took ``wbc``)
ALIASES = {"wbc": "wbc_stand"}


class UnknownControllerError(ValueError):
    """A controller name that no installed package registers; the message lists the registered ones."""

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = available
        super().__init__(
            f"unknown controller '{name}': registered controllers (entry points '{GROUP}') are "
            f"{', '.join(available) or 'none'}"
        )


def _entry_points() -> dict[str, EntryPoint]:
    out: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        out.setdefault(ep.name, ep)  # the first on sys.path wins, as for console scripts
    return out


def registered_controllers() -> list[str]:
    """The names of every registered controller, sorted."""
    return sorted(_entry_points())


def resolve_name(name: str) -> str:
    """``name`` with an alias replaced by the name it stands for."""
    return ALIASES.get(name, name)


def load_controller(name: str) -> Any:
    """The object registered under ``name`` (a :class:`Controller` subclass or a node class).

    Raises:
        UnknownControllerError: no installed package registers ``name``.
        ImportError: the registered object cannot be imported (its package is broken or a dependency is
            missing); the message names the entry point.
    """
    points = _entry_points()
    ep = points.get(resolve_name(name))
    if ep is None:
        raise UnknownControllerError(name, sorted(points))
    try:
        return ep.load()
    except Exception as exc:
        raise ImportError(f"controller '{name}' ({ep.value}) cannot be loaded: {exc!r}") from exc


def is_controller_class(obj: Any) -> bool:
    """True for a :class:`Controller` subclass (hosted generically), False for a node-hosted controller."""
    return isinstance(obj, type) and issubclass(obj, Controller)


def create_controller(name: str) -> Controller:
    """A new, unconfigured instance of the :class:`Controller` registered under ``name``.

    Raises:
        UnknownControllerError, ImportError: as :func:`load_controller`.
        ValueError: ``name`` is registered by a node-hosted controller (it has no generic host yet).
    """
    obj = load_controller(name)
    if not is_controller_class(obj):
        raise ValueError(
            f"controller '{name}' runs as its own node ({obj.__module__}.{obj.__qualname__}), not in the "
            "generic controller host"
        )
    return obj()
