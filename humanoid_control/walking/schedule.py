"""Contact schedule of a footstep plan: which feet are down when, the support polygon and the ZMP reference.

Time ``t`` (s) is the walking controller's clock; the plan starts at ``t0``. Phases, in order:

1. double support for ``start_double_support`` (weight to the first stance foot);
2. per step: single support for ``single_support`` (the step's foot swings from where it stands to the
   step's pose, :class:`~humanoid_control.walking.swing.SwingTrajectory`; a plan's ``first_lift``: the first
   swing starts in the air, where a controller taking over mid-swing found the sole), then double support for
   ``double_support`` (weight to the next stance foot);
3. after the last step, standing on both feet for ever (the final double support of a plan shifts the
   weight to the feet's midpoint over ``start_double_support``).

Support polygon (odom frame, m): the stance sole polygon in single support, the convex hull of both in double
support, shrunk by ``zmp_margin``. ZMP reference: the stance sole polygon's centroid in single support; in
a double support it moves linearly from the centroid of the foot that carried the weight before to that of
the foot that carries it next (the feet's mid-centroid before the first and after the last step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from humanoid_control.walking.footsteps import SIDES, FootstepPlan, other_side
from humanoid_control.walking.geometry import Pose2D, polygon_centroid, support_polygon
from humanoid_control.walking.swing import FootState, SwingTrajectory


@dataclass(frozen=True)
class Phase:
    """One contact phase over ``[t_start, t_end)`` (s).

    Attributes:
        swing: the foot in the air (single support), or None (double support).
        feet: poses of the feet on the ground at the start of the phase (odom frame); in single support the
            swing foot's entry is its lift-off pose.
        zmp_from, zmp_to: ZMP reference at the start and end of the phase (m, odom frame).
        step_index: index of the plan's step this phase belongs to (the swing, or the transfer after it);
            -1 before the first step.
        swing_trajectory: the swing (single support only).
    """

    t_start: float
    t_end: float
    swing: str | None
    feet: dict[str, Pose2D]
    zmp_from: np.ndarray
    zmp_to: np.ndarray
    step_index: int
    swing_trajectory: SwingTrajectory | None = None

    @property
    def stance(self) -> tuple[str, ...]:
        """The feet in contact."""
        return SIDES if self.swing is None else (other_side(self.swing),)


class ContactSchedule:
    """The phases of a :class:`FootstepPlan` from ``t0`` (s) on flat ground of height ``ground_z`` (m)."""

    def __init__(
        self,
        plan: FootstepPlan,
        soles: dict[str, np.ndarray],
        t0: float = 0.0,
        swing_height: float = 0.06,
        zmp_margin: float = 0.0,
        ground_z: float = 0.0,
    ) -> None:
        self.plan = plan
        self.soles = {side: np.asarray(soles[side], dtype=float) for side in SIDES}
        self.t0 = t0
        self.ground_z = ground_z
        self.zmp_margin = zmp_margin
        self._centroid = {side: polygon_centroid(self.soles[side]) for side in SIDES}
        feet = dict(plan.start)
        phases: list[Phase] = []
        t = t0
        # where the weight is: both feet (their mid-centroid) at the start
        zmp = self._mid(feet)
        for i, step in enumerate(plan.steps):
            stance = other_side(step.side)
            target = self.centroid(stance, feet[stance])
            duration = plan.start_double_support if i == 0 else plan.double_support
            phases.append(Phase(t, t + duration, None, dict(feet), zmp, target, i - 1))
            t += duration
            delay = plan.cross_delays[i] if i < len(plan.cross_delays) else 0.0
            lift_z, height = ground_z, swing_height
            if i == 0 and plan.first_lift is not None:  # taken over mid-swing: from where the sole is
                lift_z, height = ground_z + plan.first_lift[0], plan.first_lift[1]
            swing = SwingTrajectory(
                feet[step.side],
                step.pose,
                t,
                plan.single_support,
                height,
                lift_z,
                ground_z,
                cross_delay=delay,
                cross_axis_yaw=feet[stance].yaw,
            )
            phases.append(Phase(t, t + plan.single_support, step.side, dict(feet), target, target, i, swing))
            t += plan.single_support
            feet[step.side] = step.pose
            zmp = target
        if plan.steps:
            end = self._mid(feet)
            phases.append(
                Phase(t, t + plan.start_double_support, None, dict(feet), zmp, end, len(plan.steps) - 1)
            )
            t += plan.start_double_support
        self.phases = phases
        self.final_feet = feet
        self.t_end = t  # standing from here on
        self._final_zmp = self._mid(feet)
        self._polygon_cache: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ geometry
    def centroid(self, side: str, pose: Pose2D) -> np.ndarray:
        """Centroid of ``side``'s sole polygon placed at ``pose`` (odom frame, m)."""
        return pose.apply(self._centroid[side][None, :])[0]

    def _mid(self, feet: dict[str, Pose2D]) -> np.ndarray:
        return 0.5 * (self.centroid("left", feet["left"]) + self.centroid("right", feet["right"]))

    # ------------------------------------------------------------------ queries
    def phase_index(self, t: float) -> int:
        """Index of the phase at ``t``; -1 before ``t0`` is treated as the first, ``len(phases)`` after the
        end (standing)."""
        if not self.phases or t >= self.t_end:
            return len(self.phases)
        lo, hi = 0, len(self.phases) - 1
        while lo < hi:  # last phase with t_start <= t
            mid = (lo + hi + 1) // 2
            if self.phases[mid].t_start <= t:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def phase_at(self, t: float) -> Phase | None:
        """The phase at ``t`` (s), or None once the plan is over (standing on :attr:`final_feet`)."""
        i = self.phase_index(t)
        return self.phases[i] if i < len(self.phases) else None

    def contacts(self, t: float) -> dict[str, bool]:
        """Per foot, whether it is (planned to be) in contact at ``t``."""
        phase = self.phase_at(t)
        return {side: phase is None or phase.swing != side for side in SIDES}

    def zmp_reference(self, t: float) -> np.ndarray:
        """Planned ZMP at ``t`` (odom frame, m)."""
        phase = self.phase_at(t)
        if phase is None:
            return self._final_zmp.copy()
        a = min(max((t - phase.t_start) / (phase.t_end - phase.t_start), 0.0), 1.0)
        return (1.0 - a) * phase.zmp_from + a * phase.zmp_to

    def support_polygon(self, t: float) -> np.ndarray:
        """Support polygon at ``t`` (odom frame, m; CCW), shrunk by ``zmp_margin``."""
        return self.phase_polygon(self.phase_index(t))

    def phase_polygon(self, i: int) -> np.ndarray:
        """Support polygon of phase ``i`` (``len(phases)``: standing after the plan), as
        :meth:`support_polygon`."""
        poly = self._polygon_cache.get(i)
        if poly is None:
            phase = self.phases[i] if i < len(self.phases) else None
            feet = self.final_feet if phase is None else phase.feet
            stance = SIDES if phase is None else phase.stance
            poly = support_polygon([feet[s].apply(self.soles[s]) for s in stance], self.zmp_margin)
            self._polygon_cache[i] = poly
        return poly

    def foot_state(self, side: str, t: float) -> FootState:
        """Reference of ``side``'s sole frame at ``t`` (odom frame)."""
        phase = self.phase_at(t)
        if phase is None:
            return FootState.still(self.final_feet[side], self.ground_z)
        if phase.swing == side and phase.swing_trajectory is not None:
            return phase.swing_trajectory.state(t)
        # on the ground: where it stands in this phase
        return FootState.still(phase.feet[side], self.ground_z)
