"""Input callbacks of the whole-body controller node (:mod:`humanoid_control.wbc.wbc_node`).

:class:`WbcInputsMixin` is a base class of :class:`~humanoid_control.wbc.wbc_node.WbcNode` holding its
subscription callbacks and the pairing of joint states with ``/odom`` (module docstring of the node,
"Pairing"): the driver's mode (a fault cleared when the driver ramps), ``/odom`` (answers the joint state
waiting for it), ``/joint_states`` (answered at once, or kept until the ``/odom`` of its stamp arrives) and
the expiry of a joint state that waited too long for its ``/odom``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from humanoid_control.ros.node_utils import from_time_msg
from humanoid_control.wbc.runner import OdomSample, WbcState

if TYPE_CHECKING:
    import threading

    from humanoid_control.model.joint_order import JointOrder
    from humanoid_control.ros.lockstep import LockstepPeer
    from humanoid_control.wbc.runner import WbcRunner


class WbcInputsMixin:
    """The WBC node's input callbacks (a base class of the node: it reads and sets the node's state, and
    answers through the node's ``_answer``)."""

    # the node's state used here (set in ``WbcNode.__init__``)
    runner: WbcRunner
    in_loop: bool
    lockstep: bool
    active: bool
    driver_mode: str | None
    joint_order: JointOrder
    peer: LockstepPeer
    pending_timeout: float
    skipped: int
    _lock: threading.RLock
    _odom_arrived: threading.Condition
    _pending: tuple[float, np.ndarray, np.ndarray, Any] | None
    _pending_since: float

    if TYPE_CHECKING:  # the node's methods used here

        def get_logger(self) -> Any: ...

        def _publish_state(self) -> None: ...

        def _answer(self, t: float, q: np.ndarray, dq: np.ndarray, stamp: Any) -> None: ...

    def _on_driver_mode(self, msg: String) -> None:
        with self._lock:
            self._driver_mode(msg)

    def _driver_mode(self, msg: String) -> None:
        self.driver_mode = msg.data
        if msg.data == "ramp" and self.runner.state == WbcState.FAULT:
            # the driver was reset or the robot respawned: start over now. (The runner also clears the fault
            # when a joint state arrives during the ramp, but a driver running free - nobody paces it after a
            # fault - can finish its ramp before this node has seen one of those.)
            self.runner.reset()
            self.get_logger().info("driver ramping: fault cleared, waiting for fresh input")
            self._publish_state()

    def _on_odom(self, msg: Odometry) -> None:
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        v, w = msg.twist.twist.linear, msg.twist.twist.angular
        sample = OdomSample(
            from_time_msg(msg.header.stamp),
            np.array([p.x, p.y, p.z]),
            np.array([o.x, o.y, o.z, o.w]),
            np.array([v.x, v.y, v.z]),
            np.array([w.x, w.y, w.z]),
        )
        with self._odom_arrived:
            accepted = self.runner.set_odom(sample)
            self._odom_arrived.notify_all()
        if not accepted:
            self.get_logger().warning(
                f"refused /odom: {self.runner.counters.last_refusal}", throttle_duration_sec=1.0
            )
            return
        if self.in_loop:
            return
        if self._pending is not None and self._pending[0] <= sample.t + 1e-9:
            pending, self._pending = self._pending, None
            self._answer(*pending)

    def _on_joint_states(self, msg: JointState) -> None:
        if not self.active:  # idle: nothing to solve; the lockstep tick is acknowledged at once
            self._pending = None
            self.peer.ack(msg.header.stamp)
            return
        arrays = self.joint_order(msg.name, msg.position, msg.velocity)
        if isinstance(arrays, str):
            self.runner.counters.states_refused += 1
            self.runner.counters.last_refusal = arrays
            self.get_logger().error(f"refused /joint_states: {arrays}", throttle_duration_sec=1.0)
            self.peer.ack(msg.header.stamp)
            return
        t = from_time_msg(msg.header.stamp)
        if self._pending is not None:  # its /odom never came: answer with the latest one (or refuse)
            pending, self._pending = self._pending, None
            self.skipped += 1
            self._answer(*pending)
        odom = self.runner.odom
        if odom is not None and odom.t >= t - 1e-9:
            self._answer(t, arrays[0], arrays[1], msg.header.stamp)
        elif self.lockstep or (
            self.runner.gains_ready
            and self.driver_mode not in (None, "damping")
            and self.runner.state != WbcState.FAULT
        ):
            self._pending = (t, arrays[0], arrays[1], msg.header.stamp)
            self._pending_since = time.monotonic()
        else:
            self._answer(t, arrays[0], arrays[1], msg.header.stamp)  # not commanding: state bookkeeping only

    def _expire_pending(self) -> None:
        """A joint state waiting for its /odom too long (the estimator dropped or skipped it, e.g. while it
        restarts) is answered with the latest /odom - refused and counted when that is stale - instead of
        stalling a lockstep driver until its timeout."""
        if self._pending is not None and time.monotonic() - self._pending_since > self.pending_timeout:
            pending, self._pending = self._pending, None
            self.skipped += 1
            self._answer(*pending)
