"""Footstep planning: from a velocity command or a goal pose to a sequence of feasible footsteps.

Frames: footsteps are sole-frame poses (:class:`~humanoid_control.walking.geometry.Pose2D`, m and rad) in the
odom frame, on flat ground. The **walking frame** ``W`` is a virtual frame midway between the feet where they
stand nominally: the feet belong at ``W * (0, +-foot_spacing / 2, 0)`` (left +, right -). A velocity command
``(vx, vy, wz)`` (m/s, m/s, rad/s) is a twist in ``W``, which a walking controller keeps aligned with the base
heading (so it is the base-frame ``/cmd_vel``).

One step moves ``W`` by the command integrated over the step period ``T = single_support + double_support``
(the exact SE(2) exponential), then puts the swing foot at its nominal place in the new ``W``:

- forward and turn: every step moves ``W`` by ``vx T`` and ``wz T``;
- sideways: the foot on the side of the motion steps out by ``2 vy T`` and the other foot closes in
  (stepping the inner foot in first would cross the feet's minimum width). The stance alternates between
  ``narrow = max(foot_spacing - |vy| T, step_width_min)`` and ``narrow + 2 |vy| T``
  (:meth:`~humanoid_control.model.robot_config.WalkingSpec.lateral_widths`: ``W`` keeps the narrow width as
  its spacing), and the swing shortens with ``|vy|`` to ``lateral_single_support`` at ``max_lateral``
  (:meth:`~humanoid_control.model.robot_config.WalkingSpec.single_support_for`; ``T`` is the plan's own
  period). A sideways plan without an ``anchor`` starts from ``W`` anchored on its first stance foot.

Every step is then **projected onto the kinematic limits** (:meth:`FootstepPlanner.project`), expressed in
the stance sole frame (x forward, y towards the swing side, yaw): ``-step_backward <= x <= step_forward``,
``step_width_min <= y <= step_width_max``, ``|yaw| <= step_turn``, and the two sole polygons at least
``foot_clearance`` apart. The minimum width keeps the feet uncrossed: the swing sole origin is always on its
own side of the stance foot. ``W`` is re-anchored on the placed foot, so a projected step does not accumulate
an error.

Commands are refused when not finite (``ValueError``) and clipped to the command limits; the plan says
whether it clipped (:attr:`FootstepPlan.command_clipped`) and which steps were projected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from humanoid_control.model.robot_config import RobotConfig, WalkingSpec
from humanoid_control.walking.geometry import Pose2D, midpoint, polygons_overlap

SIDES = ("left", "right")


def side_sign(side: str) -> float:
    """+1 for the left foot, -1 for the right one (the sign of its nominal y in the walking frame)."""
    if side not in SIDES:
        raise ValueError(f"unknown foot side {side!r}")
    return 1.0 if side == "left" else -1.0


def other_side(side: str) -> str:
    """The other foot."""
    return "right" if side == "left" else "left"


@dataclass(frozen=True)
class Footstep:
    """Where a foot lands: ``side`` (``left``/``right``) and its sole-frame ``pose`` in the odom frame."""

    side: str
    pose: Pose2D


@dataclass(frozen=True)
class VelocityCommand:
    """Twist of the walking frame: ``vx`` forward, ``vy`` left (m/s), ``wz`` counter-clockwise (rad/s)."""

    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0

    def is_zero(self) -> bool:
        return self.vx == 0.0 and self.vy == 0.0 and self.wz == 0.0


@dataclass
class FootstepPlan:
    """Footsteps in order and their timing (s).

    Attributes:
        start: the feet before the first step (odom frame).
        steps: the footsteps, alternating sides.
        single_support, double_support: duration of each swing and of each weight transfer (s).
        start_double_support: weight transfer before the first swing (s).
        command: the command the plan follows, after clipping (velocity plans; None for goal plans).
        command_clipped: the requested command was beyond the command limits and was clipped.
        projected: per step, the step was moved onto the kinematic limits.
        reached: goal plans: the last step leaves the feet at the goal (False when ``max_steps`` ran out).
        cross_delays: per step (missing: 0), the swing's ``cross_delay``
            (:class:`~humanoid_control.walking.swing.SwingTrajectory`): a crossing step's foot moves along
            the stance sole before it crosses.
        first_lift: the first step's foot is already in the air at the plan's start (a controller taking
            over mid-swing): its sole's height above the ground (m) and its swing's apex over the straight
            line to the touchdown (m); None: the first swing lifts off the ground as any other.
    """

    start: dict[str, Pose2D]
    steps: list[Footstep]
    single_support: float
    double_support: float
    start_double_support: float
    command: VelocityCommand | None = None
    command_clipped: bool = False
    projected: list[bool] = field(default_factory=list)
    reached: bool = True
    cross_delays: list[float] = field(default_factory=list)
    first_lift: tuple[float, float] | None = None

    @property
    def step_period(self) -> float:
        """Time from one lift-off to the next (s)."""
        return self.single_support + self.double_support

    def touchdown_times(self) -> list[float]:
        """Time of each step's touchdown from the start of the plan (s)."""
        t0 = self.start_double_support + self.single_support
        return [t0 + i * self.step_period for i in range(len(self.steps))]

    def feet_after(self, n: int) -> dict[str, Pose2D]:
        """Both feet after the first ``n`` steps."""
        feet = dict(self.start)
        for step in self.steps[:n]:
            feet[step.side] = step.pose
        return feet


def twist_displacement(command: VelocityCommand, duration: float) -> Pose2D:
    """Displacement of a frame moving at a constant body twist for ``duration`` (s) (SE(2) exponential)."""
    theta = command.wz * duration
    if abs(theta) < 1e-9:
        return Pose2D(command.vx * duration, command.vy * duration, theta)
    s, c1 = math.sin(theta), 1.0 - math.cos(theta)
    return Pose2D(
        (command.vx * s - command.vy * c1) / command.wz,
        (command.vx * c1 + command.vy * s) / command.wz,
        theta,
    )


class FootstepPlanner:
    """Footsteps from a velocity command or a goal pose (see the module docstring)."""

    def __init__(self, spec: WalkingSpec, soles: dict[str, np.ndarray]) -> None:
        """``spec``: the robot's walking facts; ``soles``: each foot's sole polygon in its sole frame (m)."""
        problems = spec.validate()
        if problems:
            raise ValueError(f"walking spec: {'; '.join(problems)}")
        self.spec = spec
        self.soles = {side: np.asarray(soles[side], dtype=float) for side in SIDES}
        left = Pose2D(0.0, spec.step_width_min, 0.0)
        right = Pose2D(0.0, 0.0, 0.0)
        if polygons_overlap(self._polygon("left", left), self._polygon("right", right), spec.foot_clearance):
            raise ValueError("parallel feet step_width_min apart are closer than foot_clearance")

    @classmethod
    def from_config(cls, config: RobotConfig) -> FootstepPlanner:
        """Planner with the robot's walking section and sole polygons."""
        return cls(config.walking, {s: np.array(config.feet[s].polygon) for s in SIDES})

    # ------------------------------------------------------------------ frames and limits
    def _polygon(self, side: str, pose: Pose2D) -> np.ndarray:
        return pose.apply(self.soles[side])

    def walking_frame(self, feet: dict[str, Pose2D]) -> Pose2D:
        """The walking frame of two feet: their midpoint and mean heading."""
        return midpoint(feet["left"], feet["right"])

    def nominal_foot(self, frame: Pose2D, side: str, spacing: float | None = None) -> Pose2D:
        """Where ``side``'s sole belongs in the walking frame ``frame`` (``spacing``: the stance width, m;
        ``foot_spacing`` by default)."""
        spacing = self.spec.foot_spacing if spacing is None else spacing
        return frame.compose(Pose2D(0.0, side_sign(side) * 0.5 * spacing, 0.0))

    def clip_command(self, command: VelocityCommand) -> tuple[VelocityCommand, bool]:
        """The command within the command limits, and whether it had to be clipped.

        Raises ``ValueError`` for a non-finite component (a NaN must never move the robot).
        """
        values = (command.vx, command.vy, command.wz)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            raise ValueError(f"non-finite velocity command refused: {command}")
        s = self.spec
        clipped = VelocityCommand(
            min(max(command.vx, -s.max_backward), s.max_forward),
            min(max(command.vy, -s.max_lateral), s.max_lateral),
            min(max(command.wz, -s.max_turn), s.max_turn),
        )
        return clipped, clipped != command

    def violations(self, stance: Footstep, target: Footstep, tol: float = 1e-9) -> list[str]:
        """Kinematic limits a step breaks, one message each (empty: feasible). ``stance`` is the foot that
        stays down, ``target`` where the other lands."""
        s = self.spec
        if stance.side == target.side:
            return ["a step must land the foot that is not in stance"]
        rel = stance.pose.relative(target.pose)
        width = side_sign(target.side) * rel.y
        out = []
        if not -s.step_backward - tol <= rel.x <= s.step_forward + tol:
            out.append(f"reach {rel.x:.3f} m outside [-{s.step_backward}, {s.step_forward}]")
        if not s.step_width_min - tol <= width <= s.step_width_max + tol:
            out.append(f"width {width:.3f} m outside [{s.step_width_min}, {s.step_width_max}]")
        if abs(rel.yaw) > s.step_turn + tol:
            out.append(f"turn {rel.yaw:.3f} rad beyond {s.step_turn}")
        a = self._polygon(stance.side, stance.pose)
        b = self._polygon(target.side, target.pose)
        if polygons_overlap(a, b, s.foot_clearance - tol):
            out.append(f"soles closer than {s.foot_clearance} m")
        return out

    def project(self, stance: Footstep, target: Footstep) -> tuple[Footstep, bool]:
        """``target`` moved onto the kinematic limits relative to ``stance`` (see the module docstring), and
        whether it moved. Reach, width and turn are clipped; soles still too close are moved apart sideways,
        and failing that, made parallel at the same width."""
        s = self.spec
        sign = side_sign(target.side)
        rel = stance.pose.relative(target.pose)
        x = min(max(rel.x, -s.step_backward), s.step_forward)
        width = min(max(sign * rel.y, s.step_width_min), s.step_width_max)
        yaw = min(max(rel.yaw, -s.step_turn), s.step_turn)
        a = self._polygon(stance.side, stance.pose)

        def place(w: float, th: float) -> Footstep:
            return Footstep(target.side, stance.pose.compose(Pose2D(x, sign * w, th)))

        step = place(width, yaw)
        for th in (yaw, 0.0):
            w = width
            step = place(w, th)
            while polygons_overlap(a, self._polygon(step.side, step.pose), s.foot_clearance) and w < (
                s.step_width_max
            ):
                w = min(w + 0.005, s.step_width_max)
                step = place(w, th)
            if not polygons_overlap(a, self._polygon(step.side, step.pose), s.foot_clearance):
                break
        return step, not self._close(target.pose.relative(step.pose), 1e-9)

    # ------------------------------------------------------------------ plans
    def _plan(
        self, feet: dict[str, Pose2D], single_support: float | None = None, **kwargs: object
    ) -> FootstepPlan:
        s = self.spec
        return FootstepPlan(
            dict(feet),
            [],
            s.single_support if single_support is None else single_support,
            s.double_support,
            s.start_double_support,
            **kwargs,  # type: ignore[arg-type]
        )

    def _take_step(
        self, frame: Pose2D, feet: dict[str, Pose2D], side: str, move: Pose2D, spacing: float | None = None
    ) -> tuple[Pose2D, Footstep, bool]:
        """Move the walking frame by ``move`` (in the frame), place ``side`` nominally (``spacing`` apart),
        project, re-anchor."""
        spacing = self.spec.foot_spacing if spacing is None else spacing
        new_frame = frame.compose(move)
        stance = Footstep(other_side(side), feet[other_side(side)])
        step, projected = self.project(stance, Footstep(side, self.nominal_foot(new_frame, side, spacing)))
        anchored = step.pose.compose(Pose2D(0.0, -side_sign(side) * 0.5 * spacing, 0.0))
        return anchored, step, projected

    def plan_velocity(
        self,
        feet: dict[str, Pose2D],
        command: VelocityCommand,
        n_steps: int,
        first_side: str | None = None,
        anchor: str | None = None,
    ) -> FootstepPlan:
        """``n_steps`` footsteps following ``command`` from the feet ``feet`` (odom frame).

        ``first_side``: the first swing foot; by default the foot on the side of the lateral command, else of
        the turn, else the left one. ``anchor``: the foot that landed last while walking on; the walking
        frame is then anchored on it (as between the steps of one plan), not at the feet's midpoint, so a
        plan re-made at each touchdown keeps the commanded stride. The command is clipped to the command
        limits first (``ValueError`` if it is not finite).
        """
        cmd, clipped = self.clip_command(command)
        if n_steps < 0:
            raise ValueError("n_steps must be >= 0")
        side = first_side or self._first_side(cmd.vy, cmd.wz)
        single_support = self.spec.single_support_for(cmd.vy)
        plan = self._plan(feet, single_support, command=cmd, command_clipped=clipped)
        period = single_support + self.spec.double_support
        move = twist_displacement(VelocityCommand(cmd.vx, 0.0, cmd.wz), period)
        # sideways the stance alternates between a narrow and a wide width (their mean foot_spacing where
        # the narrow one stays above step_width_min): the frame keeps the narrow one as its spacing
        spacing = self.spec.lateral_widths(cmd.vy)[0] if cmd.vy != 0.0 else self.spec.foot_spacing
        if anchor is None and cmd.vy != 0.0:
            anchor = other_side(side)  # the first stance foot: the first step's width is the wide one
        if anchor is None:
            frame = self.walking_frame(feet)
        else:
            frame = feet[anchor].compose(Pose2D(0.0, -side_sign(anchor) * 0.5 * spacing, 0.0))
        current = dict(feet)
        for _ in range(n_steps):
            # sideways: the foot on the side of the motion steps out by 2 vy T, the other closes in
            lateral = 2.0 * cmd.vy * period if cmd.vy * side_sign(side) > 0.0 else 0.0
            frame, step, projected = self._take_step(
                frame, current, side, Pose2D(0.0, lateral, 0.0).compose(move), spacing
            )
            current[side] = step.pose
            plan.steps.append(step)
            plan.projected.append(projected)
            side = other_side(side)
        return plan

    def plan_stop(self, feet: dict[str, Pose2D], first_side: str | None = None) -> FootstepPlan:
        """The step that brings the feet back to the nominal stance (none when they are there already)."""
        side = first_side or "left"
        frame = self.walking_frame(feet)
        plan = self._plan(feet)
        if self._nominal(frame, feet):
            return plan
        # the swing foot goes next to the stance foot, at the nominal spacing
        stance = feet[other_side(side)]
        frame = stance.compose(Pose2D(0.0, side_sign(side) * 0.5 * self.spec.foot_spacing, 0.0))
        _, step, projected = self._take_step(frame, feet, side, Pose2D(0.0, 0.0, 0.0))
        plan.steps.append(step)
        plan.projected.append(projected)
        return plan

    def plan_to_goal(
        self,
        feet: dict[str, Pose2D],
        goal: Pose2D,
        max_steps: int = 100,
        tolerance: float = 1e-3,
    ) -> FootstepPlan:
        """Footsteps that bring the walking frame to ``goal`` (odom frame) and the feet to their nominal
        stance there, each step at most the command limits times the step period (translation and turn at
        once, omnidirectional). ``reached`` is False when ``max_steps`` did not suffice."""
        s = self.spec
        period = s.single_support + s.double_support
        frame = self.walking_frame(feet)
        current = dict(feet)
        remaining = frame.relative(goal)
        side = self._first_side(remaining.y, remaining.yaw)
        plan = self._plan(feet)
        plan.reached = False
        for _ in range(max_steps):
            remaining = frame.relative(goal)
            if self._close(remaining, tolerance) and self._nominal(frame, current, tolerance):
                plan.reached = True
                break
            sign = side_sign(side)
            dx = min(max(remaining.x, -s.max_backward * period), s.max_forward * period)
            dy = (
                sign * min(sign * remaining.y, 2.0 * s.max_lateral * period)
                if sign * remaining.y > 0
                else 0.0
            )
            dth = min(max(remaining.yaw, -s.max_turn * period), s.max_turn * period)
            frame, step, projected = self._take_step(frame, current, side, Pose2D(dx, dy, dth))
            current[side] = step.pose
            plan.steps.append(step)
            plan.projected.append(projected)
            side = other_side(side)
        else:
            plan.reached = self._close(frame.relative(goal), tolerance) and self._nominal(
                frame, current, tolerance
            )
        return plan

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _first_side(lateral: float, turn: float) -> str:
        if lateral != 0.0:
            return "left" if lateral > 0.0 else "right"
        if turn != 0.0:
            return "left" if turn > 0.0 else "right"
        return "left"

    @staticmethod
    def _close(p: Pose2D, tolerance: float) -> bool:
        return math.hypot(p.x, p.y) <= tolerance and abs(p.yaw) <= tolerance

    def is_nominal(self, frame: Pose2D, feet: dict[str, Pose2D], tolerance: float = 1e-3) -> bool:
        """Both feet within ``tolerance`` (m, rad) of their nominal place in the walking frame ``frame``."""
        return self._nominal(frame, feet, tolerance)

    def _nominal(self, frame: Pose2D, feet: dict[str, Pose2D], tolerance: float = 1e-3) -> bool:
        return all(
            self._close(self.nominal_foot(frame, side).relative(feet[side]), tolerance) for side in SIDES
        )
