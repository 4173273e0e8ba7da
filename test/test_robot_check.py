"""``humanoid-robot check``: robot configurations validated against their model files, every problem named."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from humanoid_control.model.robot_check import check_robot_config, main
from humanoid_control.model.robot_config import find_robot_config


@pytest.mark.parametrize("robot", ["g1", "t1"])
def test_shipped_configs_are_clean(robot: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(find_robot_config(robot))]) == 0
    out = capsys.readouterr().out
    assert "OK: no problems found" in out and "PROBLEMS" not in out


def _bad_config(tmp_path: Path, robot: str, mutate: Callable[[dict[str, Any]], None]) -> Path:
    data = yaml.safe_load(find_robot_config(robot).read_text())
    mutate(data)
    path = tmp_path / f"{robot}_bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _misspell(data: dict[str, Any], index: int) -> str:
    name = data["joints"][index]["name"]
    data["joints"][index]["name"] = name + "x"
    return name + "x"


def _default_outside(data: dict[str, Any], index: int) -> str:
    joint = data["joints"][index]
    joint["default"] = joint["upper"] + 0.5
    return joint["name"]


def _no_foot(data: dict[str, Any]) -> str:
    data["feet"]["right"]["body"] = "no_such_foot_link"
    return "no_such_foot_link"


@pytest.mark.parametrize("robot", ["g1", "t1"])
def test_every_problem_is_named(robot: str, tmp_path: Path) -> None:
    names: dict[str, str] = {}

    def mutate(data: dict[str, Any]) -> None:
        names["misspelt"] = _misspell(data, 3)
        names["outside"] = _default_outside(data, 1)
        names["foot"] = _no_foot(data)

    path = _bad_config(tmp_path, robot, mutate)
    report = check_robot_config(str(path))
    assert not report.ok
    text = "\n".join(report.problems)
    assert f"joint '{names['misspelt']}' is not in the MJCF" in text
    assert f"joint '{names['outside']}': default" in text and "outside its limits" in text
    assert f"foot body '{names['foot']}' is not in the MJCF" in text
    # the MJCF joint the misspelling hides is reported too
    assert "actuated MJCF joints missing from the configuration" in text


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: _misspell(d, 0), "is not in the MJCF"),
        (lambda d: _default_outside(d, 0), "outside its limits"),
        (_no_foot, "foot body 'no_such_foot_link'"),
        (lambda d: d["joints"][0].update(lower=d["joints"][0]["lower"] - 1.0), "beyond the MJCF's"),
        (lambda d: d["joints"][0].update(effort=1e4), "effort 10000 N m beyond the MJCF's"),
        (lambda d: d["joints"].insert(0, d["joints"].pop(2)), "not in the MJCF's order"),
        (lambda d: d["feet"]["left"].update(polygon=d["feet"]["left"]["polygon"][::-1]), "counter-clockwise"),
        (lambda d: d["imu"].update(site="nowhere"), "imu.site 'nowhere'"),
        (lambda d: d["gain_limits"]["kp"].clear(), "gain_limits.kp: no entry matches joint"),
        (
            lambda d: d["walking"]["controller"].update(walk_push_widht_min=0.15),
            "walking.controller.walk_push_widht_min: no such walking controller setting",
        ),
        (
            lambda d: d["walking"]["controller"].update(recovery_reach=[0.4, 0.3]),
            "walking.controller.recovery_reach: (0.4, 0.3) does not fit",
        ),
        (lambda d: d["walking"]["controller"].update(cmp_margin="wide"), "must be a boolean, a number"),
    ],
)
def test_one_problem_alone_fails(
    mutate: Callable[[dict[str, Any]], Any], expected: str | None, tmp_path: Path
) -> None:
    path = _bad_config(tmp_path, "t1", mutate)
    report = check_robot_config(str(path))
    assert not report.ok, report.text()
    if expected is not None:
        assert any(expected in p for p in report.problems), report.problems


def test_gain_above_limit_is_named(tmp_path: Path) -> None:
    def mutate(data: dict[str, Any]) -> None:
        data["gain_profiles"]["stand"]["kp"]["Waist"] = 5000.0

    report = check_robot_config(str(_bad_config(tmp_path, "t1", mutate)))
    assert any("'stand': kp 5000 of Waist exceeds its limit 1000" in p for p in report.problems)


def test_cli_exit_codes(tmp_path: Path) -> None:
    bad = _bad_config(tmp_path, "g1", _no_foot)
    cmd = [sys.executable, "-m", "humanoid_control.model.robot_check", "check"]
    ok = subprocess.run([*cmd, "g1"], capture_output=True, text=True, timeout=120)
    fail = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert fail.returncode == 1 and "no_such_foot_link" in fail.stdout
    unknown = subprocess.run([*cmd, "nao"], capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 1 and "unknown robot 'nao'" in unknown.stdout
