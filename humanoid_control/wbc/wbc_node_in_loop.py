"""The whole-body controller node's methods called in the driver's loop (:mod:`humanoid_control.wbc.wbc_node`,
module docstring: "In the driver's loop"; docs/realtime.md).

:class:`WbcInLoopMixin` is a base class of :class:`~humanoid_control.wbc.wbc_node.WbcNode` holding what the
driver's loop thread calls on the node it created in its process: the node's side of ``in_loop_step`` (the
tick's command, with the in-loop estimator's estimate of that tick or the latest ``/odom``; the call itself
is :class:`~humanoid_control.controllers.hosted.HostedInLoopMixin`'s, the WBC's
:class:`~humanoid_control.wbc.wbc_stand.WbcStandController` through its host), and, off the critical path,
``in_loop_diagnostics`` / ``in_loop_diagnostics_stages`` (``/diagnostics`` in stages) and ``in_loop_mirror``
(the latest command on ``~/joint_commands``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sensor_msgs.msg import JointState

from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.driver.in_loop import InLoopState
from humanoid_control.ros.node_utils import to_time_msg

if TYPE_CHECKING:
    import threading

    from humanoid_control.wbc.runner import WbcRunner


class WbcInLoopMixin:
    """The WBC node's methods for the driver's loop thread (a base class of the node: it reads and sets the
    node's state under its lock)."""

    # the node's state used here (set in ``WbcNode.__init__``)
    runner: WbcRunner
    active: bool
    driver_mode: str | None
    estimate_in_loop: bool
    in_loop_lockstep: bool
    pending_timeout: float
    skipped: int
    names: list[str]
    pub_cmd: Any
    _odom_arrived: threading.Condition
    _prev_t: float | None
    _last_cmd: tuple[float, Any] | None
    _diag_t: float | None
    _host_t0: float

    if TYPE_CHECKING:  # the node's methods used here

        def _count_answer(self, t0: float) -> None: ...

        def _forward_estop(self) -> None: ...

        def _publish_state(self) -> None: ...

        def _diagnostics_stages(self, stamp: Any) -> Iterator[None]: ...

    def _before_host_step(self, state: InLoopState) -> bool:
        """Driver's loop thread, before the QP (:class:`~humanoid_control.wbc.wbc_stand.WbcStandController`,
        through the host; the node's condition held): the driver's mode; nothing while idle; the base estimate
        of this tick from the estimator in the loop (``estimate_in_loop``), or in lockstep the wait for the
        ``/odom`` of the previous tick."""
        self.driver_mode = state.driver_mode
        if not self.active:
            return False
        prev, self._prev_t = self._prev_t, state.stamp
        if not self.estimate_in_loop:
            state.estimate = None  # /odom from the estimator's own process instead
            if self.in_loop_lockstep and prev is not None and state.driver_mode != "damping":
                end = time.monotonic() + self.pending_timeout
                while self.runner.odom is None or self.runner.odom.t < prev - 1e-9:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        self.skipped += 1
                        break
                    self._odom_arrived.wait(remaining)
        self._host_t0 = time.perf_counter()
        return True

    def _after_host_step(self, state: InLoopState, command: JointCommand | None) -> None:
        """Driver's loop thread, after the QP: the command kept for the mirror and counted, e-stop requests,
        the latched state; the diagnostics go out off the critical path (``in_loop_diagnostics``)."""
        if command is not None:
            self._last_cmd = (state.stamp, command)
            self._count_answer(self._host_t0)
        self._forward_estop()
        self._publish_state()
        self._diag_t = state.stamp

    def in_loop_diagnostics(self) -> None:
        """Driver's loop thread, off the critical path, about once a second: this node's ``/diagnostics``."""
        for _ in self.in_loop_diagnostics_stages():
            pass

    def in_loop_diagnostics_stages(self) -> Iterator[None]:
        """:meth:`in_loop_diagnostics` in three stages, one per ``next`` (the driver runs each in a tick's
        slack): the values, the message, the publication."""
        if self._diag_t is None:
            return
        stamp = to_time_msg(self._diag_t)
        yield from self._diagnostics_stages(stamp)

    def in_loop_mirror(self) -> None:
        """Driver's loop thread, off the critical path: the latest command on ``~/joint_commands``."""
        last = self._last_cmd
        if last is None:
            return
        t, cmd = last
        out = JointState(
            name=self.names, position=cmd.q.tolist(), velocity=cmd.dq.tolist(), effort=cmd.tau_ff.tolist()
        )
        out.header.stamp = to_time_msg(t)
        self.pub_cmd.publish(out)
