"""A learned policy in one process: the in-process runner (:mod:`humanoid_control.controllers.inprocess`) with
the :class:`~humanoid_policy.controller.PolicyController`, logged for benchmarks, for recording states (the
parity test data) and for quick experiments. No ROS. It is *not* the evaluation path: the sim-to-sim
evaluation runs the ROS graph (``humanoid-eval locomotion``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from humanoid_control.controllers.inprocess import InProcessRunner, RunnerSettings
from humanoid_control.controllers.interface import ControllerState
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.hardware.mujoco_sim import MujocoBackend, tilt_from_quat
from humanoid_control.model.robot_config import RobotConfig
from humanoid_policy.controller import PolicyController
from humanoid_policy.manifest import PolicyManifest
from humanoid_policy.runner import ImuSample, RunnerState


@dataclass
class InProcessLog:
    """Per-tick log of :func:`run_in_process` (robot order; policy steps logged separately)."""

    t: list[float] = field(default_factory=list)
    base_pos: list[np.ndarray] = field(default_factory=list)
    base_quat: list[np.ndarray] = field(default_factory=list)
    lin_vel_body: list[np.ndarray] = field(default_factory=list)
    ang_vel_body: list[np.ndarray] = field(default_factory=list)
    step_t: list[float] = field(default_factory=list)
    step_q: list[np.ndarray] = field(default_factory=list)
    step_dq: list[np.ndarray] = field(default_factory=list)
    step_quat: list[np.ndarray] = field(default_factory=list)
    step_gyro: list[np.ndarray] = field(default_factory=list)
    step_cmd: list[np.ndarray] = field(default_factory=list)
    step_obs: list[np.ndarray] = field(default_factory=list)
    step_action: list[np.ndarray] = field(default_factory=list)
    step_target: list[np.ndarray] = field(default_factory=list)
    inference_s: list[float] = field(default_factory=list)
    # per tick, what a state estimator sees (IMU, encoders, torques) and the simulator's contact truth
    imu_gyro: list[np.ndarray] = field(default_factory=list)
    imu_accel: list[np.ndarray] = field(default_factory=list)
    imu_quat: list[np.ndarray] = field(default_factory=list)
    joint_q: list[np.ndarray] = field(default_factory=list)
    joint_dq: list[np.ndarray] = field(default_factory=list)
    joint_tau: list[np.ndarray] = field(default_factory=list)
    contact_fz: list[np.ndarray] = field(default_factory=list)
    fell: bool = False
    driver_mode: str = ""


def command_at(script: list[tuple[str, float, tuple[float, float, float]]], t: float) -> np.ndarray:
    """The command of a ``[(segment, duration_s, (vx, vy, wz)), ...]`` script at time ``t`` (s from start).

    Zero before the start and after the end.
    """
    start = 0.0
    for _name, duration, cmd in script:
        if start <= t < start + duration:
            return np.array(cmd, dtype=float)
        start += duration
    return np.zeros(3)


def run_in_process(
    manifest: PolicyManifest,
    robot: RobotConfig,
    script: list[tuple[str, float, tuple[float, float, float]]],
    rate_hz: float = 500.0,
    settle_s: float = 2.0,
    model_hook: Callable[[object], None] | None = None,
    gain_scale: float = 1.0,
    imu_hook: Callable[[ImuSample, object], ImuSample] | None = None,
    delay_ticks: int = 0,
    hold_before_run_s: float = 0.0,
    imu_noise: object | None = None,
    record_sensors: bool = False,
    friction_patch: object | None = None,
) -> InProcessLog:
    """Boot ramp of the driver (``settle_s``), then ``script``; returns the log.

    Experiment hooks (the sim-to-sim sensitivity study, ``scripts/sim2sim_sensitivity.py``): ``model_hook``
    edits the MuJoCo model, ``gain_scale`` scales the policy's PD gains, ``imu_hook`` rewrites the IMU sample
    the policy sees (given the backend), ``delay_ticks`` delays commands by whole loop ticks, and
    ``hold_before_run_s`` makes the policy's own gains hold the default pose that long before it starts
    (the runner's own ramp, which holds with the robot's stand gains, is then skipped: ``ramp_s`` 0).
    """
    backend = MujocoBackend(
        robot,
        imu_noise=imu_noise,
        friction_patch=friction_patch,  # type: ignore[arg-type]
    )
    if model_hook is not None:
        model_hook(backend.model)
    controller = PolicyController(manifest)
    runner = InProcessRunner(
        robot,
        controller,
        {"gain_scale": gain_scale, **({"ramp_s": 0.0} if hold_before_run_s > 0 else {})},
        RunnerSettings(
            rate_hz=rate_hz, ramp_s=settle_s, delay_ticks=delay_ticks, autostart=hold_before_run_s <= 0
        ),
        backend=backend,
    )
    if imu_hook is not None:

        def rewrite(state: ControllerState, backend: object) -> ControllerState:
            sample = imu_hook(ImuSample(state.stamp, state.imu_quat, state.gyro), backend)
            state.imu_quat, state.gyro = sample.quat_wxyz, sample.gyro
            return state

        runner.state_hook = rewrite
    policy = controller.runner
    assert policy is not None and controller.core is not None
    dt = 1.0 / rate_hz
    log = InProcessLog()
    run_t0: float | None = None
    hold_until: float | None = None
    total = settle_s + policy.settings.ramp_s + hold_before_run_s + sum(d for _, d, _ in script)
    while backend.time < total + 0.5 * dt:
        t = runner.time
        if (
            hold_before_run_s > 0
            and not runner.host.active
            and runner.driver.mode.value in ("hold", "active")
        ):
            hold_until = t + hold_before_run_s if hold_until is None else hold_until
            if t < hold_until:  # the policy's soft gains hold the default pose first (no policy yet)
                z = np.zeros(robot.num_joints)
                runner.driver.submit(
                    JointCommand(q=controller.core.default_target.copy(), dq=z, tau_ff=z, stamp=t)
                )
            else:
                runner.start()
        if policy.state == RunnerState.RUN and run_t0 is None:
            run_t0 = t
        cmd = command_at(script, t - run_t0) if run_t0 is not None else np.zeros(3)
        runner.set_cmd_vel(*cmd)
        tick = runner.step()
        s = tick.sensors
        st = controller.last_step
        if st is not None:
            log.inference_s.append(runner.host.update_us_last * 1e-6)
            log.step_t.append(t)
            log.step_q.append(s.q.copy())
            log.step_dq.append(s.dq.copy())
            log.step_quat.append(tick.state.imu_quat.copy())
            log.step_gyro.append(tick.state.gyro.copy())
            log.step_cmd.append(cmd.copy())
            log.step_obs.append(st.obs.copy())
            log.step_action.append(st.action.copy())
            log.step_target.append(st.q_target.copy())
        truth = tick.truth
        log.t.append(t)
        log.base_pos.append(truth.position.copy())
        log.base_quat.append(truth.quat.copy())
        log.lin_vel_body.append(truth.linear_velocity_body.copy())
        log.ang_vel_body.append(truth.angular_velocity_body.copy())
        if record_sensors:
            log.imu_gyro.append(s.gyro.copy())
            log.imu_accel.append(s.accel.copy())
            log.imu_quat.append(s.imu_quat.copy())
            log.joint_q.append(s.q.copy())
            log.joint_dq.append(s.dq.copy())
            log.joint_tau.append(s.tau.copy())
            log.contact_fz.append(np.array([truth.contacts[side].force[2] for side in ("left", "right")]))
        if truth.position[2] < robot.simulation.fall_height or tilt_from_quat(truth.quat) > math.radians(60):
            log.fell = True
            break
    log.driver_mode = runner.driver.mode.value
    runner.close()
    return log
