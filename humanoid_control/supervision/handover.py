"""Bumpless hand-over between two controllers that share the driver's gains, and the torque steps it makes.

Both controllers' commands are applied by the driver's law ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff``
(N m, clamped to each joint's effort limit) with one set of gains ``(kp, kd)``. A command meant for other
gains ``(kp', kd')`` becomes the same torque at the measured state under ``(kp, kd)`` by a feed-forward
term (:func:`regain`).

At a switch (the tick the new controller's command is first applied) the old law's torque at the
measured state (q, dq) minus the new law's is kept as a feed-forward offset, so the torque applied at the
switch tick is the old law's; the offset then decays towards zero by at most half of ``max_step`` of each
joint's effort limit per tick (the other half is left to the new controller's own changes), as the driver
does for its own switches (docs/modes.md, "Exactly one controller, bumpless switches").
:class:`SwitchBlend` also measures, per switch, the largest torque change from one tick to the next as a
fraction of the effort limits.
"""

from __future__ import annotations

import numpy as np

from humanoid_control.driver.driver_core import JointCommand


def law_torque(
    command: JointCommand, kp: np.ndarray, kd: np.ndarray, effort: np.ndarray, q: np.ndarray, dq: np.ndarray
) -> np.ndarray:
    """The driver's torque (N m) for ``command`` at the state ``q`` (rad), ``dq`` (rad/s)."""
    tau = kp * (command.q - q) + kd * (command.dq - dq) + command.tau_ff
    return np.clip(tau, -effort, effort)


def regain(
    command: JointCommand,
    meant: tuple[np.ndarray, np.ndarray],
    applied: tuple[np.ndarray, np.ndarray],
    q: np.ndarray,
    dq: np.ndarray,
) -> JointCommand:
    """``command``, meant for the gains ``meant`` (kp', kd'), with the feed-forward that gives the same
    torque at the state ``q``, ``dq`` under the gains ``applied`` (kp, kd) the driver uses."""
    (kp_m, kd_m), (kp_a, kd_a) = meant, applied
    extra = (kp_m - kp_a) * (command.q - q) + (kd_m - kd_a) * (command.dq - dq)
    return JointCommand(q=command.q, dq=command.dq, tau_ff=command.tau_ff + extra, stamp=command.stamp)


class SwitchBlend:
    """The decaying torque offset of the last switch and the torque steps (module docstring).

    Args:
        gains: (kp, kd) the driver applies (N m/rad, N m s/rad; configuration order).
        effort: effort limits (N m). max_step: the switch bound (fraction of the effort limits, 0-1).
    """

    def __init__(self, gains: tuple[np.ndarray, np.ndarray], effort: np.ndarray, max_step: float) -> None:
        if not 0.0 < max_step <= 1.0:
            raise ValueError(f"switch max_step {max_step} is outside (0, 1]")
        self.kp, self.kd = (np.asarray(g, dtype=float) for g in gains)
        self.effort = np.asarray(effort, dtype=float)
        self.max_step = max_step
        self.offset = np.zeros_like(self.effort)
        self.blending = False
        self._last_tau: np.ndarray | None = None
        self.switch_step = 0.0  # largest torque step (fraction of effort) since the last switch
        self.switch_step_at = 0.0  # the step at the switch tick itself

    def torque(self, command: JointCommand, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """The driver's torque for ``command`` at ``q``, ``dq`` (N m)."""
        return law_torque(command, self.kp, self.kd, self.effort, q, dq)

    def switch(self, old: JointCommand | None, new: JointCommand, q: np.ndarray, dq: np.ndarray) -> None:
        """A switch at this tick from ``old`` (the old law's command, None: the last applied torque) to the
        controller whose first command is ``new``."""
        tau_old = self.torque(old, q, dq) if old is not None else self._last_tau
        if tau_old is None:
            return
        self.offset = self.offset + tau_old - self.torque(new, q, dq)
        self.blending = bool(np.any(self.offset))
        self.switch_step = 0.0
        self.switch_step_at = -1.0  # set by the next apply()

    def apply(self, command: JointCommand, q: np.ndarray, dq: np.ndarray) -> JointCommand:
        """``command`` with the offset added (then decayed for the next tick); measures the torque step."""
        out = command
        if self.blending:
            out = JointCommand(
                q=command.q, dq=command.dq, tau_ff=command.tau_ff + self.offset, stamp=command.stamp
            )
            rate = 0.5 * self.max_step * self.effort
            self.offset = np.sign(self.offset) * np.maximum(np.abs(self.offset) - rate, 0.0)
            self.blending = bool(np.any(self.offset))
        tau = self.torque(out, q, dq)
        if self._last_tau is not None:
            step = float(np.max(np.abs(tau - self._last_tau) / self.effort))
            if self.switch_step_at < 0.0:
                self.switch_step_at = step
            self.switch_step = max(self.switch_step, step)
        self._last_tau = tau
        return out
