"""Swing-foot trajectory: sole-frame pose, velocity and acceleration from lift-off to a soft touchdown.

World (odom) frame, m, rad, s. With the phase ``s = (t - t_liftoff) / duration`` in ``[0, 1]``:

- horizontal position and yaw follow the quintic ``b(s) = 10 s^3 - 15 s^4 + 6 s^5`` from the lift-off pose
  to the touchdown pose (zero velocity and acceleration at both ends);
- height above the straight line between the two sole heights is ``h(s) = 64 H s^3 (1 - s)^3`` (``H`` the
  swing height, reached at ``s = 1/2``); it too has zero velocity and acceleration at both ends.

So the foot leaves and lands with zero velocity and zero acceleration (a soft touchdown); before lift-off and
after touchdown the trajectory holds the end poses.

A crossing step (``cross_delay`` ``d`` > 0) moves along the axis ``cross_axis_yaw`` (the stance sole's
forward axis) and turns first, over the phase ``[0, 1 - d]``, and across it over ``[d, 1]``: the foot passes
in front of (or behind) the stance foot before it crosses its centre line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from humanoid_control.walking.geometry import Pose2D, wrap_angle


@dataclass(frozen=True)
class FootState:
    """A sole frame's reference: ``position`` (3,) m, ``yaw`` rad, ``velocity`` (3,) m/s, ``yaw_rate`` rad/s,
    ``acceleration`` (3,) m/s^2, ``yaw_acceleration`` rad/s^2 (odom frame; the sole stays level)."""

    position: np.ndarray
    yaw: float
    velocity: np.ndarray
    yaw_rate: float
    acceleration: np.ndarray
    yaw_acceleration: float

    @staticmethod
    def still(pose: Pose2D, z: float = 0.0) -> FootState:
        """A foot at rest at ``pose`` on ground of height ``z`` (m)."""
        zero = np.zeros(3)
        return FootState(np.array([pose.x, pose.y, z]), pose.yaw, zero, 0.0, zero.copy(), 0.0)


def _blend(s: float) -> tuple[float, float, float]:
    """Quintic 0 -> 1 and its first two derivatives in ``s``."""
    s2 = s * s
    return (
        s2 * s * (10.0 - 15.0 * s + 6.0 * s2),
        30.0 * s2 * (1.0 - 2.0 * s + s2),
        60.0 * s * (1.0 - 3.0 * s + 2.0 * s2),
    )


def _bump(s: float) -> tuple[float, float, float]:
    """``64 s^3 (1 - s)^3`` (peak 1 at ``s = 1/2``) and its first two derivatives in ``s``."""
    u = 1.0 - s
    return (
        64.0 * s**3 * u**3,
        192.0 * s**2 * u**2 * (u - s),
        384.0 * s * u * (u * u - 3.0 * s * u + s * s),
    )


@dataclass(frozen=True)
class SwingTrajectory:
    """One swing: ``start`` and ``end`` sole poses (odom frame), ground heights ``start_z``, ``end_z`` (m),
    lift-off time ``t0`` and ``duration`` (s), swing ``height`` (m)."""

    start: Pose2D
    end: Pose2D
    t0: float
    duration: float
    height: float
    start_z: float = 0.0
    end_z: float = 0.0
    cross_delay: float = 0.0
    cross_axis_yaw: float = 0.0

    def __post_init__(self) -> None:
        if not (self.duration > 0.0 and math.isfinite(self.duration)):
            raise ValueError("swing duration must be > 0")
        if not 0.0 <= self.cross_delay < 1.0:
            raise ValueError("cross_delay must be in [0, 1)")

    def phase(self, t: float) -> float:
        """``s`` in ``[0, 1]`` at time ``t`` (s)."""
        return min(max((t - self.t0) / self.duration, 0.0), 1.0)

    def state(self, t: float) -> FootState:
        """The sole's reference at time ``t`` (s); held at the end poses outside the swing."""
        s = self.phase(t)
        b, db, ddb = _blend(s)
        h, dh, ddh = _bump(s)
        if s in (0.0, 1.0):  # outside or at the ends: at rest (the derivatives above vanish there too)
            db = ddb = dh = ddh = 0.0
        inv, inv2 = 1.0 / self.duration, 1.0 / self.duration**2
        delta = np.array([self.end.x - self.start.x, self.end.y - self.start.y, self.end_z - self.start_z])
        dyaw = wrap_angle(self.end.yaw - self.start.yaw)
        base = np.array([self.start.x, self.start.y, self.start_z])
        lift = np.array([0.0, 0.0, self.height])
        if self.cross_delay > 0.0 and s not in (0.0, 1.0):
            return self._crossing_state(s, delta, dyaw, base, (h, dh, ddh), inv, inv2)
        return FootState(
            base + b * delta + h * lift,
            wrap_angle(self.start.yaw + b * dyaw),
            (db * delta + dh * lift) * inv,
            db * dyaw * inv,
            (ddb * delta + ddh * lift) * inv2,
            ddb * dyaw * inv2,
        )

    def _crossing_state(
        self,
        s: float,
        delta: np.ndarray,
        dyaw: float,
        base: np.ndarray,
        bump: tuple[float, float, float],
        inv: float,
        inv2: float,
    ) -> FootState:
        """Inside a crossing swing: the part of ``delta`` along ``cross_axis_yaw`` and the turn early, the
        part across it late (module docstring)."""
        d = self.cross_delay
        k = 1.0 / (1.0 - d)
        early = min(s * k, 1.0)
        late = max((s - d) * k, 0.0)
        be, dbe, ddbe = _blend(early)
        bl, dbl, ddbl = _blend(late)
        if early >= 1.0:
            dbe = ddbe = 0.0
        if late <= 0.0:
            dbl = ddbl = 0.0
        c, sn = math.cos(self.cross_axis_yaw), math.sin(self.cross_axis_yaw)
        along = np.array([c, sn, 0.0])
        across = np.array([-sn, c, 0.0])
        a = float(delta[:2] @ along[:2]) * along
        b = float(delta[:2] @ across[:2]) * across + np.array([0.0, 0.0, delta[2]])
        h, dh, ddh = bump
        lift = np.array([0.0, 0.0, self.height])
        return FootState(
            base + be * a + bl * b + h * lift,
            wrap_angle(self.start.yaw + be * dyaw),
            (k * dbe * a + k * dbl * b + dh * lift) * inv,
            k * dbe * dyaw * inv,
            (k * k * ddbe * a + k * k * ddbl * b + ddh * lift) * inv2,
            k * k * ddbe * dyaw * inv2,
        )
