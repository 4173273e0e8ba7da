"""Blocking service calls from a node's callbacks (:class:`ServiceCaller`)."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from std_srvs.srv import Trigger

from humanoid_control.ros.node_utils import helper_node


class ServiceCaller:
    """Blocking service calls (``std_srvs/Trigger`` and others) from a node's callbacks.

    The clients live on a node of their own, spun by its own executor thread (started at the first request,
    so no second thread is inside rclpy while the owner is being built), so a callback of the calling node
    can wait for a response (with a timeout) without waiting on its own executor. (Awaiting a client's
    future in an ``async`` service callback never resumed under rclpy 9.1's SingleThreadedExecutor.)

    That node is named ``name`` (by convention ``<owner>_calls``, from the owner's own, possibly remapped,
    name) through a node-local remap: a process-wide ``-r __node:=X`` (what ``ros2 launch`` gives a node)
    would otherwise rename it too, and the graph would hold two nodes called ``X``.
    """

    def __init__(self, context: Any, name: str, services: dict[str, str | tuple[Any, str]]) -> None:
        from rclpy.executors import SingleThreadedExecutor

        # wall-clock node: the launch's use_sim_time (a global argument of the process) would make it follow
        # /clock at the driver's rate, waking this thread 500 times a second for nothing (measured: half of
        # the mode manager's CPU in realtime)
        self.node = helper_node(context, name)
        self.clients = {
            key: self.node.create_client(*(spec if isinstance(spec, tuple) else (Trigger, spec)))
            for key, spec in services.items()
        }
        self._closed = False
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, name=f"{name}_spin", daemon=True)
        self._start_lock = threading.Lock()

    def _ensure_spinning(self) -> None:
        """Start the executor thread once (any thread may call; the first one starts it)."""
        with self._start_lock:
            if not self._closed and self.thread.ident is None:
                self.thread.start()

    def _spin(self) -> None:
        with contextlib.suppress(Exception):  # the context shuts down
            self.executor.spin()

    def ready(self, key: str) -> bool:
        """The service is discovered."""
        return bool(self.clients[key].service_is_ready())

    def call(self, key: str, timeout: float) -> tuple[bool, str]:
        """(success, message) of a ``std_srvs/Trigger`` service, or (False, why) when it is not there or did
        not answer."""
        result = self.request(key, Trigger.Request(), timeout)
        if isinstance(result, str):
            return False, result
        return bool(result.success), str(result.message)

    def request(self, key: str, request: Any, timeout: float) -> Any:
        """The response of any service, or a string saying why there is none (not there, no answer within
        ``timeout`` s of wall time)."""
        client = self.clients[key]
        if not client.service_is_ready():
            return f"{client.srv_name} is not available"
        self._ensure_spinning()
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout) and not future.done():
            return f"{client.srv_name} did not answer within {timeout:g} s"
        result = future.result()
        if result is None:
            return f"{client.srv_name} did not answer"
        return result

    def request_when_ready(self, key: str, request: Any, timeout: float) -> Any:
        """:meth:`request`, first waiting for the service to be discovered; ``timeout`` (s of wall time)
        covers both."""
        end = time.monotonic() + timeout
        while not self.ready(key) and time.monotonic() < end:
            time.sleep(0.01)
        return self.request(key, request, max(0.1, end - time.monotonic()))

    def call_async(self, key: str) -> None:
        """Call without waiting for the answer (when the service is there)."""
        client = self.clients[key]
        if client.service_is_ready():
            self._ensure_spinning()
            client.call_async(Trigger.Request())

    def close(self) -> None:
        """Stop the thread's executor, wait for the thread, destroy the node (idempotent). The thread must be
        gone before the process exits: a thread left inside rclpy's C++ code at interpreter exit aborts the
        process (``terminate called without an active exception``)."""
        with self._start_lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(Exception):
            self.executor.shutdown(timeout_sec=1.0)
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout=2.0)
        with contextlib.suppress(Exception):
            self.node.destroy_node()
