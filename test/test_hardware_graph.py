"""End-to-end: ``humanoid-launch launch/sim.launch.yaml hardware:=unitree_g1 emulator:=true`` - the robot
driver and the G1 emulator in separate processes, the G1 protocol on DDS (cyclonedds 0.10.2 over loopback),
ROS 2 on top, lockstep.

One launch checks, in order: the emulated G1 starts with its sport service on -> the driver ramps and holds
but refuses to let a controller take the robot, saying why (diagnostics WARN, the refusal); the service
released (``/g1_emulator/sport_mode`` false) -> the block clears; the robot's remote arrives on ``/joy``;
LowState stops (``/g1_emulator/pause_lowstate``) -> damping, a diagnostics ERROR naming the lost LowState, and
damping frames received by the emulated robot.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("unitree_sdk2py.core.channel", reason="the Unitree SDK is installed by `make setup`")

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph
from humanoid_control.model.robot_config import load_robot_config

pytestmark = pytest.mark.slow

CONFIG = load_robot_config("g1")
OK, WARN, ERROR = 0, 1, 2  # diagnostic_msgs/DiagnosticStatus levels


class Watch:
    """Extra subscriptions of the probe: driver diagnostics (level, message), /joy, the emulator's status."""

    def __init__(self) -> None:
        self.diag: list[tuple[int, str, dict[str, str]]] = []
        self.joy: list[Any] = []
        self.status: list[dict[str, Any]] = []

    def setup(self, node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import Joy
        from std_msgs.msg import String

        self.remote_pub = node.create_publisher(Joy, "/g1_emulator/remote", 10)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 50)
        node.create_subscription(Joy, "/joy", self.joy.append, 50)
        node.create_subscription(
            String, "/g1_emulator/status", lambda m: self.status.append(json.loads(m.data)), 10
        )

    def _on_diag(self, msg: Any) -> None:
        for s in msg.status:
            if s.name.startswith("robot_driver"):
                level = s.level[0] if isinstance(s.level, bytes) else int(s.level)  # a byte in rclpy
                self.diag.append((level, s.message, {kv.key: kv.value for kv in s.values}))


def _fail(graph: LaunchedGraph, what: str) -> str:
    return f"{what}\n--- launch log ---\n{graph.log()[-4000:]}"


def test_unitree_g1_through_the_emulator(tmp_path: Path) -> None:
    from sensor_msgs.msg import JointState, Joy
    from std_srvs.srv import SetBool

    watch = Watch()
    probe = GraphProbe(subscribe_description=False, contacts=False, name="hw_probe", setup=watch.setup)
    graph = LaunchedGraph(
        {
            "hardware": "unitree_g1",
            "emulator": "true",
            "emulator_sport_mode": "true",
            "clock": "lockstep",
            "ramp_duration_s": "0.5",  # the soft start, shortened: the checks start in hold
            "sim_duration_s": "120",
            "dds_domain": str(100 + os.getpid() % 50),  # not the in-process tests' domains (160-229)
        },
        tmp_path / "launch.log",
    ).start()
    try:
        # the sport service holds the robot: the motors do not follow; once the ramp ends the driver holds
        assert probe.wait_for(lambda d: "hold" in d.modes, 120), _fail(graph, "no hold")
        assert probe.wait_for(lambda d: any(lv == WARN for lv, _, _ in watch.diag), 30), _fail(
            graph, "no warning"
        )
        _, message, _ = [x for x in watch.diag if x[0] == WARN][-1]
        assert "motors do not follow" in message and "MotionSwitcher" in message
        # a controller's command in hold is refused with that reason (the robot stays in hold)
        cmd = JointState(name=CONFIG.joint_names, position=CONFIG.array("default").tolist())
        for _ in range(5):
            cmd.header.stamp = probe.node.get_clock().now().to_msg()
            probe.cmd_pub.publish(cmd)
        assert probe.wait_for(lambda d: "sport" in d.diagnostics[-1].get("last_refusal", ""), 30), _fail(
            graph, "command not refused"
        )
        assert "active" not in probe.data.modes

        # the sport service released: the motors follow, the block clears
        ok, msg = probe._call(SetBool, "/g1_emulator/sport_mode", SetBool.Request(data=False), 10.0)
        assert ok, msg
        n = len(watch.diag)
        assert probe.wait_for(lambda d: any(lv == OK for lv, _, _ in watch.diag[n:]), 60), _fail(
            graph, "block not cleared"
        )

        # the robot's remote on /joy (joy_node layout: B is button 1, the mode manager's e-stop)
        remote = Joy(buttons=[0] * 16, axes=[0.0, 0.5, 0.0, 0.0])
        remote.buttons[9] = 1  # B in the remote's own button order (unitree_hg.REMOTE_BUTTONS)
        watch.remote_pub.publish(remote)
        assert probe.wait_for(
            lambda d: any(j.buttons[1] == 1 and abs(j.axes[1] - 0.5) < 1e-6 for j in watch.joy), 30
        ), _fail(graph, "remote not on /joy")

        # LowState lost -> damping, diagnostics error, damping frames on the wire
        ok, msg = probe._call(SetBool, "/g1_emulator/pause_lowstate", SetBool.Request(data=True), 10.0)
        assert ok, msg
        assert probe.wait_for(lambda d: d.modes[-1] == "damping", 60), _fail(graph, "no damping")
        assert probe.wait_for(
            lambda d: any(lv == ERROR and "LowState lost" in m for lv, m, _ in watch.diag),
            30,
        ), _fail(graph, "no diagnostics error")
        assert probe.wait_for(lambda d: bool(watch.status) and watch.status[-1]["last_kp_max"] == 0.0, 30), (
            _fail(graph, "no damping frame applied by the emulated robot")
        )
        assert watch.status[-1]["crc_dropped"] == 0
    finally:
        close_graph(probe, graph)
