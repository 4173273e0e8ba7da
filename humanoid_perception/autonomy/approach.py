"""The marker-approach task (pure, no rclpy): search for a fiducial marker by turning in place, walk to the
standoff pose in front of it, stop; abort safely on marker loss, a perception error or a teleop takeover.

Frames and units: everything is in the ``odom`` frame (REP-105; x, y in m, yaw in rad about z up), from the
state estimator's ``/odom`` and the perception node's marker poses in ``odom``. Times are seconds of one
clock (simulated time in simulation). Commands are heading-frame velocities, as ``/autonomy/cmd_vel``
(geometry_msgs/Twist): ``vx``, ``vy`` (m/s, x forward, y left), ``wz`` (rad/s).

The standoff pose is ``standoff_m`` in front of the marker: the marker's *front* is the horizontal direction
of its outward normal (marker ``+z``) for a marker on a vertical face, or of its ``-y`` axis for a marker
lying on the floor (the side from which it reads upright; OpenCV's marker frame has x right, y up, z out of
the tag); the robot stands there facing the marker.

States (:class:`Phase`): ``idle`` -> ``search`` -> ``approach`` (turn towards the goal, then walk to it) ->
``align`` (the last centimetres and the heading, holonomic) -> ``reached`` (zero velocity). The search has
three stages (:class:`SearchStage`): ``scan`` (a full turn in place at ``search_wz``: the camera sweeps the
floor around the robot out to its range, about 2.2 m for the G1's head camera), then, when
``search_radius_m`` > 0, ``walkout`` (walk ``search_radius_m`` straight ahead from where the scan started)
and ``orbit`` (walk forward once around that start point at ``search_radius_m``, turning the way the scan
turned; the camera, looking along the path, sweeps the ring out to about radius + its range). Any confirmed
sighting ends the search. Terminal failures: ``aborted`` (marker lost while it should be in view, a
perception error, autonomy switched off or a teleop takeover, ``stop()``) and ``failed`` (nothing found by
the whole search, or the task timed out). Every terminal state commands zero velocity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

import numpy as np


class SearchStage(str, Enum):
    """Stage of the ``search`` phase (module docstring)."""

    SCAN = "scan"
    WALKOUT = "walkout"
    ORBIT = "orbit"


class Phase(str, Enum):
    """State of the task."""

    IDLE = "idle"
    SEARCH = "search"
    APPROACH = "approach"
    ALIGN = "align"
    REACHED = "reached"
    ABORTED = "aborted"
    FAILED = "failed"


TERMINAL = (Phase.REACHED, Phase.ABORTED, Phase.FAILED)


@dataclass(frozen=True)
class ApproachSettings:
    """Tunables of the task (SI units; angles in rad).

    Attributes:
        marker_id: the marker to approach; -1: the first one confirmed.
        standoff_m: distance of the standoff pose from the marker centre (m).
        confirm_frames: consecutive frames with the marker before the search ends (false-positive guard).
        search_wz: turn rate of the search (rad/s; the sign picks the direction).
        search_turn_rad: the scan (turn in place) ends after turning this much without a confirmed sighting.
        search_radius_m: radius of the walking search after the scan (m); 0: the search fails after the scan.
        search_vx: forward speed of the walking search (m/s).
        search_orbit_rad: the walking search fails after going this far around its centre (rad).
        vx_max, vy_max, wz_max: command limits (m/s, m/s, rad/s).
        k_lin, k_lat, k_turn: proportional gains (1/s) on the distance, the lateral error and the angle.
        turn_first_rad: while the goal's bearing is off by more than this, turn in place before walking.
        align_radius_m: within this distance of the goal, the holonomic final alignment (vx, vy, wz).
        position_tolerance_m, heading_tolerance_rad: the goal is reached inside both for ``settle_s``.
        settle_s: time inside the tolerances before ``reached`` (s).
        smoothing: weight of a new sighting in the goal estimate (0-1; 1 = latest only).
        near_m, far_m, half_fov_rad: where the marker is expected in the camera view (distance from the
            robot's base along the floor, bearing from its heading): the loss check applies only there.
        lost_timeout_s: abort when the marker, expected in view, was not seen for this long (s).
        timeout_s: fail when the task has run this long (s).
    """

    marker_id: int = -1
    standoff_m: float = 0.5
    confirm_frames: int = 2
    search_wz: float = 0.5
    search_turn_rad: float = 2.0 * math.pi + 0.5
    search_radius_m: float = 2.0
    search_vx: float = 0.4
    search_orbit_rad: float = 2.0 * math.pi + 0.3
    vx_max: float = 0.4
    vy_max: float = 0.2
    wz_max: float = 0.6
    k_lin: float = 0.8
    k_lat: float = 1.0
    k_turn: float = 1.5
    turn_first_rad: float = 0.5
    align_radius_m: float = 0.35
    position_tolerance_m: float = 0.08
    heading_tolerance_rad: float = math.radians(6.0)
    settle_s: float = 1.0
    smoothing: float = 0.4
    near_m: float = 1.0
    far_m: float = 2.0
    half_fov_rad: float = 0.35
    lost_timeout_s: float = 3.0
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not math.isfinite(float(v)):
                raise ValueError(f"approach settings: {f.name} must be finite, got {v}")
        positive = (
            "standoff_m",
            "search_turn_rad",
            "search_vx",
            "search_orbit_rad",
            "vx_max",
            "vy_max",
            "wz_max",
            "k_lin",
            "k_lat",
            "k_turn",
            "turn_first_rad",
            "align_radius_m",
            "position_tolerance_m",
            "heading_tolerance_rad",
            "far_m",
            "half_fov_rad",
            "lost_timeout_s",
            "timeout_s",
        )
        for name in positive:
            if getattr(self, name) <= 0.0:
                raise ValueError(f"approach settings: {name} must be > 0, got {getattr(self, name)}")
        if self.search_radius_m < 0.0:
            raise ValueError(f"approach settings: search_radius_m must be >= 0, got {self.search_radius_m}")
        if self.search_wz == 0.0:
            raise ValueError("approach settings: search_wz must not be 0")
        if not 0.0 < self.smoothing <= 1.0:
            raise ValueError(f"approach settings: smoothing must be in (0, 1], got {self.smoothing}")
        if self.confirm_frames < 1:
            raise ValueError(f"approach settings: confirm_frames must be >= 1, got {self.confirm_frames}")
        if self.settle_s < 0.0 or self.near_m < 0.0 or self.near_m >= self.far_m:
            raise ValueError("approach settings: need settle_s >= 0 and 0 <= near_m < far_m")

    @staticmethod
    def from_mapping(values: dict[str, Any]) -> ApproachSettings:
        """Settings from a mapping (YAML, node parameters); unknown keys are refused."""
        known = {f.name: f for f in fields(ApproachSettings)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"approach settings: unknown keys {unknown} (known: {sorted(known)})")
        out: dict[str, Any] = {}
        for k, v in values.items():
            out[k] = int(v) if k in ("marker_id", "confirm_frames") else float(v)
        return ApproachSettings(**out)


@dataclass(frozen=True)
class Pose2D:
    """Planar pose in ``odom``: x, y (m), yaw (rad)."""

    x: float
    y: float
    yaw: float


@dataclass(frozen=True)
class Sighting:
    """One detected marker: ``position`` (3,) of its centre and ``rotation`` (3, 3) = R_odom_marker."""

    marker_id: int
    position: np.ndarray
    rotation: np.ndarray


@dataclass(frozen=True)
class Command:
    """Heading-frame velocity: vx, vy (m/s), wz (rad/s)."""

    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0

    @property
    def is_zero(self) -> bool:
        return self.vx == 0.0 and self.vy == 0.0 and self.wz == 0.0


def wrap(angle: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def standoff_pose(position: np.ndarray, rotation: np.ndarray, standoff_m: float) -> Pose2D:
    """The standoff pose of a marker at ``position`` with orientation ``rotation`` (R_odom_marker): on the
    floor, ``standoff_m`` from the marker centre along its front (module docstring), facing the marker."""
    normal = rotation[:, 2]
    front = normal if abs(float(normal[2])) < 0.7 else -rotation[:, 1]
    f = np.array([front[0], front[1]], dtype=float)
    n = float(np.linalg.norm(f))
    if n < 1e-6:
        raise ValueError("marker orientation has no horizontal front direction")
    f /= n
    gx, gy = float(position[0]) + standoff_m * f[0], float(position[1]) + standoff_m * f[1]
    return Pose2D(gx, gy, math.atan2(-f[1], -f[0]))


def _clip(v: float, limit: float) -> float:
    return max(-limit, min(limit, v))


class ApproachTask:
    """The task's state machine. Call :meth:`start`, then :meth:`step` at every new input (a camera frame's
    detections, a pose update); each call returns the velocity to command now."""

    def __init__(self, settings: ApproachSettings | None = None) -> None:
        self.s = settings or ApproachSettings()
        self._clear()

    def _clear(self) -> None:
        self.phase = Phase.IDLE
        self.reason = ""
        self.t_start: float | None = None
        self.t_end: float | None = None
        self.marker_id: int | None = None
        self.marker_xy: np.ndarray | None = None
        self.goal: Pose2D | None = None
        self.sightings = 0
        self.frames = 0
        self.last_seen_t: float | None = None
        self.first_seen_t: float | None = None
        self.last_pose: Pose2D | None = None
        self._streak = 0
        self._turned = 0.0
        self._last_yaw: float | None = None
        self._inside_since: float | None = None
        self._goal_vec: np.ndarray | None = None  # smoothed (gx, gy, cos, sin)
        self.search_stage = SearchStage.SCAN
        self._search_centre: Pose2D | None = None  # the pose where the scan started
        self._walkout_target: tuple[float, float] | None = None
        self._orbit_angle: float | None = None  # polar angle about the centre at the last step (rad)
        self._orbited = 0.0  # signed progress around the centre, in the scan's turn direction (rad)

    # ------------------------------------------------------------------ control
    def start(self, t: float) -> None:
        """Begin (or restart) the task at time ``t`` (s): forget any earlier marker."""
        self._clear()
        self.phase = Phase.SEARCH
        self.t_start = t

    def stop(self, t: float, reason: str) -> Command:
        """End the task now (terminal ``aborted`` unless it already ended); zero velocity."""
        if self.phase not in TERMINAL and self.phase != Phase.IDLE:
            self._end(t, Phase.ABORTED, reason)
        return Command()

    @property
    def active(self) -> bool:
        """The task runs (neither idle nor ended)."""
        return self.phase not in TERMINAL and self.phase != Phase.IDLE

    def _end(self, t: float, phase: Phase, reason: str) -> Command:
        self.phase, self.reason, self.t_end = phase, reason, t
        return Command()

    # ------------------------------------------------------------------ step
    def step(
        self,
        t: float,
        pose: Pose2D,
        sightings: list[Sighting] | None = None,
        perception_error: str = "",
        autonomy_enabled: bool = True,
    ) -> Command:
        """Advance to time ``t`` (s) with the robot's ``pose``.

        Args:
            sightings: the markers of a new camera frame (an empty list: a frame without markers), or None
                when no new frame came with this step.
            perception_error: non-empty when perception reports an error: abort, zero velocity.
            autonomy_enabled: False once the mode manager has autonomy off (a teleop takeover, an operator,
                an e-stop): abort, zero velocity.
        """
        if not self.active:
            return Command()
        if not all(math.isfinite(v) for v in (t, pose.x, pose.y, pose.yaw)):
            return self._end(t, Phase.ABORTED, "non-finite pose or time")
        if perception_error:
            return self._end(t, Phase.ABORTED, f"perception error: {perception_error}")
        if not autonomy_enabled:
            return self._end(t, Phase.ABORTED, "autonomy switched off (teleop takeover or operator)")
        assert self.t_start is not None
        if t - self.t_start > self.s.timeout_s:
            return self._end(t, Phase.FAILED, f"timeout after {self.s.timeout_s:.0f} s")
        if self._last_yaw is not None:
            self._turned += abs(wrap(pose.yaw - self._last_yaw))
        self._last_yaw = pose.yaw
        self.last_pose = pose
        if sightings is not None:
            self._observe(t, pose, sightings)

        if self.phase == Phase.SEARCH:
            if self.goal is not None and self._streak >= self.s.confirm_frames:
                self.phase = Phase.APPROACH
            else:
                return self._search(t, pose)
        assert self.goal is not None and self.marker_xy is not None
        if self._lost(t, pose):
            return self._end(t, Phase.ABORTED, "marker lost while in view")
        return self._drive(t, pose)

    def _search(self, t: float, pose: Pose2D) -> Command:
        """The search's command at ``pose`` (stages in the module docstring)."""
        s = self.s
        if self._search_centre is None:
            self._search_centre = pose
        c = self._search_centre
        if self.search_stage == SearchStage.SCAN:
            if self._turned <= s.search_turn_rad:
                return Command(0.0, 0.0, _clip(s.search_wz, s.wz_max))
            if s.search_radius_m <= 0.0:
                return self._end(t, Phase.FAILED, "no marker found after a full turn")
            self.search_stage = SearchStage.WALKOUT
            self._walkout_target = (
                c.x + s.search_radius_m * math.cos(c.yaw),
                c.y + s.search_radius_m * math.sin(c.yaw),
            )
        if self.search_stage == SearchStage.WALKOUT:
            assert self._walkout_target is not None
            dx, dy = self._walkout_target[0] - pose.x, self._walkout_target[1] - pose.y
            d = math.hypot(dx, dy)
            if d > 0.2:
                alpha = wrap(math.atan2(dy, dx) - pose.yaw)
                wz = _clip(s.k_turn * alpha, s.wz_max)
                if abs(alpha) > s.turn_first_rad:
                    return Command(0.0, 0.0, wz)
                return Command(min(s.search_vx, s.vx_max, s.k_lin * d) * math.cos(alpha), 0.0, wz)
            self.search_stage = SearchStage.ORBIT
        # orbit: forward along the circle about the centre, turning the scan's way
        direction = 1.0 if s.search_wz > 0.0 else -1.0
        rx, ry = pose.x - c.x, pose.y - c.y
        r = math.hypot(rx, ry)
        theta = math.atan2(ry, rx)
        if self._orbit_angle is not None:
            self._orbited += direction * wrap(theta - self._orbit_angle)
        self._orbit_angle = theta
        if self._orbited > s.search_orbit_rad:
            why = f"no marker found after a full turn and a walk around at {s.search_radius_m} m"
            return self._end(t, Phase.FAILED, why)
        # the tangent, bent inwards when outside the circle (outwards when inside)
        radial_error = r - s.search_radius_m
        heading = theta + direction * (0.5 * math.pi + math.atan(1.5 * radial_error))
        e = wrap(heading - pose.yaw)
        v = min(s.search_vx, s.vx_max)
        wz = _clip(direction * v / s.search_radius_m + s.k_turn * e, s.wz_max)
        if abs(e) > s.turn_first_rad:
            return Command(0.0, 0.0, wz)
        return Command(v * math.cos(e), 0.0, wz)

    def _observe(self, t: float, pose: Pose2D, sightings: list[Sighting]) -> None:
        self.frames += 1
        wanted = [
            s
            for s in sightings
            if (self.marker_id is None and (self.s.marker_id < 0 or s.marker_id == self.s.marker_id))
            or s.marker_id == self.marker_id
        ]
        finite = [s for s in wanted if np.all(np.isfinite(s.position)) and np.all(np.isfinite(s.rotation))]
        if not finite:
            self._streak = 0
            return
        # the nearest one if several carry the id
        s = min(finite, key=lambda m: float(np.hypot(m.position[0] - pose.x, m.position[1] - pose.y)))
        try:
            g = standoff_pose(s.position, s.rotation, self.s.standoff_m)
        except ValueError:
            self._streak = 0
            return
        if self.marker_id is None:
            self.marker_id = s.marker_id
        vec = np.array([g.x, g.y, math.cos(g.yaw), math.sin(g.yaw)])
        a = self.s.smoothing
        self._goal_vec = vec if self._goal_vec is None else (1.0 - a) * self._goal_vec + a * vec
        gv = self._goal_vec
        self.goal = Pose2D(float(gv[0]), float(gv[1]), math.atan2(float(gv[3]), float(gv[2])))
        mxy = np.array([float(s.position[0]), float(s.position[1])])
        self.marker_xy = mxy if self.marker_xy is None else (1.0 - a) * self.marker_xy + a * mxy
        self.sightings += 1
        self._streak += 1
        self.last_seen_t = t
        if self.first_seen_t is None:
            self.first_seen_t = t

    def expected_in_view(self, pose: Pose2D) -> bool:
        """The marker should be in the camera's view from ``pose`` (distance and bearing bands)."""
        if self.marker_xy is None:
            return False
        dx, dy = self.marker_xy[0] - pose.x, self.marker_xy[1] - pose.y
        d = math.hypot(dx, dy)
        bearing = wrap(math.atan2(dy, dx) - pose.yaw)
        return self.s.near_m <= d <= self.s.far_m and abs(bearing) <= self.s.half_fov_rad

    def _lost(self, t: float, pose: Pose2D) -> bool:
        if self.last_seen_t is None or not self.expected_in_view(pose):
            return False
        return t - self.last_seen_t > self.s.lost_timeout_s

    def _drive(self, t: float, pose: Pose2D) -> Command:
        s, g = self.s, self.goal
        assert g is not None
        dx, dy = g.x - pose.x, g.y - pose.y
        d = math.hypot(dx, dy)
        c, sn = math.cos(pose.yaw), math.sin(pose.yaw)
        ex, ey = c * dx + sn * dy, -sn * dx + c * dy  # goal position in the heading frame
        e_yaw = wrap(g.yaw - pose.yaw)
        if self.phase == Phase.APPROACH and d <= s.align_radius_m:
            self.phase = Phase.ALIGN
        elif self.phase == Phase.ALIGN and d > 2.0 * s.align_radius_m:
            self.phase = Phase.APPROACH
        if self.phase == Phase.APPROACH:
            alpha = wrap(math.atan2(dy, dx) - pose.yaw)
            wz = _clip(s.k_turn * alpha, s.wz_max)
            if abs(alpha) > s.turn_first_rad:
                return Command(0.0, 0.0, wz)
            return Command(_clip(s.k_lin * d, s.vx_max) * math.cos(alpha), 0.0, wz)
        # align: holonomic on the remaining error
        inside = d <= s.position_tolerance_m and abs(e_yaw) <= s.heading_tolerance_rad
        if inside:
            if self._inside_since is None:
                self._inside_since = t
            if t - self._inside_since >= s.settle_s:
                return self._end(t, Phase.REACHED, "standoff pose reached")
            return Command()
        self._inside_since = None
        return Command(
            _clip(s.k_lin * ex, s.vx_max), _clip(s.k_lat * ey, s.vy_max), _clip(s.k_turn * e_yaw, s.wz_max)
        )

    # ------------------------------------------------------------------ report
    def outcome(self) -> dict[str, Any]:
        """JSON-ready summary: ``phase``, ``reason``, times (s), marker, goal and last pose (odom), counts."""
        pose, goal = self.last_pose, self.goal
        out: dict[str, Any] = {
            "phase": self.phase.value,
            "reason": self.reason,
            "t_start": self.t_start,
            "t_end": self.t_end,
            "t_first_seen": self.first_seen_t,
            "marker_id": self.marker_id,
            "goal": None if goal is None else [round(goal.x, 4), round(goal.y, 4), round(goal.yaw, 4)],
            "pose": None if pose is None else [round(pose.x, 4), round(pose.y, 4), round(pose.yaw, 4)],
            "frames": self.frames,
            "sightings": self.sightings,
            "search_stage": self.search_stage.value,
        }
        if pose is not None and goal is not None:
            out["position_error_m"] = round(math.hypot(goal.x - pose.x, goal.y - pose.y), 4)
            out["heading_error_deg"] = round(math.degrees(abs(wrap(goal.yaw - pose.yaw))), 3)
        return out
