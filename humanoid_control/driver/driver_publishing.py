"""The robot driver's publications besides the diagnostics: the tick's state (``/joint_states``,
``/imu/data``; simulators: ``/clock``, and while subscribed the ground truth and contact wrenches), the
in-loop controller's mirrored command and the in-loop estimator's outputs, ``~/mode``, ``~/switch``,
``~/down``, ``/sim/push`` and the latched ``~/lockstep``. Messages are reused and a tick's stamp is built
once.

:class:`DriverPublishingMixin` is a base of
:class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`, which creates the publishers and the
reused messages; the loop thread calls these in the tick or in its slack
(:mod:`humanoid_control.driver.driver_slack`).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from geometry_msgs.msg import WrenchStamped
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String

from humanoid_control.driver.driver_core import DriverMode
from humanoid_control.ros.node_utils import to_time_msg


class DriverPublishingMixin:
    """The publications of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`
    (``self`` is the driver node)."""

    def _publish_lockstep(self) -> None:
        """Latched ``~/lockstep``: JSON with ``paused``, ``time`` (s), ``peers``, ``dropped``, ``declared``
        (``lockstep_peers``) and ``waiting_for`` (declared peers that have not joined)."""
        with self.lock:
            data = {
                "paused": bool(self.paused),
                "clock": self.clock_mode,
                "time": round(self.backend_time(), 6),
                "peers": self.peers.names,
                "dropped": list(self.peers.dropped),
                "declared": list(self.declared_peers),
                "waiting_for": [n for n in self.declared_peers if n not in self.peers.acked],
            }
        self.pub_lockstep.publish(String(data=json.dumps(data)))

    def _publish_state(self, state: Any) -> None:
        """The tick's state on ``/joint_states`` and ``/imu/data``; simulated: ``/clock`` and, while someone
        listens, the ground truth and contact wrenches."""
        self._publish_joints(state)
        self._publish_imu(state)
        if self.backend.simulated:
            self._publish_clock(state)
            self._publish_truth(state)

    def _stamp_msg(self, stamp: float) -> Any:
        """``stamp`` (s) as a ``builtin_interfaces/Time``, built once for all the streams of a tick."""
        if stamp != self._stamp_cache[0]:
            self._stamp_cache = (stamp, to_time_msg(stamp))
        return self._stamp_cache[1]

    def _publish_joints(self, state: Any) -> None:
        msg = self._joint_msg
        msg.header.stamp = self._stamp_msg(state.stamp)
        msg.position = state.q.tolist()
        msg.velocity = state.dq.tolist()
        msg.effort = state.tau.tolist()
        self.pub_joints.publish(msg)

    def _publish_imu(self, state: Any) -> None:
        imu = self._imu_msg
        imu.header.stamp = self._stamp_msg(state.stamp)
        if self.publish_orientation:
            w, x, y, z = state.imu_quat
            imu.orientation.w, imu.orientation.x, imu.orientation.y, imu.orientation.z = w, x, y, z
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = state.gyro.tolist()
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = state.accel.tolist()
        self.pub_imu.publish(imu)

    def _publish_clock(self, state: Any) -> None:
        if self.backend.simulated:
            self.pub_clock.publish(Clock(clock=self._stamp_msg(state.stamp)))

    def _publish_truth(self, state: Any | None) -> None:
        """Simulated, while someone listens: the simulator's current ground truth and contact wrenches,
        stamped with ``state``'s stamp (the state they belong to) or, with ``None`` (published after the
        physics stepped past the tick's state), with the simulator's own time."""
        if not self.backend.simulated or not self._truth_subscribed():
            return  # nobody listens: the ground truth and contact wrenches are not computed
        truth = self.backend.ground_truth()
        if truth is None:
            return
        stamp = self._stamp_msg(self.backend_time() if state is None else state.stamp)
        odom = self._truth_msg  # reused, like the IMU's: building a message costs as much as publishing it
        odom.header.stamp = stamp
        p = odom.pose.pose.position
        p.x, p.y, p.z = truth.position.tolist()
        o = odom.pose.pose.orientation
        o.w, o.x, o.y, o.z = truth.quat.tolist()
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        lin.x, lin.y, lin.z = truth.linear_velocity_body.tolist()
        ang.x, ang.y, ang.z = truth.angular_velocity_body.tolist()
        self.pub_truth.publish(odom)
        for side, wrench in truth.contacts.items():
            w = self._truth_wrench_msgs[side]
            w.header.stamp = stamp
            w.header.frame_id = wrench.frame
            w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = wrench.force.tolist()
            w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = wrench.torque.tolist()
            self.pub_contacts[side].publish(w)

    _truth_checked = -math.inf
    _truth_wanted = True

    def _truth_subscribed(self) -> bool:
        """Someone reads ``/sim/ground_truth`` or a contact topic (checked every tick in lockstep, every
        0.1 s of wall time in realtime)."""
        now = time.perf_counter()
        if self.clock_mode == "lockstep" or now - self._truth_checked >= 0.1:
            self._truth_checked = now
            self._truth_wanted = self.pub_truth.get_subscription_count() > 0 or any(
                pub.get_subscription_count() > 0 for pub in self.pub_contacts.values()
            )
        return self._truth_wanted

    def _publish_mirror(self, _state: Any) -> None:
        """The in-loop controller's latest command on its ``~/joint_commands`` (tooling)."""
        if self.in_loop is not None:
            self.in_loop.in_loop_mirror()

    def _publish_estimate(self, _state: Any = None) -> None:
        """The in-loop estimator's outputs (``/odom``, contacts, its diagnostics) for its latest tick."""
        if self.in_loop_estimator is not None:
            self.in_loop_estimator.in_loop_publish()

    def _publish_push(self, force: tuple[float, float, float], stamp: float) -> None:
        """A push starting (its force) or ending (zero force) at ``stamp`` (s, simulated time)."""
        if force != (0.0, 0.0, 0.0):
            self.pushes += 1
        msg = WrenchStamped()
        msg.header.stamp = to_time_msg(stamp)
        msg.header.frame_id = "world"
        msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = (float(v) for v in force)
        self.pub_push.publish(msg)

    def _publish_mode(self, mode: DriverMode, reason: str, defer_log: bool = False) -> None:
        """The new mode on ``~/mode`` at once, and a log line; ``defer_log`` (realtime, a controller in the
        loop): an info line waits for the loop's slack (a log line cost 1.5-1.9 ms in the tick, an overrun at
        each mode change); damping is logged at once."""
        self.pub_mode.publish(String(data=mode.value))
        if mode == DriverMode.DAMPING:
            self.get_logger().error(f"mode -> {mode.value} ({reason})")
        elif defer_log:
            self._logs_pending.append((self.get_logger(), f"mode -> {mode.value} ({reason})"))
        else:
            self.get_logger().info(f"mode -> {mode.value} ({reason})")

    def _publish_down(self, down: bool, tilt: float, stamp: float) -> None:
        """``~/down`` (latched JSON): whether the robot is down (``DriverCore.down``), the base tilt (deg) of
        the tick that changed it, the limit ``fall_tilt_deg`` and that tick's stamp (s)."""
        data = {
            "down": down,
            "tilt_deg": round(math.degrees(tilt), 1),
            "fall_tilt_deg": round(math.degrees(self.settings.fall_tilt), 1),
            "t": round(stamp, 6),
        }
        self.pub_down.publish(String(data=json.dumps(data)))

    def _publish_switch(self, rec: Any) -> None:
        """``~/switch``: one controller switch and its torque steps (fractions of the effort limits)."""
        data = {
            "t": round(rec.t, 6),
            "from": rec.old,
            "to": rec.new,
            "unblended_step": round(rec.unblended_step, 4),
            "unblended_joint": rec.unblended_joint,
            "step_at_switch": round(rec.step_at_switch, 4),
            "step_joint": rec.step_joint,
            "max_step": round(rec.max_step, 4),
            "max_step_joint": rec.max_step_joint,
            "blend_ticks": rec.blend_ticks,
            "bound": self.settings.switch_max_step,
        }
        self.pub_switch.publish(String(data=json.dumps(data)))
        self.get_logger().info(
            f"switch {rec.old} -> {rec.new} at t = {rec.t:.3f} s: torque step {rec.step_at_switch:.3f} "
            f"of the effort limit at the switch ({rec.step_joint}), {rec.max_step:.3f} at most over "
            f"{max(rec.blend_ticks, 1)} ticks ({rec.max_step_joint}); unblended {rec.unblended_step:.3f} "
            f"({rec.unblended_joint}); bound {self.settings.switch_max_step:g}"
        )
