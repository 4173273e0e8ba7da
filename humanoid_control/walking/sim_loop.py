"""In-process closed loop: :class:`~.controller.WalkingController` on the MuJoCo backend with ground-truth
state (no ROS), for tests and tuning. The acceptance runs go through the ROS graph with the estimator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from humanoid_control.hardware.mujoco_sim import MujocoBackend
from humanoid_control.hardware.push import PushLimits, validate_push
from humanoid_control.hardware.types import LowLevelCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.walking.controller import WalkingController
from humanoid_control.wbc.command import CommandMode
from humanoid_control.wbc.sim_loop import Push, ground_truth_state


@dataclass
class WalkLog:
    """Per tick: time (s), base position (3) and yaw (rad), base velocity in the base frame (3), CoM (3),
    CoM reference (3), DCM and its reference (2), ZMP commanded and planned (2), mode, QP status."""

    time: list[float] = field(default_factory=list)
    base: list[np.ndarray] = field(default_factory=list)
    yaw: list[float] = field(default_factory=list)
    velocity: list[np.ndarray] = field(default_factory=list)
    yaw_rate: list[float] = field(default_factory=list)
    com: list[np.ndarray] = field(default_factory=list)
    com_ref: list[np.ndarray] = field(default_factory=list)
    dcm: list[np.ndarray] = field(default_factory=list)
    dcm_ref: list[np.ndarray] = field(default_factory=list)
    zmp_cmd: list[np.ndarray] = field(default_factory=list)
    zmp_ref: list[np.ndarray] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    qp_ok: list[bool] = field(default_factory=list)
    swing_force: list[float] = field(default_factory=list)
    fell: bool = False


def run_walking(
    config: RobotConfig,
    seconds: float,
    command: Callable[[float], tuple[float, float, float]],
    push: Push | None = None,
    gain_profile: str = "low",
    controller: WalkingController | None = None,
) -> WalkLog:
    """Walk in MuJoCo for ``seconds`` following ``command(t) -> (vx, vy, wz)``; optional push."""
    backend = MujocoBackend(config, initial_joint_positions=config.array("default"))
    ctl = controller or WalkingController(config)
    gains = config.gain_profile(gain_profile)
    dt = ctl.dt
    log = WalkLog()
    limits = PushLimits(timestep=config.simulation.timestep)
    for k in range(round(seconds / dt)):
        t = k * dt
        gt = backend.ground_truth()
        q, v = ground_truth_state(backend, ctl.pmodel, gt)
        ctl.set_command(*command(t))
        cmd = ctl.step(q, v)
        backend.write(LowLevelCommand(cmd.q, cmd.dq, gains.kp, gains.kd, cmd.tau_ff))
        if push is not None and k == round(push.start / dt):
            backend.push(validate_push((*push.force, 0.0), push.duration, limits))
        backend.advance(dt)
        st = ctl.status
        log.time.append(t)
        log.base.append(np.array(gt.position, dtype=float))
        w, x, y, z = gt.quat
        log.yaw.append(float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))))
        log.velocity.append(np.array(gt.linear_velocity_body, dtype=float))
        log.yaw_rate.append(float(gt.angular_velocity_body[2]))
        log.com.append(st.com)
        log.com_ref.append(st.com_ref)
        log.dcm.append(st.dcm)
        log.dcm_ref.append(st.dcm_ref)
        log.zmp_cmd.append(st.zmp_cmd)
        log.zmp_ref.append(st.zmp_ref)
        log.modes.append(st.mode.value)
        swinging = [side for side, down in st.contacts.items() if not down]
        wrenches = backend.contact_wrenches() if swinging else {}
        log.swing_force.append(max((float(wrenches[side].force[2]) for side in swinging), default=0.0))
        log.qp_ok.append(ctl.last_output is not None and ctl.last_output.ok)
        if cmd.mode == CommandMode.DAMPING or backend.base_height() < config.simulation.fall_height:
            log.fell = True
            break
    return log
