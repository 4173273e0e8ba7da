"""External pushes on a simulated robot: validation and the direction/impulse helpers (pure, no rclpy).

A push is a constant force ``force`` (N, world frame, x forward, y left, z up at spawn) applied at the centre
of mass of one body (the base body, the pelvis, by default) for ``duration`` seconds of simulated time. The
simulator applies it for exactly ``round(duration / timestep)`` physics steps, starting with the first physics
step after the request (see :meth:`humanoid_control.hardware.mujoco_sim.MujocoBackend.push`). Its impulse is
``force * duration`` (N s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: unit push directions in the world frame (the robot spawns facing +x): name -> (x, y)
DIRECTIONS: dict[str, tuple[float, float]] = {
    "front": (1.0, 0.0),
    "back": (-1.0, 0.0),
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
}


class PushError(ValueError):
    """A push request was refused; the message says why."""


@dataclass(frozen=True)
class PushLimits:
    """What a push request may ask for.

    Attributes:
        max_force: largest force magnitude (N). max_duration: longest push (s).
        timestep: physics step (s); the duration must be a whole number of steps (within 1e-6 s).
    """

    max_force: float = 2000.0
    max_duration: float = 5.0
    timestep: float = 0.002


@dataclass(frozen=True)
class PushRequest:
    """A validated push: ``force`` (3,) N world frame, ``duration`` (s), ``steps`` physics steps."""

    force: tuple[float, float, float]
    duration: float
    steps: int

    @property
    def impulse(self) -> float:
        """Impulse magnitude (N s) as applied: ``|force| * steps * timestep`` (= ``|force| * duration``)."""
        return float(np.linalg.norm(self.force)) * self.duration


def validate_push(force: object, duration: object, limits: PushLimits | None = None) -> PushRequest:
    """Check a push request; a :class:`PushRequest` or :class:`PushError` saying what is wrong.

    Args:
        force: 3 numbers, N, world frame. duration: seconds, > 0, a whole number of physics steps.
    """
    lim = limits or PushLimits()
    try:
        f = np.asarray(force, dtype=float).reshape(-1)
        d = float(duration)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise PushError(f"push: not numbers ({exc})") from None
    if f.size != 3:
        raise PushError(f"push: force needs 3 components (x, y, z in N), got {f.size}")
    if not (np.all(np.isfinite(f)) and math.isfinite(d)):
        raise PushError("push: non-finite force or duration")
    magnitude = float(np.linalg.norm(f))
    if magnitude > lim.max_force:
        raise PushError(f"push: |force| {magnitude:.1f} N exceeds {lim.max_force:g} N")
    if not 0.0 < d <= lim.max_duration:
        raise PushError(f"push: duration {d} s not in (0, {lim.max_duration:g}] s")
    steps = d / lim.timestep
    if abs(steps - round(steps)) > 1e-6 / lim.timestep:
        raise PushError(f"push: duration {d} s is not a whole number of physics steps of {lim.timestep} s")
    return PushRequest((float(f[0]), float(f[1]), float(f[2])), d, max(1, round(steps)))


def push_force(direction: str, impulse: float, duration: float) -> tuple[float, float, float]:
    """Horizontal force (N, world frame) of a push of ``impulse`` (N s) over ``duration`` (s) along a named
    direction of :data:`DIRECTIONS`."""
    if direction not in DIRECTIONS:
        raise PushError(f"push: unknown direction '{direction}' (allowed: {', '.join(DIRECTIONS)})")
    if duration <= 0.0:
        raise PushError("push: duration must be > 0")
    ux, uy = DIRECTIONS[direction]
    magnitude = impulse / duration
    return (ux * magnitude, uy * magnitude, 0.0)
