"""``humanoid-eval scorecard`` and ``humanoid-bench scorecard``: the robustness scorecard's command lines.

``humanoid-eval scorecard [--controllers ...] [--scenarios ...] [--seeds N] [--quick] [--workers N]
[--address ADDR] [--out DIR] [--graph-check K] [--robot R]`` plans the trials (everything validated before
the first one runs), runs them (Ray embedded on loopback by default; ``--address`` an existing cluster;
``--workers 0`` in this process), stores each finished trial under ``DIR/trials/`` (a rerun resumes), writes
``scorecard.json``, ``.md``, ``.png`` and ``.html`` in ``DIR`` (default ``results/scorecard``) and prints the
path of ``scorecard.json`` as its last line.

``humanoid-bench scorecard``: the same trial set run twice on one embedded Ray instance with 2 CPUs, once with
1 trial in flight and once with 2 (fresh stores, workers warmed first; ``--rounds R`` repeats both in
alternating order); the last line of stdout is ``{"trials": n, "trials_per_s_1", "trials_per_s_2",
"speedup", "wall_s_1", "wall_s_2", "load_avg", ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from humanoid_bringup.scorecard.report import build_scorecard, markdown, write_heatmap, write_json
from humanoid_bringup.scorecard.runner import (
    Catalog,
    PlanRequest,
    TrialFn,
    _warm,
    plan_trials,
    ray_session,
    run_trials,
    submit_all,
    uncached_trial,
)
from humanoid_bringup.scorecard.store import TrialStore

DEFAULT_OUT = "results/scorecard"


def _split(values: list[str] | None) -> tuple[str, ...] | None:
    """``--x a b,c`` -> (a, b, c); None stays None."""
    if values is None:
        return None
    return tuple(v for item in values for v in item.split(",") if v.strip())


def add_scorecard_arguments(p: argparse.ArgumentParser, bench: bool = False) -> None:
    """The scorecard's options on ``p`` (``bench``: without --workers/--address/--graph-check)."""
    p.add_argument(
        "--controllers",
        nargs="+",
        default=None,
        help="controller names (space or comma separated): policy:holosoma/g1_ppo, policy:<manifest path>, "
        "mpc_walk, wbc_stand (standing families only), any registered controller. Default: the robot's "
        "learned policies (config: policies; the G1: policy:holosoma/g1_ppo, policy:holosoma/g1_fastsac) "
        "and mpc_walk (+ wbc_stand on the standing families without --quick)",
    )
    p.add_argument(
        "--scenarios",
        nargs="+",
        default=None,
        help="scenario families (config/scenarios/<family>.yaml), each optionally family:level; default: all",
    )
    p.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 3; 1 with --quick)")
    p.add_argument("--robot", default="g1")
    if bench:
        p.add_argument("--all-levels", action="store_true", help="every level (default: the quick set)")
        p.add_argument(
            "--rounds", type=int, default=1, help="repeat both runs, alternating their order (load drift)"
        )
        return
    p.add_argument("--quick", action="store_true", help="each family's quick level, one seed")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="trials in flight (Ray CPUs when embedded; default: every core); 0: in this process, no Ray",
    )
    p.add_argument(
        "--address",
        default=None,
        help="an existing Ray cluster (auto or HOST:PORT) instead of the embedded loopback-only instance",
    )
    p.add_argument("--out", default=DEFAULT_OUT, help="output folder (trials/ inside it: a rerun resumes)")
    p.add_argument("--fresh", action="store_true", help="ignore stored trials (run every trial again)")
    p.add_argument(
        "--graph-check",
        type=int,
        default=0,
        metavar="K",
        help="re-run K sampled trials through the ROS graph (lockstep, separate processes); per trial both "
        "verdicts and figures side by side",
    )
    p.add_argument("--no-render", action="store_true", help="no world pictures in scorecard.html")


def request_from_args(args: argparse.Namespace) -> PlanRequest:
    """The plan request of parsed arguments."""
    return PlanRequest(
        controllers=_split(args.controllers),
        scenarios=_split(args.scenarios),
        seeds=args.seeds,
        quick=bool(args.quick) if hasattr(args, "quick") else not args.all_levels,
        robot=args.robot,
    )


@dataclass(frozen=True)
class ScorecardPaths:
    """The files one scorecard run wrote."""

    json: Path
    markdown: Path
    heatmap: Path
    html: Path


def run_scorecard(
    request: PlanRequest,
    out: str | Path = DEFAULT_OUT,
    workers: int | None = None,
    address: str | None = None,
    resume: bool = True,
    render: bool = True,
    catalog: Catalog | None = None,
    trial_fn: TrialFn | None = None,
    progress_stream: Any = None,
) -> tuple[dict[str, Any], ScorecardPaths]:
    """Plan, run (resuming from ``out/trials``), aggregate and write the four outputs. Raises ``ValueError``
    on bad input before any trial runs. Returns the scorecard dict and the paths."""
    plan = plan_trials(request, catalog)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records, info = run_trials(
        plan.specs,
        TrialStore(out),
        workers=workers,
        address=address,
        trial_fn=trial_fn,
        progress_stream=progress_stream,
        resume=resume,
    )
    scorecard = build_scorecard(plan, records, info, robot=request.robot, quick=request.quick)
    paths = ScorecardPaths(
        json=out / "scorecard.json",
        markdown=out / "scorecard.md",
        heatmap=out / "scorecard.png",
        html=out / "scorecard.html",
    )
    md = markdown(scorecard)
    paths.markdown.write_text(md)
    write_heatmap(paths.heatmap, scorecard)
    from humanoid_bringup.scorecard.report_html import render_worlds, write_html

    worlds = render_worlds(list(plan.specs)) if render else {}
    write_html(paths.html, scorecard, worlds, md, paths.heatmap.read_bytes())
    write_json(paths.json, scorecard)
    return scorecard, paths


def scorecard_main(args: argparse.Namespace) -> int:
    """``humanoid-eval scorecard``: returns the exit code (2 on bad input, nothing run)."""
    if args.graph_check < 0:
        print(
            f"humanoid-eval scorecard: --graph-check must be >= 0 (got {args.graph_check})", file=sys.stderr
        )
        return 2
    try:
        scorecard, paths = run_scorecard(
            request_from_args(args),
            out=args.out,
            workers=args.workers,
            address=args.address,
            resume=not args.fresh,
            render=not args.no_render,
        )
    except ValueError as exc:
        print(f"humanoid-eval scorecard: {exc}", file=sys.stderr)
        return 2
    print(paths.markdown.read_text())
    if args.graph_check:
        from humanoid_bringup.scorecard.graph_check import graph_check_markdown, run_graph_check

        check = run_graph_check(scorecard, Path(args.out), args.graph_check)
        print(graph_check_markdown(check))
    print(paths.json)
    return 0


def bench_scorecard(
    request: PlanRequest,
    trial_fn: TrialFn | None = None,
    catalog: Catalog | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    """Trials per second of the same trial set with 1 and with 2 trials in flight on one embedded Ray
    instance (2 CPUs; both worker processes warmed first; no store and no worker's remembered trial reused:
    :func:`~humanoid_bringup.scorecard.runner.uncached_trial`). ``rounds`` > 1 repeats both,
    in alternating order (1 then 2, 2 then 1, ...), so a load that drifts during the bench weighs on both
    alike; the rates are over all rounds. ``load_avg``: the machine's 1-minute load average before and
    after (other processes on the cores make the speedup meaningless)."""
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1 (got {rounds})")
    plan = plan_trials(request, catalog)
    n = len(plan.specs)
    trial_fn = trial_fn or uncached_trial  # each run simulates every trial (no result a run left behind)
    result: dict[str, Any] = {"trials": n, "rounds": rounds}
    walls = {1: 0.0, 2: 0.0}
    errors = {1: 0, 2: 0}
    load0 = os.getloadavg()[0]
    with ray_session(None, 2) as (ray, desc):
        ray.get([ray.remote(num_cpus=1)(_warm).remote(i) for i in range(2)])
        for r in range(rounds):
            for cap in (1, 2) if r % 2 == 0 else (2, 1):
                with tempfile.TemporaryDirectory(prefix="scorecard_bench_") as tmp:
                    store = TrialStore(tmp)
                    outcomes: list[str] = []

                    def done(
                        spec: Any, rec: dict[str, Any], store: TrialStore = store, got: list = outcomes
                    ) -> None:
                        store.save(spec, rec)
                        got.append(rec["outcome"])

                    t0 = time.perf_counter()
                    submit_all(ray, plan.specs, cap, done, trial_fn)
                    walls[cap] += time.perf_counter() - t0
                errors[cap] += outcomes.count("error")
        result["ray_address"] = desc
    for cap in (1, 2):
        result[f"wall_s_{cap}"] = walls[cap]
        result[f"trials_per_s_{cap}"] = n * rounds / walls[cap]
        result[f"errors_{cap}"] = errors[cap]
    result["speedup"] = result["trials_per_s_2"] / result["trials_per_s_1"]
    result["load_avg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return result


def bench_main(args: argparse.Namespace) -> int:
    """``humanoid-bench scorecard``: prints the JSON (last line); 2 on bad input."""
    try:
        result = bench_scorecard(request_from_args(args), rounds=args.rounds)
    except ValueError as exc:
        print(f"humanoid-bench scorecard: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0
