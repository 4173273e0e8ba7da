"""Policy runner state machine (pure) and the in-process loop: deploy states, faults, walking physics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from onnx_models import make_linear_policy

from humanoid_control.model.robot_config import load_robot_config
from humanoid_policy.inprocess import run_in_process
from humanoid_policy.manifest import load_manifest_yaml, load_policy
from humanoid_policy.policy_core import PolicyCore
from humanoid_policy.runner import ImuSample, PolicyRunner, RunnerSettings, RunnerState

ROBOT = load_robot_config("g1")
N = ROBOT.num_joints
UPRIGHT = np.array([1.0, 0.0, 0.0, 0.0])


def nan_manifest(tmp_path: Path) -> Path:
    """A policy whose output is NaN (holosoma-shaped input, so it loads like the real ones)."""
    bias = np.full(N, np.nan)
    make_linear_policy(
        tmp_path / "nan.onnx", np.zeros((100, N)), bias, input_name="actor_obs", output_name="action"
    )
    src = yaml.safe_load(Path(load_policy("holosoma/g1_ppo").source).read_text())
    ref = load_policy("holosoma/g1_ppo")
    src.update(
        {
            "name": "test/nan",
            "onnx": {"file": "nan.onnx"},
            "joint_names": list(ref.joint_names),
            "gains": {"kp": ref.kp.tolist(), "kd": ref.kd.tolist()},
            "command_ranges": {"lin_vel_x": [-1, 1], "lin_vel_y": [-1, 1], "ang_vel_z": [-1, 1]},
        }
    )
    src.pop("from_onnx_metadata")
    path = tmp_path / "nan.yaml"
    path.write_text(yaml.safe_dump(src, sort_keys=False))
    return path


def make_runner(manifest_name: str = "holosoma/g1_ppo", **settings: object) -> PolicyRunner:
    runner = PolicyRunner(PolicyCore(load_policy(manifest_name, ROBOT), ROBOT), RunnerSettings(**settings))
    runner.gains_ready = True
    return runner


def test_waits_for_state_gains_and_driver_then_runs_at_policy_rate() -> None:
    runner = make_runner()
    q, dq = ROBOT.array("default"), np.zeros(N)
    assert runner.update(0.0, q, dq, "hold").q_target is None  # no IMU yet
    runner.set_imu(ImuSample(0.0, UPRIGHT, np.zeros(3)))
    assert runner.update(0.0, q, dq, None).q_target is None  # driver mode unknown
    assert runner.update(0.0, q, dq, "ramp").q_target is None  # driver still ramping
    assert runner.state == RunnerState.WAIT_STATE
    steps = 0
    for k in range(50):  # 0.1 s at 500 Hz
        t = 0.002 * k
        runner.set_imu(ImuSample(t, UPRIGHT, np.zeros(3)))
        out = runner.update(t, q, dq, "hold" if k == 0 else "active")
        assert out.q_target is not None  # a command for every joint state (lockstep, watchdog)
        steps += out.policy_step is not None
    assert runner.state == RunnerState.RUN
    assert steps == 5  # 50 Hz


def test_ramps_itself_when_the_driver_is_not_holding() -> None:
    runner = make_runner(ramp_s=0.5)
    q0 = ROBOT.array("default") + 0.2
    runner.set_imu(ImuSample(0.0, UPRIGHT, np.zeros(3)))
    out = runner.update(0.0, q0, np.zeros(N), "active")
    assert runner.state == RunnerState.RAMP
    np.testing.assert_allclose(out.q_target, q0)
    runner.set_imu(ImuSample(0.25, UPRIGHT, np.zeros(3)))
    mid = runner.update(0.25, q0, np.zeros(N), "active").q_target
    np.testing.assert_allclose(mid, q0 + 0.5 * (runner.core.default_target - q0))
    runner.set_imu(ImuSample(0.5, UPRIGHT, np.zeros(3)))
    runner.update(0.5, q0, np.zeros(N), "active")
    assert runner.state == RunnerState.RUN


def test_stale_imu_faults_and_stops_the_command_stream() -> None:
    runner = make_runner(max_imu_age_s=0.05)
    q = ROBOT.array("default")
    runner.set_imu(ImuSample(0.0, UPRIGHT, np.zeros(3)))
    assert runner.update(0.0, q, np.zeros(N), "hold").q_target is not None
    assert runner.update(0.04, q, np.zeros(N), "active").q_target is not None
    out = runner.update(0.06, q, np.zeros(N), "active")
    assert out.q_target is None and runner.state == RunnerState.FAULT
    assert "stale IMU" in runner.reason
    # latched: fresh data does not resume by itself
    runner.set_imu(ImuSample(0.08, UPRIGHT, np.zeros(3)))
    assert runner.update(0.08, q, np.zeros(N), "active").q_target is None


def test_bad_imu_samples_are_refused() -> None:
    runner = make_runner()
    assert not runner.set_imu(ImuSample(0.0, np.array([np.nan, 0, 0, 0]), np.zeros(3)))
    assert not runner.set_imu(ImuSample(0.0, UPRIGHT, np.array([0.0, np.inf, 0.0])))
    assert not runner.set_imu(ImuSample(0.0, np.zeros(4), np.zeros(3)))
    assert runner.imu is None


def test_nan_action_faults(tmp_path: Path) -> None:
    manifest = load_manifest_yaml(nan_manifest(tmp_path))
    runner = PolicyRunner(PolicyCore(manifest, ROBOT))
    runner.gains_ready = True
    runner.set_imu(ImuSample(0.0, UPRIGHT, np.zeros(3)))
    out = runner.update(0.0, ROBOT.array("default"), np.zeros(N), "hold")
    assert out.q_target is None and out.policy_step is not None and not out.policy_step.finite
    assert runner.state == RunnerState.FAULT and "non-finite policy action" in runner.reason


def test_stop_and_start() -> None:
    runner = make_runner()
    q = ROBOT.array("default")
    runner.set_imu(ImuSample(0.0, UPRIGHT, np.zeros(3)))
    runner.update(0.0, q, np.zeros(N), "hold")
    ok, _ = runner.stop()
    assert ok and runner.state == RunnerState.HOLD
    assert runner.update(0.002, q, np.zeros(N), "active").q_target is None  # the driver takes over
    ok, _ = runner.start()
    assert ok and runner.state == RunnerState.WAIT_STATE
    runner.set_imu(ImuSample(0.01, UPRIGHT, np.zeros(3)))
    assert runner.update(0.01, q, np.zeros(N), "ramp").q_target is None  # driver ramping back to hold
    assert runner.update(0.01, q, np.zeros(N), "hold").q_target is not None
    assert runner.state == RunnerState.RUN


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["holosoma/g1_ppo", "holosoma/g1_fastsac"])
def test_policy_walks_in_process(policy: str) -> None:
    """Same cores, one process: the holosoma policy walks forward 0.5 m/s and turns without falling."""
    manifest = load_policy(policy, ROBOT)
    script = [
        ("stand", 1.0, (0.0, 0.0, 0.0)),
        ("forward", 4.0, (0.5, 0.0, 0.0)),
        ("turn", 3.0, (0.0, 0.0, 0.5)),
    ]
    log = run_in_process(manifest, ROBOT, script)
    assert not log.fell and log.driver_mode == "active"
    t = np.array(log.t) - log.step_t[0]
    v = np.array(log.lin_vel_body)
    w = np.array(log.ang_vel_body)
    fwd = (t > 2.0) & (t < 5.0)
    turn = (t > 6.0) & (t < 8.0)
    assert v[fwd, 0].mean() > 0.3
    assert w[turn, 2].mean() > 0.35
    pos = np.array(log.base_pos)
    assert pos[-1, 0] > 1.0  # walked forward more than a metre


def test_stale_velocity_command_counts_as_zero() -> None:
    runner = make_runner(command_timeout_s=1.0)
    q = ROBOT.array("default")
    runner.set_command(np.array([0.5, 0.0, 0.0]), 0.0)
    seen = []
    for k in range(0, 1000, 10):  # 2 s at the policy rate
        t = 0.002 * k
        runner.set_imu(ImuSample(t, UPRIGHT, np.zeros(3)))
        out = runner.update(t, q, np.zeros(N), "hold" if k == 0 else "active")
        if out.policy_step is not None:
            seen.append((t, out.policy_step.command[0]))
    assert all(c == 0.5 for t, c in seen if t <= 1.0)
    assert all(c == 0.0 for t, c in seen if t > 1.0 + 1e-9)


def test_command_silence_under_the_mode_manager_hands_back_to_the_driver() -> None:
    """command_timeout_action=hold: a /cmd_vel stream that stops (the mode manager died) stops the policy."""
    runner = make_runner(
        command_timeout_s=0.5, command_timeout_action="hold", hold_after_s=0.8, autostart=False
    )
    q = ROBOT.array("default")
    runner.set_imu(ImuSample(0.0, UPRIGHT, np.zeros(3)))
    runner.update(0.0, q, np.zeros(N), "hold")
    assert runner.state == RunnerState.HOLD
    runner.start()
    for k in range(0, 500, 10):  # no command yet: no silence to count, the policy runs on with zero
        t = 0.002 * k
        runner.set_imu(ImuSample(t, UPRIGHT, np.zeros(3)))
        runner.update(t, q, np.zeros(N), "hold" if k == 0 else "active")
    assert runner.state == RunnerState.RUN and not runner.hold_requested
    runner.set_command(np.array([0.3, 0.0, 0.0]), 1.0)
    seen = []
    for k in range(500, 1000, 10):
        t = 0.002 * k
        runner.set_imu(ImuSample(t, UPRIGHT, np.zeros(3)))
        out = runner.update(t, q, np.zeros(N), "active")
        if out.policy_step is not None:
            seen.append((t, out.policy_step.command[0]))
    # a zero command from 0.5 s of silence on (the policy stops walking), the hand-back after 0.8 s
    assert all(c == 0.0 for t, c in seen if t > 1.5 + 1e-9) and any(t > 1.5 for t, _ in seen)
    assert runner.state == RunnerState.HOLD and runner.hold_requested
    assert "no /cmd_vel for 0.8" in runner.reason
