"""Recovery from a fall in simulation through the mode manager's services alone (issue 47): driver, policy
runner and mode manager in separate processes, real DDS, MuJoCo, lockstep. run_policy with a teleop walk,
e-stop, the robot falls; reset and stand are refused ("robot is down"); respawn; stand; run_policy: the robot
walks again (ground truth), the policy runner's statistics start afresh, and the operation record counts
the fall and the respawn."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
from humanoid_control.model.robot_config import load_robot_config

pytestmark = pytest.mark.slow

GRID = 0.02  # the operator's teleop publishing grid (s of simulated time)
FALLEN_HEIGHT = load_robot_config("g1").simulation.fall_height  # base height (m) under which it has fallen


class Operator:
    """A lockstep probe that plays the operator: ``/teleop/cmd_vel`` on the 20 ms grid of simulated time,
    ``/mode_manager/*`` calls at held ticks, records of ``/mode_manager/state`` and of the policy runner's
    ``/diagnostics`` (stamped, simulated time)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.states: list[dict[str, Any]] = []
        self.runner_diag: list[tuple[float, dict[str, str]]] = []
        self.teleop: tuple[float, float, float] | None = None
        self.probe = GraphProbe(
            subscribe_description=False,
            name="operator",
            contacts=False,
            lockstep_peer=True,
            on_tick=self._on_tick,
            setup=self._setup,
            ack_period=GRID,
        )

    def _setup(self, node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import Twist
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(String, "/mode_manager/state", self._on_state, latched)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100)
        self.twist = Twist
        self.pub_teleop = node.create_publisher(Twist, "/teleop/cmd_vel", 10)

    def _on_state(self, msg: Any) -> None:
        with self.lock:
            self.states.append(json.loads(msg.data))

    def _on_diag(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        for status in msg.status:
            if status.name == "policy_runner":
                with self.lock:
                    self.runner_diag.append((t, {kv.key: kv.value for kv in status.values}))

    def _on_tick(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if round(t * 1000.0) % round(GRID * 1000.0) != 0:
            return
        with self.lock:
            teleop = self.teleop
        if teleop is not None:
            out = self.twist()
            out.linear.x, out.linear.y, out.angular.z = teleop
            self.pub_teleop.publish(out)

    def state(self) -> dict[str, Any]:
        with self.lock:
            return dict(self.states[-1]) if self.states else {}

    def wait_state(self, what: str, predicate: Any, timeout: float = 30.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = self.state()
            if st and predicate(st):
                return st
            time.sleep(0.02)
        raise AssertionError(f"/mode_manager/state: {what} not seen; last {self.state()}")

    def runner_diagnostics_after(self, t: float, timeout: float = 30.0) -> tuple[float, dict[str, str]]:
        """The policy runner's first ``/diagnostics`` stamped after ``t`` (s; it publishes once a second of
        simulated time): (stamp, key-values)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                found = [(stamp, values) for stamp, values in self.runner_diag if stamp > t + 1e-7]
            if found:
                return found[0]
            time.sleep(0.02)
        raise AssertionError(f"no policy runner diagnostics after {t:.3f} s")

    def call(self, name: str) -> tuple[bool, str]:
        return self.probe.call_trigger(f"/mode_manager/{name}", timeout=30.0)

    def truth_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Base position (m, world) and orientation (w, x, y, z) at the last stamp <= t (s)."""
        with self.probe.lock:
            ts = np.array(self.probe.data.truth_t)
            i = int(np.searchsorted(ts, t + 1e-9)) - 1
            return np.array(self.probe.data.truth_pos[i]), np.array(self.probe.data.truth_quat_wxyz[i])

    def driver_mode(self) -> str:
        with self.probe.lock:
            return self.probe.data.modes[-1] if self.probe.data.modes else ""

    def ready(self, graph: LaunchedGraph, peers: tuple[str, ...], hold_at: float) -> None:
        """The mode manager subscribed to the teleop input; then start, holding the tick at ``hold_at``."""
        end = time.monotonic() + 120.0
        while self.pub_teleop.get_subscription_count() < 1:
            assert graph.running() and time.monotonic() < end, graph.log()[-3000:]
            time.sleep(0.05)
        self.probe.start_graph(peers=peers, running=graph.running, hold_at=hold_at)


def tilt_deg(quat_wxyz: np.ndarray) -> float:
    _, x, y, _ = quat_wxyz
    return math.degrees(math.acos(max(-1.0, min(1.0, 1 - 2 * (x * x + y * y)))))


def forward(p0: np.ndarray, q0: np.ndarray, p1: np.ndarray) -> float:
    """Distance (m) from ``p0`` to ``p1`` along the heading of orientation ``q0`` (w, x, y, z)."""
    w, x, y, z = q0
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return float(np.dot(p1[:2] - p0[:2], [math.cos(yaw), math.sin(yaw)]))


def test_estop_fall_respawn_stand_and_walk_again_through_the_mode_manager_alone(tmp_path: Path) -> None:
    isolated_ros_env(tmp_path / "ros_logs")
    graph = LaunchedGraph(
        {
            "mode_manager": "true",
            "controller": "none",  # the policy is started through /mode_manager/run_policy, not at start-up
            "clock": "lockstep",
            "start_paused": "true",
            "sim_duration_s": "60.0",
            "mode_record": str(tmp_path / "record.json"),
        },
        tmp_path / "graph.log",
    ).start()
    op = Operator()
    figures: list[str] = []
    try:
        op.ready(graph, peers=("policy_runner", "mode_manager"), hold_at=2.4)
        op.probe.run_until(2.4)
        op.wait_state("mode hold", lambda s: s["mode"] == "hold" and not s["robot_down"])
        ok, msg = op.call("respawn")  # nothing to recover from, but allowed: the robot stands up again
        assert ok and msg.startswith("respawn: the robot is put back upright"), msg
        op.probe.run_until(2.8)  # the driver's 0.3 s ramp in place, then its hold

        # run_policy with a teleop walk, then the e-stop: the robot falls
        with op.lock:
            op.teleop = (0.4, 0.0, 0.0)
        ok, msg = op.call("run_policy")
        assert ok, msg
        p0, q0 = op.truth_at(2.8)
        t = op.probe.run_until(4.8)
        op.wait_state("walking", lambda s: s["mode"] == "run_policy" and s["source"] == "teleop")
        walked = forward(p0, q0, op.truth_at(t)[0])
        assert walked > 0.2 and op.driver_mode() == "active", walked
        assert int(op.runner_diagnostics_after(3.0)[1]["policy_steps"]) > 0
        figures.append(f"first walk 2.8-{t:.1f} s: {walked:.2f} m forward")
        with op.lock:
            op.teleop = None
        ok, msg = op.call("estop")
        assert ok, msg
        t_estop = t
        while True:  # until the base is below the fall height and the driver reports the robot down
            t = op.probe.run_until(t + 0.1)
            p, q = op.truth_at(t)
            if p[2] < FALLEN_HEIGHT and op.state().get("robot_down"):
                break
            assert t < t_estop + 3.0, (p, tilt_deg(q), op.state())
        st = op.wait_state(
            "damp, runner in fault", lambda s: s["mode"] == "damp" and s["policy_state"] == "fault"
        )
        assert op.driver_mode() == "damping" and st["counts"]["falls"] == 1, st
        figures.append(f"fell: base {p[2]:.2f} m, tilt {tilt_deg(q):.0f} deg at {t:.1f} s")

        # down: reset and stand refused with the reason; respawn
        for name in ("reset", "stand"):
            ok, msg = op.call(name)
            assert not ok and msg.startswith(f"{name}: robot is down: base tilt "), msg
            assert msg.endswith("; call respawn (simulation)"), msg
            # the tilt the robot lies at (the driver reports it again as it changes), not the limit it crossed
            assert int(msg.split("base tilt ")[1].split(" deg")[0]) > 65, msg
        figures.append(f"refused: {msg}")
        ok, msg = op.call("respawn")
        assert ok, msg
        t_respawn = t
        t = op.probe.run_until(t + 0.5)
        st = op.wait_state(
            "hold, up, runner idle",
            lambda s: s["mode"] == "hold" and not s["robot_down"] and s["policy_state"] == "hold",
        )
        assert op.driver_mode() == "hold" and st["counts"]["respawns"] == 2, st
        p, q = op.truth_at(t)
        assert p[2] > 0.7 and tilt_deg(q) < 5.0, (p, q)
        # the policy runner's statistics start afresh (its next report is not the earlier run's)
        stamp, fresh = op.runner_diagnostics_after(t_respawn)
        assert fresh["policy_steps"] == "0" and fresh["state"] in ("wait_state", "hold"), (stamp, fresh)
        assert fresh["step_us_median"] == "0.0" and fresh["max_state_gap_ms"] == "0.0", fresh

        # stand, then the policy walks again
        ok, msg = op.call("stand")
        assert ok and msg == "stand: standing (the driver's hold)", msg
        op.wait_state("stand", lambda s: s["mode"] == "stand")
        with op.lock:
            op.teleop = (0.4, 0.0, 0.0)
        ok, msg = op.call("run_policy")
        assert ok, msg
        p0, q0 = op.truth_at(t)
        t_walk = t
        t = op.probe.run_until(t + 2.0)
        st = op.wait_state(
            "walking again", lambda s: s["mode"] == "run_policy" and s["policy_state"] == "run"
        )
        p, q = op.truth_at(t)
        walked = forward(p0, q0, p)
        figures.append(f"after the respawn, walk {t_walk:.1f}-{t:.1f} s: {walked:.2f} m, base {p[2]:.2f} m")
        assert walked > 0.2 and p[2] > 0.65 and tilt_deg(q) < 15.0, figures
        assert op.driver_mode() == "active", st
        stamp, second = op.runner_diagnostics_after(t_walk + 0.5)
        # counted from this run's start only (50 Hz policy steps)
        assert 0 < int(second["policy_steps"]) <= 50 * (stamp - t_walk) + 2, (stamp, t_walk, second)
        ok, text = op.call("report")
        assert ok
    finally:
        op.probe.release()
        close_graph(op.probe, graph)
    print("\n".join(figures))
    record = json.loads(text)
    counts = record["counts"]
    assert (counts["respawns"], counts["falls"], counts["estops"], counts["refusals"]) == (2, 1, 1, 2), counts
    modes = [e["detail"]["new"] for e in record["events"] if e["kind"] == "mode"]
    assert modes == ["hold", "run_policy", "damp", "hold", "stand", "run_policy"], modes
    kinds = [e["kind"] for e in record["events"] if e["kind"] in ("estop", "fall", "respawn")]
    assert kinds == ["respawn", "estop", "fall", "respawn"], kinds
