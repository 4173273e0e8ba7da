"""End-to-end: launch file -> separate ROS 2 processes.

Driver on MuJoCo, description; real rclpy, lockstep.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height

pytestmark = pytest.mark.slow

CONFIG = load_robot_config("g1")
NOMINAL = standing_base_height(CONFIG, load_pinocchio_model(CONFIG), CONFIG.array("default"))


class HoldController:
    """Answers each /joint_states with a default-pose command (same stamp); can inject bad commands."""

    def __init__(self) -> None:
        from sensor_msgs.msg import JointState

        self.JointState = JointState
        self.enabled = True
        self.inject: list[tuple[list[str], list[float]]] = []
        self.sent = 0

    def __call__(self, state: Any) -> Any:
        if not self.enabled:
            return None
        cmd = self.JointState()
        cmd.header.stamp = state.header.stamp
        if self.inject:
            cmd.name, cmd.position = self.inject.pop(0)
        else:
            cmd.name, cmd.position = CONFIG.joint_names, CONFIG.array("default").tolist()
        self.sent += 1
        return cmd


@pytest.fixture
def graph_log(tmp_path: Path) -> Path:
    return tmp_path / "launch.log"


def _fail(graph: LaunchedGraph, what: str) -> str:
    return f"{what}\n--- launch log ---\n{graph.log()[-4000:]}"


def test_holds_default_pose_10s_and_serves_description_late(graph_log: Path) -> None:
    # paused start: the probe's subscriptions are matched before simulated time starts; as a lockstep peer it
    # sees every tick (a driver running free would outrun the writers' 10-sample history)
    probe = GraphProbe(subscribe_description=False, lockstep_peer=True)
    graph = LaunchedGraph(
        {"clock": "lockstep", "sim_duration_s": "12.6", "start_paused": "true"}, graph_log
    ).start()
    try:
        probe.start_graph(running=graph.running)
        assert probe.wait_for(lambda d: len(d.truth_t) > 0 and d.truth_t[-1] >= 1.0, 60), _fail(
            graph, "no ground truth"
        )
        probe.subscribe_description()  # a late joiner still gets the latched URDF
        assert probe.wait_for(lambda d: d.robot_description is not None, 20), _fail(graph, "no description")
        assert graph.wait(120) == 0, _fail(graph, "graph did not finish cleanly")
        probe.wait_for(lambda d: d.truth_t[-1] >= 12.5, 5)
    finally:
        close_graph(probe, graph)
    t, z = probe.base_heights()
    hold = t >= 2.5
    assert t[0] == 0.0, f"first sample at {t[0]} s: the driver did not wait for the probe"
    assert np.allclose(np.diff(t), 0.002), "a tick of the run was not observed"
    assert t[-1] >= 12.5 and t[hold][-1] - t[hold][0] >= 10.0, (t[0], t[-1])
    assert np.abs(z[hold] - NOMINAL).max() <= 0.02, f"max error {np.abs(z[hold] - NOMINAL).max():.4f} m"
    urdf_joints = {
        j.get("name")
        for j in ET.fromstring(probe.data.robot_description).iter("joint")
        if j.get("type") in ("revolute", "continuous")
    }
    assert probe.data.joint_names == CONFIG.joint_names
    assert set(probe.data.joint_names) == urdf_joints
    diag = probe.data.diagnostics[-1]
    assert diag["mode"] == "hold" and int(diag["overruns"]) >= 0


def _active_graph(graph_log: Path, controller: HoldController) -> tuple[GraphProbe, LaunchedGraph]:
    probe = GraphProbe(controller=controller, subscribe_description=False)
    graph = LaunchedGraph({"clock": "lockstep"}, graph_log).start()
    ok = probe.wait_for(lambda d: bool(d.modes) and d.modes[-1] == "active", 90)
    if not ok:
        close_graph(probe, graph)
        pytest.fail(_fail(graph, f"driver never became active (modes {probe.data.modes})"))
    return probe, graph


def test_bad_commands_are_refused_and_robot_stays_up(graph_log: Path) -> None:
    controller = HoldController()
    probe, graph = _active_graph(graph_log, controller)
    try:
        t_start = probe.sim_time()
        names = CONFIG.joint_names
        default = CONFIG.array("default").tolist()
        controller.inject = [
            (names, [math.nan, *default[1:]]),
            (names, default[:-3]),
            ([*names[:-1], "tail_joint"], default),
        ]
        assert probe.wait_for(lambda d: not controller.inject and d.joint_t[-1] > t_start + 2.0, 60)
        assert probe.wait_for(
            lambda d: (
                bool(d.diagnostics)
                and int(d.diagnostics[-1]["commands_refused"]) >= 3
                and float(d.joint_t[-1]) > t_start + 2.0
            ),
            30,
        ), _fail(graph, "refusals not counted")
        diag = probe.last_diagnostics()
        assert diag["mode"] == "active"
        assert "unknown joint names" in diag["last_refusal"]
        assert "refused /joint_commands: non-finite position" in graph.log()
        t, z = probe.base_heights()
        after = t >= t_start
        assert np.abs(z[after] - NOMINAL).max() <= 0.02
    finally:
        close_graph(probe, graph)


def test_watchdog_enters_damping_within_configured_ticks(graph_log: Path) -> None:
    controller = HoldController()
    probe, graph = _active_graph(graph_log, controller)
    try:
        t_stop = probe.sim_time() + 0.5
        assert probe.wait_for(lambda d: d.joint_t[-1] >= t_stop, 30)
        controller.enabled = False
        assert probe.wait_for(lambda d: d.modes[-1] == "damping", 30), _fail(graph, "no damping")
        assert probe.wait_for(lambda d: bool(d.diagnostics) and d.diagnostics[-1]["mode"] == "damping", 10), (
            _fail(graph, str(probe.data.diagnostics[-2:]))
        )
        diag = probe.last_diagnostics()
        assert "watchdog" in diag["mode_reason"]
        gap = int(diag["mode_entered_tick"]) - int(diag["last_command_tick"])
        assert gap == int(diag["watchdog_ticks"]) + 1, diag
        controller.enabled = True  # commands after the trip do not leave damping: it is latched
        sent = controller.sent
        assert probe.wait_for(
            lambda d: (
                controller.sent > sent + 100
                and int(d.diagnostics[-1]["commands_ignored"]) > 0
                and int(d.diagnostics[-1]["tick"]) > int(diag["mode_entered_tick"]) + 100
            ),
            30,
        ), _fail(graph, str(probe.last_diagnostics()))
        assert probe.last_diagnostics()["mode"] == "damping"
        assert probe.data.modes[-1] == "damping"
    finally:
        close_graph(probe, graph)


def test_estop_latches_until_reset(graph_log: Path) -> None:
    # the probe is a lockstep peer and calls the e-stop and the reset at held ticks: the robot sags in damping
    # for 0.1 s of simulated time in every run. A driver running free between the calls (no controller pacing
    # it) sagged for a wall-clock-dependent time, and a robot left in damping for more than about 0.25 s tips
    # over when the reset ramp stands it up (measured in-process: 0.2 s recovers, 0.3 s falls)
    controller = HoldController()
    controller.enabled = False
    probe = GraphProbe(controller=controller, subscribe_description=False, lockstep_peer=True)
    graph = LaunchedGraph({"clock": "lockstep", "start_paused": "true"}, graph_log).start()
    try:
        probe.start_graph(running=graph.running, hold_at=2.5)
        t_estop = probe.run_until(2.5)
        assert probe.data.modes[-1] == "hold", _fail(graph, f"modes {probe.data.modes}")
        ok, message = probe.call_trigger("/robot_driver/estop")
        assert ok and "reset" in message
        # a controller keeps commanding (and, in lockstep, pacing the simulation): the e-stop holds regardless
        controller.enabled = True
        t_reset = probe.run_until(t_estop + 0.1)  # 50 ticks of ignored commands
        assert probe.data.modes[-1] == "damping", probe.data.modes
        ok, message = probe.call_trigger("/robot_driver/reset")
        assert ok, message
        # reset leaves damping through the ramp (2 s) from the sagged pose back to the default pose; then the
        # controller's commands are accepted again
        probe.run_until(t_reset + 3.0)
        assert probe.data.modes[-1] == "active", _fail(graph, f"modes {probe.data.modes}")
        after = probe.data.modes[probe.data.modes.index("damping") :]
        assert after[:3] == ["damping", "ramp", "hold"], after  # no command got through while latched
        t_diag = math.floor(t_reset + 3.0) + 1.0  # the next whole second: lockstep diagnostics go out then
        probe.run_until(t_diag)
        diag = probe.diagnostics_at(t_diag)
        assert int(diag["estops"]) == 1 and int(diag["commands_ignored"]) > 0, diag
        assert int(diag["faults"]) == 0, diag  # no fall after the reset
        probe.release()
    finally:
        close_graph(probe, graph)
