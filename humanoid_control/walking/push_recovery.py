"""Push recovery and touchdown adjustment of the walking controller: capture steps, crossing steps, the
weight transfer after a pushed touchdown, and the swing foot's touchdown moved by the DCM error.

:class:`PushRecoveryMixin` holds these methods of
:class:`~humanoid_control.walking.controller.WalkingController` (its only user, which owns the state they
read and write: settings, planners, step adjusters, push flags; declared below for type checkers). What they
do is described in the module docstring of :mod:`humanoid_control.walking.controller` ("Foot placement
feedback", "Pushes"):

- standing, a DCM beyond the feet's support polygon starts a capture step (``_maybe_recovery_step``,
  ``_capture_step``), or a crossing step when it is beyond the loaded sole's outer edge (``_crossing_step``);
- after a pushed touchdown while walking, the weight transfer may last longer (``_pushed_transfer``);
- in a swing, the touchdown moves by the DCM error predicted at touchdown, re-targeted from the DCM in a
  capture step (``_adjust_swing``), blended into the swing trajectory;
- another controller hands the robot over in any phase (:meth:`PushRecoveryMixin.take_over`): both feet down,
  the next tick stands or steps as after a push while standing; a foot in the air, a capture step with that
  foot at once, its swing starting where the sole is.

Frames and units: odom frame, horizontal positions (m), yaw (rad), times (s), DCM ``xi`` (m).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from humanoid_control.walking.controller_types import WalkingSettings, WalkingStatus, WalkMode
from humanoid_control.walking.footsteps import (
    SIDES,
    Footstep,
    FootstepPlan,
    FootstepPlanner,
    other_side,
    side_sign,
)
from humanoid_control.walking.generator import WalkingReference
from humanoid_control.walking.geometry import Pose2D, distance_outside
from humanoid_control.walking.step_adjustment import DcmStepAdjuster, StepAdjustment
from humanoid_control.walking.swing import _blend
from humanoid_control.wbc.balance import _clamp, _edge_lines, _offset


class PushRecoveryMixin:
    """Capture steps, crossing steps and the touchdown adjustment of
    :class:`~humanoid_control.walking.controller.WalkingController` (module docstring)."""

    # state of the controller these methods use (set in ``WalkingController.__init__``)
    settings: WalkingSettings
    planner: FootstepPlanner
    walk_adjust_planner: FootstepPlanner
    push_adjust_planner: FootstepPlanner
    adjuster: DcmStepAdjuster
    swing_adjuster: DcmStepAdjuster
    exit_adjuster: DcmStepAdjuster
    mode: WalkMode
    t: float
    status: WalkingStatus
    recoveries: list[tuple[float, str, StepAdjustment]]
    crossings: list[tuple[float, str, Footstep]]
    pushed_swings: int
    _recovering: bool
    _stand_capture: bool
    _crossing: bool
    _pushed_until: float
    _swing_offset: np.ndarray

    if TYPE_CHECKING:  # methods of the controller these methods call and state they read
        qp: Any
        commands: Any
        generator: Any
        _ground_z: float
        _held: bool

        def hold_still(self) -> None: ...

        def _measured_feet(self) -> dict[str, Pose2D]: ...

        def _support(self, contacts: dict[str, bool]) -> list[tuple[float, float]]: ...

        def _set_plan(
            self, plan: FootstepPlan, t0: float, measured: bool = False, shift: np.ndarray | None = None
        ) -> bool: ...

    def take_over(
        self, q: np.ndarray, v: np.ndarray, contacts: dict[str, bool], lift_min: float = 0.015
    ) -> str:
        """Seed the controller from the measured pinocchio state ``q`` (nq,), ``v`` (nv,) when it takes the
        robot over from another controller in any gait phase; ``contacts``: per foot, whether it is on the
        ground (the state estimator's contacts). Any plan and push state are dropped (as a new controller
        starts). Both feet down (or a foot less than ``lift_min`` m above the lower one): nothing planned
        here; the next :meth:`step` stands, or takes a capture or crossing step for a DCM beyond the feet.
        One foot in the air: a capture step with it from this tick on (no weight transfer), its swing from
        where the sole is (``FootstepPlan.first_lift``), over ``takeover_swing`` s, the touchdown placed
        by the DCM step adjuster and re-targeted every tick as any capture step's.

        Returns what was planned: ``stand`` or ``capture_<side>``.
        """
        self.hold_still()
        self._held = False  # unlike a ramp, this very tick is the controller's
        self.commands.reset()
        qp = self.qp
        qp.update_dynamics(q, v)
        dyn = qp.dyn
        z = {side: float(dyn.frames[side].position[2]) for side in SIDES}
        down = [side for side in SIDES if contacts.get(side, True)] or [min(SIDES, key=z.__getitem__)]
        ground = min(z[side] for side in down)
        self._ground_z = ground
        up = [side for side in SIDES if side not in down and z[side] - ground >= lift_min]
        if not up:
            return "stand"
        side = up[0]
        lift = z[side] - ground
        s, sp = self.settings, self.planner.spec
        c, cd = dyn.com, dyn.com_velocity
        omega = math.sqrt(dyn.gravity / max(float(c[2]) - ground, 0.05))
        xi = c[:2] + cd[:2] / omega
        feet = self._measured_feet()
        stance = Footstep(other_side(side), feet[other_side(side)])
        swing = s.takeover_swing
        adj = self.swing_adjuster.adjust(
            stance,
            Footstep(side, feet[side]),
            xi,
            swing,
            stance_zmp=self._zmp_toward(stance, xi),
            offset=s.recovery_offset * (stance.pose.position - feet[side].position),
        )
        if adj.status.ok:
            step, limited = adj.step, adj.limited
        else:  # no step found: put the foot down within the step limits
            step, limited = self.recovery_planner.project(stance, Footstep(side, feet[side]))
        apex = min(0.5 * sp.swing_height, lift)
        plan = FootstepPlan(
            feet, [step], swing, sp.double_support, 0.0, projected=[limited], first_lift=(lift, apex)
        )
        if not self._set_plan(plan, self.t, measured=True):
            return "stand"
        if adj.status.ok:
            self.recoveries.append((self.t, side, adj))
        self._recovering = True
        self.mode = WalkMode.WALK
        return f"capture_{side}"

    def _maybe_recovery_step(self, xi: np.ndarray) -> None:
        """Standing: a DCM beyond the feet's support polygon by ``recovery_threshold`` starts a capture step
        with the foot on its side, placed by the DCM step adjuster (module docstring)."""
        pts = self._support({side: True for side in SIDES})
        poly = np.array(pts)
        outside = distance_outside(xi, poly)
        if outside < self.settings.recovery_threshold:
            return
        self._capture_step(xi, SIDES)

    def _capture_step(self, xi: np.ndarray, sides: tuple[str, ...]) -> bool:
        """Plan a capture step with the best of ``sides`` for the DCM ``xi`` (m, odom frame) and follow it
        (mode walk, ``_recovering``); False when no step was found or its preview failed."""
        feet = self._measured_feet()
        sp = self.planner.spec
        transfer = self.settings.recovery_transfer
        # either foot may step: the capture step that keeps the DCM best (captured, off the limits, nearest
        # the offset asked for) wins
        best: tuple[tuple[bool, bool, float], str, StepAdjustment] | None = None
        for side in sides:
            stance = Footstep(other_side(side), feet[other_side(side)])
            cand = self.adjuster.adjust(
                stance,
                Footstep(side, feet[side]),
                xi,
                transfer + sp.single_support,
                stance_zmp=self._zmp_toward(stance, xi),
                offset=self.settings.recovery_offset * (stance.pose.position - feet[side].position),
            )
            if not cand.status.ok:
                continue
            want = 0.5 * (stance.pose.position - cand.step.pose.position)
            score = (not cand.captured, cand.limited, float(np.hypot(*(cand.dcm_offset - want))))
            if best is None or score < best[0]:
                best = (score, side, cand)
        standing = len(sides) == 2
        if standing and self.settings.crossing_steps and self._crossing_step(xi, feet):
            return True
        if best is None:
            return False
        _, side, adj = best
        swing = min(max(adj.touchdown_in - transfer, self.settings.recovery_min_swing), sp.single_support)
        plan = FootstepPlan(feet, [adj.step], swing, sp.double_support, transfer, projected=[adj.limited])
        if not self._set_plan(plan, self.t):
            return False
        self.recoveries.append((self.t, side, adj))
        self._recovering = True
        self._stand_capture = standing
        self.mode = WalkMode.WALK
        return True

    def _crossing_step(self, xi: np.ndarray, feet: dict[str, Pose2D]) -> bool:
        """Standing: a DCM ``xi`` (m, odom frame) beyond the loaded foot's outer sole edge by
        ``crossing_threshold`` (where, by the LIPM, no uncrossed step captures it: docs/walking.md) makes
        the other foot cross over (``crossing_step``) and the loaded one step out after it (settings); it
        takes precedence over the uncrossed capture steps. False when the DCM is not there or the preview
        failed."""
        s = self.settings
        frame = self.planner.walking_frame(feet)
        local = frame.relative(Pose2D(float(xi[0]), float(xi[1]), 0.0))
        loaded = "left" if local.y > 0.0 else "right"
        sign = side_sign(loaded)
        stance = feet[loaded]
        rel = stance.relative(Pose2D(float(xi[0]), float(xi[1]), 0.0))
        outer = float(np.max(sign * self.planner.soles[loaded][:, 1]))
        if sign * rel.y - outer < s.crossing_threshold:
            return False
        swing_side = other_side(loaded)
        fx, fy, fyaw = s.crossing_step
        cross = Footstep(swing_side, stance.compose(Pose2D(fx, sign * fy, -sign * fyaw)))
        if float(np.hypot(*(cross.pose.position - feet[swing_side].position))) > s.crossing_max_travel:
            return False
        out = cross.pose.compose(Pose2D(0.0, sign * s.crossing_exit_width, 0.0))
        exit_step = Footstep(loaded, Pose2D(out.x, out.y, stance.yaw))
        plan = FootstepPlan(
            feet,
            [cross, exit_step],
            s.crossing_swing,
            s.recovery_transfer,
            s.recovery_transfer,
            projected=[False, False],
            cross_delays=[s.crossing_delay, 0.0],
        )
        if not self._set_plan(plan, self.t, measured=True):
            return False
        self.crossings.append((self.t, swing_side, cross))
        self._recovering = True
        self._crossing = True
        self.mode = WalkMode.WALK
        return True

    def _zmp_toward(self, stance: Footstep, xi: np.ndarray) -> np.ndarray:
        """Where the DCM law puts the ZMP in single support on ``stance``: the point of its sole polygon
        (shrunk by ``cop_margin``) nearest the DCM ``xi`` (odom frame, m)."""
        poly = stance.pose.apply(self.planner.soles[stance.side]).tolist()
        inner = _offset(poly, _edge_lines(poly), -self.settings.cop_margin)
        return np.array(_clamp(float(xi[0]), float(xi[1]), inner))

    def _pushed_transfer(
        self, xi: np.ndarray, feet: dict[str, Pose2D], landed: str, target: np.ndarray, omega: float
    ) -> float:
        """The weight transfer (s) after a pushed touchdown of ``landed``: the plan's double support,
        longer when the DCM ``xi`` (m, odom frame) has been pushed toward the former stance foot: the ZMP
        stays under that foot (its sole's far edge, less ``cop_margin``) until the DCM, running away from
        it, reaches ``target`` (the plan's DCM at the end of the transfer), at most
        ``walk_transfer_extension`` longer."""
        ds = self.planner.spec.double_support
        s = self.settings
        if s.walk_transfer_extension <= 0.0:
            return ds
        old = feet[other_side(landed)]
        n = old.position - feet[landed].position
        dist = float(np.hypot(*n))
        if dist < 1e-6:
            return ds
        n = n / dist
        corners = old.apply(self.planner.soles[other_side(landed)])
        p = float(np.max(corners @ n)) - s.cop_margin
        a = float(xi @ n) - p
        b = float(target @ n) - p
        if not (a < 0.0 and b < a):
            return ds
        extra = math.log(b / a) / omega
        return ds + min(max(extra, 0.0), s.walk_transfer_extension)

    def _adjust_swing(self, ref: WalkingReference, phase, xi: np.ndarray, omega: float) -> WalkingReference:  # type: ignore[no-untyped-def]
        """Move the swing foot's touchdown by the DCM error predicted at touchdown (module docstring)."""
        traj = phase.swing_trajectory
        side = phase.swing
        s_now = traj.phase(self.t)
        if self._crossing and traj.cross_delay > 0.0:  # the crossing step lands where planned
            return ref
        if self._recovering and s_now < self.settings.adjust_window[1]:
            stance = other_side(side)
            remaining = max(traj.t0 + traj.duration - self.t, 0.0)
            stance_foot = Footstep(stance, phase.feet[stance])
            adjuster = self.exit_adjuster if self._crossing else self.swing_adjuster
            adj = adjuster.adjust(
                stance_foot,
                Footstep(side, traj.end),
                xi,
                remaining,
                stance_zmp=self._zmp_toward(stance_foot, xi),
                offset=self.settings.recovery_offset * (stance_foot.pose.position - traj.end.position),
            )
            if adj.status.ok:
                self._swing_offset[:] = (adj.step.pose.x - traj.end.x, adj.step.pose.y - traj.end.y)
        elif s_now < self.settings.adjust_window[1]:
            err = (xi - ref.dcm) * math.exp(omega * max(traj.t0 + traj.duration - self.t, 0.0))
            t_down = traj.t0 + traj.duration
            if (
                s_now >= self.settings.adjust_window[0]
                and float(np.hypot(*err)) > self.settings.walk_push_error
            ):
                if self._pushed_until < t_down:
                    self.pushed_swings += 1
                self._pushed_until = max(self._pushed_until, t_down)
            # per axis of the stance sole (forward, lateral): gain, then a dead band - errors the ankle
            # strategy absorbs at the next stance do not move the foot
            yaw = phase.feet[other_side(side)].yaw
            c, sn = math.cos(yaw), math.sin(yaw)
            local = np.array([c * err[0] + sn * err[1], -sn * err[0] + c * err[1]])
            local *= np.array(self.settings.adjust_gain)
            tol = np.array(self.settings.capture_tolerance)
            local = np.sign(local) * np.maximum(np.abs(local) - tol, 0.0)
            err = np.array([c * local[0] - sn * local[1], sn * local[0] + c * local[1]])
            if s_now < self.settings.adjust_window[0]:
                err = err * 0.0
            target = Pose2D(traj.end.x + float(err[0]), traj.end.y + float(err[1]), traj.end.yaw)
            stance = other_side(side)
            planner = self.walk_adjust_planner if self.settings.adjust_recovery_reach else self.planner
            if self.t < self._pushed_until:  # pushed: the swing sole may land closer to the stance sole
                planner = self.push_adjust_planner
            step, _ = planner.project(Footstep(stance, phase.feet[stance]), Footstep(side, target))
            new = np.array([step.pose.x - traj.end.x, step.pose.y - traj.end.y])
            if float(np.hypot(*(new - self._swing_offset))) > 1e-3:
                self._swing_offset[:] = new
                self.status.adjusted_steps += 1
        off = self._swing_offset
        if not off.any():
            return ref
        b, db, ddb = _blend(s_now)
        fs = ref.feet[side]
        d = np.array([off[0], off[1], 0.0])
        inv = 1.0 / traj.duration
        moved = replace(
            fs,
            position=fs.position + b * d,
            velocity=fs.velocity + db * inv * d,
            acceleration=fs.acceleration + ddb * inv * inv * d,
        )
        feet = dict(ref.feet)
        feet[side] = moved
        return replace(ref, feet=feet)
