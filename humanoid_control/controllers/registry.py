"""Controllers found by name: the entry-point group ``humanoid_stack.controllers``.

A package adds a controller without touching this one by declaring, in its packaging metadata::

    [project.entry-points."humanoid_stack.controllers"]
    arm_sine = "my_package.arm_sine:ArmSineController"

The object named is a :class:`~humanoid_control.controllers.interface.Controller` subclass. The generic node
adapter hosts it as its own node, and the driver's loop calls it (``in_loop:=true``); the in-process runner
runs it. A controller whose ROS face is still a node of its own (the stack's ``policy``, ``wbc_stand`` and
``mpc_walk``) names that node's class in its ``node`` attribute (``"module:Class"``); that node class offers a
classmethod ``in_loop_node(driver, kwargs)`` for the driver's loop. The registry imports nothing of any
particular controller: names resolve at run time.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from humanoid_control.controllers.interface import Controller

GROUP = "humanoid_stack.controllers"
#: accepted names that mean "no controller" (the driver holds the default pose)
NO_CONTROLLER = "none"
#: the controllers this package registers (others come from installed packages)
STACK_CONTROLLERS = ("joint_hold", "policy", "wbc_stand", "mpc_walk")
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
    """True for a :class:`Controller` subclass."""
    return isinstance(obj, type) and issubclass(obj, Controller)


def own_node_class(controller_class: Any) -> Any:
    """The node class a controller names in its ``node`` attribute (``"module:Class"``), or None (the
    generic node adapter hosts it).

    Raises:
        ImportError: the named node class cannot be imported.
    """
    ref = getattr(controller_class, "node", None)
    if not ref:
        return None
    module, _, attr = str(ref).partition(":")
    try:
        return getattr(import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ImportError(
            f"controller {controller_class.__name__}: node {ref} cannot be loaded: {exc!r}"
        ) from exc


def create_controller(name: str) -> Controller:
    """A new, unconfigured instance of the :class:`Controller` registered under ``name``.

    Raises:
        UnknownControllerError, ImportError: as :func:`load_controller`.
        ValueError: the registered object is not a :class:`Controller` subclass.
    """
    obj = load_controller(name)
    if not is_controller_class(obj):
        raise ValueError(f"controller '{name}': {obj!r} is not a Controller subclass")
    return obj()
