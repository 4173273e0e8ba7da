"""``robot:=t1`` through the launch file: the driver, the generated /robot_description and the whole-body
standing controller with the state estimator; holosoma's T1 policy through the policy runner (its ramp to
the policy's pose with the robot's stand gains, then the policy's gains). Real processes, real MuJoCo,
lockstep."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph
from humanoid_bringup.evaluation.locomotion_eval import run_locomotion
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import initial_qpos, load_mujoco_model, load_pinocchio_model

T1 = load_robot_config("t1")


@pytest.mark.slow
def test_t1_stands_in_the_launched_graph(tmp_path: Path) -> None:
    probe = GraphProbe(lockstep_peer=True)
    graph = LaunchedGraph(
        {
            "robot": "t1",
            "controller": "wbc_stand",
            "in_loop": "true",
            "start_paused": "true",
            "sim_duration_s": "30",
        },
        tmp_path / "graph.log",
    ).start()
    try:
        probe.start_graph(running=graph.running)
        probe.run_until(7.5)  # 2 s boot ramp, then 5 s of the WBC
        diag = probe.diagnostics_at(7.0)
        description = probe.data.robot_description
    finally:
        close_graph(probe, graph)
    log = graph.log()[-3000:]
    assert description is not None, log
    urdf = ET.fromstring(description)
    moving = {j.get("name") for j in urdf.iter("joint") if j.get("type") in ("revolute", "continuous")}
    assert moving == set(T1.joint_names) and probe.data.joint_names == T1.joint_names
    assert any(m.get("filename", "").endswith("Trunk.stl") for m in urdf.iter("mesh"))
    assert diag["in_loop_controller"] == "wbc" and int(diag["watchdog_trips"]) == 0, diag
    assert probe.data.modes[-1] == "active", probe.data.modes
    t, z = probe.base_heights()
    nominal = float(initial_qpos(T1, load_mujoco_model(T1), load_pinocchio_model(T1))[2])
    standing = t >= 2.5
    assert t[-1] >= 7.0 and np.abs(z[standing] - nominal).max() < 0.02, (t[-1], z[standing].min())


@pytest.mark.slow
def test_t1_policy_walks_forward_in_the_launched_graph(tmp_path: Path) -> None:
    """``robot:=t1 controller:=policy policy:=holosoma/t1_ppo`` with the policy runner's default 1 s ramp: the
    driver's 2 s boot ramp, the runner's ramp to the policy's pose, then 1 s standing and 5 s forward."""
    script = [("stand", 1.0, (0.0, 0.0, 0.0)), ("forward", 5.0, (0.4, 0.0, 0.0))]
    result = run_locomotion(
        "holosoma/t1_ppo", robot="t1", script=script, out_dir=tmp_path, log=lambda *_: None
    )
    log = (tmp_path / "graph.log").read_text(errors="replace")[-3000:]
    assert not result["fell"], (result["fall_reason"], log)
    assert result["time_survived_s"] >= 6.0
    assert result["runner_states"][:3] == ["wait_state", "ramp", "run"], result["runner_states"]
    assert result["runner_states"][-1] == "run" and result["driver_modes"][-1] == "active"
    assert result["driver_gain_profile"] == "command_kp/kd" and result["commands_refused"] == 0
    seg = result["segments"]
    assert abs(seg["stand"]["achieved_mean"][0]) < 0.1, seg["stand"]
    assert seg["forward"]["achieved_mean"][0] > 0.25, seg["forward"]  # commanded 0.4 m/s
    assert abs(seg["forward"]["achieved_mean"][1]) < 0.15, seg["forward"]
