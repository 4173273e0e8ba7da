"""The Booster T1, a second robot by configuration alone, in MuJoCo through the in-process runner (no ROS):
it stands under ``joint_hold`` and ``wbc_stand`` (the EKF estimator in the loop), and holosoma's T1 policies
(29 joints, 6 of them virtual on the 23-joint model) and the walking controller walk it forward."""

from __future__ import annotations

import numpy as np
import pytest

from humanoid_control.controllers.inprocess import InProcessRunner, RunnerSettings, Tick
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import initial_qpos, load_mujoco_model, load_pinocchio_model

T1 = load_robot_config("t1")


def _spawn_height() -> float:
    """The base height (m) the simulator spawns the T1 at: soles on the floor in the initial pose."""
    return float(initial_qpos(T1, load_mujoco_model(T1), load_pinocchio_model(T1))[2])


@pytest.mark.slow
@pytest.mark.parametrize("controller", ["joint_hold", "wbc_stand"])
def test_t1_stands(controller: str) -> None:
    runner = InProcessRunner(T1, controller, {}, RunnerSettings())
    heights: list[float] = []
    fell = False
    modes: set[str] = set()

    def on_tick(tick: Tick) -> bool:
        nonlocal fell
        modes.add(tick.mode)
        if tick.t >= 2.5:  # after the driver's 2 s boot ramp
            heights.append(float(tick.truth.position[2]))
        fell = fell or runner.fell(tick.truth)
        return fell

    try:
        runner.run(2.5 + 5.0, on_tick)
        truth = runner.backend.ground_truth()
    finally:
        runner.close()
    assert not fell and "active" in modes and runner.commands_refused == 0
    nominal = _spawn_height()
    assert np.max(np.abs(np.array(heights) - nominal)) < 0.02  # m
    assert np.hypot(*truth.position[:2]) < 0.05  # stood in place (m)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["holosoma/t1_ppo", "holosoma/t1_fastsac"])
def test_t1_policy_walks_forward(policy: str) -> None:
    # the default 1 s ramp from the robot's standing pose to the policy's own (ankles -0.25 rad) with the
    # robot's stand gains; the policy's soft gains (ankles kp 50) only once it runs: holding that pose with
    # them topples the T1 (its ankles give 20 N m) before the policy starts
    runner = InProcessRunner(T1, "policy", {"policy": policy}, RunnerSettings())
    fell = False

    def on_tick(tick: Tick) -> bool:
        nonlocal fell
        fell = fell or runner.fell(tick.truth)
        return fell

    try:
        runner.run(4.0, on_tick)  # boot ramp (2 s), ramp to the policy pose (1 s), policy standing
        start = runner.backend.ground_truth().position.copy()
        for _ in range(40):  # 4 s at 0.3 m/s, the command re-sent as a teleop would
            if fell:
                break
            runner.set_cmd_vel(0.3, 0.0, 0.0)
            runner.run(0.1, on_tick)
        end = runner.backend.ground_truth().position.copy()
    finally:
        runner.close()
    assert not fell
    assert end[0] - start[0] > 0.6  # m in 4 s (measured 0.21-0.29 m/s once walking)
    assert abs(end[1] - start[1]) < 0.3


@pytest.mark.slow
def test_t1_mpc_walk_walks_forward() -> None:
    """The walking controller on the T1 (its walking section and tuning, the EKF estimator in the loop)."""
    runner = InProcessRunner(T1, "mpc_walk", {}, RunnerSettings(estimator="ekf"))
    fell = False

    def on_tick(tick: Tick) -> bool:
        nonlocal fell
        fell = fell or runner.fell(tick.truth)
        return fell

    try:
        runner.run(3.0, on_tick)  # boot ramp (2 s), standing
        start = runner.backend.ground_truth().position.copy()
        for _ in range(40):  # 4 s at 0.3 m/s
            if fell:
                break
            runner.set_cmd_vel(0.3, 0.0, 0.0)
            runner.run(0.1, on_tick)
        end = runner.backend.ground_truth().position.copy()
    finally:
        runner.close()
    assert not fell
    assert end[0] - start[0] > 0.8  # m in 4 s (measured 0.31 m/s over 6 s)
    assert abs(end[1] - start[1]) < 0.2
