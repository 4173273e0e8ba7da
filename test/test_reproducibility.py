"""A lockstep run is a function of its inputs: the same short graph run twice gives identical ground truth,
/odom and commands, bit for bit (separate processes over DDS, real MuJoCo; docs/architecture.md, "Lockstep
contract").

1. driver + policy runner + state estimator, an evaluator publishing /cmd_vel from a script on simulated time;
2. driver + state estimator + WBC on /odom, with a pelvis push given at a held tick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
from humanoid_control.ros.lockstep import tick_stream_qos

pytestmark = pytest.mark.slow


class Recorder:
    """``/odom`` and ``/joint_commands`` keyed by stamp (s), for comparison between runs."""

    def __init__(self) -> None:
        self.odom: dict[float, tuple[float, ...]] = {}
        self.commands: dict[float, tuple[float, ...]] = {}

    @staticmethod
    def _t(msg: Any) -> float:
        return round(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, 6)

    def on_odom(self, msg: Any) -> None:
        p, o, v = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist.linear
        self.odom[self._t(msg)] = (p.x, p.y, p.z, o.w, o.x, o.y, o.z, v.x, v.y, v.z)

    def on_command(self, msg: Any) -> None:
        self.commands[self._t(msg)] = tuple(msg.position) + tuple(msg.effort)

    def subscribe(self, probe: GraphProbe) -> None:
        from nav_msgs.msg import Odometry
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        probe.subscribe(Odometry, "/odom", self.on_odom, tick_stream_qos(2000), per_tick=True)
        qos = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
        probe.node.create_subscription(JointState, "/joint_commands", self.on_command, qos)


def _policy_run(out: Path) -> tuple[GraphProbe, Recorder]:
    """Driver, policy runner and estimator: stand until the policy runs, then 0.4 m/s forward for 1.5 s."""
    from geometry_msgs.msg import Twist
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    isolated_ros_env(out / "ros")
    runner: list[str] = []
    pubs: dict[str, Any] = {}
    t0: list[float] = []

    def setup(node: Any) -> None:
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(String, "/policy_runner/state", lambda m: runner.append(m.data), latched)
        pubs["cmd"] = node.create_publisher(Twist, "/cmd_vel", 10)

    def on_tick(msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if not t0 and runner and runner[-1] == "run":
            t0.append(t)
            # from here on_tick publishes only on the 10 ms grid: 10 ms acknowledged at once (GraphProbe)
            probe.ack_period = 0.01
        if round(t * 1000) % 10 == 0:
            tw = Twist()
            tw.linear.x = 0.4 if t0 and t - t0[0] > 0.2 else 0.0
            pubs["cmd"].publish(tw)

    probe = GraphProbe(
        subscribe_description=False, name="repro", lockstep_peer=True, on_tick=on_tick, setup=setup
    )
    rec = Recorder()
    rec.subscribe(probe)
    graph = LaunchedGraph(
        {
            "controller": "policy",
            "estimator": "true",
            "imu_noise": "mems",
            "start_paused": "true",
            "sim_duration_s": "60",
        },
        out / "graph.log",
    ).start()
    try:
        probe.start_graph(peers=("policy_runner", "state_estimator"), running=graph.running)
        probe.run_until(3.5)
    finally:
        close_graph(probe, graph)
    assert t0, f"the policy never ran (runner states {runner}); see {out / 'graph.log'}"
    return probe, rec


def _wbc_push_run(out: Path) -> tuple[GraphProbe, Recorder]:
    """Driver, estimator and WBC: stand, a 6 N s push to the front at a held tick, 1 s after it."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from humanoid_bringup.evaluation.wbc_graph import WbcGraph

    g = WbcGraph(out, sim_duration_s=120.0)
    rec = Recorder()
    # commands are a volatile stream (any controller may publish them): a volatile reader
    qos = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
    g.probe.node.create_subscription(JointState, "/joint_commands", rec.on_command, qos)
    g.record_odom = True
    try:
        g.start()
        # a fixed simulated time: start() returns at the tick the driver's (unstamped) mode was seen active
        assert g.now() < 3.0, g.now()
        t_push = g.run_to(3.0)
        g.set_push((60.0, 0.0, 0.0), 0.1)
        ok, msg = g.probe.call_trigger("/robot_driver/push")
        assert ok, msg
        g.run_to(t_push + 1.0)
    finally:
        g.stop()
    rec.odom = {t: tuple(np.concatenate([np.ravel(v) for v in o])) for t, o in g.odom.items()}
    return g.probe, rec


def _walk_push_run(out: Path) -> tuple[GraphProbe, Recorder]:
    """Driver, estimator and walking controller: 0.3 m/s forward from a held tick, a 10 N s push to the side
    1.2 s later, 0.6 s after it (the command is published on the 10 ms grid while the 500 Hz streams run)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from humanoid_bringup.evaluation.wbc_graph import WbcGraph

    g = WbcGraph(out, controller="mpc_walk", sim_duration_s=120.0)
    rec = Recorder()
    qos = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
    g.probe.node.create_subscription(JointState, "/joint_commands", rec.on_command, qos)
    g.record_odom = True
    try:
        g.start()
        # fixed simulated times: start() returns at the tick the driver's (unstamped) mode was seen active
        t_walk = g.run_to(2.4)
        g.set_cmd_vel(0.3)
        t_push = g.run_to(t_walk + 1.2)
        g.set_push((0.0, 100.0, 0.0), 0.1)
        ok, msg = g.probe.call_trigger("/robot_driver/push")
        assert ok, msg
        g.run_to(t_push + 0.6)
    finally:
        g.stop()
    rec.odom = {t: tuple(np.concatenate([np.ravel(v) for v in o])) for t, o in g.odom.items()}
    return g.probe, rec


def _same(name: str, xs: list[Any], ys: list[Any], stamps: list[float]) -> None:
    """Assert two series are identical; the message names the first differing stamp (not a full diff)."""
    if xs == ys:
        return
    for t, x, y in zip(stamps, xs, ys, strict=False):
        if x != y:
            raise AssertionError(f"{name} differs between the runs, first at t = {t:.3f} s: {x} != {y}")
    raise AssertionError(f"{name}: same values, different lengths ({len(xs)} != {len(ys)})")


def _compare(a: tuple[GraphProbe, Recorder], b: tuple[GraphProbe, Recorder], until: float) -> None:
    (pa, ra), (pb, rb) = a, b
    for p in (pa, pb):  # a dropped peer makes a run irreproducible: say so rather than show a difference
        assert not p.lockstep_status.get("dropped"), f"lockstep peers dropped: {p.lockstep_status}"
    n = min(sum(t <= until for t in pa.data.truth_t), sum(t <= until for t in pb.data.truth_t))
    assert n > 1000
    ta = pa.data.truth_t[:n]
    _same("ground truth stamps", ta, pb.data.truth_t[:n], ta)
    _same("ground truth position", pa.data.truth_pos[:n], pb.data.truth_pos[:n], ta)
    _same("ground truth orientation", pa.data.truth_quat_wxyz[:n], pb.data.truth_quat_wxyz[:n], ta)
    _same("joint positions", pa.data.joint_q[:n], pb.data.joint_q[:n], pa.data.joint_t[:n])
    common = sorted(t for t in set(ra.odom) & set(rb.odom) if t <= until)
    assert len(common) > 1000
    _same("/odom", [ra.odom[t] for t in common], [rb.odom[t] for t in common], common)
    cmds = sorted(t for t in set(ra.commands) & set(rb.commands) if t <= until)
    assert len(cmds) > 500
    _same("commands", [ra.commands[t] for t in cmds], [rb.commands[t] for t in cmds], cmds)
    assert pa.data.modes == pb.data.modes


def test_policy_estimator_graph_is_reproducible(tmp_path: Path) -> None:
    a = _policy_run(tmp_path / "a")
    b = _policy_run(tmp_path / "b")
    _compare(a, b, until=3.5)
    # the run did something: the policy walked forward
    assert a[0].data.truth_pos[-1][0] > 0.1


def test_wbc_push_graph_is_reproducible(tmp_path: Path) -> None:
    a = _wbc_push_run(tmp_path / "a")
    b = _wbc_push_run(tmp_path / "b")
    _compare(a, b, until=a[0].data.truth_t[-1])
    assert a[0].data.modes[-1] == "active"


def test_walking_push_graph_is_reproducible(tmp_path: Path) -> None:
    """The walking controller applies /cmd_vel at a fixed tick after its publication (lockstep), so a walk
    and a push mid-walk give the same states and commands bit for bit."""
    a = _walk_push_run(tmp_path / "a")
    b = _walk_push_run(tmp_path / "b")
    _compare(a, b, until=a[0].data.truth_t[-1])
    assert a[0].data.modes[-1] == "active"
    # the run did something: the robot walked forward
    assert a[0].data.truth_pos[-1][0] - a[0].data.truth_pos[0][0] > 0.15
