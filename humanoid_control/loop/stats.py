"""Timing statistics of a periodic loop: achieved rate, wake-up lateness, overruns, largest gap, real-time
factor, and the time of a controller called in the loop; whole-run and per-second figures from histograms.

Histograms (:class:`Histogram`) hold every sample of a run in fixed memory at a constant cost per sample (no
ring buffer that forgets the start of a long run, no sorting): 1 us bins up to 2 ms, 10 us bins up to 20 ms,
1 ms bins up to 1 s, one overflow bin. A percentile is the lower edge of the bin it falls in (exact to 1 us
below 2 ms); the maximum is kept exactly.
"""

from __future__ import annotations

import time

import numpy as np

_FINE_US = 2000  # 1 us bins below
_MID_US = 20000  # 10 us bins below
_COARSE_US = 1_000_000  # 1 ms bins below; overflow above
_N_BINS = _FINE_US + (_MID_US - _FINE_US) // 10 + (_COARSE_US - _MID_US) // 1000 + 1


def _bin(us: float) -> int:
    if us < _FINE_US:
        return int(us) if us > 0 else 0
    if us < _MID_US:
        return _FINE_US + int(us - _FINE_US) // 10
    if us < _COARSE_US:
        return _FINE_US + (_MID_US - _FINE_US) // 10 + int(us - _MID_US) // 1000
    return _N_BINS - 1


def _lower_edge(index: np.ndarray) -> np.ndarray:
    i = index.astype(np.float64)
    mid0 = _FINE_US + (_MID_US - _FINE_US) // 10
    return np.where(
        i < _FINE_US,
        i,
        np.where(i < mid0, _FINE_US + (i - _FINE_US) * 10, _MID_US + (i - mid0) * 1000),
    )


class Histogram:
    """Samples in microseconds (>= 0; negative values count as 0)."""

    def __init__(self) -> None:
        self.counts = np.zeros(_N_BINS, dtype=np.int64)
        self.n = 0
        self.max = 0.0
        self.total = 0.0

    def add(self, us: float) -> None:
        """One sample (us)."""
        self.counts[_bin(us)] += 1
        self.n += 1
        self.total += us
        if us > self.max:
            self.max = us

    def merge(self, other: Histogram) -> None:
        """Add another histogram's samples."""
        self.counts += other.counts
        self.n += other.n
        self.total += other.total
        self.max = max(self.max, other.max)

    def clear(self) -> None:
        """Forget every sample."""
        self.counts[:] = 0
        self.n = 0
        self.max = 0.0
        self.total = 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0..100, us): lower edge of its bin; 0 without samples."""
        return self.percentiles((q,))[0]

    def percentiles(self, qs: tuple[float, ...]) -> list[float]:
        """Several percentiles (0..100, us) from one pass over the bins (the loop's diagnostics run in its
        slack: ten single percentiles cost about 0.4 ms there)."""
        if self.n == 0:
            return [0.0] * len(qs)
        ranks = np.array([q / 100.0 * self.n for q in qs])
        idx = np.minimum(np.searchsorted(np.cumsum(self.counts), ranks, side="right"), _N_BINS - 1)
        edges = _lower_edge(idx)
        return [self.max if q >= 100.0 else float(min(e, self.max)) for q, e in zip(qs, edges, strict=True)]

    def count_above(self, us: float) -> int:
        """Samples in bins at or above the one of ``us``."""
        return int(self.counts[_bin(us) :].sum())


class LoopStats:
    """Collects per-tick timing of a loop running at ``rate_hz``.

    Lateness is how late each wake-up is relative to its absolute deadline (us); a gap is the wall time
    between two consecutive tick starts (us; one period when on time); an overrun is a tick whose work ended
    after the next deadline. The controller figures are the wall time of a controller step called in the
    loop (us) and its overruns: steps longer than half a period (its budget). Whole-run figures, and the
    same for the last completed second (:meth:`roll`, called once per second by the driver).
    """

    def __init__(self, rate_hz: float, window: int = 0) -> None:
        del window  # (the ring buffer this replaced; kept for callers passing it)
        self.rate_hz = rate_hz
        self.period_us = 1e6 / rate_hz
        self.lateness = Histogram()
        self.gap = Histogram()
        self.controller = Histogram()
        self._sec_lateness = Histogram()
        self._sec_gap = Histogram()
        self._sec_controller = Histogram()
        self._last_second: dict[str, float | int] = {}
        self._sec_overruns = 0
        self._sec_controller_overruns = 0
        self._n = 0
        self.overruns = 0
        self.controller_overruns = 0
        self._t_first: float | None = None
        self._t_last = 0.0
        self._sim_first: float | None = None
        self._sim_last = 0.0

    def record_wake(self, lateness_s: float, now: float | None = None) -> None:
        """Record one tick's wake-up lateness (s) at wall time ``now`` (perf_counter seconds)."""
        now = time.perf_counter() if now is None else now
        if self._t_first is None:
            self._t_first = now
        else:
            gap = (now - self._t_last) * 1e6
            self.gap.add(gap)
            self._sec_gap.add(gap)
        self._t_last = now
        us = lateness_s * 1e6
        self.lateness.add(us)
        self._sec_lateness.add(us)
        self._n += 1

    def record_overrun(self) -> None:
        """The tick's work ended after the next deadline."""
        self.overruns += 1
        self._sec_overruns += 1

    def record_controller(self, duration_s: float) -> None:
        """Wall time of one controller step called in the loop (s)."""
        us = duration_s * 1e6
        self.controller.add(us)
        self._sec_controller.add(us)
        if us > 0.5 * self.period_us:
            self.controller_overruns += 1
            self._sec_controller_overruns += 1

    def record_sim_time(self, sim_time: float) -> None:
        """Record the backend clock after the tick (s), for the real-time factor."""
        if self._sim_first is None:
            self._sim_first = sim_time
        self._sim_last = sim_time

    @property
    def ticks(self) -> int:
        """Ticks recorded."""
        return self._n

    def roll(self) -> None:
        """Close the current second: its figures become the ``*_last_s`` keys; a new second starts."""
        n = self._sec_lateness.n
        self._last_second = {
            "ticks_last_s": n,
            "overruns_last_s": self._sec_overruns,
            "overruns_pct_last_s": round(100.0 * self._sec_overruns / n, 4) if n else 0.0,
            "lateness_us_p99_last_s": self._sec_lateness.percentile(99),
            "lateness_us_max_last_s": round(self._sec_lateness.max, 1),
            "max_gap_us_last_s": round(self._sec_gap.max, 1),
            "controller_us_p99_last_s": self._sec_controller.percentile(99),
            "controller_us_max_last_s": round(self._sec_controller.max, 1),
            "controller_overruns_last_s": self._sec_controller_overruns,
        }
        self._sec_lateness.clear()
        self._sec_gap.clear()
        self._sec_controller.clear()
        self._sec_overruns = 0
        self._sec_controller_overruns = 0

    def summary(self) -> dict[str, float | int]:
        """Timing summary (whole run, and the last completed second).

        ``rate_hz`` (achieved), ``jitter_us_median/p99/max`` (the lateness, under its earlier name),
        ``lateness_us_p50/p90/p99/p999/max``, ``overruns``, ``overruns_pct``, ``max_gap_us``, ``ticks``,
        ``realtime_factor``, ``controller_steps``, ``controller_us_median/p99/max``, ``controller_overruns``,
        and the ``*_last_s`` keys of :meth:`roll`.
        """
        lat = self.lateness
        l50, l90, l99, l999 = lat.percentiles((50.0, 90.0, 99.0, 99.9))
        c50, c99 = self.controller.percentiles((50.0, 99.0))
        wall = self._t_last - (self._t_first or self._t_last)
        rate = (self._n - 1) / wall if wall > 0 else 0.0
        sim = self._sim_last - (self._sim_first if self._sim_first is not None else self._sim_last)
        out: dict[str, float | int] = {
            "rate_hz": rate,
            "jitter_us_median": l50,
            "jitter_us_p99": l99,
            "jitter_us_max": round(lat.max, 1),
            "lateness_us_p50": l50,
            "lateness_us_p90": l90,
            "lateness_us_p99": l99,
            "lateness_us_p999": l999,
            "lateness_us_max": round(lat.max, 1),
            "overruns": self.overruns,
            "overruns_pct": round(100.0 * self.overruns / self._n, 4) if self._n else 0.0,
            "max_gap_us": round(self.gap.max, 1),
            "ticks": self._n,
            "realtime_factor": sim / wall if wall > 0 else 0.0,
            "controller_steps": self.controller.n,
            "controller_us_median": c50,
            "controller_us_p99": c99,
            "controller_us_max": round(self.controller.max, 1),
            "controller_overruns": self.controller_overruns,
        }
        out.update(self._last_second)
        return out
