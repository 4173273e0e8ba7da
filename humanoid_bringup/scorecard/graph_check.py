"""``--graph-check K``: re-run K sampled scorecard trials through the ROS graph (driver, state estimator and
controller as separate processes, lockstep; ``humanoid-eval push``) and put both verdicts and figures side by
side.

What the graph can re-run today: the push families with the controllers and directions that ``humanoid-eval
push`` takes (``wbc_stand`` and ``mpc_walk``; front, back, left, right), ``push_walking`` at the gait
phases ``mid_left`` / ``mid_right`` (``--walking-speed`` with ``--stances``). The graph run bisects with the
family's iterations and bracket (``--iterations``, ``--max-impulse`` for stepping controllers; ``wbc_stand``'s
bracket is 1.6 x the no-step bound in both); its verdict is the scorecard's rule on its ``max_Ns`` (survived
when at least the family's ``survive_Ns``). Other trials (walking families, whose worlds the launch file
cannot build yet, learned policies, which ``humanoid-eval push`` does not take, diagonals) are not sampled;
the report lists how many candidates there were. The sample is seeded (the same scorecard, the same
sample).

Each graph run is a ``humanoid-eval push`` process of its own, output under ``<out>/graph_check/<key>/``.
``graph_check.json`` there: ``{"sampled": n, "candidates": n, "agree": bool, "trials": [{"key",
"controller", "scenario", "level", "seed", "in_process": {"outcome", "max_Ns"}, "graph": {"outcome",
"max_Ns", "exit_code", "wall_s"}, "agree": bool, "max_Ns_diff": float, "step_Ns": float}]}``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CARDINAL_DEG = {0.0: "front", 90.0: "left", 180.0: "back", -180.0: "back", -90.0: "right"}
GRAPH_CONTROLLERS = ("wbc_stand", "mpc_walk")
SAMPLE_SEED = 41


def graph_command(record: dict[str, Any], family: Any) -> list[str] | None:
    """The ``humanoid-eval push`` arguments that re-run this trial through the graph, or None if it cannot."""
    spec = record["spec"]
    figures = record.get("figures") or {}
    if record.get("outcome") == "error" or spec["controller"] not in GRAPH_CONTROLLERS:
        return None
    if spec["scenario"] not in ("push_standing", "push_walking"):
        return None
    direction = CARDINAL_DEG.get(float(family.levels[spec["level"]].params.get("direction_deg", 999.0)))
    if direction is None:
        return None
    s = family.settings
    args = ["push", "--controller", spec["controller"], "--robot", spec["robot"], "--directions", direction]
    args += ["--iterations", str(int(s["iterations"]))]
    if spec["controller"] != "wbc_stand":
        args += ["--max-impulse", str(float(s["top_Ns"]))]
    if spec["scenario"] == "push_walking":
        phase = figures.get("phase")
        if phase not in ("mid_left", "mid_right") or spec["controller"] != "mpc_walk":
            return None
        args += ["--walking-speed", str(float(s["speed_mps"])), "--stances", phase.removeprefix("mid_")]
    return args


def _run_graph(args: list[str], out: Path, timeout_s: float) -> tuple[int, dict[str, Any] | None, float]:
    """One ``humanoid-eval push`` process; (exit code, its push.json or None, wall s)."""
    out.mkdir(parents=True, exist_ok=True)
    code = "import sys; from humanoid_bringup.evaluation.evaluate import main; sys.exit(main(sys.argv[1:]))"
    t0 = time.monotonic()
    with open(out / "graph.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args, "--out", str(out)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
    files = sorted(out.rglob("push.json"))
    result = json.loads(files[0].read_text()) if files else None
    return rc, result, time.monotonic() - t0


def run_graph_check(
    scorecard: dict[str, Any], out: Path, k: int, timeout_s: float = 900.0, log: Any = None
) -> dict[str, Any]:
    """Sample ``k`` graph-checkable trials of ``scorecard`` (its records under ``out/trials``), re-run each
    through the graph, write and return ``graph_check.json`` (module docstring)."""
    from humanoid_bringup.scorecard.scenarios import load_family
    from humanoid_bringup.scorecard.store import TRIALS_DIR

    if k < 0:
        raise ValueError(f"--graph-check must be >= 0 (got {k})")
    log = log or (lambda text: print(text, file=sys.stderr))
    keys = sorted(scorecard["timing"]["trial_wall_s"])
    families: dict[str, Any] = {}
    candidates: list[tuple[str, dict[str, Any], list[str]]] = []
    for key in keys:
        record = json.loads((out / TRIALS_DIR / f"{key}.json").read_text())
        name = record["spec"]["scenario"]
        if name not in families:
            families[name] = load_family(name, record["spec"]["robot"])
        args = graph_command(record, families[name])
        if args is not None:
            candidates.append((key, record, args))
    sample = random.Random(SAMPLE_SEED).sample(candidates, min(k, len(candidates)))
    rows = []
    for i, (key, record, args) in enumerate(sample):
        log(f"graph check {i + 1}/{len(sample)}: {key} (humanoid-eval {' '.join(args)})")
        rc, result, wall = _run_graph(args, out / "graph_check" / key, timeout_s)
        family = families[record["spec"]["scenario"]]
        direction = args[args.index("--directions") + 1]
        g_max = None if result is None or direction not in result else float(result[direction]["max_Ns"])
        survive = float(family.settings["survive_Ns"])
        g_outcome = "error" if g_max is None else ("survived" if g_max >= survive - 1e-9 else "fell")
        ip_max = (record.get("figures") or {}).get("max_Ns")
        rows.append(
            {
                "key": key,
                **{f: record["spec"][f] for f in ("controller", "scenario", "level", "seed")},
                "in_process": {"outcome": record["outcome"], "max_Ns": ip_max},
                "graph": {"outcome": g_outcome, "max_Ns": g_max, "exit_code": rc, "wall_s": round(wall, 1)},
                "agree": g_outcome == record["outcome"],
                "max_Ns_diff": None if g_max is None or ip_max is None else round(g_max - float(ip_max), 4),
                "step_Ns": (record.get("figures") or {}).get("step_Ns"),
            }
        )
    report = {
        "sampled": len(sample),
        "candidates": len(candidates),
        "agree": all(r["agree"] for r in rows),
        "trials": rows,
    }
    (out / "graph_check.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "graph_check.md").write_text(graph_check_markdown(report))
    return report


def graph_check_markdown(report: dict[str, Any]) -> str:
    """``graph_check.md``: one row per sampled trial, the in-process and the graph verdict and ``max_Ns``
    (N s) side by side, their difference and the bisection's step (N s)."""

    def num(v: Any) -> str:
        return "-" if v is None else f"{float(v):.2f}"

    verdict = "all agree" if report["agree"] else "DISAGREE"
    lines = [
        f"# Graph check: {report['sampled']} of {report['candidates']} graph-checkable trials, {verdict}",
        "",
        "| trial | in-process | graph | in-process max N s | graph max N s | diff N s | step N s | agree |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["trials"]:
        ip, g = r["in_process"], r["graph"]
        name = f"{r['controller']} {r['scenario']}:{r['level']} s{r['seed']}"
        lines.append(
            f"| {name} | {ip['outcome']} | {g['outcome']} | {num(ip['max_Ns'])} | {num(g['max_Ns'])} | "
            f"{num(r['max_Ns_diff'])} | {num(r['step_Ns'])} | {'yes' if r['agree'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"
