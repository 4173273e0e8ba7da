"""Pure helpers of the perception node (:mod:`humanoid_perception.perception_node`), without rclpy.

The error kinds of refused frames, the buffer of stamped robot states looked up at an image's stamp, the
heading of a rotation, and the node's cores: the camera mount, the marker detector and the height map
adapter.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from humanoid_perception.camera_mount import CameraMount

ERROR_KINDS = ("encoding", "size", "corrupt", "camera_info", "state", "internal")


def error_kind(exc: Exception) -> str:
    """The diagnostics counter of a refused frame: ``encoding``, ``size`` (not the CameraInfo's) or
    ``corrupt`` (a buffer that does not hold the declared image, or a frame the detector refuses)."""
    text = str(exc)
    if "unsupported encoding" in text:
        return "encoding"
    if "does not match the camera info" in text:
        return "size"
    return "corrupt"


class StateBuffer:
    """Recent stamped samples (s -> value) for the lookup of the robot state at an image's stamp."""

    def __init__(self, maxlen: int = 1000) -> None:
        self.items: deque[tuple[float, Any]] = deque(maxlen=maxlen)

    def add(self, t: float, value: Any) -> None:
        if self.items and t < self.items[-1][0]:
            self.items.clear()  # time went back (a respawn, a new simulation)
        self.items.append((t, value))

    def at(self, t: float, tolerance: float) -> Any:
        """The sample stamped nearest ``t`` within ``tolerance`` (s), else None."""
        best, best_dt = None, tolerance + 1e-9
        for ts, v in reversed(self.items):
            dt = abs(ts - t)
            if dt < best_dt:
                best, best_dt = v, dt
            if ts < t - tolerance:
                break
        return best

    @property
    def latest_t(self) -> float:
        return self.items[-1][0] if self.items else -math.inf


def yaw_of(rotation: np.ndarray) -> float:
    """Heading (rad) of a rotation: the angle of its x axis projected on the floor."""
    return math.atan2(float(rotation[1, 0]), float(rotation[0, 0]))


def make_camera_mount(config: Any) -> CameraMount:
    """The head camera's mount from the robot configuration's ``camera`` section."""
    from humanoid_perception.camera import load_camera_spec
    from humanoid_perception.camera_mount import transform

    spec = load_camera_spec(config)
    t = transform(spec.rotation_parent_optical, np.asarray(spec.position, dtype=float))
    return CameraMount(config, spec.parent_body, t)


def make_detector(dictionary: str, length: float, lengths: dict[int, float] | None = None) -> Any:
    """The marker detector core (``humanoid_perception.markers``): ``length`` (m) for every marker, or the
    per-id ``lengths`` of a scene."""
    from humanoid_perception.markers import MarkerDetector, MarkerDetectorConfig

    config = MarkerDetectorConfig(
        dictionary=dictionary, marker_length_m=length, marker_lengths=dict(lengths or {})
    )
    return MarkerDetector(config)


class HeightMapAdapter:
    """Depth frame -> points in ``odom`` -> the height map core (``humanoid_perception.heightmap``: 2 cm
    cells, 6 m x 6 m around the robot, per-cell mean height) -> the seen cells as points (cell centre x, y,
    height; m, ``odom``). Each depth frame gives a new map (no accumulation)."""

    def __init__(self, stride: int = 2) -> None:
        from humanoid_perception.heightmap import HeightMapConfig

        self.config = HeightMapConfig()
        self.stride = stride
        self.last: Any = None

    def update(self, depth: np.ndarray, intrinsics: Any, t_odom_optical: np.ndarray, base: np.ndarray) -> Any:
        from humanoid_perception.heightmap import build_heightmap, depth_to_points, transform_points

        pts = depth_to_points(depth, intrinsics, stride=self.stride)
        pts = transform_points(pts, t_odom_optical[:3, :3], t_odom_optical[:3, 3])
        self.last = build_heightmap(pts, (float(base[0]), float(base[1])), self.config)
        x, y = self.last.cell_centers()
        seen = np.isfinite(self.last.heights)
        return np.stack([x[seen], y[seen], self.last.heights[seen]], axis=1)


def make_heightmap() -> HeightMapAdapter:
    """The height map adapter."""
    return HeightMapAdapter()
