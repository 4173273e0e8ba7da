"""Isaac Lab policies as exported: IO-descriptor YAML, recurrent ONNX, and ``humanoid-policy check``.

The tests write their own ``<task>_IO_descriptors.yaml`` (Isaac Lab's layout) and ONNX networks (constant,
linear in the observation, and an LSTM) for the G1 in Isaac Lab's joint order - breadth-first over the
articulation tree, not the robot's SDK order - and compute the joint targets the files imply on their own
(Isaac Lab's semantics: offset, clip then scale, flattened history filled with the first sample, raw last
action, ``offset + scale * action``), to compare with what the runner commands, joint by joint, by name.
"""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from onnx_models import LstmPolicy, make_linear_policy
from test_policy_manifest import write_deploy_yaml

from humanoid_control.model.robot_config import load_robot_config
from humanoid_policy.check import check_policy, main
from humanoid_policy.isaaclab_io import load_isaaclab_io_descriptors
from humanoid_policy.manifest import ManifestError, load_policy
from humanoid_policy.policy_core import PolicyCore
from humanoid_policy.runner import ImuSample, PolicyRunner, RunnerSettings, RunnerState

ROBOT = load_robot_config("g1")
N = ROBOT.num_joints
# Isaac Lab's G1 29-DoF joint order (PhysX: breadth-first over the articulation tree; unitree_rl_lab's
# joint_ids_map [0, 6, 12, 1, 7, 13, ...] into the SDK order); test_isaaclab_order_is_breadth_first derives it
ISAACLAB_G1_JOINTS = [
    "left_hip_pitch_joint",
    "right_hip_pitch_joint",
    "waist_yaw_joint",
    "left_hip_roll_joint",
    "right_hip_roll_joint",
    "waist_roll_joint",
    "left_hip_yaw_joint",
    "right_hip_yaw_joint",
    "waist_pitch_joint",
    "left_knee_joint",
    "right_knee_joint",
    "left_shoulder_pitch_joint",
    "right_shoulder_pitch_joint",
    "left_ankle_pitch_joint",
    "right_ankle_pitch_joint",
    "left_shoulder_roll_joint",
    "right_shoulder_roll_joint",
    "left_ankle_roll_joint",
    "right_ankle_roll_joint",
    "left_shoulder_yaw_joint",
    "right_shoulder_yaw_joint",
    "left_elbow_joint",
    "right_elbow_joint",
    "left_wrist_roll_joint",
    "right_wrist_roll_joint",
    "left_wrist_pitch_joint",
    "right_wrist_pitch_joint",
    "left_wrist_yaw_joint",
    "right_wrist_yaw_joint",
]
# Isaac Lab-style defaults and gains (by regex, first match), within the G1's limits
DEFAULTS = {
    ".*_hip_pitch_joint": -0.1,
    ".*_knee_joint": 0.3,
    ".*_ankle_pitch_joint": -0.2,
    ".*_shoulder_pitch_joint": 0.3,
    "left_shoulder_roll_joint": 0.25,
    "right_shoulder_roll_joint": -0.25,
    ".*_elbow_joint": 0.97,
    ".*": 0.0,
}
STIFFNESS = {".*_hip_.*": 100.0, ".*_knee_joint": 150.0, ".*_ankle_.*": 40.0, "waist_.*": 200.0, ".*": 40.0}
DAMPING = {".*_hip_.*": 2.0, ".*_knee_joint": 4.0, ".*_ankle_.*": 2.0, "waist_.*": 5.0, ".*": 10.0}
ACTION_SCALE = 0.25
# (term, scale, clip, history_length); joint terms carry joint_names and offsets
TERMS: list[tuple[str, float | None, list[float] | None, int]] = [
    ("base_ang_vel", 0.2, None, 0),
    ("projected_gravity", None, None, 3),
    ("generated_commands", None, None, 0),
    ("joint_pos_rel", None, None, 2),
    ("joint_vel_rel", 0.05, [-5.0, 5.0], 0),
    ("last_action", None, None, 2),
]
TERM_DIMS = {
    "base_ang_vel": 3,
    "projected_gravity": 3,
    "generated_commands": 3,
    "joint_pos_rel": N,
    "joint_vel_rel": N,
    "last_action": N,
}
OBS_SIZE = sum(TERM_DIMS[name] * max(h, 1) for name, _, _, h in TERMS)
UPRIGHT = np.array([1.0, 0.0, 0.0, 0.0])


def by_regex(table: dict[str, float], names: list[str]) -> list[float]:
    import re

    return [next(v for k, v in table.items() if re.fullmatch(k, n)) for n in names]


def descriptor_doc(**changes: Any) -> dict[str, Any]:
    """The IO-descriptor document Isaac Lab would export for this G1 task (``changes`` replace top keys)."""
    joints = list(ISAACLAB_G1_JOINTS)
    default = by_regex(DEFAULTS, joints)
    terms = []
    for name, scale, clip, history in TERMS:
        term: dict[str, Any] = {
            "dtype": "torch.float32",
            "extras": {"description": f"{name} (test)", "modifiers": None},
            "full_path": f"isaaclab.envs.mdp.observations.{name}",
            "mdp_type": "Observation",
            "name": name,
            "observation_type": "JointState" if name.startswith("joint") else "RootState",
            "overloads": {
                "clip": clip,
                "flatten_history_dim": True,
                "history_length": history,
                "scale": scale,
            },
            "shape": [TERM_DIMS[name]],
        }
        if name == "joint_pos_rel":
            term.update(joint_names=joints, joint_pos_offsets=default)
        if name == "joint_vel_rel":
            term.update(joint_names=joints, joint_vel_offsets=[0.0] * N)
        terms.append(term)
    doc = {
        "actions": [
            {
                "action_type": "JointAction",
                "clip": None,
                "dtype": "torch.float32",
                "extras": {"description": "Joint action term (position commands)."},
                "full_path": "isaaclab.envs.mdp.actions.joint_actions.JointPositionAction",
                "joint_names": joints,
                "mdp_type": "Action",
                "name": "joint_position_action",
                "offset": default,
                "scale": ACTION_SCALE,
                "shape": [N],
            }
        ],
        "articulations": {
            "robot": {
                "default_joint_armature": [0.01] * N,
                "default_joint_damping": by_regex(DAMPING, joints),
                "default_joint_friction": [0.0] * N,
                "default_joint_pos": default,
                "default_joint_pos_limits": [[-3.0, 3.0]] * N,
                "default_joint_stiffness": by_regex(STIFFNESS, joints),
                "default_joint_vel": [0.0] * N,
                "joint_names": joints,
            }
        },
        "observations": {"policy": terms},
        "scene": {"decimation": 4, "dt": 0.02, "physics_dt": 0.005},
    }
    doc.update(changes)
    return doc


def write_descriptors(folder: Path, doc: dict[str, Any] | None = None, task: str = "g1_flat") -> Path:
    path = folder / f"{task}_IO_descriptors.yaml"
    path.write_text(yaml.safe_dump(doc or descriptor_doc(), sort_keys=False))
    return path


def linear_net(seed: int, n_in: int = OBS_SIZE) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (0.02 * rng.standard_normal((n_in, N))).astype(np.float32), (0.1 * rng.standard_normal(N)).astype(
        np.float32
    )


# ------------------------------------------------------------------------------------ reference (Isaac Lab)
def rotation_wxyz(q: np.ndarray) -> np.ndarray:
    """Body -> world rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


class IsaacLabReference:
    """The observation and targets an Isaac Lab environment builds from a descriptor document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.action = doc["actions"][0]
        self.joints = self.action["joint_names"]
        self.robot_index = [ROBOT.joint_names.index(n) for n in self.joints]
        self.history: dict[str, deque[np.ndarray]] = {}
        self.last_action = np.zeros(len(self.joints))

    def observation(self, q: np.ndarray, dq: np.ndarray, gyro: np.ndarray, quat: np.ndarray, cmd: np.ndarray):
        parts = []
        for term in self.doc["observations"]["policy"]:
            name = term["name"]
            if name in ("joint_pos_rel", "joint_vel_rel"):
                idx = [ROBOT.joint_names.index(n) for n in term["joint_names"]]
                key = "joint_pos_offsets" if name == "joint_pos_rel" else "joint_vel_offsets"
                value = (q if name == "joint_pos_rel" else dq)[idx] - np.array(term[key])
            else:
                value = {
                    "base_ang_vel": gyro,
                    "projected_gravity": rotation_wxyz(quat).T @ np.array([0.0, 0.0, -1.0]),
                    "generated_commands": cmd,
                    "last_action": self.last_action,
                }[name]
            over = term["overloads"]
            if over["clip"] is not None:
                value = np.clip(value, *over["clip"])
            if over["scale"] is not None:
                value = value * over["scale"]
            h = over["history_length"]
            if h > 0:
                buf = self.history.setdefault(name, deque(maxlen=h))
                if not buf:
                    buf.extend([value] * h)  # CircularBuffer: the first sample fills the history
                buf.append(value)
                value = np.concatenate(list(buf))
            parts.append(value)
        return np.concatenate(parts).astype(np.float32)

    def targets(self, action: np.ndarray) -> dict[str, float]:
        self.last_action = action
        target = np.array(self.action["offset"]) + self.action["scale"] * action
        if self.action["clip"] is not None:
            clip = np.array(self.action["clip"])
            target = np.clip(target, clip[:, 0], clip[:, 1])
        return dict(zip(self.joints, target, strict=True))


def random_states(count: int, seed: int = 7) -> list[tuple[np.ndarray, ...]]:
    """Robot-order joint states near the standing pose (some velocities beyond the observation clip), IMU
    readings and commands."""
    rng = np.random.default_rng(seed)
    lo, hi = ROBOT.array("lower"), ROBOT.array("upper")
    out = []
    for _ in range(count):
        q = np.clip(ROBOT.array("default") + 0.2 * rng.standard_normal(N), lo, hi)
        dq = 60.0 * rng.standard_normal(N)  # x 0.05 after a clip at +-5 rad/s: both matter
        quat = UPRIGHT + 0.2 * rng.standard_normal(4)
        out.append((q, dq, rng.standard_normal(3), quat / np.linalg.norm(quat), rng.uniform(-1, 1, 3)))
    return out


def start_runner(manifest_path: Path, onnx: Path | None = None) -> PolicyRunner:
    core = PolicyCore(load_policy(str(manifest_path), ROBOT, onnx), ROBOT)
    runner = PolicyRunner(core, RunnerSettings(ramp_s=0.0, command_timeout_s=0.0))
    runner.gains_ready = True
    return runner


def run_steps(runner: PolicyRunner, states: list[tuple[np.ndarray, ...]], t0: float = 0.0) -> list[Any]:
    """One runner update per policy period (each a policy step); the outputs."""
    outs = []
    for k, (q, dq, gyro, quat, cmd) in enumerate(states):
        t = t0 + 0.02 * k
        runner.set_imu(ImuSample(t, quat, gyro))
        runner.set_command(cmd, t)
        out = runner.update(t, q, dq, "hold" if k == 0 else "active")
        assert out.policy_step is not None and runner.state == RunnerState.RUN
        outs.append(out)
    return outs


def assert_targets_by_name(q_target: np.ndarray, expected: dict[str, float]) -> None:
    for name, value in expected.items():
        assert q_target[ROBOT.joint_names.index(name)] == pytest.approx(value, abs=1e-6), name


# ------------------------------------------------------------------------------------------------- tests
def test_isaaclab_order_is_breadth_first() -> None:
    """The order the tests use is the breadth-first order of the G1's kinematic tree (MJCF body tree)."""
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(ROBOT.resolve_mjcf()))
    children: dict[int, list[int]] = {}
    for body in range(1, model.nbody):
        children.setdefault(int(model.body_parentid[body]), []).append(body)
    root = model.body(ROBOT.base_body).id
    order, queue = [], deque([root])
    while queue:
        for child in children.get(queue.popleft(), []):
            order += [model.joint(j).name for j in range(model.njnt) if model.jnt_bodyid[j] == child]
            queue.append(child)
    assert order == ISAACLAB_G1_JOINTS
    assert order != ROBOT.joint_names and sorted(order) == sorted(ROBOT.joint_names)


def test_io_descriptors_load_by_name(tmp_path: Path) -> None:
    make_linear_policy(tmp_path / "g1_flat.onnx", *linear_net(1))
    path = write_descriptors(tmp_path)
    m = load_policy(str(path), ROBOT)
    assert m.joint_names == tuple(ISAACLAB_G1_JOINTS) and m.rate_hz == pytest.approx(50.0)
    assert m.obs_size == OBS_SIZE and m.history_fill == "first" and m.recurrent == ()
    knee = ISAACLAB_G1_JOINTS.index("left_knee_joint")
    assert (m.kp[knee], m.kd[knee], m.default_pose[knee]) == (150.0, 4.0, 0.3)
    assert m.onnx_path == tmp_path / "g1_flat.onnx"
    layout = {t.name: (t.kind, t.size) for t in m.terms}
    assert layout["projected_gravity"] == ("projected_gravity", 9)
    assert layout["generated_commands"] == ("velocity_command", 3)
    assert layout["joint_pos_rel"] == ("dof_pos", 2 * N)
    vel = next(t for t in m.terms if t.name == "joint_vel_rel")
    assert vel.clip_range == (-5.0, 5.0) and vel.clip is None


@pytest.mark.parametrize("network", ["constant", "linear"])
def test_runner_commands_the_targets_the_files_imply(tmp_path: Path, network: str) -> None:
    weight, bias = linear_net(2)
    if network == "constant":
        weight = np.zeros_like(weight)
    make_linear_policy(tmp_path / "g1_flat.onnx", weight, bias)
    doc = descriptor_doc()
    runner = start_runner(write_descriptors(tmp_path, doc))
    ref = IsaacLabReference(doc)
    states = random_states(6)
    for out, (q, dq, gyro, quat, cmd) in zip(run_steps(runner, states), states, strict=True):
        obs = ref.observation(q, dq, gyro, quat, cmd)
        np.testing.assert_allclose(out.policy_step.obs, obs, atol=1e-6)
        action = obs.astype(float) @ weight.astype(float) + bias.astype(float)
        assert_targets_by_name(out.q_target, ref.targets(action))
    if network == "constant":  # the same targets whatever the state
        np.testing.assert_allclose(out.policy_step.action, bias, atol=1e-7)


def test_action_clip_bounds_the_targets_per_joint(tmp_path: Path) -> None:
    bias = np.full(N, 4.0, dtype=np.float32)  # target = offset + 1 rad, beyond the clip
    make_linear_policy(tmp_path / "policy.onnx", np.zeros((OBS_SIZE, N), dtype=np.float32), bias)
    doc = descriptor_doc()
    offset = np.array(doc["actions"][0]["offset"])
    doc["actions"][0]["clip"] = np.stack([offset - 0.5, offset + 0.5], axis=1).tolist()
    runner = start_runner(write_descriptors(tmp_path, doc))  # policy.onnx beside it
    (out,) = run_steps(runner, random_states(1))
    assert_targets_by_name(out.q_target, IsaacLabReference(doc).targets(bias.astype(float)))
    assert out.q_target[ROBOT.joint_names.index("left_knee_joint")] == pytest.approx(0.8)


def test_recurrent_state_carries_across_steps_and_resets_on_start(tmp_path: Path) -> None:
    net = LstmPolicy(OBS_SIZE, hidden=8, n_out=N, seed=4)
    net.save(tmp_path / "g1_flat.onnx")
    doc = descriptor_doc()
    runner = start_runner(write_descriptors(tmp_path, doc))
    assert [(s.input, s.output, s.shape) for s in runner.core.manifest.recurrent] == [
        ("h_in", "h_out", (1, 1, 8)),
        ("c_in", "c_out", (1, 1, 8)),
    ]
    ref = IsaacLabReference(doc)
    h, c = np.zeros(8), np.zeros(8)
    states = random_states(5)
    for k, (out, (q, dq, gyro, quat, cmd)) in enumerate(zip(run_steps(runner, states), states, strict=True)):
        obs = ref.observation(q, dq, gyro, quat, cmd)
        action, h, c = net.step(obs, h, c)
        assert_targets_by_name(out.q_target, ref.targets(action))
        if k > 0:  # the state matters: a fresh state gives another action on the same observation
            assert np.max(np.abs(net.step(obs, np.zeros(8), np.zeros(8))[0] - action)) > 1e-3
    np.testing.assert_allclose(runner.core.state["h_in"].reshape(-1), h, atol=1e-6)
    # ~/stop then ~/start: the driver ramps back to hold, the policy starts afresh (state zero)
    assert runner.stop()[0] and runner.start()[0]
    q, dq, gyro, quat, cmd = states[3]
    runner.set_imu(ImuSample(1.0, quat, gyro))
    runner.set_command(cmd, 1.0)
    assert runner.update(1.0, q, dq, "ramp").q_target is None
    out = runner.update(1.0, q, dq, "hold")
    fresh = IsaacLabReference(doc)
    action, _, _ = net.step(fresh.observation(q, dq, gyro, quat, cmd), np.zeros(8), np.zeros(8))
    assert_targets_by_name(out.q_target, fresh.targets(action))


def test_onnx_found_beside_or_named(tmp_path: Path) -> None:
    path = write_descriptors(tmp_path)
    with pytest.raises(ManifestError, match=r"no ONNX network found.*g1_flat\.onnx.*policy\.onnx"):
        load_policy(str(path), ROBOT)
    elsewhere = make_linear_policy(tmp_path / "trained.onnx", *linear_net(3))
    assert load_policy(str(path), ROBOT, onnx=elsewhere).onnx_path == elsewhere
    # Isaac Lab's run folder: io_descriptors/IO_descriptors.yaml next to exported/policy.onnx
    run = tmp_path / "run"
    (run / "io_descriptors").mkdir(parents=True)
    (run / "exported").mkdir()
    make_linear_policy(run / "exported" / "policy.onnx", *linear_net(3))
    exported = (run / "io_descriptors" / "IO_descriptors.yaml").resolve()
    exported.write_text(path.read_text())
    assert load_policy(str(exported), ROBOT).onnx_path.resolve() == run / "exported" / "policy.onnx"
    with pytest.raises(ManifestError, match="only with Isaac Lab"):
        load_policy("holosoma/g1_ppo", ROBOT, onnx=elsewhere)


def broken_descriptors(tmp_path: Path) -> Path:
    """Every kind of problem at once: unknown joint, unknown term, size mismatch, gains beyond the limits,
    default pose outside the joint limits, unsupported action term."""
    doc = descriptor_doc()
    joints = list(ISAACLAB_G1_JOINTS)
    joints[joints.index("left_wrist_yaw_joint")] = "left_hand_thumb_joint"  # a G1 with hands
    doc["actions"][0]["joint_names"] = joints
    art = doc["articulations"]["robot"]
    art["joint_names"] = joints
    art["default_joint_stiffness"][joints.index("right_knee_joint")] = 5000.0
    art["default_joint_pos"][joints.index("left_knee_joint")] = 3.5
    obs = doc["observations"]["policy"]
    obs.insert(
        0, {**obs[0], "name": "base_lin_vel", "full_path": "isaaclab.envs.mdp.observations.base_lin_vel"}
    )
    obs.append({**obs[1], "name": "height_scan", "full_path": "isaaclab.envs.mdp.observations.height_scan"})
    doc["actions"].append(
        {"full_path": "isaaclab.envs.mdp.actions.binary_joint_actions.BinaryJointPositionAction"}
    )
    make_linear_policy(tmp_path / "g1_flat.onnx", *linear_net(5))  # built for the unbroken layout
    return write_descriptors(tmp_path, doc)


def test_broken_descriptors_name_every_problem(tmp_path: Path) -> None:
    path = broken_descriptors(tmp_path)
    with pytest.raises(ManifestError) as err:
        load_isaaclab_io_descriptors(path)
    assert "unknown term 'base_lin_vel'" in str(err.value) and "unknown term 'height_scan'" in str(err.value)
    report = check_policy(str(path))
    text = "\n".join(report.problems)
    assert not report.ok
    for expected in (
        "unknown term 'base_lin_vel'",
        "base linear velocity",
        "unknown term 'height_scan'",
        f"observation size mismatch: the manifest's terms make {OBS_SIZE + 3 + 3} values",
        f"takes {OBS_SIZE}",
        "BinaryJointPositionAction",
        "left_hand_thumb_joint",
        "kp 5000 of right_knee_joint exceeds its limit 1000",
        "left_knee_joint +3.5000 not in",
    ):
        assert expected in text, (expected, text)
    assert "dry step skipped" in report.text()


def test_check_cli_on_good_and_broken_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good"
    good.mkdir()
    make_linear_policy(good / "g1_flat.onnx", *linear_net(6))
    assert main(["check", str(write_descriptors(good))]) == 0
    out = capsys.readouterr().out
    assert "Isaac Lab IO descriptors" in out and "OK: no problems found" in out
    # joint map: policy index -> robot joint by name (waist_yaw is policy 2, robot 12)
    assert any(row.split()[:3] == ["2", "waist_yaw_joint", "12"] for row in out.splitlines())
    # observation layout: offset and size of each term
    assert any(row.split()[:3] == ["15", "58", "joint_pos_rel"] for row in out.splitlines())
    assert "clip [-5, 5] then scale" in out and "dry step from the robot's default state" in out
    broken = tmp_path / "broken"
    broken.mkdir()
    assert main(["check", str(broken_descriptors(broken))]) == 1
    out = capsys.readouterr().out
    assert "PROBLEMS (" in out and "unknown term 'height_scan'" in out and "exceeds its limit" in out


@pytest.mark.parametrize("fmt", ["deploy.yaml", "holosoma ONNX", "manifest YAML", "manifest name"])
def test_check_accepts_every_supported_format(tmp_path: Path, fmt: str) -> None:
    policy = {
        "deploy.yaml": lambda: str(write_deploy_yaml(tmp_path)[0]),
        "holosoma ONNX": lambda: str(load_policy("holosoma/g1_ppo").onnx_path),
        "manifest YAML": lambda: load_policy("holosoma/g1_fastsac").source,
        "manifest name": lambda: "holosoma/g1_ppo",
    }[fmt]()
    report = check_policy(policy)
    assert report.ok, report.problems
    assert "joint map" in report.text() and "dry step from the robot's default state" in report.text()


def test_humanoid_policy_console_script(tmp_path: Path) -> None:
    make_linear_policy(tmp_path / "g1_flat.onnx", *linear_net(8))
    script = Path(sys.executable).parent / "humanoid-policy"
    result = subprocess.run(
        [str(script), "check", str(write_descriptors(tmp_path))], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "joint map" in result.stdout


def test_gain_limits_guard_the_driver() -> None:
    from humanoid_control.driver.driver_core import validate_gains

    stand = ROBOT.gain_profile("stand")
    validate_gains(ROBOT, stand.kp, stand.kd)
    kp = stand.kp.copy()
    kp[ROBOT.joint_names.index("left_wrist_pitch_joint")] = 150.0
    with pytest.raises(ValueError, match="left_wrist_pitch_joint exceeds its limit 100"):
        validate_gains(ROBOT, kp, stand.kd)


@pytest.mark.slow
def test_io_descriptor_policy_runs_through_the_launch_file(tmp_path: Path) -> None:
    """``controller:=policy policy:=<task>_IO_descriptors.yaml``: the ONNX beside it, the runner in its own
    process commanding the targets the files imply, by joint name."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph

    # the robot's own standing pose and stand gains in Isaac Lab's order: the runner starts from the hold
    joints = list(ISAACLAB_G1_JOINTS)
    index = [ROBOT.joint_names.index(n) for n in joints]
    stand = ROBOT.gain_profile("stand")
    default = ROBOT.array("default")[index].tolist()
    doc = descriptor_doc()
    doc["actions"][0]["offset"] = default
    doc["articulations"]["robot"].update(
        default_joint_pos=default,
        default_joint_stiffness=stand.kp[index].tolist(),
        default_joint_damping=stand.kd[index].tolist(),
    )
    doc["observations"]["policy"][3]["joint_pos_offsets"] = default
    bias = np.linspace(-0.04, 0.04, N).astype(np.float32)
    make_linear_policy(tmp_path / "g1_flat.onnx", np.zeros((OBS_SIZE, N), dtype=np.float32), bias)
    expected = IsaacLabReference(doc).targets(bias.astype(float))
    args = {
        "controller": "policy",
        "policy": str(write_descriptors(tmp_path, doc)),
        "clock": "lockstep",
        "wait_for_subscribers": "3",  # the runner, the probe and tf_publisher
        "sim_duration_s": "20.0",
    }
    commands: list[Any] = []
    states: list[str] = []
    probe = GraphProbe(subscribe_description=False, contacts=False)
    probe.subscribe(JointState, "/joint_commands", commands.append, 10)
    probe.subscribe(String, "/policy_runner/state", lambda m: states.append(m.data), probe.latched)
    graph = LaunchedGraph(args, tmp_path / "graph.log")
    try:
        graph.start()
        assert probe.wait_for(lambda d: "active" in d.modes and len(commands) > 50, timeout=30.0), graph.log()
    finally:
        close_graph(probe, graph)
    assert "run" in states, graph.log()
    last = commands[-1]
    got = dict(zip(last.name, last.position, strict=True))
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-6), name
    assert "policy g1_flat: g1_flat.onnx, 29 joints, obs 160, 50 Hz" in graph.log()
