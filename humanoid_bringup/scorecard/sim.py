"""One scorecard trial's simulation: the controller on the in-process runner with the state estimator's
state (``estimator="ekf"``, never the ground truth), a MuJoCo world edited for the scenario, and the
recorder that judges it from the simulator's ground truth.

Frames and units: world frame (x forward at spawn, z up; m), heading frame for velocities (x along the base's
yaw; m/s, rad/s), times in s of simulated time. Contact forces are the ground reaction on each foot (N, sole
frame; the normal component is used to tell stance from swing).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.wbc_graph import RESPAWN_SETTLE_S
from humanoid_bringup.scorecard.scenarios import STANDING_CONTROLLERS, parse_controller
from humanoid_control.controllers.inprocess import InProcessRunner, RunnerSettings, Tick
from humanoid_control.hardware.mujoco_sim import MujocoBackend, tilt_from_quat
from humanoid_control.model.robot_config import RobotConfig, load_robot_config

RATE_HZ = 500.0  # the driver's loop rate in the trials (Hz)
# the driver's settle ramp before a controller may take over (s): the robot spawns in the default pose and the
# driver holds it there while the estimator converges, as after the graph evaluations' respawn
RAMP_S = RESPAWN_SETTLE_S
PHASE_WINDOW_S = 0.02  # an event at a phase starts within this of the phase's time, or waits for the next (s)
MIN_SINGLE_S = 0.1  # a single support shorter than this is a contact bounce at a touchdown, not a step (s)
DAMPING_OBSERVE_S = 0.3  # after the driver went to damping the trial watches this long, then ends (s)


@lru_cache(maxsize=4)
def robot_config(robot: str) -> RobotConfig:
    """The robot configuration (cached per process)."""
    return load_robot_config(robot)


@lru_cache(maxsize=8)
def _policy_manifest(policy: str, robot: str) -> Any:
    from humanoid_policy.manifest import load_policy

    return load_policy(policy, robot_config(robot), None)


def make_controller(controller: str, robot: str) -> tuple[Any, dict[str, Any]]:
    """A new controller instance for a scorecard name (``policy:<x>`` or a registered name) and its
    parameters. Policies are loaded once per process (the manifest is read-only)."""
    from humanoid_control.controllers.registry import create_controller

    base, params = parse_controller(controller)
    if base == "policy":
        from humanoid_policy.controller import PolicyController

        return PolicyController(_policy_manifest(params.get("policy", "holosoma/g1_ppo"), robot)), {}
    if base == "supervised":
        from humanoid_policy.controller import PolicyController
        from humanoid_policy.supervised import SupervisedController

        ctl = SupervisedController()
        ctl.policy = PolicyController(_policy_manifest(params.get("policy", "holosoma/g1_ppo"), robot))
        return ctl, {}
    return create_controller(base), params


def is_standing_controller(controller: str) -> bool:
    """A controller that only stands (no stepping: judged by the no-step push criteria)."""
    return parse_controller(controller)[0] in STANDING_CONTROLLERS


def make_runner(
    controller: str,
    robot: str,
    edit: Callable[[object], None] | None = None,
    delay_ticks: int = 0,
) -> InProcessRunner:
    """The controller on the driver core and a MuJoCo backend of the (``edit``-ed) world; the robot spawns
    in the default pose at the origin facing +x; the estimator's core feeds the controller."""
    cfg = robot_config(robot)
    ctl, params = make_controller(controller, robot)
    backend = MujocoBackend(cfg, initial_joint_positions=cfg.array("default"), edit=edit)
    return InProcessRunner(
        cfg,
        ctl,
        params,
        RunnerSettings(rate_hz=RATE_HZ, ramp_s=RAMP_S, estimator="ekf", delay_ticks=delay_ticks),
        backend=backend,
    )


def yaw_of(quat_wxyz: np.ndarray) -> float:
    """Yaw (rad) of a base orientation (w, x, y, z)."""
    w, x, y, z = quat_wxyz
    return float(math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


@dataclass
class Recorder:
    """Everything a trial is judged by, from the ground truth, tick by tick.

    Attributes:
        fall_height: base height (m) under which the robot has fallen. fall_tilt: base tilt (rad) beyond
            which it has fallen. contact_force: normal force (N) above which a foot is in contact.
    """

    runner: InProcessRunner
    fall_height: float
    fall_tilt: float
    contact_force: float = 30.0
    t: list[float] = field(default_factory=list)
    base: list[np.ndarray] = field(default_factory=list)
    tilt: list[float] = field(default_factory=list)
    vel: list[np.ndarray] = field(default_factory=list)  # heading frame (vx, vy, wz)
    cmd: list[np.ndarray] = field(default_factory=list)
    com: list[np.ndarray] = field(default_factory=list)
    soles: list[dict[str, np.ndarray]] = field(default_factory=list)
    contact: list[dict[str, bool]] = field(default_factory=list)
    fell_at: float | None = None
    fall_reason: str = ""
    damping_at: float | None = None
    active_at: float | None = None
    foot_slip: float = 0.0

    def __post_init__(self) -> None:
        b = self.runner.backend
        self._data = b.data
        self._sole_ids = dict(b.mj.sole_site_ids)
        self._root = int(b.mj.base_body_id)
        self._last_sole: dict[str, np.ndarray | None] = {s: None for s in self._sole_ids}

    def update(self, tick: Tick) -> None:
        """Record the tick's state (its ground truth, read by the runner before the controller ran; call it
        after :meth:`InProcessRunner.control`, before the physics advances)."""
        gt = tick.truth
        t = float(tick.t)
        d = self._data
        rot_yaw = yaw_of(gt.quat)
        w, x, y, z = gt.quat
        r = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
            ]
        )
        vw = r @ gt.linear_velocity_body
        c, s = math.cos(rot_yaw), math.sin(rot_yaw)
        wz = float((r @ gt.angular_velocity_body)[2])
        self.t.append(t)
        self.base.append(np.array(gt.position))
        tilt = tilt_from_quat(gt.quat)
        self.tilt.append(tilt)
        self.vel.append(np.array([c * vw[0] + s * vw[1], -s * vw[0] + c * vw[1], wz]))
        cmd = self.runner.cmd_vel
        self.cmd.append(np.zeros(3) if cmd is None else np.array(cmd))
        self.com.append(np.array(d.subtree_com[self._root]))
        soles, contact = {}, {}
        for side, sid in self._sole_ids.items():
            p = np.array(d.site_xpos[sid])
            soles[side] = p
            down = float(gt.contacts[side].force[2]) > self.contact_force
            contact[side] = down
            last = self._last_sole[side]
            if down and last is not None:
                self.foot_slip += float(np.linalg.norm(p[:2] - last[:2]))
            self._last_sole[side] = p if down else None
        self.soles.append(soles)
        self.contact.append(contact)
        mode = tick.mode
        if self.active_at is None and mode == "active":
            self.active_at = t
        if self.damping_at is None and mode == "damping":
            self.damping_at = t
        if self.fell_at is None:
            if gt.position[2] < self.fall_height:
                self.fell_at, self.fall_reason = t, f"base below {self.fall_height:g} m"
            elif tilt > self.fall_tilt:
                self.fell_at, self.fall_reason = t, f"base tilt over {math.degrees(self.fall_tilt):.0f} deg"

    def finished(self) -> bool:
        """The trial cannot change its verdict any more: fallen, or damping long enough."""
        if self.fell_at is not None:
            return True
        return self.damping_at is not None and self.t[-1] >= self.damping_at + DAMPING_OBSERVE_S

    def outcome(self) -> str:
        """``safe_stop`` (the driver went to damping before any fall: on purpose), ``fell`` or
        ``survived``."""
        if self.damping_at is not None and (self.fell_at is None or self.damping_at < self.fell_at):
            return "safe_stop"
        return "fell" if self.fell_at is not None else "survived"

    def tracking_error(self, start: float, end: float) -> float | None:
        """Mean |commanded - measured| planar velocity (m/s, heading frame) over ``[start, end)`` (s)."""
        t = np.array(self.t)
        sel = (t >= start) & (t < end)
        if not sel.any():
            return None
        v, c = np.array(self.vel)[sel], np.array(self.cmd)[sel]
        return float(np.mean(np.linalg.norm(v[:, :2] - c[:, :2], axis=1)))


class PhaseTracker:
    """Gait phases from the recorder's contacts: single support of each foot (its start, and the duration
    of the last one measured, bounces shorter than ``MIN_SINGLE_S`` aside) and touchdowns, to place an event
    at a phase (``mid_<side>``: the middle of a single support on ``side``; ``touchdown_<side>``: the tick
    ``side`` lands)."""

    def __init__(self) -> None:
        self.single_start: dict[str, float | None] = {"left": None, "right": None}
        self.single_duration: dict[str, float | None] = {"left": None, "right": None}
        self._was: dict[str, bool] | None = None

    def update(self, t: float, contact: dict[str, bool]) -> dict[str, bool]:
        """Feed one tick's contacts; returns which events happened at it (``touchdown_<side>``,
        ``single_<side>`` starts)."""
        ev: dict[str, bool] = {}
        was = self._was
        for side, other in (("left", "right"), ("right", "left")):
            single = contact[side] and not contact[other]
            was_single = was is not None and was[side] and not was[other]
            if single and not was_single:
                self.single_start[side] = t
                ev[f"single_{side}"] = True
            if not single and was_single and self.single_start[side] is not None:
                duration = t - float(self.single_start[side])  # type: ignore[arg-type]
                if duration >= MIN_SINGLE_S:  # a bounce keeps the last step's duration
                    self.single_duration[side] = duration
            if was is not None and contact[side] and not was[side]:
                ev[f"touchdown_{side}"] = True
        self._was = dict(contact)
        return ev

    def due(self, phase: str, t: float, lead: float, contact: dict[str, bool], ev: dict[str, bool]) -> bool:
        """Whether an event of duration ``2 lead`` (s) centred on ``phase`` starts at this tick."""
        kind, side = phase.split("_", 1)
        if kind == "touchdown":
            return bool(ev.get(f"touchdown_{side}"))
        other = "right" if side == "left" else "left"
        start, dur = self.single_start[side], self.single_duration[side]
        if start is None or dur is None or not (contact[side] and not contact[other]):
            return False
        at = start + 0.5 * dur - lead
        return at - 1e-9 <= t < at + PHASE_WINDOW_S
