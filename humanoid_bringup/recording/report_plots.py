"""``humanoid-report``'s figures (matplotlib, Agg): one PNG each, events marked on every time axis.

Each ``plot_*`` function takes the run (:class:`~.report_bag.RunData`), its events
(:class:`~.report_events.RunEvent`) and the output path, and returns a :class:`FigureInfo` (what was drawn,
where each event marker is in the image) or a string saying why the bag has nothing for it. An event is a
vertical line across every time axis of the figure, in its kind's colour (:data:`EVENT_COLORS`), drawn above
the data, the most important kind on top where several share a time; ``FigureInfo.markers`` gives each one's
column and the rows of its axes in image pixels (0, 0 at the top left), so a test can look for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_bringup.recording.report_bag import RunData
from humanoid_bringup.recording.report_events import EVENT_KINDS, RunEvent, control_intervals

__all__ = ["EVENT_COLORS", "LEVEL_COLORS", "FigureInfo"]

#: event kind -> RGB (0-255) of its marker line
EVENT_COLORS: dict[str, tuple[int, int, int]] = {
    "estop": (230, 0, 0),
    "fall": (140, 0, 160),
    "fault": (230, 0, 150),
    "damping": (130, 70, 0),
    "push": (255, 140, 0),
    "respawn": (0, 170, 0),
    "takeover": (0, 180, 220),
    "mode": (110, 110, 110),
}
#: diagnostics level -> RGB of its marker (WARN, ERROR, STALE)
LEVEL_COLORS: dict[int, tuple[int, int, int]] = {1: (225, 185, 0), 2: (120, 0, 30), 3: (150, 150, 150)}
DPI = 100
VELOCITY = {"/cmd_vel": "k", "/teleop/cmd_vel": "#555555", "/autonomy/cmd_vel": "#8c564b"}


def _rgb(c: tuple[int, int, int]) -> tuple[float, float, float]:
    return (c[0] / 255.0, c[1] / 255.0, c[2] / 255.0)


@dataclass
class FigureInfo:
    """A written figure: ``name``, ``file`` (relative to the report folder), ``title``, the event times marked
    (s) and the markers in image pixels (``t``, ``kind``, ``x``, ``y0``, ``y1``), notes for the page."""

    name: str
    file: str
    title: str
    events_marked: list[float] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    size_px: tuple[int, int] = (0, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "title": self.title,
            "events_marked": [round(t, 6) for t in self.events_marked],
            "markers": self.markers,
            "notes": self.notes,
            "size_px": list(self.size_px),
        }


def _figure(rows: int, height: float = 2.3, width: float = 11.0) -> tuple[Any, list[Any]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        rows, 1, figsize=(width, 0.8 + height * rows), dpi=DPI, sharex=True, squeeze=False
    )
    return fig, list(axes[:, 0])


def _span(run: RunData) -> tuple[float, float]:
    end = max(run.end_s, run.last_clock_s if run.last_clock_s is not None else run.end_s)
    start = min(run.start_s, end)
    return (start, end if end > start else start + 1.0)


def _time_label(run: RunData) -> str:
    return "time (s, simulated)" if run.simulated else "time (s since the bag's first message)"


def _mark_events(axes: list[Any], events: list[RunEvent]) -> None:
    """Vertical lines (above the data), the least important kinds first: the most important is on top."""
    rank = {k: i for i, k in enumerate(EVENT_KINDS)}
    for ev in sorted(events, key=lambda e: -rank.get(e.kind, len(rank))):
        color = _rgb(EVENT_COLORS.get(ev.kind, (0, 0, 0)))
        for ax in axes:
            ax.axvline(ev.t, color=color, linewidth=2.0, zorder=10, linestyle="-")


def _event_legend(fig: Any, events: list[RunEvent]) -> None:
    from matplotlib.lines import Line2D

    kinds = [k for k in EVENT_KINDS if any(e.kind == k for e in events)]
    if kinds:
        handles = [Line2D([0], [0], color=_rgb(EVENT_COLORS[k]), linewidth=2.0) for k in kinds]
        fig.legend(
            handles,
            [k.replace("estop", "e-stop") for k in kinds],
            loc="upper right",
            ncol=len(kinds),
            fontsize=8,
            frameon=False,
        )


def _finish(
    fig: Any, name: str, title: str, path: Path, axes: list[Any], events: list[RunEvent]
) -> FigureInfo:
    """Lay out, draw, locate the event markers in image pixels, save."""
    import matplotlib.pyplot as plt

    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    _event_legend(fig, events)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.canvas.draw()
    width, height = fig.canvas.get_width_height()
    info = FigureInfo(name=name, file=path.name, title=title, size_px=(int(width), int(height)))
    for ev in events:
        info.events_marked.append(ev.t)
        for ax in axes:
            x = float(ax.transData.transform((ev.t, 0.0))[0])
            box = ax.get_window_extent()
            info.markers.append(
                {
                    "t": round(ev.t, 6),
                    "kind": ev.kind,
                    "x": round(x, 2),
                    "y0": round(height - box.y1, 2),
                    "y1": round(height - box.y0, 2),
                }
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return info


def _smooth(t: np.ndarray, v: np.ndarray, window_s: float) -> np.ndarray:
    """Moving average over ``window_s`` (s) of samples at times ``t``."""
    if len(t) < 3:
        return v
    dt = float(np.median(np.diff(t))) or 1.0
    n = max(1, round(window_s / dt))
    if n <= 1:
        return v
    kernel = np.ones(n) / n
    return np.column_stack([np.convolve(v[:, k], kernel, mode="same") for k in range(v.shape[1])])


def plot_velocity(run: RunData, events: list[RunEvent], path: Path) -> FigureInfo | str:
    """Velocity commanded (``/cmd_vel`` and the mode manager's sources) against achieved (``/odom``,
    ``/sim/ground_truth``): forward, sideways (m/s), turn rate (rad/s)."""
    if not run.cmd_vel and run.odom is None and run.truth is None:
        return "no /cmd_vel, /odom or /sim/ground_truth in the bag"
    fig, axes = _figure(3)
    notes = []
    for topic, s in run.cmd_vel.items():
        style = "-" if topic == run.names.cmd_vel else "--"
        for k, ax in enumerate(axes):
            ax.step(
                s.t,
                s.v[:, k],
                where="post",
                color=VELOCITY.get(topic, "#444444"),
                linestyle=style,
                linewidth=1.4 if topic == run.names.cmd_vel else 1.0,
                label=f"{topic} (commanded)",
            )
    achieved = [(run.names.odom, run.odom, (31, 119, 180))]
    if run.truth is not None:
        achieved.append((run.names.truth, _truth_twist(run), (0, 100, 90)))
    for topic, s, color in achieved:
        if s is None or not len(s):
            continue
        mean = _smooth(s.t, s.v, 0.25)
        for k, ax in enumerate(axes):
            ax.plot(s.t, s.v[:, k], color=_rgb(color), alpha=0.25, linewidth=0.6)
            ax.plot(s.t, mean[:, k], color=_rgb(color), linewidth=1.3, label=f"{topic} (0.25 s mean)")
    if run.odom is None:
        notes.append("no /odom (state estimator) in the bag")
    for ax, label in zip(axes, ("vx (m/s)", "vy (m/s)", "wz (rad/s)"), strict=True):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left", ncol=2)
    axes[-1].set_xlabel(_time_label(run))
    axes[-1].set_xlim(*_span(run))
    _mark_events(axes, events)
    info = _finish(
        fig, "velocity", "Velocity commanded (heading frame) vs achieved (base frame)", path, axes, events
    )
    info.notes = notes
    return info


def _truth_twist(run: RunData) -> Any:
    from humanoid_bringup.recording.report_bag import Series

    assert run.truth is not None
    return Series(run.truth.t, run.truth.v[:, [7, 8, 12]])


def plot_control(run: RunData, events: list[RunEvent], path: Path) -> FigureInfo | str:
    """Who was in control over time: the velocity source, the operating mode, who commands the joints
    (policy, model-based, driver hold, damping), the driver's mode; controller switches as triangles."""
    rows = control_intervals(run)
    if not rows:
        return "no /mode_manager/state and no driver mode (/robot_driver/mode) in the bag"
    palette = {
        "teleop": "#4c72b0",
        "autonomy": "#55a868",
        "idle": "#d0d0d0",
        "boot": "#eeeeee",
        "hold": "#a1c9f4",
        "stand": "#8de5a1",
        "walk": "#ffb482",
        "run_policy": "#d0bbff",
        "damp": "#ff9f9b",
        "policy": "#d0bbff",
        "model-based": "#ffb482",
        "driver hold": "#a1c9f4",
        "damping": "#ff9f9b",
        "ramp": "#fffea3",
        "active": "#b9f2f0",
    }
    fig, axes = _figure(1, height=0.55 * len(rows) + 0.9)
    ax = axes[0]
    names = list(rows)
    for i, name in enumerate(names):
        y = len(names) - 1 - i
        for t0, t1, label in rows[name]:
            ax.broken_barh(
                [(t0, t1 - t0)],
                (y - 0.4, 0.8),
                facecolors=palette.get(label, "#cccccc"),
                edgecolor="#666666",
                linewidth=0.5,
            )
            if t1 - t0 > 0.04 * (_span(run)[1] - _span(run)[0]):
                ax.text((t0 + t1) / 2, y, label, ha="center", va="center", fontsize=7, clip_on=True)
    if run.switches and "driver" in rows:
        y = len(names) - 1 - names.index("driver")
        ts = [t for t, _ in run.switches]
        ax.scatter(ts, [y + 0.45] * len(ts), marker="v", color="k", s=25, zorder=5, label="controller switch")
        ax.legend(fontsize=7, loc="lower left")
    ax.set_yticks(range(len(names)), list(reversed(names)))
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.set_xlabel(_time_label(run))
    ax.set_xlim(*_span(run))
    _mark_events(axes, events)
    return _finish(fig, "control", "Who was in control", path, axes, events)


def plot_contacts(run: RunData, events: list[RunEvent], path: Path) -> FigureInfo | str:
    """Normal contact force per foot (N): the simulator's (``/sim/contacts/*``, sole frames) and the
    estimator's (``/contacts/*``)."""
    if not run.contacts:
        return "no contact wrenches (/sim/contacts/*, /contacts/*) in the bag"
    fig, axes = _figure(1, height=2.8)
    ax = axes[0]
    colors = {"left": (31, 119, 180), "right": (0, 100, 90)}
    for prefix, sides in run.contacts.items():
        for side, s in sides.items():
            style = "-" if prefix == run.names.contacts[0] else ":"
            ax.plot(
                s.t,
                s.v[:, 2],
                style,
                color=_rgb(colors.get(side, (60, 60, 60))),
                linewidth=0.9,
                label=f"{prefix}/{side} fz",
            )
    ax.set_ylabel("normal force (N)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.set_xlabel(_time_label(run))
    ax.set_xlim(*_span(run))
    _mark_events(axes, events)
    return _finish(fig, "contacts", "Contact forces", path, axes, events)


def plot_balance(run: RunData, events: list[RunEvent], path: Path, balance: Any) -> FigureInfo | str:
    """CoM and capture point against the support polygon: their signed margins over time (m, positive
    inside) and a top view (world x-y) with the support polygons at the events. Without ground truth, the
    walking controller's own CoM, DCM and ZMP (``/walking/status``, odom frame) where the bag has them."""
    if balance is None:
        if run.walking_status is not None and {"com_x", "dcm_x", "zmp_x"} <= set(run.walking_labels):
            return _plot_walking_status(run, events, path)
        return (
            "no ground truth (/sim/ground_truth) with /joint_states, nor /walking/status, in the bag: CoM "
            "and capture point not computed"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(11.0, 7.5), dpi=DPI)
    ax = fig.add_subplot(2, 1, 1)
    top = fig.add_subplot(2, 1, 2)
    ax.plot(balance.t, balance.margin_com, color=_rgb((31, 119, 180)), linewidth=1.2, label="CoM margin")
    ax.plot(
        balance.t, balance.margin_cp, color=_rgb((0, 100, 90)), linewidth=1.2, label="capture point margin"
    )
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_ylabel("margin to support\npolygon edge (m)")
    ax.set_xlabel(_time_label(run))
    ax.set_xlim(*_span(run))
    lo = np.nanmin(np.concatenate([balance.margin_com, balance.margin_cp, [0.0]]))
    ax.set_ylim(max(lo, -0.5) - 0.02, 0.2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    top.plot(balance.com[:, 0], balance.com[:, 1], color=_rgb((31, 119, 180)), linewidth=1.0, label="CoM")
    top.plot(
        balance.cp[:, 0],
        balance.cp[:, 1],
        color=_rgb((0, 100, 90)),
        linewidth=0.8,
        alpha=0.8,
        label="capture point",
    )
    shown = [0, *[int(np.clip(np.searchsorted(balance.t, e.t), 0, len(balance.t) - 1)) for e in events]]
    for k in sorted(set(shown)):
        poly = balance.polygons[k]
        if len(poly) >= 3:
            closed = np.vstack([poly, poly[:1]])
            top.plot(closed[:, 0], closed[:, 1], color="#888888", linewidth=0.8)
    for ev in events:
        k = int(np.clip(np.searchsorted(balance.t, ev.t), 0, len(balance.t) - 1))
        top.plot(
            balance.com[k, 0],
            balance.com[k, 1],
            "o",
            color=_rgb(EVENT_COLORS.get(ev.kind, (0, 0, 0))),
            markersize=6,
            zorder=10,
        )
    top.set_aspect("equal", adjustable="datalim")
    top.set_xlabel("x (m, world)")
    top.set_ylabel("y (m, world)")
    top.grid(alpha=0.3)
    top.legend(fontsize=7, loc="upper left")
    _mark_events([ax], events)
    info = _finish(fig, "balance", "CoM and capture point against the support polygon", path, [ax], events)
    info.notes = [
        f"feet in contact: {balance.contact_source}; top view: support polygons at the start and at "
        "each event (grey), the CoM there (dots in the event's colour)"
    ]
    return info


def _plot_walking_status(run: RunData, events: list[RunEvent], path: Path) -> FigureInfo:
    """CoM, DCM (the capture point) and ZMP, x and y (m, odom frame), as the walking controller reports."""
    assert run.walking_status is not None
    s, col = run.walking_status, {n: k for k, n in enumerate(run.walking_labels)}
    fig, axes = _figure(2, height=2.6)
    for ax, axis in zip(axes, ("x", "y"), strict=True):
        for name, color in (("com", (31, 119, 180)), ("dcm", (0, 100, 90)), ("zmp", (60, 60, 60))):
            key = f"{name}_{axis}"  # the ZMP commanded
            if key in col:
                ax.plot(s.t, s.v[:, col[key]], color=_rgb(color), linewidth=1.1, label=key)
        ax.set_ylabel(f"{axis} (m, odom)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel(_time_label(run))
    axes[-1].set_xlim(*_span(run))
    _mark_events(axes, events)
    info = _finish(fig, "balance", "CoM, DCM and ZMP (from /walking/status)", path, axes, events)
    info.notes = [
        "no ground truth in the bag: the walking controller's own estimates, without the support polygon"
    ]
    return info


def plot_loop(run: RunData, events: list[RunEvent], path: Path) -> FigureInfo | str:
    """The driver loop's overruns per second (from the cumulative ``overruns`` of its ``/diagnostics``)."""
    rows = []
    for t, values in run.loop:
        try:
            rows.append((t, float(values["overruns"]), float(values.get("ticks", "nan"))))
        except (KeyError, ValueError):
            continue
    if len(rows) < 2:
        return "fewer than two robot_driver loop diagnostics (/diagnostics) in the bag"
    arr = np.array(rows)
    dt = np.diff(arr[:, 0])
    ok = dt > 0
    rate = np.diff(arr[:, 1])[ok] / dt[ok]
    fig, axes = _figure(1, height=2.6)
    ax = axes[0]
    ax.step(arr[1:, 0][ok], rate, where="pre", color=_rgb((31, 119, 180)), linewidth=1.2)
    ax.set_ylabel("overruns per second")
    ax.set_ylim(bottom=0.0, top=max(1.0, float(np.max(rate)) * 1.2 if len(rate) else 1.0))
    ax.grid(alpha=0.3)
    ax.set_xlabel(_time_label(run))
    ax.set_xlim(*_span(run))
    _mark_events(axes, events)
    clock = run.loop[-1][1].get("clock", "")
    info = _finish(fig, "loop", "Driver loop overruns per second", path, axes, events)
    info.notes = [
        f"total {int(arr[-1, 1])} overruns in {int(arr[-1, 2]) if np.isfinite(arr[-1, 2]) else '?'} "
        f"ticks (clock: {clock or 'unknown'}; in lockstep there are no deadlines to overrun)"
    ]
    return info


def plot_diagnostics(run: RunData, events: list[RunEvent], path: Path) -> FigureInfo | str:
    """Diagnostics warnings and errors as a timeline: one row per status name, a mark per WARN / ERROR /
    STALE message."""
    if not run.diagnostics:
        return "no /diagnostics in the bag"
    names = sorted({d.name for d in run.diagnostics})
    fig, axes = _figure(1, height=0.35 * len(names) + 1.0)
    ax = axes[0]
    for level, label in ((1, "WARN"), (2, "ERROR"), (3, "STALE")):
        pts = [(d.t, len(names) - 1 - names.index(d.name)) for d in run.diagnostics if d.level == level]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, marker="s", s=18, color=_rgb(LEVEL_COLORS[level]), label=label, zorder=5)
    ax.set_yticks(range(len(names)), list(reversed(names)), fontsize=7)
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.grid(alpha=0.3, axis="x")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower left")
    ax.set_xlabel(_time_label(run))
    ax.set_xlim(*_span(run))
    _mark_events(axes, events)
    info = _finish(fig, "diagnostics", "Diagnostics: warnings and errors", path, axes, events)
    worst = {}
    for d in run.diagnostics:
        if d.level in (1, 2):
            worst[(d.name, d.level)] = d.message
    info.notes = [
        f"{'ERROR' if lv == 2 else 'WARN'} {name}: {msg}" for (name, lv), msg in sorted(worst.items())
    ][:12]
    if not worst:
        info.notes = ["no warnings or errors"]
    return info
