"""Depth image -> 3D points -> ground plane and a 2.5D height map around the robot.

1. :func:`depth_to_points`: back-projection of a z-depth image through the pinhole model,
   ``p = z * ((u - cx) / fx, (v - cy) / fy, 1)`` in the camera optical frame (m; distorted cameras go through
   ``cv2.undistortPoints``). Pixels without a measurement (0, NaN, outside the range) are skipped.
2. :func:`transform_points`: into the odom (or world) frame with the camera pose ``(R_odom_optical,
   p_odom_optical)`` (from TF: odom -> base -> camera; the simulator's truth in evaluations).
3. :func:`fit_ground_plane`: RANSAC plane through the points, refined by least squares on its inliers:
   ``n . p + d = 0`` with ``n`` the unit normal pointing to ``up``.
4. :func:`build_heightmap`: an odom-aligned grid of ``resolution_m`` cells (2 cm by default) centred on the
   robot; each cell holds the mean (or max) z of the points that fall in it, NaN where none (unseen or
   occluded).
   Cell edges sit on multiples of the resolution, so maps built as the robot moves line up cell for cell.

Units: m. Bad input raises :class:`~humanoid_perception.errors.ImageFormatError` /
:class:`~humanoid_perception.errors.IntrinsicsError` (both :class:`PerceptionInputError`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from humanoid_perception.camera import CameraIntrinsics
from humanoid_perception.errors import ImageFormatError, IntrinsicsError, PerceptionInputError

STATISTICS = ("mean", "max")


def depth_to_points(
    depth: np.ndarray,
    intrinsics: CameraIntrinsics,
    stride: int = 1,
    min_depth: float = 0.0,
    max_depth: float = math.inf,
) -> np.ndarray:
    """(N, 3) points in the optical frame (m) from a z-depth image (``float32``/``float64`` metres; 0 or NaN:
    no measurement), every ``stride``-th pixel in u and v."""
    if not isinstance(intrinsics, CameraIntrinsics):
        raise IntrinsicsError(f"depth_to_points: intrinsics missing or of type {type(intrinsics).__name__}")
    if not isinstance(depth, np.ndarray) or depth.ndim != 2:
        raise ImageFormatError(f"depth: expected an HxW array, got {getattr(depth, 'shape', type(depth))}")
    if depth.dtype not in (np.float32, np.float64):
        raise ImageFormatError(
            f"depth: expected float metres, got {depth.dtype} (convert 16UC1 millimetres first)"
        )
    intrinsics.check_image(depth, "depth")
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"depth_to_points: stride must be an integer >= 1, got {stride!r}")
    z = depth[::stride, ::stride]
    valid = np.isfinite(z) & (z > max(min_depth, 0.0)) & (z <= max_depth)
    rays = _pixel_rays(intrinsics, stride)[valid]
    return rays * z[valid].astype(np.float64)[:, None]


_RAYS: dict[tuple, np.ndarray] = {}


def _pixel_rays(intrinsics: CameraIntrinsics, stride: int) -> np.ndarray:
    """(rows, cols, 3) rays ``(x/z, y/z, 1)`` of every ``stride``-th pixel (cached per camera)."""
    key = (intrinsics.width, intrinsics.height, intrinsics.K.tobytes(), intrinsics.D.tobytes(), stride)
    rays = _RAYS.get(key)
    if rays is None:
        v, u = np.mgrid[0 : intrinsics.height : stride, 0 : intrinsics.width : stride].astype(np.float64)
        if intrinsics.distorted:
            import cv2

            pix = np.stack([u.ravel(), v.ravel()], axis=1).reshape(-1, 1, 2)
            norm = cv2.undistortPoints(pix, intrinsics.K, intrinsics.D).reshape((*u.shape, 2))
            xn, yn = norm[..., 0], norm[..., 1]
        else:
            xn = (u - intrinsics.cx) / intrinsics.fx
            yn = (v - intrinsics.cy) / intrinsics.fy
        rays = np.stack([xn, yn, np.ones_like(xn)], axis=-1)
        if len(_RAYS) > 8:
            _RAYS.clear()
        _RAYS[key] = rays
    return rays


def transform_points(points: np.ndarray, rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """``rotation @ p + translation`` for each row of ``points`` (N, 3): points from a child frame (e.g. the
    optical frame) into its parent (odom), given the child's pose in the parent."""
    points = np.asarray(points, dtype=float)
    rot = np.asarray(rotation, dtype=float)
    t = np.asarray(translation, dtype=float)
    if points.ndim != 2 or points.shape[1] != 3 or rot.shape != (3, 3) or t.shape != (3,):
        raise ValueError(
            f"transform_points: need (N, 3) points, a 3x3 rotation and a 3-vector: {points.shape}"
        )
    # column by column: a (N, 3) x (3, 3) matmul goes through BLAS threads for little gain at this size
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    out = np.empty_like(points)
    for i in range(3):
        out[:, i] = rot[i, 0] * x + rot[i, 1] * y + rot[i, 2] * z + t[i]
    return out


@dataclass(frozen=True)
class GroundPlane:
    """The plane ``normal . p + offset = 0`` (unit ``normal`` towards ``up``; m) in the points' frame."""

    normal: np.ndarray
    offset: float

    def height(self, points: np.ndarray) -> np.ndarray:
        """Signed distance of each point above the plane (m)."""
        return np.asarray(points, dtype=float) @ self.normal + self.offset

    def tilt_deg(self, up: tuple[float, float, float] = (0.0, 0.0, 1.0)) -> float:
        """Angle between the plane's normal and ``up`` (deg)."""
        c = float(np.clip(self.normal @ np.asarray(up, dtype=float) / np.linalg.norm(up), -1.0, 1.0))
        return math.degrees(math.acos(c))


def _plane_through(points: np.ndarray, up: np.ndarray) -> GroundPlane:
    centroid = points.mean(axis=0)
    _, _, vt = np.linalg.svd(points - centroid, full_matrices=False)
    normal = vt[-1]
    if normal @ up < 0:
        normal = -normal
    return GroundPlane(normal, float(-normal @ centroid))


def fit_ground_plane(
    points: np.ndarray,
    threshold: float = 0.01,
    iterations: int = 100,
    seed: int = 0,
    up: tuple[float, float, float] = (0.0, 0.0, 1.0),
    max_tilt_deg: float = 30.0,
) -> tuple[GroundPlane, np.ndarray]:
    """RANSAC ground plane: the plane within ``max_tilt_deg`` of horizontal (normal within that angle of
    ``up``) with the most points closer than ``threshold`` (m), refined by least squares on those inliers.

    Returns ``(plane, inlier mask)``; :class:`PerceptionInputError` when no such plane is supported by at
    least 3 points (e.g. an empty or all-wall view). Deterministic for a given ``seed``.
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 3 or not np.all(np.isfinite(pts)):
        raise PerceptionInputError(f"ground plane: expected finite (N, 3) points, got shape {pts.shape}")
    if len(pts) < 3:
        raise PerceptionInputError(f"ground plane: {len(pts)} points are too few")
    upv = np.asarray(up, dtype=float) / np.linalg.norm(up)
    cos_max = math.cos(math.radians(max_tilt_deg))
    rng = np.random.default_rng(seed)
    sample = pts if len(pts) <= 4000 else pts[rng.choice(len(pts), 4000, replace=False)]
    best_count, best = 0, None
    for _ in range(iterations):
        a, b, c = sample[rng.choice(len(sample), 3, replace=False)]
        normal = np.cross(b - a, c - a)
        norm = np.linalg.norm(normal)
        if norm < 1e-9:
            continue
        normal /= norm
        if normal @ upv < 0:
            normal = -normal
        if normal @ upv < cos_max:
            continue
        count = int(np.count_nonzero(np.abs(sample @ normal - normal @ a) < threshold))
        if count > best_count:
            best_count, best = count, GroundPlane(normal, float(-normal @ a))
    if best is None or best_count < 3:
        raise PerceptionInputError("ground plane: no near-horizontal plane found")
    inliers = np.abs(best.height(pts)) < threshold
    plane = _plane_through(pts[inliers], upv)
    inliers = np.abs(plane.height(pts)) < threshold
    return plane, inliers


@dataclass(frozen=True)
class HeightMapConfig:
    """Height map settings: ``resolution_m`` cell side (m), ``length_m`` x ``width_m`` extent along the odom x
    and y axes (m) centred on the robot (6 m: the G1's head camera sees the floor up to 2.5 m ahead),
    per-cell ``statistic`` (``mean`` for terrain shape, ``max`` for obstacle clearance), and ``min_points`` a
    cell needs to count as seen."""

    resolution_m: float = 0.02
    length_m: float = 6.0
    width_m: float = 6.0
    statistic: str = "mean"
    min_points: int = 1

    def __post_init__(self) -> None:
        if not (0.001 <= self.resolution_m <= 1.0):
            raise ValueError(f"height map: resolution_m must be in [0.001, 1] m: {self.resolution_m}")
        if not (self.resolution_m <= self.length_m <= 100.0 and self.resolution_m <= self.width_m <= 100.0):
            raise ValueError("height map: length_m and width_m must be in [resolution_m, 100] m")
        if (self.length_m / self.resolution_m) * (self.width_m / self.resolution_m) > 4e6:
            raise ValueError("height map: more than 4 million cells")
        if self.statistic not in STATISTICS:
            raise ValueError(f"height map: statistic must be one of {STATISTICS}")
        if not (isinstance(self.min_points, int) and self.min_points >= 1):
            raise ValueError("height map: min_points must be an integer >= 1")


@dataclass
class HeightMap:
    """A 2.5D grid in the odom frame.

    Attributes:
        origin: (x, y) of the lower corner of cell [0, 0] (m).
        resolution: cell side (m).
        heights: (ny, nx) height of each cell (m, odom z), NaN where unseen; row j along y, column i along x.
        counts: (ny, nx) number of points in each cell.
    """

    origin: tuple[float, float]
    resolution: float
    heights: np.ndarray
    counts: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.heights.shape  # type: ignore[return-value]

    def cell_centers(self) -> tuple[np.ndarray, np.ndarray]:
        """(X, Y) arrays (ny, nx) of cell centre coordinates (m)."""
        ny, nx = self.shape
        x = self.origin[0] + (np.arange(nx) + 0.5) * self.resolution
        y = self.origin[1] + (np.arange(ny) + 0.5) * self.resolution
        return np.meshgrid(x, y)

    def height_at(self, x: np.ndarray | float, y: np.ndarray | float) -> np.ndarray:
        """Height of the cell holding (x, y) (m); NaN outside the map or in unseen cells."""
        i = np.floor((np.asarray(x, dtype=float) - self.origin[0]) / self.resolution).astype(int)
        j = np.floor((np.asarray(y, dtype=float) - self.origin[1]) / self.resolution).astype(int)
        ny, nx = self.shape
        inside = (i >= 0) & (i < nx) & (j >= 0) & (j < ny)
        return np.where(inside, self.heights[np.clip(j, 0, ny - 1), np.clip(i, 0, nx - 1)], np.nan)

    def occupancy_data(self, z_min: float, z_max: float) -> np.ndarray:
        """The map as ``nav_msgs/OccupancyGrid`` data: int8, row-major from ``origin`` (rows along y), heights
        mapped linearly from ``[z_min, z_max]`` (m) to 0-100 (clipped), -1 where unseen. The grid's ``info``:
        ``resolution`` = :attr:`resolution`, ``width`` = columns, ``height`` = rows, origin :attr:`origin`."""
        if not (math.isfinite(z_min) and math.isfinite(z_max) and z_max > z_min):
            raise ValueError(f"occupancy_data: need finite z_min < z_max, got {z_min}, {z_max}")
        scaled = np.clip(np.round((self.heights - z_min) / (z_max - z_min) * 100.0), 0, 100)
        return np.where(np.isfinite(self.heights), scaled, -1).astype(np.int8).reshape(-1)

    @property
    def seen_fraction(self) -> float:
        """Fraction of cells with a height."""
        return float(np.mean(np.isfinite(self.heights)))


def build_heightmap(
    points: np.ndarray, center_xy: tuple[float, float], config: HeightMapConfig | None = None
) -> HeightMap:
    """Height map of ``points`` (N, 3; odom frame, m) on the grid of ``config`` centred on ``center_xy``."""
    cfg = config or HeightMapConfig()
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise PerceptionInputError(f"height map: expected (N, 3) points, got shape {pts.shape}")
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    res = cfg.resolution_m
    nx, ny = max(1, round(cfg.length_m / res)), max(1, round(cfg.width_m / res))
    # lower corner on the resolution grid, so that cells line up between maps
    x0 = math.floor((center_xy[0] - 0.5 * nx * res) / res) * res
    y0 = math.floor((center_xy[1] - 0.5 * ny * res) / res) * res
    i = np.floor((pts[:, 0] - x0) / res).astype(np.int64)
    j = np.floor((pts[:, 1] - y0) / res).astype(np.int64)
    keep = (i >= 0) & (i < nx) & (j >= 0) & (j < ny)
    flat = j[keep] * nx + i[keep]
    z = pts[keep, 2]
    counts = np.bincount(flat, minlength=nx * ny)
    if cfg.statistic == "mean":
        sums = np.bincount(flat, weights=z, minlength=nx * ny)
        with np.errstate(invalid="ignore", divide="ignore"):
            heights = sums / counts
    else:
        heights = np.full(nx * ny, -np.inf)
        np.maximum.at(heights, flat, z)
    heights = np.where(counts >= cfg.min_points, heights, np.nan)
    return HeightMap((x0, y0), res, heights.reshape(ny, nx), counts.reshape(ny, nx))
