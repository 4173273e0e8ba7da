"""hardware.unitree_g1 / hardware.can_mit sections of the robot configuration: complete, consistent, and the
joint <-> motor conversions (direction, offset) invert each other."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from humanoid_control.hardware.hardware_config import load_can_mit_config, load_unitree_g1_config
from humanoid_control.hardware.mit_can import MitRanges, decode_reply, encode_reply
from humanoid_control.hardware.types import LowLevelCommand
from humanoid_control.model.robot_config import ConfigError, load_robot_config

CONFIG = load_robot_config("g1")
G1_YAML = Path(CONFIG.config_path).read_text()


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    assert old in G1_YAML
    path = tmp_path / "g1_variant.yaml"
    path.write_text(G1_YAML.replace(old, new, 1))
    return path


def _command(rng: np.random.Generator) -> LowLevelCommand:
    n = CONFIG.num_joints
    return LowLevelCommand(
        q=rng.uniform(CONFIG.array("lower"), CONFIG.array("upper")),
        dq=rng.normal(0, 2, n),
        kp=rng.uniform(0, 100, n),
        kd=rng.uniform(0, 5, n),
        tau_ff=rng.normal(0, 5, n),
    )


def test_unitree_g1_motor_order_is_the_sdk_order() -> None:
    g1 = load_unitree_g1_config(CONFIG)
    assert (g1.lowcmd_topic, g1.lowstate_topic, g1.period, g1.mode_pr, g1.motor_slots) == (
        "rt/lowcmd",
        "rt/lowstate",
        0.002,
        0,
        35,
    )
    # the G1's 29 motors in slots 0-28, in the robot configuration's joint order (legs, waist, arms)
    assert list(g1.index) == list(range(29))
    assert [m.joint for m in g1.motors] == CONFIG.joint_names
    assert g1.motors[12].joint == "waist_yaw_joint" and g1.motors[22].joint == "right_shoulder_pitch_joint"


def test_unitree_mapping_round_trip_with_direction_and_offset(tmp_path: Path) -> None:
    path = _variant(
        tmp_path,
        "- {joint: left_knee_joint, direction: 1, offset: 0.0}",
        "- {joint: left_knee_joint, direction: -1, offset: 0.3}",
    )
    robot = load_robot_config(str(path))
    g1 = load_unitree_g1_config(robot)
    cmd = _command(np.random.default_rng(1))
    motor = g1.motor_command(cmd)
    assert motor["mode"].tolist() == [1] * 29 + [0] * 6
    assert motor["q"][3] == pytest.approx(-cmd.q[3] + 0.3)
    assert motor["tau"][3] == pytest.approx(-cmd.tau_ff[3])
    assert motor["kp"][3] == cmd.kp[3] and motor["q"][0] == cmd.q[0]
    assert not motor["q"][29:].any() and not motor["kp"][29:].any()
    q, dq, tau = g1.joint_state(motor["q"], motor["dq"], motor["tau"])
    assert np.allclose(q, cmd.q) and np.allclose(dq, cmd.dq) and np.allclose(tau, cmd.tau_ff)


def test_can_mit_covers_every_joint_within_its_actuator_ranges() -> None:
    cm = load_can_mit_config(CONFIG)
    assert [j.joint for j in cm.joints] == CONFIG.joint_names
    assert cm.buses == ["can0", "can1", "can2", "can3"]
    assert (cm.period, cm.command_timeout, cm.max_missed_replies) == (0.002, 0.025, 3)
    assert cm.coverage_problems(CONFIG) == []
    # AK80-9 exactly as REFERENCES.md gives it
    assert cm.models["ak80_9"] == MitRanges(-12.5, 12.5, -50.0, 50.0, 0.0, 500.0, 0.0, 5.0, -18.0, 18.0)
    # an AK80-9 on a G1 hip could not carry the hip's torque or the stand gains: coverage says so
    ak = replace(cm.joints[0], model="ak80_9", ranges=cm.models["ak80_9"])
    short = replace(cm, joints=(ak, *cm.joints[1:]))
    problems = short.coverage_problems(CONFIG)
    assert any("effort 88.0 N m" in p for p in problems) and any("kp limit 1000" in p for p in problems)


def test_can_mit_joint_round_trip_through_frames() -> None:
    cm = load_can_mit_config(CONFIG)
    knee = next(j for j in cm.joints if j.joint == "right_knee_joint")
    assert knee.direction == -1
    motor = knee.to_motor(q=1.2, dq=0.5, kp=40.0, kd=2.0, tau=10.0)
    assert (motor.position, motor.velocity, motor.torque, motor.kp) == (-1.2, -0.5, -10.0, 40.0)
    reply = decode_reply(encode_reply(knee.can_id, motor.position, motor.velocity, motor.torque, knee.ranges),
                         knee.ranges)  # fmt: skip
    q, dq, tau = knee.from_motor(reply)
    r = knee.ranges
    assert abs(q - 1.2) <= r.step("p") / 2 and abs(dq - 0.5) <= r.step("v") / 2
    assert abs(tau - 10.0) <= r.step("t") / 2
    cmd = _command(np.random.default_rng(2))
    commands = cm.motor_commands(cmd)
    assert len(commands) == 29 and commands[9].position == pytest.approx(-cmd.q[9])


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "{joint: left_knee_joint, bus: can0, id: 4,",
            "{joint: left_knee_joint, bus: can0, id: 3,",
            "used twice",
        ),
        ("{joint: left_knee_joint, bus: can0,", "{joint: left_kneecap, bus: can0,", "unknown joint"),
        (
            "model: g1_139nm}\n      - {joint: left_hip_yaw",
            "model: nope}\n      - {joint: left_hip_yaw",
            "unknown model",
        ),
        ("bus: can1, id: 1, direction: -1", "bus: can1, id: 1, direction: 2", "direction must be 1 or -1"),
        ("bus: can3, id: 7,", "bus: can3, id: 200,", "CAN id must be in 1..127"),
    ],
)
def test_can_mit_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    robot = load_robot_config(str(_variant(tmp_path, old, new)))
    with pytest.raises(ConfigError, match=message):
        load_can_mit_config(robot)


def test_unitree_errors(tmp_path: Path) -> None:
    missing = _variant(tmp_path, "      - {joint: right_wrist_yaw_joint, direction: 1, offset: 0.0}\n", "")
    with pytest.raises(ConfigError, match="joints without a motor"):
        load_unitree_g1_config(load_robot_config(str(missing)))
    twice = _variant(
        tmp_path, "{joint: left_knee_joint, direction: 1", "{joint: left_hip_yaw_joint, direction: 1"
    )
    with pytest.raises(ConfigError, match="mapped twice"):
        load_unitree_g1_config(load_robot_config(str(twice)))


def test_missing_section_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bare.yaml"
    path.write_text(G1_YAML.split("\nhardware:")[0])
    with pytest.raises(ConfigError, match=r"no hardware\.can_mit section"):
        load_can_mit_config(load_robot_config(str(path)))
