"""The driver's side of a controller called from its loop (ros2_control style), without rclpy.

With the driver parameter ``in_loop_controller`` naming a registered controller
(:mod:`humanoid_control.controllers.registry`) the controller runs in the driver's process, called once per
tick from the real-time loop between reading the state and writing the command: no DDS hop, no executor, no
GIL hand-over between the state and its answer. Its node (the generic
:class:`~humanoid_control.controllers.controller_node.ControllerNode`, or the node of a controller that has
one of its own) is created in the same process as its ROS interface.

:data:`InLoopState` is what the loop hands the controller each tick (the controller interface's
:class:`~humanoid_control.controllers.interface.ControllerState`); :func:`checked_command` turns targets into
a driver command; :func:`parse_node_parameters` reads the driver parameter ``in_loop_parameters``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from humanoid_control.controllers.interface import ControllerState, checked_command
from humanoid_control.driver.driver_core import JointCommand

__all__ = ["InLoopController", "InLoopState", "checked_command", "parse_node_parameters"]

#: what the loop hands an in-loop controller each tick
InLoopState = ControllerState


class InLoopController(Protocol):
    """What the driver's loop calls (the controller's node in the driver's process implements it)."""

    def in_loop_step(self, state: ControllerState) -> JointCommand | None:
        """This tick's command (configuration order), or None (no command this tick)."""
        ...

    def in_loop_mirror(self) -> None:
        """Publish the latest command for tooling (called off the critical path, at the publish rate)."""
        ...


def parse_node_parameters(text: str) -> dict[str, Any]:
    """The in-loop controller node's parameters from the driver parameter ``in_loop_parameters``.

    ``name=value`` pairs separated by ``;`` (a launch file can build them from its arguments; a value is
    ``true``/``false``, an integer, a float or else text), or a JSON object. Empty: none.

    Raises:
        ValueError: a pair without ``=``, an empty or repeated name, or JSON that is not an object.
    """
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"parameter in_loop_parameters: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError("parameter in_loop_parameters: a JSON object of name: value is needed")
        return data
    out: dict[str, Any] = {}
    for pair in text.split(";"):
        if not pair.strip():
            continue
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise ValueError(f"parameter in_loop_parameters: '{pair}' is not name=value")
        if name in out:
            raise ValueError(f"parameter in_loop_parameters: '{name}' given twice")
        out[name] = _typed(value)
    return out


def _typed(value: str) -> Any:
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value
