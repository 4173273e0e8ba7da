"""``humanoid-eval perception``: the perception cores against MuJoCo's ground truth, in one process.

The G1 stands in its default pose at the origin facing +x (kinematic: ``mj_forward``, no physics), its head
camera (the D435i of ``config/robots/g1.yaml``) looking down at the floor ahead. Two experiments:

1. **Marker pose.** One floor marker (AprilTag 36h11, 0.25 m black square by default) is placed on a grid:
   centre 1.0-2.5 m ahead of the pelvis (``distances``), ``laterals`` to the side, ``yaws`` about the
   vertical. Each placement is rendered (RGB, 640x480) and detected; the estimated ``T_optical_marker`` is
   compared with the truth from the simulator (camera optical frame and marker body poses). Position error:
   distance between the estimated and true marker centres (m). Orientation error: angle of
   ``R_est^T R_true`` (deg). A placement whose marker (with its white margin) is not entirely inside the image
   is *out of view* (the camera's footprint on the floor ends about 2.5 m ahead): listed, not scored. An
   in-view marker that is not detected is a *miss*: listed and counted in ``detection_rate``.
2. **Height map.** The ``terrain`` scene (a seeded heightfield 1.0-2.2 m ahead) is rendered as depth, turned
   into points in the world frame with the true camera pose, and binned into the 2 cm height map; its RMSE is
   taken against the heightfield's surface (:meth:`HeightfieldSpec.height_at`, which matches MuJoCo's ray
   casts) at the centres of the seen cells inside the heightfield. ``heightmap_rmse_m`` is with the D435
   stereo noise model (seeded); ``heightmap_rmse_m_noiseless`` with the renderer's exact depth.

Writes ``perception.json`` (also printed as the last line), ``detections.png`` (a frame with four markers and
the detections drawn: outline, id, distance, axes), ``terrain.png`` (the terrain frame) and ``heightmap.png``
(estimated map, truth, error).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

DISTANCES = (1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5)
LATERALS = (-0.5, -0.25, 0.0, 0.25, 0.5)
YAWS_DEG = (0.0, 45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0)
POSITION_GOAL_M = 0.03
ORIENTATION_GOAL_DEG = 3.0
HEIGHTMAP_GOAL_M = 0.01
IMAGE_NOISE_STD = 3.0  # grey levels (of 255) of white noise per pixel and channel: a well-lit colour camera
VARIANTS = ("noisy", "clean")


def rotation_angle_deg(rot: np.ndarray) -> float:
    """Angle (deg) of a rotation matrix."""
    return math.degrees(math.acos(float(np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0))))


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p95": None}
    a = np.asarray(values, dtype=float)
    return {"median": round(float(np.median(a)), 5), "p95": round(float(np.percentile(a, 95)), 5)}


def standing_data(config: Any, mj: Any) -> Any:
    """``MjData`` with the robot in its default standing pose at the origin facing +x, kinematics computed."""
    import mujoco

    from humanoid_control.model.robot_model import initial_qpos, load_pinocchio_model

    data = mujoco.MjData(mj.model)
    data.qpos[:] = initial_qpos(config, mj, load_pinocchio_model(config), config.array("default"))
    mujoco.mj_forward(mj.model, data)
    return data


def project(points_world: np.ndarray, camera: Any, data: Any) -> tuple[np.ndarray, np.ndarray]:
    """Pixels (N, 2) and optical-frame depths (N,) of world points seen by ``camera`` (a ``SimCamera``)."""
    p, rot = camera.optical_pose(data)
    pts = (np.asarray(points_world, dtype=float) - p) @ rot
    k = camera.intrinsics()
    z = pts[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = np.stack([k.fx * pts[:, 0] / z + k.cx, k.fy * pts[:, 1] / z + k.cy], axis=1)
    return uv, z


def floor_view(camera: Any, data: Any) -> tuple[float, float]:
    """Nearest and farthest floor distance (m, along the optical axis's heading) seen at the image centre
    column: where the rays of the bottom and top rows meet the floor (inf if above the horizon)."""
    p, rot = camera.optical_pose(data)
    k = camera.intrinsics()
    out = []
    for v in (k.height - 0.5, -0.5):
        ray = rot @ np.array([0.0, (v - k.cy) / k.fy, 1.0])
        out.append(math.inf if ray[2] >= 0 else float(np.hypot(*(p[:2] + ray[:2] * (-p[2] / ray[2])))))
    return out[0], out[1]


def evaluate_markers(
    config: Any,
    dictionary: str = "DICT_APRILTAG_36h11",
    marker_size: float = 0.25,
    corner_refinement: str = "edges",
    distances: tuple[float, ...] = DISTANCES,
    laterals: tuple[float, ...] = LATERALS,
    yaws_deg: tuple[float, ...] = YAWS_DEG,
    image_noise: float = IMAGE_NOISE_STD,
    noise_seed: int = 0,
    log: Callable[[str], None] = lambda m: None,
) -> dict[str, Any]:
    """Marker pose errors over the placement grid (see the module docstring): the JSON summary. Each frame is
    scored twice: with white sensor noise of ``image_noise`` grey levels (seeded; the headline figures) and as
    rendered (``*_noiseless``)."""
    import mujoco

    from humanoid_control.hardware.scene import MarkerSpec, SceneSpec, aruco_dictionary, rpy_to_matrix
    from humanoid_perception.camera import SimCamera, load_camera_model
    from humanoid_perception.markers import MarkerDetector, MarkerDetectorConfig

    marker = MarkerSpec(dictionary, 0, marker_size)
    mj, cam = load_camera_model(config, SceneSpec(name="eval", markers=(marker,)))
    model = mj.model
    data = standing_data(config, mj)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, marker.body_name)
    cells = aruco_dictionary(dictionary).markerSize + 2
    half_outer = 0.5 * marker_size * (cells + 2 * marker.border) / cells
    outer = np.array([[-1, 1, 0], [1, 1, 0], [1, -1, 0], [-1, -1, 0]], dtype=float) * half_outer
    detector = MarkerDetector(
        MarkerDetectorConfig(
            dictionary=dictionary, marker_length_m=marker_size, corner_refinement=corner_refinement
        )
    )
    rng = np.random.default_rng(noise_seed)
    scores: dict[str, dict[str, Any]] = {
        v: {"p": [], "o": [], "reproj": [], "ms": [], "missed": [], "wrong": [], "by": {}} for v in VARIANTS
    }
    out_of_view = []
    with SimCamera(model, data, cam) as camera:
        k = camera.intrinsics()
        view = floor_view(camera, data)
        for x in distances:
            for y in laterals:
                for yaw in yaws_deg:
                    rot_wm = rpy_to_matrix((0.0, 0.0, math.radians(yaw)))
                    quat = np.zeros(4)
                    mujoco.mju_mat2Quat(quat, rot_wm.reshape(9))
                    model.body_pos[body] = [x, y, 0.0]
                    model.body_quat[body] = quat
                    mujoco.mj_forward(model, data)
                    placement = [x, y, yaw]
                    uv, z = project(outer @ rot_wm.T + [x, y, 0.0], camera, data)
                    margin = 2.0
                    inside = (
                        np.all(z > 0)
                        and np.all(uv[:, 0] >= margin)
                        and np.all(uv[:, 0] <= k.width - 1 - margin)
                        and np.all(uv[:, 1] >= margin)
                        and np.all(uv[:, 1] <= k.height - 1 - margin)
                    )
                    if not inside:
                        out_of_view.append(placement)
                        continue
                    rgb = camera.render_rgb(data)
                    noisy = rgb + rng.normal(0.0, image_noise, rgb.shape)
                    images = {"noisy": np.clip(np.round(noisy), 0, 255).astype(np.uint8), "clean": rgb}
                    p, rot = camera.optical_pose(data)
                    t_true = rot.T @ (np.array([x, y, 0.0]) - p)
                    r_true = rot.T @ rot_wm
                    for variant, image in images.items():
                        sc = scores[variant]
                        t0 = time.perf_counter()
                        observations = detector.detect(image, k)
                        sc["ms"].append(1000.0 * (time.perf_counter() - t0))
                        found = [o for o in observations if o.id == marker.id]
                        sc["wrong"].extend([placement] for o in observations if o.id != marker.id)
                        if not found:
                            sc["missed"].append(placement)
                            continue
                        obs = found[0]
                        e_p = float(np.linalg.norm(obs.position - t_true))
                        e_o = rotation_angle_deg(obs.T_optical_marker[:3, :3].T @ r_true)
                        sc["p"].append(e_p)
                        sc["o"].append(e_o)
                        sc["reproj"].append(obs.reprojection_error_px)
                        row = sc["by"].setdefault(f"{x:g}", {"p": [], "o": []})
                        row["p"].append(e_p)
                        row["o"].append(e_o)
            log(f"markers at {x:g} m: {len(scores['noisy']['by'].get(f'{x:g}', {'p': []})['p'])} scored")
    main, clean = scores["noisy"], scores["clean"]
    in_view = len(main["p"]) + len(main["missed"])
    summary = {
        "position_error_m": _stats(main["p"]),
        "orientation_error_deg": _stats(main["o"]),
        "position_error_m_noiseless": _stats(clean["p"]),
        "orientation_error_deg_noiseless": _stats(clean["o"]),
        "image_noise_std": image_noise,
        "dictionary": dictionary,
        "marker_size_m": marker_size,
        "corner_refinement": corner_refinement,
        "image": [k.width, k.height],
        "placements": len(distances) * len(laterals) * len(yaws_deg),
        "in_view": in_view,
        "detected": len(main["p"]),
        "detection_rate": round(len(main["p"]) / in_view, 4) if in_view else None,
        "detected_noiseless": len(clean["p"]),
        "max_position_error_m": round(max(main["p"]), 5) if main["p"] else None,
        "max_orientation_error_deg": round(max(main["o"]), 5) if main["o"] else None,
        "reprojection_error_px": _stats(main["reproj"]),
        "detect_ms": _stats(main["ms"]),
        "by_distance_m": {
            d: {
                "n": len(v["p"]),
                "position_error_m": _stats(v["p"]),
                "orientation_error_deg": _stats(v["o"]),
            }
            for d, v in main["by"].items()
        },
        "floor_view_m": [round(view[0], 3), round(view[1], 3)],
        "out_of_view": out_of_view,
        "missed": main["missed"],
        "missed_noiseless": clean["missed"],
        "wrong_ids": main["wrong"] + clean["wrong"],
    }
    return summary


SHOWCASE = ((1.2, -0.45, 20.0), (1.6, 0.4, -60.0), (1.9, -0.15, 135.0), (2.2, 0.45, 30.0))


def showcase_frame(
    config: Any, dictionary: str, marker_size: float, corner_refinement: str
) -> tuple[np.ndarray, list[Any], Any, list[float]]:
    """A frame with four markers (ids 0-3 at :data:`SHOWCASE` (x, y, yaw deg)) and their detections:
    ``(rgb, observations, intrinsics, position errors (m) of the detected ones)``."""
    from humanoid_control.hardware.scene import MarkerSpec, SceneSpec
    from humanoid_perception.camera import SimCamera, load_camera_model
    from humanoid_perception.markers import MarkerDetector, MarkerDetectorConfig

    markers = tuple(
        MarkerSpec(dictionary, i, marker_size, (x, y, 0.0), (0.0, 0.0, math.radians(yaw)))
        for i, (x, y, yaw) in enumerate(SHOWCASE)
    )
    mj, cam = load_camera_model(config, SceneSpec(name="showcase", markers=markers))
    data = standing_data(config, mj)
    detector = MarkerDetector(
        MarkerDetectorConfig(
            dictionary=dictionary, marker_length_m=marker_size, corner_refinement=corner_refinement
        )
    )
    with SimCamera(mj.model, data, cam) as camera:
        rgb = camera.render_rgb(data)
        k = camera.intrinsics()
        observations = detector.detect(rgb, k)
        p, rot = camera.optical_pose(data)
    errors = [
        float(np.linalg.norm(o.position - rot.T @ (np.array(markers[o.id].position) - p)))
        for o in observations
    ]
    return rgb, observations, k, errors


def evaluate_heightmap(
    config: Any, scene_name: str = "terrain", noise_seed: int = 0, resolution_m: float = 0.02
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Height-map RMSE over the scene's heightfield (see the module docstring): ``(summary, arrays)``."""
    from humanoid_control.hardware.scene import load_scene
    from humanoid_perception.camera import SimCamera, load_camera_model
    from humanoid_perception.heightmap import (
        HeightMapConfig,
        build_heightmap,
        depth_to_points,
        fit_ground_plane,
        transform_points,
    )

    scene = load_scene(scene_name)
    if scene.heightfield is None:
        raise ValueError(f"scene '{scene_name}' has no heightfield")
    field = scene.heightfield
    mj, cam = load_camera_model(config, scene)
    data = standing_data(config, mj)
    hm_cfg = HeightMapConfig(resolution_m=resolution_m)
    base_xy = (float(data.qpos[mj.base_qpos_adr]), float(data.qpos[mj.base_qpos_adr + 1]))
    results: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    with SimCamera(mj.model, data, cam) as camera:
        k = camera.intrinsics()
        p, rot = camera.optical_pose(data)
        arrays["rgb"] = camera.render_rgb(data)
        for label, rng in (("noisy", np.random.default_rng(noise_seed)), ("exact", None)):
            depth = camera.render_depth(data, rng=rng)
            points = transform_points(depth_to_points(depth, k), rot, p)
            hmap = build_heightmap(points, base_xy, hm_cfg)
            xs, ys = hmap.cell_centers()
            inside = (np.abs(xs - field.center[0]) <= 0.5 * field.size[0]) & (
                np.abs(ys - field.center[1]) <= 0.5 * field.size[1]
            )
            seen = inside & np.isfinite(hmap.heights)
            truth = field.height_at(xs, ys)
            err = hmap.heights[seen] - truth[seen]
            plane, _ = fit_ground_plane(points)
            results[label] = {
                "rmse_m": round(float(np.sqrt(np.mean(err**2))), 6) if err.size else None,
                "max_abs_error_m": round(float(np.max(np.abs(err))), 6) if err.size else None,
                "cells": int(inside.sum()),
                "seen_cells": int(seen.sum()),
                "ground_plane_tilt_deg": round(plane.tilt_deg(), 4),
                "ground_plane_height_m": round(float(-plane.offset / plane.normal[2]), 5),
            }
            if label == "noisy":
                arrays.update(hmap=hmap, truth=truth, inside=inside)
    noise = cam.depth_noise
    summary = {
        "heightmap_rmse_m": results["noisy"]["rmse_m"],
        "heightmap_rmse_m_noiseless": results["exact"]["rmse_m"],
        "heightmap": {
            "scene": scene_name,
            "resolution_m": resolution_m,
            "heightfield": {
                "center": list(field.center),
                "size": list(field.size),
                "max_height": field.max_height,
            },
            "depth_noise": {
                "model": "sigma = z^2 subpixel_rms / (focal_px baseline_m)",
                "baseline_m": noise.baseline_m,
                "subpixel_rms": noise.subpixel_rms,
                "focal_px": noise.focal_px,
                "seed": noise_seed,
            },
            "noisy": results["noisy"],
            "exact": results["exact"],
        },
    }
    return summary, arrays


def _write_pictures(
    out_dir: Path, example: dict[str, Any], terrain: dict[str, Any], rmse: float | None
) -> list[str]:
    import cv2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from humanoid_perception.markers import draw_observations

    written = []
    if example:
        drawn = draw_observations(example["rgb"], example["observations"], example["intrinsics"])
        cv2.imwrite(str(out_dir / "detections.png"), cv2.cvtColor(drawn, cv2.COLOR_RGB2BGR))
        written.append("detections.png")
    cv2.imwrite(str(out_dir / "terrain.png"), cv2.cvtColor(terrain["rgb"], cv2.COLOR_RGB2BGR))
    written.append("terrain.png")
    hmap, truth, inside = terrain["hmap"], terrain["truth"], terrain["inside"]
    rows, cols = np.nonzero(inside)
    r0, r1, c0, c1 = rows.min() - 10, rows.max() + 11, cols.min() - 10, cols.max() + 11
    r0, c0 = max(r0, 0), max(c0, 0)
    est = hmap.heights[r0:r1, c0:c1]
    tru = np.where(np.isfinite(est), truth[r0:r1, c0:c1], np.nan)
    err = est - tru
    x0 = hmap.origin[0] + c0 * hmap.resolution
    y0 = hmap.origin[1] + r0 * hmap.resolution
    extent = (x0, x0 + est.shape[1] * hmap.resolution, y0, y0 + est.shape[0] * hmap.resolution)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    vmax = float(np.nanmax(tru)) if np.isfinite(tru).any() else 0.1
    for ax, img, title, cmap, lim in (
        (axes[0], est, "height map from depth (D435 noise)", "viridis", (0.0, vmax)),
        (axes[1], tru, "heightfield truth at the cell centres", "viridis", (0.0, vmax)),
        (axes[2], err, f"error (RMSE {1000 * (rmse or float('nan')):.1f} mm)", "coolwarm", (-0.01, 0.01)),
    ):
        colours = matplotlib.colormaps[cmap].copy()
        colours.set_bad("lightgrey")
        im = ax.imshow(img * 1.0, origin="lower", extent=extent, cmap=colours, vmin=lim[0], vmax=lim[1])
        ax.set_title(title)
        ax.set_xlabel("x (m, ahead of the robot)")
        ax.set_ylabel("y (m, left)")
        fig.colorbar(im, ax=ax, label="m")
    fig.suptitle("2 cm height map vs heightfield (grey: not seen)")
    fig.tight_layout()
    fig.savefig(out_dir / "heightmap.png", dpi=90)
    plt.close(fig)
    written.append("heightmap.png")
    return written


def run_perception_eval(
    out_dir: Path,
    robot: str = "g1",
    dictionary: str = "DICT_APRILTAG_36h11",
    marker_size: float = 0.25,
    corner_refinement: str = "edges",
    noise_seed: int = 0,
    log: Callable[[str], None] = lambda m: None,
) -> dict[str, Any]:
    """Both experiments; writes the JSON and pictures to ``out_dir`` and returns the JSON object."""
    from humanoid_control.model.robot_config import load_robot_config

    out_dir.mkdir(parents=True, exist_ok=True)
    config = load_robot_config(robot)
    t0 = time.perf_counter()
    markers = evaluate_markers(
        config, dictionary, marker_size, corner_refinement, noise_seed=noise_seed, log=log
    )
    rgb, observations, k, errors = showcase_frame(config, dictionary, marker_size, corner_refinement)
    example = {"rgb": rgb, "observations": observations, "intrinsics": k}
    markers["showcase"] = {
        "placements": [list(v) for v in SHOWCASE],
        "detected_ids": [o.id for o in observations],
        "position_error_m": [round(e, 4) for e in errors],
    }
    heights, terrain = evaluate_heightmap(config, noise_seed=noise_seed)
    result: dict[str, Any] = {
        "position_error_m": markers.pop("position_error_m"),
        "orientation_error_deg": markers.pop("orientation_error_deg"),
        "position_error_m_noiseless": markers.pop("position_error_m_noiseless"),
        "orientation_error_deg_noiseless": markers.pop("orientation_error_deg_noiseless"),
        "heightmap_rmse_m": heights.pop("heightmap_rmse_m"),
        "heightmap_rmse_m_noiseless": heights.pop("heightmap_rmse_m_noiseless"),
        "markers": markers,
        **heights,
    }
    p95_p, p95_o, rmse = (
        result["position_error_m"]["p95"],
        result["orientation_error_deg"]["p95"],
        result["heightmap_rmse_m"],
    )
    result["goals"] = {
        "position_p95_le_0.03_m": p95_p is not None and p95_p <= POSITION_GOAL_M,
        "orientation_p95_le_3_deg": p95_o is not None and p95_o <= ORIENTATION_GOAL_DEG,
        "heightmap_rmse_le_0.01_m": rmse is not None and rmse <= HEIGHTMAP_GOAL_M,
    }
    result["pictures"] = _write_pictures(out_dir, example, terrain, rmse)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    (out_dir / "perception.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
