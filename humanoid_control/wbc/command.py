"""Joint commands from the QP solution, and what to do when the QP fails.

The driver applies ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff`` with a low-gain profile. From a solved tick
(measured joint state ``q, dq``, QP joint accelerations ``qdd``, torques ``tau``; period ``dt``):

    dq* = dq + qdd dt            (rad/s)
    q*  = q + dq dt + qdd dt^2 / 2   (rad)
    tau_ff = tau                 (N m)

so the PD terms only correct what happens within the tick; ``q*`` and ``dq*`` are clipped to the position and
velocity limits, ``tau_ff`` to the effort limits. All arrays are in configuration joint order.

Failure policy: an unsolved or infeasible QP (or a non-finite solution) reuses the last safe command for at
most ``max_hold_ticks`` consecutive ticks; the tick after that requests damping, which latches until
:meth:`CommandGenerator.reset`. Counters for diagnostics.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from humanoid_control.model.robot_config import RobotConfig


def _clip(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``np.clip`` as two ufunc calls, in place on ``x`` (``np.clip``'s wrapper costs several us per call)."""
    np.maximum(x, lower, out=x)
    return np.minimum(x, upper, out=x)


class CommandMode(enum.Enum):
    """What the command of a tick is."""

    TRACK = "track"  # from this tick's QP solution
    HOLD_LAST = "hold_last"  # QP failed: the last safe command again
    DAMPING = "damping"  # too many failures (or none safe yet): the driver should go to damping


@dataclass
class JointCommand:
    """One tick's command, configuration joint order: ``q`` (rad), ``dq`` (rad/s), ``tau_ff`` (N m)."""

    mode: CommandMode
    q: np.ndarray
    dq: np.ndarray
    tau_ff: np.ndarray


@dataclass
class CommandSettings:
    """Attributes: ``dt`` control period (s); ``max_hold_ticks`` consecutive failures bridged with the last
    safe command before damping is requested."""

    dt: float = 0.002
    max_hold_ticks: int = 5


@dataclass
class FailureCounters:
    """Diagnostics: ticks solved, failed (total), consecutive failures now, longest run, damping requests."""

    solved: int = 0
    failed: int = 0
    consecutive: int = 0
    longest: int = 0
    damping_requests: int = 0


class CommandGenerator:
    """Integrates QP accelerations into joint commands and applies the failure policy."""

    def __init__(self, config: RobotConfig, settings: CommandSettings | None = None) -> None:
        self.settings = settings or CommandSettings()
        self.lower, self.upper = config.array("lower"), config.array("upper")
        self.velocity, self.effort = config.array("velocity"), config.array("effort")
        self._neg_velocity, self._neg_effort = -self.velocity, -self.effort
        self.counters = FailureCounters()
        self.last_safe: JointCommand | None = None
        self.damping = False

    def reset(self) -> None:
        """Leave damping (operator action); counters are kept."""
        self.damping = False
        self.counters.consecutive = 0
        self.last_safe = None

    def update(
        self, ok: bool, q: np.ndarray, dq: np.ndarray, qdd: np.ndarray, tau: np.ndarray
    ) -> JointCommand:
        """Command for this tick. ``ok``: the QP solved; ``q, dq`` measured; ``qdd, tau`` from the QP."""
        c = self.counters
        # a sum is finite iff every entry is
        good = ok and math.isfinite(float(qdd.sum()) + float(tau.sum()))
        if good and not self.damping:
            dt = self.settings.dt
            dq_cmd = qdd * dt  # velocity change over the tick
            q_cmd = dq_cmd * (0.5 * dt)
            q_cmd += q
            q_cmd += dq * dt
            dq_cmd += dq
            cmd = JointCommand(
                CommandMode.TRACK,
                _clip(q_cmd, self.lower, self.upper),
                _clip(dq_cmd, self._neg_velocity, self.velocity),
                _clip(np.array(tau, dtype=float), self._neg_effort, self.effort),
            )
            c.solved += 1
            c.consecutive = 0
            self.last_safe = cmd
            return cmd
        if not good:
            c.failed += 1
            c.consecutive += 1
            c.longest = max(c.longest, c.consecutive)
        if not self.damping and self.last_safe is not None and c.consecutive <= self.settings.max_hold_ticks:
            last = self.last_safe
            return JointCommand(CommandMode.HOLD_LAST, last.q, last.dq, last.tau_ff)
        if not self.damping:
            self.damping = True
            c.damping_requests += 1
        zeros = np.zeros_like(q, dtype=float)
        return JointCommand(CommandMode.DAMPING, np.array(q, dtype=float), zeros, zeros.copy())
