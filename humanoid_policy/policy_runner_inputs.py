"""Input callbacks of the policy runner node (:mod:`humanoid_policy.policy_runner_node`).

:class:`PolicyInputsMixin` is a base class of :class:`~humanoid_policy.policy_runner_node.PolicyRunnerNode`
holding its subscription callbacks: ``/imu/data`` (runs the joint state waiting for the IMU sample of its
stamp, in lockstep), ``/cmd_vel`` (taken at the last processed tick), the driver's mode and
``/joint_states`` (reordered to the robot's joint order; in lockstep kept until its IMU sample arrives), and
the expiry of a joint state that waited too long for its IMU sample.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
from geometry_msgs.msg import Twist
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import String

from humanoid_control.ros.node_utils import from_time_msg
from humanoid_policy.runner import ImuSample

if TYPE_CHECKING:
    import threading

    from humanoid_control.model.joint_order import JointOrder
    from humanoid_policy.runner import PolicyRunner


class PolicyInputsMixin:
    """The policy runner node's input callbacks (a base class of the node: it reads and sets the node's
    state, and runs a tick through the node's ``_process``)."""

    # the node's state used here (set in ``PolicyRunnerNode.__init__``)
    runner: PolicyRunner
    in_loop: bool
    lockstep: bool
    driver_mode: str | None
    joint_order: JointOrder
    imu_refused: int
    states_refused: int
    last_refusal: str
    sync_timeout: float
    sync_timeouts: int
    _lock: threading.RLock
    _pending_state: JointState | None
    _pending_since: float
    _last_t: float

    if TYPE_CHECKING:  # the node's methods used here

        def get_logger(self) -> Any: ...

        def _process(self, msg: JointState) -> None: ...

    def _on_imu(self, msg: Imu) -> None:
        o, w = msg.orientation, msg.angular_velocity
        sample = ImuSample(
            from_time_msg(msg.header.stamp), np.array([o.w, o.x, o.y, o.z]), np.array([w.x, w.y, w.z])
        )
        if not self.runner.set_imu(sample):
            self.imu_refused += 1
            self.last_refusal = "IMU sample with non-finite or non-unit values"
            self.get_logger().warning(
                "dropped an IMU sample with non-finite values", throttle_duration_sec=1.0
            )
        pending = self._pending_state
        if pending is not None and from_time_msg(pending.header.stamp) <= sample.t + 1e-7:
            self._pending_state = None
            self._process(pending)

    def _expire_pending(self) -> None:
        """Lockstep: a joint state whose IMU sample never came runs with the latest one (counted)."""
        pending = self._pending_state
        if pending is not None and time.monotonic() - self._pending_since > self.sync_timeout:
            self._pending_state = None
            self.sync_timeouts += 1
            self.get_logger().warning("lockstep: no IMU sample for a joint state; using the latest one")
            self._process(pending)

    def _on_cmd_vel(self, msg: Twist) -> None:
        cmd = np.array([msg.linear.x, msg.linear.y, msg.angular.z])
        if not np.all(np.isfinite(cmd)):
            self.get_logger().warning("refused a non-finite /cmd_vel", throttle_duration_sec=1.0)
            return
        # taken at the last processed tick: in lockstep a /cmd_vel published while tick k was processed is
        # here before tick k+1, so the command time does not depend on message timing
        with self._lock:
            self.runner.set_command(cmd, self._last_t)

    def _on_driver_mode(self, msg: String) -> None:
        if not self.in_loop:  # in the loop the driver hands its mode over with each tick
            self.driver_mode = msg.data

    def _reorder(self, msg: JointState) -> tuple[np.ndarray, np.ndarray] | None:
        missing = self.joint_order.missing(msg.name)
        if missing:
            self.states_refused += 1
            self.last_refusal = f"joint state without joints {missing}"
            self.get_logger().error(f"dropped /joint_states: missing {missing}", throttle_duration_sec=1.0)
            return None
        n = len(msg.name)
        if len(msg.position) != n or len(msg.velocity) != n:
            self.states_refused += 1
            self.last_refusal = "joint state with wrong lengths"
            return None
        return self.joint_order.take(msg.position), self.joint_order.take(msg.velocity)

    def _on_joint_states(self, msg: JointState) -> None:
        if self.lockstep:
            if self._pending_state is not None:  # its IMU sample never came: run it with the latest
                pending, self._pending_state = self._pending_state, None
                self.sync_timeouts += 1
                self._process(pending)
            imu = self.runner.imu
            if imu is None or imu.t < from_time_msg(msg.header.stamp) - 1e-7:
                self._pending_state = msg
                self._pending_since = time.monotonic()
                return
        self._process(msg)
