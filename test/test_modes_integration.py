"""The mode manager through the ROS graph: driver, policy runner and mode manager in separate processes, real
DDS, MuJoCo, lockstep. The operating sequence of the issue, checked on ground truth and on
``/mode_manager/state``; bad inputs and the mode manager's death; ``humanoid-teleop`` as a terminal program
under tmux."""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
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

CONFIG = load_robot_config("g1")
EFFORT = CONFIG.array("effort")
GRID = 0.02  # the probe's teleop/autonomy publishing grid (s of simulated time)
BOUND = 0.2  # max_torque_step (the default)


class Operator:
    """A lockstep probe that plays an operator: scripted ``/teleop/cmd_vel`` and ``/autonomy/cmd_vel`` on the
    20 ms grid of simulated time, service calls at held ticks, and records of ``/mode_manager/state``,
    ``/robot_driver/switch`` and ``/policy_runner/state``."""

    def __init__(self, peer: bool = True) -> None:
        self.lock = threading.Lock()
        self.states: list[dict[str, Any]] = []
        self.switches: list[dict[str, Any]] = []
        self.runner_states: list[str] = []
        self.teleop: tuple[float, float, float] | None = None
        self.autonomy: tuple[float, float, float] | None = None
        self.joy: tuple[list[float], list[int]] | None = None  # (axes, buttons)
        self.probe = GraphProbe(
            subscribe_description=False,
            name="operator",
            contacts=False,
            lockstep_peer=peer,
            on_tick=self._on_tick,
            setup=self._setup,
            ack_period=GRID if peer else 0.0,
        )

    def _setup(self, node: Any) -> None:
        from geometry_msgs.msg import Twist
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Joy
        from std_msgs.msg import String

        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(String, "/mode_manager/state", self._on_state, latched)
        node.create_subscription(String, "/robot_driver/switch", self._on_switch, latched)
        node.create_subscription(String, "/policy_runner/state", self._on_runner, latched)
        self.twist = Twist
        self.joy_type = Joy
        self.pub_teleop = node.create_publisher(Twist, "/teleop/cmd_vel", 10)
        self.pub_autonomy = node.create_publisher(Twist, "/autonomy/cmd_vel", 10)
        self.pub_joy = node.create_publisher(Joy, "/joy", 10)

    def _on_state(self, msg: Any) -> None:
        with self.lock:
            self.states.append(json.loads(msg.data))

    def _on_switch(self, msg: Any) -> None:
        with self.lock:
            self.switches.append(json.loads(msg.data))

    def _on_runner(self, msg: Any) -> None:
        with self.lock:
            self.runner_states.append(msg.data)

    def publish(self, pub: Any, v: tuple[float, float, float]) -> None:
        msg = self.twist()
        msg.linear.x, msg.linear.y, msg.angular.z = v
        pub.publish(msg)

    def _on_tick(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if round(t * 1000.0) % round(GRID * 1000.0) != 0:
            return
        with self.lock:
            teleop, autonomy, joy = self.teleop, self.autonomy, self.joy
        if joy is not None:
            self.pub_joy.publish(self.joy_type(axes=joy[0], buttons=joy[1]))
        if teleop is not None:
            self.publish(self.pub_teleop, teleop)
        if autonomy is not None:
            self.publish(self.pub_autonomy, autonomy)

    # ------------------------------------------------------------------ queries
    def state(self) -> dict[str, Any]:
        with self.lock:
            return dict(self.states[-1]) if self.states else {}

    def wait_state(self, what: str, predicate: Any, timeout: float = 20.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = self.state()
            if st and predicate(st):
                return st
            time.sleep(0.02)
        raise AssertionError(f"/mode_manager/state: {what} not seen; last {self.state()}")

    def call(self, name: str) -> tuple[bool, str]:
        return self.probe.call_trigger(f"/mode_manager/{name}", timeout=30.0)

    def set_autonomy(self, on: bool) -> tuple[bool, str]:
        from std_srvs.srv import SetBool

        return self.probe._call(SetBool, "/mode_manager/set_autonomy", SetBool.Request(data=on), 30.0)

    def truth_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Base position (m, world) and orientation (w, x, y, z) at the last stamp <= t."""
        with self.probe.lock:
            ts = np.array(self.probe.data.truth_t)
            i = int(np.searchsorted(ts, t + 1e-9)) - 1
            return np.array(self.probe.data.truth_pos[i]), np.array(self.probe.data.truth_quat_wxyz[i])

    def driver_mode(self) -> str:
        with self.probe.lock:
            return self.probe.data.modes[-1] if self.probe.data.modes else ""

    def ready(self, graph: LaunchedGraph, peers: tuple[str, ...], hold_at: float | None) -> None:
        """The mode manager subscribed to our inputs and set the driver's switch bound; then start."""
        end = time.monotonic() + 120.0
        while not (
            self.pub_teleop.get_subscription_count() >= 1
            and self.pub_autonomy.get_subscription_count() >= 1
            and self.pub_joy.get_subscription_count() >= 1
            and driver_parameter(self.probe, "switch_max_step") == BOUND
        ):
            assert graph.running() and time.monotonic() < end, graph.log()[-3000:]
            time.sleep(0.05)
        self.probe.start_graph(peers=peers, running=graph.running, hold_at=hold_at)

    def close(self) -> None:
        self.probe.close()


def driver_parameter(probe: GraphProbe, name: str) -> Any:
    """A parameter of the driver (None while its service is not up)."""
    from rcl_interfaces.srv import GetParameters

    client = probe.node.create_client(GetParameters, "/robot_driver/get_parameters")
    try:
        if not client.wait_for_service(timeout_sec=0.5):
            return None
        future = client.call_async(GetParameters.Request(names=[name]))
        end = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < end:
            time.sleep(0.01)
        if not future.done():
            return None
        value = future.result().values[0]
        return value.double_value
    finally:
        probe.node.destroy_client(client)


def set_mode_manager_parameter(probe: GraphProbe, name: str, value: float) -> bool:
    """Set a double parameter of the mode manager; whether it was accepted."""
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    client = probe.node.create_client(SetParameters, "/mode_manager/set_parameters")
    try:
        assert client.wait_for_service(timeout_sec=10.0)
        request = SetParameters.Request(
            parameters=[Parameter(name, Parameter.Type.DOUBLE, value).to_parameter_msg()]
        )
        future = client.call_async(request)
        end = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < end:
            time.sleep(0.01)
        return future.done() and bool(future.result().results[0].successful)
    finally:
        probe.node.destroy_client(client)


def yaw(quat_wxyz: np.ndarray) -> float:
    w, x, y, z = quat_wxyz
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def tilt_deg(quat_wxyz: np.ndarray) -> float:
    _, x, y, _ = quat_wxyz
    return math.degrees(math.acos(max(-1.0, min(1.0, 1 - 2 * (x * x + y * y)))))


def measured_step(probe: GraphProbe, t_switch: float, ticks: int) -> tuple[float, str]:
    """The largest change of an applied joint torque (``/joint_states`` effort) from one tick to the next,
    as a fraction of the joint's effort limit, from the tick before the switch to ``ticks`` after it."""
    with probe.lock:
        t = np.array(probe.data.joint_t)
        effort = np.array(probe.data.joint_effort)
        names = list(probe.data.joint_names)
    # the torque applied during tick k is in the state stamped k + 1
    sel = np.flatnonzero((t >= t_switch - 1e-6) & (t <= t_switch + (ticks + 2) * 0.002 + 1e-6))
    steps = np.abs(np.diff(effort[sel], axis=0)) / EFFORT
    k, j = np.unravel_index(int(np.argmax(steps)), steps.shape)
    return float(steps[k, j]), names[j]


def check_switch(probe: GraphProbe, s: dict[str, Any], label: str = "") -> str:
    """A driver switch (``/robot_driver/switch``) described with its step measured on ``/joint_states``;
    asserts both are within the bound. Returns the description (the test prints it)."""
    measured, joint = measured_step(probe, s["t"], s["blend_ticks"])
    text = (
        f"{label}switch {s['from']} -> {s['to']} at {s['t']:.3f} s: unblended {s['unblended_step']:.3f} "
        f"({s['unblended_joint']}), blended over {s['blend_ticks']} ticks: largest step "
        f"{s['max_step']:.3f} ({s['max_step_joint']}), measured on /joint_states {measured:.3f} ({joint})"
    )
    assert s["max_step"] <= BOUND + 1e-9 and measured <= BOUND + 1e-6, text
    return text


def launch(tmp_path: Path, **args: str) -> LaunchedGraph:
    isolated_ros_env(tmp_path / "ros_logs")
    arguments = {
        "mode_manager": "true",
        "clock": "lockstep",
        "start_paused": "true",
        "sim_duration_s": "120.0",
        "mode_record": str(tmp_path / "record.json"),
        **args,
    }
    return LaunchedGraph(arguments, tmp_path / "graph.log").start()


def test_operating_sequence_bad_inputs_and_the_mode_manager_killed(tmp_path: Path) -> None:
    """boot -> hold -> stand -> run_policy with teleop walking forward -> set_autonomy true -> the autonomy
    source drives -> teleop takeover -> estop -> reset -> stand (the operation record checked here); then
    run_policy again: NaN and out-of-limit Twists refused or clipped and counted; a Joy with too few axes
    refused with a clear message; walking with the joystick's deadman held; a request in the wrong state
    refused with the reason; the mode manager killed -> the policy runner stops on the /cmd_vel silence and
    the driver holds the robot standing (bumpless). One graph: a launch costs as much as the steps."""
    graph = launch(tmp_path, controller="none")
    op = Operator()
    figures: list[str] = []
    try:
        op.ready(graph, peers=("policy_runner", "mode_manager"), hold_at=2.4)
        op.probe.run_until(2.4)
        st = op.wait_state("mode hold", lambda s: s["mode"] == "hold")
        assert op.driver_mode() == "hold"
        p, q = op.truth_at(2.4)
        assert p[2] > 0.7 and tilt_deg(q) < 5.0, (p, q)
        ok, msg = op.call("walk")  # mode_walk:=none: no walking controller in this graph
        assert not ok and msg.startswith("walk: no walking controller is reachable"), msg
        ok, msg = op.call("reset")
        assert not ok and "not damping" in msg
        assert op.call("stand")[0]
        op.wait_state("mode stand", lambda s: s["mode"] == "stand")

        with op.lock:
            op.teleop = (0.4, 0.0, 0.0)
        ok, msg = op.call("run_policy")
        assert ok, msg
        op.wait_state("mode run_policy", lambda s: s["mode"] == "run_policy")
        x0 = op.truth_at(2.4)[0][0]
        op.probe.run_until(5.5)
        st = op.wait_state("source teleop", lambda s: s["source"] == "teleop")
        assert st["mode"] == "run_policy" and not st["autonomy"] and op.driver_mode() == "active"
        p, q = op.truth_at(5.5)
        assert p[0] - x0 > 0.4 and p[2] > 0.6, (p, x0)
        figures.append(f"teleop walking 2.4-5.5 s: x advanced {p[0] - x0:.2f} m")

        with op.lock:
            op.teleop, op.autonomy = None, (0.0, 0.0, 0.5)
        assert op.set_autonomy(True)[0]
        op.wait_state("autonomy on", lambda s: s["autonomy"])
        yaw0 = yaw(op.truth_at(5.5)[1])
        op.probe.run_until(8.0)
        st = op.wait_state("source autonomy", lambda s: s["source"] == "autonomy")
        assert st["autonomy"] and st["mode"] == "run_policy"
        turned = yaw(op.truth_at(8.0)[1]) - yaw0
        assert turned > 0.4, turned
        figures.append(f"autonomy turning 5.5-8.0 s: yaw {turned:.2f} rad")

        with op.lock:
            op.teleop = (0.3, 0.0, 0.0)
        op.probe.run_until(9.0)
        st = op.wait_state(
            "takeover",
            lambda s: s["counts"]["takeovers"] == 1 and s["source"] == "teleop" and not s["autonomy"],
        )
        assert st["mode"] == "run_policy"
        with op.lock:
            op.teleop = (0.0, 0.0, 0.0)
        op.probe.run_until(10.0)
        with op.lock:
            op.teleop = op.autonomy = None
        ok, msg = op.call("estop")
        assert ok, msg
        op.wait_state("mode damp", lambda s: s["mode"] == "damp" and s["counts"]["estops"] == 1)
        op.probe.run_until(10.1)
        assert op.driver_mode() == "damping"
        ok, msg = op.call("stand")
        assert (ok, msg) == (False, "stand: the driver is in damping; call reset first")
        ok, msg = op.call("reset")
        assert ok, msg
        op.probe.run_until(12.5)
        assert op.driver_mode() == "hold"
        op.wait_state("mode hold", lambda s: s["mode"] == "hold")
        assert op.call("stand")[0]
        op.probe.run_until(13.0)
        st = op.wait_state("mode stand", lambda s: s["mode"] == "stand")
        p, q = op.truth_at(13.0)
        assert p[2] > 0.65 and tilt_deg(q) < 15.0, (p, q)
        ok, text = op.call("report")
        assert ok
        record = json.loads(text)
        saved = json.loads((tmp_path / "record.json").read_text())  # ~/report wrote it
        assert saved["counts"] == record["counts"] and saved["end_t"] == record["end_t"]

        # bad inputs in run_policy, a joystick walk, then the mode manager dies
        base = op.state()["counts"]
        ok, msg = op.call("run_policy")
        assert ok, msg
        op.probe.run_until(13.5)
        op.wait_state("mode run_policy", lambda s: s["mode"] == "run_policy")
        op.publish(op.pub_teleop, (math.nan, 0.0, 0.0))
        op.publish(op.pub_teleop, (0.0, 0.0, 10.0))  # clipped to wz_max
        op.publish(op.pub_teleop, (0.0, 0.0, 0.0))
        op.pub_joy.publish(op.joy_type(axes=[0.0, 0.0], buttons=[0] * 8))
        ok, msg = op.call("reset")
        assert (ok, msg) == (False, "reset: the robot is not damping (mode run_policy); nothing to reset")
        with op.lock:  # walk with the joystick: deadman (button 4) held, left stick 3/8 forward = 0.3 m/s
            op.joy = ([0.0, 0.375, 0.0, 0.0], [0, 0, 0, 0, 1, 0, 0, 0])
        op.probe.run_until(14.7)
        st = op.wait_state(
            "counted inputs",
            lambda s: (
                s["counts"]["inputs_refused"] >= base["inputs_refused"] + 2
                and s["counts"]["inputs_clipped"] >= base["inputs_clipped"] + 1
            ),
        )
        refused = st["counts"]["inputs_refused"] - base["inputs_refused"]
        clipped = st["counts"]["inputs_clipped"] - base["inputs_clipped"]
        assert (refused, clipped) == (2, 1), (base, st["counts"])
        assert "joy: refused a message with 2 axes; the mapping needs 4" in graph.log()
        op.probe.run_until(16.5)
        (p0, q0), p1 = op.truth_at(14.7), op.truth_at(16.5)[0]
        heading = yaw(q0)  # the robot turned under autonomy: forward is along its heading, not world x
        walked = float(np.dot(p1[:2] - p0[:2], [math.cos(heading), math.sin(heading)]))
        assert walked > 0.2 and op.driver_mode() == "active", walked
        assert op.state()["source"] == "teleop"
        figures.append(f"joystick walking 14.7-16.5 s: advanced along the heading {walked:.2f} m")
        os.kill(_descendant(graph.process.pid, "mode_manager_node"), signal.SIGKILL)
        # 1 s of /cmd_vel silence, then 2 s of zero velocity (the policy stops walking), the 2 s ramp
        op.probe.run_until(22.1)
        with op.lock:
            runner_states = list(op.runner_states)
        with op.probe.lock:
            modes_seen = list(op.probe.data.modes)
        assert runner_states[-1] == "hold" and modes_seen[-2:] == ["ramp", "hold"], (
            runner_states,
            modes_seen,
        )
        p, q = op.truth_at(22.1)
        assert p[2] > 0.65 and tilt_deg(q) < 15.0, (p, q)
        # let the driver publish the hand-back switch (after its blend), then stop
        op.probe.release()
        end = time.monotonic() + 20
        while not any((s["from"], s["to"]) == ("active", "ramp") for s in op.switches):
            assert time.monotonic() < end, op.switches
            time.sleep(0.05)
        switches = list(op.switches)
    finally:
        op.probe.release()
        close_graph(op.probe, graph)
    assert "no /cmd_vel for" in graph.log()

    counts = record["counts"]
    assert counts["takeovers"] == 1 and counts["estops"] == 1 and counts["refusals"] == 3, counts
    shares = record["shares_s"]
    # the script: teleop 2.42-5.5 s and 8.02-10.0 s, autonomy 5.52-8.02 s, idle the rest (0-2.42, 10.0-13.0)
    assert shares["teleop"] == pytest.approx(5.06, abs=0.2), shares
    assert shares["autonomy"] == pytest.approx(2.5, abs=0.2), shares
    assert shares["idle"] == pytest.approx(record["duration_s"] - 7.56, abs=0.3), shares
    modes = [e["detail"]["new"] for e in record["events"] if e["kind"] == "mode"]
    assert modes == ["hold", "stand", "run_policy", "damp", "hold", "stand"], modes
    kinds = {e["kind"] for e in record["events"]}
    assert {"mode", "source", "autonomy", "takeover", "estop", "refusal", "switch"} <= kinds

    assert [(s["from"], s["to"]) for s in switches[:2]] == [("hold", "active"), ("damping", "ramp")], switches
    figures += [check_switch(op.probe, s) for s in switches[:2]]
    estop_t = next(e["t"] for e in record["events"] if e["kind"] == "estop")
    step, joint = measured_step(op.probe, estop_t, 5)
    figures.append(f"e-stop (damping, never blended): step {step:.3f} ({joint})")
    figures.append(f"record: shares {shares}, counts {counts}")
    hand_back = [s for s in switches if (s["from"], s["to"]) == ("active", "ramp")]
    print("\n".join(figures))
    print(check_switch(op.probe, hand_back[0], "mode manager killed -> policy stopped, driver hold: "))


def _descendant(pid: int, needle: str) -> int:
    """The process id of a descendant of ``pid`` whose command line contains ``needle``."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            cmdlines[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    for child, cmd in cmdlines.items():
        p = child
        while p in parents and p != pid:
            p = parents[p]
        if p == pid and needle in cmd:
            return child
    raise AssertionError(f"no process '{needle}' under {pid}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_humanoid_teleop_in_a_terminal_moves_the_robot_and_latches_the_estop(tmp_path: Path) -> None:
    graph = launch(tmp_path, controller="policy")
    env = {k: v for k, v in os.environ.items() if k.startswith("ROS_")}
    socket = f"humanoid-teleop-test-{os.getpid()}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    command = " ".join(
        [
            "env",
            *(f"{k}={v}" for k, v in env.items()),
            "PYTHONUNBUFFERED=1",
            sys.executable,
            "-m",
            "humanoid_bringup.teleop",
        ]
    )
    op = Operator(peer=False)

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", "teleop"], capture_output=True, text=True
        ).stdout

    def keys(*k: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", "teleop", *k], check=True)

    def wait_screen(text: str, timeout: float = 30.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = screen()
            if text in s:
                return s
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not on the screen:\n{screen()}")

    subprocess.run([*tmux, "new-session", "-d", "-s", "teleop", "-x", "160", "-y", "12", command], check=True)
    try:
        end = time.monotonic() + 60
        while op.probe.node.count_publishers("/teleop/cmd_vel") < 2:  # humanoid-teleop's and our own
            assert time.monotonic() < end, screen()
            time.sleep(0.05)
        op.ready(graph, peers=("policy_runner", "mode_manager"), hold_at=None)
        assert op.probe.wait_for(lambda d: bool(d.modes) and d.modes[-1] == "active", 90.0), graph.log()[
            -3000:
        ]
        wait_screen("mode run_policy")
        x0 = op.truth_at(1e9)[0][0]
        keys("w", "w", "Up", "w")
        wait_screen("vx +0.40")
        assert op.probe.wait_for(lambda d: bool(d.truth_pos) and d.truth_pos[-1][0] - x0 > 0.3, 90.0), (
            f"the robot did not move forward\n{screen()}"
        )
        wait_screen("source teleop")
        keys("e")
        assert op.probe.wait_for(lambda d: d.modes[-1] == "damping", 30.0), screen()
        s = wait_screen("mode damp")
        assert "estop: ok" in s, s
        t_estop = op.probe.sim_time()
        assert op.probe.wait_for(lambda d: bool(d.joint_t) and d.joint_t[-1] > t_estop + 0.5, 30.0)
        assert op.driver_mode() == "damping"  # latched
        keys("1")
        s = wait_screen("stand: REFUSED")
        # damping, and once the robot has fallen (base tilt beyond 60 deg) the reason says it is down
        assert "the driver is in damping" in s or "robot is down" in s, s
        keys("q")
        end = time.monotonic() + 10
        while subprocess.run([*tmux, "has-session", "-t", "teleop"], capture_output=True).returncode == 0:
            assert time.monotonic() < end, "humanoid-teleop did not quit"
            time.sleep(0.1)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        close_graph(op.probe, graph)
    # the graph stopped: the mode manager wrote its record (mode_record) and logged its summary at shutdown
    saved = json.loads((tmp_path / "record.json").read_text())
    assert saved["counts"]["estops"] == 1 and saved["counts"]["refusals"] >= 1, saved["counts"]
    assert saved["shares_s"]["teleop"] > 0.0, saved["shares_s"]
    assert "operation record: " in graph.log()


def test_stand_with_the_wbc_and_bumpless_switches_to_the_policy_and_back(tmp_path: Path) -> None:
    """mode_stand:=wbc: stand starts the idle WBC, run_policy stops it (the driver ramps to its hold) and
    starts the policy, stand stops the policy and starts the WBC again; every switch within the bound."""
    graph = launch(tmp_path, controller="none", mode_stand="wbc")
    op = Operator()
    try:
        op.ready(
            graph, peers=("policy_runner", "state_estimator", "wbc_controller", "mode_manager"), hold_at=2.4
        )
        op.probe.run_until(2.4)
        op.wait_state("mode hold", lambda s: s["mode"] == "hold" and s["wbc_state"] == "idle")
        ok, msg = op.call("stand")
        assert ok and "WBC" in msg, msg
        op.probe.run_until(4.0)
        st = op.wait_state("WBC standing", lambda s: s["mode"] == "stand" and s["wbc_state"] == "run")
        assert op.driver_mode() == "active", st
        ok, msg = op.call("run_policy")
        assert ok, msg
        op.probe.run_until(7.5)  # the WBC hands back (2 s ramp to the driver's hold), then the policy runs
        st = op.wait_state(
            "policy running", lambda s: s["policy_state"] == "run" and s["wbc_state"] == "idle"
        )
        assert op.driver_mode() == "active" and st["mode"] == "run_policy", st
        ok, msg = op.call("stand")
        assert ok, msg
        op.probe.run_until(11.0)
        st = op.wait_state("WBC standing again", lambda s: s["wbc_state"] == "run" and s["mode"] == "stand")
        assert op.driver_mode() == "active", st
        p, q = op.truth_at(11.0)
        assert p[2] > 0.7 and tilt_deg(q) < 10.0, (p, q)
        op.probe.release()
        end = time.monotonic() + 20
        while len(op.switches) < 5 and time.monotonic() < end:
            time.sleep(0.05)
        switches = list(op.switches)
    finally:
        op.probe.release()
        close_graph(op.probe, graph)
    pairs = [(s["from"], s["to"]) for s in switches]
    # WBC takes over, hands back; the policy takes over, hands back; the WBC takes over
    assert pairs[:5] == [("hold", "active"), ("active", "ramp")] * 2 + [("hold", "active")], pairs
    print("\n".join(check_switch(op.probe, s) for s in switches[:5]))


def test_walk_with_the_walking_controller_and_back_to_stand(tmp_path: Path) -> None:
    """controller:=mpc_walk with the mode manager: the walking controller starts idle and the mode manager
    enters walk once the driver holds; a teleop /cmd_vel of 0.3 m/s through the mux walks the robot forward
    (ground truth); leaving walk is refused while the velocity is non-zero (within stand_settle_s) and, with
    stand_settle_s set to 0, while the walking controller still reports a step; then stand stops it and the
    driver's hold stands the robot (bumpless switches); the operation record counts the time in walk. Then
    /mode_manager/walk from the hold starts it again, and the e-stop stops it (damp)."""
    wall = [time.monotonic()]  # wall time of each phase, for the printed figures (never asserted)
    graph = launch(tmp_path, controller="mpc_walk")
    op = Operator()
    figures: list[str] = []
    try:
        op.ready(
            graph,
            peers=("policy_runner", "state_estimator", "walking_controller", "mode_manager"),
            hold_at=2.3,
        )
        wall.append(time.monotonic())
        op.probe.run_until(2.3)
        wall.append(time.monotonic())
        st = op.wait_state("mode walk", lambda s: s["mode"] == "walk" and s["walk_state"] == "run")
        assert st["last_event"]["kind"] in ("mode", "source", "switch"), st
        assert op.driver_mode() == "active", st  # the walking controller took over from the driver's hold
        x0, q0 = op.truth_at(2.3)
        with op.lock:
            op.teleop = (0.3, 0.0, 0.0)
        t_stop = op.probe.run_until(4.5)
        wall.append(time.monotonic())
        st = op.wait_state("source teleop", lambda s: s["source"] == "teleop")
        assert st["mode"] == "walk" and op.driver_mode() == "active", st
        p, q = op.truth_at(t_stop)
        forward = float(np.dot(p[:2] - x0[:2], [math.cos(yaw(q0)), math.sin(yaw(q0))]))
        figures.append(f"teleop 0.3 m/s 2.3-4.5 s: forward {forward:.2f} m, height {p[2]:.2f} m")
        # the first step starts after a 0.4 s weight transfer: at least half the commanded 0.3 m/s after it
        assert forward > 0.5 * 0.3 * (t_stop - 2.3 - 0.4) and p[2] > 0.6 and tilt_deg(q) < 15.0, figures
        with op.lock:
            op.teleop = (0.0, 0.0, 0.0)  # an idle keyboard: zeros
        ok, msg = op.call("stand")
        assert not ok and msg == "stand: the robot is walking; command zero velocity first", msg
        refusals = [msg]
        # without the velocity rule, the step in progress alone refuses leaving walk
        assert set_mode_manager_parameter(op.probe, "stand_settle_s", 0.0)
        t = t_stop
        while True:  # the walking controller finishes its step and brings its feet together
            t = op.probe.run_until(t + 0.1)
            ok, msg = op.call("stand")
            if ok:
                break
            refusals.append(msg)
            assert t < t_stop + 4.0, refusals
        t_stand = t
        wall.append(time.monotonic())
        figures.append(f"stand accepted {t_stand - t_stop:.1f} s after the zero command; refused: {refusals}")
        stepping = "stand: the walking controller is still stepping; wait until it stands on both feet"
        assert len(refusals) >= 2 and set(refusals[1:]) == {stepping}, refusals
        op.probe.run_until(t_stand + 2.1)  # the driver's 2 s ramp to its hold
        wall.append(time.monotonic())
        st = op.wait_state("stand, walking controller idle", lambda s: s["walk_state"] == "idle")
        assert st["mode"] == "stand" and op.driver_mode() == "hold", st
        p, q = op.truth_at(t_stand + 2.1)
        assert p[2] > 0.7 and tilt_deg(q) < 10.0, (p, q)
        ok, text = op.call("report")
        assert ok
        # /mode_manager/walk (the service) from the driver's hold; the e-stop stops the walking controller
        ok, msg = op.call("walk")
        assert ok and msg == "walk: walking (the walking controller follows /cmd_vel)", msg
        # the walking controller sets the driver's gains (an asynchronous parameter call, wall time) before
        # its first command: held ticks 0.1 s apart until the driver runs its commands, within 1 s
        t = op.probe.run_until(t_stand + 2.2)
        while op.driver_mode() != "active" and t < t_stand + 3.2:
            t = op.probe.run_until(t + 0.1)
        st = op.wait_state("walking again", lambda s: s["mode"] == "walk" and s["walk_state"] == "run")
        assert op.driver_mode() == "active", st
        assert op.call("estop")[0]
        op.probe.run_until(t + 0.1)
        st = op.wait_state("damp, walking controller idle", lambda s: s["mode"] == "damp")
        st = op.wait_state("walking controller idle", lambda s: s["walk_state"] == "idle")
        assert op.driver_mode() == "damping" and st["counts"]["estops"] == 1, st
        wall.append(time.monotonic())
        op.probe.release()
        end = time.monotonic() + 20
        while len(op.switches) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        switches = list(op.switches)
    finally:
        op.probe.release()
        close_graph(op.probe, graph)
    record = json.loads(text)
    modes = record["modes_s"]
    figures.append(f"record: modes_s {modes}, shares_s {record['shares_s']}")
    figures.append("wall per phase (s): " + ", ".join(f"{b - a:.1f}" for a, b in itertools.pairwise(wall)))
    print("\n".join(figures))
    # walk from the driver's hold (about 2.1 s) until stand; teleop drove 2.2 s of it
    assert t_stand - 2.3 < modes["walk"] < t_stand - 1.9 and modes["stand"] > 2.0, modes
    assert record["shares_s"]["teleop"] >= 2.1 and record["counts"]["faults"] == 0, record["counts"]
    reasons = [e["detail"]["reason"] for e in record["events"] if e["kind"] == "refusal"]
    assert reasons == refusals, (reasons, refusals)
    pairs = [(s["from"], s["to"]) for s in switches]
    assert pairs[:2] == [("hold", "active"), ("active", "ramp")], pairs  # walking takes over, hands back
    print("\n".join(check_switch(op.probe, s) for s in switches[:2]))


def _short_operated_run(out: Path) -> tuple[Operator, dict[str, Any]]:
    """hold -> run_policy with teleop 0.4 m/s -> autonomy turning -> teleop takeover -> e-stop, on 5 s of
    simulated time; the operator's inputs on the 20 ms grid, its service calls at held ticks."""
    out.mkdir(parents=True)
    graph = launch(out, controller="none")
    op = Operator()
    try:
        op.ready(graph, peers=("policy_runner", "mode_manager"), hold_at=2.4)
        op.probe.run_until(2.4)
        op.wait_state("mode hold", lambda s: s["mode"] == "hold")
        with op.lock:
            op.teleop = (0.4, 0.0, 0.0)
        assert op.call("run_policy")[0]
        op.probe.run_until(3.6)
        with op.lock:
            op.teleop, op.autonomy = None, (0.0, 0.0, 0.5)
        assert op.set_autonomy(True)[0]
        op.probe.run_until(4.4)
        with op.lock:
            op.teleop = (0.3, 0.0, 0.0)
        op.probe.run_until(4.8)
        with op.lock:
            op.teleop = op.autonomy = None
        assert op.call("estop")[0]
        op.probe.run_until(5.0)
        ok, text = op.call("report")
        assert ok
    finally:
        op.probe.release()
        close_graph(op.probe, graph)
    return op, json.loads(text)


def test_a_lockstep_run_through_the_mode_manager_is_reproducible(tmp_path: Path) -> None:
    """The mode manager is a lockstep peer: the same operated run twice gives the same ground truth and
    joint states bit for bit, and the same operation record (shares, counts, events; see below for times)."""
    (a, rec_a), (b, rec_b) = _short_operated_run(tmp_path / "a"), _short_operated_run(tmp_path / "b")
    for op in (a, b):
        assert not op.probe.lockstep_status.get("dropped"), op.probe.lockstep_status
    da, db = a.probe.data, b.probe.data
    n = min(sum(t <= 5.0 for t in da.truth_t), sum(t <= 5.0 for t in db.truth_t))
    assert n > 2000
    assert da.truth_t[:n] == db.truth_t[:n]
    diffs = []
    for name, stamps in (("truth_pos", da.truth_t), ("truth_quat_wxyz", da.truth_t), ("joint_q", da.joint_t)):
        xs, ys = getattr(da, name)[:n], getattr(db, name)[:n]
        first = next((i for i, (x, y) in enumerate(zip(xs, ys, strict=True)) if x != y), None)
        if first is not None:
            diffs.append(f"{name} first at t = {stamps[first]:.3f} s")
    assert not diffs, f"the runs differ: {diffs}"
    assert da.modes == db.modes and da.modes[-1] == "damping", (da.modes, db.modes)
    # the record: shares, counts and every event the same; an event the mode manager observed on another
    # node's state topic (a fault, a mode change that followed the driver or the runner) carries the tick at
    # which it saw the message: those topics carry no stamp, so that time may differ by one tick
    events_a, events_b = rec_a.pop("events"), rec_b.pop("events")
    assert rec_a == rec_b, {k: (rec_a[k], rec_b.get(k)) for k in rec_a if rec_a[k] != rec_b.get(k)}
    assert len(events_a) == len(events_b), (events_a, events_b)
    for x, y in zip(events_a, events_b, strict=True):
        tx, ty = x.pop("t"), y.pop("t")
        assert x == y, (x, y)
        observed = x["kind"] in ("fault", "mode")
        assert abs(tx - ty) <= (0.002 + 1e-9 if observed else 0.0), (tx, ty, x)
    assert rec_a["counts"]["takeovers"] == 1 and rec_a["counts"]["estops"] == 1, rec_a["counts"]
    assert da.truth_pos[n - 1][0] > 0.2  # it walked
