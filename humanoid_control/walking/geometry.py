"""Planar geometry of walking: poses on the ground plane and convex sole polygons.

Frames follow REP-103 (x forward, y left, z up); a :class:`Pose2D` is a frame's origin ``(x, y)`` (m) and its
heading ``yaw`` (rad, about z, counter-clockwise) in a parent frame (the odom frame for footsteps). Polygons
are ``(N, 2)`` arrays of ``[x, y]`` corners (m), convex and counter-clockwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from humanoid_control.wbc.balance import convex_hull, offset_polygon


def wrap_angle(angle: float) -> float:
    """``angle`` (rad) wrapped into ``[-pi, pi)``."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


@dataclass(frozen=True)
class Pose2D:
    """A frame on the ground plane: origin ``x, y`` (m) and heading ``yaw`` (rad) in the parent frame."""

    x: float
    y: float
    yaw: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.x) and math.isfinite(self.y) and math.isfinite(self.yaw)):
            raise ValueError(f"non-finite pose: {self}")

    @property
    def position(self) -> np.ndarray:
        """``[x, y]`` (m)."""
        return np.array([self.x, self.y])

    @property
    def rotation(self) -> np.ndarray:
        """2x2 rotation from this frame's axes to the parent's."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s], [s, c]])

    def compose(self, other: Pose2D) -> Pose2D:
        """``self * other``: ``other`` (given in this frame) expressed in the parent frame."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return Pose2D(
            self.x + c * other.x - s * other.y,
            self.y + s * other.x + c * other.y,
            wrap_angle(self.yaw + other.yaw),
        )

    def inverse(self) -> Pose2D:
        """The parent frame expressed in this frame."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return Pose2D(-c * self.x - s * self.y, s * self.x - c * self.y, wrap_angle(-self.yaw))

    def relative(self, other: Pose2D) -> Pose2D:
        """``other`` (parent frame) expressed in this frame: ``self^-1 * other``."""
        return self.inverse().compose(other)

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Points ``(N, 2)`` given in this frame, expressed in the parent frame."""
        return np.asarray(points, dtype=float) @ self.rotation.T + self.position


def midpoint(a: Pose2D, b: Pose2D) -> Pose2D:
    """Mean position and mean heading (bisector of the two headings) of two poses."""
    yaw = a.yaw + 0.5 * wrap_angle(b.yaw - a.yaw)
    return Pose2D(0.5 * (a.x + b.x), 0.5 * (a.y + b.y), wrap_angle(yaw))


def halfspaces(poly: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Outward unit normals ``n`` (N, 2) and offsets ``d`` (N,) of a convex CCW polygon: inside is
    ``n @ p <= d`` row-wise."""
    a = np.asarray(poly, dtype=float)
    e = np.roll(a, -1, axis=0) - a
    n = np.stack([e[:, 1], -e[:, 0]], axis=1)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    return n, np.einsum("ij,ij->i", n, a)


def inside_polygon(point: np.ndarray, poly: np.ndarray, tol: float = 0.0) -> bool:
    """``point`` lies in the convex CCW polygon grown by ``tol`` (m)."""
    n, d = halfspaces(poly)
    return bool(np.all(n @ np.asarray(point, dtype=float) <= d + tol))


def distance_outside(point: np.ndarray, poly: np.ndarray) -> float:
    """Largest violation ``max(n_i . p - d_i)`` (m): <= 0 inside the polygon, > 0 outside (for a point
    beyond an edge, the distance to that edge's line)."""
    n, d = halfspaces(poly)
    return float(np.max(n @ np.asarray(point, dtype=float) - d))


def outside_vertices(px: float, py: float, poly: list[list[float]]) -> float:
    """:func:`distance_outside` for the point ``(px, py)`` and a convex CCW polygon given as a list of
    ``[x, y]`` vertices, in plain Python: for the few corners of the soles, numpy's per-call overhead is most
    of :func:`distance_outside`'s time (a per-tick cost: the viability monitor calls it twice a tick)."""
    worst = -math.inf
    n = len(poly)
    for i in range(n):
        ax, ay = poly[i]
        bx, by = poly[(i + 1) % n]
        ex, ey = bx - ax, by - ay
        norm = math.hypot(ex, ey)
        if norm > 0.0:
            worst = max(worst, (ey * (px - ax) - ex * (py - ay)) / norm)
    return worst


def polygons_overlap(a: np.ndarray, b: np.ndarray, clearance: float = 0.0) -> bool:
    """Two convex polygons come closer than ``clearance`` (m) (separating-axis test on both sets of edge
    normals: a gap of at least ``clearance`` along some axis means they are apart)."""
    for poly in (a, b):
        n, _ = halfspaces(poly)
        pa, pb = a @ n.T, b @ n.T  # projections of every corner on every axis
        gap = np.maximum(pb.min(axis=0) - pa.max(axis=0), pa.min(axis=0) - pb.max(axis=0))
        if np.any(gap >= clearance):
            return False
    return True


def support_polygon(soles: list[np.ndarray], margin: float = 0.0) -> np.ndarray:
    """Convex hull of the given sole polygons (world frame, m), shrunk by ``margin`` (m)."""
    hull = convex_hull(np.vstack(soles))
    return offset_polygon(hull, -margin) if margin else hull


def polygon_centroid(poly: np.ndarray) -> np.ndarray:
    """Area centroid ``[x, y]`` (m) of a simple CCW polygon."""
    a = np.asarray(poly, dtype=float)
    b = np.roll(a, -1, axis=0)
    cross = a[:, 0] * b[:, 1] - b[:, 0] * a[:, 1]
    area = 0.5 * cross.sum()
    return np.array([((a[:, 0] + b[:, 0]) * cross).sum(), ((a[:, 1] + b[:, 1]) * cross).sum()]) / (6.0 * area)
