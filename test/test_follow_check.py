"""FollowMonitor (motors that do not follow the commands): pure logic on made-up torques."""

from __future__ import annotations

import numpy as np

from humanoid_control.hardware.follow_check import FollowCheckConfig, FollowMonitor
from humanoid_control.hardware.types import LowLevelCommand

NAMES = ["a_joint", "b_joint"]
EFFORT = np.array([100.0, 10.0])


def _cmd(q_target: float) -> LowLevelCommand:
    z = np.zeros(2)
    return LowLevelCommand(np.full(2, q_target), z, np.full(2, 100.0), np.full(2, 2.0), z)


def test_trips_after_the_set_periods_names_the_joint_and_clears() -> None:
    mon = FollowMonitor(NAMES, EFFORT, FollowCheckConfig(torque_tolerance=0.25, ticks=5))
    q, dq = np.zeros(2), np.zeros(2)
    cmd = _cmd(0.05)  # asks 5 N m on each joint (clamped to the effort limit: 5 of 10 on b)
    asked = cmd.torque(q, dq, EFFORT)
    for _ in range(10):  # the motors apply what was asked: fine
        assert mon.update(cmd, q, dq, asked) is None
    for k in range(1, 6):  # joint b applies nothing: 5 N m off = 50 % of its 10 N m limit
        problem = mon.update(cmd, q, dq, np.array([asked[0], 0.0]))
        assert (problem is None) == (k < 5)
    assert problem is not None and "b_joint" in problem and "MotionSwitcher" in problem
    first = problem
    mon.update(cmd, q, dq, np.array([asked[0], 0.0]))
    assert mon.problem == first  # the message of the trip stays (no log flood)
    for k in range(1, 6):
        mon.update(cmd, q, dq, asked)
        assert (mon.problem is None) == (k >= 5)


def test_within_tolerance_never_trips() -> None:
    mon = FollowMonitor(NAMES, EFFORT, FollowCheckConfig(torque_tolerance=0.25, ticks=3))
    q, dq = np.zeros(2), np.zeros(2)
    cmd = _cmd(0.05)
    asked = cmd.torque(q, dq, EFFORT)
    for _ in range(20):
        assert mon.update(cmd, q, dq, asked + np.array([20.0, 2.0])) is None  # 20 % off on both
    assert 0.19 < mon.worst_ratio < 0.21
