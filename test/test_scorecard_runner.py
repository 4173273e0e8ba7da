"""The scorecard's planning, validation, resume, aggregation and reports (humanoid_bringup/scorecard/
runner.py, store.py, report.py, report_html.py, cli.py).

Most tests use a small catalog of made-up families and a made-up trial (fast, no physics); the CLI tests use
the real scenario files (config/scenarios) and, where marked slow, the real trial.
"""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from humanoid_bringup.scorecard.cli import run_scorecard
from humanoid_bringup.scorecard.report import comparable
from humanoid_bringup.scorecard.runner import PlanRequest, plan_trials, run_trials
from humanoid_bringup.scorecard.store import TrialStore


@dataclass(frozen=True)
class FakeSpec:
    controller: str
    scenario: str
    level: str
    seed: int
    robot: str = "g1"

    def key(self) -> str:
        name = self.controller.replace("/", "_").replace(":", "-")
        return f"{name}__{self.scenario}__{self.level}__s{self.seed}"


@dataclass
class FakeFamily:
    name: str
    levels: OrderedDict[str, dict[str, float]]
    quick_level: str
    standing_only: bool
    citation: str = "made up"


class FakeCatalog:
    """Two families: ``stand`` (standing: wbc_stand may take it) and ``walk``."""

    controllers = ("policy:holosoma/g1_ppo", "policy:holosoma/g1_fastsac", "mpc_walk", "wbc_stand", "boom")

    def family_names(self) -> list[str]:
        return ["stand", "walk"]

    def load_family(self, name: str, robot: str = "g1") -> FakeFamily:
        if name == "stand":
            return FakeFamily(name, OrderedDict(light={"ns": 5.0}, heavy={"ns": 40.0}), "light", True)
        if name == "walk":
            return FakeFamily(name, OrderedDict(flat={}, rough={}, rougher={}), "rough", False)
        raise ValueError(f"unknown scenario family {name!r}")

    def validate_controller(self, name: str, robot: str = "g1") -> None:
        if name not in self.controllers:
            raise ValueError(f"unknown controller {name!r}")

    def can_run(self, controller: str, family: FakeFamily) -> bool:
        return family.standing_only or controller != "wbc_stand"

    def make_spec(self, controller: str, scenario: str, level: str, seed: int, robot: str) -> FakeSpec:
        return FakeSpec(controller, scenario, level, seed, robot)


CALLS: list[FakeSpec] = []


def fake_trial(spec: FakeSpec) -> dict[str, Any]:
    """Deterministic: ``boom`` raises; heavy pushes and odd seeds on rougher ground fall."""
    CALLS.append(spec)
    if spec.controller == "boom":
        raise RuntimeError(f"boom on {spec.scenario}")
    fell = spec.level == "heavy" or (spec.level == "rougher" and spec.seed % 2 == 1)
    figures: dict[str, Any] = {
        "time_to_fall_s": 1.5 + spec.seed if fell else None,
        "foot_slip_m": 0.01 * (spec.seed + 1),
    }
    if spec.scenario == "stand":
        figures["max_Ns"] = {"front": 10.0 + spec.seed, "back": 6.0}
    else:
        figures["tracking_error_mps"] = 0.1 + 0.01 * spec.seed
    return {"outcome": "fell" if fell else "survived", "figures": figures, "spec": {}, "wall_s": 0.5}


def _run(tmp: Path, trial=fake_trial, **kw: Any) -> tuple[dict[str, Any], Any]:
    request = kw.pop("request", PlanRequest())
    return run_scorecard(
        request,
        out=tmp,
        workers=0,
        render=False,
        catalog=FakeCatalog(),
        trial_fn=trial,
        progress_stream=io.StringIO(),
        **kw,
    )


def test_default_plan_all_levels_three_seeds_wbc_stand_only_on_standing_families() -> None:
    plan = plan_trials(PlanRequest(), FakeCatalog())
    assert plan.controllers == (
        "policy:holosoma/g1_ppo",
        "policy:holosoma/g1_fastsac",
        "mpc_walk",
        "wbc_stand",
    )
    assert plan.seeds == 3
    # stand: 4 controllers x 2 levels x 3 seeds; walk: 3 controllers x 3 levels x 3 seeds
    assert len(plan.specs) == 4 * 2 * 3 + 3 * 3 * 3
    assert {s.scenario for s in plan.specs if s.controller == "wbc_stand"} == {"stand"}
    assert any("wbc_stand" in note and "walk" in note for note in plan.skipped)
    assert sorted({s.seed for s in plan.specs}) == [0, 1, 2]


def test_quick_plan_quick_level_one_seed_three_controllers() -> None:
    plan = plan_trials(PlanRequest(quick=True), FakeCatalog())
    assert plan.seeds == 1
    assert plan.levels == {"stand": ("light",), "walk": ("rough",)}
    assert plan.controllers == ("policy:holosoma/g1_ppo", "policy:holosoma/g1_fastsac", "mpc_walk")
    assert len(plan.specs) == 6


def test_explicit_levels_and_controllers() -> None:
    req = PlanRequest(controllers=("mpc_walk", "wbc_stand"), scenarios=("walk:flat", "stand"), seeds=2)
    plan = plan_trials(req, FakeCatalog())
    assert plan.families == ("walk", "stand")
    assert plan.levels == {"walk": ("flat",), "stand": ("light", "heavy")}
    assert [(s.controller, s.scenario, s.level, s.seed) for s in plan.specs][:3] == [
        ("mpc_walk", "walk", "flat", 0),
        ("mpc_walk", "walk", "flat", 1),
        ("mpc_walk", "stand", "light", 0),
    ]
    assert not any(s.controller == "wbc_stand" and s.scenario == "walk" for s in plan.specs)


@pytest.mark.parametrize(
    ("request_", "needle"),
    [
        (PlanRequest(scenarios=("stnad",)), "'stnad'"),
        (PlanRequest(scenarios=("walk:bumpy",)), "'bumpy'"),
        (PlanRequest(controllers=("mpc_walk", "policy:nope/x")), "'policy:nope/x'"),
        (PlanRequest(seeds=0), "--seeds"),
        (PlanRequest(controllers=("wbc_stand",), scenarios=("walk",)), "wbc_stand"),
    ],
)
def test_bad_input_refused_before_any_trial(tmp_path: Path, request_: PlanRequest, needle: str) -> None:
    CALLS.clear()
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        _run(tmp_path, request=request_)
    assert CALLS == []
    assert not (tmp_path / "trials").exists()


def test_outputs_cells_and_error_recorded_with_traceback(tmp_path: Path) -> None:
    req = PlanRequest(controllers=("mpc_walk", "boom"), seeds=2)
    card, paths = _run(tmp_path, request=req)
    for p in (paths.json, paths.markdown, paths.heatmap, paths.html):
        assert p.is_file() and p.stat().st_size > 0
    on_disk = json.loads(paths.json.read_text())
    assert on_disk == json.loads(json.dumps(card))
    cells = {(c["controller"], c["scenario"], c["level"]): c for c in card["cells"]}
    assert len(cells) == 2 * (2 + 3)
    heavy = cells[("mpc_walk", "stand", "heavy")]
    assert heavy["survival_rate"] == 0.0 and heavy["outcomes"]["fell"] == 2 and heavy["seeds"] == [0, 1]
    assert heavy["figures"]["time_to_fall_s"] == {"mean": 2.0, "min": 1.5, "max": 2.5, "n": 2}
    assert heavy["figures"]["max_Ns.front"]["mean"] == 10.5
    rougher = cells[("mpc_walk", "walk", "rougher")]
    assert rougher["survival_rate"] == 0.5 and rougher["figures"]["time_to_fall_s"]["n"] == 1
    boom = cells[("boom", "walk", "flat")]
    assert boom["outcomes"]["error"] == 2 and boom["survival_rate"] is None
    assert "RuntimeError: boom on walk" in boom["errors"][0]["traceback"]
    assert card["totals"]["trials"] == 20 and card["totals"]["outcomes"]["error"] == 10
    assert {"wall_s", "workers", "ray_address", "timing"} <= set(card)
    md = paths.markdown.read_text()
    assert "| scenario | level | `mpc_walk` | `boom` |" in md
    assert "| stand | heavy | 0 % (0/2); 8.2 N s | error |" in md
    page = paths.html.read_text()
    assert '<table class="sortable">' in page and "does not model" in page and "data:image/png" in page


def test_same_command_twice_same_json_timing_aside(tmp_path: Path) -> None:
    a, _ = _run(tmp_path / "a")
    b, _ = _run(tmp_path / "b")
    assert comparable(a) == comparable(b)
    assert "timing" not in comparable(a) and "wall_s" not in comparable(a)


def test_interrupted_scorecard_resumes_where_it_stopped(tmp_path: Path) -> None:
    full, _ = _run(tmp_path / "full")
    total = full["totals"]["trials"]
    n = {"calls": 0}

    def interrupted(spec: FakeSpec) -> dict[str, Any]:
        n["calls"] += 1
        if n["calls"] == 5:
            raise KeyboardInterrupt
        return fake_trial(spec)

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "resumed", trial=interrupted)
    assert len(list((tmp_path / "resumed" / "trials").glob("*.json"))) == 4
    CALLS.clear()
    resumed, _ = _run(tmp_path / "resumed")
    assert len(CALLS) == total - 4
    assert resumed["timing"]["trials_resumed"] == 4 and resumed["timing"]["trials_run"] == total - 4
    assert comparable(resumed) == comparable(full)
    CALLS.clear()
    _run(tmp_path / "resumed")
    assert CALLS == []  # everything stored: nothing runs
    _run(tmp_path / "resumed", resume=False)
    assert len(CALLS) == total


def test_stored_error_and_foreign_records_are_run_again(tmp_path: Path) -> None:
    spec = FakeSpec("mpc_walk", "walk", "flat", 0)
    store = TrialStore(tmp_path)
    store.save(spec, {"outcome": "error", "figures": {}, "spec": spec.__dict__, "wall_s": 0.0})
    assert store.load(spec) is None
    store.save(spec, {"outcome": "survived", "figures": {}, "spec": {**spec.__dict__, "seed": 9}})
    assert store.load(spec) is None
    store.save(spec, {"outcome": "survived", "figures": {}, "spec": dict(spec.__dict__)})
    assert store.load(spec)["outcome"] == "survived"
    store.path(spec.key()).write_text("{truncated")
    assert store.load(spec) is None


def test_malformed_trial_result_is_an_error_and_nan_is_null(tmp_path: Path) -> None:
    def odd(spec: FakeSpec) -> dict[str, Any]:
        if spec.level == "flat":
            return {"outcome": "wobbled", "figures": {}}
        return {"outcome": "survived", "figures": {"foot_slip_m": float("nan"), "x": 1}}

    req = PlanRequest(controllers=("mpc_walk",), scenarios=("walk",), seeds=1)
    card, paths = _run(tmp_path, trial=odd, request=req)
    cells = {c["level"]: c for c in card["cells"]}
    assert "'wobbled'" in cells["flat"]["errors"][0]["traceback"]
    assert "foot_slip_m" not in cells["rough"]["figures"] and cells["rough"]["figures"]["x"]["mean"] == 1.0
    json.loads(paths.json.read_text())  # strict JSON (no NaN)


def test_progress_reports_done_failures_and_time_left(tmp_path: Path) -> None:
    stream = io.StringIO()
    specs = plan_trials(PlanRequest(controllers=("mpc_walk", "boom"), seeds=1), FakeCatalog()).specs
    run_trials(specs, TrialStore(tmp_path), workers=0, trial_fn=fake_trial, progress_stream=stream)
    last = stream.getvalue().strip().splitlines()[-1]
    assert f"{len(specs)}/{len(specs)} trials" in last
    assert "1 fell" in last and f"{len(specs) // 2} errors" in last and "done" in last
    assert "0/10 trials" in stream.getvalue() and "time left unknown" in stream.getvalue()


def test_negative_workers_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--workers"):
        run_trials([], TrialStore(tmp_path), workers=-1)


def test_embedded_ray_gives_the_in_process_json(tmp_path: Path) -> None:
    """Two Ray workers (embedded, loopback) run the made-up trials: the same scorecard as without Ray."""
    import sys

    import ray.cloudpickle

    # the workers cannot import this test module: ship its made-up trial and spec by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    req = PlanRequest(controllers=("mpc_walk", "boom"), scenarios=("walk",), seeds=2)
    local, _ = _run(tmp_path / "local", request=req)
    ray_card, _ = run_scorecard(
        req,
        out=tmp_path / "ray",
        workers=2,
        render=False,
        catalog=FakeCatalog(),
        trial_fn=fake_trial,
        progress_stream=io.StringIO(),
    )
    assert ray_card["workers"] == 2 and str(ray_card["ray_address"]).startswith("embedded 127.0.0.1:")
    assert comparable(ray_card) == comparable(local)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--scenarios", "push_sideways"], "'push_sideways'"),
        (["--scenarios", "push_standing:upwards"], "'upwards'"),
        (["--controllers", "mpc_walk", "teleport"], "'teleport'"),
        (["--controllers", "policy:/nonexistent/policy.onnx"], "policy:/nonexistent/policy.onnx"),
        (["--workers", "-1", "--scenarios", "push_standing:front"], "--workers"),
        (["--workers", "0", "--address", "127.0.0.1:1", "--scenarios", "push_standing:front"], "--address"),
        (["--graph-check", "-1", "--scenarios", "push_standing:front"], "--graph-check"),
    ],
)
def test_cli_bad_input_exit_2_naming_it_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    """The real scenario files and controller registry: bad input stops ``humanoid-eval scorecard``."""
    from humanoid_bringup.evaluation.evaluate import main

    assert main(["scorecard", *args, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "humanoid-eval scorecard:" in err
    assert not (tmp_path / "trials").exists() and not (tmp_path / "scorecard.json").exists()


def test_cli_out_of_range_scenario_file_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from humanoid_bringup.evaluation.evaluate import main
    from humanoid_bringup.scorecard import scenarios

    src = next(d for d in scenarios.scenario_dirs() if (d / "push_standing.yaml").is_file())
    bad = tmp_path / "scenarios"
    bad.mkdir()
    text = (src / "push_standing.yaml").read_text()
    assert "  push_duration_s: 0.1\n" in text
    (bad / "push_standing.yaml").write_text(
        text.replace("  push_duration_s: 0.1\n", "  push_duration_s: 50\n")
    )
    monkeypatch.setattr(scenarios, "scenario_dirs", lambda: [bad])
    assert main(["scorecard", "--scenarios", "push_standing", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "push_duration_s" in err and "out of range" in err
    assert not (tmp_path / "out" / "trials").exists()


def test_bench_runs_the_same_trials_with_one_and_two_workers() -> None:
    import sys

    import ray.cloudpickle

    from humanoid_bringup.scorecard.cli import bench_scorecard

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    req = PlanRequest(controllers=("mpc_walk",), scenarios=("walk",), seeds=2)
    with pytest.raises(ValueError, match="--rounds"):
        bench_scorecard(req, trial_fn=fake_trial, catalog=FakeCatalog(), rounds=0)
    result = bench_scorecard(req, trial_fn=fake_trial, catalog=FakeCatalog(), rounds=2)
    assert result["trials"] == 6 and result["rounds"] == 2 and result["errors_1"] == 0 == result["errors_2"]
    assert result["trials_per_s_1"] == 12 / result["wall_s_1"] and result["trials_per_s_2"] > 0
    assert len(result["load_avg"]) == 2
    assert result["speedup"] == result["trials_per_s_2"] / result["trials_per_s_1"]
    assert str(result["ray_address"]).startswith("embedded 127.0.0.1:")


def test_graph_check_maps_push_trials_to_humanoid_eval_push() -> None:
    """Which trials the graph can re-run, and with which ``humanoid-eval push`` arguments."""
    from humanoid_bringup.scorecard.graph_check import graph_command
    from humanoid_bringup.scorecard.scenarios import load_family

    stand, walk = load_family("push_standing"), load_family("push_walking")

    def rec(controller: str, scenario: str, level: str, phase: str | None = None) -> dict[str, Any]:
        spec = {"controller": controller, "scenario": scenario, "level": level, "seed": 0, "robot": "g1"}
        return {"outcome": "survived", "figures": {"max_Ns": 10.0, "phase": phase}, "spec": spec}

    args = graph_command(rec("wbc_stand", "push_standing", "left"), stand)
    assert args is not None and args[:5] == ["push", "--controller", "wbc_stand", "--robot", "g1"]
    assert args[args.index("--directions") + 1] == "left" and "--max-impulse" not in args
    args = graph_command(rec("mpc_walk", "push_walking", "back", "mid_right"), walk)
    assert args is not None and args[args.index("--stances") + 1] == "right"
    assert float(args[args.index("--walking-speed") + 1]) == walk.settings["speed_mps"]
    assert float(args[args.index("--max-impulse") + 1]) == walk.settings["top_Ns"]
    assert graph_command(rec("mpc_walk", "push_walking", "back", "touchdown_left"), walk) is None
    assert graph_command(rec("mpc_walk", "push_standing", "front_left"), stand) is None
    assert graph_command(rec("policy:holosoma/g1_ppo", "push_standing", "front"), stand) is None


def test_graph_check_table_puts_both_verdicts_side_by_side() -> None:
    from humanoid_bringup.scorecard.graph_check import graph_check_markdown

    row = {"controller": "mpc_walk", "scenario": "push_standing", "level": "left", "seed": 0}
    report = {
        "sampled": 1,
        "candidates": 3,
        "agree": False,
        "trials": [
            {
                **row,
                "in_process": {"outcome": "survived", "max_Ns": 27.5},
                "graph": {"outcome": "fell", "max_Ns": None, "exit_code": 1, "wall_s": 3.0},
                "agree": False,
                "max_Ns_diff": None,
                "step_Ns": 1.25,
            }
        ],
    }
    md = graph_check_markdown(report)
    assert "1 of 3 graph-checkable trials, DISAGREE" in md
    assert "| mpc_walk push_standing:left s0 | survived | fell | 27.50 | - | - | 1.25 | NO |" in md


@pytest.mark.slow
def test_cli_graph_check_real_trial_agrees_with_the_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``humanoid-eval scorecard --workers 0 --graph-check 1`` on one real push trial (wbc_stand, front: the
    cheapest through the graph): the in-process trial, then the same push through the launched ROS graph
    (separate processes, lockstep); both verdicts agree and both ``max_Ns`` are within one bisection step."""
    from humanoid_bringup.evaluation.evaluate import main

    out = tmp_path / "sc"
    args = ["scorecard", "--controllers", "wbc_stand", "--scenarios", "push_standing:front", "--seeds", "1"]
    assert main([*args, "--workers", "0", "--no-render", "--graph-check", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(out / "scorecard.json")
    card = json.loads((out / "scorecard.json").read_text())
    assert card["workers"] == 0 and card["ray_address"] is None and card["totals"]["outcomes"]["error"] == 0
    check = json.loads((out / "graph_check.json").read_text())
    assert check["sampled"] == 1 == check["candidates"]
    (row,) = check["trials"]
    assert row["graph"]["exit_code"] == 0 and row["graph"]["max_Ns"] is not None
    assert row["agree"], row
    assert row["in_process"]["outcome"] == row["graph"]["outcome"], row
    assert abs(row["max_Ns_diff"]) <= row["step_Ns"] + 1e-6, row
    assert "| wbc_stand push_standing:front s0 |" in (out / "graph_check.md").read_text()
    assert "all agree" in "\n".join(printed)
