"""Message-like objects to arrays for the console's page (pure: numpy only, no rclpy): the head camera image
(sensor_msgs/Image) and the height map (sensor_msgs/PointCloud2, ``odom`` frame, one point per terrain
cell) as a triangle mesh. Malformed input raises ValueError (the node logs it and draws nothing)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["cloud_xyz", "height_map_mesh", "image_rgb"]

#: PointField datatype FLOAT32
_FLOAT32 = 7


def image_rgb(msg: Any) -> np.ndarray:
    """H x W x 3 uint8 RGB of an ``rgb8``, ``bgr8``, ``rgba8``, ``bgra8`` or ``mono8`` image."""
    channels = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1}.get(str(msg.encoding))
    if channels is None:
        raise ValueError(f"image encoding {msg.encoding!r} not shown (rgb8, bgr8, rgba8, bgra8, mono8)")
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if h <= 0 or w <= 0 or step < w * channels or data.size < h * step:
        raise ValueError(f"image {w}x{h} step {step} with {data.size} bytes is inconsistent")
    pixels = data[: h * step].reshape(h, step)[:, : w * channels].reshape(h, w, channels)
    if channels == 1:
        return np.repeat(pixels, 3, axis=2)
    rgb = pixels[:, :, :3]
    if str(msg.encoding).startswith("bgr"):
        rgb = rgb[:, :, ::-1]
    return np.ascontiguousarray(rgb)


def cloud_xyz(msg: Any) -> np.ndarray:
    """N x 3 float64 points (m) of a PointCloud2 with float32 ``x``, ``y``, ``z`` fields; non-finite points
    dropped."""
    offsets = {f.name: int(f.offset) for f in msg.fields if int(f.datatype) == _FLOAT32}
    if not {"x", "y", "z"} <= set(offsets):
        raise ValueError("point cloud without float32 x, y, z fields")
    if bool(msg.is_bigendian):
        raise ValueError("big-endian point clouds are not shown")
    n, point_step = int(msg.width) * int(msg.height), int(msg.point_step)
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if n == 0:
        return np.zeros((0, 3))
    if point_step < 12 or data.size < n * point_step or max(offsets[c] for c in "xyz") + 4 > point_step:
        raise ValueError(f"point cloud of {n} points, step {point_step}, {data.size} bytes is inconsistent")
    rows = data[: n * point_step].reshape(n, point_step)
    xyz = np.stack(
        [rows[:, offsets[c] : offsets[c] + 4].copy().view("<f4")[:, 0] for c in "xyz"], axis=1
    ).astype(np.float64)
    return xyz[np.isfinite(xyz).all(axis=1)]


def height_map_mesh(points: np.ndarray, cell: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A triangle mesh of a height map given as one point per grid cell (N x 3, m): ``(vertices, faces)``,
    two triangles for every 2 x 2 block of neighbouring cells that are all present (holes stay holes).
    ``cell``: the grid spacing (m); None: the smallest spacing between distinct x values."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(pts) < 4:
        return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.uint32)
    if cell is None:
        xs = np.unique(np.round(pts[:, 0], 6))
        gaps = np.diff(xs)
        gaps = gaps[gaps > 1e-6]
        if gaps.size == 0:
            return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.uint32)
        cell = float(gaps.min())
    if not (np.isfinite(cell) and cell > 0.0):
        raise ValueError(f"height map cell must be > 0 m, got {cell}")
    ij = np.round(pts[:, :2] / cell).astype(np.int64)
    ij -= ij.min(axis=0)
    shape = (int(ij[:, 0].max()) + 1, int(ij[:, 1].max()) + 1)
    if shape[0] * shape[1] > 4_000_000:
        raise ValueError(f"height map of {shape[0]} x {shape[1]} cells of {cell} m is too large to draw")
    grid = np.full(shape, -1, dtype=np.int64)
    grid[ij[:, 0], ij[:, 1]] = np.arange(len(pts))  # a cell given twice: the last point
    a, b, c, d = grid[:-1, :-1], grid[1:, :-1], grid[1:, 1:], grid[:-1, 1:]  # (i, j), +x, +x+y, +y
    ok = (a >= 0) & (b >= 0) & (c >= 0) & (d >= 0)
    lower = np.stack([a[ok], b[ok], c[ok]], axis=1)  # counter-clockwise seen from +z
    upper = np.stack([a[ok], c[ok], d[ok]], axis=1)
    faces = np.concatenate([lower, upper]).astype(np.uint32)
    return pts.astype(np.float32), faces
