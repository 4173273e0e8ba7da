"""Host-side watchdogs of a hardware backend: pure logic, time passed in by the caller (monotonic seconds).

- :class:`CommandWatchdog`: trips when nothing fed it for longer than its timeout. MIT-mode actuator firmware
  zeroes its command after about 25 ms without a frame; the host runs the same timeout on the controller's
  commands so that it sends damping itself before the firmware would drop to zero torque.
- :class:`LinkMonitor`: per-device reply supervision counted in control periods (a device that missed
  ``max_missed`` consecutive periods is silent), plus bus errors and the command watchdog. Any fault
  latches damping until :meth:`LinkMonitor.reset`; the backend then writes damping frames (kp = 0,
  tau_ff = 0, kd of the active profile) on the wire.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass


class CommandWatchdog:
    """Expires ``timeout`` seconds after the last :meth:`feed` (and before the first one)."""

    def __init__(self, timeout: float) -> None:
        if not timeout > 0.0:
            raise ValueError(f"watchdog timeout must be > 0 s: {timeout}")
        self.timeout = float(timeout)
        self._last: float | None = None

    def feed(self, now: float) -> None:
        """Record a fresh command at time ``now`` (s)."""
        self._last = float(now)

    def age(self, now: float) -> float:
        """Seconds since the last feed (inf before the first)."""
        return math.inf if self._last is None else float(now) - self._last

    def expired(self, now: float) -> bool:
        """True when the last feed is older than the timeout, or there was none."""
        return self.age(now) > self.timeout

    def clear(self) -> None:
        """Forget the last feed (expired until fed again)."""
        self._last = None


@dataclass(frozen=True)
class LinkMonitorConfig:
    """Supervision thresholds.

    Attributes:
        command_timeout: seconds without a controller command before damping (s); 0.025 matches the MIT
            firmware's own command timeout.
        max_missed: consecutive control periods without a reply after which a device counts as silent; 3 gives
            damping within 3 periods.
    """

    command_timeout: float = 0.025
    max_missed: int = 3

    def __post_init__(self) -> None:
        if not self.command_timeout > 0.0 or self.max_missed < 1:
            raise ValueError(f"bad link monitor settings: {self}")


@dataclass(frozen=True)
class SafetyDecision:
    """Outcome of one :meth:`LinkMonitor.check`: whether to send damping, why (latched faults, oldest
    first), and whether this check is the one that tripped it."""

    damping: bool
    reasons: tuple[str, ...] = ()
    tripped_now: bool = False


class LinkMonitor:
    """Supervises a set of devices (CAN actuators, a robot's state stream) once per control period.

    Call order per period: :meth:`command` when the controller delivered a command, :meth:`reply` for every
    device heard from, :meth:`bus_error` on a transport error, then :meth:`check` once.
    """

    def __init__(self, devices: Iterable[Hashable], config: LinkMonitorConfig | None = None) -> None:
        self.config = config or LinkMonitorConfig()
        self.devices = list(devices)
        if len(set(self.devices)) != len(self.devices):
            raise ValueError("device keys must be unique")
        self.watchdog = CommandWatchdog(self.config.command_timeout)
        self._missed = dict.fromkeys(self.devices, 0)
        self._heard: set[Hashable] = set()
        self._faults: list[str] = []
        self._command_fault = False
        self._started = False

    @property
    def faults(self) -> tuple[str, ...]:
        """Latched fault messages (empty: link healthy)."""
        return tuple(self._faults)

    def start(self, now: float) -> None:
        """Begin supervision: the command watchdog counts from ``now`` and reply counters from zero."""
        self.watchdog.feed(now)
        self._missed = dict.fromkeys(self.devices, 0)
        self._heard.clear()
        self._started = True

    def command(self, now: float) -> None:
        """The controller delivered a fresh command at ``now`` (s)."""
        self.watchdog.feed(now)

    def reply(self, device: Hashable) -> None:
        """``device`` answered during the current period (unknown keys are ignored)."""
        if device in self._missed:
            self._heard.add(device)

    def bus_error(self, message: str) -> None:
        """A transport error (bus-off, send failure): damping at the next check."""
        self._latch(f"bus error: {message}")

    def missed(self, device: Hashable) -> int:
        """Consecutive periods ``device`` has not answered."""
        return self._missed[device]

    def check(self, now: float) -> SafetyDecision:
        """Close the current period: count missed replies, test the command watchdog, return the decision."""
        if not self._started:
            self.start(now)
        before = len(self._faults)
        for device in self.devices:
            if device in self._heard:
                self._missed[device] = 0
            else:
                self._missed[device] += 1
                if self._missed[device] == self.config.max_missed:
                    self._latch(f"{device} silent for {self.config.max_missed} periods")
        self._heard.clear()
        if self.watchdog.expired(now) and not self._command_fault:
            self._command_fault = True
            age_ms, limit_ms = self.watchdog.age(now) * 1e3, self.config.command_timeout * 1e3
            self._latch(f"no controller command for {age_ms:.1f} ms (timeout {limit_ms:g} ms)")
        damping = bool(self._faults)
        return SafetyDecision(damping, tuple(self._faults), tripped_now=damping and before == 0)

    def reset(self, now: float) -> None:
        """Clear latched faults and restart supervision at ``now`` (the operator's explicit re-arm)."""
        self._faults.clear()
        self._command_fault = False
        self.start(now)

    def _latch(self, message: str) -> None:
        if message not in self._faults:
            self._faults.append(message)


__all__ = ["CommandWatchdog", "LinkMonitor", "LinkMonitorConfig", "SafetyDecision"]
