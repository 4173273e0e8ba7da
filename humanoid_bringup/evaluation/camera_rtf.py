"""Lockstep real-time factor with the simulated head camera on and off (``humanoid-bench perception``).

Two graphs from ``launch/sim.launch.yaml``, lockstep, separate processes, the learned policy walking in place
(zero velocity command) under its runner: ``camera_off`` (driver, policy runner, state estimator) and
``camera_on`` (the same plus ``perception:=true``: the camera node rendering RGB and depth at ``rate_hz`` and
the perception node detecting markers and building the height map, both lockstep peers). The figure is
simulated seconds per wall second over ``seconds`` of simulated time once the policy runs, measured by an
observer that acknowledges ticks in 0.1 s blocks (so it barely slows the graph).
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env


def _rtf(arguments: dict[str, str], peers: tuple[str, ...], seconds: float, log_dir: Path) -> dict[str, Any]:
    states: list[str] = []
    lock = threading.Lock()

    def setup(node: Any) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        qos = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )

        def on_state(msg: Any) -> None:
            with lock:
                states.append(msg.data)

        node.create_subscription(String, "/policy_runner/state", on_state, qos)

    graph = LaunchedGraph(arguments, log_dir / "graph.log")
    probe = GraphProbe(
        subscribe_description=False,
        name="camera_rtf",
        contacts=False,
        lockstep_peer=True,
        setup=setup,
        ack_period=0.1,
    )
    try:
        graph.start()
        probe.start_graph(peers=peers, running=graph.running, timeout=180.0)
        end = time.monotonic() + 180.0
        while True:
            with lock:
                if states and states[-1] == "run":
                    break
            if time.monotonic() > end or not graph.running():
                raise RuntimeError(f"the policy never ran ({states}); see {graph.log_path}")
            time.sleep(0.05)
        t0 = probe.run_until(probe.sim_time() + 0.5)
        probe.release()
        w0 = time.monotonic()
        t1 = probe.run_until(t0 + seconds, timeout=60.0 * seconds + 60.0)
        wall = time.monotonic() - w0
        probe.release()
    finally:
        close_graph(probe, graph)
    return {
        "sim_s": round(t1 - t0, 3),
        "wall_s": round(wall, 3),
        "realtime_factor": round((t1 - t0) / wall, 4),
    }


def camera_rtf(
    seconds: float = 5.0,
    rate_hz: float = 5.0,
    width: int = 424,
    height: int = 240,
    out_dir: Path | None = None,
    policy: str = "holosoma/g1_ppo",
    robot: str = "g1",
) -> dict[str, Any]:
    """``lockstep_rtf_camera_off`` and ``lockstep_rtf_camera_on`` (simulated s per wall s) and details;
    ``robot``: launched with ``robot:=`` (``policy`` must fit it)."""
    out_dir = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="humanoid_bench_camera_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    isolated_ros_env(out_dir / "ros_logs")
    base = {
        "robot": robot,
        "controller": "policy",
        "policy": policy,
        "estimator": "true",
        "clock": "lockstep",
        "start_paused": "true",
        "sim_duration_s": f"{seconds + 60.0:.1f}",
    }
    off_dir, on_dir = out_dir / "camera_off", out_dir / "camera_on"
    off_dir.mkdir(exist_ok=True)
    on_dir.mkdir(exist_ok=True)
    off = _rtf(base, ("policy_runner", "state_estimator"), seconds, off_dir)
    on_args = dict(
        base,
        perception="true",
        scene="markers",
        camera_rate_hz=f"{rate_hz}",
        camera_width=str(width),
        camera_height=str(height),
    )
    on = _rtf(
        on_args, ("policy_runner", "state_estimator", "camera_node", "perception_node"), seconds, on_dir
    )
    return {
        "lockstep_rtf_camera_off": off["realtime_factor"],
        "lockstep_rtf_camera_on": on["realtime_factor"],
        "camera_rtf": {
            "rate_hz": rate_hz,
            "width": width,
            "height": height,
            "depth_and_height_map": True,
            "camera_off": off,
            "camera_on": on,
        },
    }
