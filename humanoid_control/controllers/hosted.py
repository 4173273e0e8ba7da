"""The driver's loop's call on a node that hosts a controller: one path for every controller (no rclpy).

The driver creates the in-loop controller's node in its process (the generic
:class:`~humanoid_control.controllers.controller_node.ControllerNode`, or a controller's own node) and calls
``in_loop_step(state)`` from its loop thread each tick. :class:`HostedInLoopMixin` is that call for all of
them: under the node's lock, the node's ``_before_host_step`` (what its ROS face tracks: the driver's mode,
the velocity command, an ``/odom`` to wait for), the controller through its
:class:`~humanoid_control.controllers.host.ControllerHost` (``update(state, t)`` -> a checked command), then
the node's ``_after_host_step`` (its latched state, e-stop requests, the command kept for the mirror). A
node changes what its ROS face does around the call, never the call.
"""

from __future__ import annotations

import contextlib
from typing import Any

from humanoid_control.controllers.host import ControllerHost
from humanoid_control.controllers.interface import ControllerState
from humanoid_control.driver.driver_core import CommandError, JointCommand


class HostedInLoopMixin:
    """``in_loop_step`` of a node hosting a controller; the node sets :attr:`host` and may set
    :attr:`host_lock` (a lock or condition shared with its executor-thread callbacks)."""

    host: ControllerHost
    host_lock: Any = None

    def in_loop_step(self, state: ControllerState) -> JointCommand | None:
        """Driver's loop thread: this tick's command (configuration order, stamped ``state.stamp``) or None.

        Raises:
            CommandError: the controller's command is malformed and the node does not handle it (the driver
                counts it as refused).
        """
        with self.host_lock if self.host_lock is not None else contextlib.nullcontext():
            if not self._before_host_step(state):
                return None
            try:
                command = self.host.step(state)
            except CommandError as exc:
                command = self._refused_command(exc, state)
            self._after_host_step(state, command)
        return command

    def _before_host_step(self, state: ControllerState) -> bool:
        """Before the controller: what the node's ROS face adds to or takes from the state; False: no command
        this tick (the controller is not called)."""
        return True

    def _refused_command(self, exc: CommandError, state: ControllerState) -> JointCommand | None:
        """The controller's command was malformed: re-raised (the driver refuses it) unless the node acts."""
        raise exc

    def _after_host_step(self, state: ControllerState, command: JointCommand | None) -> None:
        """After the controller: the node's bookkeeping (latched state, requests, the mirrored command)."""
