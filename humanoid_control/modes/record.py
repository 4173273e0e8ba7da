"""The operation record (pure, no rclpy): who was in control, for how long, and every event with its time.

Events (``kind``): ``mode`` (a mode change), ``source`` (the velocity source changed), ``autonomy`` (set on or
off), ``takeover`` (teleop took over from autonomy), ``estop``, ``refusal`` (a refused request, with its
reason), ``fault`` (the driver damped by itself, or a controller faulted), ``switch`` (a controller switch at
the driver, with its largest joint torque step), ``fall`` (the driver reported the robot down: base tilt
beyond its ``fall_tilt_deg``), ``respawn`` (the robot put back upright in simulation through the mode
manager). Times are seconds of the node's clock.

Time shares: each interval between two :meth:`OperationRecord.account` calls goes to the source that held
the velocity command during it: ``teleop``, ``autonomy``, or ``idle`` (no fresh source: zero published;
this is also where a scripted run without an operator shows up). The same intervals go to the operating mode
in force during them (``boot``, ``hold``, ``stand``, ``walk``, ``run_policy``, ``damp``): ``modes_s`` in the
summary, e.g. the time spent walking with the walking controller.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

SHARES = ("teleop", "autonomy", "idle")
MODES = ("boot", "hold", "stand", "walk", "run_policy", "damp")
COUNTED = ("mode", "source", "autonomy", "takeover", "estop", "refusal", "fault", "switch", "fall", "respawn")


@dataclass
class Event:
    """One recorded event: time (s), kind, details."""

    t: float
    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


class OperationRecord:
    """Events and time shares of one run (from the first :meth:`account` call)."""

    def __init__(self, max_events: int = 10000) -> None:
        self.events: list[Event] = []
        self.counts = dict.fromkeys(COUNTED, 0)
        self.seconds = dict.fromkeys(SHARES, 0.0)
        self.mode_seconds = dict.fromkeys(MODES, 0.0)
        self.max_events = max_events
        self.dropped_events = 0
        self._t: float | None = None
        self._t0: float | None = None
        self._share = "idle"
        self._mode = "boot"

    def event(self, t: float, kind: str, **detail: Any) -> Event:
        """Record an event (``kind`` one of :data:`COUNTED`)."""
        if kind not in self.counts:
            raise ValueError(f"unknown event kind {kind!r}")
        self.counts[kind] += 1
        ev = Event(float(t), kind, detail)
        if len(self.events) < self.max_events:
            self.events.append(ev)
        else:
            self.dropped_events += 1
        return ev

    def account(self, t: float, share: str, mode: str | None = None) -> None:
        """The interval since the last call goes to the share and the mode held until now; ``share`` (and
        ``mode``, when given; else the mode stays) hold from ``t``."""
        if share not in self.seconds:
            raise ValueError(f"unknown share {share!r}")
        if mode is not None and mode not in self.mode_seconds:
            raise ValueError(f"unknown mode {mode!r}")
        if self._t is None:
            self._t0 = t
        elif t > self._t:
            self.seconds[self._share] += t - self._t
            self.mode_seconds[self._mode] += t - self._t
        self._t = max(t, self._t if self._t is not None else t)
        self._share = share
        if mode is not None:
            self._mode = mode

    def summary(self, events: bool = True) -> dict[str, Any]:
        """The record as a JSON-ready dictionary: ``duration_s``, ``shares_s``, ``shares`` (fractions),
        ``modes_s`` (time in each operating mode), ``counts`` (``falls`` and ``respawns`` among them),
        ``switches`` (each controller switch's torque
        step) and, if asked, ``events``."""
        total = sum(self.seconds.values())
        out: dict[str, Any] = {
            "start_t": self._t0,
            "end_t": self._t,
            "duration_s": round(total, 6),
            "shares_s": {k: round(v, 6) for k, v in self.seconds.items()},
            "shares": {k: (round(v / total, 4) if total > 0 else 0.0) for k, v in self.seconds.items()},
            "modes_s": {k: round(v, 6) for k, v in self.mode_seconds.items()},
            "counts": {
                "takeovers": self.counts["takeover"],
                "estops": self.counts["estop"],
                "refusals": self.counts["refusal"],
                "mode_changes": self.counts["mode"],
                "source_switches": self.counts["source"],
                "autonomy_changes": self.counts["autonomy"],
                "faults": self.counts["fault"],
                "controller_switches": self.counts["switch"],
                "falls": self.counts["fall"],
                "respawns": self.counts["respawn"],
            },
            "switches": [dict(e.detail, t=e.t) for e in self.events if e.kind == "switch"],
        }
        if events:
            out["events"] = [asdict(e) for e in self.events]
            out["dropped_events"] = self.dropped_events
        return out

    def to_json(self) -> str:
        """:meth:`summary` as JSON (non-finite numbers as null)."""
        return json.dumps(_finite(self.summary()), indent=1)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
