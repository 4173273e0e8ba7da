"""The pacing of ``humanoid-replay`` (pure, no rclpy): bag time to wall time, rate, start offset, pause.

Bag time is the recorded log time (ns; simulated time for a bag recorded in simulation). The replay of a
message logged at ``t`` is due at wall time ``origin + (t - t_start) / rate``, where ``t_start`` is the bag's
first log time plus the ``--start`` offset. A pause stops the mapping: the time spent paused is added to
``origin`` at the resume, so nothing is skipped or bunched.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ReplayClock", "ReplayOptions", "clock_due"]


@dataclass(frozen=True)
class ReplayOptions:
    """``rate``: bag seconds per wall second (> 0); ``start_s``: seconds of bag time skipped from its first
    message (>= 0); ``clock_hz``: rate (per bag second) of the ``/clock`` messages made from the log times
    when the bag has no ``/clock`` of its own; ``paused``: wait for ``~/set_pause false`` before the first."""

    rate: float = 1.0
    start_s: float = 0.0
    clock_hz: float = 100.0
    paused: bool = False

    def check(self) -> None:
        """``ValueError`` naming a bad option."""
        if not (math.isfinite(self.rate) and self.rate > 0.0):
            raise ValueError(f"--rate must be > 0, got {self.rate}")
        if not (math.isfinite(self.start_s) and self.start_s >= 0.0):
            raise ValueError(f"--start must be >= 0 s, got {self.start_s}")
        if not (math.isfinite(self.clock_hz) and self.clock_hz > 0.0):
            raise ValueError(f"--clock-hz must be > 0, got {self.clock_hz}")


class ReplayClock:
    """Maps bag time (ns) to wall time (s of ``clock``, monotonic) at ``rate``, with pause and resume; thread
    safe (the service that pauses runs on another thread than the one that publishes)."""

    def __init__(
        self, t_start_ns: int, rate: float, paused: bool = False, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.t_start_ns = t_start_ns
        self.rate = rate
        self._clock = clock
        self._cond = threading.Condition()
        self._origin = clock()
        self._paused_at: float | None = self._origin if paused else None
        self.stopped = False

    @property
    def paused(self) -> bool:
        """Whether the replay is paused."""
        with self._cond:
            return self._paused_at is not None

    def set_paused(self, paused: bool) -> bool:
        """Pause or resume; whether that changed anything."""
        with self._cond:
            if paused == (self._paused_at is not None):
                return False
            now = self._clock()
            if paused:
                self._paused_at = now
            else:
                assert self._paused_at is not None
                self._origin += now - self._paused_at
                self._paused_at = None
            self._cond.notify_all()
            return True

    def stop(self) -> None:
        """Wake and end every :meth:`wait_until`."""
        with self._cond:
            self.stopped = True
            self._cond.notify_all()

    def due(self, t_ns: int) -> float:
        """Wall time (s of the clock) at which a message logged at ``t_ns`` is due (while not paused)."""
        with self._cond:
            return self._origin + (t_ns - self.t_start_ns) * 1e-9 / self.rate

    def bag_time_ns(self) -> int:
        """The bag time that corresponds to now (the pause instant while paused)."""
        with self._cond:
            now = self._paused_at if self._paused_at is not None else self._clock()
            return self.t_start_ns + round((now - self._origin) * self.rate * 1e9)

    def wait_until(self, t_ns: int, sleep: Callable[[float], None] | None = None) -> bool:
        """Block until the message logged at ``t_ns`` is due and the replay is not paused; False once stopped.
        ``sleep`` (tests) replaces the condition wait."""
        with self._cond:
            while not self.stopped:
                if self._paused_at is None:
                    left = self._origin + (t_ns - self.t_start_ns) * 1e-9 / self.rate - self._clock()
                    if left <= 0.0:
                        return True
                else:
                    left = 0.1
                if sleep is None:
                    self._cond.wait(min(left, 0.1))
                else:
                    self._cond.release()
                    try:
                        sleep(min(left, 0.1))
                    finally:
                        self._cond.acquire()
            return False


def clock_due(t_ns: int, last_clock_ns: int | None, clock_hz: float) -> bool:
    """Whether a ``/clock`` made from the log times is due before the message logged at ``t_ns``: the first
    one, then one per ``1 / clock_hz`` of bag time (and never backwards)."""
    if last_clock_ns is None:
        return True
    return t_ns >= last_clock_ns + round(1e9 / clock_hz)
