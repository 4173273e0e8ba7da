"""Observation builder and policy core: hand-computed vectors, joint-order mapping, parity with holosoma."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from onnx_models import make_linear_policy

from humanoid_control.model.robot_config import load_robot_config
from humanoid_policy.manifest import load_manifest_yaml, load_policy
from humanoid_policy.policy_core import GaitClock, PolicyCore, projected_gravity

ROBOT = load_robot_config("g1")
NAMES = ROBOT.joint_names
N = len(NAMES)
DATA = Path(__file__).parent / "data"


def quat_about_y(angle: float) -> np.ndarray:
    return np.array([math.cos(angle / 2), 0.0, math.sin(angle / 2), 0.0])


def test_projected_gravity_matches_rotation_matrix() -> None:
    # pitched forward by 0.3 rad about y: gravity in the body frame tilts toward +x
    g = projected_gravity(quat_about_y(0.3))
    assert g == pytest.approx([math.sin(0.3), 0.0, -math.cos(0.3)], abs=1e-12)
    assert projected_gravity(np.array([1.0, 0, 0, 0])) == pytest.approx([0, 0, -1])


def test_observation_equals_hand_computed_vector() -> None:
    """holosoma G1 ppo layout, first step with a non-zero command, every term computed by hand."""
    m = load_policy("holosoma/g1_ppo", ROBOT)
    core = PolicyCore(m, ROBOT)
    rng = np.random.default_rng(7)
    q = ROBOT.array("default") + rng.normal(0, 0.1, N)
    dq = rng.normal(0, 1.0, N)
    gyro = np.array([0.1, -0.2, 0.3])
    quat = quat_about_y(0.1)
    cmd = np.array([0.3, -0.2, 0.4])
    step = core.step(q, dq, gyro, quat, cmd)
    dt = 2 * math.pi / 50
    phase = np.array([dt, -math.pi + dt])  # started at [0, pi], advanced one step, wrapped to [-pi, pi)
    expected = np.concatenate(
        [
            np.zeros(N),  # actions (alphabetical order: actions first)
            0.25 * gyro,  # base_ang_vel
            [0.4],  # command_ang_vel
            [0.3, -0.2],  # command_lin_vel
            np.cos(phase),  # cos_phase
            q - m.default_pose,  # dof_pos
            0.05 * dq,  # dof_vel
            [math.sin(0.1), 0.0, -math.cos(0.1)],  # projected_gravity
            np.sin(phase),  # sin_phase
        ]
    )
    assert step.obs.dtype == np.float32 and step.obs.shape == (100,)
    np.testing.assert_allclose(step.obs, expected, atol=1e-6)
    # the action feeds back as the next step's first term, and targets are default + 0.25 action
    assert step.finite
    np.testing.assert_allclose(step.q_target, m.default_pose + 0.25 * step.action, atol=1e-12)
    step2 = core.step(q, dq, gyro, quat, cmd)
    np.testing.assert_allclose(step2.obs[:N], step.action.astype(np.float32), atol=1e-7)


def test_commands_are_clipped_to_the_manifest_ranges() -> None:
    core = PolicyCore(load_policy("holosoma/g1_ppo", ROBOT), ROBOT)
    step = core.step(
        ROBOT.array("default"),
        np.zeros(N),
        np.zeros(3),
        np.array([1.0, 0, 0, 0]),
        np.array([3.0, -2.0, np.nan]),
    )
    assert step.command.tolist() == [1.0, -1.0, 0.0]
    sl = core.manifest.term_slices()
    assert step.obs[sl["command_lin_vel"]].tolist() == [1.0, -1.0]


def test_gait_clock_stands_and_restarts() -> None:
    m = load_policy("holosoma/g1_ppo", ROBOT)
    clock = GaitClock(m.phase, 50.0)
    zero, walk = np.zeros(3), np.array([0.5, 0.0, 0.0])
    assert clock.advance(zero).tolist() == [math.pi, math.pi]
    assert clock.advance(zero).tolist() == [math.pi, math.pi]
    assert clock.advance(walk).tolist() == [0.0, math.pi]  # walking starts: reset, no advance this step
    p = clock.advance(walk)
    assert p == pytest.approx([2 * math.pi / 50, -math.pi + 2 * math.pi / 50])
    for _ in range(49):
        p = clock.advance(walk)
    assert p == pytest.approx([0.0, math.pi], abs=1e-9) or p == pytest.approx([0.0, -math.pi], abs=1e-9)


def _permuted_manifest(tmp_path: Path, perm: np.ndarray, bias: np.ndarray) -> Path:
    obs_size = 3 + 3 + 3 + 3 * N
    make_linear_policy(tmp_path / "const.onnx", np.zeros((obs_size, N)), bias)
    names = [NAMES[i] for i in perm]
    default = {n: float(ROBOT.array("default")[NAMES.index(n)]) for n in names}
    doc = {
        "format": "humanoid_policy/v1",
        "onnx": {"file": "const.onnx"},
        "rate_hz": 50,
        "joint_names": names,
        "default_pose": [default[n] for n in names],
        "action": {"scale": 0.5},
        "gains": {"kp": [10.0 + i for i in range(N)], "kd": [1.0] * N},
        "observation": {
            "terms": [
                "base_ang_vel",
                "projected_gravity",
                "velocity_command",
                "dof_pos",
                "dof_vel",
                "actions",
            ]
        },
    }
    path = tmp_path / "permuted.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_permuted_joint_order_maps_actions_and_observations_to_the_right_joints(tmp_path: Path) -> None:
    perm = np.random.default_rng(11).permutation(N)
    bias = 0.01 * np.arange(1, N + 1)  # policy output k = 0.01 (k + 1), whatever the input
    m = load_manifest_yaml(_permuted_manifest(tmp_path, perm, bias))
    core = PolicyCore(m, ROBOT)
    q = ROBOT.array("default") + 0.001 * np.arange(N)  # robot order: joint i offset by 0.001 i
    step = core.step(q, np.zeros(N), np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros(3))
    for k, name in enumerate(m.joint_names):
        i = NAMES.index(name)
        assert step.q_target[i] == pytest.approx(ROBOT.array("default")[i] + 0.5 * bias[k], abs=1e-6), name
        assert core.kp[i] == 10.0 + k  # the policy's gain for that joint goes to that joint
        # dof_pos in the observation is in the policy's order
        assert step.obs[9 + k] == pytest.approx(0.001 * i, abs=1e-6)


@pytest.mark.parametrize("policy", ["ppo", "fastsac"])
def test_parity_with_holosoma_inference(policy: str) -> None:
    """Same recorded states through this stack and through holosoma-inference's own LocomotionPolicy.

    Reference vectors: ``scripts/holosoma_reference.py`` (holosoma-inference 0.1.3 in its own venv) on
    ``test/data/holosoma_states_<policy>.npz`` (recorded by ``scripts/record_policy_states.py``).
    """
    states = np.load(DATA / f"holosoma_states_{policy}.npz")
    ref = np.load(DATA / f"holosoma_reference_{policy}.npz")
    m = load_policy(f"holosoma/g1_{policy}", ROBOT)
    assert list(ref["dof_names"]) == list(m.joint_names)
    np.testing.assert_allclose(ref["kp"], m.kp, atol=1e-9)
    np.testing.assert_allclose(ref["kd"], m.kd, atol=1e-9)
    np.testing.assert_allclose(ref["default_dof_angles"], m.default_pose, atol=1e-12)
    core = PolicyCore(m, ROBOT)
    idx = m.robot_indices(ROBOT)
    n = len(states["q"])
    assert n >= 100 and len(ref["obs"]) == n
    walking = 0
    for k in range(n):
        q = ROBOT.array("default").copy()
        dq = np.zeros(N)
        q[idx], dq[idx] = states["q"][k], states["dq"][k]
        step = core.step(q, dq, states["gyro"][k], states["quat_wxyz"][k], states["cmd"][k])
        np.testing.assert_allclose(step.obs, ref["obs"][k], atol=1e-6, err_msg=f"obs, step {k}")
        np.testing.assert_allclose(step.action, ref["action"][k], atol=1e-6, err_msg=f"action, step {k}")
        np.testing.assert_allclose(step.q_target[idx], ref["q_target"][k], atol=1e-6, err_msg=f"target {k}")
        np.testing.assert_allclose(step.phase, ref["phase"][k], atol=1e-9)
        walking += bool(np.any(states["cmd"][k] != 0))
    assert 0 < walking < n  # the recording covers standing and walking (phase reset included)
