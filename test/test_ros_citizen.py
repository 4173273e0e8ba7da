"""The stack under the ROS 2 tools as a user meets them: one name per node, clean stops in every way people
stop a graph, lockstep start-up that waits for its declared peers (real processes, real DDS, MuJoCo)."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
from humanoid_control.ros.lockstep import PeerTable

FULL = {
    "mode_manager": "true",
    "perception": "true",
    "autonomy": "true",
    "controller": "policy",
    "clock": "lockstep",
    "scene": "autonomy",
}
NODES = {
    "robot_driver",
    "robot_description",
    "tf_publisher",
    "policy_runner",
    "state_estimator",
    "mode_manager",
    "camera_node",
    "perception_node",
    "autonomy_node",
}
BAD_OUTPUT = ("Traceback", "terminate called", "context is invalid", "Failed to publish log message")


def test_peer_table_first_ack_pending() -> None:
    table = PeerTable()
    table.handle("join a", 0.0)
    table.handle("join b", 0.0)
    assert table.first_ack_pending(["a", "b", "c"]) == ["a", "b"]
    table.handle("a", 0.0)
    assert table.first_ack_pending(["a", "b"]) == ["b"]
    assert table.missing(0.0) == ["b"]


class Watcher:
    """A plain rclpy node in its own context: graph queries and service calls, as ``ros2 node list`` and
    ``ros2 service call`` would make them."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("citizen_watcher", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def node_names(self) -> list[str]:
        return [n for n, _ns in self.node.get_node_names_and_namespaces()]

    def call(self, service: str, timeout: float = 10.0) -> tuple[bool, str]:
        from std_srvs.srv import Trigger

        client = self.node.create_client(Trigger, service)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                return False, f"{service} not available"
            future = client.call_async(Trigger.Request())
            self.executor.spin_until_future_complete(future, timeout_sec=timeout)
            if not future.done() or future.result() is None:
                return False, f"{service} did not answer"
            return bool(future.result().success), str(future.result().message)
        finally:
            self.node.destroy_client(client)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def _until(what: str, cond: Any, graph: LaunchedGraph, timeout: float = 180.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if not graph.running():
            raise AssertionError(f"the graph stopped while waiting for {what}:\n{graph.log()[-4000:]}")
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}:\n{graph.log()[-4000:]}")
        time.sleep(0.1)


def _call_until_accepted(watcher: Watcher, service: str, graph: LaunchedGraph) -> None:
    answers: list[str] = []

    def accepted() -> bool:
        ok, why = watcher.call(service)
        answers.append(why)
        return ok

    _until(f"{service} to accept (answers: {answers[-3:]})", accepted, graph)


def _started(log: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"process started: (\S+) \[pid (\d+)\]", log)}


@pytest.mark.slow
@pytest.mark.parametrize("way", ["sigint_launcher", "sigint_group", "sigterm_nodes"])
def test_full_graph_names_and_clean_stop(tmp_path: Path, way: str) -> None:
    isolated_ros_env(tmp_path / "ros_logs")
    graph = LaunchedGraph(FULL, tmp_path / "graph.log").start()
    watcher = Watcher()
    try:
        _until(f"the nodes {sorted(NODES)}", lambda: set(watcher.node_names()) >= NODES, graph)
        # the services' helper nodes too, before the names are counted
        _until("the helper nodes", lambda: "mode_manager_calls" in watcher.node_names(), graph)
        _call_until_accepted(watcher, "/mode_manager/run_policy", graph)
        _call_until_accepted(watcher, "/autonomy_node/start", graph)  # autonomy on: its close() has work
        names = watcher.node_names()
        twice = {n: c for n, c in collections.Counter(names).items() if c > 1}
        assert not twice, f"nodes in the graph more than once: {twice} (all: {sorted(names)})"
        pids = _started(graph.log())
        assert set(pids) >= NODES, pids
        assert graph.process is not None
        if way == "sigint_launcher":
            graph.process.send_signal(signal.SIGINT)
        elif way == "sigint_group":
            # a terminal's Ctrl-C reaches every process of the group, and the launcher forwards one more
            graph.process.send_signal(signal.SIGINT)
            for pid in pids.values():
                os.killpg(pid, signal.SIGINT)
        else:  # systemd / docker stop: SIGTERM to each node
            for pid in pids.values():
                os.kill(pid, signal.SIGTERM)
        rc = graph.wait(90.0)
    finally:
        watcher.close()
        graph.stop()
    log = graph.log()
    assert rc == 0, f"launcher exit code {rc}:\n{log[-4000:]}"
    for name, pid in pids.items():
        assert f"process {name} [pid {pid}] finished cleanly" in log, f"{name}:\n{log[-4000:]}"
    for bad in BAD_OUTPUT:
        assert bad not in log, f"{bad!r} in the graph's output ({way}):\n{log[-6000:]}"


@pytest.mark.slow
def test_declared_peer_that_never_comes_stops_the_run_naming_it(tmp_path: Path) -> None:
    env = {**os.environ, **isolated_ros_env(tmp_path / "ros_logs")}
    cmd = [
        sys.executable,
        "-m",
        "humanoid_control.driver.robot_driver_node",
        "--ros-args",
        "-p",
        "lockstep_peers:=ghost_node",
        "-p",
        "lockstep_startup_timeout_s:=2.0",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "ghost_node" in out and "did not join" in out, out[-3000:]
    for bad in ("Traceback", "terminate called"):
        assert bad not in out, out[-3000:]


@pytest.mark.slow
def test_unpaused_start_under_load_keeps_every_peer_and_repeats(tmp_path: Path) -> None:
    from humanoid_bringup.evaluation.startup_eval import PEERS, run_startup_eval

    res = run_startup_eval(tmp_path, runs=2, burners=2, seconds=2.0, policy_at=0.7, autonomy_at=1.2)
    for run in res["runs"]:
        assert run["dropped"] == [] and not run["drop_logged"], run
        assert set(PEERS) <= set(run["declared"]), run
    assert res["no_peer_dropped"] == 2
    assert res["identical"], [r["fingerprint"] for r in res["runs"]]
    record = res["record"]
    assert len(record["truth"]) >= 20  # every 0.1 s of 2 s
    assert record["truth"][-1][3] > 0.5  # the base is up (z, m)
    assert record["task_states"], record
