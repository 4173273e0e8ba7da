"""Controllers called from the driver's loop (ros2_control style), without rclpy.

With the driver parameter ``in_loop_controller`` (``joint_hold``, ``policy`` or ``wbc``) the controller's core
runs in the driver's process, called once per tick from the real-time loop between reading the state and
writing the command: no DDS hop, no executor, no GIL hand-over between the state and its answer. The
controller's node (``joint_hold_controller``, ``policy_runner``) is created in the same process as its ROS
interface: its parameters, services and latched state, and its commands mirrored on
``<node>/joint_commands`` for tooling.

:class:`InLoopState` is what the loop hands the controller each tick; :func:`checked_command` turns the
controller's targets into a driver :class:`~humanoid_control.driver.driver_core.JointCommand`, refusing
non-finite or mis-sized targets as the ``/joint_commands`` subscriber would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from humanoid_control.driver.driver_core import CommandError, JointCommand

#: the values of the driver parameter ``in_loop_controller``
IN_LOOP_CONTROLLERS = ("none", "joint_hold", "policy", "wbc")


@dataclass
class InLoopState:
    """One tick's measurement, configuration joint order.

    Attributes:
        stamp: the tick's time (s, the driver's clock: simulated time in simulation).
        q: joint positions (rad). dq: joint velocities (rad/s).
        imu_quat: IMU orientation (w, x, y, z), IMU frame -> world. gyro: angular velocity (rad/s, IMU frame).
        driver_mode: the driver's mode before this tick's update (ramp, hold, active, damping).
        accel: IMU specific force (m/s^2, IMU frame). tau: joint torques applied over the last tick (N m).
        estimate: the base state of this tick from the state estimator in the loop (its node in the driver's
            process, ``BaseEstimate``; with the WBC), None without one or for a sample it dropped.
    """

    stamp: float
    q: np.ndarray
    dq: np.ndarray
    imu_quat: np.ndarray
    gyro: np.ndarray
    driver_mode: str
    accel: np.ndarray | None = None
    tau: np.ndarray | None = None
    estimate: Any = None


class InLoopController(Protocol):
    """What the driver's loop calls (the controller node in the driver's process implements it)."""

    def in_loop_step(self, state: InLoopState) -> JointCommand | None:
        """This tick's command (configuration order), or None (no command this tick)."""
        ...

    def in_loop_mirror(self) -> None:
        """Publish the latest command for tooling (called off the critical path, at the publish rate)."""
        ...


def checked_command(
    n_joints: int, stamp: float, q: np.ndarray, dq: np.ndarray | None = None, tau: np.ndarray | None = None
) -> JointCommand:
    """A driver command from in-loop targets (rad, rad/s, N m); zeros where None.

    Raises:
        CommandError: wrong length or a non-finite value (the driver counts it as a refused command).
    """
    out = []
    for label, values in (("position", q), ("velocity", dq), ("effort", tau)):
        arr = np.zeros(n_joints) if values is None else np.asarray(values, dtype=float)
        if arr.shape != (n_joints,):
            raise CommandError(f"in-loop controller: {label} has {arr.size} values for {n_joints} joints")
        if not np.all(np.isfinite(arr)):
            raise CommandError(f"in-loop controller: non-finite {label}")
        out.append(arr)
    return JointCommand(q=out[0], dq=out[1], tau_ff=out[2], stamp=stamp)


class JointHoldCore:
    """The joint hold controller's law: q* = the default standing pose (rad), dq* = 0, tau_ff = 0."""

    def __init__(self, default_pose: np.ndarray) -> None:
        self.target = np.asarray(default_pose, dtype=float).copy()
        self._zeros = np.zeros_like(self.target)

    def command(self, stamp: float) -> JointCommand:
        """The command answering the state of ``stamp`` (s)."""
        return JointCommand(q=self.target, dq=self._zeros, tau_ff=self._zeros, stamp=stamp)


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
