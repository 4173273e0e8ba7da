"""Data the hardware backends and the driver exchange: measured state, low-level command, simulator truth.

Plain dataclasses (numpy only). The backends (:mod:`humanoid_control.hardware.base` and its subclasses)
and the driver (the `driver` package) both import them from here: the backends import nothing of
the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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


@dataclass
class LowLevelCommand:
    """What the backend applies until the next tick.

    Per joint q*, dq*, kp, kd, tau_ff (configuration order).
    """

    q: np.ndarray
    dq: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    tau_ff: np.ndarray

    def torque(self, q: np.ndarray, dq: np.ndarray, effort: np.ndarray) -> np.ndarray:
        """Joint torque of the law ``kp (q* - q) + kd (dq* - dq) + tau_ff`` clamped to ``+-effort`` (N m)."""
        tau = self.kp * (self.q - q) + self.kd * (self.dq - dq) + self.tau_ff
        return np.minimum(np.maximum(tau, -effort, out=tau), effort, out=tau)
