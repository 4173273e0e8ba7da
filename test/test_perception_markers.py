"""Marker detector: pose accuracy on synthetic and rendered frames, and clear errors for bad input."""

from __future__ import annotations

import math

import cv2
import mujoco
import numpy as np
import pytest

from humanoid_bringup.evaluation.perception_eval import rotation_angle_deg, standing_data
from humanoid_control.hardware.scene import MarkerSpec, SceneSpec, marker_image, rpy_to_matrix
from humanoid_control.model.robot_config import load_robot_config
from humanoid_perception.camera import SimCamera, load_camera_model, pinhole_intrinsics
from humanoid_perception.errors import ImageFormatError, IntrinsicsError
from humanoid_perception.markers import MarkerDetector, MarkerDetectorConfig, draw_observations

CONFIG = load_robot_config("g1")
K640 = pinhole_intrinsics(640, 480, 42.0)


def synthetic_view(dictionary: str, marker_id: int, length: float, T: np.ndarray) -> np.ndarray:
    """A grey 640x480 image of a printed marker (2-cell margin) at pose ``T`` (marker -> optical), by an exact
    homography of the marker image (no renderer)."""
    ppc = 20
    img = marker_image(dictionary, marker_id, pixels_per_cell=ppc, border_cells=2)
    n = img.shape[0]
    cells = n / ppc - 4
    side = length * (cells + 4) / cells  # printed side (m) of the whole image
    # marker image pixel (c, r) -> marker-frame point (x, y, 0), row 0 at +y
    s = side / n
    A = np.array([[s, 0, -side / 2 + s / 2], [0, -s, side / 2 - s / 2], [0, 0, 1]])
    H = K640.K @ np.column_stack([T[:3, 0], T[:3, 1], T[:3, 3]]) @ A
    return cv2.warpPerspective(img, H, (640, 480), flags=cv2.INTER_AREA, borderValue=90)


def pose(distance: float, tilt_deg: float, spin_deg: float) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = rpy_to_matrix((math.radians(180 - tilt_deg), 0.0, 0.0)) @ rpy_to_matrix(
        (0.0, 0.0, math.radians(spin_deg))
    )
    T[:3, 3] = [0.1, -0.05, distance]
    return T


@pytest.mark.parametrize(
    ("distance", "tilt", "spin"), [(1.0, 0.0, 0.0), (1.5, 40.0, 30.0), (2.2, 55.0, 200.0)]
)
def test_pose_of_a_synthetic_marker(distance: float, tilt: float, spin: float) -> None:
    T = pose(distance, tilt, spin)
    image = synthetic_view("DICT_APRILTAG_36h11", 11, 0.25, T)
    obs = MarkerDetector().detect(image, K640)
    assert [o.id for o in obs] == [11]
    assert np.linalg.norm(obs[0].position - T[:3, 3]) < 0.01 * distance
    assert rotation_angle_deg(obs[0].T_optical_marker[:3, :3].T @ T[:3, :3]) < 1.0
    assert obs[0].reprojection_error_px < 0.5 and obs[0].length_m == 0.25


def test_other_dictionaries_and_per_id_lengths() -> None:
    T = pose(1.2, 30.0, 10.0)
    image = synthetic_view("DICT_4X4_50", 3, 0.15, T)
    assert MarkerDetector().detect(image, K640) == []  # an AprilTag detector ignores ArUco markers
    cfg = MarkerDetectorConfig(dictionary="DICT_4X4_50", marker_length_m=0.5, marker_lengths={3: 0.15})
    obs = MarkerDetector(cfg).detect(image, K640)
    assert [o.id for o in obs] == [3]
    assert np.linalg.norm(obs[0].position - T[:3, 3]) < 0.015
    drawn = draw_observations(np.dstack([image] * 3), obs, K640)
    assert drawn.shape == (480, 640, 3) and np.any(drawn != np.dstack([image] * 3))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dictionary": "DICT_5X5_1"}, "unknown marker dictionary"),
        ({"marker_length_m": 0.0}, "lengths"),
        ({"marker_lengths": {1: float("nan")}}, "lengths"),
        ({"corner_refinement": "magic"}, "corner_refinement"),
        ({"max_reprojection_error_px": 0.0}, "max_reprojection"),
    ],
)
def test_detector_config_is_checked(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MarkerDetectorConfig(**change)


def test_bad_images_and_intrinsics_raise_clear_errors() -> None:
    det = MarkerDetector()
    with pytest.raises(ImageFormatError, match="does not match"):
        det.detect(np.zeros((240, 424, 3), np.uint8), K640)
    with pytest.raises(ImageFormatError, match="8-bit"):
        det.detect(np.zeros((480, 640, 3), np.float32), K640)
    with pytest.raises(ImageFormatError, match="shape"):
        det.detect(np.zeros((480, 640, 2), np.uint8), K640)
    with pytest.raises(ImageFormatError, match="numpy array"):
        det.detect([[0] * 640] * 480, K640)  # type: ignore[arg-type]
    with pytest.raises(IntrinsicsError, match="intrinsics missing"):
        det.detect(np.zeros((480, 640), np.uint8), None)  # type: ignore[arg-type]
    assert det.detect(np.full((480, 640), 128, np.uint8), K640) == []  # a blank frame is not an error


@pytest.fixture(scope="module")
def floor_marker() -> tuple:
    marker = MarkerSpec("DICT_APRILTAG_36h11", 0, 0.25)
    mj, cam = load_camera_model(CONFIG, SceneSpec(name="test", markers=(marker,)))
    data = standing_data(CONFIG, mj)
    body = mujoco.mj_name2id(mj.model, mujoco.mjtObj.mjOBJ_BODY, marker.body_name)
    camera = SimCamera(mj.model, data, cam)
    yield mj.model, data, body, camera
    camera.close()


@pytest.mark.parametrize(
    ("x", "y", "yaw"), [(1.0, 0.3, 0.0), (1.5, -0.4, 45.0), (2.0, 0.0, 120.0), (2.25, 0.25, 300.0)]
)
def test_pose_accuracy_on_rendered_frames(floor_marker: tuple, x: float, y: float, yaw: float) -> None:
    model, data, body, camera = floor_marker
    rot_wm = rpy_to_matrix((0.0, 0.0, math.radians(yaw)))
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, rot_wm.reshape(9))
    model.body_pos[body], model.body_quat[body] = [x, y, 0.0], quat
    mujoco.mj_forward(model, data)
    rgb = camera.render_rgb(data)
    p, rot = camera.optical_pose(data)
    errors = {}
    for refinement in ("edges", "subpix"):
        obs = MarkerDetector(MarkerDetectorConfig(corner_refinement=refinement)).detect(
            rgb, camera.intrinsics()
        )
        assert [o.id for o in obs] == [0]
        errors[refinement] = (
            np.linalg.norm(obs[0].position - rot.T @ (np.array([x, y, 0.0]) - p)),
            rotation_angle_deg(obs[0].T_optical_marker[:3, :3].T @ rot.T @ rot_wm),
        )
    assert errors["subpix"][0] < 0.03 and errors["subpix"][1] < 3.0
    # the default fits the square's edges: no inward corner bias, millimetres instead of centimetres
    assert errors["edges"][0] < 0.006 and errors["edges"][1] < 1.0
    assert errors["edges"][0] < errors["subpix"][0]


def test_edge_refinement_near_the_image_border_keeps_a_sound_pose() -> None:
    """The white margin partly outside the image (the black square 4-17 px from the border): edge samples
    there are rejected or the corners fall back to OpenCV's; the pose stays right."""
    for shift in (-0.58, -0.6, -0.61):
        T = pose(1.5, 20.0, 0.0)
        T[0, 3] = shift
        obs = MarkerDetector().detect(synthetic_view("DICT_APRILTAG_36h11", 4, 0.25, T), K640)
        assert [o.id for o in obs] == [4]
        assert obs[0].corners[:, 0].min() < 18.0  # less than the margin's width (about 20 px) from the border
        assert np.linalg.norm(obs[0].position - T[:3, 3]) < 0.005
