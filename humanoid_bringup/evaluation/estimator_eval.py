"""Estimator accuracy against simulator truth (work in progress of the state-estimation issue).

:func:`replay` runs :class:`~humanoid_control.estimation.estimator.StateEstimator` offline over a
recorded run (the same core a node would run; tuning without the simulator), :func:`estimator_metrics`
compares it with the ground truth: ``roll_pitch_rmse_deg``, ``yaw_drift_deg``, ``lin_vel_rmse_mps``,
``xy_drift_pct``, ``height_rmse_m``, ``contact_agreement`` (per foot; truth: normal force above 10 % of
body weight).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_control.estimation.ekf import EstimatorNoise
from humanoid_control.estimation.estimator import StateEstimator
from humanoid_control.model.robot_model import quat_wxyz_to_matrix


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
    # express the truth in the estimate's frame at the first sample: same xy origin, same heading (the odom
    # frame starts at zero heading; a window later in a run starts wherever the estimate is)
    yaw_offset = _rpy(est["rot"][0])[2] - _rpy(rot_true[0])[2]
    c, s = np.cos(yaw_offset), np.sin(yaw_offset)
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


# low-friction patch of the evaluation: across the script's forward walk (m, world), friction 0.28 (the feet
# touch down on it and skid; lower friction, or the patch under the turn in place, and the walking policy
# falls in some runs; docs/estimator.md)
DEFAULT_PATCH = "1.5,3.0,-1.0,1.0,0.28"

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

    def window(self, mask: np.ndarray) -> _Log:
        idx = np.flatnonzero(mask)
        return _Log(
            *(
                [v[i] for i in idx]
                for v in (self.base_quat, self.base_pos, self.lin_vel_body, self.contact_fz)
            )
        )


@dataclass
class GraphRun:
    """One run of the graph, matched by stamp: truth (``truth``), ``/odom`` (``est``), last diagnostics."""

    t: np.ndarray  # s since the policy started
    truth: _Log
    est: dict[str, np.ndarray]
    diagnostics: dict[str, str]
    fell: bool
    graph_log: Path
    slip_series: np.ndarray  # (stamp s since start, slip ticks both feet so far) of each diagnostics message

    def window(self, t0: float, t1: float) -> tuple[_Log, dict[str, np.ndarray]]:
        mask = (self.t >= t0 - 1e-9) & (self.t <= t1 + 1e-9)
        return self.truth.window(mask), {k: v[mask] for k, v in self.est.items()}


def run_graph(
    out_dir: Path,
    script: list[tuple[str, float, tuple[float, float, float]]],
    policy: str,
    launch_args: dict[str, str],
) -> GraphRun:
    """Walk ``script`` through the ROS graph (driver, policy runner, estimator; lockstep); record by stamp."""
    import threading
    import time

    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from nav_msgs.msg import Odometry

    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
    from humanoid_bringup.evaluation.script_source import ScriptSource
    from humanoid_control.ros.lockstep import tick_stream_qos

    total = sum(d for _, d, _ in script)
    out_dir.mkdir(parents=True, exist_ok=True)
    isolated_ros_env(out_dir / "ros_logs")
    lock = threading.Lock()
    odom: dict[float, tuple[Any, ...]] = {}
    est_fz: dict[str, dict[float, float]] = {"left": {}, "right": {}}
    state: dict[str, Any] = {"diag": {}, "diag_series": []}
    source = ScriptSource(script, stamp_digits=4)  # stamps keyed as below

    def key(m: Any) -> float:
        return round(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, 4)

    def on_odom(m: Any) -> None:
        p, o, v = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist.linear
        with lock:
            odom[key(m)] = ((p.x, p.y, p.z), (o.w, o.x, o.y, o.z), (v.x, v.y, v.z))

    def on_diag(m: Any) -> None:
        for st in m.status:
            if st.name == "state_estimator":
                values = {kv.key: kv.value for kv in st.values}
                with lock:
                    state["diag"] = values
                    state["diag_series"].append((key(m), sum(_slip_ticks(values))))

    def setup(node: Any) -> None:
        source.setup(node)  # before the probe's /joint_states: the script starts at the same tick every run
        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)

    probe = GraphProbe(
        subscribe_description=False,
        name="estimator_eval",
        lockstep_peer=True,
        on_tick=source.on_tick,
        setup=setup,
    )
    source.probe = probe
    # per tick: the probe acknowledges a tick (and run_until holds it) only once these have it too
    stream = tick_stream_qos(2000)  # per-tick streams, read as a lockstep peer (transient-local)
    probe.subscribe(Odometry, "/odom", on_odom, stream, per_tick=True)
    for side in ("left", "right"):
        probe.subscribe(
            WrenchStamped,
            f"/contacts/{side}",
            lambda m, s=side: est_fz[s].__setitem__(key(m), m.wrench.force.z),
            stream,
            per_tick=True,
        )
    args = {
        "controller": "policy",
        "policy": policy,
        "estimator": "true",
        "clock": "lockstep",
        "start_paused": "true",
        "sim_duration_s": f"{total + 60.0:.1f}",
    }
    args.update(launch_args)
    graph = LaunchedGraph(args, out_dir / "graph.log")
    fell = False
    try:
        graph.start()
        probe.start_graph(peers=("policy_runner", "state_estimator"), running=graph.running)
        deadline = time.monotonic() + 60 * total + 120
        while graph.running() and time.monotonic() < deadline:
            with source.lock:
                t0 = source.t0
            if t0 is not None:
                break
            time.sleep(0.05)
        if source.t0 is not None:
            # the whole script, held at its end: every /odom, contact and diagnostics message of it is in
            probe.run_until(source.t0 + total + 0.01, timeout=60 * total + 120)
            with probe.lock:
                fell = bool(probe.data.truth_pos) and min(p[2] for p in probe.data.truth_pos) < 0.45
    finally:
        close_graph(probe, graph)
    if source.t0 is None:
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
    t0 = source.t0
    stamps = [
        t
        for t in sorted(set(truth) & set(odom))
        if t >= t0 - 1e-9 and t <= t0 + total and all(t in sim_fz[s] and t in est_fz[s] for s in sim_fz)
    ]
    if len(stamps) < 100:
        raise RuntimeError(f"too few matched samples ({len(stamps)}); see {out_dir}")
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
    series = np.array(state["diag_series"]).reshape(-1, 2) - np.array([t0, 0.0])
    run = GraphRun(
        np.array(stamps) - t0, truth_log, est, dict(state["diag"]), fell, out_dir / "graph.log", series
    )
    np.savez_compressed(  # for offline analysis
        out_dir / "run.npz",
        t=run.t,
        truth_pos=np.array(truth_log.base_pos),
        truth_quat_wxyz=np.array(truth_log.base_quat),
        truth_vel_body=np.array(truth_log.lin_vel_body),
        truth_fz=np.array(truth_log.contact_fz),
        **{f"est_{k}": v for k, v in est.items()},
    )
    return run


def body_weight(config: Any) -> float:
    """Robot weight (N) from the MuJoCo model."""
    from humanoid_control.model.robot_model import load_mujoco_model

    model = load_mujoco_model(config, scene=False).model
    return float(model.body_subtreemass[1] * 9.81)


_DIAG_KEYS = ("updates", "imu_dropped", "imu_gaps", "imu_samples_missed", "joint_states_dropped", "gyro_bias")


def _slip_ticks(diag: dict[str, str]) -> list[int]:
    return [int(diag.get(f"slip_ticks_{side}", 0)) for side in ("left", "right")]


def run_estimator_eval(
    out_dir: Any,
    policy: str = "",
    imu_noise: str = "mems",
    flat_ground_std: float = 0.01,
    script: list[tuple[str, float, tuple[float, float, float]]] | None = None,
    stand_s: float = 60.0,
    friction_patch: str | None = DEFAULT_PATCH,
    log: Any = print,
    patch_script: list[tuple[str, float, tuple[float, float, float]]] | None = None,
    robot: str = "g1",
) -> dict[str, Any]:
    """The estimator evaluation (module docstring): standing, walking, and walking over a slippery patch.

    ``robot``: the configuration (``config/robots/<robot>.yaml``), launched with ``robot:=``; ``policy``: the
    walking policy, "" for holosoma fastsac on the G1, else the robot's ``default_policy``
    (:func:`.policy_bench.bench_policy_name`).

    Run 1 stands ``stand_s`` s, then walks ``script``; run 2 (if ``friction_patch``) walks ``patch_script``
    (default: ``script``) with a low-friction patch ``"x_min,x_max,y_min,y_max,friction"`` on the floor.
    Writes plots to ``out_dir``.
    """
    from pathlib import Path

    from humanoid_bringup.evaluation.policy_bench import bench_policy_name
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.model.robot_model import FrictionPatch

    script = script or ESTIMATOR_SCRIPT
    walk_s = sum(d for _, d, _ in script)
    out_dir = Path(out_dir)
    config = load_robot_config(robot)
    policy = bench_policy_name(policy, config, "holosoma/g1_fastsac")
    weight = body_weight(config)
    common = {"robot": robot, "imu_noise": imu_noise, "estimator_flat_ground_std": f"{flat_ground_std}"}
    full = [("stand_long", stand_s, (0.0, 0.0, 0.0)), *script] if stand_s > 0 else list(script)
    log(f"estimator evaluation: {stand_s:.0f} s standing, then {walk_s:.0f} s walking (lockstep graph)")
    run = run_graph(out_dir / "walk", full, policy, common)
    result: dict[str, Any] = {
        "evaluation": "estimator",
        "robot": robot,
        "policy": policy,
        "imu_noise": imu_noise,
        "flat_ground_std": flat_ground_std,
        "fell": run.fell,
    }
    truth_w, est_w = run.window(stand_s, stand_s + walk_s)
    result.update(estimator_metrics(truth_w, est_w, weight))
    result["walk_s"] = round(walk_s, 3)
    if stand_s > 0:
        truth_s, est_s = run.window(0.0, stand_s)
        d_est = est_s["pos"][:, :2] - est_s["pos"][0, :2]
        d_true = np.array(truth_s.base_pos)[:, :2] - np.array(truth_s.base_pos)[0, :2]
        err = np.linalg.norm(d_est - d_true, axis=1)
        result["standing_xy_drift_m"] = round(float(err[-1]), 4)
        result["standing_xy_drift_max_m"] = round(float(err.max()), 4)
        result["standing_s"] = stand_s
        result["standing"] = estimator_metrics(truth_s, est_s, weight)
    result["slip_ticks"] = _slip_ticks(run.diagnostics)
    result["diagnostics"] = {k: run.diagnostics.get(k) for k in _DIAG_KEYS}
    result["samples"] = len(run.t)
    plot_estimator(out_dir / "estimator_walk.png", run, stand_s, "standing then walking")
    if friction_patch:
        patch = FrictionPatch.parse(friction_patch)
        assert patch is not None
        patch_walk = list(patch_script or script)
        patch_s = sum(d for _, d, _ in patch_walk)
        log(f"estimator evaluation: {patch_s:.0f} s walking over a friction {patch.friction} patch")
        prun = run_graph(out_dir / "patch", patch_walk, policy, dict(common, friction_patch=friction_patch))
        pos = np.array(prun.truth.base_pos)
        on = np.array([patch.contains(x, y) for x, y in pos[:, :2]])
        # slip ticks per second from the diagnostics (1 Hz): each interval counted on or off the patch by
        # where the robot was in its middle
        rate = {True: [0.0, 0.0], False: [0.0, 0.0]}  # slip ticks, seconds
        for (ta, na), (tb, nb) in itertools.pairwise(prun.slip_series):
            k = int(np.searchsorted(prun.t, 0.5 * (ta + tb)))
            if 0 <= k < len(prun.t) and tb > ta:
                side = bool(on[k])
                rate[side][0] += nb - na
                rate[side][1] += tb - ta
        err = np.linalg.norm(prun.est["vel"] - np.array(prun.truth.lin_vel_body), axis=1)
        result["low_friction_patch"] = {
            "patch": friction_patch,
            "fell": prun.fell,
            "walk_s": round(patch_s, 3),
            "ticks_on_patch": int(on.sum()),
            "lin_vel_rmse_mps_on_patch": round(float(np.sqrt(np.mean(err[on] ** 2))), 4)
            if on.any()
            else None,
            "lin_vel_rmse_mps_off_patch": round(float(np.sqrt(np.mean(err[~on] ** 2))), 4),
            # run 1's walking part: the same walk without the patch unless a patch_script was given (its
            # standing adds few slips)
            "slip_ticks": _slip_ticks(prun.diagnostics),
            "slip_ticks_without_patch": result["slip_ticks"],
            "slips": [int(prun.diagnostics.get(f"slips_{s}", 0)) for s in ("left", "right")],
            "slip_ticks_per_s_on_patch": round(rate[True][0] / rate[True][1], 2) if rate[True][1] else None,
            "slip_ticks_per_s_off_patch": round(rate[False][0] / rate[False][1], 2)
            if rate[False][1]
            else None,
            "diagnostics": {k: prun.diagnostics.get(k) for k in _DIAG_KEYS},
        }
        plot_estimator(
            out_dir / "estimator_patch.png", prun, 0.0, f"walking over a patch ({friction_patch})", patch
        )
    return result


def plot_estimator(path: Path, run: GraphRun, stand_s: float, title: str, patch: Any = None) -> None:
    """Estimate vs truth: xy path, body velocity, height, contacts (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    walk = run.t >= stand_s - 1e-9
    truth, est = run.truth.window(walk), {k: v[walk] for k, v in run.est.items()}
    t = run.t[walk]
    pos_t = np.array(truth.base_pos)
    rot_t = np.array([quat_wxyz_to_matrix(q) for q in truth.base_quat])
    yaw_offset = _rpy(est["rot"][0])[2] - _rpy(rot_t[0])[2]
    c, s = np.cos(yaw_offset), np.sin(yaw_offset)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    aligned = (pos_t - pos_t[0] * np.array([1.0, 1.0, 0.0])) @ rz.T + est["pos"][0] * np.array(
        [1.0, 1.0, 0.0]
    )
    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    ax[0, 0].plot(aligned[:, 0], aligned[:, 1], "k-", label="truth (aligned at start)")
    ax[0, 0].plot(est["pos"][:, 0], est["pos"][:, 1], "r--", label="/odom")
    if patch is not None:
        x0, y0 = np.array([patch.x_min, patch.y_min]) - pos_t[0, :2]
        ax[0, 0].add_patch(
            plt.Rectangle(
                (x0, y0), patch.x_max - patch.x_min, patch.y_max - patch.y_min, color="c", alpha=0.3
            )
        )
    ax[0, 0].set(xlabel="x (m, odom)", ylabel="y (m)", title="path", aspect="equal")
    ax[0, 0].legend()
    vel_t = np.array(truth.lin_vel_body)
    for i, name in enumerate("xyz"):
        ax[0, 1].plot(t, vel_t[:, i], "k-", lw=0.8)
        ax[0, 1].plot(t, est["vel"][:, i], "--", lw=0.8, label=f"v{name} /odom")
    ax[0, 1].set(xlabel="t (s)", ylabel="body velocity (m/s)", title="velocity (black: truth)")
    ax[0, 1].legend()
    ax[1, 0].plot(t, pos_t[:, 2], "k-", label="truth")
    ax[1, 0].plot(t, est["pos"][:, 2], "r--", label="/odom")
    ax[1, 0].set(xlabel="t (s)", ylabel="base height (m)", title="height")
    ax[1, 0].legend()
    fz = np.array(truth.contact_fz)
    k = slice(max(0, len(t) // 2 - 500), len(t) // 2 + 500)
    for i, side in enumerate(("left", "right")):
        ax[1, 1].plot(t[k], (fz[k, i] > 0.1 * 9.81 * 33.0) + 2 * i, "k-", lw=0.8)
        ax[1, 1].plot(t[k], est["contact"][k, i] * 0.8 + 2 * i + 0.1, "r-", lw=0.8, label=f"{side} /contacts")
    ax[1, 1].set(xlabel="t (s)", title="contacts (black: simulator > 10 % weight), 2 s")
    ax[1, 1].legend()
    fig.suptitle(f"state estimator: {title}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
