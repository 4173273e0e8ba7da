"""The controller interface: what every controller implements, and what the loop hands it each tick.

A controller knows nothing of ROS, of the clock mode (lockstep or realtime) or of the backend (simulator or
robot). Its lifecycle follows ros2_control's ``controller_interface``:

1. ``configure(robot, parameters)``: once, from the robot configuration
   (:class:`~humanoid_control.model.robot_config.RobotConfig`) and its parameters (a mapping of name to value,
   checked against :attr:`Controller.parameters`);
2. ``activate(state)``: from the measured state, when it starts commanding;
3. ``update(state, t)`` -> :class:`~humanoid_control.driver.driver_core.JointCommand` or None, every tick
   (or every ``1 / rate_hz`` s where ``rate_hz`` is set: the host holds the last command between updates);
4. ``deactivate()``: when it stops commanding (it may be activated again);
5. ``report()``: diagnostics values (``/diagnostics`` key-values); ``status()``: its state (``~/state``,
   JSON).

Units and frames: joint positions in rad, velocities in rad/s, torques in N m, all in the robot
configuration's joint order; the IMU orientation is (w, x, y, z) from the IMU frame to the world frame, its
angular velocity in rad/s in the IMU frame and its specific force in m/s^2 in the IMU frame; the velocity
command ``cmd_vel`` is (vx, vy, wz) in m/s and rad/s in the base frame (REP-103); times are seconds on the
driver's clock (simulated time in simulation).

A controller is registered by name in the entry-point group ``humanoid_stack.controllers``
(docs/architecture.md, "Writing a controller"); the driver runs it in its loop (``in_loop:=true``) or the
generic node adapter runs it as a ROS 2 node of its own, with the same object and the same calls.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from humanoid_control.driver.driver_core import CommandError, JointCommand
from humanoid_control.model.robot_config import RobotConfig


@dataclass
class ControllerState:
    """One tick's measurement, configuration joint order.

    Attributes:
        stamp: the tick's time (s, the driver's clock: simulated time in simulation).
        q: joint positions (rad). dq: joint velocities (rad/s).
        imu_quat: IMU orientation (w, x, y, z), IMU frame -> world. gyro: angular velocity (rad/s, IMU frame).
        driver_mode: the driver's mode before this tick's update (ramp, hold, active, damping).
        accel: IMU specific force (m/s^2, IMU frame). tau: joint torques applied over the last tick (N m).
        estimate: the base state of this tick from the state estimator (``BaseEstimate``), None without one.
        cmd_vel: the latest velocity command (vx m/s, vy m/s, wz rad/s; base frame), None when none came.
        cmd_vel_stamp: when that command came (s, the driver's clock: the stamp of the state it arrived at).
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
    cmd_vel: np.ndarray | None = None
    cmd_vel_stamp: float = -math.inf


@dataclass(frozen=True)
class ParameterSpec:
    """One controller parameter: its default (which gives its type), what it means and, for numbers, its
    range (inclusive; a value outside is refused). The node adapter declares it as a ROS parameter with a
    descriptor."""

    default: bool | int | float | str
    description: str
    low: float | None = None
    high: float | None = None

    def check(self, name: str, value: Any) -> Any:
        """``value`` converted to this parameter's type (an int is taken for a float).

        Raises:
            ValueError: a value of another type, a non-finite number or a number outside the range.
        """
        kind = type(self.default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not kind:
            raise ValueError(f"parameter {name}: {value!r} is not a {kind.__name__}")
        if kind in (int, float):
            if not math.isfinite(value):
                raise ValueError(f"parameter {name}: {value!r} is not finite")
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                raise ValueError(f"parameter {name}: {value!r} is outside [{self.low:g}, {self.high:g}]")
        return value


class Controller(ABC):
    """Base class of every controller. Subclasses set :attr:`name`, :attr:`parameters` (name ->
    :class:`ParameterSpec`) and override :meth:`update`; the other methods have sensible defaults.

    Attributes:
        name: the name it is registered under (for logs and diagnostics).
        parameters: its parameters and their specifications (class attribute).
        rate_hz: how often :meth:`update` is called (Hz); 0: every tick of the loop.
        needs_estimate: it reads ``state.estimate`` (the host runs the state estimator before it, or waits for
            ``/odom`` of the same tick).
        state_topic: a latched topic (std_msgs/String, JSON) on which the host node publishes
            :meth:`topic_state` whenever its version changes ('' : none), e.g. the supervised controller's
            ``/supervisor/state``.
        robot: the robot configuration, set by :meth:`configure`. params: its parameters' values.
    """

    name: ClassVar[str] = ""
    state_topic: ClassVar[str] = ""
    parameters: ClassVar[Mapping[str, ParameterSpec]] = {}
    rate_hz: float = 0.0
    needs_estimate: ClassVar[bool] = False

    def __init__(self) -> None:
        self.robot: RobotConfig | None = None
        self.params: dict[str, Any] = {}

    def configure(self, robot: RobotConfig, params: Mapping[str, Any]) -> None:
        """Take the robot configuration and the parameters (defaults where absent).

        Raises:
            ValueError: an unknown parameter name or a value its specification refuses.
        """
        unknown = sorted(set(params) - set(self.parameters))
        if unknown:
            known = ", ".join(sorted(self.parameters)) or "none"
            raise ValueError(
                f"controller {self.name}: unknown parameter(s) {', '.join(unknown)} (known: {known})"
            )
        self.robot = robot
        self.params = {
            key: spec.check(key, params[key]) if key in params else spec.default
            for key, spec in self.parameters.items()
        }

    def activate(self, state: ControllerState) -> None:
        """Start commanding from the measured ``state`` (the first state it answers). Default: nothing."""
        return

    @abstractmethod
    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        """This tick's command (configuration order), or None (no command this tick). ``t``: the tick's time
        (s), the same as ``state.stamp``."""

    def deactivate(self) -> None:
        """Stop commanding (it may be activated again). Default: nothing."""
        return

    def gains(self) -> str | tuple[np.ndarray, np.ndarray] | None:
        """The gains the driver is to apply to this controller's commands: a gain profile's name of the robot
        configuration, per-joint ``(kp, kd)`` (N m/rad, N m s/rad; configuration order), or None (the
        driver's ``gain_profile``). Asked once, after :meth:`configure`."""
        return None

    def report(self) -> dict[str, str]:
        """Diagnostics values (key -> text) for ``/diagnostics``."""
        return {}

    def status(self) -> dict[str, Any]:
        """Its state for ``~/state`` (JSON-serialisable)."""
        return {}

    def topic_state(self) -> tuple[int, dict[str, Any]]:
        """(version, JSON-serialisable state) for :attr:`state_topic`: the host publishes it when the version
        changed since it last did. Default: version 0, nothing."""
        return 0, {}


def checked_command(
    n_joints: int, stamp: float, q: np.ndarray, dq: np.ndarray | None = None, tau: np.ndarray | None = None
) -> JointCommand:
    """A driver command from a controller's targets (rad, rad/s, N m); zeros where None.

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
