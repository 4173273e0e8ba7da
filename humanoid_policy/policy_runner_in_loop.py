"""The policy runner node's methods called in the driver's loop (:mod:`humanoid_policy.policy_runner_node`,
module docstring: "In the driver's loop").

:class:`PolicyInLoopMixin` is a base class of :class:`~humanoid_policy.policy_runner_node.PolicyRunnerNode`
holding what the driver's loop thread calls on the node it created in its process: the node's side of
``in_loop_step`` (one tick: the IMU sample and joint state of the same stamp -> the command; the call itself
is :class:`~humanoid_control.controllers.hosted.HostedInLoopMixin`'s, the policy's
:class:`~humanoid_policy.controller.PolicyController` through its host), and, off the critical path,
``in_loop_mirror`` (the latest command on ``~/joint_commands``) and ``in_loop_diagnostics`` /
``in_loop_diagnostics_stages`` (``/diagnostics`` in stages).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sensor_msgs.msg import JointState

from humanoid_control.driver.driver_core import CommandError, JointCommand
from humanoid_control.driver.in_loop import InLoopState
from humanoid_control.ros.node_utils import to_time_msg
from humanoid_policy.runner import RunnerState

if TYPE_CHECKING:
    import threading

    import numpy as np

    from humanoid_policy.controller import PolicyController
    from humanoid_policy.runner import PolicyRunner


class PolicyInLoopMixin:
    """The policy runner node's methods for the driver's loop thread (a base class of the node: it reads and
    sets the node's state under its lock)."""

    # the node's state used here (set in ``PolicyRunnerNode.__init__``)
    runner: PolicyRunner
    controller: PolicyController
    inference_us: list[float]
    max_state_gap_ms: float
    _last_cb_wall: float | None
    _last_t: float
    _imu_refused_seen: int
    _step_wall: float
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

        def _after_step(self, stamp: Any, t: float, wall: float) -> None: ...

        def _diagnostics_stages(self, stamp: Any, publish: bool = True) -> Iterator[None]: ...

    def _before_host_step(self, state: InLoopState) -> bool:
        """Driver's loop thread, before the policy (:class:`~humanoid_policy.controller.PolicyController`,
        through the host): the driver's mode of this tick, the gap since the last state, its stamp (the time a
        ``/cmd_vel`` is taken at)."""
        self._step_wall = wall = time.perf_counter()
        self.driver_mode = state.driver_mode
        if self._last_cb_wall is not None and self.runner.state == RunnerState.RUN:
            self.max_state_gap_ms = max(self.max_state_gap_ms, (wall - self._last_cb_wall) * 1e3)
        self._last_cb_wall = wall
        self._last_t = state.stamp
        return True

    def _refused_command(self, exc: CommandError, state: InLoopState) -> JointCommand | None:
        """A malformed policy command latches the runner's fault (no command)."""
        self.runner.fault(str(exc), state.stamp)
        return None

    def _after_host_step(self, state: InLoopState, command: JointCommand | None) -> None:
        """Driver's loop thread, after the policy: refusals and inference time counted, the command kept for
        the mirror, hold / e-stop requests, the latched state."""
        ctl = self.controller
        if ctl.imu_refused != self._imu_refused_seen:
            self.imu_refused += ctl.imu_refused - self._imu_refused_seen
            self._imu_refused_seen = ctl.imu_refused
            self.last_refusal = "IMU sample with non-finite or non-unit values"
        if ctl.last_step is not None:
            self.inference_us.append(ctl.last_inference_us)
            del self.inference_us[:-2000]
        if command is not None:
            self._last_target = (state.stamp, command.q)
        self._after_step(None, state.stamp, self._step_wall)

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
