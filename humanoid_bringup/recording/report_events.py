"""``humanoid-report``'s events and operation record, from a bag's state topics (pure, no rclpy).

Events (:class:`RunEvent`; times in s of the run's clock, :mod:`.report_bag`):

- with the mode manager (``/mode_manager/state``, latched JSON on every change): ``mode`` (a change of the
  operating mode, with its reason), ``estop``, ``fault``, ``fall``, ``respawn`` and ``takeover`` (teleop took
  over from autonomy), from the changes of its ``mode`` and of its counts between two states, at the time the
  state gives (its ``last_event``'s where that is the event in question);
- without it, from the driver: ``damping`` (its ``~/mode`` entering damping: an e-stop or a fault),
  ``fall`` (its ``~/down`` reporting the robot down), ``respawn`` (its diagnostics' ``respawns`` counter);
- always: ``push`` (``/sim/push``: a push's start, its force in N, world frame, and duration).

The operation record (:func:`operation_record`): ``/mode_manager/report``'s ``shares``, ``shares_s``,
``modes_s`` and ``counts`` (docs/modes.md), taken from a recorded ``/mode_manager/report`` if the bag has
one; else from the last ``/mode_manager/state``'s ``record`` (the record so far, accounted up to its
``end_t``), its time shares carried on to the end of the run (the bag's last ``/clock``) with the source
and mode of that state, as the mode manager's own report at shutdown does; else rebuilt from the sequence
of states (``exact`` false: faults and events between two states can be missed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from humanoid_bringup.recording.report_bag import RunData

__all__ = ["EVENT_KINDS", "RunEvent", "control_intervals", "find_events", "operation_record"]

#: event kinds in the order of their importance (which frames are rendered first)
EVENT_KINDS = ("estop", "fall", "fault", "damping", "push", "respawn", "takeover", "mode")
#: the mode manager's velocity sources -> the operation record's share names
SHARE_OF = {"teleop": "teleop", "autonomy": "autonomy", "none": "idle"}
SHARES = ("teleop", "autonomy", "idle")
MODES = ("boot", "hold", "stand", "walk", "run_policy", "damp")
#: the mode manager's state counts -> the event kind each increment is
COUNTED = {"estops": "estop", "falls": "fall", "respawns": "respawn", "takeovers": "takeover"}


@dataclass
class RunEvent:
    """One event of the run: time (s), kind (:data:`EVENT_KINDS`), a short label, the topic it came from."""

    t: float
    kind: str
    label: str
    source: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["t"] = round(self.t, 6)
        return out


def _counts(state: dict[str, Any]) -> dict[str, int]:
    """A state's counts, with the record's (``faults`` among them) where the state carries it."""
    out = {k: int(v) for k, v in (state.get("counts") or {}).items() if isinstance(v, int | float)}
    record = state.get("record") or {}
    out.update({f"record_{k}": int(v) for k, v in (record.get("counts") or {}).items()})
    return out


def _mode_manager_events(run: RunData) -> list[RunEvent]:
    topic = f"{run.names.mode_manager}/state"
    out: list[RunEvent] = []
    prev: dict[str, Any] | None = None
    seen_last: Any = None
    for t, st in run.mm_states:
        last = st.get("last_event") or {}
        if prev is not None:
            if st.get("mode") != prev.get("mode"):
                label = f"mode {prev.get('mode')} -> {st.get('mode')}"
                out.append(RunEvent(t, "mode", label, topic, {"reason": st.get("reason", "")}))
            now, before = _counts(st), _counts(prev)
            deltas = {kind: now.get(key, 0) - before.get(key, 0) for key, kind in COUNTED.items()}
            if "record_faults" in now:
                deltas["fault"] = now["record_faults"] - before.get("record_faults", 0)
            elif last.get("kind") == "fault" and last != seen_last:
                deltas["fault"] = 1
            for kind, n in deltas.items():
                # the state's last event is this one: its own time and details (else the state's time)
                own = last.get("kind") == kind and isinstance(last.get("t"), int | float)
                at = float(last["t"]) - run.origin_ns * 1e-9 if own else t
                detail = {k: v for k, v in last.items() if k not in ("t", "kind")} if own else {}
                for _ in range(max(0, n)):
                    out.append(RunEvent(at, kind, kind.replace("estop", "e-stop"), topic, dict(detail)))
        prev, seen_last = st, last
    return out


def _driver_events(run: RunData) -> list[RunEvent]:
    d = run.names.driver
    out: list[RunEvent] = []
    before = None
    for t, mode in run.driver_modes:
        if mode == "damping" and before != "damping":
            out.append(RunEvent(t, "damping", "driver damping", f"{d}/mode"))
        before = mode
    down = False
    for t, rep in run.downs:
        now = bool(rep.get("down"))
        if now and not down:
            out.append(RunEvent(t, "fall", "fall", f"{d}/down", {"tilt_deg": rep.get("tilt_deg")}))
        down = now
    respawns = 0
    for t, values in run.loop:
        try:
            n = int(float(values.get("respawns", respawns)))
        except ValueError:
            continue
        out += [RunEvent(t, "respawn", "respawn", run.names.diagnostics) for _ in range(n - respawns)]
        respawns = max(respawns, n)
    return out


def _push_events(run: RunData) -> list[RunEvent]:
    out: list[RunEvent] = []
    for i, (t, force) in enumerate(run.pushes):
        magnitude = float((force**2).sum() ** 0.5)
        if magnitude <= 0.0:
            continue
        end = next((t2 for t2, f2 in run.pushes[i + 1 :] if not f2.any()), None)
        duration = None if end is None else round(end - t, 6)
        label = f"push {magnitude:.0f} N" + (f" x {duration:g} s" if duration else "")
        detail = {"force_n": [round(float(v), 3) for v in force], "duration_s": duration}
        out.append(RunEvent(t, "push", label, run.names.push, detail))
    return out


def find_events(run: RunData) -> list[RunEvent]:
    """The run's events in time order (module docstring)."""
    events = _mode_manager_events(run) if run.mm_states else _driver_events(run)
    events += _push_events(run)
    events.sort(key=lambda e: (e.t, EVENT_KINDS.index(e.kind) if e.kind in EVENT_KINDS else 99))
    return events


def _shares(seconds: dict[str, float]) -> dict[str, float]:
    total = sum(seconds.values())
    return {k: (round(v / total, 4) if total > 0 else 0.0) for k, v in seconds.items()}


def operation_record(run: RunData) -> dict[str, Any] | None:
    """The operation record's ``shares``, ``shares_s``, ``modes_s``, ``counts``, ``duration_s`` (module
    docstring), with ``source`` (where it came from) and ``exact``; None without the mode manager."""
    if run.mm_reports:
        rep = run.mm_reports[-1]
        out = {k: rep.get(k) for k in ("duration_s", "shares_s", "shares", "modes_s", "counts")}
        return {**out, "source": f"{run.names.mode_manager}/report", "exact": True}
    if not run.mm_states:
        return None
    end = run.last_clock_s if run.last_clock_s is not None else run.end_s
    last = run.mm_states[-1][1]
    record = last.get("record")
    if isinstance(record, dict) and record.get("end_t") is not None:
        shares_s = {k: float(record["shares_s"].get(k, 0.0)) for k in SHARES}
        modes_s = {k: float(record.get("modes_s", {}).get(k, 0.0)) for k in MODES}
        rest = max(0.0, end - (float(record["end_t"]) - run.origin_ns * 1e-9))
        shares_s[SHARE_OF.get(str(last.get("source")), "idle")] += rest
        mode = str(last.get("mode"))
        if mode in modes_s:
            modes_s[mode] += rest
        counts = dict(record.get("counts", {}))
        exact = True
        source = f"{run.names.mode_manager}/state (its record, carried on to {end:.3f} s)"
    else:  # an older mode manager: rebuilt from the sequence of states
        shares_s, modes_s = dict.fromkeys(SHARES, 0.0), dict.fromkeys(MODES, 0.0)
        for (t0, s0), (t1, _s1) in zip(run.mm_states, [*run.mm_states[1:], (end, {})], strict=True):
            shares_s[SHARE_OF.get(str(s0.get("source")), "idle")] += max(0.0, t1 - t0)
            if s0.get("mode") in modes_s:
                modes_s[str(s0["mode"])] += max(0.0, t1 - t0)
        c = last.get("counts", {})
        pairs = list(zip(run.mm_states, run.mm_states[1:], strict=False))
        counts = {
            "takeovers": c.get("takeovers", 0),
            "estops": c.get("estops", 0),
            "refusals": c.get("refusals", 0),
            "mode_changes": c.get("mode_changes", 0),
            "source_switches": sum(a[1].get("source") != b[1].get("source") for a, b in pairs),
            "autonomy_changes": sum(a[1].get("autonomy") != b[1].get("autonomy") for a, b in pairs),
            "faults": sum(e.kind == "fault" for e in _mode_manager_events(run)),
            "controller_switches": c.get("switches", 0),
            "falls": c.get("falls", 0),
            "respawns": c.get("respawns", 0),
        }
        exact = False
        source = f"{run.names.mode_manager}/state (rebuilt from {len(run.mm_states)} states)"
    return {
        "duration_s": round(sum(shares_s.values()), 6),
        "shares_s": {k: round(v, 6) for k, v in shares_s.items()},
        "shares": _shares(shares_s),
        "modes_s": {k: round(v, 6) for k, v in modes_s.items()},
        "counts": counts,
        "source": source,
        "exact": exact,
    }


#: the operating mode -> who commands the joints
IN_CHARGE = {
    "boot": "boot",
    "hold": "driver hold",
    "stand": "driver hold",
    "walk": "model-based",
    "run_policy": "policy",
    "damp": "damping",
}


def control_intervals(run: RunData) -> dict[str, list[tuple[float, float, str]]]:
    """Who was in control over time, as ``(start, end, label)`` intervals (s) per row: ``velocity``
    (teleop, autonomy, idle), ``mode`` (the mode manager's operating mode), ``in charge`` (policy,
    model-based: the WBC standing or the walking controller, driver hold, damping) and ``driver`` (its
    ``~/mode``: ramp, hold, active, damping). Rows without data are left out."""
    end = max(run.end_s, run.last_clock_s or run.end_s)
    rows: dict[str, list[tuple[float, float, str]]] = {}

    def intervals(samples: list[tuple[float, str]]) -> list[tuple[float, float, str]]:
        out: list[tuple[float, float, str]] = []
        for (t0, label), (t1, _) in zip(samples, [*samples[1:], (end, "")], strict=True):
            if out and out[-1][2] == label:
                out[-1] = (out[-1][0], t1, label)
            elif t1 > t0:
                out.append((t0, t1, label))
        return out

    if run.mm_states:
        states = run.mm_states
        rows["velocity"] = intervals([(t, SHARE_OF.get(str(s.get("source")), "idle")) for t, s in states])
        rows["mode"] = intervals([(t, str(s.get("mode"))) for t, s in states])

        def in_charge(s: dict[str, Any]) -> str:
            mode = str(s.get("mode"))
            if mode == "stand" and s.get("wbc_state") == "run":
                return "model-based"
            return IN_CHARGE.get(mode, mode)

        rows["in charge"] = intervals([(t, in_charge(s)) for t, s in states])
    if run.driver_modes:
        rows["driver"] = intervals(list(run.driver_modes))
    return rows
