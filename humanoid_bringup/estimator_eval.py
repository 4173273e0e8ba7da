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
        e = est.step(
            log.t[k], log.imu_gyro[k], log.imu_accel[k], log.joint_q[k], log.joint_tau[k], log.imu_quat[k]
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
