"""Estimator accuracy against simulator truth (work in progress of the state-estimation issue).

:func:`replay` runs :class:`~humanoid_control.state_estimator.StateEstimator` offline over a recorded run
(the same core a node would run; tuning without the simulator), :func:`estimator_metrics` compares it with
the ground truth: ``roll_pitch_rmse_deg``, ``yaw_drift_deg``, ``lin_vel_rmse_mps``, ``xy_drift_pct``,
``height_rmse_m``, ``contact_agreement`` (per foot; truth: normal force above 10 % of body weight).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from humanoid_control.robot_model import quat_wxyz_to_matrix
from humanoid_control.state_estimator import EstimatorNoise, StateEstimator


def _rpy(r: np.ndarray) -> np.ndarray:
    roll = np.arctan2(r[2, 1], r[2, 2])
    pitch = -np.arcsin(np.clip(r[2, 0], -1.0, 1.0))
    yaw = np.arctan2(r[1, 0], r[0, 0])
    return np.array([roll, pitch, yaw])


def replay(log: Any, config: Any, noise: EstimatorNoise | None = None) -> dict[str, np.ndarray]:
    """Run the estimator over a log of :func:`humanoid_policy.inprocess.run_in_process` (recorded sensors)."""
    est = StateEstimator(config, noise)
    out: dict[str, list[Any]] = {"pos": [], "rot": [], "vel": [], "contact": []}
    for k in range(len(log.imu_gyro)):
        dq = log.joint_dq[k] if getattr(log, "joint_dq", None) else None
        e = est.step(
            log.t[k], log.imu_gyro[k], log.imu_accel[k], log.joint_q[k], log.joint_tau[k], log.imu_quat[k], dq
        )
        out["pos"].append(e.position)
        out["rot"].append(e.rotation)
        out["vel"].append(e.linear_velocity)
        out["contact"].append(e.contact)
    return {k: np.array(v) for k, v in out.items()}


def estimator_metrics(log: Any, est: dict[str, np.ndarray], weight_n: float) -> dict[str, Any]:
    """Compare an estimate (from :func:`replay`) with the log's ground truth (see module docstring)."""
    n = len(est["pos"])
    rot_true = np.array([quat_wxyz_to_matrix(q) for q in log.base_quat[:n]])
    pos_true = np.array(log.base_pos[:n])
    vel_true = np.array(log.lin_vel_body[:n])
    # the estimate starts at the origin with zero yaw: express the truth in that frame
    yaw0 = _rpy(rot_true[0])[2]
    c, s = np.cos(-yaw0), np.sin(-yaw0)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    pos_t = (pos_true - pos_true[0] * np.array([1.0, 1.0, 0.0])) @ rz.T
    est = dict(est)
    est["pos"] = est["pos"] - est["pos"][0] * np.array([1.0, 1.0, 0.0])  # both start at the xy origin
    rpy_t = np.array([_rpy(rz @ r) for r in rot_true])
    rpy_e = np.array([_rpy(r) for r in est["rot"]])
    rp_err = np.degrees(rpy_e[:, :2] - rpy_t[:, :2])
    yaw_err = np.degrees(np.unwrap(rpy_e[:, 2]) - np.unwrap(rpy_t[:, 2]))
    vel_err = np.linalg.norm(est["vel"] - vel_true, axis=1)
    dist = float(np.sum(np.linalg.norm(np.diff(pos_t[:, :2], axis=0), axis=1)))
    xy_drift = float(np.linalg.norm(est["pos"][-1, :2] - pos_t[-1, :2]))
    truth_contact = np.array(log.contact_fz[:n]) > 0.1 * weight_n
    agree = (est["contact"] == truth_contact).mean(axis=0)
    return {
        "roll_pitch_rmse_deg": round(float(np.sqrt(np.mean(rp_err**2))), 4),
        "yaw_drift_deg": round(float(yaw_err[-1] - yaw_err[0]), 4),
        "lin_vel_rmse_mps": round(float(np.sqrt(np.mean(vel_err**2))), 4),
        "xy_drift_m": round(xy_drift, 4),
        "xy_drift_pct": round(100.0 * xy_drift / dist, 3) if dist > 0.05 else None,
        "distance_m": round(dist, 3),
        "height_rmse_m": round(float(np.sqrt(np.mean((est["pos"][:, 2] - pos_t[:, 2]) ** 2))), 4),
        "contact_agreement": {"left": round(float(agree[0]), 4), "right": round(float(agree[1]), 4)},
    }


# 60 s of walking for the estimator evaluation: (segment, duration s, (vx, vy, wz))
ESTIMATOR_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 5.0, (0.0, 0.0, 0.0)),
    ("forward", 10.0, (0.5, 0.0, 0.0)),
    ("turn", 8.0, (0.0, 0.0, 0.5)),
    ("lateral", 8.0, (0.0, 0.3, 0.0)),
    ("backward", 8.0, (-0.3, 0.0, 0.0)),
    ("arc", 15.0, (0.4, 0.0, 0.3)),
    ("stop", 6.0, (0.0, 0.0, 0.0)),
]


class _Log:
    """Truth arrays in the layout :func:`estimator_metrics` reads."""

    def __init__(self, quat: list[Any], pos: list[Any], vel: list[Any], fz: list[Any]) -> None:
        self.base_quat, self.base_pos, self.lin_vel_body, self.contact_fz = quat, pos, vel, fz


def run_estimator_eval(
    out_dir: Any,
    policy: str = "holosoma/g1_fastsac",
    imu_noise: str = "mems",
    flat_ground_std: float = 0.0,
    script: list[tuple[str, float, tuple[float, float, float]]] | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Walk ``script`` through the ROS graph (driver, policy, estimator; lockstep) and score ``/odom``."""
    import threading
    import time
    from pathlib import Path

    from geometry_msgs.msg import Twist, WrenchStamped
    from nav_msgs.msg import Odometry
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from humanoid_bringup.graph import GraphProbe, LaunchedGraph, isolated_ros_env
    from humanoid_policy.inprocess import command_at

    script = script or ESTIMATOR_SCRIPT
    total = sum(d for _, d, _ in script)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    isolated_ros_env(out_dir / "ros_logs")
    probe = GraphProbe(subscribe_description=False, name="estimator_eval")
    lock = threading.Lock()
    odom: dict[float, tuple[Any, ...]] = {}
    est_fz: dict[str, dict[float, float]] = {"left": {}, "right": {}}
    state: dict[str, Any] = {"t0": None, "runner": [], "last": 0.0}
    qos = QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE)
    cmd_pub = probe.node.create_publisher(Twist, "/cmd_vel", 10)

    def key(m: Any) -> float:
        return round(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, 4)

    def on_odom(m: Any) -> None:
        p, o, v = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist.linear
        with lock:
            odom[key(m)] = ((p.x, p.y, p.z), (o.w, o.x, o.y, o.z), (v.x, v.y, v.z))

    def on_joints(m: Any) -> None:
        t = key(m)
        with lock:
            if state["t0"] is None and state["runner"] and state["runner"][-1] == "run":
                state["t0"] = t
            t0 = state["t0"]
            state["last"] = t
        if round(t * 1000) % 10 == 0:
            tw = Twist()
            tw.linear.x, tw.linear.y, tw.angular.z = (
                command_at(script, t - t0) if t0 is not None else (0, 0, 0)
            )
            cmd_pub.publish(tw)

    probe.node.create_subscription(Odometry, "/odom", on_odom, qos)
    probe.node.create_subscription(JointState, "/joint_states", on_joints, qos)
    latched = QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    probe.node.create_subscription(
        String, "/policy_runner/state", lambda m: state["runner"].append(m.data), latched
    )
    for side in ("left", "right"):
        probe.node.create_subscription(
            WrenchStamped,
            f"/contacts/{side}",
            lambda m, s=side: est_fz[s].__setitem__(key(m), m.wrench.force.z),
            qos,
        )
    args = {
        "controller": "policy",
        "policy": policy,
        "estimator": "true",
        "imu_noise": imu_noise,
        "estimator_flat_ground_std": f"{flat_ground_std}",
        "clock": "lockstep",
        "wait_for_subscribers": "3",
        "sim_duration_s": f"{total + 60.0:.1f}",
    }
    graph = LaunchedGraph(args, out_dir / "graph.log")
    fell = False
    try:
        graph.start()
        deadline = time.monotonic() + 60 * total + 120
        while graph.running() and time.monotonic() < deadline:
            with lock:
                t0, last = state["t0"], state["last"]
            if t0 is not None and last - t0 >= total:
                break
            with probe.lock:
                if probe.data.truth_pos and probe.data.truth_pos[-1][2] < 0.45:
                    fell = True
                    break
            time.sleep(0.05)
    finally:
        graph.stop()
        probe.close()
    if state["t0"] is None:
        raise RuntimeError(f"the policy never started; see {out_dir / 'graph.log'}")
    with probe.lock:
        truth = {
            round(t, 4): (p, q, tw[:3])
            for t, p, q, tw in zip(
                probe.data.truth_t,
                probe.data.truth_pos,
                probe.data.truth_quat_wxyz,
                probe.data.truth_twist,
                strict=True,
            )
        }
        sim_fz = {s: {round(t, 4): f for t, f in v} for s, v in probe.data.contact_fz.items()}
    t0 = state["t0"]
    stamps = [
        t
        for t in sorted(set(truth) & set(odom))
        if t >= t0 - 1e-9 and t <= t0 + total and all(t in sim_fz[s] and t in est_fz[s] for s in sim_fz)
    ]
    if len(stamps) < 100:
        raise RuntimeError(f"too few matched samples ({len(stamps)}); see {out_dir}")
    from humanoid_control.robot_config import load_robot_config
    from humanoid_control.robot_model import load_mujoco_model

    config = load_robot_config("g1")
    weight = float(load_mujoco_model(config, scene=False).model.body_subtreemass[1] * 9.81)
    truth_log = _Log(
        [truth[t][1] for t in stamps],
        [truth[t][0] for t in stamps],
        [truth[t][2] for t in stamps],
        [np.array([sim_fz["left"][t], sim_fz["right"][t]]) for t in stamps],
    )
    est = {
        "pos": np.array([odom[t][0] for t in stamps]),
        "rot": np.array([quat_wxyz_to_matrix(np.array(odom[t][1])) for t in stamps]),
        "vel": np.array([odom[t][2] for t in stamps]),
        "contact": np.array([[est_fz["left"][t] > 0.0, est_fz["right"][t] > 0.0] for t in stamps]),
    }
    result: dict[str, Any] = {
        "evaluation": "estimator",
        "policy": policy,
        "imu_noise": imu_noise,
        "flat_ground_std": flat_ground_std,
        "fell": fell,
    }
    result.update(estimator_metrics(truth_log, est, weight))
    stand_s = script[0][1] if script[0][2] == (0.0, 0.0, 0.0) else 0.0
    rel = np.array(stamps) - t0
    standing = rel <= stand_s
    if standing.sum() > 1:
        pos_e = est["pos"][standing, :2] - est["pos"][0, :2]
        pos_t = np.array(truth_log.base_pos)[standing, :2] - np.array(truth_log.base_pos)[0, :2]
        result["standing_xy_drift_m"] = round(float(np.linalg.norm(pos_e[-1] - pos_t[-1])), 4)
        result["standing_s"] = stand_s
    result["samples"] = len(stamps)
    result["duration_s"] = round(float(rel[-1]), 3)
    return result
