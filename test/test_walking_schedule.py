"""Swing-foot trajectories and contact schedules (humanoid_control.walking.swing, .schedule)."""

from __future__ import annotations

import numpy as np
import pytest

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.walking.footsteps import FootstepPlanner, VelocityCommand
from humanoid_control.walking.geometry import Pose2D, inside_polygon
from humanoid_control.walking.schedule import ContactSchedule
from humanoid_control.walking.swing import SwingTrajectory

CONFIG = load_robot_config("g1")
SPEC = CONFIG.walking
PLANNER = FootstepPlanner.from_config(CONFIG)
SOLES = {side: np.array(CONFIG.feet[side].polygon) for side in ("left", "right")}


def test_swing_lifts_and_lands_softly() -> None:
    swing = SwingTrajectory(Pose2D(0.0, 0.12, 0.0), Pose2D(0.3, 0.15, 0.3), 1.0, 0.4, 0.06, 0.0, 0.02)
    start, end = swing.state(1.0), swing.state(1.4)
    assert np.allclose(start.position, [0.0, 0.12, 0.0]) and np.allclose(end.position, [0.3, 0.15, 0.02])
    assert end.yaw == pytest.approx(0.3)
    for state in (start, end, swing.state(0.5), swing.state(2.0)):
        # zero velocity and acceleration at lift-off and touchdown (and held outside the swing)
        assert np.allclose(state.velocity, 0.0) and np.allclose(state.acceleration, 0.0)
        assert state.yaw_rate == 0.0 and state.yaw_acceleration == 0.0
    mid = swing.state(1.2)
    assert mid.position[2] == pytest.approx(0.01 + 0.06)  # lift above the line between the sole heights
    # velocity and acceleration are the derivatives of the position (central differences)
    h = 1e-5
    for t in np.linspace(1.01, 1.39, 9):
        p0, p1, s = swing.state(t - h), swing.state(t + h), swing.state(t)
        assert np.allclose((p1.position - p0.position) / (2 * h), s.velocity, atol=1e-5)
        assert np.allclose((p1.velocity - p0.velocity) / (2 * h), s.acceleration, atol=1e-3)
        assert (p1.yaw - p0.yaw) / (2 * h) == pytest.approx(s.yaw_rate, abs=1e-5)
    # velocity near touchdown vanishes smoothly (soft landing)
    assert np.linalg.norm(swing.state(1.396).velocity) < 0.01


def test_crossing_swing_moves_along_first_then_across() -> None:
    # the right foot crosses in front of a left foot at (0, 0.12): forward first, across after 40 %
    swing = SwingTrajectory(
        Pose2D(0.0, -0.12, 0.0),
        Pose2D(0.18, 0.17, -0.3),
        1.0,
        0.25,
        0.06,
        cross_delay=0.4,
        cross_axis_yaw=0.0,
    )
    start, end = swing.state(1.0), swing.state(1.25)
    assert np.allclose(start.position, [0.0, -0.12, 0.0]) and np.allclose(end.position, [0.18, 0.17, 0.0])
    assert end.yaw == pytest.approx(-0.3)
    assert np.allclose(end.velocity, 0.0) and np.allclose(end.acceleration, 0.0)
    early = swing.state(1.0 + 0.4 * 0.25)
    assert early.position[1] == pytest.approx(-0.12)  # not across yet
    assert early.position[0] > 0.09  # most of the way forward
    h = 1e-6
    for t in np.linspace(1.01, 1.24, 11):
        p0, p1, s = swing.state(t - h), swing.state(t + h), swing.state(t)
        assert np.allclose((p1.position - p0.position) / (2 * h), s.velocity, atol=1e-4)
        assert np.allclose((p1.velocity - p0.velocity) / (2 * h), s.acceleration, atol=1e-2)
    with pytest.raises(ValueError):
        SwingTrajectory(Pose2D(0.0, 0.0, 0.0), Pose2D(0.1, 0.0, 0.0), 0.0, 0.3, 0.06, cross_delay=1.0)


def test_schedule_phases_contacts_and_zmp_reference() -> None:
    feet = {side: PLANNER.nominal_foot(Pose2D(0.0, 0.0, 0.0), side) for side in ("left", "right")}
    plan = PLANNER.plan_velocity(feet, VelocityCommand(0.3, 0.0, 0.2), 6)
    sched = ContactSchedule(plan, SOLES, t0=2.0, swing_height=SPEC.swing_height, zmp_margin=SPEC.zmp_margin)
    # start transfer, then per step single + double support, then the final transfer
    assert len(sched.phases) == 1 + 2 * 6
    expected_end = 2.0 + 2 * SPEC.start_double_support + 6 * SPEC.single_support + 5 * SPEC.double_support
    assert sched.t_end == pytest.approx(expected_end)
    first_swing = sched.phases[1]
    assert first_swing.swing == "left" and first_swing.t_start == pytest.approx(
        2.0 + SPEC.start_double_support
    )
    t_mid = 0.5 * (first_swing.t_start + first_swing.t_end)
    assert sched.contacts(t_mid) == {"left": False, "right": True}
    assert sched.contacts(1.0) == {"left": True, "right": True}
    assert sched.contacts(sched.t_end + 1.0) == {"left": True, "right": True}
    # the swing foot leaves from where it stood and lands on the step
    lift = sched.foot_state("left", first_swing.t_start)
    land = sched.foot_state("left", first_swing.t_end - 1e-9)
    assert np.allclose(lift.position[:2], feet["left"].position)
    assert np.allclose(land.position[:2], plan.steps[0].pose.position, atol=1e-6)
    assert sched.foot_state("left", t_mid).position[2] > 0.9 * SPEC.swing_height
    # the ZMP reference lies in the (shrunk) support polygon at all times
    for t in np.arange(1.5, sched.t_end + 1.0, 0.01):
        assert inside_polygon(sched.zmp_reference(t), sched.support_polygon(t), tol=1e-9), t
    # and sits on the stance sole in single support
    assert inside_polygon(sched.zmp_reference(t_mid), plan.start["right"].apply(SOLES["right"]))
