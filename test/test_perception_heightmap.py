"""Depth -> points -> ground plane and height map: exact geometry, RMSE on a rendered seeded heightfield."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from humanoid_bringup.evaluation.perception_eval import standing_data
from humanoid_control.hardware.scene import load_scene, rpy_to_matrix
from humanoid_control.model.robot_config import load_robot_config
from humanoid_perception.camera import CameraIntrinsics, SimCamera, load_camera_model, pinhole_intrinsics
from humanoid_perception.errors import ImageFormatError, IntrinsicsError, PerceptionInputError
from humanoid_perception.heightmap import (
    HeightMapConfig,
    build_heightmap,
    depth_to_points,
    fit_ground_plane,
    transform_points,
)

CONFIG = load_robot_config("g1")
K = pinhole_intrinsics(64, 48, 42.0)


def test_back_projection_reprojects_to_its_pixels() -> None:
    rng = np.random.default_rng(0)
    depth = rng.uniform(0.5, 3.0, (48, 64)).astype(np.float32)
    depth[5, 7] = 0.0
    depth[6, 8] = np.nan
    pts = depth_to_points(depth, K)
    assert len(pts) == 48 * 64 - 2
    v, u = np.mgrid[0:48, 0:64]
    keep = np.isfinite(depth) & (depth > 0)
    np.testing.assert_allclose(pts[:, 2], depth[keep], rtol=1e-6)
    np.testing.assert_allclose(K.fx * pts[:, 0] / pts[:, 2] + K.cx, u[keep], atol=1e-6)
    np.testing.assert_allclose(K.fy * pts[:, 1] / pts[:, 2] + K.cy, v[keep], atol=1e-6)
    assert len(depth_to_points(depth, K, stride=2)) <= 24 * 32
    assert np.all(depth_to_points(depth, K, min_depth=1.0, max_depth=2.0)[:, 2] <= 2.0)
    rot, t = rpy_to_matrix((0.1, 0.2, 0.3)), np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(transform_points(pts, rot, t), pts @ rot.T + t, atol=1e-12)
    with pytest.raises(ValueError):
        transform_points(pts[:, :2], rot, t)


def test_back_projection_undoes_lens_distortion() -> None:
    k = CameraIntrinsics(64, 48, K.K, np.array([-0.2, 0.05, 0.001, -0.002, 0.0]))
    depth = np.full((48, 64), 2.0, np.float32)
    pts = depth_to_points(depth, k)
    pix, _ = cv2.projectPoints(pts, np.zeros(3), np.zeros(3), k.K, k.D)
    v, u = np.mgrid[0:48, 0:64]
    np.testing.assert_allclose(pix.reshape(-1, 2), np.stack([u.ravel(), v.ravel()], axis=1), atol=1e-3)


def test_bad_depth_input_raises_clear_errors() -> None:
    with pytest.raises(ImageFormatError, match="does not match"):
        depth_to_points(np.ones((48, 60), np.float32), K)
    with pytest.raises(ImageFormatError, match="millimetres"):
        depth_to_points(np.ones((48, 64), np.uint16), K)
    with pytest.raises(ImageFormatError, match="HxW"):
        depth_to_points(np.ones((48, 64, 3), np.float32), K)
    with pytest.raises(IntrinsicsError):
        depth_to_points(np.ones((48, 64), np.float32), None)  # type: ignore[arg-type]


def test_ground_plane_is_found_among_obstacles() -> None:
    rng = np.random.default_rng(1)
    xy = rng.uniform(-2.0, 2.0, (3000, 2))
    tilt = rpy_to_matrix((0.0, math.radians(2.0), 0.0))
    floor = np.column_stack([xy, rng.normal(0.0, 0.002, 3000)]) @ tilt.T + [0.0, 0.0, 0.05]
    boxes = np.column_stack([rng.uniform(0.5, 1.0, (1500, 2)), rng.uniform(0.1, 0.6, 1500)])
    plane, inliers = fit_ground_plane(np.vstack([floor, boxes]))
    assert plane.tilt_deg() == pytest.approx(2.0, abs=0.2)
    assert plane.height(np.array([[0.0, 0.0, 0.05]]))[0] == pytest.approx(0.0, abs=0.005)
    assert inliers[:3000].mean() > 0.95 and inliers[3000:].mean() < 0.1
    again, _ = fit_ground_plane(np.vstack([floor, boxes]))
    np.testing.assert_array_equal(again.normal, plane.normal)
    with pytest.raises(PerceptionInputError):
        fit_ground_plane(np.zeros((2, 3)))
    wall = np.column_stack([np.full(500, 1.0), rng.uniform(-1, 1, 500), rng.uniform(0, 2, 500)])
    with pytest.raises(PerceptionInputError, match="near-horizontal"):
        fit_ground_plane(wall)


def test_height_map_bins_points_on_an_aligned_grid() -> None:
    cfg = HeightMapConfig(resolution_m=0.1, length_m=1.0, width_m=1.0)
    pts = np.array(
        [[0.05, 0.05, 0.2], [0.06, 0.04, 0.4], [-0.35, 0.25, 1.0], [5.0, 5.0, 9.0], [np.nan, 0, 0]]
    )
    hm = build_heightmap(pts, (0.0, 0.0), cfg)
    assert hm.shape == (10, 10) and hm.origin == pytest.approx((-0.5, -0.5))
    assert hm.height_at(0.05, 0.05) == pytest.approx(0.3) and hm.counts.sum() == 3
    assert hm.height_at(-0.35, 0.25) == pytest.approx(1.0)
    assert np.isnan(hm.height_at(0.45, -0.45)) and np.isnan(hm.height_at(3.0, 0.0))
    assert (
        build_heightmap(pts, (0.0, 0.0), HeightMapConfig(0.1, 1.0, 1.0, "max")).height_at(0.05, 0.05) == 0.4
    )
    moved = build_heightmap(pts, (0.03, -0.07), cfg)  # a robot off the grid: cells stay on multiples of 0.1
    assert np.allclose(np.array(moved.origin) / 0.1, np.round(np.array(moved.origin) / 0.1))
    data = hm.occupancy_data(0.0, 1.0)
    assert data.dtype == np.int8 and data.shape == (100,)
    assert data[5 * 10 + 5] == 30 and data[7 * 10 + 1] == 100 and data[0] == -1
    with pytest.raises(ValueError):
        hm.occupancy_data(1.0, 1.0)
    with pytest.raises(ValueError):
        HeightMapConfig(statistic="median")
    with pytest.raises(ValueError):
        HeightMapConfig(resolution_m=0.0)


def test_height_map_rmse_on_a_seeded_heightfield_is_under_1cm() -> None:
    scene = load_scene("terrain")
    field = scene.heightfield
    mj, cam = load_camera_model(CONFIG, scene)
    data = standing_data(CONFIG, mj)
    with SimCamera(mj.model, data, cam) as camera:
        p, rot = camera.optical_pose(data)
        depth = camera.render_depth(data, rng=np.random.default_rng(0))
        points = transform_points(depth_to_points(depth, camera.intrinsics()), rot, p)
    hm = build_heightmap(points, (0.0, 0.0))
    xs, ys = hm.cell_centers()
    inside = (np.abs(xs - field.center[0]) <= field.size[0] / 2) & (
        np.abs(ys - field.center[1]) <= field.size[1] / 2
    )
    seen = inside & np.isfinite(hm.heights)
    assert seen.sum() > 0.95 * inside.sum()
    err = hm.heights[seen] - field.height_at(xs[seen], ys[seen])
    rmse = float(np.sqrt(np.mean(err**2)))
    assert 0.0 < rmse < 0.01
    # the map is not just flat: a flat floor at 0 would be off by the terrain's own RMS height
    assert rmse < 0.3 * float(np.sqrt(np.mean(field.height_at(xs[seen], ys[seen]) ** 2)))
    plane, _ = fit_ground_plane(points)
    assert plane.tilt_deg() < 1.0 and abs(plane.offset) < 0.01
