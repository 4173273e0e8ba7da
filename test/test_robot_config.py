"""Robot configuration loading and its errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from humanoid_control.model.robot_config import (
    ConfigError,
    expand_patterns,
    find_robot_config,
    load_robot_config,
)


def test_g1_config_loads() -> None:
    c = load_robot_config("g1")
    assert c.num_joints == 29
    assert c.joint_names[0] == "left_hip_pitch_joint" and c.joint_names[-1] == "right_wrist_yaw_joint"
    assert set(c.feet) == {"left", "right"}
    assert np.all(c.array("lower") < c.array("upper"))
    assert np.all((c.array("default") >= c.array("lower")) & (c.array("default") <= c.array("upper")))
    stand = c.gain_profile("stand")
    assert stand.kp.shape == (29,) and np.all(stand.kp > 0) and np.all(stand.kd > 0)
    assert c.resolve_mjcf().is_file() and c.resolve_scene().is_file() and c.resolve_urdf().is_file()


def test_unknown_robot_and_profile() -> None:
    with pytest.raises(ConfigError, match=r"unknown robot 'nao'.*g1"):
        find_robot_config("nao")
    with pytest.raises(ConfigError, match=r"unknown gain profile 'zzz'.*stand"):
        load_robot_config("g1").gain_profile("zzz")


def _write(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(find_robot_config("g1").read_text())
    mutate(data)
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_malformed_configs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("joints: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_robot_config(str(bad))
    with pytest.raises(ConfigError, match="missing key 'imu'"):
        load_robot_config(str(_write(tmp_path, lambda d: d.pop("imu"))))
    with pytest.raises(ConfigError, match="listed twice"):
        load_robot_config(str(_write(tmp_path, lambda d: d["joints"].append(d["joints"][0]))))
    with pytest.raises(ConfigError, match="outside its limits"):
        load_robot_config(str(_write(tmp_path, lambda d: d["joints"][3].update(default=9.0))))
    with pytest.raises(ConfigError, match="no entry matches joint"):
        load_robot_config(
            str(_write(tmp_path, lambda d: d["gain_profiles"]["stand"]["kp"].pop(".*_knee_joint")))
        )

    def missing_model(d: dict) -> None:
        d["model"]["mjcf"] = [{"python_package": "no_such_package_xyz", "path": "g1.xml"}]

    c = load_robot_config(str(_write(tmp_path, missing_model)))
    with pytest.raises(ConfigError, match=r"cannot find the mjcf file.*no_such_package_xyz"):
        c.resolve_mjcf()


def test_expand_patterns_first_match_wins() -> None:
    values = expand_patterns({"a_.*": 1.0, ".*": 2.0}, ["a_x", "b_y"], "t")
    assert values.tolist() == [1.0, 2.0]
    with pytest.raises(ConfigError, match=">= 0"):
        expand_patterns({".*": -1.0}, ["a"], "t")
