"""Scene files: validation, what they add to the MuJoCo model, the heightfield against MuJoCo ray casts."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from humanoid_control.hardware.mujoco_sim import MujocoBackend
from humanoid_control.hardware.scene import (
    HeightfieldSpec,
    SceneError,
    known_scenes,
    load_scene,
    marker_image,
    scene_from_dict,
)
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import load_mujoco_model

CONFIG = load_robot_config("g1")


def test_shipped_scenes_load() -> None:
    assert {"flat", "markers", "terrain"} <= set(known_scenes())
    assert load_scene("flat").empty and load_scene("none").empty
    markers = load_scene("markers")
    assert [m.id for m in markers.markers] == [0, 1, 2] and markers.boxes
    assert markers.marker("DICT_APRILTAG_36h11", 1).position == pytest.approx((1.5, 2.598, 0.0))
    assert load_scene("terrain").heightfield is not None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"markers": [{"dictionary": "DICT_APRILTAG_36h11", "id": 0, "size": 0.2, "colour": "red"}]},
            "unknown",
        ),
        ({"markers": [{"dictionary": "DICT_NOPE", "id": 0, "size": 0.2}]}, "unknown marker dictionary"),
        ({"markers": [{"dictionary": "DICT_4X4_50", "id": 50, "size": 0.2}]}, "outside"),
        ({"markers": [{"dictionary": "DICT_4X4_50", "id": 1.5, "size": 0.2}]}, "integer"),
        ({"markers": [{"dictionary": "DICT_4X4_50", "id": 1, "size": -0.2}]}, "size"),
        ({"markers": [{"dictionary": "DICT_4X4_50", "id": 1}]}, "missing"),
        (
            {
                "markers": [
                    {"dictionary": "DICT_4X4_50", "id": 1, "size": 0.2, "position": [0, 0, float("nan")]}
                ]
            },
            "finite",
        ),
        ({"markers": [{"dictionary": "DICT_4X4_50", "id": 1, "size": 0.2}] * 2}, "twice"),
        ({"boxes": [{"name": "a b", "size": [1, 1, 1], "position": [0, 0, 0]}]}, "name"),
        ({"boxes": [{"name": "a", "size": [1, 0, 1], "position": [0, 0, 0]}]}, "size"),
        ({"heightfield": {"center": [1, 0], "size": [1, 1], "max_height": 0}}, "max_height"),
        ({"heightfield": {"center": [1, 0], "size": [1, 1], "edge": 0.6}}, "edge"),
        ({"heightfield": {"center": [1, 0], "size": [1, 1], "seed": -1}}, "seed"),
        ({"heightfield": {"center": [1, 0], "size": [1, 1], "resolution": 0.0001}}, "too many"),
        ({"walls": []}, "unknown"),
    ],
)
def test_malformed_scenes_are_refused(data: dict, message: str) -> None:
    with pytest.raises(SceneError, match=message):
        scene_from_dict(data)


def test_unknown_scene_names_and_files(tmp_path: Path) -> None:
    with pytest.raises(SceneError, match="unknown scene"):
        load_scene("moon")
    with pytest.raises(SceneError, match="not found"):
        load_scene(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("markers: [\n")
    with pytest.raises(SceneError, match="invalid YAML"):
        load_scene(str(bad))


def test_marker_image_has_a_white_margin_and_the_dictionary_code() -> None:
    import cv2

    img = marker_image("DICT_4X4_50", 7, pixels_per_cell=10, border_cells=2)
    assert img.shape == (6 * 10 + 40, 6 * 10 + 40)
    assert (img[:20] == 255).all() and (img[20:30, 20:80] == 0).all()  # margin, then the black border
    d = cv2.aruco.getPredefinedDictionary(cv2.aruco.DICT_4X4_50)
    _, ids, _ = cv2.aruco.ArucoDetector(d).detectMarkers(img)
    assert ids is not None and ids.ravel().tolist() == [7]


def test_flat_scene_leaves_the_model_unchanged_and_a_scene_adds_bodies_and_collisions() -> None:
    plain = load_mujoco_model(CONFIG).model
    flat = load_mujoco_model(CONFIG, scene_spec=load_scene("flat")).model
    assert (flat.nbody, flat.ngeom, flat.nq) == (plain.nbody, plain.ngeom, plain.nq)
    scene = load_scene("markers")
    backend = MujocoBackend(CONFIG, scene=scene)
    model = backend.model
    assert model.nq == plain.nq  # markers and boxes are static: the robot's state layout is unchanged
    for m in scene.markers:
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, m.body_name)
        np.testing.assert_allclose(model.body_pos[body], m.position)
        quad = model.body_geomadr[body]
        assert model.geom_contype[quad] == 0 and model.geom_conaffinity[quad] == 0  # visual only
    box = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "box_crate")
    assert model.geom_contype[box] and model.geom_conaffinity[box]
    np.testing.assert_allclose(model.geom_size[box], [0.25, 0.3, 0.3])


def test_heightfield_heights_match_mujoco_ray_casts() -> None:
    scene = load_scene("terrain")
    field = scene.heightfield
    assert isinstance(field, HeightfieldSpec)
    heights = field.heights()
    assert heights.min() == pytest.approx(0.0, abs=1e-9) and heights.max() == pytest.approx(field.max_height)
    np.testing.assert_array_equal(heights, field.heights())  # seeded
    other = HeightfieldSpec(field.center, field.size, field.max_height, seed=field.seed + 1).heights()
    assert np.abs(other - heights).max() > 0.01
    mj = load_mujoco_model(CONFIG, scene_spec=scene)
    data = mujoco.MjData(mj.model)
    mujoco.mj_forward(mj.model, data)
    rng = np.random.default_rng(0)
    xs = rng.uniform(field.center[0] - 0.7, field.center[0] + 0.7, 200)
    ys = rng.uniform(field.center[1] - 0.8, field.center[1] + 0.8, 200)
    geom = np.array([-1], dtype=np.int32)
    group = np.array([1, 0, 0, 0, 0, 0], dtype=np.uint8)  # terrain group: floor, boxes, heightfield
    for x, y in zip(xs, ys, strict=True):
        dist = mujoco.mj_ray(
            mj.model, data, np.array([x, y, 1.0]), np.array([0.0, 0.0, -1.0]), group, 1, -1, geom
        )
        assert 1.0 - dist == pytest.approx(float(field.height_at(x, y)), abs=1e-6)
