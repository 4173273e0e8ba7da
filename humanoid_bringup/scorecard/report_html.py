"""``scorecard.html``: one static page (no external files, no network): the cells as a sortable table (a few
lines of inline JavaScript), each family's plots (survival and its headline figure per level, per
controller), one rendered picture of each family's world (``trial.render_world`` of its first planned
trial, rendered offscreen in a child process), and what the simulator does not model.
"""

from __future__ import annotations

import base64
import html
import io
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from humanoid_bringup.scorecard.report import ERROR, figure_mean, headline_values

NOT_MODELLED: tuple[str, ...] = (
    "Contacts are MuJoCo's soft rigid-body contacts: no foot sole or floor deformation beyond the solver's "
    "compliance (the soft floors are that compliance turned up), no granular or wet ground, no wear.",
    "Actuators are ideal torque sources behind the PD: no motor thermal limits or derating, back-EMF, "
    "battery voltage sag, gearbox backlash, elasticity or cable compliance (the randomized family only "
    "scales gains, torque limits, friction, armature and adds a delay).",
    "Sensors are the simulated IMU and encoders with the noise, bias and faults the scenario files name; "
    "no vibration, magnetometer, temperature drift or communication jitter outside the scripted faults.",
    "Trials run in one process at full speed: no real-time scheduling, bus latency or missed deadlines, "
    "unless a scenario injects them (action latency, a gap in the command stream).",
    "The robot model is the controllers' own model (MuJoCo Menagerie); errors of that model against the "
    "real robot appear only through the randomized family's perturbations.",
    "Walked blind: no perception in the loop; obstacles (steps, bars) are met, not seen.",
)

_SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var tbody = th.closest('table').tBodies[0];
    var asc = th.dataset.dir !== 'asc';
    th.closest('tr').querySelectorAll('th').forEach(function (h) { h.dataset.dir = ''; });
    th.dataset.dir = asc ? 'asc' : 'desc';
    var rows = Array.prototype.slice.call(tbody.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
      return asc ? c : -c;
    });
    rows.forEach(function (r) { tbody.appendChild(r); });
  });
});
"""

_CSS = """
body { font-family: sans-serif; margin: 1.5em; max-width: 1200px; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { background: #eee; cursor: pointer; }
td.t { text-align: left; }
.fam { display: inline-block; vertical-align: top; margin: 0.5em; }
img { border: 1px solid #ddd; }
"""

_FIGURE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("max_Ns", "max N s"),
    ("time_to_fall_s", "time to fall s"),
    ("tracking_error_mps", "tracking error m/s"),
    ("foot_slip_m", "foot slip m"),
)


def _png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _fmt(v: Any, digits: int = 2) -> tuple[str, str]:
    """(shown text, sort value) of a number or None."""
    if v is None:
        return "-", ""
    if isinstance(v, float):
        return f"{v:.{digits}f}", repr(v)
    return str(v), str(v)


def table_html(scorecard: dict[str, Any]) -> str:
    """The cells as one sortable table (click a header to sort by it)."""
    heads = [
        "scenario",
        "level",
        "controller",
        "trials",
        "survival %",
        "survived",
        "fell",
        "safe stop",
        ERROR,
    ]
    heads += [label for _, label in _FIGURE_COLUMNS]
    out = ['<table class="sortable"><thead><tr>']
    out += [f"<th>{html.escape(h)}</th>" for h in heads]
    out.append("</tr></thead><tbody>")
    for c in scorecard["cells"]:
        rate = c["survival_rate"]
        values: list[tuple[str, str, bool]] = [
            (c["scenario"], c["scenario"], True),
            (c["level"], c["level"], True),
            (c["controller"], c["controller"], True),
        ]
        values.append((*_fmt(c["trials"]), False))
        values.append((*_fmt(None if rate is None else 100.0 * rate, 0), False))
        for o in ("survived", "fell", "safe_stop", ERROR):
            values.append((*_fmt(c["outcomes"][o]), False))
        for name, _ in _FIGURE_COLUMNS:
            values.append((*_fmt(figure_mean(c, name)), False))
        out.append("<tr>")
        for text, sort, is_text in values:
            cls = ' class="t"' if is_text else ""
            out.append(f'<td{cls} data-v="{html.escape(sort)}">{html.escape(text)}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def family_plot_png(scorecard: dict[str, Any], family: str) -> bytes:
    """Survival rate and the family's headline figure per level, a line per controller (PNG bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from humanoid_bringup.scorecard.report import HEADLINE_FIGURES

    levels, survival = headline_values_survival(scorecard, family)
    figure = None
    for name, _, _ in HEADLINE_FIGURES:
        _, vals = headline_values(scorecard, family, name)
        if vals:
            figure, per_controller = name, vals
            break
    n = 2 if figure else 1
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 2.8), squeeze=False)
    x = list(range(len(levels)))
    for c, vals in survival.items():
        axes[0][0].plot(x, vals, marker="o", label=c.removeprefix("policy:"))
    axes[0][0].set_ylim(-0.05, 1.05)
    axes[0][0].set_ylabel("survival rate")
    if figure:
        for c, vals in per_controller.items():
            axes[0][1].plot(x, vals, marker="o", label=c.removeprefix("policy:"))
        axes[0][1].set_ylabel(figure)
    for ax in axes[0]:
        ax.set_xticks(x, list(levels), rotation=20, fontsize=7)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=6)
    fig.suptitle(family, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def headline_values_survival(
    scorecard: dict[str, Any], family: str
) -> tuple[list[str], dict[str, list[float]]]:
    """A family's levels and each controller's survival rate per level (NaN where not planned)."""
    idx = {(c["scenario"], c["level"], c["controller"]): c for c in scorecard["cells"]}
    levels = list(scorecard["scenarios"][family])
    out: dict[str, list[float]] = {}
    for ctrl in scorecard["controllers"]:
        vals = []
        for lv in levels:
            cell = idx.get((family, lv, ctrl))
            rate = None if cell is None else cell["survival_rate"]
            vals.append(float("nan") if rate is None else rate)
        if any(v == v for v in vals):
            out[ctrl] = vals
    return levels, out


def _render_png(spec: Any) -> bytes:
    """Child process: ``render_world(spec)`` as PNG bytes."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    import cv2

    from humanoid_bringup.scorecard.trial import render_world

    rgb = render_world(spec)
    ok, buf = cv2.imencode(".png", rgb[:, :, ::-1])
    if not ok:
        raise RuntimeError("PNG encoding failed")
    return bytes(buf)


def render_worlds(specs: list[Any], render: Callable[[Any], bytes] | None = None) -> dict[str, bytes | str]:
    """One picture per family (the first of ``specs`` of each): PNG bytes, or the error text if rendering
    failed (the page says so instead of failing). Rendered in one spawned child process (``MUJOCO_GL=egl``
    unless set), so the renderer's GL state stays out of this process."""
    first: dict[str, Any] = {}
    for s in specs:
        first.setdefault(s.scenario, s)
    out: dict[str, bytes | str] = {}
    if render is not None:
        for fam, spec in first.items():
            try:
                out[fam] = render(spec)
            except Exception as exc:  # a picture is optional
                out[fam] = f"{type(exc).__name__}: {exc}"
        return out
    os.environ.setdefault("MUJOCO_GL", "egl")
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        futures = {fam: pool.submit(_render_png, spec) for fam, spec in first.items()}
        for fam, fut in futures.items():
            try:
                out[fam] = fut.result(timeout=120)
            except Exception as exc:  # a picture is optional
                out[fam] = f"{type(exc).__name__}: {exc}"
    return out


def write_html(
    path: Path,
    scorecard: dict[str, Any],
    worlds: dict[str, bytes | str],
    markdown_text: str,
    heatmap_png: bytes | None = None,
) -> Path:
    """Write ``scorecard.html`` (self-contained: images inline as data URIs)."""
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Robustness scorecard ({html.escape(scorecard['robot'])})</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Robustness scorecard ({html.escape(scorecard['robot'])}, "
        f"{'quick' if scorecard['quick'] else 'full'}, {scorecard['seeds']} seed(s) per cell)</h1>",
        f"<p>{scorecard['totals']['trials']} trials: "
        + ", ".join(f"{n} {html.escape(o)}" for o, n in scorecard["totals"]["outcomes"].items())
        + f". Wall time {scorecard['wall_s']:.0f} s on {scorecard['workers']} worker(s), Ray: "
        f"{html.escape(str(scorecard['ray_address']))}. Click a column header to sort.</p>",
        "<h2>Cells</h2>",
        table_html(scorecard),
    ]
    if heatmap_png:
        parts += ["<h2>Survival</h2>", f'<img alt="survival heatmap" src="{_png_data_uri(heatmap_png)}">']
    parts.append("<h2>Families</h2>")
    for family in scorecard["scenarios"]:
        parts.append(f'<div class="fam"><h3>{html.escape(family)}</h3>')
        world = worlds.get(family)
        if isinstance(world, bytes):
            parts.append(f'<img alt="{html.escape(family)} world" src="{_png_data_uri(world)}"><br>')
        elif isinstance(world, str):
            parts.append(f"<p><i>world picture not rendered: {html.escape(world)}</i></p>")
        plots = _png_data_uri(family_plot_png(scorecard, family))
        parts.append(f'<img alt="{html.escape(family)} plots" src="{plots}">')
        parts.append("</div>")
    parts.append("<h2>What the simulator does not model</h2><ul>")
    parts += [f"<li>{html.escape(t)}</li>" for t in NOT_MODELLED]
    parts.append("</ul>")
    parts.append(f"<h2>scorecard.md</h2><pre>{html.escape(markdown_text)}</pre>")
    parts.append(f"<script>{_SORT_JS}</script></body></html>\n")
    path.write_text("\n".join(parts))
    return path
