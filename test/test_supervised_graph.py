"""The supervised controller in the driver's loop through the real ROS graph (launch file, driver, MuJoCo,
state estimator, lockstep): the policy stands the robot, ``/supervisor/state`` is latched with who is in
control, and the driver's diagnostics name the controller."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest


@pytest.mark.slow
def test_supervised_in_the_loop_publishes_its_state(tmp_path: Path) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    isolated_ros_env(tmp_path / "ros")
    states: list[dict[str, Any]] = []
    latched = QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )

    def setup(node: Any) -> None:
        node.create_subscription(
            String, "/supervisor/state", lambda m: states.append(json.loads(m.data)), latched
        )

    probe = GraphProbe(subscribe_description=False, name="supervised_probe", setup=setup, lockstep_peer=True)
    args = {
        "controller": "supervised",
        "in_loop": "true",
        "activation_ticks": "1",
        "start_paused": "true",
        "sim_duration_s": "120",
    }
    graph = LaunchedGraph(args, tmp_path / "graph.log").start()
    try:
        try:
            probe.start_graph(peers=(), running=graph.running)
            probe.run_until(6.0)
        except (TimeoutError, RuntimeError) as exc:
            pytest.fail(f"{exc}\n{graph.log()[-4000:]}")
        diag = probe.diagnostics_at(5.0)
        assert probe.wait_for(lambda d: True, 1.0)
        t, z = probe.base_heights()
    finally:
        close_graph(probe, graph)
    log = graph.log()
    assert diag.get("in_loop_controller") == "supervised", (diag, log[-3000:])
    assert states, log[-3000:]
    assert states[-1]["in_control"] == "policy" and states[-1]["policy"] == "holosoma/g1_ppo"
    assert states[-1]["handovers"] == []
    late = np.asarray(t) > 4.0
    assert late.any() and float(np.min(np.asarray(z)[late])) > 0.6  # standing
