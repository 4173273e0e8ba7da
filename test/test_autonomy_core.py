"""The marker-approach task core (pure): a kinematic robot that under-tracks its commands and a simulated
sighting model stand in for the walking robot and the perception node."""

from __future__ import annotations

import math

import numpy as np
import pytest

from humanoid_perception.autonomy.approach import (
    ApproachSettings,
    ApproachTask,
    Phase,
    Pose2D,
    Sighting,
    standoff_pose,
    wrap,
)

DT = 0.2  # one camera frame at 5 Hz


def rot_z(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def floor_marker(x: float, y: float, front_yaw: float) -> tuple[np.ndarray, np.ndarray]:
    """A marker lying on the floor whose front (-y of the marker) points along ``front_yaw``."""
    # marker -y axis = front -> marker y = -front; z up; x = y cross z
    return np.array([x, y, 0.0]), rot_z(front_yaw + math.pi / 2.0)


def run(
    task: ApproachTask,
    start: Pose2D,
    marker: tuple[np.ndarray, np.ndarray] | None,
    steps: int = 600,
    tracking: float = 0.8,
    noise: float = 0.01,
    seed: int = 0,
    hook=None,
) -> list[Pose2D]:
    """Integrate a unicycle (plus lateral) robot that reaches ``tracking`` of each command; the marker is
    sighted (with noise) while it is 0.6-2.4 m ahead within +-27 deg, as the head camera sees the floor."""
    rng = np.random.default_rng(seed)
    pose = start
    task.start(0.0)
    path = [pose]
    for k in range(steps):
        t = k * DT
        sightings = []
        if marker is not None:
            p, r = marker
            dx, dy = p[0] - pose.x, p[1] - pose.y
            d, bearing = math.hypot(dx, dy), wrap(math.atan2(dy, dx) - pose.yaw)
            if 0.6 < d < 2.4 and abs(bearing) < math.radians(27):
                sightings.append(Sighting(7, p + rng.normal(0, noise, 3), r @ rot_z(rng.normal(0, 0.02))))
        kwargs = hook(t, pose) if hook else {}
        cmd = task.step(t, pose, sightings, **kwargs)
        c, s = math.cos(pose.yaw), math.sin(pose.yaw)
        vx, vy, wz = tracking * cmd.vx, tracking * 0.5 * cmd.vy, tracking * cmd.wz
        pose = Pose2D(pose.x + DT * (c * vx - s * vy), pose.y + DT * (s * vx + c * vy), pose.yaw + DT * wz)
        path.append(pose)
        if not task.active:
            break
    return path


@pytest.mark.parametrize("side", [1.0, -1.0])
def test_finds_a_marker_60_deg_off_and_stops_at_the_standoff_pose(side: float) -> None:
    # marker 2.2 m away, 60 deg off the heading (out of view), front facing the start
    bearing = side * math.radians(60)
    m = floor_marker(2.2 * math.cos(bearing), 2.2 * math.sin(bearing), bearing + math.pi)
    task = ApproachTask()
    path = run(task, Pose2D(0.0, 0.0, 0.0), m)
    assert task.phase == Phase.REACHED, task.outcome()
    goal = standoff_pose(m[0], m[1], 0.5)
    end = path[-1]
    assert math.hypot(end.x - goal.x, end.y - goal.y) < 0.12
    assert abs(wrap(end.yaw - goal.yaw)) < math.radians(8)
    out = task.outcome()
    assert out["marker_id"] == 7 and out["sightings"] >= 2 and out["position_error_m"] < 0.12
    # once ended it commands zero
    assert task.step(999.0, end, []).is_zero


def test_no_marker_fails_after_a_full_turn_with_zero_command() -> None:
    task = ApproachTask(ApproachSettings(search_radius_m=0.0))  # the scan alone
    path = run(task, Pose2D(0.0, 0.0, 0.0), None)
    assert task.phase == Phase.FAILED and "full turn" in task.reason
    turned = abs(path[-1].yaw - path[0].yaw)
    assert 2 * math.pi < turned < 2 * math.pi + 1.0
    assert max(math.hypot(p.x, p.y) for p in path) < 1e-9  # turned in place
    assert task.step(1000.0, path[-1], []).is_zero


@pytest.mark.parametrize("side", [1.0, -1.0])
@pytest.mark.parametrize("front_deg", [-25.0, 0.0, 25.0])
def test_walking_search_finds_a_marker_3_m_away_beyond_camera_range(side: float, front_deg: float) -> None:
    # 3 m away, 60 deg off the heading: beyond the 2.4 m the sighting model (the head camera) sees, so the
    # scan cannot find it; the walk out and around the start does, whichever side it is on
    bearing = side * math.radians(60)
    front = bearing + math.pi + math.radians(front_deg)
    m = floor_marker(3.0 * math.cos(bearing), 3.0 * math.sin(bearing), front)
    task = ApproachTask()
    stages: list[str] = []
    path = run(task, Pose2D(0.0, 0.0, 0.0), m, hook=lambda t, p: stages.append(task.search_stage.value) or {})
    assert task.phase == Phase.REACHED, task.outcome()
    assert stages[0] == "scan" and "walkout" in stages and task.outcome()["search_stage"] == "orbit"
    goal = standoff_pose(m[0], m[1], 0.5)
    assert math.hypot(path[-1].x - goal.x, path[-1].y - goal.y) < 0.12
    assert abs(wrap(path[-1].yaw - goal.yaw)) < math.radians(8)


def test_walking_search_without_a_marker_walks_once_around_and_fails() -> None:
    task = ApproachTask()
    path = run(task, Pose2D(0.0, 0.0, 0.0), None)
    assert task.phase == Phase.FAILED and "walk around at 2.0 m" in task.reason
    radii = [math.hypot(p.x, p.y) for p in path]
    assert max(radii) < 2.4  # it stays near the search circle
    # it went once around the start point: every 30 deg sector of polar angle visited at about 2 m
    far = [p for p in path if math.hypot(p.x, p.y) > 1.6]
    sectors = {int((math.degrees(math.atan2(p.y, p.x)) + 180) // 30) for p in far}
    assert sectors == set(range(12))
    assert task.step(1000.0, path[-1], []).is_zero


def test_perception_error_aborts_at_once() -> None:
    m = floor_marker(1.5, 0.0, math.pi)
    task = ApproachTask()
    run(
        task, Pose2D(0.0, 0.0, 0.0), m, hook=lambda t, p: {"perception_error": "bad image" if t > 1.0 else ""}
    )
    assert task.phase == Phase.ABORTED and "perception error: bad image" in task.reason
    assert task.t_end == pytest.approx(1.2)


def test_autonomy_switched_off_aborts() -> None:
    m = floor_marker(1.5, 0.0, math.pi)
    task = ApproachTask()
    run(task, Pose2D(0.0, 0.0, 0.0), m, hook=lambda t, p: {"autonomy_enabled": t < 2.0})
    assert task.phase == Phase.ABORTED and "autonomy switched off" in task.reason
    assert task.step(5.0, Pose2D(0, 0, 0), []).is_zero


def test_marker_lost_while_in_view_aborts_but_not_when_too_close_to_see_it() -> None:
    m = floor_marker(2.3, 0.0, math.pi)

    class Vanishing(ApproachTask):  # the marker is removed at t = 0.6 s while the robot walks to it
        def step(self, t, pose, sightings=None, **kw):  # type: ignore[override]
            return super().step(t, pose, sightings if t < 0.6 else [], **kw)

    task = Vanishing()
    run(task, Pose2D(0.0, 0.0, 0.0), m)
    assert task.phase == Phase.ABORTED and task.reason == "marker lost while in view"
    assert task.t_end is not None and 0.4 + 3.0 < task.t_end <= 0.4 + 3.0 + 2 * DT
    # the normal run loses sight of the marker near the goal (closer than 0.6 m) and still reaches it
    task2 = ApproachTask()
    run(task2, Pose2D(0.0, 0.0, 0.0), m)
    assert task2.phase == Phase.REACHED and task2.frames > task2.sightings


def test_other_ids_and_non_finite_sightings_are_ignored() -> None:
    task = ApproachTask(ApproachSettings(marker_id=3))
    task.start(0.0)
    p, r = floor_marker(1.5, 0.0, math.pi)
    pose = Pose2D(0.0, 0.0, 0.0)
    for k in range(5):
        cmd = task.step(k * DT, pose, [Sighting(7, p, r), Sighting(3, np.full(3, np.nan), r)])
        assert task.phase == Phase.SEARCH and cmd.wz == pytest.approx(0.5)
    task.step(1.0, pose, [Sighting(3, p, r)])
    task.step(1.2, pose, [Sighting(3, p, r)])
    assert task.phase == Phase.APPROACH and task.marker_id == 3


def test_standoff_pose_of_floor_and_wall_markers() -> None:
    p, r = floor_marker(3.0, 1.0, math.pi / 2)  # front points +y
    g = standoff_pose(p, r, 0.5)
    assert (g.x, g.y) == pytest.approx((3.0, 1.5)) and g.yaw == pytest.approx(-math.pi / 2)
    # a marker on a wall facing -x (its normal +z points to -x)
    r_wall = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    g = standoff_pose(np.array([2.0, 0.0, 0.5]), r_wall, 0.5)
    assert (g.x, g.y) == pytest.approx((1.5, 0.0)) and g.yaw == pytest.approx(0.0)


def test_settings_refuse_unknown_keys_and_bad_values() -> None:
    assert ApproachSettings.from_mapping({"standoff_m": 0.6}).standoff_m == 0.6
    with pytest.raises(ValueError, match="unknown keys"):
        ApproachSettings.from_mapping({"standof_m": 0.6})
    with pytest.raises(ValueError, match="finite"):
        ApproachSettings(vx_max=math.nan)
    with pytest.raises(ValueError, match="> 0"):
        ApproachSettings(standoff_m=-1.0)
    with pytest.raises(ValueError, match="search_wz"):
        ApproachSettings(search_wz=0.0)
    task = ApproachTask()
    task.start(0.0)
    assert task.step(0.1, Pose2D(math.nan, 0.0, 0.0), []).is_zero and task.phase == Phase.ABORTED
