"""Walking references for a whole-body controller: footstep plan + contact schedule + ZMP preview, per tick.

:class:`WalkingGenerator` holds the current footstep plan's :class:`~.schedule.ContactSchedule` and the last
solve of the :class:`~.pattern_generator.ZmpPreviewQP`. The QP is re-solved at its own rate
(:meth:`WalkingGenerator.replan`, >= 50 Hz) from the measured CoM state or from its own prediction;
:meth:`WalkingGenerator.reference` is evaluated at the controller's rate (500 Hz) and gives what the
whole-body QP consumes (:class:`WalkingReference`): the CoM position, velocity and acceleration (the CoM
task, world = odom frame), each sole's pose, velocity and acceleration (the swing-foot task), and which feet
are in contact (contact constraints and friction cones of the stance feet only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.walking.footsteps import SIDES, FootstepPlan
from humanoid_control.walking.lipm import Lipm
from humanoid_control.walking.pattern_generator import PatternOutput, PreviewSettings, ZmpPreviewQP
from humanoid_control.walking.schedule import ContactSchedule
from humanoid_control.walking.swing import FootState


@dataclass(frozen=True)
class WalkingReference:
    """References at time ``t`` (s), odom frame.

    Attributes:
        com, com_velocity, com_acceleration: (3,) CoM (m, m/s, m/s^2); height constant at the LIPM height.
        zmp, zmp_reference: (2,) planned and reference ZMP (m). dcm: (2,) planned DCM (m).
        contacts: per foot, planned in contact.
        feet: per foot, the sole frame's reference (:class:`FootState`).
        swing: the swinging foot, or None.
    """

    t: float
    com: np.ndarray
    com_velocity: np.ndarray
    com_acceleration: np.ndarray
    zmp: np.ndarray
    zmp_reference: np.ndarray
    dcm: np.ndarray
    contacts: dict[str, bool]
    feet: dict[str, FootState]
    swing: str | None


class WalkingGenerator:
    """Footstep plan -> contact schedule -> ZMP preview QP -> per-tick references (module docstring)."""

    def __init__(self, config: RobotConfig, preview: PreviewSettings | None = None) -> None:
        self.spec = config.walking
        self.soles = {side: np.array(config.feet[side].polygon) for side in SIDES}
        self.lipm = Lipm(self.spec.com_height)
        self.qp = ZmpPreviewQP(self.lipm, preview)
        self.schedule: ContactSchedule | None = None
        self.last: PatternOutput | None = None

    def set_plan(self, plan: FootstepPlan, t0: float, ground_z: float = 0.0) -> ContactSchedule:
        """Follow ``plan`` from ``t0`` (s) on ground of height ``ground_z`` (m)."""
        self.schedule = ContactSchedule(
            plan, self.soles, t0, self.spec.swing_height, self.spec.zmp_margin, ground_z
        )
        return self.schedule

    def replan(self, t: float, com_state: np.ndarray | None = None) -> PatternOutput:
        """Solve the preview QP at ``t`` (s) from ``com_state`` ``(2, 3)`` (per horizontal axis
        ``[c, cdot, cddot]``, odom frame), or from the last solution's prediction at ``t`` when None. A
        failed solve is returned but does not replace the last good one."""
        if self.schedule is None:
            raise RuntimeError("set_plan() first")
        if com_state is None:
            if self.last is None:
                raise ValueError("no previous solution: give the measured CoM state")
            com_state = self.last.com_state(t)
        out = self.qp.solve(t, com_state, self.schedule)
        if out.ok:
            self.last = out
        return out

    def reference(self, t: float) -> WalkingReference:
        """The references at ``t`` (s) from the last good solve."""
        if self.schedule is None or self.last is None:
            raise RuntimeError("set_plan() and replan() first")
        s = self.last.com_state(t)
        z = self.schedule.ground_z + self.lipm.height
        com = np.array([s[0, 0], s[1, 0], z])
        vel = np.array([s[0, 1], s[1, 1], 0.0])
        acc = np.array([s[0, 2], s[1, 2], 0.0])
        phase = self.schedule.phase_at(t)
        return WalkingReference(
            t,
            com,
            vel,
            acc,
            self.lipm.zmp(s),
            self.schedule.zmp_reference(t),
            self.lipm.dcm(com[:2], vel[:2]),
            self.schedule.contacts(t),
            {side: self.schedule.foot_state(side, t) for side in SIDES},
            None if phase is None else phase.swing,
        )
