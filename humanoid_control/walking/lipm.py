"""The linear inverted pendulum (LIPM) of walking, per horizontal axis (Kajita et al., ICRA 2003).

The CoM moves at constant height ``h`` (m) above flat ground; per horizontal axis its state is
``s = [c, cdot, cddot]`` (m, m/s, m/s^2, odom frame) and the input the CoM jerk ``u`` (m/s^3). Then

- ZMP ``p = c - (h / g) cddot`` (m), i.e. ``p = C s`` with ``C = [1, 0, -h/g]``;
- ``omega = sqrt(g / h)`` (1/s); divergent component of motion (DCM, capture point)
  ``xi = c + cdot / omega`` (m), with ``xi_dot = omega (xi - p)``;
- constant jerk over a period ``dt`` (s): ``s_{k+1} = A s_k + B u_k`` with
  ``A = [[1, dt, dt^2/2], [0, 1, dt], [0, 0, 1]]`` and ``B = [dt^3/6, dt^2/2, dt]`` (exact).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GRAVITY = 9.81  # m/s^2


@dataclass(frozen=True)
class Lipm:
    """A LIPM of CoM height ``height`` (m) above the ground under gravity ``gravity`` (m/s^2)."""

    height: float
    gravity: float = GRAVITY

    def __post_init__(self) -> None:
        if not (self.height > 0.0 and self.gravity > 0.0):
            raise ValueError("LIPM height and gravity must be > 0")

    @property
    def omega(self) -> float:
        """Natural frequency ``sqrt(g / h)`` (1/s)."""
        return math.sqrt(self.gravity / self.height)

    @property
    def zmp_row(self) -> np.ndarray:
        """``C`` with ``p = C s`` (3,)."""
        return np.array([1.0, 0.0, -self.height / self.gravity])

    @staticmethod
    def transition(dt: float) -> tuple[np.ndarray, np.ndarray]:
        """``A`` (3, 3) and ``B`` (3,) of the constant-jerk step of ``dt`` (s)."""
        A = np.array([[1.0, dt, 0.5 * dt * dt], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
        B = np.array([dt**3 / 6.0, 0.5 * dt * dt, dt])
        return A, B

    def zmp(self, state: np.ndarray) -> np.ndarray:
        """ZMP (m) of states ``(..., 3)``."""
        return np.asarray(state)[..., 0] - (self.height / self.gravity) * np.asarray(state)[..., 2]

    def dcm(self, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        """DCM ``c + cdot / omega`` (m) of CoM positions and velocities."""
        return np.asarray(position) + np.asarray(velocity) / self.omega

    def point_foot(self, position: np.ndarray, velocity: np.ndarray, zmp: np.ndarray, t: float) -> tuple:
        """CoM position and velocity after ``t`` (s) with the ZMP held at ``zmp`` (closed form:
        ``c - p = (c0 - p) cosh(omega t) + cdot0 / omega sinh(omega t)``)."""
        w = self.omega
        ch, sh = math.cosh(w * t), math.sinh(w * t)
        x0 = np.asarray(position) - zmp
        v0 = np.asarray(velocity)
        return zmp + x0 * ch + v0 * sh / w, x0 * w * sh + v0 * ch
