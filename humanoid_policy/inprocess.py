"""Single-process policy loop: MuJoCo backend + driver core + policy runner, no ROS.

The same pure cores the ROS nodes use (``DriverCore``, ``PolicyRunner``) in one loop, for benchmarks, for
recording states (the parity test data) and for quick experiments. It is *not* the evaluation path: the
sim-to-sim evaluation runs the ROS graph (``humanoid-eval locomotion``).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from humanoid_control.driver.driver_core import DriverCore, DriverSettings, JointCommand
from humanoid_control.hardware.mujoco_sim import MujocoBackend, tilt_from_quat
from humanoid_control.model.robot_config import RobotConfig
from humanoid_policy.manifest import PolicyManifest
from humanoid_policy.policy_core import PolicyCore
from humanoid_policy.runner import ImuSample, PolicyRunner, RunnerSettings, RunnerState


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
    ``hold_before_run_s`` makes the policy's own gains hold the default pose that long before it starts.
    """
    backend = MujocoBackend(
        robot,
        imu_noise=imu_noise,
        friction_patch=friction_patch,  # type: ignore[arg-type]
    )
    if model_hook is not None:
        model_hook(backend.model)
    driver = DriverCore(robot, DriverSettings(rate_hz=rate_hz, ramp_duration=settle_s))
    core = PolicyCore(manifest, robot)
    driver.set_command_gains(gain_scale * core.kp, gain_scale * core.kd, name=manifest.name)
    pending: deque[JointCommand] = deque()
    hold_until: float | None = None
    runner = PolicyRunner(core, RunnerSettings())
    runner.gains_ready = True
    dt = 1.0 / rate_hz
    log = InProcessLog()
    run_t0: float | None = None
    total = settle_s + runner.settings.ramp_s + sum(d for _, d, _ in script)
    while backend.time < total + 0.5 * dt:
        s = backend.read()
        t = s.stamp
        if driver.mode.value in ("hold", "active") and hold_before_run_s > 0:
            hold_until = t + hold_before_run_s if hold_until is None else hold_until
            if t < hold_until:  # the policy's soft gains hold the default pose first (no policy yet)
                z = np.zeros(robot.num_joints)
                driver.submit(JointCommand(q=core.default_target.copy(), dq=z, tau_ff=z, stamp=t))
                driver_cmd = driver.update(s.q, s.dq, tilt_from_quat(s.imu_quat))
                backend.write(driver_cmd)
                backend.advance(dt)
                continue
        if driver.mode.value in ("hold", "active"):
            sample = ImuSample(t, s.imu_quat, s.gyro)
            runner.set_imu(imu_hook(sample, backend) if imu_hook is not None else sample)
            if runner.state == RunnerState.RUN and run_t0 is None:
                run_t0 = t
            cmd = command_at(script, t - run_t0) if run_t0 is not None else np.zeros(3)
            runner.set_command(cmd, t)
            t0 = time.perf_counter()
            out = runner.update(t, s.q, s.dq, driver.mode.value)
            if out.policy_step is not None:
                log.inference_s.append(time.perf_counter() - t0)
                st = out.policy_step
                log.step_t.append(t)
                log.step_q.append(s.q.copy())
                log.step_dq.append(s.dq.copy())
                log.step_quat.append(s.imu_quat.copy())
                log.step_gyro.append(s.gyro.copy())
                log.step_cmd.append(cmd.copy())
                log.step_obs.append(st.obs.copy())
                log.step_action.append(st.action.copy())
                log.step_target.append(st.q_target.copy())
            if out.q_target is not None:
                z = np.zeros(robot.num_joints)
                pending.append(JointCommand(q=out.q_target, dq=z, tau_ff=z, stamp=t))
            while len(pending) > delay_ticks:
                driver.submit(pending.popleft())
        command = driver.update(s.q, s.dq, tilt_from_quat(s.imu_quat))
        backend.write(command)
        truth = backend.ground_truth()
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
        backend.advance(dt)
    log.driver_mode = driver.mode.value
    backend.close()
    return log
