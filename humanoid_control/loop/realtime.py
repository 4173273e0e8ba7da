"""Real-time settings of the driver's loop thread, without rclpy: SCHED_FIFO priority, CPU affinity, locked
memory, garbage collection kept out of the loop.

The names follow ros2_control's controller manager where it has them (``thread_priority``, ``cpu_affinity``,
``lock_memory``); ``process_priority`` (the SCHED_FIFO priority of the process's other threads: the executor
and the DDS threads) and ``gc_in_slack`` are this project's. Every setting is applied on a best-effort basis:
where the system refuses (no ``CAP_SYS_NICE`` / ``RLIMIT_RTPRIO``, a CPU that does not exist, an
``RLIMIT_MEMLOCK`` too small) the result says so, the caller logs a warning and the loop runs as a normal
thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: ``thread_priority`` when ``auto`` and a controller runs in the loop (ros2_control's default is 50)
AUTO_THREAD_PRIORITY = 50
#: ``process_priority`` when ``auto`` and a controller runs in the loop: below the loop thread
AUTO_PROCESS_PRIORITY = 40


class RealtimeSettingError(ValueError):
    """A real-time parameter has a value outside its range or of the wrong kind."""


def parse_priority(name: str, value: object, in_loop: bool, auto_value: int) -> int:
    """A SCHED_FIFO priority from a parameter value: ``auto``, or an integer 0..99 (0: a normal thread).

    ``auto`` gives ``auto_value`` with a controller in the loop (``in_loop``), else 0.
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return auto_value if in_loop else 0
        try:
            value = int(text)
        except ValueError:
            raise RealtimeSettingError(
                f"parameter {name}: '{value}' is neither auto nor an integer 0..99"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RealtimeSettingError(f"parameter {name}: {value!r} is neither auto nor an integer 0..99")
    if not 0 <= value <= 99:
        raise RealtimeSettingError(f"parameter {name}: {value} is outside 0..99 (0: a normal thread)")
    return value


def parse_cpus(value: Sequence[int]) -> tuple[int, ...]:
    """``cpu_affinity``: CPU indices (>= 0); an empty list or ``[-1]`` means no pinning."""
    cpus = tuple(int(v) for v in value)
    if cpus in ((), (-1,)):
        return ()
    if any(c < 0 for c in cpus):
        raise RealtimeSettingError(
            f"parameter cpu_affinity: CPU indices must be >= 0 ([-1]: none), got {list(cpus)}"
        )
    return cpus


@dataclass
class RealtimeSettings:
    """Real-time settings of the loop (already resolved: no ``auto``).

    Attributes:
        thread_priority: SCHED_FIFO priority of the loop thread (1..99; 0 = normal scheduling).
        process_priority: SCHED_FIFO priority of the process's other threads (0 = leave them).
        cpu_affinity: CPUs the loop thread may run on (empty: any).
        lock_memory: ``mlockall(MCL_CURRENT | MCL_FUTURE)``: no page faults in the loop.
        gc_in_slack: freeze the start-up objects, disable automatic collection and collect in the loop's
            slack (between ticks, when at least ``gc_min_slack_s`` remain before the next deadline).
        gc_min_slack_s: slack needed for a young-generation collection (s).
    """

    thread_priority: int = 0
    process_priority: int = 0
    cpu_affinity: tuple[int, ...] = ()
    lock_memory: bool = False
    gc_in_slack: bool = True
    gc_min_slack_s: float = 0.0008


@dataclass
class AppliedSettings:
    """What the system granted; ``warnings`` says what it refused (and the fallback)."""

    thread_priority: int = 0
    process_priority: int = 0
    cpu_affinity: tuple[int, ...] = ()
    lock_memory: bool = False
    gc_in_slack: bool = False
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """Diagnostics values (``rt_*``)."""
        return {
            "rt_thread_priority": self.thread_priority,
            "rt_process_priority": self.process_priority,
            "rt_cpu_affinity": " ".join(str(c) for c in self.cpu_affinity) or "any",
            "rt_lock_memory": self.lock_memory,
            "rt_gc_in_slack": self.gc_in_slack,
            "rt_refused": "; ".join(self.warnings),
        }


def set_fifo(tid: int, priority: int) -> str | None:
    """SCHED_FIFO ``priority`` for thread ``tid`` (0: the calling thread); None, or why it was refused."""
    try:
        os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:
        return f"SCHED_FIFO {priority} refused ({exc}); normal scheduling"
    return None


def lock_all_memory() -> str | None:
    """``mlockall(MCL_CURRENT | MCL_FUTURE)``; None, or why it was refused."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6", use_errno=True)
        mcl_current, mcl_future = 1, 2
        if libc.mlockall(mcl_current | mcl_future) != 0:
            err = ctypes.get_errno()
            return f"lock_memory refused ({os.strerror(err)}); memory not locked"
    except (OSError, AttributeError) as exc:
        return f"lock_memory unavailable ({exc}); memory not locked"
    return None


def unlock_all_memory() -> None:
    """``munlockall()`` (tests, and the driver at shutdown)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").munlockall()


def apply_to_loop_thread(settings: RealtimeSettings) -> AppliedSettings:
    """Apply the settings from the loop thread itself (priority and affinity are per thread on Linux).

    ``process_priority`` goes to every other thread of the process that exists now (the executor, the DDS
    threads). Refusals are collected in ``warnings``; the thread keeps running with what was granted.
    """
    applied = AppliedSettings()
    if settings.cpu_affinity:
        try:
            os.sched_setaffinity(0, settings.cpu_affinity)
            applied.cpu_affinity = tuple(sorted(os.sched_getaffinity(0)))
        except (OSError, ValueError, AttributeError) as exc:
            applied.warnings.append(
                f"cpu_affinity {list(settings.cpu_affinity)} refused ({exc}); the loop runs on any CPU"
            )
    if settings.lock_memory:
        why = lock_all_memory()
        if why is None:
            applied.lock_memory = True
        else:
            applied.warnings.append(why)
    if settings.process_priority > 0:
        me = _thread_id()
        others = [tid for tid in _process_threads() if tid != me]
        refused = [why for why in (set_fifo(tid, settings.process_priority) for tid in others) if why]
        if refused:
            applied.warnings.append(f"process_priority: {refused[0]}")
        elif others:
            applied.process_priority = settings.process_priority
    if settings.thread_priority > 0:
        why = set_fifo(0, settings.thread_priority)
        if why is None:
            applied.thread_priority = settings.thread_priority
        else:
            applied.warnings.append(f"thread_priority: {why}")
    if settings.gc_in_slack:
        gc.collect()
        gc.freeze()  # start-up objects (models, messages, configuration) leave the collector's generations
        gc.disable()  # collected in the loop's slack instead (SlackCollector)
        applied.gc_in_slack = True
    return applied


def _thread_id() -> int:
    import threading

    return int(threading.get_native_id())


def _process_threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


class SlackCollector:
    """Garbage collection between ticks: a young-generation collection when the loop has slack before its
    next deadline and ``every_s`` has passed; an older generation every ``full_every`` collections.

    The collector is disabled (``gc.disable``) while this runs, so a collection never starts inside a tick;
    if the loop never has slack for ``max_delay_s``, it collects anyway (memory must not grow unbounded).
    """

    def __init__(
        self,
        min_slack_s: float,
        every_s: float = 0.05,
        full_every: int = 200,
        max_delay_s: float = 1.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.min_slack = min_slack_s
        self.every = every_s
        self.full_every = full_every
        self.max_delay = max_delay_s
        self.clock = clock
        self._last = clock()
        self.collections = 0
        self.forced = 0

    def maybe_collect(self, next_deadline: float) -> bool:
        """Collect if there is slack before ``next_deadline`` (perf_counter s); True if it collected."""
        now = self.clock()
        since = now - self._last
        if since < self.every:
            return False
        if next_deadline - now < self.min_slack and since < self.max_delay:
            return False
        if since >= self.max_delay and next_deadline - now < self.min_slack:
            self.forced += 1
        self.collections += 1
        gc.collect(1 if self.collections % self.full_every == 0 else 0)
        self._last = self.clock()
        return True


def sleep_until(deadline: float, spin_margin: float) -> float:
    """Sleep to an absolute ``time.perf_counter()`` deadline (busy-wait the last ``spin_margin`` s).

    Returns the lateness (s) of the wake-up relative to the deadline (>= 0).
    """
    remaining = deadline - time.perf_counter()
    if remaining > spin_margin:
        time.sleep(remaining - spin_margin)
    else:
        # late or nearly: still hand the GIL over once, so the executor thread can take the commands that
        # arrived (a loop running behind would otherwise hold it for whole switch intervals, 5 ms each)
        time.sleep(0)
    while time.perf_counter() < deadline:
        pass
    return max(0.0, time.perf_counter() - deadline)


class SlackGate:
    """Lets another thread of the loop's process (the ROS executor) start work only in the loop's slack.

    The loop :meth:`close` s the gate when it wakes for a tick and :meth:`open_until` a margin before its
    next deadline once the tick's work is done; :meth:`window` waits (GIL released) for the gate to be open
    and gives the time left. Python runs one thread at a time: an executor callback that starts just before
    a deadline holds the loop's wake-up back by its own length, or up to the interpreter's switch interval
    (measured: /cmd_vel at 20 Hz made 4 % of a 500 Hz loop's wake-ups 0.15-0.75 ms late in some runs). Work
    already started is not stopped; the gate only chooses when new work starts. Open at construction and
    after :meth:`open` (the loop paused or ended). Times are ``time.perf_counter()`` seconds.
    """

    def __init__(self, starve_s: float = 0.01) -> None:
        self._cond = threading.Condition()
        self._until = math.inf
        self._last_end = time.perf_counter()  # the end of the last window that was open
        self.starve_s = starve_s
        self.starved = 0  # windows given because none had opened for starve_s (a loop with no slack)

    def open(self) -> None:
        """Open for good (until the next :meth:`close`): the loop is paused or has ended."""
        with self._cond:
            self._until = math.inf
            self._cond.notify_all()

    def open_until(self, until: float) -> None:
        """Open until ``until`` (perf_counter s)."""
        with self._cond:
            self._until = until
            if until > time.perf_counter():
                self._last_end = until
            self._cond.notify_all()

    def close(self) -> None:
        """Closed until the next :meth:`open_until` (the loop's tick is running)."""
        self._until = -math.inf  # a single store: no lock needed to close

    def window(self, timeout: float) -> float | None:
        """Wait up to ``timeout`` s for the gate to open; the seconds it stays open, or None if it did not.

        A loop with no slack (every tick overrunning) opens no window: once none has been open for
        ``starve_s``, the gate gives one anyway (0 s long, counted in :attr:`starved`), so that services such
        as an e-stop are still answered."""
        end = time.perf_counter() + timeout
        with self._cond:
            while True:
                now = time.perf_counter()
                left = self._until - now
                if left > 0.0:
                    return left
                starve_at = self._last_end + self.starve_s
                if now >= starve_at:
                    self.starved += 1
                    self._last_end = now
                    return 0.0
                if now >= end:
                    return None
                self._cond.wait(min(end, starve_at) - now)
