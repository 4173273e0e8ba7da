"""A node process's clean stop on SIGINT and SIGTERM (:class:`GracefulStop`).

rclpy's own signal handler shuts the context down the moment a signal arrives and then raises
``KeyboardInterrupt``: a node's ``close()`` then runs with its publishers already invalid (``publisher's
context is invalid``, ``Failed to publish log message to rosout``), and a second SIGINT (a terminal's Ctrl-C
reaches every process of the launch's group, and the launcher forwards one more) lands in the clean-up as a
traceback.

Here the process handles both signals itself (rclpy is initialised without its handlers):

- a signal only records itself; Python writes its number to a wake-up socket (``signal.set_wakeup_fd``), which
  works while the main thread waits inside ``rcl_wait`` with the GIL released;
- a watcher thread reads that socket and triggers a guard condition of the node, whose callback, run by the
  executor on the spinning thread, raises :class:`StopRequested`: the spin ends between two callbacks;
- the context stays valid through the node's ``close()`` (a lockstep peer's leave, a zero velocity, the last
  log lines reach the graph), then the node is destroyed and the context shut down;
- further signals are recorded and ignored, and once the clean-up is over ignored outright: neither the
  clean-up nor the interpreter's exit is interrupted.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from typing import Any


class StopRequested(Exception):
    """Raised by the stop guard condition's callback: SIGINT or SIGTERM asked the process to stop."""


class GracefulStop:
    """SIGINT and SIGTERM end a node's spin with its context still valid.

    Create it in the main thread before ``rclpy.init`` (signals that arrive while the node is being built are
    kept), then :meth:`attach` it to the node once it exists. ``signal_number`` is the first signal received
    (None: none).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signal_number: int | None = None
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        self._old_fd = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        for s in self.SIGNALS:
            signal.signal(s, self._note)
        self._guard: Any = None
        self._closed = False
        self._thread = threading.Thread(target=self._watch, name="graceful_stop", daemon=True)

    def _note(self, signum: int, _frame: Any) -> None:
        """The Python-level handler (main thread): record, never raise."""
        if self.signal_number is None:
            self.signal_number = signum

    def attach(self, node: Any) -> None:
        """Create the stop guard condition on ``node`` (so its executor wakes for it) and start watching."""
        self._guard = node.create_guard_condition(self._on_guard)
        self._thread.start()

    @property
    def requested(self) -> bool:
        """A stop signal arrived."""
        return self.signal_number is not None

    def _watch(self) -> None:
        """Watcher thread: wait for a signal's byte on the wake-up socket, then wake the executor."""
        while not self._closed:
            try:
                data = self._read.recv(64)
            except OSError:
                return
            if not data or self._closed:
                return
            if any(b in (int(s) for s in self.SIGNALS) for b in data):
                if self.signal_number is None:
                    self.signal_number = int(data[0])
                if self._guard is not None:
                    with contextlib.suppress(Exception):  # the node is already gone
                        self._guard.trigger()
                return

    def _on_guard(self) -> None:
        """Executor callback on the spinning thread."""
        raise StopRequested(f"signal {self.signal_number}")

    def close(self) -> None:
        """Stop watching (main thread, at the very end). From here on SIGINT and SIGTERM are ignored at the
        OS level: the interpreter's finalisation resets a Python-level handler to the default action (a
        second SIGINT arriving then, a few milliseconds after the first, killed a node that had shut down
        cleanly), but it leaves an ignored signal ignored."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._write.send(b"\0")
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(self._old_fd)
            for s in self.SIGNALS:
                signal.signal(s, signal.SIG_IGN)
        self._read.close()
        self._write.close()


def init_without_signal_handlers(args: list[str]) -> None:
    """``rclpy.init`` without rclpy's SIGINT / SIGTERM handlers (``SignalHandlerOptions.NO``, Humble and
    later); the process's :class:`GracefulStop` handles them."""
    import rclpy

    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):  # an rclpy without the option
        rclpy.init(args=args)
