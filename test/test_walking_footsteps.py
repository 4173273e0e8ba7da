"""Footstep planning (humanoid_control.walking.footsteps) and the robot configuration's walking section."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from humanoid_control.model.robot_config import ConfigError, find_robot_config, load_robot_config
from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height
from humanoid_control.walking.footsteps import (
    Footstep,
    FootstepPlanner,
    VelocityCommand,
    other_side,
    side_sign,
    twist_displacement,
)
from humanoid_control.walking.geometry import Pose2D, polygons_overlap
from humanoid_control.wbc.balance import default_com_offset

CONFIG = load_robot_config("g1")
SPEC = CONFIG.walking
PLANNER = FootstepPlanner.from_config(CONFIG)
PERIOD = SPEC.single_support + SPEC.double_support


def standing(x: float = 0.0, y: float = 0.0, yaw: float = 0.0) -> dict[str, Pose2D]:
    frame = Pose2D(x, y, yaw)
    return {side: PLANNER.nominal_foot(frame, side) for side in ("left", "right")}


def assert_feasible(plan_start: dict[str, Pose2D], steps: list[Footstep]) -> None:
    """Every step within the limits relative to the foot in stance, the swing foot on its own side."""
    feet = dict(plan_start)
    for step in steps:
        stance = Footstep(other_side(step.side), feet[other_side(step.side)])
        assert PLANNER.violations(stance, step, tol=1e-6) == [], (stance, step)
        lateral = side_sign(step.side) * stance.pose.relative(step.pose).y
        assert lateral >= SPEC.step_width_min - 1e-6  # uncrossed: on its own side of the stance foot
        a = stance.pose.apply(PLANNER.soles[stance.side])
        b = step.pose.apply(PLANNER.soles[step.side])
        assert not polygons_overlap(a, b, SPEC.foot_clearance - 1e-6)
        feet[step.side] = step.pose


def test_walking_section_loads_and_is_consistent() -> None:
    assert SPEC.validate() == []
    assert SPEC.single_support == pytest.approx(0.4) and SPEC.double_support == pytest.approx(0.1)
    assert SPEC.step_width_min < SPEC.foot_spacing < SPEC.step_width_max
    # the command limits fit in one step each
    assert SPEC.max_forward * PERIOD <= SPEC.step_forward


def test_walking_section_matches_the_robot_model() -> None:
    # the LIPM height and the stance width are those of the standing robot (the WBC's default pose)
    pmodel = load_pinocchio_model(CONFIG)
    offset = default_com_offset(CONFIG, pmodel)  # CoM minus the soles' midpoint, default pose
    assert abs(offset[2] - SPEC.com_height) < 0.03
    joints = CONFIG.array("default")
    q = pmodel.neutral_q(joints, standing_base_height(CONFIG, pmodel, joints))
    data = pmodel.model.createData()
    pin.framesForwardKinematics(pmodel.model, data, q)
    left, right = (data.oMf[pmodel.sole_frame_ids[s]].translation for s in ("left", "right"))
    assert abs((left[1] - right[1]) - SPEC.foot_spacing) < 0.005


def _write(tmp_path: Path, walking: dict) -> str:
    data = yaml.safe_load(find_robot_config("g1").read_text())
    data["walking"] = walking
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_malformed_walking_sections_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown keys"):
        load_robot_config(_write(tmp_path, {"com_hieght": 0.6}))
    with pytest.raises(ConfigError, match="foot_spacing"):
        load_robot_config(_write(tmp_path, {"foot_spacing": 0.5}))
    with pytest.raises(ConfigError, match="max_forward"):
        load_robot_config(_write(tmp_path, {"velocity_limits": {"forward": 2.0}}))
    with pytest.raises(ConfigError, match="wider than step_width_max"):
        load_robot_config(
            _write(tmp_path, {"timing": {"lateral_single_support": 0.4}, "velocity_limits": {"lateral": 0.3}})
        )
    with pytest.raises(ConfigError, match="lateral_single_support must not exceed"):
        load_robot_config(_write(tmp_path, {"timing": {"lateral_single_support": 0.5}}))
    with pytest.raises(ConfigError, match="finite number > 0"):
        load_robot_config(_write(tmp_path, {"timing": {"single_support": -0.4}}))
    c = load_robot_config(_write(tmp_path, {"step_limits": {"forward": 0.38}}))
    assert c.walking.step_forward == pytest.approx(0.38) and c.walking.step_backward == SPEC.step_backward


def test_straight_walk_advances_at_the_commanded_speed() -> None:
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(0.4, 0.0, 0.0), 20)
    assert not plan.command_clipped and not any(plan.projected)
    assert [s.side for s in plan.steps[:4]] == ["left", "right", "left", "right"]
    times = plan.touchdown_times()
    assert np.allclose(np.diff(times), PERIOD)

    def mid_x(n: int) -> float:
        feet = plan.feet_after(n)
        return 0.5 * (feet["left"].x + feet["right"].x)

    speed = (mid_x(20) - mid_x(2)) / (times[19] - times[1])
    assert speed == pytest.approx(0.4, abs=1e-9)
    for step in plan.steps:
        assert step.pose.yaw == pytest.approx(0.0) and abs(step.pose.y) == pytest.approx(
            SPEC.foot_spacing / 2
        )
    assert_feasible(plan.start, plan.steps)


def test_sideways_and_turning_walks_follow_the_command() -> None:
    # sideways: the leading foot steps out by 2 vy T, the other closes in; vy on average. The stance
    # alternates between a narrow and a wide width, and the step period shortens with |vy|
    for vy in (-0.1, SPEC.max_lateral, -SPEC.max_lateral):
        plan = PLANNER.plan_velocity(standing(), VelocityCommand(0.0, vy, 0.0), 10)
        assert plan.steps[0].side == ("left" if vy > 0 else "right")
        assert plan.single_support == pytest.approx(SPEC.single_support_for(vy))
        assert plan.step_period < PERIOD
        assert not plan.command_clipped and not any(plan.projected)
        mids = [0.5 * (plan.feet_after(n)["left"].y + plan.feet_after(n)["right"].y) for n in range(11)]
        assert (mids[10] - mids[2]) / (8 * plan.step_period) == pytest.approx(vy, abs=1e-9)
        widths = [plan.feet_after(n)["left"].y - plan.feet_after(n)["right"].y for n in range(1, 11)]
        narrow, wide = SPEC.lateral_widths(vy)
        assert np.allclose(widths[0::2], wide) and np.allclose(widths[1::2], narrow)
        assert_feasible(plan.start, plan.steps)
    assert SPEC.lateral_widths(SPEC.max_lateral)[1] <= SPEC.step_width_max + 1e-9
    # turning on the spot: wz T per step
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(0.0, 0.0, 0.5), 12)
    assert plan.steps[0].side == "left"
    feet = plan.feet_after(12)
    # the feet's mean heading lags the last foot by half a step
    assert PLANNER.walking_frame(feet).yaw == pytest.approx(0.5 * PERIOD * 11.5, abs=1e-9)
    assert_feasible(plan.start, plan.steps)
    # a walk on an arc: the walking frame follows the SE(2) exponential of the twist
    cmd = VelocityCommand(0.3, 0.0, 0.4)
    plan = PLANNER.plan_velocity(standing(), cmd, 8)
    expected = Pose2D(0.0, 0.0, 0.0)
    for _ in range(8):
        expected = expected.compose(twist_displacement(cmd, PERIOD))
    last = plan.steps[-1]  # the 8th step lands nominally in the walking frame moved 8 times
    error = PLANNER.nominal_foot(expected, last.side).relative(last.pose)
    assert max(abs(error.x), abs(error.y), abs(error.yaw)) < 1e-9
    assert_feasible(plan.start, plan.steps)


def test_step_limits_hold_and_feet_never_cross_for_any_command() -> None:
    rng = np.random.default_rng(14)
    feet = standing(0.3, -0.2, 0.7)
    for trial in range(150):
        cmd = VelocityCommand(*(rng.uniform(-1.0, 1.0, 3) * np.array([1.2, 0.5, 1.5])))
        first = ("left", "right")[trial % 2]
        plan = PLANNER.plan_velocity(feet, cmd, 4, first_side=first)
        assert_feasible(plan.start, plan.steps)
        feet = plan.feet_after(4)  # the next command starts where this one left the feet
    # steps asked beyond every limit are projected onto them
    stance = Footstep("right", Pose2D(0.0, 0.0, 0.0))
    for target in (Pose2D(0.9, 0.05, 1.2), Pose2D(-0.5, -0.3, -0.9), Pose2D(0.05, -0.2, 0.0)):
        step, moved = PLANNER.project(stance, Footstep("left", target))
        assert moved and PLANNER.violations(stance, step, tol=1e-6) == []
    feasible = Footstep("left", Pose2D(0.1, 0.25, 0.1))
    kept, moved = PLANNER.project(stance, feasible)
    assert not moved and np.allclose(kept.pose.position, feasible.pose.position, atol=1e-12)
    assert PLANNER.violations(stance, Footstep("left", Pose2D(0.0, -0.2, 0.0)))  # crossed


def test_commands_beyond_the_limits_are_clipped_and_reported() -> None:
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(2.0, -1.0, 3.0), 6)
    assert plan.command_clipped
    assert plan.command == VelocityCommand(SPEC.max_forward, -SPEC.max_lateral, SPEC.max_turn)
    assert_feasible(plan.start, plan.steps)
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(-0.2, 0.05, -0.3), 6)
    assert not plan.command_clipped and plan.command == VelocityCommand(-0.2, 0.05, -0.3)


def test_non_finite_commands_and_goals_are_refused() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        for cmd in (
            VelocityCommand(bad, 0.0, 0.0),
            VelocityCommand(0.0, bad, 0.0),
            VelocityCommand(0.0, 0.0, bad),
        ):
            with pytest.raises(ValueError, match="non-finite"):
                PLANNER.plan_velocity(standing(), cmd, 4)
        with pytest.raises(ValueError, match="non-finite"):
            Pose2D(bad, 0.0, 0.0)


@pytest.mark.parametrize(
    "goal",
    [Pose2D(1.2, 0.0, 0.0), Pose2D(0.8, 0.4, 0.9), Pose2D(-0.4, -0.3, -1.2), Pose2D(0.0, 0.0, 3.0)],
)
def test_goal_plans_end_standing_at_the_goal(goal: Pose2D) -> None:
    start = standing(0.1, 0.2, 0.3)
    goal_odom = Pose2D(0.1, 0.2, 0.3).compose(goal)
    plan = PLANNER.plan_to_goal(start, goal_odom)
    assert plan.reached
    final = plan.feet_after(len(plan.steps))
    for side in ("left", "right"):
        rel = PLANNER.nominal_foot(goal_odom, side).relative(final[side])
        assert math.hypot(rel.x, rel.y) < 2e-3 and abs(rel.yaw) < 2e-3
    assert_feasible(plan.start, plan.steps)
    # no faster than the command limits allow: at least the steps that distance and turn need
    need = max(abs(goal.x) / (SPEC.max_forward * PERIOD), abs(goal.yaw) / (SPEC.max_turn * PERIOD))
    assert len(plan.steps) >= math.floor(need)
    assert len(plan.steps) <= math.ceil(need) + 8


def test_stop_brings_the_feet_together() -> None:
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(0.3, 0.1, 0.2), 5)
    feet = plan.feet_after(5)
    stop = PLANNER.plan_stop(feet, first_side=other_side(plan.steps[-1].side))
    assert len(stop.steps) == 1
    assert_feasible(feet, stop.steps)
    final = stop.feet_after(1)
    rel = final["right"].relative(final["left"])
    assert rel.x == pytest.approx(0.0, abs=1e-9) and rel.y == pytest.approx(SPEC.foot_spacing)
    assert PLANNER.plan_stop(standing()).steps == []
