"""Controllers in the driver's loop (``in_loop:=true``) through real processes: the policy and the joint hold
called from the driver's 500 Hz loop, their nodes in the driver's process as the ROS interface
(docs/realtime.md). Behaviour only, never timing: the robot stands or walks, the command stream reaches the
joints, the mirrored commands, services and the e-stop work, and a lockstep run is reproducible."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
from humanoid_control.model.robot_config import load_robot_config

pytestmark = pytest.mark.slow


def _latched() -> Any:
    """Reliable, keep-last 10, transient-local: a latched state topic (``~/state``)."""
    from humanoid_control.ros.lockstep import tick_stream_qos

    return tick_stream_qos(10, latched=True)


def _t(msg: Any) -> float:
    return round(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, 6)


def _lockstep_policy_run(out: Path) -> tuple[GraphProbe, dict[float, tuple[float, ...]], list[str]]:
    """The policy in the loop, lockstep: stand until it runs, then 0.4 m/s forward; its mirrored commands."""
    from geometry_msgs.msg import Twist
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    isolated_ros_env(out / "ros")
    runner: list[str] = []
    commands: dict[float, tuple[float, ...]] = {}
    pubs: dict[str, Any] = {}
    t0: list[float] = []

    def setup(node: Any) -> None:
        latched = _latched()
        node.create_subscription(String, "/policy_runner/state", lambda m: runner.append(m.data), latched)
        node.create_subscription(
            JointState,
            "/policy_runner/joint_commands",
            lambda m: commands.__setitem__(_t(m), tuple(m.position)),
            QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE),
        )
        pubs["cmd"] = node.create_publisher(Twist, "/cmd_vel", 10)

    def on_tick(msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if not t0 and runner and runner[-1] == "run":
            t0.append(t)
            probe.ack_period = 0.01
        if round(t * 1000) % 10 == 0:
            tw = Twist()
            tw.linear.x = 0.4 if t0 and t - t0[0] > 0.2 else 0.0
            pubs["cmd"].publish(tw)

    probe = GraphProbe(
        subscribe_description=False, name="rt_repro", lockstep_peer=True, on_tick=on_tick, setup=setup
    )
    graph = LaunchedGraph(
        {"controller": "policy", "in_loop": "true", "start_paused": "true", "sim_duration_s": "60"},
        out / "graph.log",
    ).start()
    try:
        probe.start_graph(peers=(), running=graph.running)  # the policy is no peer: the driver calls it
        probe.run_until(3.5)
        diag = probe.diagnostics_at(3.0)
    finally:
        close_graph(probe, graph)
    assert t0, f"the policy never ran (runner states {runner}); see {out / 'graph.log'}"
    assert diag.get("in_loop_controller") == "policy"
    return probe, commands, runner


def test_in_loop_policy_lockstep_walks_and_is_reproducible(tmp_path: Path) -> None:
    a, cmd_a, runner_a = _lockstep_policy_run(tmp_path / "a")
    b, cmd_b, _ = _lockstep_policy_run(tmp_path / "b")
    assert not a.lockstep_status.get("dropped") and not b.lockstep_status.get("dropped")
    n = min(sum(t <= 3.5 for t in a.data.truth_t), sum(t <= 3.5 for t in b.data.truth_t))
    assert n > 1000
    assert a.data.truth_t[:n] == b.data.truth_t[:n]
    assert a.data.truth_pos[:n] == b.data.truth_pos[:n], "ground truth differs between two lockstep runs"
    assert a.data.joint_q[:n] == b.data.joint_q[:n]
    common = sorted(t for t in set(cmd_a) & set(cmd_b) if t <= 3.5)
    assert len(common) > 500  # mirrored on /policy_runner/joint_commands, one per tick
    assert [cmd_a[t] for t in common] == [cmd_b[t] for t in common]
    assert runner_a[-1] == "run" and a.data.modes[-1] == "active"
    assert a.data.truth_pos[-1][0] > 0.1  # it walked forward
    assert a.data.truth_pos[-1][2] > load_robot_config("g1").simulation.fall_height


def test_in_loop_policy_realtime_walks_and_the_estop_damps(tmp_path: Path) -> None:
    from geometry_msgs.msg import Twist
    from std_msgs.msg import String

    isolated_ros_env(tmp_path / "ros")
    runner: list[str] = []

    def setup(node: Any) -> None:
        latched = _latched()
        node.create_subscription(String, "/policy_runner/state", lambda m: runner.append(m.data), latched)

    probe = GraphProbe(subscribe_description=False, name="rt_policy", reliable_streams=False, setup=setup)
    graph = LaunchedGraph(
        {"controller": "policy", "in_loop": "true", "clock": "realtime", "sim_duration_s": "60"},
        tmp_path / "graph.log",
    ).start()
    try:
        # the driver computes ground truth only once it sees a subscriber: wait for the first sample too
        assert probe.wait_for(
            lambda d: bool(d.modes) and d.modes[-1] == "active" and bool(d.truth_t), 90.0
        ), graph.log()[-3000:]
        pub = probe.node.create_publisher(Twist, "/cmd_vel", 10)
        x0 = probe.data.truth_pos[-1][0]
        t_start = probe.data.truth_t[-1]
        tw = Twist()
        tw.linear.x = 0.4
        while probe.data.truth_t[-1] < t_start + 3.0 and graph.running():
            pub.publish(tw)
            probe.wait_for(lambda d, t=probe.data.truth_t[-1]: d.truth_t[-1] > t + 0.05, 5.0)
        diag = probe.last_diagnostics()
        walked = probe.data.truth_pos[-1][0] - x0
        height = probe.data.truth_pos[-1][2]
        ok, msg = probe.call_trigger("/robot_driver/estop")
        assert ok, msg
        assert probe.wait_for(lambda d: d.modes[-1] == "damping", 10.0)
        assert probe.wait_for(lambda d: "fault" in runner, 10.0), runner
    finally:
        close_graph(probe, graph)
    # SIGINT while the loop publishes is a clean shutdown (exit code 0), not "real-time loop died"
    assert re.search(r"process robot_driver \[pid \d+\] finished cleanly", graph.log()), graph.log()[-3000:]
    assert diag["in_loop_controller"] == "policy" and int(diag["controller_steps"]) > 500
    assert int(diag["watchdog_trips"]) == 0 and int(diag["commands_refused"]) == 0
    assert "run" in runner
    assert walked > 0.2, f"walked {walked:.2f} m in 3 s at 0.4 m/s"
    assert height > load_robot_config("g1").simulation.fall_height
    # the info lines of the mode and runner-state changes go out from the loop's slack, under each node's
    # name, in order; the e-stop's damping at once
    log = graph.log()
    lines = [m.group(0) for m in re.finditer(r"\[(robot_driver|policy_runner)\]: (mode|state) -> \w+", log)]
    assert lines.index("[robot_driver]: mode -> hold") < lines.index("[robot_driver]: mode -> active"), lines
    assert "[policy_runner]: state -> run" in lines and "[robot_driver]: mode -> damping" in lines, lines


def test_in_loop_joint_hold_realtime_holds_and_mirrors(tmp_path: Path) -> None:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    isolated_ros_env(tmp_path / "ros")
    mirrored: list[list[float]] = []

    def setup(node: Any) -> None:
        node.create_subscription(
            JointState,
            "/joint_hold_controller/joint_commands",
            lambda m: mirrored.append(list(m.position)),
            QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT),
        )

    probe = GraphProbe(subscribe_description=False, name="rt_hold", reliable_streams=False, setup=setup)
    graph = LaunchedGraph(
        {
            "controller": "joint_hold",
            "in_loop": "true",
            "clock": "realtime",
            "publish_rate_hz": "100.0",
            "sim_duration_s": "60",
        },
        tmp_path / "graph.log",
    ).start()
    try:
        # the driver computes ground truth only once it sees a subscriber: wait for the first sample too
        assert probe.wait_for(
            lambda d: bool(d.modes) and d.modes[-1] == "active" and bool(d.truth_t), 90.0
        ), graph.log()[-3000:]
        t_active = probe.data.truth_t[-1]
        # 1 s of samples, and at least 20 of them: on a loaded machine the loop's slack drops many
        assert probe.wait_for(
            lambda d: d.truth_t[-1] > t_active + 1.0 and sum(t > t_active for t in d.truth_t[-40:]) > 20,
            60.0,
        )
        stamps = np.array(probe.data.truth_t)
        # the 1 Hz diagnostics go out in the loop's slack: wait for one from after the last sample (its
        # counters then cover every sample of the window; tick k is at k * 2 ms of simulated time)
        t_last = float(stamps[-1])
        probe.wait_for(lambda d: bool(d.diagnostics) and int(d.diagnostics[-1]["tick"]) * 2e-3 > t_last, 20.0)
        diag = probe.last_diagnostics()
    finally:
        close_graph(probe, graph)
    config = load_robot_config("g1")
    assert diag["in_loop_controller"] == "joint_hold" and diag["publish_every_ticks"] == "5"
    assert int(diag["commands_accepted"]) > 400 and int(diag["watchdog_trips"]) == 0
    assert mirrored and np.allclose(mirrored[-1], config.array("default"))
    # tooling streams at publish_rate_hz: 100 Hz of the 500 Hz loop, on its 10 ms grid; a sample the loop's
    # slack cannot hold is dropped and counted (how many depends on the machine's load), never lost silently
    steps = np.round(np.diff(stamps[stamps > t_active]) * 1000)
    assert steps.size > 10 and np.all(steps % 10 == 0), steps.tolist()
    missing, dropped = int((steps // 10 - 1).sum()), int(diag["tooling_truth_dropped"])
    assert missing <= dropped, (missing, dropped, steps.tolist())
    assert probe.data.truth_pos[-1][2] > config.simulation.fall_height


def test_in_loop_wbc_lockstep_stands(tmp_path: Path) -> None:
    """The whole-body controller in the driver's loop (controller:=wbc_stand in_loop:=true), the estimator's
    node in the loop before it: the QP takes the robot from the driver's hold and keeps it standing; /odom
    (the in-loop estimator's, every tick) tracks the ground truth."""
    from nav_msgs.msg import Odometry
    from std_msgs.msg import String

    from humanoid_control.ros.lockstep import tick_stream_qos

    isolated_ros_env(tmp_path / "ros")
    states: list[str] = []
    odom_z: list[float] = []

    def setup(node: Any) -> None:
        latched = _latched()
        node.create_subscription(String, "/wbc_controller/state", lambda m: states.append(m.data), latched)
        node.create_subscription(
            Odometry, "/odom", lambda m: odom_z.append(m.pose.pose.position.z), tick_stream_qos(2000)
        )

    probe = GraphProbe(subscribe_description=False, name="rt_wbc", lockstep_peer=True, setup=setup)
    graph = LaunchedGraph(
        {"controller": "wbc_stand", "in_loop": "true", "start_paused": "true", "sim_duration_s": "60"},
        tmp_path / "graph.log",
    ).start()
    try:
        probe.start_graph(peers=(), running=graph.running)
        # held at t = 4 s: the diagnostics of that second (lockstep: on every whole second of simulated
        # time; the latest received at a held tick had been from any earlier second, by the machine's speed)
        probe.run_until(4.0)
        diag = probe.diagnostics_at(4.0)
    finally:
        close_graph(probe, graph)
    assert diag["in_loop_controller"] == "wbc" and int(diag["controller_steps"]) > 1500
    assert int(diag["watchdog_trips"]) == 0 and int(diag["lockstep_timeouts"]) == 0
    assert "run" in states and states[-1] == "run", states
    assert probe.data.modes[-1] == "active", probe.data.modes
    assert diag["gain_profile"] == "low"  # the WBC's gain profile, set through the driver's parameters
    assert probe.data.truth_pos[-1][2] > load_robot_config("g1").simulation.fall_height
    # the in-loop estimator's /odom (odom frame: the soles at z = 0, like the world's floor), every tick
    assert len(odom_z) > 1500 and abs(odom_z[-1] - probe.data.truth_pos[-1][2]) < 0.03, odom_z[-3:]
