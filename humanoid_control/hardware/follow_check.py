"""Do the motors follow the commands? Pure logic (numpy), used by the hardware backends before a controller
may take the robot.

A G1 whose sport (loco) service was not released with MotionSwitcher ignores low-level commands silently: its
own controller keeps running the motors. The host sees it in the torques: each LowState reports the torque the
motors applied over the last period (``tau_est``), and the host knows the law it asked for,
``kp (q* - q) + kd (dq* - dq) + tau_ff`` (clamped to the effort limits), evaluated at the state its command
answered. When they disagree by more than ``torque_tolerance`` of a joint's effort limit on some joint for
``ticks`` consecutive periods, the motors do not follow; the message names the joint and the likely cause.
Agreement for ``ticks`` periods clears it.

Limits of the check: it compares torques, so a robot whose own controller happens to apply the same torques
(holding the same pose with the same gains) passes; a real ``tau_est`` is an estimate from motor current,
hence
the generous tolerance (25 % of the effort limit by default) and the persistence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from humanoid_control.hardware.types import LowLevelCommand

NOT_FOLLOWING_HINT = (
    "the robot's sport (loco) service is probably still running the motors: release it with the SDK's "
    "MotionSwitcher (ReleaseMode) before low-level control"
)


@dataclass(frozen=True)
class FollowCheckConfig:
    """``torque_tolerance``: fraction of each joint's effort limit; ``ticks``: consecutive periods."""

    torque_tolerance: float = 0.25
    ticks: int = 50


class FollowMonitor:
    """Compares the torque each period's command asked for with the torque the motors report next period."""

    def __init__(self, names: list[str], effort: np.ndarray, config: FollowCheckConfig | None = None) -> None:
        self.names = list(names)
        self.effort = np.asarray(effort, dtype=float)
        self.config = config or FollowCheckConfig()
        self._bad = 0
        self._good = 0
        self.problem: str | None = None  # set while the motors do not follow
        self.worst_ratio = 0.0  # the last period's largest disagreement (fraction of the effort limit)

    def update(
        self, command: LowLevelCommand, q: np.ndarray, dq: np.ndarray, tau_reported: np.ndarray
    ) -> str | None:
        """One period: ``command`` was sent answering the state ``q``, ``dq``; ``tau_reported`` is the torque
        reported over the period that followed (N m, joint order). Returns the problem (or None)."""
        expected = command.torque(np.asarray(q, float), np.asarray(dq, float), self.effort)
        ratio = np.abs(np.asarray(tau_reported, float) - expected) / self.effort
        j = int(np.argmax(ratio))
        self.worst_ratio = float(ratio[j])
        if ratio[j] > self.config.torque_tolerance:
            self._bad += 1
            self._good = 0
            if self._bad >= self.config.ticks and self.problem is None:  # the message of the trip stays
                self.problem = (
                    f"motors do not follow the commands: {self.names[j]} applies {tau_reported[j]:.1f} N m "
                    f"where the command asks {expected[j]:.1f} N m, for {self._bad} periods; "
                    f"{NOT_FOLLOWING_HINT}"
                )
        else:
            self._good += 1
            self._bad = 0
            if self._good >= self.config.ticks:
                self.problem = None
        return self.problem


__all__ = ["NOT_FOLLOWING_HINT", "FollowCheckConfig", "FollowMonitor"]
