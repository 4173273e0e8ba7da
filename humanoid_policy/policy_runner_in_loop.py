"""The policy runner node's methods called in the driver's loop (:mod:`humanoid_policy.policy_runner_node`,
module docstring: "In the driver's loop").

:class:`PolicyInLoopMixin` is a base class of :class:`~humanoid_policy.policy_runner_node.PolicyRunnerNode`
holding what the driver's loop thread calls on the node it created in its process: ``in_loop_step`` (one
tick: the IMU sample and joint state of the same stamp -> the command), and, off the critical path,
``in_loop_mirror`` (the latest command on ``~/joint_commands``) and ``in_loop_diagnostics`` /
``in_loop_diagnostics_stages`` (``/diagnostics`` in stages).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sensor_msgs.msg import JointState

from humanoid_control.driver.driver_core import CommandError, JointCommand
from humanoid_control.driver.in_loop import InLoopState, checked_command
from humanoid_control.ros.node_utils import to_time_msg
from humanoid_policy.runner import ImuSample

if TYPE_CHECKING:
    import threading

    import numpy as np

    from humanoid_policy.runner import PolicyRunner


class PolicyInLoopMixin:
    """The policy runner node's methods for the driver's loop thread (a base class of the node: it reads and
    sets the node's state under its lock)."""

    # the node's state used here (set in ``PolicyRunnerNode.__init__``)
    runner: PolicyRunner
    driver_mode: str | None
    imu_refused: int
    last_refusal: str
    names: list[str]
    pub_cmd: Any
    _lock: threading.RLock
    _last_target: tuple[float, np.ndarray] | None
    _zeros: list[float]
    _diag_t: float | None

    if TYPE_CHECKING:  # the node's methods used here

        def _advance(self, t: float, q: np.ndarray, dq: np.ndarray, wall: float) -> np.ndarray | None: ...

        def _after_step(self, stamp: Any, t: float, wall: float) -> None: ...

        def _diagnostics_stages(self, stamp: Any, publish: bool = True) -> Iterator[None]: ...

    def in_loop_step(self, state: InLoopState) -> JointCommand | None:
        """Driver's loop thread: one tick (IMU sample and joint state of the same stamp) -> the command."""
        wall = time.perf_counter()
        with self._lock:
            self.driver_mode = state.driver_mode
            sample = ImuSample(state.stamp, state.imu_quat, state.gyro)
            if not self.runner.set_imu(sample):
                self.imu_refused += 1
                self.last_refusal = "IMU sample with non-finite or non-unit values"
            q_target = self._advance(state.stamp, state.q, state.dq, wall)
            command = None
            if q_target is not None:
                self._last_target = (state.stamp, q_target)
                try:
                    command = checked_command(len(self.names), state.stamp, q_target)
                except CommandError as exc:
                    self.runner.fault(str(exc), state.stamp)
            self._after_step(None, state.stamp, wall)
        return command

    def in_loop_mirror(self) -> None:
        """Driver's loop thread, off the critical path: the latest command on ``~/joint_commands``."""
        last = self._last_target
        if last is None:
            return
        cmd = JointState(name=self.names, position=last[1].tolist(), velocity=self._zeros, effort=self._zeros)
        cmd.header.stamp = to_time_msg(last[0])
        self.pub_cmd.publish(cmd)

    def in_loop_diagnostics(self) -> None:
        """Driver's loop thread, off the critical path, about once a second: this node's ``/diagnostics``."""
        for _ in self.in_loop_diagnostics_stages():
            pass

    def in_loop_diagnostics_stages(self) -> Iterator[None]:
        """:meth:`in_loop_diagnostics` in three stages, one per ``next`` (the driver runs each in a tick's
        slack; in one piece they cost 0.9-1.5 ms): the values, the message, the publication."""
        if self._diag_t is None:
            return
        yield from self._diagnostics_stages(to_time_msg(self._diag_t))
