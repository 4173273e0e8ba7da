"""``humanoid-bench policy``: the learned-policy runner's step and inference times and its latency in a graph.

In one process (one core), the policy step over states recorded while walking: ONNX inference alone and the
whole step (us). Across processes (driver and policy runner launched in lockstep, this process observing both
topics): the time (us) from a ``/joint_states`` message to the ``/joint_commands`` answering it (same stamp),
as received here. The keys are described in :mod:`humanoid_bringup.evaluation.bench` (the ``humanoid-bench``
help).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from humanoid_control.model.robot_config import RobotConfig

#: the policy ``humanoid-bench policy`` / ``driver`` run on a robot it was made for (else its default_policy)
BENCH_POLICY = "holosoma/g1_ppo"


def bench_policy_name(policy: str, config: RobotConfig, preferred: str = BENCH_POLICY) -> str:
    """The policy a benchmark or evaluation runs on ``config``'s robot: ``policy`` when given (non-empty);
    else ``preferred`` (the tool's own default) when it is one of the robot's policies
    (``RobotConfig.policies``), else the robot's ``default_policy``. Raises ``ValueError`` naming the robot
    when it has none."""
    if policy:
        return policy
    if preferred in config.policies:
        return preferred
    if not config.default_policy:
        raise ValueError(f"robot {config.name!r} has no default_policy: give --policy")
    return config.default_policy


def bench_policy(policy: str, steps: int, seconds: float, robot: str = "g1") -> dict[str, Any]:
    """In-process step timing and cross-process observation-to-command latency (see module docstring).
    ``policy``: a name or path, or "" for the robot's (:func:`bench_policy_name`); ``robot``: the
    configuration (``config/robots/<robot>.yaml``), launched with ``robot:=``."""
    import threading

    import numpy as np
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_policy.inprocess import run_in_process
    from humanoid_policy.manifest import load_policy
    from humanoid_policy.policy_core import PolicyCore

    config = load_robot_config(robot)
    policy = bench_policy_name(policy, config)
    manifest = load_policy(policy, config)
    # states recorded while walking (same cores, in process), then timed step by step
    log = run_in_process(manifest, config, [("walk", 4.0, (0.5, 0.0, 0.3))])
    core = PolicyCore(manifest, config, threads=1)
    n_states = len(log.step_q)
    infer_us, step_us = [], []
    for k in range(steps):
        i = k % n_states
        t0 = time.perf_counter()
        step = core.step(log.step_q[i], log.step_dq[i], log.step_gyro[i], log.step_quat[i], log.step_cmd[i])
        t1 = time.perf_counter()
        core.infer(step.obs)
        t2 = time.perf_counter()
        step_us.append((t1 - t0) * 1e6)
        infer_us.append((t2 - t1) * 1e6)

    log_dir = Path(tempfile.mkdtemp(prefix="humanoid_bench_policy_"))
    isolated_ros_env(log_dir)
    recv_state: dict[float, float] = {}
    latency: list[tuple[float, float]] = []
    lock = threading.Lock()
    probe = GraphProbe(subscribe_description=False, name="bench_policy")

    def on_state(msg: Any) -> None:
        now = time.perf_counter()
        with lock:
            recv_state[msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec] = now

    def on_command(msg: Any) -> None:
        now = time.perf_counter()
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with lock:
            if t in recv_state:
                latency.append((t, (now - recv_state.pop(t)) * 1e6))

    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    probe.node.create_subscription(JointState, "/joint_states", on_state, qos)
    probe.node.create_subscription(JointState, "/joint_commands", on_command, qos)
    graph = LaunchedGraph(
        {
            "robot": robot,
            "controller": "policy",
            "policy": policy,
            "clock": "lockstep",
            "wait_for_subscribers": "3",  # the runner, the probe and tf_publisher
            "sim_duration_s": f"{seconds + 3.0}",
        },
        log_dir / "launch_policy.log",
    ).start()
    try:
        if graph.wait(seconds * 30 + 120) is None:
            raise RuntimeError(f"benchmark graph did not finish: {graph.log()[-2000:]}")
    finally:
        close_graph(probe, graph)
    if len(latency) < 100:
        raise RuntimeError(f"too few command answers observed ({len(latency)}); see {log_dir}")
    lat = np.array([v for _, v in latency])
    period = 1.0 / manifest.rate_hz
    on_step = np.array([abs(t / period - round(t / period)) < 1e-3 for t, _ in latency])

    def pct(a: Any, q: float) -> float:
        return round(float(np.percentile(a, q)), 1)

    return {
        "benchmark": "policy",
        "robot": robot,
        "policy": manifest.name,
        "onnx": manifest.onnx_path.name,
        "obs_size": manifest.obs_size,
        "steps": steps,
        "inference_us_median": pct(infer_us, 50),
        "inference_us_p99": pct(infer_us, 99),
        "step_us_median": pct(step_us, 50),
        "step_us_p99": pct(step_us, 99),
        "obs_to_command_us_median": pct(lat, 50),
        "obs_to_command_us_p99": pct(lat, 99),
        "obs_to_command_policy_step_us_median": pct(lat[on_step], 50) if on_step.any() else None,
        "obs_to_command_policy_step_us_p99": pct(lat[on_step], 99) if on_step.any() else None,
        "obs_to_command_samples": len(latency),
        "logs": str(log_dir),
    }
