"""``humanoid-report <bag> [--out DIR]``: a recorded run as a static HTML page, PNGs and a ``summary.json``.

The bag is read with ``rosbags`` (:mod:`.report_bag`; a killed recording needs ``humanoid-record --recover``
first). The page (``index.html``, relative links only: the folder can be copied or served as it is) shows:

- the operation record: the time shares of the velocity sources (teleop, autonomy, idle), the time in each
  mode and the event counts (``/mode_manager/report``'s ``shares`` and ``counts``, :mod:`.report_events`);
- ``velocity.png``: velocity commanded (``/cmd_vel``, ``/teleop/cmd_vel``, ``/autonomy/cmd_vel``; heading
  frame) against achieved (``/odom``, ``/sim/ground_truth``; base frame);
- ``control.png``: who was in control over time (velocity source, operating mode, policy / model-based /
  driver hold / damping, the driver's mode) with the controller switches (handovers);
- ``contacts.png``: the feet's normal contact forces (``/sim/contacts/*``, ``/contacts/*``);
- ``balance.png``: CoM and capture point against the support polygon (:mod:`.report_balance`: MuJoCo
  kinematics of the recorded ground truth and joint states; without them the walking controller's CoM, DCM
  and ZMP from ``/walking/status``);
- ``loop.png``: the driver loop's overruns per second (its ``/diagnostics``);
- ``diagnostics.png``: every node's diagnostics warnings and errors as a timeline;
- the events (e-stops, faults, pushes, mode changes, falls, respawns, takeovers), marked on every plot, in a
  table, and a few rendered frames of the robot at them (``frame_<n>_<kind>.png``, :mod:`.report_frames`).

A plot whose topics the bag lacks is left out and the page says why. ``summary.json``: ``shares`` and
``counts`` (the operation record's, the keys of ``/mode_manager/report``; null without the mode manager),
``operation_record`` (with ``shares_s``, ``modes_s``, ``duration_s`` and where it came from), ``topics``
(type and message count each), ``message_count``, ``duration_s``, ``events`` and ``event_counts``,
``figures`` (per figure its file, the event times marked and the markers' pixels), ``absent`` (figure ->
why), ``frames``, ``recorder`` (the bag's ``custom_data``: ``recorder_cpu_pct`` among them).

Exit codes: 0 written; 2 the path is not a readable bag (or the output folder is inside it).
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from humanoid_bringup.recording.report_bag import BagError, RunData, TopicNames, read_run
from humanoid_bringup.recording.report_events import EVENT_KINDS, RunEvent, find_events, operation_record

__all__ = ["ReportOptions", "main", "make_report"]


@dataclass(frozen=True)
class ReportOptions:
    """``out``: the report folder (default ``<bag>_report`` beside the bag); ``robot``: the robot
    configuration (kinematics, rendering); ``max_rate_hz``: per-tick streams thinned to this (samples per
    second); ``balance_rate_hz``: CoM / capture point samples per second; ``frames``: at most this many
    rendered frames (0: none); ``frame_size``: their width and height (px)."""

    out: Path | None = None
    robot: str = "g1"
    max_rate_hz: float = 100.0
    balance_rate_hz: float = 50.0
    frames: int = 6
    frame_size: tuple[int, int] = (480, 360)

    def check(self) -> None:
        """``ValueError`` naming a bad option."""
        if not (math.isfinite(self.max_rate_hz) and self.max_rate_hz > 0):
            raise ValueError(f"--max-rate must be > 0, got {self.max_rate_hz}")
        if not (math.isfinite(self.balance_rate_hz) and self.balance_rate_hz > 0):
            raise ValueError(f"--balance-rate must be > 0, got {self.balance_rate_hz}")
        if self.frames < 0:
            raise ValueError(f"--frames must be >= 0, got {self.frames}")


def _output_folder(bag: Path, out: Path | None) -> Path:
    bag_dir = bag if bag.is_dir() else bag.parent
    folder = Path(out) if out is not None else bag_dir.parent / f"{bag_dir.name}_report"
    resolved, inside = folder.resolve(), bag_dir.resolve()
    if resolved == inside or inside in resolved.parents:
        raise BagError(f"the report folder {folder} is inside the bag {bag_dir}: choose another --out")
    return folder


def _frame_events(events: list[RunEvent], limit: int) -> list[RunEvent]:
    """Up to ``limit`` events to render, the most important kinds first, at least 50 ms apart; time order."""
    rank = {k: i for i, k in enumerate(EVENT_KINDS)}
    chosen: list[RunEvent] = []
    for ev in sorted(events, key=lambda e: (rank.get(e.kind, 99), e.t)):
        if len(chosen) >= limit:
            break
        if all(abs(ev.t - c.t) >= 0.05 for c in chosen):
            chosen.append(ev)
    return sorted(chosen, key=lambda e: e.t)


def _frames(
    run: RunData, events: list[RunEvent], model: Any, out: Path, options: ReportOptions
) -> tuple[list[dict[str, Any]], str | None]:
    from humanoid_bringup.recording.report_frames import FrameJob, render_frames

    if options.frames == 0:
        return [], "frames not asked for (--frames 0)"
    if model is None:
        return [], "no ground truth (/sim/ground_truth) with /joint_states in the bag: no frames to render"
    chosen = _frame_events(events, options.frames)
    if not chosen:  # no events: the start and the end of the recorded state
        assert run.truth is not None and run.joints is not None
        first = max(float(run.truth.t[0]), float(run.joints.t[0]))
        last = min(float(run.truth.t[-1]), float(run.joints.t[-1]))
        chosen = [RunEvent(first, "start", "start", ""), RunEvent(last, "end", "end", "")]
    jobs, rows = [], []
    for n, ev in enumerate(chosen):
        state = model.state_at(run, ev.t)
        if state is None:
            continue
        name = f"frame_{n}_{ev.kind}.png"
        jobs.append(FrameJob([float(v) for v in state[0]], out / name, f"{ev.t:.3f} s: {ev.label}"))
        rows.append({"file": name, "t": round(ev.t, 6), "kind": ev.kind, "label": ev.label})
    if not jobs:
        return [], "no recorded state at the events' times"
    written, error = render_frames(options.robot, jobs, *options.frame_size)
    names = {p.name for p in written}
    rows = [r for r in rows if r["file"] in names]
    return rows, (f"rendering failed: {error}" if not rows else None)


def make_report(bag: str | Path, options: ReportOptions | None = None) -> dict[str, Any]:
    """Write the report of ``bag`` (module docstring); returns the summary (also ``summary.json``).
    ``BagError`` if ``bag`` is not a readable bag."""
    from humanoid_bringup.recording import report_plots as plots

    options = options or ReportOptions()
    options.check()
    bag = Path(bag)
    out = _output_folder(bag, options.out)
    run = read_run(bag, TopicNames(), options.max_rate_hz)
    out.mkdir(parents=True, exist_ok=True)
    events = find_events(run)
    model = None
    balance = None
    notes: list[str] = []
    if run.truth is not None and run.joints is not None:
        from humanoid_bringup.recording.report_balance import BalanceModel

        try:
            model = BalanceModel(options.robot)
            balance = model.balance(run, options.balance_rate_hz)
        except Exception as exc:  # a robot whose model cannot be loaded here: the rest of the report stands
            notes.append(f"CoM / capture point and frames not computed: {type(exc).__name__}: {exc}")
            model = None
    figures: dict[str, Any] = {}
    absent: dict[str, str] = {}
    makers = (
        ("velocity", plots.plot_velocity),
        ("control", plots.plot_control),
        ("contacts", plots.plot_contacts),
        ("balance", lambda r, e, p: plots.plot_balance(r, e, p, balance)),
        ("loop", plots.plot_loop),
        ("diagnostics", plots.plot_diagnostics),
    )
    for name, make in makers:
        try:
            result = make(run, events, out / f"{name}.png")
        except Exception as exc:  # one figure's failure must not cost the others
            result = f"plotting failed: {type(exc).__name__}: {exc}"
            print(f"humanoid-report: warning: {name}: {result}", file=sys.stderr)
        if isinstance(result, str):
            absent[name] = result
            (out / f"{name}.png").unlink(missing_ok=True)
        else:
            figures[name] = result.as_dict()
    frames, frames_absent = _frames(run, events, model, out, options)
    record = operation_record(run)
    summary = {
        "bag": str(run.path),
        "time_base": run.time_base,
        "start_s": round(run.start_s, 6),
        "end_s": round(run.end_s, 6),
        "duration_s": round(run.duration_s, 6),
        "message_count": sum(c for _, c in run.topics.values()),
        "topics": {n: {"type": t, "count": c} for n, (t, c) in sorted(run.topics.items())},
        "recorder": run.custom,
        "shares": record["shares"] if record else None,
        "counts": record["counts"] if record else None,
        "operation_record": record,
        "events": [e.as_dict() for e in events],
        "event_counts": dict(Counter(e.kind for e in events)),
        "figures": figures,
        "absent": absent,
        "frames": frames,
        "frames_absent": frames_absent,
        "notes": notes,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=_json_default))
    (out / "index.html").write_text(_page(summary))
    return summary


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _table(rows: list[list[Any]], head: list[str]) -> str:
    esc = html.escape
    cells = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


TITLES = {
    "velocity": "Velocity commanded vs achieved",
    "control": "Who was in control",
    "contacts": "Contact forces",
    "balance": "CoM and capture point against the support polygon",
    "loop": "Driver loop overruns per second",
    "diagnostics": "Diagnostics warnings and errors",
}


def _page(s: dict[str, Any]) -> str:
    """The static page (relative links to the PNGs)."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Run report: {esc(Path(s['bag']).name)}</title>",
        "<style>body{font-family:sans-serif;max-width:1150px;margin:auto;padding:1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;"
        "font-size:13px}img{max-width:100%}.absent{color:#a33}.frames img{width:32%;margin:2px}"
        "figure{display:inline-block;margin:0}</style></head><body>",
        f"<h1>Run report: {esc(Path(s['bag']).name)}</h1>",
        f"<p>Bag <code>{esc(s['bag'])}</code>: {s['duration_s']:.3f} s "
        f"({'simulated time' if s['time_base'] == 'sim' else 'wall clock'}), "
        f"{s['message_count']} messages on {len(s['topics'])} topics"
        + (
            f"; recorder CPU {esc(s['recorder']['recorder_cpu_pct'])} %"
            if "recorder_cpu_pct" in s["recorder"]
            else ""
        )
        + ".</p>",
        "<h2>Operation record</h2>",
    ]
    rec = s["operation_record"]
    if rec:
        shares = [[k, f"{100 * v:.1f} %", f"{rec['shares_s'][k]:.3f} s"] for k, v in rec["shares"].items()]
        parts.append(_table(shares, ["velocity from", "share", "time"]))
        parts.append(
            _table([[k, f"{v:.3f} s"] for k, v in rec["modes_s"].items() if v > 0], ["mode", "time"])
        )
        parts.append(_table([[k, v] for k, v in rec["counts"].items()], ["count", "n"]))
        parts.append(f"<p>From {esc(rec['source'])}.</p>")
    else:
        parts.append(
            "<p class='absent'>Not in this bag: no /mode_manager/state (the mode manager was not "
            "running or not recorded).</p>"
        )
    parts.append("<h2>Events</h2>")
    if s["events"]:
        parts.append(
            _table(
                [[f"{e['t']:.3f}", e["kind"], e["label"], e["source"]] for e in s["events"]],
                ["t (s)", "kind", "event", "from"],
            )
        )
    else:
        parts.append("<p>No events (e-stops, faults, pushes, mode changes, falls, respawns) in this bag.</p>")
    for name, title in TITLES.items():
        parts.append(f"<h2>{esc(title)}</h2>")
        if name in s["figures"]:
            fig = s["figures"][name]
            parts.append(f"<img src='{esc(fig['file'])}' alt='{esc(title)}'>")
            parts += [f"<p>{esc(n)}</p>" for n in fig["notes"]]
        else:
            parts.append(f"<p class='absent'>Not in this bag: {esc(s['absent'].get(name, 'no data'))}.</p>")
    parts.append("<h2>Frames at the events</h2>")
    if s["frames"]:
        parts.append("<div class='frames'>")
        for f in s["frames"]:
            parts.append(
                f"<figure><img src='{esc(f['file'])}' alt='{esc(f['label'])}'>"
                f"<figcaption>{f['t']:.3f} s: {esc(f['label'])}</figcaption></figure>"
            )
        parts.append("</div>")
    else:
        parts.append(f"<p class='absent'>No frames: {esc(s['frames_absent'] or 'none')}.</p>")
    parts += [f"<p class='absent'>{esc(n)}</p>" for n in s["notes"]]
    parts.append("<h2>Topics</h2>")
    parts.append(
        _table([[n, t["type"], t["count"]] for n, t in s["topics"].items()], ["topic", "type", "messages"])
    )
    parts.append("<p>Summary as JSON: <a href='summary.json'>summary.json</a>.</p></body></html>")
    return "\n".join(parts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="humanoid-report",
        description="Turn a recorded run (a rosbag2 folder, humanoid-record) into a static HTML page with "
        "PNGs and a summary.json (docs/recording.md).",
    )
    parser.add_argument("bag", help="the bag folder (a killed recording: humanoid-record --recover it first)")
    parser.add_argument("--out", type=Path, help="report folder (default: <bag>_report beside the bag)")
    parser.add_argument("--robot", default="g1", help="robot configuration (default g1)")
    parser.add_argument(
        "--frames", type=int, default=6, help="rendered frames at the events (default 6; 0: none)"
    )
    parser.add_argument(
        "--max-rate",
        type=float,
        default=100.0,
        help="per-tick streams thinned to this rate (Hz, default 100)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-report``."""
    args = _parser().parse_args(argv)
    options = ReportOptions(out=args.out, robot=args.robot, frames=args.frames, max_rate_hz=args.max_rate)
    try:
        summary = make_report(args.bag, options)
    except (BagError, ValueError) as exc:
        print(f"humanoid-report: error: {exc}", file=sys.stderr)
        return 2
    out = _output_folder(Path(args.bag), args.out)
    print(
        f"wrote {out / 'index.html'}: {len(summary['figures'])} figures, {len(summary['frames'])} frames, "
        f"{len(summary['events'])} events"
        + (f"; not in this bag: {', '.join(sorted(summary['absent']))}" if summary["absent"] else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
