"""``--robot`` on every ``humanoid-bench`` benchmark and on ``humanoid-eval estimator`` / ``perception``.

The parsers take ``--robot t1`` and hand it (and the robot's own default policy) to the benchmark; two cheap
in-process benchmarks (``wbc``, ``mpc``) and the estimator's run on the T1 and report ``"robot": "t1"``; a
robot without a camera asked for perception is refused by name with exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from humanoid_bringup.evaluation import bench, estimator_eval, evaluate, mpc_bench, rt_bench
from humanoid_bringup.evaluation.policy_bench import bench_policy_name
from humanoid_control.model.robot_config import load_robot_config


def _last_json(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


def test_default_policy_follows_the_robot() -> None:
    g1, t1 = load_robot_config("g1"), load_robot_config("t1")
    # the G1 keeps each tool's own default; another robot gets its default_policy
    assert bench_policy_name("", g1) == "holosoma/g1_ppo"
    assert bench_policy_name("", g1, "holosoma/g1_fastsac") == "holosoma/g1_fastsac"
    assert bench_policy_name("", t1) == t1.default_policy == "holosoma/t1_fastsac"
    assert bench_policy_name("holosoma/t1_ppo", t1) == "holosoma/t1_ppo"


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Every benchmark entry point replaced by a recorder that returns its robot."""
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def recorder(name: str, robot_at: int) -> Any:
        def fake(*args: Any, **kwargs: Any) -> dict[str, Any]:
            calls.append((name, args, kwargs))
            robot = kwargs["robot"] if "robot" in kwargs else args[robot_at]
            return {"benchmark": name, "robot": robot}

        return fake

    monkeypatch.setattr(bench, "bench_wbc", recorder("wbc", 3))
    monkeypatch.setattr(bench, "bench_policy", recorder("policy", 3))
    monkeypatch.setattr(bench, "bench_estimator", recorder("estimator", 2))
    monkeypatch.setattr(bench, "bench_perception", recorder("perception", 1))
    monkeypatch.setattr(bench, "bench_driver", recorder("driver_lockstep", 3))
    monkeypatch.setattr(bench, "bench_driver_hardware", recorder("driver_hardware", 4))
    monkeypatch.setattr(mpc_bench, "bench_mpc", recorder("mpc", -1))
    monkeypatch.setattr(rt_bench, "bench_driver_scenarios", recorder("driver", -1))
    return calls


@pytest.mark.parametrize(
    "argv",
    [
        ["wbc", "--states", "5"],
        ["mpc", "--repeats", "1"],
        ["policy"],
        ["estimator"],
        ["driver", "--seconds", "1"],
        ["driver", "--lockstep"],
        ["driver", "--hardware", "can_mit"],
    ],
    ids=lambda a: "_".join(a[:2]),
)
@pytest.mark.parametrize("robot", ["t1", "g1"])
def test_bench_parsers_thread_the_robot(
    argv: list[str], robot: str, recorded: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    extra = [] if robot == "g1" else ["--robot", robot]  # g1: the default
    assert bench.main(argv + extra) == 0
    assert _last_json(capsys.readouterr().out)["robot"] == robot
    (name, args, _kwargs), *rest = recorded
    assert not rest
    if name in ("policy", "estimator"):  # "": the robot's policy, resolved by the benchmark
        assert (args[0] if name == "policy" else args[3]) == ""


def test_bench_perception_parser_threads_the_robot(
    recorded: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.main(["perception", "--frames", "1", "--rtf-seconds", "0", "--robot", "g1"]) == 0
    assert _last_json(capsys.readouterr().out)["robot"] == "g1"


def test_bench_refuses_unknown_robot(recorded: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["wbc", "--robot", "no_such_robot"]) == 2
    assert "no_such_robot" in capsys.readouterr().err
    assert not recorded


def test_perception_refuses_a_robot_without_camera(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["perception", "--robot", "t1", "--frames", "1", "--rtf-seconds", "0"]) == 2
    err = capsys.readouterr().err
    assert "'t1'" in err and "camera" in err and "Traceback" not in err


def test_eval_perception_refuses_a_robot_without_camera(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evaluate.main(["perception", "--robot", "t1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "'t1'" in err and "camera" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("robot", "policy"), [("t1", "holosoma/t1_fastsac"), ("g1", "holosoma/g1_fastsac")])
def test_eval_estimator_threads_the_robot_and_its_policy(
    robot: str,
    policy: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen: dict[str, Any] = {}

    def fake(out_dir: Any, **kwargs: Any) -> dict[str, Any]:
        seen.update(kwargs)
        return {"evaluation": "estimator", "robot": kwargs["robot"], "policy": kwargs["policy"]}

    monkeypatch.setattr(estimator_eval, "run_estimator_eval", fake)
    assert evaluate.main(["estimator", "--robot", robot, "--out", str(tmp_path)]) == 0
    assert _last_json(capsys.readouterr().out) == {
        "evaluation": "estimator",
        "robot": robot,
        "policy": policy,
    }
    assert seen["robot"] == robot and seen["policy"] == policy


def test_eval_estimator_refuses_a_policy_of_another_robot(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["estimator", "--robot", "t1", "--policy", "holosoma/g1_fastsac", "--out", str(tmp_path)]
    assert evaluate.main(args) == 2
    assert "error" in capsys.readouterr().err


def test_wbc_bench_runs_on_t1(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["wbc", "--robot", "t1", "--states", "20", "--walking-seconds", "1.0"]) == 0
    out = _last_json(capsys.readouterr().out)
    assert out["robot"] == "t1"
    from humanoid_control.wbc.controller import StandingController

    # the QP timed is the T1's (23 joints), not the G1's (29)
    sizes = {r: StandingController(load_robot_config(r)).qp.n for r in ("g1", "t1")}
    assert sizes["t1"] != sizes["g1"]
    assert out["qp_variables"] == sizes["t1"]
    assert out["trajectory_states"] > 0 and out["walking_single_support_states"] > 0


def test_mpc_bench_runs_on_t1_with_its_own_plan(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["mpc", "--robot", "t1", "--repeats", "1", "--rate", "10", "--placo-python", "/nonexistent"]
    assert bench.main(argv) == 0
    out = _last_json(capsys.readouterr().out)
    assert out["robot"] == "t1"
    plan = json.loads(Path(out["plan"]).read_text())  # planned for the T1 (the stored plan is the G1's)
    assert plan["robot"] == "t1" and out["plan_steps"] == len(plan["steps"]) > 0
    assert out["placo_us_median"] is None


def test_estimator_bench_runs_on_t1(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["estimator", "--robot", "t1", "--seconds", "2"]) == 0
    out = _last_json(capsys.readouterr().out)
    assert out["robot"] == "t1" and out["policy"] == "holosoma/t1_fastsac"
    assert out["ticks"] > 0


@pytest.mark.slow
def test_driver_bench_launches_t1(capsys: pytest.CaptureFixture[str]) -> None:
    """The graph benchmark launches ``robot:=t1``: the driver reports the T1's joint count."""
    argv = ["driver", "--lockstep", "--robot", "t1", "--seconds", "2", "--lockstep-seconds", "2"]
    assert bench.main(argv) == 0
    out = _last_json(capsys.readouterr().out)
    assert out["robot"] == "t1"
    log = (Path(out["logs"]) / "launch_lockstep_none.log").read_text()
    assert f"robot t1: {len(load_robot_config('t1').joints)} joints" in log
