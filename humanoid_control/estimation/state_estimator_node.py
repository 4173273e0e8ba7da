"""State estimator node: IMU + joint states -> ``/odom``, contacts, TF.

- subscribes ``/imu/data`` (propagation, every sample) and ``/joint_states`` (leg kinematics, contact
  detection from the measured joint torques and slip detection from the joint rates, applied once the IMU
  has reached the joint state's stamp); it never reads ``/sim/*``;
- publishes ``/odom`` (nav_msgs/Odometry, ``odom`` -> ``base_link``: the pose of the base body, ``pelvis``
  on the G1, which the served URDF's ``base_link`` coincides with (:mod:`humanoid_control.model.urdf`); pose
  covariance from the filter; twist in the base frame), ``/contacts/left`` and ``/contacts/right``
  (geometry_msgs/WrenchStamped: estimated ground reaction force, odom-aligned axes; force.z = 0 while the foot
  is not in contact), the same ``odom`` -> ``base_link`` transform on ``/tf`` where ``tf2_msgs`` is installed
  (REP-105; the links' transforms below ``base_link`` come from ``tf_publisher`` or robot_state_publisher),
  and ``/diagnostics`` (contact and slip states, innovation norms, dropped messages, IMU gaps).

In the driver's loop (``controller:=wbc_stand in_loop:=true``, docs/realtime.md): the driver creates this
node in its process (``in_loop``): no subscriptions, no lockstep peer; the loop calls
:meth:`StateEstimatorNode.in_loop_predict` with each tick's IMU sample and joint state before the WBC,
:meth:`StateEstimatorNode.in_loop_correct` once the WBC's command is written and
:meth:`StateEstimatorNode.in_loop_publish` in its slack (the outputs above, for the latest tick); parameters,
``~/reset`` and the diagnostics work as in a process of its own.

Service ``~/reset`` (std_srvs/Trigger): start over, re-initializing at the odom origin from the next IMU
sample and joint state (e.g. after a simulator respawned the robot between evaluation trials).

Bad input: an IMU sample with NaN/Inf, or a joint state with missing joints, wrong lengths or non-finite
values, is dropped and counted; the filter keeps running on the other stream. When joint states stop, the
IMU alone propagates and ``/odom`` keeps coming at the IMU rate with the covariance growing (no kinematic
update); when the IMU stops, each joint state publishes the last estimate with the covariance grown for
the time without IMU (unknown acceleration).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pinocchio as pin
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import TransformStamped, WrenchStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger

from humanoid_control.estimation.ekf import EstimatorNoise
from humanoid_control.estimation.estimator import BaseEstimate, StateEstimator
from humanoid_control.model.joint_order import JointOrder
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.urdf import BASE_LINK
from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, declare, from_time_msg, run_node, to_time_msg


def _rot_to_quat_wxyz(r: np.ndarray) -> np.ndarray:
    q = pin.Quaternion(r)
    return np.array([q.w, q.x, q.y, q.z])


class StateEstimatorNode(QuietNode):
    """ROS 2 adapter of :class:`StateEstimator`."""

    def __init__(self, in_loop: bool = False, **kwargs: Any) -> None:
        super().__init__("state_estimator", **kwargs)
        self.in_loop = in_loop
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        flat = declare(
            self,
            "flat_ground_std",
            0.01,
            "flat-ground prior: feet in contact are at z = 0 in odom, this std (m); 0 = off (height drifts); "
            "set 0 off flat floors",
            0.0,
            1.0,
        )
        self.publish_tf = declare(
            self, "publish_tf", True, "publish odom -> base_link on /tf (needs tf2_msgs)"
        )
        tf_rate = declare(
            self,
            "tf_rate_hz",
            50.0,
            "most odom -> base_link transforms on /tf per second of estimate time (Hz; 0: every estimate)",
            0.0,
            10000.0,
            read_only=True,
        )
        self._tf_period = 1.0 / tf_rate if tf_rate > 0 else 0.0
        self._tf_last: float | None = None  # stamp of the last transform sent (s)
        self.stale_after = declare(
            self, "stale_after_s", 0.05, "a stream older than this (s) counts as stopped", 0.001, 10.0
        )
        noise = EstimatorNoise(
            gyro=declare(self, "gyro_noise", 0.002, "gyro white noise (rad/s/sqrt(Hz))", 0.0, 1.0),
            accel=declare(self, "accel_noise", 0.02, "accelerometer white noise (m/s^2/sqrt(Hz))", 0.0, 10.0),
            gyro_bias_walk=declare(self, "gyro_bias_walk", 1e-4, "gyro bias walk (rad/s/sqrt(s))", 0.0, 1.0),
            accel_bias_walk=declare(
                self, "accel_bias_walk", 1e-3, "accelerometer bias walk (m/s^2/sqrt(s))", 0.0, 1.0
            ),
            kinematics=declare(self, "kinematics_noise", 0.003, "leg kinematics std (m)", 1e-5, 1.0),
            slip_speed=declare(
                self,
                "slip_speed",
                0.25,
                "a stance sole sliding faster than this is slipping (m/s)",
                0.01,
                10.0,
            ),
            ground_height=flat if flat > 0 else None,
        )
        lockstep = declare(
            self,
            "lockstep",
            False,
            "lockstep peer of the driver: each tick (IMU sample and joint state of one stamp, in that "
            "order) is "
            "acknowledged on /lockstep/ack once its /odom is out",
            read_only=True,
        )
        if in_loop:
            lockstep = False  # called synchronously by the driver's loop: not a peer
        self.config = load_robot_config(robot)
        self.noise = noise
        self.resets = 0
        self.est = StateEstimator(self.config, noise)
        self.names = list(self.config.joint_names)
        self.joint_order = JointOrder(self.names)
        self.imu_dropped = 0
        self.joints_dropped = 0
        self.updates = 0
        self._imu_t: float | None = None
        self._imu_seen_t: float | None = None  # stamp of the last IMU sample received, used or dropped (s)
        self._imu_period = float("inf")  # shortest IMU sample interval seen (s): the sensor's period
        self.imu_missed = 0  # IMU samples that never arrived (stamp steps of several periods, < 0.1 s)
        self._imu_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self._gyro = np.zeros(3)
        self._pending: tuple[float, np.ndarray, np.ndarray, np.ndarray | None, Any] | None = None
        self._last_diag = -1e9
        self._joints_t: float | None = None  # stamp of the last kinematic update (s)
        self.imu_stale_odom = 0  # /odom published from joint states alone (IMU stopped)
        self.imu_only_odom = 0  # /odom published from the IMU alone (joint states stopped)
        self._slip_ticks_reported = np.zeros(2, dtype=int)
        stream = tick_stream_qos()  # per-tick outputs (see lockstep.tick_stream_qos)
        self.pub_odom = self.create_publisher(Odometry, "/odom", stream)
        self.pub_contacts = [
            self.create_publisher(WrenchStamped, f"/contacts/{side}", stream) for side in self.est.kin.sides
        ]
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.pub_tf = None
        if self.publish_tf:
            try:
                from tf2_msgs.msg import TFMessage
            except ImportError:
                self.get_logger().info("tf2_msgs is not installed: no /tf (odom -> base_link) from this node")
            else:
                self._tf_type = TFMessage
                self.pub_tf = self.create_publisher(TFMessage, "/tf", 100)
        # lockstep: deep queues (4 s at 500 Hz), every IMU sample is integrated (transient-local: the first
        # tick reaches this node even when the driver's writers matched it late). Realtime: shallow queues, so
        # a node starved of CPU drops the oldest samples (an IMU gap the filter integrates across) instead of
        # publishing /odom seconds late (measured with 2000-deep queues: 0.2-1.5 s behind the clock)
        queue_depth = declare(
            self,
            "realtime_queue_depth",
            10,
            "realtime: /imu/data and /joint_states samples kept while this node is busy (the oldest are "
            "dropped beyond; lockstep keeps 2000 and drops none)",
            1,
            2000,
            read_only=True,
        )
        streams = tick_stream_qos(2000 if lockstep else queue_depth, latched=lockstep)
        if not in_loop:  # in the loop the driver hands each tick over
            self.create_subscription(Imu, "/imu/data", self._on_imu, streams)
            self.create_subscription(JointState, "/joint_states", self._on_joints, streams)
        self._latest: tuple[float, BaseEstimate] | None = None  # in the loop: the estimate not yet published
        self._to_correct: tuple[Any, ...] | None = None  # in the loop: the tick's kinematic update, pending
        # in the loop: the latest estimate, for the diagnostics
        self._diag_estimate: tuple[float, BaseEstimate] | None = None
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.peer = LockstepPeer(self, lockstep)

    def _on_reset(self, _req: Any, resp: Any) -> Any:
        self.est = StateEstimator(self.config, self.noise)
        self._latest = None
        self._imu_t = None
        self._pending = None
        self._joints_t = None
        self._tf_last = None
        self._slip_ticks_reported = np.zeros(2, dtype=int)
        self.resets += 1
        self.get_logger().info("reset: re-initializing from the next IMU sample and joint state")
        resp.success, resp.message = True, "re-initializing from the next IMU sample and joint state"
        return resp

    def _on_imu(self, msg: Imu) -> None:
        g, a, o = msg.angular_velocity, msg.linear_acceleration, msg.orientation
        gyro, accel = np.array([g.x, g.y, g.z]), np.array([a.x, a.y, a.z])
        quat = np.array([o.w, o.x, o.y, o.z])
        t = from_time_msg(msg.header.stamp)
        self._count_missed(t)
        if not (np.all(np.isfinite(gyro)) and np.all(np.isfinite(accel))):
            self.imu_dropped += 1
            self.get_logger().warning(
                "dropped an IMU sample with non-finite values", throttle_duration_sec=1.0
            )
            if self._imu_t is not None:  # its tick's joint state must not wait for a sample that won't come
                self._flush_pending(t)
            return
        if np.all(np.isfinite(quat)) and abs(np.linalg.norm(quat) - 1.0) < 0.1:
            self._imu_quat = quat
        self._gyro = gyro
        self.est.predict(t, gyro, accel)
        self._imu_t = t
        if not self._flush_pending(t) and (
            self.est.initialized and (self._joints_t is None or t - self._joints_t > self.stale_after)
        ):
            # joint states stopped: the IMU alone carries the estimate on, its covariance growing
            self.imu_only_odom += 1
            self._publish(t, msg.header.stamp, self.est.estimate(t, gyro))

    def _count_missed(self, t: float) -> None:
        """Count the IMU samples skipped before the one stamped ``t`` (s): in realtime a node starved of CPU
        loses the oldest queued samples (see ``realtime_queue_depth``); the filter integrates across the step.
        Outages over 0.1 s are the estimator's ``imu_gaps`` instead; samples received and dropped (non-finite)
        are ``imu_dropped``, not missed."""
        last, self._imu_seen_t = self._imu_seen_t, t
        if last is None:
            return
        dt = t - last
        if dt <= 0.0:
            return
        if dt < self._imu_period:
            self._imu_period = dt
        elif dt <= 0.1 and dt > 1.5 * self._imu_period:
            self.imu_missed += round(dt / self._imu_period) - 1

    def _flush_pending(self, t: float) -> bool:
        """Correct with the joint state waiting for the IMU to reach its stamp, once it has (``t``, s)."""
        if self._pending is None or self._pending[0] > t + 1e-9:
            return False
        pending, self._pending = self._pending, None
        self._correct(*pending)
        self.peer.ack(pending[4])
        return True

    def _on_joints(self, msg: JointState) -> None:
        if self._handle_joints(msg):
            self.peer.ack(msg.header.stamp)

    def _handle_joints(self, msg: JointState) -> bool:
        """Use or drop a joint state (True), or keep it until the IMU reaches its stamp (False)."""
        n = len(msg.name)
        if self.joint_order.missing(msg.name):
            self.joints_dropped += 1
            self.get_logger().warning("dropped /joint_states with missing joints", throttle_duration_sec=1.0)
            return True
        if len(msg.position) != n or len(msg.effort) != n:
            self.joints_dropped += 1
            return True
        q, tau = self.joint_order.take(msg.position), self.joint_order.take(msg.effort)
        dq = self.joint_order.take(msg.velocity) if len(msg.velocity) == n else None
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(tau))) or (
            dq is not None and not np.all(np.isfinite(dq))
        ):
            self.joints_dropped += 1
            self.get_logger().warning(
                "dropped /joint_states with non-finite values", throttle_duration_sec=1.0
            )
            return True
        t = from_time_msg(msg.header.stamp)
        if self._imu_t is None:  # no IMU yet: wait for it (the driver sends both every tick)
            self._pending = (t, q, tau, dq, msg.header.stamp)
            return False
        if self._imu_t >= t - 1e-9:
            self._correct(t, q, tau, dq, msg.header.stamp)
        elif t - self._imu_t > self.stale_after:
            # the IMU stopped: no propagation, so no correction either; the last estimate goes out with its
            # covariance grown for the time without IMU (unknown acceleration, about 1 m/s^2)
            self.imu_stale_odom += 1
            self._pending = None
            e = self.est.estimate(t, self._gyro)
            gap = t - self._imu_t
            e.covariance[:3, :3] += np.eye(3) * 0.25 * gap**4
            e.covariance[3:, 3:] += np.eye(3) * (self.est.ekf.noise.gyro**2) * gap
            self._publish(t, msg.header.stamp, e)
        else:
            self._pending = (t, q, tau, dq, msg.header.stamp)
            return False
        return True

    def _correct(self, t: float, q: np.ndarray, tau: np.ndarray, dq: np.ndarray | None, stamp: Any) -> None:
        if not self.est.initialized:  # first joint state with the IMU at its stamp
            self.est.initialize(self._imu_t, self._imu_quat, q)
        self.est.correct(q, tau, dq, self._gyro)
        self.updates += 1
        self._joints_t = t
        self._publish(t, stamp, self.est.estimate(t, self._gyro))

    def _publish(self, t: float, stamp: Any, e: BaseEstimate) -> None:
        odom = Odometry()
        odom.header.stamp = stamp
        odom.header.frame_id = "odom"
        odom.child_frame_id = BASE_LINK  # REP-105; the base body's frame (base_link -> base body: identity)
        p = odom.pose.pose.position
        p.x, p.y, p.z = e.position.tolist()
        o = odom.pose.pose.orientation
        o.w, o.x, o.y, o.z = _rot_to_quat_wxyz(e.rotation).tolist()
        odom.pose.covariance = e.covariance.reshape(-1).tolist()
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        lin.x, lin.y, lin.z = e.linear_velocity.tolist()
        ang.x, ang.y, ang.z = e.angular_velocity.tolist()
        self.pub_odom.publish(odom)
        if self.pub_tf is not None and self._tf_due(t):
            tf = TransformStamped()
            tf.header = odom.header
            tf.child_frame_id = odom.child_frame_id
            tr = tf.transform.translation
            tr.x, tr.y, tr.z = p.x, p.y, p.z
            tf.transform.rotation = o
            self.pub_tf.publish(self._tf_type(transforms=[tf]))
        for i, pub in enumerate(self.pub_contacts):
            w = WrenchStamped()
            w.header.stamp = stamp
            w.header.frame_id = "odom"
            f = e.forces[i] if e.contact[i] else np.zeros(3)
            w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(v) for v in f)
            pub.publish(w)
        if not self.in_loop and t - self._last_diag >= 1.0:  # in the loop: in_loop_diagnostics
            self._last_diag = t
            self._publish_diagnostics(stamp, e)

    def _tf_due(self, t: float) -> bool:
        """One transform per ``tf_rate_hz`` period of estimate time ``t`` (s); time going back restarts."""
        last = self._tf_last
        if last is not None and last <= t < last + self._tf_period - 1e-9:
            return False
        self._tf_last = t
        return True

    def _publish_diagnostics(self, stamp: Any, e: Any) -> None:
        innov = self.est.ekf.last_innovation
        values = {
            "updates": self.updates,
            "contact_left": bool(e.contact[0]),
            "contact_right": bool(e.contact[1]),
            "innovation_left_m": f"{np.linalg.norm(innov[:3]):.4f}",
            "innovation_right_m": f"{np.linalg.norm(innov[3:]):.4f}",
            "position_std_m": f"{np.sqrt(np.trace(e.covariance[:3, :3])):.4f}",
            "imu_dropped": self.imu_dropped,
            "imu_gaps": self.est.gaps,
            "imu_samples_missed": self.imu_missed,
            "joint_states_dropped": self.joints_dropped,
            "odom_without_imu": self.imu_stale_odom,
            "odom_without_joint_states": self.imu_only_odom,
            "slipping_left": bool(self.est.slipping[0]),
            "slipping_right": bool(self.est.slipping[1]),
            "slips_left": int(self.est.slips[0]),
            "slips_right": int(self.est.slips[1]),
            "slip_ticks_left": int(self.est.slip_ticks[0]),
            "slip_ticks_right": int(self.est.slip_ticks[1]),
            "resets": self.resets,
            "gyro_bias": " ".join(f"{v:.4f}" for v in self.est.ekf.x.bg),
        }
        status = DiagnosticStatus(name="state_estimator", hardware_id=self.config.name)
        status.level, status.message = DiagnosticStatus.OK, "running"
        new_slips = self.est.slip_ticks - self._slip_ticks_reported
        self._slip_ticks_reported = self.est.slip_ticks.copy()
        if new_slips.any():
            status.level = DiagnosticStatus.WARN
            status.message = "foot slip: " + ", ".join(
                f"{side} {n} ticks" for side, n in zip(("left", "right"), new_slips, strict=True) if n
            )
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = stamp
        self.pub_diag.publish(msg)

    # ------------------------------------------------------------------ in the driver's loop
    def in_loop_predict(
        self,
        stamp: float,
        gyro: np.ndarray,
        accel: np.ndarray,
        imu_quat: np.ndarray,
        q: np.ndarray,
        tau: np.ndarray,
        dq: np.ndarray | None,
    ) -> BaseEstimate | None:
        """Driver's loop thread, before the controller: this tick's IMU sample and joint state (configuration
        order; s, rad/s, m/s^2, rad, N m) -> the base estimate at ``stamp`` propagated with the IMU sample
        (the filter's prior; the first tick: initialized and corrected). The leg-kinematics update with the
        same joint state follows in :meth:`in_loop_correct`, once the controller's command is written: the
        filter is the same as the separate node's, the controller answers sooner. None for a sample with
        non-finite values (dropped and counted; the caller keeps its last estimate, which ages)."""
        est = self.est  # ~/reset replaces it between ticks
        self._to_correct = None
        # one sum per array: non-finite iff an entry is
        if not math.isfinite(float(gyro.sum() + accel.sum())):
            self.imu_dropped += 1
            return None
        if not math.isfinite(float(q.sum() + tau.sum() + (0.0 if dq is None else dq.sum()))):
            self.joints_dropped += 1
            return None
        norm2 = float(imu_quat @ imu_quat)
        if math.isfinite(norm2) and abs(math.sqrt(norm2) - 1.0) < 0.1:
            self._imu_quat = imu_quat
        self._gyro = gyro
        self._imu_t = stamp
        if not est.initialized:  # the first tick: at the odom origin, the lower sole on the ground
            est.initialize(stamp, self._imu_quat, q)
            self._to_correct = (est, stamp, q, tau, dq, gyro)
            self.in_loop_correct()
            return est.estimate(stamp, gyro)
        est.predict(stamp, gyro, accel)
        self._to_correct = (est, stamp, q, tau, dq, gyro)
        return est.estimate(stamp, gyro)

    def in_loop_correct(self) -> None:
        """Driver's loop thread, after the command is written: the leg-kinematics update of the tick given to
        :meth:`in_loop_predict` (contacts, slip); its posterior estimate is what :meth:`in_loop_publish`
        sends."""
        pending, self._to_correct = self._to_correct, None
        if pending is None:
            return
        est, stamp, q, tau, dq, gyro = pending
        if est is not self.est:
            return  # ~/reset in between
        est.correct(q, tau, dq, gyro)
        self.updates += 1
        self._joints_t = stamp
        self._latest = self._diag_estimate = (stamp, est.estimate(stamp, gyro))

    def in_loop_publish(self) -> None:
        """Driver's loop thread, in its slack: ``/odom``, the contacts and (once a second) the diagnostics of
        the latest estimate (not again if already published)."""
        latest, self._latest = self._latest, None
        if latest is not None:
            t, e = latest
            self._publish(t, to_time_msg(t), e)

    def in_loop_diagnostics(self) -> None:
        """Driver's loop thread, off the critical path, about once a second: this node's ``/diagnostics``."""
        if self._diag_estimate is not None:
            t, e = self._diag_estimate
            self._publish_diagnostics(to_time_msg(t), e)

    def close(self) -> None:
        """Leave the driver's lockstep."""
        self.peer.leave()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack state_estimator``."""
    return run_node(StateEstimatorNode, args, "state_estimator")


if __name__ == "__main__":
    raise SystemExit(main())
