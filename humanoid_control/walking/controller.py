"""Walking whole-body controller: velocity command -> footsteps -> ZMP preview -> whole-body QP, per tick.

No ROS. One :meth:`WalkingController.step` per control tick (``CommandSettings.dt``, 2 ms) from the
pinocchio state ``(q, v)`` (base pose in the odom frame; see :mod:`humanoid_control.wbc.dynamics`), a
:class:`~humanoid_control.wbc.command.JointCommand` out; :meth:`WalkingController.set_command` takes the
walking frame's twist (``vx``, ``vy`` m/s, ``wz`` rad/s, as ``/cmd_vel``).

Modes (:class:`WalkMode`):

- ``stand``: both feet down, DCM regulation to the middle of the feet (as
  :class:`~humanoid_control.wbc.balance.StandingBalance`), the ankle strategy only;
- ``walk``: a footstep plan (``n_steps`` ahead) from the feet and the command, re-planned at every touchdown
  with the latest command (the steps already taken stay); the ZMP preview QP re-solved every
  ``replan_period`` from its own prediction; per tick the planned contacts switch the QP's contact rows,
  the swing sole follows its trajectory (pose, velocity and acceleration feed-forward) and the CoM follows
  the plan through a DCM law on the ZMP (below). A zero or stale command plans the step that brings the
  feet together, and the controller stands once the plan has ended.

DCM tracking (horizontal, odom frame): with the plan's CoM ``c_r``, velocity ``cd_r`` and acceleration
``cdd_r`` (LIPM, ``omega = sqrt(g / z_c)``), ``xi_r = c_r + cd_r / omega`` and
``p_r = c_r - cdd_r / omega^2``; the ZMP ``p = p_r + (1 + k / omega) (xi - xi_r)`` (``k / omega`` =
``dcm_gain``) clamped into the support polygon of the feet in contact shrunk by ``cop_margin`` gives
``cdd = omega^2 (c - p)``. Height: PD to the plan's CoM height.

Foot placement feedback: in single support (within ``adjust_window`` of the swing phase) the DCM error is
predicted at touchdown, ``(xi - xi_r) e^(omega t_left)``, and the swing foot's touchdown moves by it (less a
``capture_tolerance`` dead band, projected onto the step limits); the move is blended into the swing
trajectory with the same quintic, velocity and acceleration included. At each touchdown the next steps are
planned from the *measured* feet (the walking frame anchored on the foot that landed) and the ZMP preview
is re-solved from the measured CoM position and velocity.

Pushes: standing, a DCM beyond the feet's support polygon starts a capture step (``recovery_steps``, the
foot and its touchdown from :class:`~humanoid_control.walking.step_adjustment.DcmStepAdjuster`, re-targeted
every tick of the swing); standing and in a capture step the hip strategy lets the CMP leave the support
polygon by ``cmp_margin``, the difference made by a rate of centroidal angular momentum. Walking, at a
touchdown a DCM more than ``walk_recovery_threshold`` from the plan's interrupts the walk: a capture step
with the next foot (or standing), and the walk goes on once the DCM has settled between the feet
(``walk_start_radius``, ``walk_start_speed``). A smaller error (over ``walk_measured_replan_error``)
keeps walking: the preview is re-solved from its own prediction moved with the landed foot (not from the
measured CoM, which would plan the fall and hide the error from the next touchdown's adjustment), and a
DCM pushed toward the former stance foot gets a longer weight transfer (``walk_transfer_extension``): the
ZMP held under that foot brings the DCM back before the next swing, whose foot cannot cross to catch it.
In a swing whose predicted touchdown DCM error exceeds ``walk_push_error`` (pushed) the swing sole may land
as close as ``walk_push_width_min`` to the stance sole, and the hip strategy (``walk_push_cmp_margin``) is
on until the end of the weight transfer that follows.

Not yet: swing timing adaptation while walking (an earlier or later touchdown), yaw momentum.

The modes, settings and status are in :mod:`humanoid_control.walking.controller_types` (re-exported here);
the capture and crossing steps and the touchdown adjustment (:class:`PushRecoveryMixin`, a base of
:class:`WalkingController`) in :mod:`humanoid_control.walking.push_recovery`.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pinocchio as pin

from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import PinocchioRobotModel, load_pinocchio_model
from humanoid_control.walking.controller_types import (
    WalkingSettings,
    WalkingStatus,
    WalkMode,
    tuned_settings,
)
from humanoid_control.walking.footsteps import (
    SIDES,
    Footstep,
    FootstepPlan,
    FootstepPlanner,
    VelocityCommand,
    other_side,
)
from humanoid_control.walking.generator import WalkingGenerator, WalkingReference
from humanoid_control.walking.geometry import Pose2D
from humanoid_control.walking.push_recovery import PushRecoveryMixin
from humanoid_control.walking.step_adjustment import DcmStepAdjuster, StepAdjustment, StepAdjustmentSettings
from humanoid_control.wbc.balance import _clamp, _edge_lines, _hull, _offset
from humanoid_control.wbc.command import CommandGenerator, CommandSettings, JointCommand
from humanoid_control.wbc.qp import WbcOutput, WbcSettings, WholeBodyQP
from humanoid_control.wbc.solver import QpSolver


def _ray_clamp(
    origin: np.ndarray, direction: np.ndarray, poly: list[tuple[float, float]], fallback: tuple[float, float]
) -> tuple[float, float]:
    """The point ``origin + lam direction`` with the largest ``lam`` in ``[0, 1]`` inside the convex CCW
    polygon; ``fallback`` when ``origin`` is outside it. Standing, a ZMP chosen so moves the DCM straight
    back towards its reference instead of sideways along the polygon's edge (as the nearest point would)."""
    lam = 1.0
    ox, oy = float(origin[0]), float(origin[1])
    dx, dy = float(direction[0]), float(direction[1])
    for nx, ny, d in _edge_lines([list(v) for v in poly]):
        slack = d - (nx * ox + ny * oy)
        if slack < 0.0:
            return fallback
        rate = nx * dx + ny * dy
        if rate > 1e-12:
            lam = min(lam, slack / rate)
    return ox + lam * dx, oy + lam * dy


def _yaw_of(rotation: np.ndarray) -> float:
    return math.atan2(float(rotation[1, 0]), float(rotation[0, 0]))


def _rz(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class WalkingController(PushRecoveryMixin):
    """See the module docstring. Same ``step(q, v) -> JointCommand`` interface as
    :class:`~humanoid_control.wbc.controller.StandingController`."""

    def __init__(
        self,
        config: RobotConfig,
        pmodel: PinocchioRobotModel | None = None,
        wbc: WbcSettings | None = None,
        settings: WalkingSettings | None = None,
        command: CommandSettings | None = None,
        solver: QpSolver | None = None,
    ) -> None:
        if config.walking is None:
            raise ValueError(f"{config.name}: no `walking` section in the robot configuration")
        self.config = config
        # the robot's tuning (its configuration's walking.controller) over the defaults or the given settings
        self.settings = s = tuned_settings(settings or WalkingSettings(), config.walking.controller)
        self.pmodel = pmodel or load_pinocchio_model(config)
        wbc = wbc or WbcSettings()
        if wbc.friction is None:
            wbc = replace(wbc, friction=s.friction)
        self.qp = WholeBodyQP(config, self.pmodel, wbc, solver)
        self.commands = CommandGenerator(config, command)
        self.dt = self.commands.settings.dt
        self.planner = FootstepPlanner.from_config(config)
        self.generator = WalkingGenerator(config)
        self._replan_every = max(1, round(s.replan_period / self.dt))
        self._soles = {side: [(float(x), float(y)) for x, y in config.feet[side].polygon] for side in SIDES}
        self.mode = WalkMode.STAND
        self.t = 0.0
        self._tick = 0
        self.command = VelocityCommand()
        self._command_t = -math.inf
        self.status = WalkingStatus()
        self.last_output: WbcOutput | None = None
        self.qp_tick_s = 0.0
        self.contacts = {side: True for side in SIDES}
        self._held = False  # this tick: no step (hold_still)
        self._swing_offset = np.zeros(2)  # (m, odom frame) touchdown moved by the step adjustment
        self._step_index = -1  # index in the current plan of the last step that started its swing
        self._ground_z = 0.0
        self._stand_ref: np.ndarray | None = None  # (3,) CoM to stand over
        rs = replace(
            self.planner.spec,
            step_forward=max(s.recovery_reach[0], self.planner.spec.step_forward),
            step_backward=max(s.recovery_reach[1], self.planner.spec.step_backward),
            step_width_max=max(s.recovery_reach[2], self.planner.spec.step_width_max),
        )
        self.recovery_planner = FootstepPlanner(rs, self.planner.soles)
        reach = s.walk_adjust_reach or s.recovery_reach
        self.walk_adjust_planner = FootstepPlanner(
            replace(
                rs,
                step_forward=max(reach[0], self.planner.spec.step_forward),
                step_backward=max(reach[1], self.planner.spec.step_backward),
                step_width_max=max(reach[2], self.planner.spec.step_width_max),
            ),
            self.planner.soles,
        )
        self.push_adjust_planner = FootstepPlanner(
            replace(self.walk_adjust_planner.spec, step_width_min=s.walk_push_width_min), self.planner.soles
        )
        self.adjuster = DcmStepAdjuster(
            self.recovery_planner,
            self.generator.lipm,
            StepAdjustmentSettings(min_remaining=s.recovery_transfer + s.recovery_min_swing),
        )
        self.swing_adjuster = DcmStepAdjuster(
            self.recovery_planner, self.generator.lipm, StepAdjustmentSettings(adapt_timing=False)
        )
        exit_spec = replace(rs, step_width_max=max(s.crossing_exit_reach, rs.step_width_max))
        self.exit_adjuster = DcmStepAdjuster(
            FootstepPlanner(exit_spec, self.planner.soles),
            self.generator.lipm,
            StepAdjustmentSettings(adapt_timing=False),
        )
        self._recovering = False  # the plan is a capture step: its touchdown follows the measured DCM
        self._stand_capture = False  # the plan is a capture step taken standing
        self._crossing = False  # the plan is a crossing step (kept where planned) and the step out after it
        self.crossings: list[tuple[float, str, Footstep]] = []  # (t, crossing foot, its step)
        self._pushed_until = -math.inf  # (s) pushed while walking: the narrower touchdown, the hip strategy
        self.pushed_swings = 0  # swings in which the predicted touchdown error exceeded walk_push_error
        self.recoveries: list[tuple[float, str, StepAdjustment]] = []  # (t, side, capture step)
        self.walk_interruptions: list[tuple[float, float]] = []  # (t, DCM error m): walks ended by a push
        self.touchdown_errors: list[
            tuple[float, float]
        ] = []  # (t, DCM error from the plan's at touchdown, m)
        self.pattern_failures = 0  # ZMP preview solves that failed (the last good one kept)
        self.last_pattern_failure = ""
        self.plans: list[tuple[float, FootstepPlan]] = []  # (start time, plan), for plots
        self.touchdowns: list[tuple[float, str, np.ndarray]] = []  # (t, side, measured sole [x, y, yaw])

    # ------------------------------------------------------------------ inputs
    def set_command(self, vx: float, vy: float, wz: float) -> bool:
        """The walking frame's twist (m/s, m/s, rad/s); returns whether it was clipped to the limits.

        Raises ``ValueError`` (and keeps the previous command) when a value is not finite.
        """
        cmd = VelocityCommand(float(vx), float(vy), float(wz))
        if not all(math.isfinite(x) for x in (cmd.vx, cmd.vy, cmd.wz)):
            raise ValueError(f"non-finite velocity command {cmd}")
        clipped_cmd, clipped = self.planner.clip_command(cmd)
        self.command = clipped_cmd
        self._command_t = self.t
        self.status.command_clipped = clipped
        return clipped

    def stand_now(self) -> None:
        """Drop the walk at once (the driver reset or respawned the robot): stand on the feet as they are."""
        self.mode = WalkMode.STAND
        self._recovering = False
        self._swing_offset[:] = 0.0
        self.command = VelocityCommand()

    @property
    def recovering(self) -> bool:
        """The plan followed is a capture step or a crossing step (and the step out after it)."""
        return self._recovering

    def hold_still(self) -> None:
        """The driver is ramping the robot to its default pose (after a reset or a respawn) and ignores this
        controller's commands: drop any plan and any push state as a new controller would start, and take
        no step in the next :meth:`step` (its answer only keeps the QP warm). Called before each such tick,
        so that what the controller does once the driver hands over does not depend on what it did before
        the respawn (a walk, a capture step in flight)."""
        self.stand_now()
        self._crossing = self._stand_capture = False
        self._pushed_until = -math.inf
        self._step_index = -1
        self.generator.schedule = None
        self.generator.last = None
        self._held = True

    def active_command(self) -> VelocityCommand:
        """The command in force now: zero once it is older than ``stale_command_s``."""
        if self.t - self._command_t > self.settings.stale_command_s:
            return VelocityCommand()
        return self.command

    # ------------------------------------------------------------------ geometry helpers
    def _measured_feet(self) -> dict[str, Pose2D]:
        dyn = self.qp.dyn
        feet = {}
        for side in SIDES:
            f = dyn.frames[side]
            feet[side] = Pose2D(float(f.position[0]), float(f.position[1]), _yaw_of(f.rotation))
        return feet

    def _support(self, contacts: dict[str, bool]) -> list[tuple[float, float]]:
        dyn = self.qp.dyn
        corners: list[list[float]] = []
        for side in SIDES:
            if not contacts[side]:
                continue
            f = dyn.frames[side]
            (r00, r01, _), (r10, r11, _), _ = f.rotation.tolist()
            px, py = float(f.position[0]), float(f.position[1])
            corners.extend([px + r00 * x + r01 * y, py + r10 * x + r11 * y] for x, y in self._soles[side])
        return _hull(corners)

    # ------------------------------------------------------------------ planning
    def _start_walking(self, feet: dict[str, Pose2D], first_side: str | None = None) -> None:
        cmd = self.active_command()
        plan = self.planner.plan_velocity(feet, cmd, self.settings.n_steps, first_side)
        if not self.planner.is_nominal(self.planner.walking_frame(feet), feet, 0.05):
            # from a stance left by a capture step: a longer first weight transfer
            plan = replace(plan, start_double_support=self.settings.wide_start_transfer)
        if self._set_plan(plan, self.t):
            self.mode = WalkMode.WALK

    def _set_plan(
        self, plan: FootstepPlan, t0: float, measured: bool = False, shift: np.ndarray | None = None
    ) -> bool:
        """Follow ``plan`` from ``t0`` (s): the ZMP preview re-solved on it from the measured CoM (starting,
        ``measured``) or from the last plan's prediction, moved by ``shift`` (m, odom frame, horizontal)
        when given. False when that solve failed (counted): the caller keeps standing, or walks on the last
        good preview until the next re-solve."""
        gen = self.generator
        prev = gen.last
        predicted = None if prev is None else prev.com_state(self.t)
        gen.set_plan(plan, t0, self._ground_z)
        self.plans.append((t0, plan))
        self._recovering = False
        self._crossing = False
        self._stand_capture = False
        self._step_index = -1
        dyn = self.qp.dyn
        if predicted is None or self.mode == WalkMode.STAND or measured:
            c, cd = dyn.com, dyn.com_velocity
            acc = (0.0, 0.0) if predicted is None or self.mode == WalkMode.STAND else predicted[:, 2]
            state = np.array([[c[0], cd[0], acc[0]], [c[1], cd[1], acc[1]]])
            out = gen.replan(self.t, state)
        elif shift is not None:
            state = np.array(predicted, dtype=float)
            state[:, 0] += shift
            out = gen.replan(self.t, state)
        else:
            out = gen.replan(self.t)
        if not out.ok:
            self.pattern_failures += 1
            self.last_pattern_failure = out.status.value
        return out.ok and gen.last is not None

    def _replan_steps(
        self,
        phase_end_feet: dict[str, Pose2D],
        next_side: str,
        t0: float,
        measured: bool = False,
        shift: np.ndarray | None = None,
        transfer: float | None = None,
    ) -> None:
        """At a touchdown: plan the steps after it with the latest command, from ``t0`` (s), the first
        weight transfer ``transfer`` (s; default the plan's double support); the preview from the measured
        CoM (``measured``) or from its prediction moved by ``shift`` (m)."""
        cmd = self.active_command()
        sp = self.planner.spec
        if cmd.is_zero():
            plan = self.planner.plan_stop(phase_end_feet, next_side)
        else:
            plan = self.planner.plan_velocity(
                phase_end_feet, cmd, self.settings.n_steps, next_side, anchor=other_side(next_side)
            )
        plan = replace(plan, start_double_support=sp.double_support if transfer is None else transfer)
        self._set_plan(plan, t0, measured, shift)

    # ------------------------------------------------------------------ per tick
    def step(self, q: np.ndarray, v: np.ndarray) -> JointCommand:
        """One tick from the pinocchio state ``q`` (nq,), ``v`` (nv,)."""
        qp, s = self.qp, self.settings
        t0 = time.perf_counter()
        qp.update_dynamics(q, v)
        dynamics_s = time.perf_counter() - t0
        dyn = qp.dyn
        if self.mode == WalkMode.STAND:  # both feet down: the ground's height under them
            self._ground_z = float(np.mean([dyn.frames[side].position[2] for side in SIDES]))
        c, cd = dyn.com, dyn.com_velocity
        height = max(float(c[2]) - self._ground_z, 0.05)
        omega = math.sqrt(dyn.gravity / height)
        xi = c[:2] + cd[:2] / omega
        held, self._held = self._held, False
        if self.mode == WalkMode.STAND and not held:
            if not self.active_command().is_zero() and self._settled(xi):
                self._start_walking(self._measured_feet())
            elif s.recovery_steps:
                self._maybe_recovery_step(xi)
        ref: WalkingReference | None = None
        if self.mode == WalkMode.WALK:
            ref = self._walk_tick(xi, omega)
        contacts = {side: True for side in SIDES} if ref is None else ref.contacts
        for side in SIDES:
            if contacts[side] != self.contacts[side]:
                qp.set_contact(side, contacts[side])
        self.contacts = dict(contacts)
        # ---- CoM: DCM law
        if ref is None:
            feet = self._measured_feet()
            c_r = self._stand_reference(feet)
            cd_r = np.zeros(3)
            cdd_r = np.zeros(3)
            gain = s.stand_dcm_gain
            yaw = 0.5 * (feet["left"].yaw + feet["right"].yaw)
            if abs(feet["left"].yaw - feet["right"].yaw) > math.pi:
                yaw += math.pi
        else:
            c_r, cd_r, cdd_r = ref.com, ref.com_velocity, ref.com_acceleration
            gain = s.dcm_gain
            yl, yr = ref.feet["left"].yaw, ref.feet["right"].yaw
            yaw = math.atan2(math.sin(yl) + math.sin(yr), math.cos(yl) + math.cos(yr))
        xi_r = c_r[:2] + cd_r[:2] / omega
        p_r = c_r[:2] - cdd_r[:2] / (omega * omega)
        p = p_r + (1.0 + gain) * (xi - xi_r)
        pts = self._support(contacts)
        margin = s.cmp_margin if ref is None or self._recovering else s.walk_cmp_margin
        if ref is not None and not self._recovering and self.t < self._pushed_until:
            margin = max(margin, s.walk_push_cmp_margin)
        if len(pts) >= 3:
            lines = _edge_lines(pts)
            inner = _offset(pts, lines, -s.cop_margin)
            px, py = _clamp(float(p[0]), float(p[1]), inner)
            if ref is None:  # standing: keep the ZMP on the ray from the DCM away from its reference
                px, py = _ray_clamp(xi, p - xi, inner, (px, py))
            mx, my = px, py
            if margin > 0.0:  # hip strategy: the CMP beyond the CoP, by a moment about the CoM
                outer = _offset(pts, lines, margin)
                mx, my = _clamp(float(p[0]), float(p[1]), outer)
                if ref is None:
                    mx, my = _ray_clamp(xi, p - xi, outer, (mx, my))
        else:
            px, py = mx, my = float(p[0]), float(p[1])
        w2 = omega * omega
        acc = np.array(
            [
                w2 * (c[0] - mx),
                w2 * (c[1] - my),
                cdd_r[2] + s.kp_height * (c_r[2] - c[2]) + s.kd_height * (cd_r[2] - cd[2]),
            ]
        )
        qp.com.desired_acceleration[:] = acc
        ldot = qp.angular_momentum.reference_rate
        ldot[:] = 0.0
        if (mx, my) != (px, py):  # Ldot = (p_cop - c) x F, F = m (cdd + g e_z): the CMP-CoP offset
            m = dyn.mass
            fx, fy, fz = m * acc[0], m * acc[1], m * (acc[2] + dyn.gravity)
            arm_x, arm_y, arm_z = px - float(c[0]), py - float(c[1]), self._ground_z - float(c[2])
            ldot[0] = arm_y * fz - arm_z * fy
            ldot[1] = arm_z * fx - arm_x * fz
        rz = _rz(yaw)
        qp.base_orientation.reference[:] = rz
        if qp.torso_orientation is not None:
            qp.torso_orientation.reference[:] = rz
        # ---- swing foot
        if ref is not None:
            for side in SIDES:
                task = qp.feet_tasks[side]
                if contacts[side]:
                    continue
                fs = ref.feet[side]
                task.reference = pin.SE3(_rz(fs.yaw), np.array(fs.position, dtype=float))
                task.reference_velocity[:3] = fs.velocity
                task.reference_velocity[3:] = (0.0, 0.0, fs.yaw_rate)
                task.reference_acceleration[:3] = fs.acceleration
                task.reference_acceleration[3:] = (0.0, 0.0, fs.yaw_acceleration)
        out = qp.solve()
        self.last_output = out
        self.qp_tick_s = dynamics_s + out.tick_time_s
        st = self.status
        st.t, st.mode, st.com, st.com_ref = self.t, self.mode, c.copy(), np.array(c_r, dtype=float)
        st.dcm, st.dcm_ref, st.zmp_cmd, st.zmp_ref = xi, xi_r, np.array([px, py]), p_r
        st.contacts = dict(contacts)
        st.swing = None if ref is None else ref.swing
        self._tick += 1
        self.t = self._tick * self.dt
        joints_q = q[self.pmodel.joint_q_idx]
        joints_v = v[self.pmodel.joint_v_idx]
        qdd = out.qdd[6:][qp.v_idx]
        tau = out.tau[qp.v_idx]
        return self.commands.update(out.ok, joints_q, joints_v, qdd, tau)

    def _settled(self, xi: np.ndarray) -> bool:
        """The DCM ``xi`` (m, odom frame) within ``walk_start_radius`` of the middle of the measured feet and
        the CoM slower than ``walk_start_speed`` horizontally: a walk may start."""
        s = self.settings
        cd = self.qp.dyn.com_velocity
        if float(np.hypot(cd[0], cd[1])) > s.walk_start_speed:
            return False
        return float(np.hypot(*(xi - self._stand_reference()[:2]))) <= s.walk_start_radius

    def _stand_reference(self, feet: dict[str, Pose2D] | None = None) -> np.ndarray:
        """CoM to stand over: the middle of the feet's sole centroids (``feet``: the measured ones when
        None) at the LIPM height."""
        feet = feet or self._measured_feet()
        sched = self.generator.schedule
        if sched is not None:
            mid = 0.5 * (sched.centroid("left", feet["left"]) + sched.centroid("right", feet["right"]))
        else:
            mid = 0.5 * (feet["left"].position + feet["right"].position)
        return np.array([mid[0], mid[1], self._ground_z + self.generator.lipm.height])

    def _walk_tick(self, xi: np.ndarray, omega: float) -> WalkingReference | None:
        s = self.settings
        gen = self.generator
        sched = gen.schedule
        assert sched is not None
        t = self.t
        i = sched.phase_index(t)
        if i >= len(sched.phases):
            # the plan ended: stand, or walk on if a command came
            feet = dict(sched.final_feet)
            if self.active_command().is_zero() or not self._settled(xi):
                self.mode = WalkMode.STAND
                return None
            self._start_walking(feet)
            sched = gen.schedule
            assert sched is not None
            i = sched.phase_index(t)
        # a standing capture step still in its weight transfer: the DCM, pushed on, may call for a crossing
        # step instead
        if (
            i == 0
            and self._stand_capture
            and s.crossing_steps
            and self._crossing_step(xi, self._measured_feet())
        ):
            sched = gen.schedule
            assert sched is not None
            i = sched.phase_index(t)
        phase = sched.phases[i]
        # at the first tick of a double support after a touchdown: re-plan the following steps
        if phase.swing is None and phase.step_index >= 0 and phase.step_index > self._step_index:
            self._step_index = phase.step_index
            self._record_touchdown(phase)
            self._swing_offset[:] = 0.0
            threshold = self.settings.walk_recovery_threshold
            error = float(np.hypot(*(xi - gen.reference(t).dcm)))
            self.touchdown_errors.append((t, error))
            if threshold > 0.0 and not self._recovering and error > threshold:
                # pushed: a capture step with the next foot, then stand until settled
                self.walk_interruptions.append((t, error))
                next_side = other_side(sched.plan.steps[phase.step_index].side)
                self.mode = WalkMode.STAND
                if not self._capture_step(xi, (next_side,)):
                    return None
                return gen.reference(t)
            walk_on = not self.active_command().is_zero() and not self._recovering
            if not self._crossing and (phase.step_index + 1 < len(sched.plan.steps) or walk_on):
                feet = self._measured_feet()
                landed = sched.plan.steps[phase.step_index]
                next_side = other_side(landed.side)
                if error <= self.settings.walk_measured_replan_error:
                    self._replan_steps(feet, next_side, phase.t_start, measured=True)
                else:  # pushed: keep the DCM error visible to the next touchdown's adjustment
                    shift = feet[landed.side].position - landed.pose.position
                    transfer = self._pushed_transfer(
                        xi, feet, landed.side, gen.reference(t + sched.plan.double_support).dcm + shift, omega
                    )
                    self._replan_steps(feet, next_side, phase.t_start, shift=shift, transfer=transfer)
                    if self._pushed_until >= t - self.dt:  # the hip strategy through the transfer too
                        self._pushed_until = max(self._pushed_until, phase.t_start + transfer)
                sched = gen.schedule
                assert sched is not None
                phase = sched.phases[sched.phase_index(t)]
        elif self._tick % self._replan_every == 0 and not gen.replan(t).ok:
            self.pattern_failures += 1
        ref = gen.reference(t)
        if phase.swing is not None and phase.swing_trajectory is not None and self.settings.step_adjustment:
            ref = self._adjust_swing(ref, phase, xi, omega)
        return ref

    def _record_touchdown(self, phase) -> None:  # type: ignore[no-untyped-def]
        plan = self.generator.schedule.plan if self.generator.schedule else None
        if plan is None:
            return
        side = plan.steps[phase.step_index].side
        f = self.qp.dyn.frames[side]
        self.touchdowns.append((self.t, side, np.array([f.position[0], f.position[1], _yaw_of(f.rotation)])))


__all__ = ["WalkMode", "WalkingController", "WalkingSettings", "WalkingStatus"]
