"""State estimator node in the ROS graph (work in progress): /odom from IMU + kinematics tracks the truth."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from humanoid_bringup.graph import GraphProbe, LaunchedGraph

pytestmark = pytest.mark.slow


def test_odom_tracks_ground_truth_while_walking(tmp_path: Path) -> None:
    from geometry_msgs.msg import Twist, WrenchStamped
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    args = {
        "controller": "policy",
        "policy": "holosoma/g1_fastsac",
        "estimator": "true",
        "clock": "lockstep",
        "wait_for_subscribers": "3",
        "sim_duration_s": "60",
    }
    probe = GraphProbe(subscribe_description=False, contacts=False)
    odom: dict[float, np.ndarray] = {}
    contacts: dict[str, list[float]] = {"left": [], "right": []}
    lock = threading.Lock()
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    cmd_pub = probe.node.create_publisher(Twist, "/cmd_vel", 10)

    def on_odom(msg: Odometry) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        tw = msg.twist.twist.linear
        with lock:
            odom[round(t, 4)] = np.array([msg.pose.pose.position.z, tw.x, tw.y])

    def on_joints(msg: JointState) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        tw = Twist()
        tw.linear.x = 0.4 if t > 3.0 else 0.0
        cmd_pub.publish(tw)

    probe.node.create_subscription(Odometry, "/odom", on_odom, qos)
    probe.node.create_subscription(JointState, "/joint_states", on_joints, qos)
    for side in ("left", "right"):
        probe.node.create_subscription(
            WrenchStamped, f"/contacts/{side}", lambda m, s=side: contacts[s].append(m.wrench.force.z), qos
        )
    graph = LaunchedGraph(args, tmp_path / "graph.log")
    try:
        graph.start()
        assert probe.wait_for(lambda d: bool(d.truth_t) and d.truth_t[-1] > 9.0, timeout=120.0), graph.log()[
            -3000:
        ]
        time.sleep(0.5)
    finally:
        graph.stop()
        probe.close()
    with probe.lock:
        truth = {
            round(t, 4): (p[2], tw[0], tw[1])
            for t, p, tw in zip(probe.data.truth_t, probe.data.truth_pos, probe.data.truth_twist, strict=True)
        }
    common = sorted(set(truth) & set(odom))
    assert len(common) > 3000, "odom and ground truth should overlap for most ticks"
    est = np.array([odom[t] for t in common])
    ref = np.array([truth[t] for t in common])
    walking = np.array(common) > 4.0
    vel_rmse = float(np.sqrt(np.mean(np.sum((est[walking, 1:] - ref[walking, 1:]) ** 2, axis=1))))
    print(f"odom vs truth while walking: velocity RMSE {vel_rmse:.4f} m/s over {int(walking.sum())} ticks")
    assert vel_rmse < 0.05, vel_rmse
    assert float(np.max(np.abs(est[:, 0] - ref[:, 0]))) < 0.05
    assert max(contacts["left"]) > 100.0 and min(contacts["left"]) == 0.0  # stance and swing both seen
