"""The project's launch file, resolved by the runner without starting anything."""

from __future__ import annotations

import subprocess
import sys

import pytest

from humanoid_bringup.evaluation.launched_graph import default_launch_file
from humanoid_bringup.launcher.interpreter import load_launch_description
from humanoid_bringup.launcher.plan import LaunchError


def test_default_plan_starts_driver_and_description() -> None:
    plan = load_launch_description(default_launch_file(), {})
    try:
        names = [p.name for p in plan.processes]
        assert names == ["robot_driver", "robot_description", "tf_publisher"]
        driver = plan.processes[0]
        assert driver.required
        assert driver.params == {
            "robot": "g1",
            "hardware": "mujoco",
            "clock": "lockstep",
            "rate_hz": 500.0,
            "sim_duration_s": 0.0,
            "wait_for_subscribers": 0,
            "start_paused": False,
            "lockstep_peers": "none",  # lockstep with no peer in the default launch
            "activation_ticks": 50,
            "ramp_duration_s": 2.0,
            "friction_patch": "none",
            "scene": "flat",
            "initial_pose": [0.0, 0.0, 0.0],
            "emulator": False,
            "network_interface": "eth0",
            "dds_domain": 0,
            "controller": "none",
            "in_loop_controller": "none",
            "in_loop_parameters": ";",  # none: only the in-loop policy runner gets parameters
            "in_loop_estimator_parameters": "flat_ground_std=0.01",
            "publish_rate_hz": 0.0,
            "physics_timestep_s": 0.0,
            "physics_thread": True,
            "callbacks_in_slack": True,
            "thread_priority": "auto",
            "process_priority": "auto",
            "lock_memory": False,
            "imu_gyro_noise_std": 0.0,
            "imu_gyro_bias_std": 0.0,
            "imu_gyro_bias_walk": 0.0,
            "imu_accel_noise_std": 0.0,
            "imu_accel_bias_std": 0.0,
            "imu_accel_bias_walk": 0.0,
        }
        assert plan.processes[1].params == {"robot": "g1"}
    finally:
        plan.cleanup()


def test_unitree_g1_emulator_plan() -> None:
    plan = load_launch_description(
        default_launch_file(), {"hardware": "unitree_g1", "emulator": "true", "dds_domain": "7"}
    )
    try:
        names = [p.name for p in plan.processes]
        assert names == ["robot_driver", "g1_emulator", "robot_description", "tf_publisher"]
        driver, emulator = plan.processes[0], plan.processes[1]
        assert driver.params["network_interface"] == "lo" and driver.params["emulator"] is True
        assert emulator.params == {
            "robot": "g1",
            "lockstep": True,
            "network_interface": "lo",
            "dds_domain": 7,
            "sport_mode": False,
        }
    finally:
        plan.cleanup()


def test_policy_controller_arguments() -> None:
    plan = load_launch_description(
        default_launch_file(),
        {"controller": "policy", "policy": "holosoma/g1_fastsac", "policy_autostart": "false"},
    )
    try:
        runner = plan.processes[-1]
        assert runner.name == "policy_runner"
        assert runner.params == {
            "robot": "g1",
            "policy": "holosoma/g1_fastsac",
            "policy_onnx": "auto",
            "lockstep": True,
            "autostart": False,
            "command_timeout_action": "zero",
            "state_reliability": "reliable",
        }
    finally:
        plan.cleanup()


def test_mode_manager_starts_the_policy_runner_idle() -> None:
    plan = load_launch_description(default_launch_file(), {"mode_manager": "true", "controller": "policy"})
    try:
        by_name = {p.name: p for p in plan.processes}
        assert list(by_name) == [
            "robot_driver",
            "robot_description",
            "tf_publisher",
            "policy_runner",
            "mode_manager",
        ]
        runner = by_name["policy_runner"].params
        assert runner["autostart"] is False and runner["command_timeout_action"] == "hold"
        assert by_name["mode_manager"].params == {
            "initial_mode": "policy",
            "use_sim_time": True,
            "record_path": "none",
            "max_torque_step": 0.2,
            "lockstep": True,
        }
    finally:
        plan.cleanup()
    # the WBC under the mode manager: idle until /mode_manager/stand
    for args in ({"mode_stand": "wbc"}, {"controller": "wbc_stand"}):
        plan = load_launch_description(default_launch_file(), {"mode_manager": "true", **args})
        try:
            by_name = {p.name: p for p in plan.processes}
            assert {"state_estimator", "wbc_controller", "policy_runner", "mode_manager"} <= set(by_name)
            assert by_name["wbc_controller"].params["autostart"] is False
        finally:
            plan.cleanup()
    # the walking controller under the mode manager: idle until /mode_manager/walk, with the estimator;
    # controller:=mpc_walk names walk as the starting mode
    for args in ({"mode_walk": "mpc"}, {"controller": "mpc_walk"}):
        plan = load_launch_description(default_launch_file(), {"mode_manager": "true", **args})
        try:
            by_name = {p.name: p for p in plan.processes}
            assert {"state_estimator", "walking_controller", "policy_runner", "mode_manager"} <= set(by_name)
            assert "wbc_controller" not in by_name
            assert by_name["walking_controller"].params["autostart"] is False
            assert by_name["mode_manager"].params["initial_mode"] == args.get("controller", "none")
        finally:
            plan.cleanup()
    # mode_walk:=none (the default): no walking controller, no estimator (today's graph)
    plan = load_launch_description(default_launch_file(), {"mode_manager": "true"})
    try:
        names = {p.name for p in plan.processes}
        assert "walking_controller" not in names and "state_estimator" not in names, names
    finally:
        plan.cleanup()
    # no joint hold controller next to the mode manager's controllers
    plan = load_launch_description(
        default_launch_file(), {"mode_manager": "true", "controller": "joint_hold"}
    )
    try:
        assert "joint_hold_controller" not in [p.name for p in plan.processes]
    finally:
        plan.cleanup()


def test_controller_and_clock_arguments() -> None:
    plan = load_launch_description(default_launch_file(), {"controller": "joint_hold", "clock": "realtime"})
    try:
        assert [p.name for p in plan.processes][-1] == "joint_hold_controller"
        assert plan.processes[0].params["clock"] == "realtime"
        assert plan.processes[-1].params["lockstep"] is False  # realtime: nobody waits for anybody
    finally:
        plan.cleanup()


def test_wbc_stand_starts_the_estimator_and_the_wbc() -> None:
    plan = load_launch_description(default_launch_file(), {"controller": "wbc_stand"})
    try:
        names = [p.name for p in plan.processes]
        assert names == [
            "robot_driver",
            "robot_description",
            "tf_publisher",
            "state_estimator",
            "wbc_controller",
        ]
        assert plan.processes[-1].params == {
            "robot": "g1",
            "lockstep": True,
            "rate_hz": 500.0,
            "autostart": True,
        }
        assert plan.processes[-2].params["lockstep"] is True
    finally:
        plan.cleanup()


@pytest.mark.parametrize(
    ("arg", "match"),
    [
        (
            "clock:=fast",
            r"invalid value 'fast' for launch argument 'clock' \(allowed values: lockstep, realtime\)",
        ),
        ("hardware:=gazebo", r"'hardware' \(allowed values: mujoco, unitree_g1, can_mit\)"),
        ("speed:=2", r"speed"),
    ],
)
def test_bad_arguments_are_named_with_allowed_values(arg: str, match: str) -> None:
    name, value = arg.split(":=")
    with pytest.raises(LaunchError, match=match):
        load_launch_description(default_launch_file(), {name: value})


def test_cli_exit_code_and_message_for_bad_argument() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "humanoid_bringup.launcher", str(default_launch_file()), "clock:=fast"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1  # as ros2 launch
    assert "clock" in result.stderr and "lockstep, realtime" in result.stderr


def test_perception_and_autonomy_arguments() -> None:
    plan = load_launch_description(
        default_launch_file(),
        {
            "autonomy": "true",
            "scene": "autonomy",
            "initial_pose": "[1.0, -0.5, 0.25]",
            "camera_rate_hz": "10.0",
        },
    )
    try:
        procs = {p.name: p for p in plan.processes}
        # autonomy starts perception (camera + perception), the estimator and the mode manager with its runner
        for name in ("camera_node", "perception_node", "autonomy_node", "state_estimator", "mode_manager"):
            assert name in procs, sorted(procs)
        assert procs["robot_driver"].params["scene"] == procs["camera_node"].params["scene"] == "autonomy"
        assert procs["robot_driver"].params["initial_pose"] == [1.0, -0.5, 0.25]
        for name in ("camera_node", "perception_node", "autonomy_node"):
            assert procs[name].params["rate_hz"] == 10.0 and procs[name].params["lockstep"] is True
        assert procs["policy_runner"].params["autostart"] is False  # idle under the mode manager
    finally:
        plan.cleanup()
    plan = load_launch_description(default_launch_file(), {"perception": "true", "clock": "realtime"})
    try:
        names = [p.name for p in plan.processes]
        assert "camera_node" in names and "perception_node" in names and "autonomy_node" not in names
        assert "mode_manager" not in names
        cam = next(p for p in plan.processes if p.name == "camera_node")
        assert cam.params["lockstep"] is False
    finally:
        plan.cleanup()


@pytest.mark.parametrize(
    ("arguments", "kind", "separate"),
    [
        ({"controller": "policy", "in_loop": "true"}, "policy", []),
        ({"controller": "joint_hold", "in_loop": "true"}, "joint_hold", []),
        ({"controller": "policy", "in_loop": "false"}, "none", ["policy_runner"]),
        ({"controller": "wbc_stand", "in_loop": "true"}, "wbc", []),  # the estimator in the loop too
        ({"controller": "wbc_stand", "in_loop": "false"}, "none", ["wbc_controller", "state_estimator"]),
        ({"controller": "mpc_walk", "in_loop": "true"}, "none", ["walking_controller"]),
        ({"controller": "none", "in_loop": "true", "mode_manager": "true"}, "policy", ["mode_manager"]),
    ],
)
def test_in_loop_argument(arguments: dict[str, str], kind: str, separate: list[str]) -> None:
    """in_loop:=true moves the policy runner / joint hold into the driver's process (no own process)."""
    plan = load_launch_description(default_launch_file(), arguments)
    try:
        names = [p.name for p in plan.processes]
        driver = plan.processes[0].params
        assert driver["in_loop_controller"] == kind
        for name in separate:
            assert name in names
        if kind != "none":
            assert {"policy_runner", "joint_hold_controller", "wbc_controller"}.isdisjoint(names)
        if kind == "wbc":  # the estimator's node runs in the driver's loop, before the WBC
            assert "state_estimator" not in names
            assert driver["in_loop_estimator_parameters"] == "flat_ground_std=0.01"
        if arguments.get("mode_manager") == "true":
            assert "autostart=false" in driver["in_loop_parameters"]
            assert "command_timeout_action=hold" in driver["in_loop_parameters"]
    finally:
        plan.cleanup()
