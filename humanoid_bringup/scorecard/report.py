"""The scorecard's aggregation and its plain outputs: ``scorecard.json``, ``scorecard.md``, ``scorecard.png``.

``scorecard.json``::

    {"schema": 1, "robot": "g1", "quick": true, "seeds": 1,
     "controllers": [...], "scenarios": {"push_standing": ["L2"], ...}, "skipped": [...],
     "cells": [{"controller", "scenario", "level", "trials", "survival_rate", "outcomes": {"survived": n,
                "fell": n, "safe_stop": n, "error": n}, "figures": {"max_Ns": {"mean", "min", "max", "n"},
                "time_to_fall_s": {...}, "tracking_error_mps": {...}, "foot_slip_m": {...}, ...},
                "seeds": [0, 1, 2], "errors": [{"seed", "traceback"}]}, ...],
     "totals": {"trials", "outcomes": {...}},
     "wall_s": 312.4, "workers": 2, "ray_address": "embedded 127.0.0.1:6379",
     "timing": {"trials_run", "trials_resumed", "trial_wall_s_total", "trial_wall_s": {key: s}}}

Everything but :data:`RUN_KEYS` (``wall_s``, ``workers``, ``ray_address``, ``timing``) is a function of the
trials' specs and results: the same command twice gives the same JSON once :func:`comparable` drops those.

``survival_rate`` = survived / (trials that did not error); None when every trial errored. Figures: each
numeric figure a trial reports (nested dicts flattened with dots, e.g. ``max_Ns.front``), over the cell's
seeds that report a number: mean, min, max and n (``time_to_fall_s`` only counts the trials that fell).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from humanoid_bringup.scorecard.runner import ERROR, OUTCOMES, Plan, RunInfo

SCHEMA = 1
RUN_KEYS: tuple[str, ...] = ("wall_s", "workers", "ray_address", "timing")
ALL_OUTCOMES: tuple[str, ...] = (*OUTCOMES, ERROR)
# the figure shown beside the survival rate in the markdown table (first one a cell has)
HEADLINE_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("max_Ns", "{:.1f} N s", "max_Ns"),
    ("tracking_error_mps", "{:.2f} m/s err", "tracking_error_mps"),
    ("time_to_fall_s", "fell at {:.1f} s", "time_to_fall_s"),
)


def comparable(scorecard: dict[str, Any]) -> dict[str, Any]:
    """``scorecard`` without the fields of how it ran (:data:`RUN_KEYS`): equal for equal trial results."""
    return {k: v for k, v in scorecard.items() if k not in RUN_KEYS}


def _flatten(figures: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in figures.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, name + "."))
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out[name] = float(v)
    return out


def _stats(values: list[float]) -> dict[str, Any]:
    return {
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def build_cell(controller: str, scenario: str, level: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One (controller, scenario, level) cell from its trials' records (sorted by seed here)."""
    records = sorted(records, key=lambda r: r["spec"]["seed"])
    outcomes = {o: sum(r["outcome"] == o for r in records) for o in ALL_OUTCOMES}
    valid = len(records) - outcomes[ERROR]
    series: dict[str, list[float]] = {}
    for r in records:
        if r["outcome"] == ERROR:
            continue
        for name, value in _flatten(r.get("figures") or {}).items():
            series.setdefault(name, []).append(value)
    return {
        "controller": controller,
        "scenario": scenario,
        "level": level,
        "trials": len(records),
        "survival_rate": outcomes["survived"] / valid if valid else None,
        "outcomes": outcomes,
        "figures": {name: _stats(vals) for name, vals in sorted(series.items())},
        "seeds": [r["spec"]["seed"] for r in records],
        "errors": [
            {"seed": r["spec"]["seed"], "traceback": r.get("traceback", "")}
            for r in records
            if r["outcome"] == ERROR
        ],
    }


def build_scorecard(
    plan: Plan, records: dict[str, dict[str, Any]], info: RunInfo, robot: str, quick: bool
) -> dict[str, Any]:
    """The scorecard dict (module docstring) from the plan and every trial's record (by key)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for spec in plan.specs:
        groups.setdefault((spec.scenario, spec.level, spec.controller), []).append(records[spec.key()])
    cells = []
    for family in plan.families:
        for level in plan.levels[family]:
            for c in plan.controllers:
                if (family, level, c) in groups:
                    cells.append(build_cell(c, family, level, groups[(family, level, c)]))
    all_records = [records[s.key()] for s in plan.specs]
    return {
        "schema": SCHEMA,
        "robot": robot,
        "quick": quick,
        "seeds": plan.seeds,
        "controllers": list(plan.controllers),
        "scenarios": {f: list(plan.levels[f]) for f in plan.families},
        "skipped": list(plan.skipped),
        "cells": cells,
        "totals": {
            "trials": len(all_records),
            "outcomes": {o: sum(r["outcome"] == o for r in all_records) for o in ALL_OUTCOMES},
        },
        "wall_s": info.wall_s,
        "workers": info.workers,
        "ray_address": info.ray_address,
        "timing": {
            "trials_run": info.trials_run,
            "trials_resumed": info.trials_resumed,
            "trial_wall_s_total": sum(float(r.get("wall_s") or 0.0) for r in all_records),
            "trial_wall_s": {s.key(): records[s.key()].get("wall_s") for s in plan.specs},
        },
    }


def write_json(path: Path, scorecard: dict[str, Any]) -> Path:
    """``scorecard.json`` (indented, keys in insertion order)."""
    path.write_text(json.dumps(scorecard, indent=1, allow_nan=False) + "\n")
    return path


def cell_text(cell: dict[str, Any] | None) -> str:
    """A cell of the markdown table: survival rate (survived/valid trials), errors, the headline figure."""
    if cell is None:
        return "-"
    o = cell["outcomes"]
    valid = cell["trials"] - o[ERROR]
    rate = cell["survival_rate"]
    text = "error" if rate is None else f"{100 * rate:.0f} % ({o['survived']}/{valid})"
    if o["safe_stop"]:
        text += f", {o['safe_stop']} safe stop"
    if o[ERROR] and rate is not None:
        text += f", {o[ERROR]} error"
    for name, fmt, _ in HEADLINE_FIGURES:
        value = figure_mean(cell, name)
        if value is not None:
            text += "; " + fmt.format(value)
            break
    return text


def figure_mean(cell: dict[str, Any], name: str) -> float | None:
    """The cell's mean of figure ``name``; for a figure reported per part (``max_Ns.front``, ...), the mean
    over its parts; None if the cell has none."""
    stats = cell["figures"].get(name)
    if stats is not None:
        return float(stats["mean"])
    parts = [v["mean"] for k, v in cell["figures"].items() if k.startswith(name + ".")]
    return sum(parts) / len(parts) if parts else None


def scenario_rows(scorecard: dict[str, Any]) -> list[tuple[str, str]]:
    """(scenario, level) rows in plan order."""
    return [(f, lv) for f, levels in scorecard["scenarios"].items() for lv in levels]


def cell_index(scorecard: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Cells by (scenario, level, controller)."""
    return {(c["scenario"], c["level"], c["controller"]): c for c in scorecard["cells"]}


def markdown(scorecard: dict[str, Any]) -> str:
    """``scorecard.md``: one table, a row per scenario level, a column per controller."""
    controllers = scorecard["controllers"]
    idx = cell_index(scorecard)
    lines = [
        f"# Robustness scorecard ({scorecard['robot']}, {'quick' if scorecard['quick'] else 'full'}, "
        f"{scorecard['seeds']} seed{'s' if scorecard['seeds'] != 1 else ''} per cell)",
        "",
        "Survival rate (survived / trials without error); then the cell's headline figure, mean over seeds "
        "(pushes: largest survived 0.1 s impulse; walks: velocity tracking error). `-`: not planned.",
        "",
        "| scenario | level | " + " | ".join(f"`{c}`" for c in controllers) + " |",
        "|---|---|" + "---|" * len(controllers),
    ]
    for family, level in scenario_rows(scorecard):
        row = [cell_text(idx.get((family, level, c))) for c in controllers]
        lines.append(f"| {family} | {level} | " + " | ".join(row) + " |")
    t = scorecard["totals"]
    lines += [
        "",
        f"{t['trials']} trials: " + ", ".join(f"{n} {o}" for o, n in t["outcomes"].items()) + ".",
    ]
    if scorecard.get("skipped"):
        lines += ["", "Not planned: " + "; ".join(scorecard["skipped"]) + "."]
    return "\n".join(lines) + "\n"


def survival_matrix(scorecard: dict[str, Any]) -> tuple[list[str], list[str], list[list[float]]]:
    """Row labels (``scenario:level``), column labels (controllers) and survival rates (NaN: not planned
    or every trial errored)."""
    idx = cell_index(scorecard)
    rows = scenario_rows(scorecard)
    values = []
    for family, level in rows:
        line = []
        for c in scorecard["controllers"]:
            cell = idx.get((family, level, c))
            rate = None if cell is None else cell["survival_rate"]
            line.append(float("nan") if rate is None else float(rate))
        values.append(line)
    return [f"{f}:{lv}" for f, lv in rows], list(scorecard["controllers"]), values


def write_heatmap(path: Path, scorecard: dict[str, Any]) -> Path:
    """``scorecard.png``: survival heatmap, scenario levels (rows) by controllers (columns)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows, cols, values = survival_matrix(scorecard)
    data = np.array(values, dtype=float).reshape(len(rows), len(cols))
    fig, ax = plt.subplots(figsize=(2.0 + 1.6 * len(cols), 1.2 + 0.32 * len(rows)))
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#dddddd")
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(cols)), [_short(c) for c in cols], rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = data[i, j]
            ax.text(j, i, "-" if np.isnan(v) else f"{100 * v:.0f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label="survival rate")
    ax.set_title(f"Robustness scorecard ({scorecard['robot']}): survival by scenario level")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(controller: str) -> str:
    return controller.removeprefix("policy:").removeprefix("holosoma/")


def headline_values(
    scorecard: dict[str, Any], family: str, figure: str
) -> tuple[Sequence[str], dict[str, list[float]]]:
    """A family's levels and, per controller, the mean of ``figure`` per level (NaN where absent)."""
    idx = cell_index(scorecard)
    levels = scorecard["scenarios"][family]
    out: dict[str, list[float]] = {}
    for c in scorecard["controllers"]:
        vals = []
        for lv in levels:
            cell = idx.get((family, lv, c))
            value = None if cell is None else figure_mean(cell, figure)
            vals.append(float("nan") if value is None else value)
        if any(v == v for v in vals):
            out[c] = vals
    return levels, out
