"""Policy manifests: the three loaders, and every contract mismatch caught at load time."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from onnx_models import make_linear_policy

from humanoid_control.model.robot_config import load_robot_config
from humanoid_policy.manifest import (
    ManifestError,
    find_policy_file,
    load_holosoma_onnx,
    load_isaaclab_deploy,
    load_manifest_yaml,
    load_policy,
)

ROBOT = load_robot_config("g1")
NAMES = ROBOT.joint_names
N = len(NAMES)


def write_manifest(tmp_path: Path, obs_size: int = 3 + 3 + 3 + 2 * N + N, **overrides: object) -> Path:
    """A hand-written manifest (Isaac-style term list) with a zero linear ONNX of matching size."""
    make_linear_policy(tmp_path / "policy.onnx", np.zeros((obs_size, N)), np.zeros(N))
    doc: dict[str, object] = {
        "format": "humanoid_policy/v1",
        "name": "test/linear",
        "onnx": {"file": "policy.onnx"},
        "rate_hz": 50,
        "joint_names": list(NAMES),
        "default_pose": {".*_knee_joint": 0.3, ".*": 0.0},
        "action": {"scale": 0.5},
        "gains": {"kp": {".*": 50.0}, "kd": {".*": 2.0}},
        "command_ranges": {"lin_vel_x": [-1, 1], "lin_vel_y": [-0.5, 0.5], "ang_vel_z": [-1, 1]},
        "observation": {
            "terms": [
                {"name": "base_ang_vel", "scale": 0.25},
                "projected_gravity",
                "velocity_command",
                "dof_pos",
                {"name": "dof_vel", "scale": 0.05},
                "actions",
            ]
        },
    }
    doc.update(overrides)
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_holosoma_policies_load_with_metadata_and_convention() -> None:
    for name in ("holosoma/g1_ppo", "holosoma/g1_fastsac"):
        m = load_policy(name, ROBOT)
        assert m.obs_size == 100 and m.num_joints == 29 and m.rate_hz == 50.0
        # holosoma concatenates terms alphabetically
        assert [t.name for t in m.terms] == sorted(t.name for t in m.terms)
        assert m.term_slices()["dof_pos"] == slice(37, 66)
        assert m.joint_names == tuple(NAMES)
        assert m.kp[NAMES.index("left_knee_joint")] == pytest.approx(99.098427777)
        assert m.command_ranges["ang_vel_z"] == (-1.0, 1.0)
        assert m.default_pose[NAMES.index("right_shoulder_roll_joint")] == -0.2
        assert m.phase is not None and m.phase.standing == (math.pi, math.pi)
        assert m.action_clip == 100.0


def test_bare_holosoma_onnx_path_loads_same_contract() -> None:
    named = load_policy("holosoma/g1_ppo", ROBOT)
    bare = load_holosoma_onnx(named.onnx_path)
    assert bare.obs_size == named.obs_size
    assert np.array_equal(bare.kp, named.kp) and np.array_equal(bare.default_pose, named.default_pose)
    assert [t.name for t in bare.terms] == [t.name for t in named.terms]


def test_hand_written_manifest(tmp_path: Path) -> None:
    m = load_manifest_yaml(write_manifest(tmp_path))
    assert m.obs_size == 9 + 3 * N
    assert [t.kind for t in m.terms][:3] == ["base_ang_vel", "projected_gravity", "velocity_command"]
    assert m.default_pose[NAMES.index("left_knee_joint")] == 0.3
    assert np.all(m.kp == 50.0) and m.action_scale[0] == 0.5
    m.check_robot(ROBOT)


def test_observation_size_mismatch_names_both_sizes(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, obs_size=90)
    with pytest.raises(ManifestError) as err:
        load_manifest_yaml(path)
    assert "96" in str(err.value) and "90" in str(err.value)


def test_unknown_joint_is_refused_at_load(tmp_path: Path) -> None:
    names = [*NAMES[:-1], "tail_joint"]
    m = load_manifest_yaml(write_manifest(tmp_path, joint_names=names))
    with pytest.raises(ManifestError, match="tail_joint"):
        m.check_robot(ROBOT)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"gains": {"kp": {".*": 50.0}}}, "gains missing"),
        ({"gains": {"kp": [1.0] * 5, "kd": [1.0] * 5}}, "kp has 5 values"),
        ({"observation": {"terms": ["base_ang_vel", "foot_height"]}}, "unknown kind 'foot_height'"),
        ({"joint_names": [*NAMES[:-1], NAMES[0]]}, "duplicates"),
        ({"onnx": {"file": "missing.onnx"}}, "cannot find the policy ONNX"),
        ({"rate_hz": 0}, "rate_hz"),
        ({"command_ranges": {"lin_vel_x": [1.0, -1.0]}}, "not an interval"),
        ({"default_pose": [0.0] * 3}, "default_pose has 3 values"),
        ({"format": "other/v9"}, "unknown manifest format"),
    ],
)
def test_manifest_errors_are_caught_at_load(tmp_path: Path, override: dict, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        load_manifest_yaml(write_manifest(tmp_path, **override))


def test_phase_terms_need_a_clock(tmp_path: Path) -> None:
    terms = [
        "base_ang_vel",
        "projected_gravity",
        "velocity_command",
        "dof_pos",
        "dof_vel",
        "actions",
        "sin_phase",
    ]
    path = write_manifest(tmp_path, obs_size=9 + 3 * N + 2, observation={"terms": terms})
    with pytest.raises(ManifestError, match="phase clock"):
        load_manifest_yaml(path)


def test_default_pose_outside_limits_is_refused(tmp_path: Path) -> None:
    m = load_manifest_yaml(write_manifest(tmp_path, default_pose={".*_knee_joint": 3.5, ".*": 0.0}))
    with pytest.raises(ManifestError, match="limits"):
        m.check_robot(ROBOT)


def test_malformed_yaml_and_unknown_names() -> None:
    with pytest.raises(ManifestError, match="unknown policy"):
        find_policy_file("holosoma/g1_nope")
    with pytest.raises(ManifestError, match="not found"):
        find_policy_file("/nonexistent/policy.onnx")


def test_malformed_yaml_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: [unclosed\n")
    with pytest.raises(ManifestError, match="cannot read manifest"):
        load_manifest_yaml(bad)


def write_deploy_yaml(tmp_path: Path, hist: int = 2) -> tuple[Path, np.ndarray]:
    """An Isaac Lab deploy YAML (unitree_rl_lab layout: ``params/deploy.yaml``, ``exported/policy.onnx``) with
    a zero linear ONNX; per-joint arrays in a random policy order. Returns the path and that order."""
    rng = np.random.default_rng(3)
    perm = rng.permutation(N)
    obs_size = (3 + 3 + 3 + N + N + N) * hist
    (tmp_path / "exported").mkdir()
    (tmp_path / "params").mkdir()
    make_linear_policy(tmp_path / "exported" / "policy.onnx", np.zeros((obs_size, N)), np.zeros(N))
    default = ROBOT.array("default")[perm]
    deploy = {
        "joint_ids_map": perm.tolist(),
        "step_dt": 0.02,
        "stiffness": np.linspace(10, 100, N).tolist(),
        "damping": [2.0] * N,
        "default_joint_pos": default.tolist(),
        "commands": {
            "base_velocity": {
                "ranges": {
                    "lin_vel_x": [-0.5, 1.0],
                    "lin_vel_y": [-0.3, 0.3],
                    "ang_vel_z": [-1.2, 1.2],
                    "heading": None,
                }
            }
        },
        "actions": {
            "JointPositionAction": {
                "clip": None,
                "joint_names": [".*"],
                "scale": [0.25] * N,
                "offset": default.tolist(),
                "joint_ids": None,
            }
        },
        "observations": {
            "base_ang_vel": {"params": {}, "clip": None, "scale": [0.2] * 3, "history_length": hist},
            "projected_gravity": {"params": {}, "clip": None, "scale": [1.0] * 3, "history_length": hist},
            "velocity_commands": {"params": {}, "clip": None, "scale": [1.0] * 3, "history_length": hist},
            "joint_pos_rel": {"params": {}, "clip": None, "scale": [1.0] * N, "history_length": hist},
            "joint_vel_rel": {"params": {}, "clip": None, "scale": [0.05] * N, "history_length": hist},
            "last_action": {"params": {}, "clip": None, "scale": [1.0] * N, "history_length": hist},
        },
    }
    path = tmp_path / "params" / "deploy.yaml"
    path.write_text(yaml.safe_dump(deploy, sort_keys=False))
    return path, perm


def test_isaaclab_deploy_yaml(tmp_path: Path) -> None:
    """unitree_rl_lab layout: per-joint arrays in policy order, joint_ids_map into the robot's (SDK) order."""
    hist = 2
    obs_size = (3 + 3 + 3 + N + N + N) * hist
    path, perm = write_deploy_yaml(tmp_path, hist)
    m = load_isaaclab_deploy(path, robot=ROBOT)
    assert m.joint_names == tuple(NAMES[i] for i in perm)
    assert m.rate_hz == pytest.approx(50.0) and m.obs_size == obs_size
    assert m.history_fill == "first"
    assert [t.kind for t in m.terms] == [
        "base_ang_vel",
        "projected_gravity",
        "velocity_command",
        "dof_pos",
        "dof_vel",
        "actions",
    ]
    assert m.command_ranges["lin_vel_x"] == (-0.5, 1.0)
    assert np.allclose(m.kp, np.linspace(10, 100, N))
    # the same file found by load_policy (format sniffed)
    assert load_policy(str(path), ROBOT).joint_names == m.joint_names
    # without joint names nor robot it cannot know the order
    with pytest.raises(ManifestError, match="joint_names"):
        load_isaaclab_deploy(path)
