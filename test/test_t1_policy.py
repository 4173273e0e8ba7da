"""Policy joints the robot lacks (virtual joints) and robot joints the policy lacks, on the T1 (no ROS)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import leg_joint_names
from humanoid_policy.check import check_policy
from humanoid_policy.manifest import ManifestError, find_policy_file, load_manifest_yaml, load_policy

pytest.importorskip("onnxruntime")
T1 = load_robot_config("t1")
WRISTS = [f"{s}_{j}" for s in ("Left", "Right") for j in ("Wrist_Pitch", "Wrist_Yaw", "Hand_Roll")]


def test_leg_joints_come_from_the_model() -> None:
    legs = leg_joint_names(T1)
    assert len(legs) == 13 and "Waist" in legs and "Left_Knee_Pitch" in legs and "AAHead_yaw" not in legs
    g1_legs = leg_joint_names(load_robot_config("g1"))
    assert len(g1_legs) == 12 and all("waist" not in n for n in g1_legs)


@pytest.mark.parametrize("policy", ["holosoma/t1_ppo", "holosoma/t1_fastsac"])
def test_t1_policies_check_clean_with_virtual_joints(policy: str) -> None:
    report = check_policy(policy, "t1")
    assert report.ok, report.problems
    text = report.text()
    assert "virtual joints (6, robot 't1' lacks them)" in text
    assert all(f"{name:<28}  VIRT" in text for name in WRISTS)
    manifest = load_policy(policy, T1)
    assert manifest.num_joints == 29 and manifest.robot_virtual_joints(T1) == WRISTS


def test_virtual_joints_observed_at_default_and_dropped() -> None:
    from humanoid_policy.policy_core import PolicyCore

    manifest = load_policy("holosoma/t1_ppo", T1)
    core = PolicyCore(manifest, T1)
    q = core.default_target + 0.05  # the policy's default pose on the robot's joints, off by 0.05 rad
    dq = np.full(T1.num_joints, 0.3)
    step = core.step(q, dq, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3))
    slices = manifest.term_slices()
    virtual = [manifest.joint_names.index(n) for n in WRISTS]
    real = [i for i in range(manifest.num_joints) if i not in virtual]
    dof_pos, dof_vel = step.obs[slices["dof_pos"]], step.obs[slices["dof_vel"]]
    assert np.all(dof_pos[virtual] == 0.0) and np.all(dof_vel[virtual] == 0.0)
    np.testing.assert_allclose(dof_pos[real], 0.05, atol=1e-6)
    np.testing.assert_allclose(dof_vel[real], 0.3 * 0.1, atol=1e-6)
    assert step.q_target.shape == (T1.num_joints,)
    expected = manifest.default_pose + 0.25 * step.action
    index = {n: i for i, n in enumerate(T1.joint_names)}
    for i in real:
        assert step.q_target[index[manifest.joint_names[i]]] == pytest.approx(expected[i])


def _manifest_with(tmp_path: Path, replace: dict[str, str], virtual: list[str]) -> Path:
    doc = yaml.safe_load(find_policy_file("holosoma/t1_ppo").read_text())
    names = [replace.get(n, n) for n in load_policy("holosoma/t1_ppo").joint_names]
    doc["joint_names"] = names
    doc["virtual_joints"] = virtual
    path = tmp_path / "t1_variant.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_policy_lacking_a_leg_joint_is_refused(tmp_path: Path) -> None:
    path = _manifest_with(tmp_path, {"Left_Knee_Pitch": "Left_Peg"}, [*WRISTS, "Left_Peg"])
    manifest = load_manifest_yaml(path)
    with pytest.raises(ManifestError, match=r"does not command the leg joints \['Left_Knee_Pitch'\]"):
        manifest.check_robot(T1)
    report = check_policy(str(path), "t1")
    assert not report.ok and any("Left_Knee_Pitch" in p for p in report.problems)


def test_undeclared_missing_joint_is_refused(tmp_path: Path) -> None:
    path = _manifest_with(tmp_path, {}, WRISTS[:3])  # the right wrist is no longer declared virtual
    with pytest.raises(ManifestError, match="Right_Wrist_Pitch"):
        load_manifest_yaml(path).check_robot(T1)


def test_virtual_joints_must_be_policy_joints(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="virtual_joints must list joints of joint_names"):
        load_manifest_yaml(_manifest_with(tmp_path, {}, ["Tail"]))


def test_robot_joint_the_policy_lacks_is_held_at_default(tmp_path: Path) -> None:
    from humanoid_policy.policy_core import PolicyCore

    path = _manifest_with(tmp_path, {"AAHead_yaw": "Antenna"}, [*WRISTS, "Antenna"])
    manifest = load_manifest_yaml(path)
    core = PolicyCore(manifest, T1)
    head = T1.joint_names.index("AAHead_yaw")
    step = core.step(T1.array("default"), np.zeros(23), np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros(3))
    assert step.q_target[head] == T1.array("default")[head]
    assert core.kp[head] == T1.gain_profile("stand").kp[head]
    assert "held at the robot's default): ['AAHead_yaw']" in check_policy(str(path), "t1").text()


def test_ramp_to_the_policy_pose_runs_the_stand_law_then_the_policy_gains() -> None:
    """The T1 policies' default pose differs from the robot's: the runner ramps to it from the pose the driver
    holds, the driver's law with the policy's gains plus the ramp's feed-forward torque being exactly the
    robot's ``stand`` law; its first policy step carries no feed-forward (the policy's own gains)."""
    from humanoid_policy.policy_core import PolicyCore
    from humanoid_policy.runner import ImuSample, PolicyRunner, RunnerSettings, RunnerState

    core = PolicyCore(load_policy("holosoma/t1_ppo", T1), T1)
    assert not core.default_matches_robot
    runner = PolicyRunner(core, RunnerSettings(ramp_s=0.5))
    runner.gains_ready = True
    kp, kd = runner.command_gains
    stand = T1.gain_profile("stand")
    assert np.any(stand.kp != kp)  # e.g. the ankles: stand 200, policy 50
    default = T1.array("default")
    rng = np.random.default_rng(0)
    q = default + rng.uniform(-0.02, 0.02, T1.num_joints)  # sagged a little under the driver's hold
    dq = rng.uniform(-0.1, 0.1, T1.num_joints)
    up = np.array([1.0, 0.0, 0.0, 0.0])
    for t, alpha in ((0.0, 0.0), (0.25, 0.5)):
        runner.set_imu(ImuSample(t, up, np.zeros(3)))
        out = runner.update(t, q, dq, "hold" if t == 0.0 else "active")
        assert runner.state == RunnerState.RAMP and out.q_target is not None and out.tau_ff is not None
        # from the driver's target (the robot's default), not the measured pose: no torque step at the start
        np.testing.assert_allclose(out.q_target, default + alpha * (core.default_target - default))
        driver_law = kp * (out.q_target - q) - kd * dq + out.tau_ff
        np.testing.assert_allclose(driver_law, stand.kp * (out.q_target - q) - stand.kd * dq, atol=1e-9)
    runner.set_imu(ImuSample(0.5, up, np.zeros(3)))
    out = runner.update(0.5, q, dq, "active")
    assert runner.state == RunnerState.RUN and out.policy_step is not None and out.tau_ff is None


def test_walking_controller_takes_the_robot_tuning() -> None:
    """``walking.controller`` of the robot configuration replaces the named WalkingSettings defaults only; the
    G1 names none (its controller runs on the defaults)."""
    from humanoid_control.walking.controller_types import WalkingSettings, tuned_settings

    g1 = load_robot_config("g1")
    assert g1.walking.controller == () and tuned_settings(WalkingSettings(), ()) == WalkingSettings()
    assert dict(T1.walking.controller) == {"walk_push_width_min": 0.15}
    tuned = tuned_settings(WalkingSettings(), T1.walking.controller)
    assert tuned.walk_push_width_min == 0.15 and tuned.recovery_reach == WalkingSettings().recovery_reach
    both = tuned_settings(
        WalkingSettings(), (("n_steps", 8), ("step_adjustment", False), ("recovery_reach", (0.3, 0.3, 0.4)))
    )
    assert (both.n_steps, both.step_adjustment, both.recovery_reach) == (8, False, (0.3, 0.3, 0.4))
    from humanoid_control.walking.controller import WalkingController

    # the T1's 10 cm soles 0.11 m apart (the default) are closer than foot_clearance: refused untuned
    assert WalkingController(T1).settings.walk_push_width_min == 0.15
    with pytest.raises(ValueError, match="closer than foot_clearance"):
        WalkingController(replace(T1, walking=replace(T1.walking, controller=())))
    with pytest.raises(ValueError, match="n_steps"):
        tuned_settings(WalkingSettings(), (("n_steps", 6.5),))
    with pytest.raises(ValueError, match="step_adjustment"):
        tuned_settings(WalkingSettings(), (("step_adjustment", 1.0),))
