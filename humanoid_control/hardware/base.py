"""Hardware backend interface: what the robot driver needs from a simulator or a real robot.

A backend owns one robot. The driver calls, once per tick: :meth:`RobotBackend.read` (sensors),
:meth:`RobotBackend.write` (the joint-level command, held until the next write) and
:meth:`RobotBackend.advance` (simulators integrate physics for the tick; hardware returns at once because
time passes by itself).
A real robot's motor drivers run the law ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff`` on board; a simulator
backend evaluates it at every physics step. Add a backend by subclassing and registering it in
``humanoid_control.hardware.BACKENDS``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from humanoid_control.driver_core import LowLevelCommand


@dataclass
class RobotState:
    """Measured state at one instant.

    Attributes:
        stamp: time (s) on the backend's clock (simulated time for simulators, wall clock for hardware).
        q, dq: joint positions (rad) and velocities (rad/s), configuration order.
        tau: joint torques applied over the last tick (N m).
        imu_quat: IMU orientation as (w, x, y, z), IMU frame to world frame (a real IMU's own estimate).
        gyro: angular velocity of the IMU frame, in the IMU frame (rad/s).
        accel: specific force (acceleration minus gravity) in the IMU frame (m/s^2); ~ +9.81 z at rest.
    """

    stamp: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    imu_quat: np.ndarray
    gyro: np.ndarray
    accel: np.ndarray


@dataclass
class Wrench:
    """Force (N) and torque (N m) in a named frame, about that frame's origin."""

    frame: str
    force: np.ndarray
    torque: np.ndarray


@dataclass
class GroundTruth:
    """Simulator-only truth for evaluation; no controller may read it.

    Attributes:
        position: base origin in the world frame (m). quat: base orientation (w, x, y, z), base to world.
        linear_velocity_body, angular_velocity_body: base twist in the base frame (m/s, rad/s).
        contacts: per side (``left``/``right``), ground reaction wrench on the foot in its sole frame.
    """

    position: np.ndarray
    quat: np.ndarray
    linear_velocity_body: np.ndarray
    angular_velocity_body: np.ndarray
    contacts: dict[str, Wrench] = field(default_factory=dict)


class RobotBackend(ABC):
    """A simulator or a real robot behind the driver's real-time loop."""

    #: True for simulators: the driver publishes /clock and /sim/* and may run lockstep.
    simulated: bool = False

    @abstractmethod
    def read(self) -> RobotState:
        """Read the sensors."""

    @abstractmethod
    def write(self, command: LowLevelCommand) -> None:
        """Set the joint-level command applied until the next write."""

    @abstractmethod
    def advance(self, dt: float) -> None:
        """Let ``dt`` seconds pass (simulators integrate; hardware returns immediately)."""

    def ground_truth(self) -> GroundTruth | None:
        """Simulator truth, or None on hardware."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release resources (put hardware in a safe state)."""
