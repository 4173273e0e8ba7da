"""The console's status model (pure: no rclpy, no viser): what the status panel shows, built from the
graph's latched state topics and ``/diagnostics``, and rendered as Markdown.

Inputs (the node adapter passes plain values):

- ``/robot_driver/mode`` (std_msgs/String, latched): the driver mode (``hold``, ``active``, ``damping``, ...);
- ``/mode_manager/state`` (std_msgs/String, latched, JSON): ``mode``, ``reason``, ``source``, ``autonomy``,
  ``driver_mode``, ``policy_state``, ``wbc_state``, ``walk_state``, ``robot_down``, ``counts`` (``estops``
  among them);
- ``/diagnostics`` (diagnostic_msgs/DiagnosticArray): each status's name, level (0 OK, 1 WARN, 2 ERROR,
  3 STALE) and message; the driver loop's ``overruns`` counter gives overruns per second of wall time;
- the operator's answers (each mode manager service's success and message).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConsoleStatus", "DiagnosticEntry"]

LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}
#: the driver loop's diagnostic status (humanoid_control/driver/driver_diagnostics.py)
DRIVER_LOOP = "robot_driver: loop"


@dataclass
class DiagnosticEntry:
    """The newest status of one diagnostic name."""

    level: int
    message: str
    values: dict[str, str] = field(default_factory=dict)
    wall_t: float = 0.0


def level_of(raw: Any) -> int:
    """A DiagnosticStatus level as an int (rclpy gives ``bytes`` for the ``byte`` field)."""
    if isinstance(raw, bytes | bytearray):
        return raw[0] if raw else 0
    return int(raw)


class ConsoleStatus:
    """Thread-safe status model; :meth:`markdown` renders the panel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.driver_mode = ""
        self.manager: dict[str, Any] = {}
        self.manager_error = ""
        self.diagnostics: dict[str, DiagnosticEntry] = {}
        self.overruns_per_s: float | None = None
        self._overruns: tuple[float, float] | None = None  # (wall t, count)
        self.answers: list[str] = []
        self.robot = ""
        self.notes: list[str] = []

    def on_driver_mode(self, mode: str) -> None:
        with self._lock:
            self.driver_mode = mode

    def on_manager_state(self, text: str) -> None:
        """A ``/mode_manager/state`` JSON document (a malformed one is shown as such, not raised)."""
        with self._lock:
            try:
                state = json.loads(text)
                if not isinstance(state, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                self.manager_error = f"unreadable /mode_manager/state: {exc}"
                return
            self.manager, self.manager_error = state, ""

    def on_diagnostics(
        self, statuses: Iterable[tuple[str, Any, str, Mapping[str, str]]], wall_t: float
    ) -> None:
        """Entries ``(name, level, message, values)`` of one DiagnosticArray received at ``wall_t`` (s)."""
        with self._lock:
            for name, level, message, values in statuses:
                self.diagnostics[name] = DiagnosticEntry(level_of(level), message, dict(values), wall_t)
                if name == DRIVER_LOOP and "overruns" in values:
                    try:
                        count = float(values["overruns"])
                    except ValueError:
                        continue
                    if self._overruns is not None and wall_t > self._overruns[0]:
                        rate = (count - self._overruns[1]) / (wall_t - self._overruns[0])
                        self.overruns_per_s = max(0.0, rate)
                    self._overruns = (wall_t, count)

    def add_answer(self, text: str) -> None:
        """An operator action's answer (newest first, the last 5 kept)."""
        with self._lock:
            self.answers = [text, *self.answers][:5]

    @property
    def mode(self) -> str:
        with self._lock:
            return str(self.manager.get("mode", ""))

    def markdown(self, manager_up: bool, driving: str) -> str:
        """The status panel (Markdown). ``manager_up``: the mode manager's services are reachable;
        ``driving``: a line about the drive control."""
        with self._lock:
            m = self.manager
            counts = m.get("counts", {}) if isinstance(m.get("counts"), dict) else {}
            lines = [
                f"**robot** {self.robot or 'waiting for /robot_description'}",
                f"**driver mode** {self.driver_mode or '?'}",
            ]
            if manager_up:
                lines.append(
                    f"**mode manager** {m.get('mode', '?')} (source {m.get('source', '?')}, autonomy "
                    f"{'on' if m.get('autonomy') else 'off'})"
                )
                if m.get("reason"):
                    lines.append(f"**reason** {m.get('reason')}")
                lines.append(
                    f"**controllers** policy {m.get('policy_state', '?')}, wbc {m.get('wbc_state', '?')}, "
                    f"walk {m.get('walk_state', '?')}"
                )
                lines.append(
                    f"**e-stop latched** {'yes' if self.driver_mode == 'damping' else 'no'} "
                    f"({counts.get('estops', 0)} e-stops)"
                )
            else:
                lines.append(
                    "**mode manager** not running: operating controls disabled (launch mode_manager:=true)"
                )
            if self.manager_error:
                lines.append(self.manager_error)
            rate = self.overruns_per_s
            lines.append(
                f"**loop overruns/s** {'?' if rate is None or not math.isfinite(rate) else f'{rate:.1f}'}"
            )
            for name in sorted(self.diagnostics):
                d = self.diagnostics[name]
                lines.append(f"- {LEVELS.get(d.level, str(d.level))} {name}: {d.message}")
            lines.append(f"**drive** {driving}")
            lines += [f"> {a}" for a in self.answers[:3]]
            lines += self.notes
        return "  \n".join(lines)
