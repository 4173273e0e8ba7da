"""``humanoid-bench perception``: render, marker detection and height-map times of the perception cores (ms).

In one process: the robot (``--robot``, default the G1; it needs a ``camera:`` section) standing with four
markers on the floor ahead (``perception_eval.SHOWCASE``) and the ``markers`` scene's box, the head camera
rendered offscreen (``MUJOCO_GL``) at 640x480 and 424x240; wall and CPU time per step. The keys are
described in :mod:`humanoid_bringup.evaluation.bench` (the ``humanoid-bench`` help); the camera on/off
real-time factor of the graph is :mod:`humanoid_bringup.evaluation.camera_rtf`.
"""

from __future__ import annotations

import os
import time
from typing import Any


def bench_perception(frames: int, robot: str = "g1") -> dict[str, Any]:
    """Render, detection and height-map times per frame (ms; see the module docstring). ``robot``: the
    configuration (``config/robots/<robot>.yaml``); one without a ``camera:`` section raises
    :class:`~humanoid_perception.errors.CameraConfigError` (a ``ValueError`` naming the robot)."""
    import mujoco
    import numpy as np

    from humanoid_bringup.evaluation.perception_eval import SHOWCASE, standing_data
    from humanoid_control.hardware.scene import MarkerSpec, SceneSpec, load_scene
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_perception.camera import SimCamera, load_camera_model, load_camera_spec
    from humanoid_perception.heightmap import build_heightmap, depth_to_points, transform_points
    from humanoid_perception.markers import MarkerDetector, MarkerDetectorConfig

    def stats(ms: list[float]) -> dict[str, float]:
        return {"median": round(float(np.median(ms)), 2), "p95": round(float(np.percentile(ms, 95)), 2)}

    config = load_robot_config(robot)
    load_camera_spec(config)  # a robot without a camera: refused here, by name, before any rendering
    base = load_scene("markers")
    extra = tuple(
        MarkerSpec("DICT_APRILTAG_36h11", 10 + i, 0.25, (x, y, 0.0), (0.0, 0.0, np.radians(yaw)))
        for i, (x, y, yaw) in enumerate(SHOWCASE)
    )
    scene = SceneSpec("bench", markers=extra, boxes=base.boxes)
    mj, cam = load_camera_model(config, scene)
    data = standing_data(config, mj)
    detector = MarkerDetector()
    corner_search = MarkerDetector(MarkerDetectorConfig(corner_refinement="subpix"))
    result: dict[str, Any] = {
        "robot": robot,
        "frames": frames,
        "mujoco_gl": os.environ.get("MUJOCO_GL", ""),
        "markers_in_view": 0,
    }
    for name in ("render_rgb", "render_depth", "detect", "detect_subpix", "heightmap"):
        result[f"{name}_ms"], result[f"{name}_cpu_ms"] = {}, {}
    for width, height in ((640, 480), (424, 240)):
        size = f"{width}x{height}"
        with SimCamera(mj.model, data, cam, width, height) as camera:
            k = camera.intrinsics()
            p, rot = camera.optical_pose(data)
            camera.render_rgb(data), camera.render_depth(data)  # warm-up: context, textures
            names = ("render_rgb", "render_depth", "detect", "detect_subpix", "heightmap")
            wall: dict[str, list[float]] = {name: [] for name in names}
            cpu: dict[str, list[float]] = {name: [] for name in names}

            def timed(
                name: str, t0: float, c0: float, wall: dict = wall, cpu: dict = cpu
            ) -> tuple[float, float]:
                t1, c1 = time.perf_counter(), time.process_time()
                wall[name].append(1e3 * (t1 - t0))
                cpu[name].append(1e3 * (c1 - c0))
                return t1, c1

            for _ in range(frames):
                mujoco.mj_forward(mj.model, data)
                t, c = time.perf_counter(), time.process_time()
                rgb = camera.render_rgb(data)
                t, c = timed("render_rgb", t, c)
                depth = camera.render_depth(data)
                t, c = timed("render_depth", t, c)
                observations = detector.detect(rgb, k)
                t, c = timed("detect", t, c)
                corner_search.detect(rgb, k)
                t, c = timed("detect_subpix", t, c)
                build_heightmap(transform_points(depth_to_points(depth, k), rot, p), (0.0, 0.0))
                timed("heightmap", t, c)
            if size == "640x480":
                result["markers_in_view"] = len(observations)
            for name in names:
                result[f"{name}_ms"][size] = stats(wall[name])
                result[f"{name}_cpu_ms"][size] = stats(cpu[name])
    return result
