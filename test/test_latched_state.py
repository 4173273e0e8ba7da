"""Latched state topics show the present, and stamps are exact.

- ``to_time_msg`` rounds to the nearest nanosecond with a carry: 15000 accumulated 2 ms steps are 30 s 0 ns
  (the simulator's time is a float sum of its steps), not 29 s 999999999 ns.
- The walking controller alone (a process of its own, no driver): a late subscriber to ``/walking/plan`` and
  ``/walking/footsteps`` gets the current (empty, standing) plan at once; ``/wbc/markers`` is not advertised.
- A launched graph (driver, policy runner, mode manager; lockstep): after the driver went ramp -> hold ->
  damping, a subscriber created late gets exactly one message on ``/robot_driver/mode`` (the current mode)
  and on ``/mode_manager/state`` (the current state), then the same stream as a subscriber that was there
  from the start; every ``/clock`` stamp lies exactly on the 2 ms grid.
- A walking graph (``controller:=mpc_walk``): ``/walking/plan`` is empty (latched) before walking, has
  footsteps while walking and is empty again once the robot stands; a late subscriber then gets that only.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from humanoid_control.ros.node_utils import time_parts, to_time_msg


def _wait(
    what: Callable[[], str], cond: Callable[[], bool], timeout: float, alive: Callable[[], bool]
) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end or not alive():
            raise AssertionError(f"timed out: {what()}")
        time.sleep(0.02)


# ------------------------------------------------------------------------------------------ stamps
def test_accumulated_ticks_give_exact_stamps() -> None:
    t = 0.0
    for k in range(1, 20001):  # 40 s of 2 ms ticks summed as the simulator sums them
        t += 0.002
        sec, nanosec = time_parts(t)
        assert sec * 1_000_000_000 + nanosec == k * 2_000_000, (k, repr(t), sec, nanosec)
    stamp = to_time_msg(sum([0.002] * 15000))  # 29.99999999999425 s
    assert (stamp.sec, stamp.nanosec) == (30, 0)


@pytest.mark.parametrize(
    ("seconds", "parts"),
    [
        (0.0, (0, 0)),
        (1.5, (1, 500_000_000)),
        (2.9999999996, (3, 0)),  # rounds up to the whole second: carried
        (2.9999999994, (2, 999_999_999)),
        (-0.25, (-1, 750_000_000)),  # nanosec stays in [0, 1e9)
    ],
)
def test_time_parts_round_to_the_nearest_nanosecond(seconds: float, parts: tuple[int, int]) -> None:
    assert time_parts(seconds) == parts
    msg = to_time_msg(seconds)
    assert (msg.sec, msg.nanosec) == parts


# ------------------------------------------------------------------------------------------ walking node
def test_walking_node_latches_its_standing_plan_and_advertises_no_wbc_markers(tmp_path: Path) -> None:
    import rclpy
    from nav_msgs.msg import Path as PathMsg
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from visualization_msgs.msg import Marker, MarkerArray

    log = open(tmp_path / "walking.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "humanoid_control.walking.walking_node",
            "--ros-args",
            "-p",
            "autostart:=false",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("latched_plan_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    lock = threading.Lock()
    plans: list[Any] = []
    footsteps: list[Any] = []

    def keep(into: list[Any]) -> Callable[[Any], None]:
        def on(msg: Any) -> None:
            with lock:
                into.append(msg)

        return on

    def node_publishers() -> set[str]:
        try:
            found = node.get_publisher_names_and_types_by_node("walking_controller", "/")
        except Exception:  # the node is not discovered yet
            return set()
        return {name for name, _ in found}

    def what() -> str:
        tail = (tmp_path / "walking.log").read_text(errors="replace")[-3000:]
        return f"publishers {sorted(node_publishers())}; log:\n{tail}"

    def alive() -> bool:
        return proc.poll() is None

    try:
        # the node is up: its last publisher (/walking/status, created after the plan's) is discovered
        _wait(what, lambda: {"/walking/plan", "/walking/status"} <= node_publishers(), 120.0, alive)
        assert "/wbc/markers" not in node_publishers(), what()  # created before /walking/plan when it was
        # a late subscriber, as `ros2 topic echo --once` (transient-local, reliable)
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(PathMsg, "/walking/plan", keep(plans), latched)
        node.create_subscription(MarkerArray, "/walking/footsteps", keep(footsteps), latched)
        _wait(
            lambda: f"{len(plans)} plans, {len(footsteps)} footsteps; {what()}",
            lambda: bool(plans) and bool(footsteps),
            30.0,
            alive,
        )
        with lock:
            plan, steps = plans[0], footsteps[0]
        assert plan.header.frame_id == "odom" and list(plan.poses) == []  # standing: nothing planned
        assert [m.action for m in steps.markers] == [Marker.DELETEALL]
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        spinner.join(timeout=5)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        log.close()


# ------------------------------------------------------------------------------------------ launched graph
@pytest.mark.slow
def test_late_subscribers_get_the_current_driver_mode_and_mode_manager_state(tmp_path: Path) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import String

    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph
    from humanoid_control.ros.lockstep import tick_stream_qos

    latched = QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    lock = threading.Lock()
    live_states: list[dict[str, Any]] = []  # /mode_manager/state from the start
    late_modes: list[str] = []
    late_states: list[dict[str, Any]] = []
    clock_ns: list[int] = []

    def setup(node: Any) -> None:
        def on_state(msg: Any) -> None:
            with lock:
                live_states.append(json.loads(msg.data))

        def on_clock(msg: Any) -> None:
            with lock:
                clock_ns.append(msg.clock.sec * 1_000_000_000 + msg.clock.nanosec)

        node.create_subscription(String, "/mode_manager/state", on_state, latched)
        node.create_subscription(Clock, "/clock", on_clock, tick_stream_qos(4000))

    graph = LaunchedGraph(
        {
            "mode_manager": "true",
            "controller": "none",
            "clock": "lockstep",
            "start_paused": "true",
            "sim_duration_s": "60.0",
        },
        tmp_path / "graph.log",
    ).start()
    probe = GraphProbe(
        subscribe_description=False, name="latched_probe", contacts=False, lockstep_peer=True, setup=setup
    )

    def log() -> str:
        return f"\n--- launch log ---\n{graph.log()[-4000:]}"

    def live() -> tuple[list[str], list[dict[str, Any]]]:
        with probe.lock:
            modes = list(probe.data.modes)
        with lock:
            return modes, list(live_states)

    try:
        probe.start_graph(peers=("policy_runner", "mode_manager"), running=graph.running, hold_at=2.4)
        probe.run_until(2.4)  # the boot ramp (2 s) is over: hold
        ok, why = probe.call_trigger("/robot_driver/estop")
        assert ok, why
        probe.run_until(2.5)  # held here: nothing is published until the next tick
        _wait(
            lambda: f"modes {live()[0]}, mode manager {live()[1][-1:]}{log()}",
            lambda: (
                live()[0][-2:] == ["hold", "damping"]
                and live()[1][-1:] != []
                and live()[1][-1]["mode"] == "damp"
            ),
            30.0,
            graph.running,
        )
        modes, states = live()
        assert modes == ["ramp", "hold", "damping"], modes  # the driver changed mode more than once
        assert len({s["mode"] for s in states}) > 1, states

        # subscribers created now, late, on the probe's node (spun by its thread)
        def on_late_mode(msg: Any) -> None:
            with lock:
                late_modes.append(msg.data)

        def on_late_state(msg: Any) -> None:
            with lock:
                late_states.append(json.loads(msg.data))

        probe.node.create_subscription(String, "/robot_driver/mode", on_late_mode, latched)
        probe.node.create_subscription(String, "/mode_manager/state", on_late_state, latched)
        _wait(
            lambda: f"late: {late_modes}, {late_states}{log()}",
            lambda: bool(late_modes) and bool(late_states),
            30.0,
            graph.running,
        )
        assert live() == (modes, states), "published while simulated time was held"
        with lock:
            assert late_modes == ["damping"], late_modes  # the present, not the oldest retained (ramp)
            assert late_states == [states[-1]], (late_states, states[-3:])
        # more changes: the late subscribers follow the same stream as the subscribers from the start (had
        # they got a stale message first, it would show here, before the newer ones)
        ok, why = probe.call_trigger("/robot_driver/reset")
        assert ok, why
        probe.run_until(3.6)  # ramp again; the mode manager's state again (each second at least)

        def same_stream() -> bool:
            now_modes, now_states = live()
            with lock:
                return late_modes == now_modes[2:] and late_states == now_states[len(states) - 1 :]

        _wait(lambda: f"late {late_modes} / live {live()[0]}{log()}", same_stream, 30.0, graph.running)
        now_modes, now_states = live()
        assert now_modes[3:] and now_modes[3] == "ramp", now_modes
        assert len(now_states) > len(states), now_states
        with lock:
            stamps = list(clock_ns)
    finally:
        close_graph(probe, graph)
    # every tick stamp exactly on the 2 ms grid (3.0 s was 2 s 999999999 ns when the fraction was clamped)
    assert stamps and stamps[-1] >= 3_600_000_000, stamps[-3:]
    assert all(ns % 2_000_000 == 0 for ns in stamps), [ns for ns in stamps if ns % 2_000_000][:5]
    assert 3_000_000_000 in stamps


@pytest.mark.slow
def test_walking_plan_is_latched_while_walking_and_empty_once_standing(tmp_path: Path) -> None:
    from nav_msgs.msg import Path as PathMsg
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from humanoid_bringup.evaluation.wbc_graph import WbcGraph

    latched = QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    lock = threading.Lock()
    live: list[int] = []  # poses per /walking/plan, from the start
    late: list[int] = []

    def keep(into: list[int]) -> Callable[[Any], None]:
        def on(msg: Any) -> None:
            with lock:
                into.append(len(msg.poses))

        return on

    g = WbcGraph(tmp_path, controller="mpc_walk", sim_duration_s=120.0)
    g.probe.node.create_subscription(PathMsg, "/walking/plan", keep(live), latched)
    try:
        g.start()
        with lock:
            assert live == [0], live  # standing: the empty plan, latched since start-up
        t = g.run_to(g.now() + 0.5)
        g.set_cmd_vel(0.3)
        t = g.run_to(t + 2.0)
        with lock:
            assert any(n > 0 for n in live), live  # walking: plans with footsteps
        g.set_cmd_vel(0.0)
        # the walking controller finishes its step and stands: the plan goes back to empty
        assert g.run_while(lambda: not live or live[-1] != 0, 5.0), (live, g.latest_status())
        g.run_to(g.now() + 0.05)  # the next /walking/status rows (50 Hz) agree: standing
        assert g.latest_status().get("walking") == 0.0 and live[-1] == 0, (g.latest_status(), live)
        g.probe.node.create_subscription(PathMsg, "/walking/plan", keep(late), latched)
        _wait(lambda: f"late {late}", lambda: bool(late), 30.0, g.running)
        with lock:
            assert late == [0], late  # the current plan (standing), not the last walking one
    finally:
        g.stop()
