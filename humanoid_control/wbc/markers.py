"""Marker geometry of the WBC for rviz2 (pure: no message types; the node converts to MarkerArray).

All points are in the controller's world frame (``odom`` for the node), metres. Contact force arrows start at
each sole contact point and are scaled by ``force_scale`` (m per N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from humanoid_control.wbc.balance import BalanceState


@dataclass
class MarkerSpec:
    """One marker: ``kind`` (``sphere``, ``line_strip``, ``arrow``), namespace, points (k, 3) m, size (sphere
    diameter or line width, m), colour (r, g, b, a in [0, 1])."""

    kind: str
    ns: str
    points: np.ndarray
    size: float
    rgba: tuple[float, float, float, float]


@dataclass
class MarkerSet:
    """The markers of one tick."""

    markers: list[MarkerSpec]


def marker_set(
    bal: BalanceState,
    contact_points: dict[str, np.ndarray],
    forces: dict[str, np.ndarray],
    weight: float,
    arrow_length_at_weight: float = 0.5,
) -> MarkerSet:
    """CoM, capture point (DCM) and its reference, CoP, CMP (on the ground), support polygon (closed) and one
    arrow per contact point force (an arrow ``arrow_length_at_weight`` m long would carry the weight, N)."""
    ground = float(np.mean([p[:, 2].mean() for p in contact_points.values()])) if contact_points else 0.0

    def on_ground(xy: np.ndarray) -> np.ndarray:
        return np.array([[float(xy[0]), float(xy[1]), ground]])

    out = [
        MarkerSpec("sphere", "com", bal.com.reshape(1, 3), 0.05, (1.0, 0.8, 0.0, 1.0)),
        MarkerSpec("sphere", "com_ground", on_ground(bal.com[:2]), 0.03, (1.0, 0.8, 0.0, 0.6)),
        MarkerSpec("sphere", "capture_point", on_ground(bal.dcm), 0.03, (1.0, 0.1, 0.1, 1.0)),
        MarkerSpec("sphere", "capture_point_ref", on_ground(bal.dcm_ref), 0.02, (0.2, 1.0, 0.2, 1.0)),
        MarkerSpec("sphere", "cop", on_ground(bal.cop), 0.025, (0.1, 0.4, 1.0, 1.0)),
        MarkerSpec("sphere", "cmp", on_ground(bal.cmp), 0.02, (0.8, 0.2, 1.0, 1.0)),
    ]
    poly = np.asarray(bal.support_polygon)
    if len(poly) >= 3:
        closed = np.vstack([poly, poly[:1]])
        pts = np.column_stack([closed, np.full(len(closed), ground)])
        out.append(MarkerSpec("line_strip", "support_polygon", pts, 0.005, (0.1, 0.6, 1.0, 1.0)))
    scale = arrow_length_at_weight / max(weight, 1e-9)
    for side, f in forces.items():
        for p, fi in zip(contact_points[side], f, strict=False):
            if not np.all(np.isfinite(fi)):  # a failed tick's forces are NaN
                continue
            out.append(
                MarkerSpec(
                    "arrow",
                    f"contact_force_{side}",
                    np.array([p, p + scale * fi]),
                    0.005,
                    (1.0, 0.3, 0.0, 1.0),
                )
            )
    return MarkerSet(out)
