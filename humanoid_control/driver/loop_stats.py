"""Timing statistics of a periodic loop: achieved rate, wake-up jitter, overruns, real-time factor."""

from __future__ import annotations

import time

import numpy as np


class LoopStats:
    """Collects per-tick timing of a loop running at ``rate_hz``.

    Jitter is the lateness of each wake-up relative to its absolute deadline (us). A ring buffer keeps the
    last ``window`` samples for the percentiles; counts are cumulative since start.
    """

    def __init__(self, rate_hz: float, window: int = 60_000) -> None:
        self.rate_hz = rate_hz
        self._jitter = np.zeros(window)
        self._n = 0
        self.overruns = 0
        self._t_first: float | None = None
        self._t_last = 0.0
        self._sim_first: float | None = None
        self._sim_last = 0.0

    def record_wake(self, lateness_s: float, now: float | None = None) -> None:
        """Record one tick's wake-up lateness (s) at wall time ``now`` (perf_counter seconds)."""
        now = time.perf_counter() if now is None else now
        if self._t_first is None:
            self._t_first = now
        self._t_last = now
        self._jitter[self._n % self._jitter.size] = lateness_s * 1e6
        self._n += 1

    def record_sim_time(self, sim_time: float) -> None:
        """Record the backend clock after the tick (s), for the real-time factor."""
        if self._sim_first is None:
            self._sim_first = sim_time
        self._sim_last = sim_time

    @property
    def ticks(self) -> int:
        """Ticks recorded."""
        return self._n

    def summary(self) -> dict[str, float | int]:
        """Timing summary.

        ``rate_hz`` (achieved), ``jitter_us_median/p99/max``, ``overruns``, ``ticks``, ``realtime_factor``.
        """
        n = min(self._n, self._jitter.size)
        jitter = self._jitter[:n] if n else np.zeros(1)
        wall = self._t_last - (self._t_first or self._t_last)
        rate = (self._n - 1) / wall if wall > 0 else 0.0
        sim = self._sim_last - (self._sim_first if self._sim_first is not None else self._sim_last)
        return {
            "rate_hz": rate,
            "jitter_us_median": float(np.median(jitter)),
            "jitter_us_p99": float(np.percentile(jitter, 99)),
            "jitter_us_max": float(np.max(jitter)),
            "overruns": self.overruns,
            "ticks": self._n,
            "realtime_factor": sim / wall if wall > 0 else 0.0,
        }
