"""State estimator node (work in progress of the state-estimation issue): IMU + joint states -> ``/odom``.

- subscribes ``/imu/data`` (propagation, every sample) and ``/joint_states`` (leg kinematics and contact
  detection from the measured joint torques, applied once the IMU has reached the joint state's stamp);
  it never reads ``/sim/*``;
- publishes ``/odom`` (nav_msgs/Odometry, ``odom`` -> base body; pose covariance from the filter; twist in
  the base frame), ``/contacts/left`` and ``/contacts/right`` (geometry_msgs/WrenchStamped: estimated ground
  reaction force, odom-aligned axes; force.z = 0 while the foot is not in contact) and ``/diagnostics``
  (contact states, innovation norms, dropped messages).

Service ``~/reset`` (std_srvs/Trigger): start over, re-initializing at the odom origin from the next IMU
sample and joint state (e.g. after a simulator respawned the robot between evaluation trials).

Bad input: an IMU sample with NaN/Inf, or a joint state with missing joints or wrong lengths, is dropped and
counted; the filter keeps running on the other stream, and its covariance keeps growing while kinematic
updates are missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_srvs.srv import Trigger

from humanoid_control.robot_config import load_robot_config
from humanoid_control.ros_utils import declare, from_time_msg, run_node
from humanoid_control.state_estimator import EstimatorNoise, StateEstimator


def _rot_to_quat_wxyz(r: np.ndarray) -> np.ndarray:
    import pinocchio as pin

    q = pin.Quaternion(r)
    return np.array([q.w, q.x, q.y, q.z])


class StateEstimatorNode(Node):
    """ROS 2 adapter of :class:`StateEstimator`."""

    def __init__(self) -> None:
        super().__init__("state_estimator")
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        flat = declare(
            self, "flat_ground_std", 0.0, "flat-ground prior on contact feet (m std); 0 = off", 0.0, 1.0
        )
        noise = EstimatorNoise(
            gyro=declare(self, "gyro_noise", 0.002, "gyro white noise (rad/s/sqrt(Hz))", 0.0, 1.0),
            accel=declare(self, "accel_noise", 0.02, "accelerometer white noise (m/s^2/sqrt(Hz))", 0.0, 10.0),
            gyro_bias_walk=declare(self, "gyro_bias_walk", 1e-4, "gyro bias walk (rad/s/sqrt(s))", 0.0, 1.0),
            accel_bias_walk=declare(
                self, "accel_bias_walk", 1e-3, "accelerometer bias walk (m/s^2/sqrt(s))", 0.0, 1.0
            ),
            kinematics=declare(self, "kinematics_noise", 0.003, "leg kinematics std (m)", 1e-5, 1.0),
            ground_height=flat if flat > 0 else None,
        )
        self.config = load_robot_config(robot)
        self.noise = noise
        self.resets = 0
        self.est = StateEstimator(self.config, noise)
        self.names = list(self.config.joint_names)
        self.imu_dropped = 0
        self.joints_dropped = 0
        self.updates = 0
        self._imu_t: float | None = None
        self._imu_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self._gyro = np.zeros(3)
        self._pending: tuple[float, np.ndarray, np.ndarray, Any] | None = None
        self._last_diag = -1e9
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_odom = self.create_publisher(Odometry, "/odom", reliable)
        self.pub_contacts = [
            self.create_publisher(WrenchStamped, f"/contacts/{side}", reliable) for side in self.est.kin.sides
        ]
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # deep queues: every IMU sample must be integrated, also when this node briefly falls behind
        deep = QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(Imu, "/imu/data", self._on_imu, deep)
        self.create_subscription(JointState, "/joint_states", self._on_joints, deep)
        self.create_service(Trigger, "~/reset", self._on_reset)

    def _on_reset(self, _req: Any, resp: Any) -> Any:
        self.est = StateEstimator(self.config, self.noise)
        self._imu_t = None
        self._pending = None
        self.resets += 1
        self.get_logger().info("reset: re-initializing from the next IMU sample and joint state")
        resp.success, resp.message = True, "re-initializing from the next IMU sample and joint state"
        return resp

    def _on_imu(self, msg: Imu) -> None:
        g, a, o = msg.angular_velocity, msg.linear_acceleration, msg.orientation
        gyro, accel = np.array([g.x, g.y, g.z]), np.array([a.x, a.y, a.z])
        quat = np.array([o.w, o.x, o.y, o.z])
        if not (np.all(np.isfinite(gyro)) and np.all(np.isfinite(accel))):
            self.imu_dropped += 1
            self.get_logger().warning(
                "dropped an IMU sample with non-finite values", throttle_duration_sec=1.0
            )
            return
        t = from_time_msg(msg.header.stamp)
        if np.all(np.isfinite(quat)) and abs(np.linalg.norm(quat) - 1.0) < 0.1:
            self._imu_quat = quat
        self._gyro = gyro
        self.est.predict(t, gyro, accel)
        self._imu_t = t
        if self._pending is not None and self._pending[0] <= t + 1e-9:
            self._correct(*self._pending)
            self._pending = None

    def _on_joints(self, msg: JointState) -> None:
        names = list(msg.name)
        try:
            order = [names.index(n) for n in self.names]
        except ValueError:
            self.joints_dropped += 1
            self.get_logger().warning("dropped /joint_states with missing joints", throttle_duration_sec=1.0)
            return
        if len(msg.position) != len(names) or len(msg.effort) != len(names):
            self.joints_dropped += 1
            return
        q, tau = np.asarray(msg.position)[order], np.asarray(msg.effort)[order]
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(tau))):
            self.joints_dropped += 1
            return
        t = from_time_msg(msg.header.stamp)
        if not self.est.initialized:
            if self._imu_t is None:
                return
            self.est.initialize(self._imu_t, self._imu_quat, q)
        if self._imu_t is not None and self._imu_t >= t - 1e-9:
            self._correct(t, q, tau, msg.header.stamp)
        else:
            self._pending = (t, q, tau, msg.header.stamp)

    def _correct(self, t: float, q: np.ndarray, tau: np.ndarray, stamp: Any) -> None:
        self.est.correct(q, tau)
        self.updates += 1
        e = self.est.estimate(t, self._gyro)
        odom = Odometry()
        odom.header.stamp = stamp
        odom.header.frame_id = "odom"
        odom.child_frame_id = self.config.base_body
        p = odom.pose.pose.position
        p.x, p.y, p.z = e.position.tolist()
        o = odom.pose.pose.orientation
        o.w, o.x, o.y, o.z = _rot_to_quat_wxyz(e.rotation).tolist()
        odom.pose.covariance = e.covariance.reshape(-1).tolist()
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        lin.x, lin.y, lin.z = e.linear_velocity.tolist()
        ang.x, ang.y, ang.z = e.angular_velocity.tolist()
        self.pub_odom.publish(odom)
        for i, pub in enumerate(self.pub_contacts):
            w = WrenchStamped()
            w.header.stamp = stamp
            w.header.frame_id = "odom"
            f = e.forces[i] if e.contact[i] else np.zeros(3)
            w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(v) for v in f)
            pub.publish(w)
        if t - self._last_diag >= 1.0:
            self._last_diag = t
            self._publish_diagnostics(stamp, e)

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
            "joint_states_dropped": self.joints_dropped,
            "resets": self.resets,
            "gyro_bias": " ".join(f"{v:.4f}" for v in self.est.ekf.x.bg),
        }
        status = DiagnosticStatus(name="state_estimator", hardware_id=self.config.name)
        status.level, status.message = DiagnosticStatus.OK, "running"
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = stamp
        self.pub_diag.publish(msg)


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack state_estimator``."""
    return run_node(StateEstimatorNode, args, "state_estimator")


if __name__ == "__main__":
    raise SystemExit(main())
