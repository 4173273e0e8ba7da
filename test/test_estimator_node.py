"""State estimator node, its own process over DDS, fed recorded sensor data (a standing G1 in MuJoCo).

Bad input is dropped and counted while the filter keeps running; IMU samples that never arrive are counted;
when a stream stops, ``/odom`` keeps coming with a growing covariance.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.evaluation.launched_graph import isolated_ros_env

pytestmark = pytest.mark.slow


def _standing_log() -> Any:
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_policy.inprocess import run_in_process
    from humanoid_policy.manifest import load_policy

    robot = load_robot_config("g1")
    return robot, run_in_process(
        load_policy("holosoma/g1_fastsac", robot),
        robot,
        [("stand", 3.0, (0.0, 0.0, 0.0))],
        record_sensors=True,
    )


def _grows(series: np.ndarray) -> bool:
    """Increasing from window to window (a component may dip for a few samples through correlations)."""
    means = [float(np.mean(w)) for w in np.array_split(series, 5)]
    return all(b > a for a, b in itertools.pairwise(means))


def test_bad_input_is_dropped_and_counted_and_covariance_grows_without_data(tmp_path: Path) -> None:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu, JointState

    from humanoid_control.ros.node_utils import to_time_msg

    robot, log = _standing_log()
    env = dict(os.environ, **isolated_ros_env(tmp_path / "ros_logs"))
    out = (tmp_path / "estimator.log").open("w")
    proc = subprocess.Popen(
        # queues deep enough for the feeder's bursts (20 ticks between waits): only skipped samples are lost
        [
            sys.executable,
            "-m",
            "humanoid_control.estimation.state_estimator_node",
            "--ros-args",
            "-p",
            "realtime_queue_depth:=500",
        ],
        env=env,
        stdout=out,
        stderr=out,
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("estimator_feeder", context=context)
    qos = QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE)
    pub_imu = node.create_publisher(Imu, "/imu/data", qos)
    pub_js = node.create_publisher(JointState, "/joint_states", qos)
    lock = threading.Lock()
    odom: list[tuple[float, ...]] = []  # stamp, x position, position variance x, z, speed
    diags: list[dict[str, str]] = []

    def on_odom(m: Odometry) -> None:
        v = m.twist.twist.linear
        with lock:
            odom.append(
                (
                    m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec,
                    m.pose.pose.position.x,
                    m.pose.covariance[0],
                    m.pose.pose.position.z,
                    float(np.linalg.norm([v.x, v.y, v.z])),
                )
            )

    def on_diag(m: DiagnosticArray) -> None:
        for s in m.status:
            if s.name == "state_estimator":
                with lock:
                    diags.append({kv.key: kv.value for kv in s.values})

    node.create_subscription(Odometry, "/odom", on_odom, qos)
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    names = list(robot.joint_names)

    def imu(k: int, nan: bool = False) -> None:
        m = Imu()
        m.header.stamp = to_time_msg(log.t[k])
        g, a, q = log.imu_gyro[k], log.imu_accel[k], log.imu_quat[k]
        m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = (
            (float("nan"), 0.0, 0.0) if nan else (float(v) for v in g)
        )
        m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z = (float(v) for v in a)
        m.orientation.w, m.orientation.x, m.orientation.y, m.orientation.z = (float(v) for v in q)
        pub_imu.publish(m)

    def joints(k: int, drop_joint: bool = False, nan: bool = False) -> None:
        m = JointState()
        m.header.stamp = to_time_msg(log.t[k])
        keep = slice(1, None) if drop_joint else slice(None)
        q = np.array(log.joint_q[k])
        if nan:
            q[3] = float("nan")
        m.name = names[keep]
        m.position = q.tolist()[keep]
        m.velocity = np.asarray(log.joint_dq[k]).tolist()[keep]
        m.effort = np.asarray(log.joint_tau[k]).tolist()[keep]
        pub_js.publish(m)

    def pace(k: int) -> None:
        """Every 20 ticks, wait (bounded) until /odom has caught up to 20 ticks ago: nothing overflows."""
        if k % 20 or k < 20:
            return
        until = time.monotonic() + 2.0
        while time.monotonic() < until:
            with lock:
                if odom and odom[-1][0] >= log.t[k - 20] - 1e-6:
                    return
            time.sleep(0.001)

    try:
        deadline = time.monotonic() + 30.0
        while pub_imu.get_subscription_count() < 1 or pub_js.get_subscription_count() < 1:
            assert time.monotonic() < deadline, (tmp_path / "estimator.log").read_text()
            time.sleep(0.05)
        time.sleep(1.0)  # both directions matched (the node's readers too), so nothing is lost
        n = len(log.t)
        # normal | IMU only (joint states stop) | joint states only (IMU stops) | normal (> 1 s: diagnostics)
        a, b, c = n - 1350, n - 950, n - 700
        for k in range(a):
            if k not in (700, 701, 702):  # three IMU samples never sent: counted as missed
                imu(k, nan=(k == 600))
            joints(k, drop_joint=(k == 610), nan=(k == 620))
            pace(k)
        for k in range(a, b):
            imu(k)
            pace(k)
        for k in range(b, c):
            joints(k)
            pace(k)
        for k in range(c, n):  # both again: the node carries on
            imu(k)
            joints(k)
            pace(k)
        t_end = log.t[n - 1]
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            with lock:
                if odom and odom[-1][0] >= t_end - 1e-6 and diags and int(diags[-1]["imu_dropped"]) >= 1:
                    break
            time.sleep(0.05)
    finally:
        executor.shutdown()
        # the spinning thread out of its wait before the node and the context go (a fresh-clone run once hung
        # here: the spinner busy in rclpy's wait after the shutdown, the main thread waiting for the GIL)
        spinner.join(timeout=10.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        # stopped as the graph runner stops its nodes (LaunchedGraph.stop): SIGINT, a kill after 15 s (once,
        # in a full suite run on a loaded machine, the node had not exited 10 s after a SIGTERM; its outputs,
        # which this test checks, were all in by then)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        out.close()
    text = (tmp_path / "estimator.log").read_text()
    with lock:
        od = np.array(odom)
        last = diags[-1] if diags else {}
    assert last, f"no diagnostics\n{text[-2000:]}"
    assert int(last["imu_dropped"]) == 1, last
    assert int(last["joint_states_dropped"]) == 2, last  # the missing joint and the NaN position
    # three samples skipped; the IMU stop below is an outage (a gap), not missed samples
    assert int(last["imu_samples_missed"]) == 3 and int(last["imu_gaps"]) == 1, last
    assert "non-finite" in text and "missing joints" in text
    t = od[:, 0]
    t_a, t_b, t_c = log.t[a], log.t[b], log.t[c]
    # joint states stopped: /odom from the IMU alone, at its rate, variance growing
    imu_only = od[(t > t_a + 0.1) & (t < t_b - 0.05)]
    assert len(imu_only) > 150 and int(last["odom_without_joint_states"]) > 150
    assert _grows(imu_only[:, 2]) and imu_only[-1, 2] > 2.0 * imu_only[0, 2], imu_only[::20, 2]
    # IMU stopped: each joint state publishes the last estimate with a growing variance
    # (up to 50 ms before the IMU resumes: joint states still queued then are applied at the IMU's time)
    joints_only = od[(t > t_b + 0.1) & (t < t_c - 0.05)]
    assert len(joints_only) > 100 and int(last["odom_without_imu"]) > 100
    assert _grows(joints_only[:, 2]) and joints_only[-1, 2] > 2.0 * joints_only[0, 2], joints_only[::20, 2]
    # the filter kept running through all of it: up to the last tick, standing still at the right height
    assert od[-1, 0] >= log.t[n - 1] - 1e-6
    assert abs(od[-1, 3] - log.base_pos[n - 1][2]) < 0.02, (od[-1, 3], log.base_pos[n - 1][2])
    assert od[-1, 4] < 0.05, od[-1, 4]


def test_in_loop_node_is_the_same_filter_and_drops_bad_samples() -> None:
    """In the driver's loop (with the WBC) the node runs the same filter as its core stepped directly: the
    prior it hands the controller is the IMU-propagated state of the tick, and after ``in_loop_correct`` the
    posterior equals ``StateEstimator.step``'s to round-off; a non-finite sample is dropped and counted and
    the filter goes on."""
    import rclpy

    from humanoid_control.estimation.ekf import EstimatorNoise
    from humanoid_control.estimation.estimator import StateEstimator
    from humanoid_control.estimation.state_estimator_node import StateEstimatorNode

    robot, log = _standing_log()
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = StateEstimatorNode(in_loop=True, context=context, use_global_arguments=False)
        reference = StateEstimator(robot, EstimatorNoise(ground_height=0.01))  # the node's defaults
        n = len(log.t)
        start = None
        for k in range(n):
            args = (log.t[k], log.imu_gyro[k], log.imu_accel[k], log.imu_quat[k], log.joint_q[k])
            if k == n // 2:  # a NaN gyro sample: dropped, nothing estimated, the next tick goes on
                bad = np.array([np.nan, 0.0, 0.0])
                dropped = node.in_loop_predict(args[0], bad, *args[2:], log.joint_tau[k], log.joint_dq[k])
                assert dropped is None
                node.in_loop_correct()
                continue
            prior = node.in_loop_predict(*args, log.joint_tau[k], log.joint_dq[k])
            assert prior is not None
            if k > 0 and k != n // 2 + 1:
                reference.predict(log.t[k], log.imu_gyro[k], log.imu_accel[k])
                expected_prior = reference.estimate(log.t[k], log.imu_gyro[k])
                assert np.allclose(prior.position, expected_prior.position, atol=1e-12)
                reference.correct(log.joint_q[k], log.joint_tau[k], log.joint_dq[k], log.imu_gyro[k])
            elif k == 0:
                reference.initialize(log.t[0], log.imu_quat[0], log.joint_q[0])
                reference.correct(log.joint_q[0], log.joint_tau[0], log.joint_dq[0], log.imu_gyro[0])
            else:  # after the dropped sample: the reference integrates the gap the same way
                reference.predict(log.t[k], log.imu_gyro[k], log.imu_accel[k])
                reference.correct(log.joint_q[k], log.joint_tau[k], log.joint_dq[k], log.imu_gyro[k])
            node.in_loop_correct()
            assert node._latest is not None
            start = node._latest[1].position if start is None else start
            posterior = reference.estimate(log.t[k], log.imu_gyro[k])
            assert np.allclose(node._latest[1].position, posterior.position, atol=1e-12)
            assert np.allclose(node._latest[1].linear_velocity, posterior.linear_velocity, atol=1e-12)
        assert node.imu_dropped == 1 and node.updates == n - 1
        # the estimated horizontal displacement of the base is the true one (the boot ramp moves it ~2 cm)
        moved = node._latest[1].position[:2] - start[:2]
        assert np.linalg.norm(moved - (log.base_pos[-1][:2] - log.base_pos[0][:2])) < 0.005
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
