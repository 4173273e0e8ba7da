"""``humanoid-bench mpc``: the recorded footstep plan, its loader's refusals, the benchmark's keys (and
PlaCo's, where its environment is installed: ``make placo``)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from humanoid_bringup.evaluation.mpc_bench import (
    bench_mpc,
    find_placo_python,
    find_walk_plan,
    load_walk_plan,
    record_walk_plan,
)
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.walking.footsteps import FootstepPlanner
from humanoid_control.walking.geometry import Pose2D

CONFIG = load_robot_config("g1")


def test_recorded_plan_walks_straight_then_turns_within_the_limits() -> None:
    plan = load_walk_plan(find_walk_plan(), CONFIG)  # the loader checks every step against the limits
    planner = FootstepPlanner.from_config(CONFIG)
    assert len(plan.steps) == 16
    assert [st.side for st in plan.steps] == ["left", "right"] * 8
    for side in ("left", "right"):  # from the nominal stance at the origin
        nominal = planner.nominal_foot(Pose2D(0.0, 0.0, 0.0), side)
        assert abs(plan.start[side].x - nominal.x) < 1e-12 and abs(plan.start[side].y - nominal.y) < 1e-12
    period = plan.single_support + plan.double_support
    # 0.4 m/s straight: 0.2 m per step along x, no turn
    straight = plan.steps[:8]
    assert all(abs(st.pose.yaw) < 1e-12 for st in straight)
    assert np.diff([st.pose.x for st in straight]) == pytest.approx(0.4 * period, abs=1e-9)
    # then 0.3 rad/s: every step turns by 0.15 rad, 1.2 rad at the end
    yaws = [st.pose.yaw for st in plan.steps[7:]]
    assert np.diff(yaws) == pytest.approx(0.3 * period, abs=1e-9)
    assert plan.steps[-1].pose.yaw == pytest.approx(1.2, abs=1e-9)
    # the file is what the recorder writes with the planner of today
    assert record_walk_plan(CONFIG)["steps"] == json.loads(find_walk_plan().read_text())["steps"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(extra=1), "unknown keys"),
        (lambda d: d.update(robot="h1"), "robot"),
        (lambda d: d["timing"].update(single_support=-0.4), "positive"),
        (lambda d: d["start"].pop("right"), "'left' and 'right'"),
        (lambda d: d["steps"][3].update(pose=[math.nan, 0.0, 0.0]), "non-finite"),
        (lambda d: d["steps"][3].update(pose=[0.8, -0.1185]), "3 numbers"),
        (lambda d: d["steps"][3].update(side="middle"), "unknown side"),
        (lambda d: d["steps"].pop(3), "alternate"),
        (lambda d: d["steps"][3]["pose"].__setitem__(0, 1.5), "beyond the robot's limits"),
        (lambda d: d.update(steps=[]), "non-empty"),
    ],
)
def test_malformed_plan_is_refused(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(find_walk_plan().read_text())
    edit(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as info:
        load_walk_plan(path, CONFIG)
    assert str(path) in str(info.value)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        load_walk_plan(path, CONFIG)


def short_plan(tmp_path: Path, steps: int = 6) -> Path:
    data = json.loads(find_walk_plan().read_text())
    data["steps"] = data["steps"][:steps]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(data))
    return path


def test_bench_mpc_keys_without_placo(tmp_path: Path) -> None:
    allowed = os.sched_getaffinity(0)
    out = bench_mpc(
        short_plan(tmp_path), repeats=2, block=7, placo_python=tmp_path / "no" / "python", cpu=min(allowed)
    )
    assert os.sched_getaffinity(0) == allowed and out["cpu"] == min(allowed)  # pinned while it ran only
    # 6 steps: 3.7 s of plan, re-solved at 50 Hz while the 1.6 s horizon stays within it, twice
    assert out["plan_steps"] == 6 and out["solves"] == 2 * 105
    assert 0.0 < out["mpc_solve_us_median"] <= out["mpc_solve_us_p99"] <= out["mpc_solve_us_max"]
    assert 0.0 < out["mpc_osqp_us_median"] < out["mpc_solve_us_max"]
    assert 0.0 < out["mpc_solve_cpu_us_median"] <= out["mpc_solve_cpu_us_p99"]
    assert out["horizon_samples"] == 80
    assert out["placo_us_median"] is None and out["ratio_vs_placo"] is None
    assert out["placo_cpu_us_median"] is None and out["ratio_vs_placo_cpu"] is None
    assert out["placo"].startswith("not installed")
    with pytest.raises(ValueError, match="cpu"):
        bench_mpc(short_plan(tmp_path), cpu=max(allowed) + 1)


@pytest.mark.skipif(find_placo_python()[0] is None, reason="PlaCo's environment is not there (make placo)")
def test_bench_mpc_times_placo_on_the_same_plan(tmp_path: Path) -> None:
    out = bench_mpc(short_plan(tmp_path), repeats=1, block=20)
    assert out["placo"] == "0.10.2" and out["placo_pin"] == "3.8.0"
    assert out["placo_us_median"] > 0.0 and out["placo_us_p99"] >= out["placo_us_median"]
    assert out["ratio_vs_placo"] == pytest.approx(out["mpc_solve_us_median"] / out["placo_us_median"])
    assert out["placo_cpu_us_median"] > 0.0
    # the same horizon: 80 samples (81 where a cut single support needs one of the next support)
    assert out["placo_horizon_samples_min"] >= 80 and out["placo_horizon_samples_mean"] <= 81
