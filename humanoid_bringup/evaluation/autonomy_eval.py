"""``humanoid-eval autonomy``: the marker-approach task through the whole ROS graph, against the truth.

Each run launches ``launch/sim.launch.yaml`` with ``autonomy:=true`` (driver, policy runner walking the
learned policy under the mode manager, state estimator, simulated head camera, perception node, autonomy node;
separate processes, lockstep) in the scene ``autonomy`` (one floor marker, ``config/scenes/autonomy.yaml``),
the robot starting at a seeded pose (driver parameter ``initial_pose``): ``distance`` from the marker, on a
circle within +-25 deg of the marker's front, its heading ``off_deg`` to the left or right of the marker
(seeded), so the marker is out of the camera's view at the start. Once the policy walks, the evaluator calls
``/autonomy_node/start`` at a held tick and waits for ``/autonomy_node/outcome``, lets the robot stand
``settle_s``, and measures the base pose from ``/sim/ground_truth`` (only the evaluator reads it) against the
standoff pose (0.5 m in front of the marker, facing it). The operation record (``/mode_manager/report``) gives
the share of time teleop held the velocity command after autonomy was switched on.

The last line of stdout is one JSON object: ``runs`` (per run ``reached`` (task outcome ``reached`` and within
``position_tolerance_m`` and ``heading_tolerance_deg`` of the standoff pose by ground truth),
``position_error_m``, ``heading_error_deg``, ``teleop_share``, the start pose, the task's own outcome, times),
``reached`` (count), ``criteria``. It is also written to ``autonomy.json``, with ``autonomy_paths.png``
(top view of each run's ground-truth path, first sighting and final pose against the marker and the standoff
pose) and per run ``run_i/`` (``graph.log``, the operation record ``record.json``, the path ``path.json``).

Frames: world (the simulator's, z up); the robot's estimator works in ``odom`` (its start pose), the task in
``odom``, the measurement in world.
"""

from __future__ import annotations

import json
import math
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
from humanoid_perception.autonomy.approach import standoff_pose, wrap

SCENE = "autonomy"
PEERS = (
    "policy_runner",
    "state_estimator",
    "mode_manager",
    "camera_node",
    "perception_node",
    "autonomy_node",
)


def start_poses(
    seed: int, n: int, distance: float, off_deg: float, marker_xy: np.ndarray, front_yaw: float
) -> list[tuple[float, float, float]]:
    """``n`` seeded start poses (x, y, yaw; world): ``distance`` (m) from the marker at ``marker_xy``, within
    +-25 deg of its front direction ``front_yaw`` (rad), heading ``off_deg`` left or right of the marker."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        phi = front_yaw + math.radians(float(rng.uniform(-25.0, 25.0)))
        side = 1.0 if rng.random() < 0.5 else -1.0
        x, y = marker_xy[0] + distance * math.cos(phi), marker_xy[1] + distance * math.sin(phi)
        bearing = math.atan2(marker_xy[1] - y, marker_xy[0] - x)
        out.append(
            (round(float(x), 4), round(float(y), 4), round(wrap(bearing + side * math.radians(off_deg)), 5))
        )
    return out


def teleop_share_after(record: dict[str, Any]) -> tuple[float | None, float | None]:
    """(time autonomy was first switched on (s), share of the time after it with teleop as the velocity
    source), from an operation record's ``events`` and ``duration_s``; (None, None) if never on."""
    events = record.get("events", [])
    t_on = next((e["t"] for e in events if e["kind"] == "autonomy" and e["detail"].get("on")), None)
    if t_on is None:
        return None, None
    t_first = next((e["t"] for e in events), t_on)
    t_end = max([e["t"] for e in events] + [t_first + float(record.get("duration_s", 0.0))])
    source, t_prev, teleop = "none", t_on, 0.0
    for e in events:
        if e["kind"] != "source":
            continue
        if e["t"] <= t_on:
            source = e["detail"].get("new", source)
            continue
        if source == "teleop":
            teleop += e["t"] - t_prev
        source, t_prev = e["detail"].get("new", source), e["t"]
    if source == "teleop":
        teleop += t_end - t_prev
    total = t_end - t_on
    return t_on, (round(teleop / total, 4) if total > 0 else 0.0)


class _Watch:
    """The evaluator's extra subscriptions: the runner's state and the task's outcome (latched)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runner_states: list[str] = []
        self.outcome: dict[str, Any] | None = None
        self.task_states: list[str] = []
        self.cmd_vel: list[tuple[float, float, float]] = []  # /autonomy/cmd_vel, in arrival order
        self.perception_diag: list[tuple[int, str, dict[str, str]]] = []  # (level, message, values)
        self.detections: list[tuple[float, str, str]] = []  # /perception/detections: stamp, status, error

    def setup(self, node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import Twist
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(String, "/policy_runner/state", self._on_runner, latched)
        node.create_subscription(String, "/autonomy_node/outcome", self._on_outcome, latched)
        node.create_subscription(String, "/autonomy_node/state", self._on_task_state, latched)
        node.create_subscription(Twist, "/autonomy/cmd_vel", self._on_cmd, 100)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100)
        node.create_subscription(String, "/perception/detections", self._on_detections, 100)

    def _on_detections(self, msg: Any) -> None:
        det = json.loads(msg.data)
        with self.lock:
            self.detections.append((float(det["stamp"]), det["status"], det.get("error", "")))

    def _on_cmd(self, msg: Any) -> None:
        with self.lock:
            self.cmd_vel.append((msg.linear.x, msg.linear.y, msg.angular.z))

    def _on_diag(self, msg: Any) -> None:
        for st in msg.status:
            if st.name == "perception_node":
                level = st.level if isinstance(st.level, int) else int.from_bytes(st.level, "little")
                with self.lock:
                    self.perception_diag.append((level, st.message, {kv.key: kv.value for kv in st.values}))

    def _on_runner(self, msg: Any) -> None:
        with self.lock:
            self.runner_states.append(msg.data)

    def _on_outcome(self, msg: Any) -> None:
        with self.lock:
            self.outcome = json.loads(msg.data)

    def _on_task_state(self, msg: Any) -> None:
        with self.lock:
            self.task_states.append(json.loads(msg.data).get("phase", ""))


def run_once(
    start: tuple[float, float, float],
    goal: Any,
    out_dir: Path,
    policy: str = "holosoma/g1_ppo",
    camera_rate_hz: float = 5.0,
    size: tuple[int, int] = (424, 240),
    settle_s: float = 1.5,
    position_tolerance_m: float = 0.3,
    heading_tolerance_deg: float = 15.0,
    task_timeout_s: float = 120.0,
    extra_args: dict[str, str] | None = None,
    policy_at_s: float = 2.2,
    start_at_s: float = 3.0,
    on_reached: Any = None,
    log: Any = print,
) -> dict[str, Any]:
    """One run from ``start`` (x, y, yaw; world) to the standoff pose ``goal`` (Pose2D, world): the policy
    is started through ``/mode_manager/run_policy`` at the tick ``policy_at_s`` (the driver holds after its
    2 s boot ramp), the task at the tick ``start_at_s`` (it runs from the next camera frame).

    ``on_reached(probe, graph, watch)`` (tests): called while the tick after the settle is held, once the
    result is measured, before the graph stops; its return value is the result's ``"check"``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    args = {
        "controller": "none",  # the mode manager starts in hold; run_policy comes at a held tick
        "policy": policy,
        "autonomy": "true",
        "scene": SCENE,
        "initial_pose": f"[{start[0]:.4f}, {start[1]:.4f}, {start[2]:.5f}]",
        "clock": "lockstep",
        "start_paused": "true",
        "camera_rate_hz": f"{camera_rate_hz}",
        "camera_width": str(size[0]),
        "camera_height": str(size[1]),
        "camera_depth": "false",  # the task needs no height map
        "sim_duration_s": f"{task_timeout_s + 60.0:.1f}",
    }
    args.update(extra_args or {})
    graph = LaunchedGraph(args, out_dir / "graph.log")
    watch = _Watch()
    probe = GraphProbe(
        subscribe_description=False,
        name="autonomy_eval",
        contacts=False,
        lockstep_peer=True,
        setup=watch.setup,
        ack_period=0.1,
    )
    wall0 = time.monotonic()
    result: dict[str, Any] = {"start_pose": list(start)}
    try:
        graph.start()
        # the policy and the task start at fixed held ticks (the same in every run): run_policy once the
        # driver holds after its 2 s boot ramp, the task once the estimator settled on the walking robot
        probe.start_graph(peers=PEERS, running=graph.running, timeout=180.0, hold_at=policy_at_s)
        probe.run_until(policy_at_s, timeout=600.0)
        deadline = time.monotonic() + 20.0
        while True:  # the mode manager reads the driver's latched mode asynchronously: retry while held
            ok, why = probe.call_trigger("/mode_manager/run_policy", timeout=30.0)
            if ok or "booting" not in why or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if not ok:
            raise RuntimeError(f"/mode_manager/run_policy refused: {why}")
        t_start = probe.run_until(start_at_s, timeout=600.0)
        deadline = time.monotonic() + 10.0  # the runner's latched state is read before the held tick's
        while True:
            with watch.lock:
                states = list(watch.runner_states)
            if states and states[-1] == "run":
                break
            if time.monotonic() > deadline or not graph.running():
                raise RuntimeError(
                    f"the policy does not walk at t = {t_start:.2f} s (runner states {states}); see "
                    f"{graph.log_path}"
                )
            time.sleep(0.05)
        ok, why = probe.call_trigger("/autonomy_node/start", timeout=30.0)
        if not ok:
            raise RuntimeError(f"/autonomy_node/start refused: {why}")
        log(f"  task started at sim t = {t_start:.2f} s")
        sim_wall0 = time.monotonic()
        probe.release()
        end = time.monotonic() + 40.0 * task_timeout_s
        while True:
            with watch.lock:
                outcome = watch.outcome
            if outcome is not None or not graph.running() or time.monotonic() > end:
                break
            time.sleep(0.1)
        if outcome is None:
            raise RuntimeError(f"no task outcome (states {watch.task_states}); see {graph.log_path}")
        t_end = float(outcome.get("t_end") or probe.sim_time())
        t_final = probe.run_until(t_end + settle_s, timeout=600.0)
        sim_wall = time.monotonic() - sim_wall0
        ok, report = probe.call_trigger("/mode_manager/report", timeout=30.0)
        record = json.loads(report) if ok else {}
        with probe.lock:
            pos = np.array(probe.data.truth_pos[-1])
            w, x, y, z = probe.data.truth_quat_wxyz[-1]
            truth_t = np.array(probe.data.truth_t)
            zs = np.array([p[2] for p in probe.data.truth_pos])
            xy = np.array([p[:2] for p in probe.data.truth_pos]).reshape(-1, 2)
        keep = np.searchsorted(truth_t, np.arange(t_start, t_final + 1e-9, 0.1)) if len(truth_t) else []
        keep = np.unique(np.clip(keep, 0, max(len(truth_t) - 1, 0)))
        path = {
            "t": [round(float(truth_t[i]), 3) for i in keep],
            "xy": [[round(float(xy[i, 0]), 4), round(float(xy[i, 1]), 4)] for i in keep],
        }
        (out_dir / "path.json").write_text(json.dumps(path))
        yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
        pos_err = math.hypot(goal.x - pos[0], goal.y - pos[1])
        yaw_err = math.degrees(abs(wrap(goal.yaw - yaw)))
        t_on, teleop_share = teleop_share_after(record)
        (out_dir / "record.json").write_text(json.dumps(record, indent=1))
        result.update(
            {
                "reached": bool(
                    outcome.get("phase") == "reached"
                    and pos_err <= position_tolerance_m
                    and yaw_err <= heading_tolerance_deg
                ),
                "position_error_m": round(pos_err, 4),
                "heading_error_deg": round(yaw_err, 3),
                "teleop_share": teleop_share,
                "task": outcome,
                "final_pose": [round(float(pos[0]), 4), round(float(pos[1]), 4), round(yaw, 5)],
                "autonomy_on_t": t_on,
                "task_duration_s": round(t_end - t_start, 3),
                "measured_at_t": round(t_final, 3),
                "marker_seen_at_start": outcome.get("t_first_seen") is not None
                and float(outcome["t_first_seen"]) <= float(outcome.get("t_start") or 0.0) + 1e-6,
                "fell": bool(len(zs) and zs[truth_t >= t_start].min() < 0.5) if len(zs) else False,
                "record_shares": record.get("shares"),
                "record_counts": record.get("counts"),
                "realtime_factor": round((t_final - t_start) / max(sim_wall, 1e-9), 3),
                "wall_s": round(time.monotonic() - wall0, 1),
            }
        )
        if on_reached is not None:
            result["check"] = on_reached(probe, graph, watch)
    finally:
        close_graph(probe, graph)
    return result


def run_autonomy_eval(
    out_dir: Path | None = None,
    runs: int = 3,
    seed: int = 0,
    distance: float = 3.0,
    off_deg: float = 60.0,
    policy: str = "holosoma/g1_ppo",
    camera_rate_hz: float = 5.0,
    size: tuple[int, int] = (424, 240),
    log: Any = print,
) -> dict[str, Any]:
    """``runs`` seeded runs; the result dictionary (module docstring)."""
    from humanoid_control.hardware.scene import load_scene

    out_dir = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="humanoid_eval_autonomy_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    isolated_ros_env(out_dir / "ros_logs")
    marker = load_scene(SCENE).markers[0]
    goal = standoff_pose(np.array(marker.position), marker.rotation, 0.5)
    front_yaw = goal.yaw + math.pi
    poses = start_poses(seed, runs, distance, off_deg, np.array(marker.position[:2]), front_yaw)
    results = []
    for i, start in enumerate(poses):
        log(f"run {i}: start {start} (marker {distance} m, {off_deg} deg off), goal {goal}")
        try:
            r = run_once(
                start,
                goal,
                out_dir / f"run_{i}",
                policy=policy,
                camera_rate_hz=camera_rate_hz,
                size=size,
                log=log,
            )
        except (RuntimeError, TimeoutError) as exc:
            r = {"start_pose": list(start), "reached": False, "error": str(exc)}
        r["run"] = i
        keys = ("reached", "position_error_m", "heading_error_deg", "teleop_share", "error")
        log(f"run {i}: {json.dumps({k: r.get(k) for k in keys})}")
        results.append(r)
    out = {
        "evaluation": "autonomy",
        "policy": policy,
        "seed": seed,
        "distance_m": distance,
        "off_heading_deg": off_deg,
        "camera": {"rate_hz": camera_rate_hz, "width": size[0], "height": size[1]},
        "standoff_pose_world": [round(goal.x, 4), round(goal.y, 4), round(goal.yaw, 5)],
        "criteria": {"position_error_m": 0.3, "heading_error_deg": 15.0, "teleop_share": 0.0},
        "runs": results,
        "reached": sum(1 for r in results if r.get("reached")),
        "out_dir": str(out_dir),
    }
    (out_dir / "autonomy.json").write_text(json.dumps(out, indent=2))
    plot_paths(out_dir / "autonomy_paths.png", out, np.array(marker.position[:2]), goal)
    return out


def plot_paths(path: Path, out: dict[str, Any], marker_xy: np.ndarray, goal: Any) -> None:
    """``autonomy_paths.png``: top view (world frame, m) of each run's ground-truth base path from the task's
    start (``run_i/path.json``), its start pose, the point of the first sighting and the final pose, with the
    marker and the standoff pose and its 0.3 m tolerance circle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 7))
    ax.add_patch(plt.Circle((goal.x, goal.y), 0.3, color="tab:green", alpha=0.15, label="standoff +-0.3 m"))
    ax.plot(*marker_xy, "ks", ms=10, label="marker")
    gx, gy = 0.3 * math.cos(goal.yaw), 0.3 * math.sin(goal.yaw)
    ax.arrow(goal.x, goal.y, gx, gy, color="tab:green", width=0.02)
    colors = ("tab:blue", "tab:orange", "tab:purple", "tab:red", "tab:brown", "tab:cyan")
    for r in out["runs"]:
        c = colors[int(r["run"]) % len(colors)]
        sx, sy, syaw = r["start_pose"]
        ax.arrow(sx, sy, 0.3 * math.cos(syaw), 0.3 * math.sin(syaw), color=c, width=0.02)
        file = Path(out["out_dir"]) / f"run_{r['run']}" / "path.json"
        label = f"run {r['run']}: " + ("reached" if r.get("reached") else "not reached")
        if file.exists():
            p = json.loads(file.read_text())
            xy = np.array(p["xy"]).reshape(-1, 2)
            ax.plot(xy[:, 0], xy[:, 1], color=c, lw=1.5, label=label)
            seen = (r.get("task") or {}).get("t_first_seen")
            if seen is not None and len(xy):
                i = int(np.clip(np.searchsorted(np.array(p["t"]), float(seen)), 0, len(xy) - 1))
                ax.plot(*xy[i], "o", color=c, mfc="none", ms=10)
        if r.get("final_pose"):
            fx, fy, fyaw = r["final_pose"]
            ax.arrow(fx, fy, 0.2 * math.cos(fyaw), 0.2 * math.sin(fyaw), color=c, width=0.015)
    ax.plot([], [], "o", color="gray", mfc="none", label="first sighting")
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_xlabel("x (m, world)")
    ax.set_ylabel("y (m, world)")
    ax.set_title(f"humanoid-eval autonomy: {out['reached']} of {len(out['runs'])} reached (ground truth)")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
