"""A job on a thread beside the caller's (the loop thread's), without rclpy.

A backend uses it to step its physics while the loop goes on with the rest of the tick (the MuJoCo backend's
``physics_thread``); the bench's bare-loop baseline does the same. It belongs to no loop: any caller that has
work to overlap with its own can use it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable


class BesideThread:
    """One job at a time on a thread of its own, beside the caller (the loop thread): :meth:`start` hands it
    a job and returns; :meth:`join` waits for it and raises its exception. The thread is made by the first
    :meth:`start` and inherits the caller's scheduling (a loop thread's SCHED_FIFO priority and CPUs).
    Useful where the job releases the GIL (MuJoCo's step) or can run in the loop's idle time (Python work
    that the next tick needs but the command does not)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._go = threading.Semaphore(0)
        self._done = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._job: Callable[[], None] | None = None
        self._error: BaseException | None = None
        self.busy = False  # a job started and not joined yet

    def start(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the thread (after joining the previous one)."""
        self.join()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        self._job = job
        self.busy = True
        self._go.release()

    def join(self) -> None:
        """Wait for the job started last, if any; raise its exception (RuntimeError naming the thread)."""
        if not self.busy:
            return
        with self._lock:
            if self.busy:
                self._done.acquire()
                self.busy = False
        error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(f"{self.name}: {error!r}") from error

    def close(self) -> None:
        """Join the job in flight (its exception dropped) and stop the thread."""
        with contextlib.suppress(RuntimeError):
            self.join()
        if self._thread is not None:
            self._job = None
            self._go.release()
            self._thread.join(timeout=5.0)
            self._thread = None

    def _run(self) -> None:
        while True:
            self._go.acquire()
            job = self._job
            if job is None:
                return
            try:
                job()
            except BaseException as exc:  # raised in the caller's thread by join
                self._error = exc
            self._done.release()
