"""Head camera: configuration checks, intrinsics checks, and the frame convention of the rendered images."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import yaml

from humanoid_bringup.evaluation.perception_eval import standing_data
from humanoid_control.hardware.scene import MarkerSpec, SceneSpec, rpy_to_matrix
from humanoid_control.model.robot_config import load_robot_config
from humanoid_perception.camera import (
    CameraIntrinsics,
    CameraSpec,
    SimCamera,
    camera_spec_from_dict,
    load_camera_model,
    load_camera_spec,
    pinhole_intrinsics,
)
from humanoid_perception.errors import (
    CameraConfigError,
    ImageFormatError,
    IntrinsicsError,
    PerceptionInputError,
)
from humanoid_perception.markers import MarkerDetector, MarkerDetectorConfig

CONFIG = load_robot_config("g1")
CAMERA_TABLE = yaml.safe_load(CONFIG.config_path.read_text())["camera"]


def test_g1_camera_is_the_d435i_of_g1_description() -> None:
    cam = load_camera_spec(CONFIG)
    assert cam.parent_body == "torso_link"
    assert cam.position == pytest.approx((0.0576, 0.0175, 0.4299), abs=1e-3)
    assert cam.rpy == pytest.approx((0.0, 0.8308, 0.0), abs=1e-4)
    assert (cam.link_frame, cam.optical_frame) == ("head_camera_link", "head_camera_optical_frame")
    assert (cam.width, cam.height) == (640, 480)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lens": "wide"}, "unknown keys"),
        ({"width": 0}, "width"),
        ({"width": 640.5}, "width"),
        ({"fovy_deg": 0.0}, "fovy_deg"),
        ({"fovy_deg": float("nan")}, "fovy_deg"),
        ({"depth_range": [2.0, 1.0]}, "depth_min_m"),
        ({"depth_range": [0.2]}, "malformed"),
        ({"rate_hz": -1.0}, "rate_hz"),
        ({"position": [0.0, 0.0]}, "position"),
        ({"rpy": [0.0, "down", 0.0]}, "malformed"),
        ({"depth_noise": {"baseline_m": 0.0}}, "depth_noise"),
        ({"depth_noise": {"baseline": 0.05}}, "depth_noise"),
        ({"optical_frame": "head_camera_link"}, "must differ"),
    ],
)
def test_camera_config_refuses_bad_values(change: dict, message: str) -> None:
    with pytest.raises(CameraConfigError, match=message):
        camera_spec_from_dict({**CAMERA_TABLE, **change})


def test_camera_config_needs_its_mount_and_a_section() -> None:
    table = dict(CAMERA_TABLE)
    del table["parent_body"]
    with pytest.raises(CameraConfigError, match="missing"):
        camera_spec_from_dict(table)
    with pytest.raises(CameraConfigError, match="mapping"):
        camera_spec_from_dict(["torso_link"])


def test_missing_parent_body_is_refused_at_load() -> None:
    cam = CameraSpec(parent_body="no_such_link")
    with pytest.raises(CameraConfigError, match="no_such_link"):
        load_camera_model(CONFIG, cam=cam)


@pytest.mark.parametrize(
    ("k", "d", "message"),
    [
        ([0.0] * 9, [], "all zeros"),
        ([600, 0, 320, 0, 600, 240, 0, 0], [], "9 values"),
        ([600, 0, 320, 0, float("nan"), 240, 0, 0, 1], [], "finite"),
        ([-600, 0, 320, 0, 600, 240, 0, 0, 1], [], "fx, fy > 0"),
        ([600, 0, 900, 0, 600, 240, 0, 0, 1], [], "principal point"),
        ([600, 0, 320, 0, 600, 240, 0, 0, 1], [0.1, 0.2, 0.3], "D must hold"),
        ([600, 0, 320, 0, 600, 240, 0, 0, 1], [0.1, float("inf"), 0, 0, 0], "D must hold"),
    ],
)
def test_invalid_camera_info_raises_intrinsics_error(k: list, d: list, message: str) -> None:
    with pytest.raises(IntrinsicsError, match=message) as info:
        CameraIntrinsics.from_camera_info(640, 480, k, d)
    assert isinstance(info.value, PerceptionInputError)


def test_camera_info_round_trip() -> None:
    k = pinhole_intrinsics(424, 240, 42.0)
    info = k.camera_info_fields()
    assert info["distortion_model"] == "plumb_bob" and len(info["p"]) == 12 and info["p"][3] == 0.0
    back = CameraIntrinsics.from_camera_info(info["width"], info["height"], info["k"], info["d"])
    np.testing.assert_array_equal(back.K, k.K)
    assert not back.distorted


def test_intrinsics_check_the_image_size() -> None:
    k = pinhole_intrinsics(640, 480, 42.0)
    k.check_image(np.zeros((480, 640, 3), np.uint8))
    with pytest.raises(ImageFormatError, match="does not match"):
        k.check_image(np.zeros((240, 424, 3), np.uint8))
    assert k.fy == pytest.approx(240 / math.tan(math.radians(21.0)))
    assert (k.cx, k.cy) == (319.5, 239.5)


@pytest.fixture(scope="module")
def axis_scene() -> tuple:
    """The G1 standing; a 0.25 m marker lying on the floor where the optical axis meets it, its top row
    towards the robot's +x."""
    mj, cam = load_camera_model(CONFIG)
    data = standing_data(CONFIG, mj)
    site = mujoco.mj_name2id(mj.model, mujoco.mjtObj.mjOBJ_SITE, cam.optical_frame)
    p, rot = data.site_xpos[site].copy(), data.site_xmat[site].reshape(3, 3).copy()
    hit = p + rot[:, 2] * (-p[2] / rot[2, 2])
    marker = MarkerSpec(
        "DICT_APRILTAG_36h11", 5, 0.25, (float(hit[0]), float(hit[1]), 0.0), (0, 0, -math.pi / 2)
    )
    mj, cam = load_camera_model(CONFIG, SceneSpec(name="axis", markers=(marker,)))
    data = standing_data(CONFIG, mj)
    camera = SimCamera(mj.model, data, cam)
    yield mj, cam, data, camera, marker, hit
    camera.close()


def test_optical_frame_is_the_urdf_mount_with_rep103_optical_axes(axis_scene: tuple) -> None:
    mj, cam, data, camera, _, _ = axis_scene
    torso = mujoco.mj_name2id(mj.model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    r_torso = data.xmat[torso].reshape(3, 3)
    p, rot = camera.optical_pose(data)
    np.testing.assert_allclose(p, data.xpos[torso] + r_torso @ np.array(cam.position), atol=1e-9)
    r_link = r_torso @ rpy_to_matrix(cam.rpy)
    # optical z = link x (forward), optical x = -link y (right), optical y = -link z (down)
    np.testing.assert_allclose(rot[:, 2], r_link[:, 0], atol=1e-9)
    np.testing.assert_allclose(rot[:, 0], -r_link[:, 1], atol=1e-9)
    np.testing.assert_allclose(rot[:, 1], -r_link[:, 2], atol=1e-9)
    # standing upright, the camera looks 0.8308 rad below the horizon, image x to the robot's right
    assert math.degrees(math.asin(-rot[2, 2])) == pytest.approx(math.degrees(0.8308), abs=1.0)
    assert rot[1, 0] < -0.99


def test_marker_on_the_optical_axis_is_seen_at_the_image_centre_at_its_depth(axis_scene: tuple) -> None:
    _, _, data, camera, marker, hit = axis_scene
    k = camera.intrinsics()
    p, rot = camera.optical_pose(data)
    z_true = float((hit - p) @ rot[:, 2])
    depth = camera.render_depth(data)
    assert depth.dtype == np.float32 and depth.shape == (480, 640)
    centre = depth[239:241, 319:321].mean()  # the optical axis passes between the four centre pixels
    assert centre == pytest.approx(z_true, abs=2e-3)
    rgb = camera.render_rgb(data)
    assert rgb.dtype == np.uint8 and rgb.shape == (480, 640, 3)
    obs = MarkerDetector(MarkerDetectorConfig(marker_length_m=marker.size)).detect(rgb, k)
    assert [o.id for o in obs] == [marker.id]
    centre_px = obs[0].corners.mean(axis=0)
    # the square's image centre is not the projected centre under perspective: compare the pose instead
    assert np.linalg.norm(centre_px - [k.cx, k.cy]) < 6.0
    t = obs[0].position
    assert abs(t[0]) < 0.01 and abs(t[1]) < 0.01
    assert t[2] == pytest.approx(z_true, abs=0.01)
    # marker z (face normal) points up in the world, its y (top row) along the robot's +x
    r_world = rot @ obs[0].T_optical_marker[:3, :3]
    assert r_world[2, 2] > 0.999 and r_world[0, 1] > 0.999


def test_depth_outside_the_range_is_zero_and_noise_is_seeded(axis_scene: tuple) -> None:
    _, cam, data, camera, _, _ = axis_scene
    exact = camera.render_depth(data)
    valid = exact > 0
    assert valid.mean() > 0.99  # the floor fills the view, well within 0.2-10 m
    a = camera.render_depth(data, rng=np.random.default_rng(3))
    b = camera.render_depth(data, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    z = exact[valid].astype(float)
    relative = (a[valid] - exact[valid]) / cam.depth_noise.sigma(z)
    assert np.std(relative) == pytest.approx(1.0, abs=0.05)


def test_other_image_sizes_keep_the_vertical_field_of_view(axis_scene: tuple) -> None:
    mj, cam, data, _, _, _ = axis_scene
    with SimCamera(mj.model, data, cam, 424, 240) as small:
        k = small.intrinsics()
        assert (k.width, k.height) == (424, 240)
        assert k.fy == pytest.approx(120 / math.tan(math.radians(cam.fovy_deg / 2)))
        assert small.render_rgb(data).shape == (240, 424, 3)
