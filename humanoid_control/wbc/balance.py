"""Standing balance: divergent component of motion (capture point) regulation inside the support polygon.

Linear inverted pendulum (LIPM), world frame, horizontal components, ground at the soles' height ``z_g``:

- ``omega = sqrt(g / (z_c - z_g))`` (1/s), DCM / capture point ``xi = c + cdot / omega`` (m);
- ``xi_dot = omega (xi - p)`` with ``p`` the centroidal moment pivot (CMP); with no moment about the CoM the
  CMP is the centre of pressure (CoP).

Control law: ``xi_dot_des = -k (xi - xi_ref)`` gives ``p_des = xi + (k / omega) (xi - xi_ref)``.

- **Ankle strategy**: the CoP ``p_cop`` is ``p_des`` clamped into the support polygon shrunk by
  ``cop_margin`` (the polygon of the sole corners of the feet in contact).
- **Hip strategy**: the CMP ``p_cmp`` is ``p_des`` clamped into the polygon grown by ``cmp_margin``; the
  part beyond the CoP is produced by a moment about the CoM, i.e. a rate of centroidal angular momentum
  ``Ldot_ref = (p_cop - c) x F`` with ``F = m (cddot_des + g e_z)`` the ground reaction (N m).

Outputs (task references): CoM acceleration
``cddot_des = [omega^2 (c - p_cmp), kp_z (z_ref - z) - kd_z zdot]`` (m/s^2) and ``Ldot_ref`` (N m,
horizontal components). The reference ``xi_ref`` is the CoM of the default standing pose relative to the sole
midpoint, carried along with the feet (yaw of the feet included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import PinocchioRobotModel, standing_base_height
from humanoid_control.wbc.dynamics import RobotDynamics


# ---------------------------------------------------------------------------------------------- polygons
def convex_hull(points: np.ndarray) -> np.ndarray:
    """Convex hull (counter-clockwise, no repeated end point) of (N, 2) points, monotone chain."""
    return np.array(_hull(np.asarray(points, dtype=float).tolist()))


def _hull(points: list[list[float]]) -> list[list[float]]:
    """:func:`convex_hull` on a list of ``[x, y]``."""
    pts = sorted(points)  # by x, then y
    if len(pts) < 3:
        return pts

    # monotone chain; the turn test (cross product of o->a and o->b <= 0: not a left turn) written inline
    lower: list[list[float]] = []
    for p in pts:
        px, py = p
        while len(lower) >= 2:
            (ox, oy), (ax, ay) = lower[-2], lower[-1]
            if (ax - ox) * (py - oy) - (ay - oy) * (px - ox) > 0:
                break
            lower.pop()
        lower.append(p)
    upper: list[list[float]] = []
    for p in reversed(pts):
        px, py = p
        while len(upper) >= 2:
            (ox, oy), (ax, ay) = upper[-2], upper[-1]
            if (ax - ox) * (py - oy) - (ay - oy) * (px - ox) > 0:
                break
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


def _edge_lines(pts: list[list[float]]) -> list[tuple[float, float, float]]:
    """Per edge ``i`` (vertex ``i`` -> ``i + 1``) of a convex CCW polygon: outward unit normal and offset,
    ``n . x = d`` (a zero-length edge gets a zero normal)."""
    n = len(pts)
    lines = []
    for i in range(n):
        x0, y0 = pts[i]
        x1, y1 = pts[(i + 1) % n]
        nx, ny = y1 - y0, x0 - x1
        length = math.hypot(nx, ny)
        if length > 1e-15:
            nx, ny = nx / length, ny / length
        else:
            nx = ny = 0.0
        lines.append((nx, ny, nx * x0 + ny * y0))
    return lines


def _offset(
    pts: list[list[float]], lines: list[tuple[float, float, float]], margin: float
) -> list[tuple[float, float]]:
    """Vertices of the polygon ``pts`` with its edges ``lines`` moved outwards by ``margin`` (m)."""
    out = []
    for i in range(len(pts)):
        ax, ay, da = lines[i - 1]
        nx, ny, d = lines[i]
        da += margin
        d += margin
        det = ax * ny - ay * nx
        if abs(det) > 1e-12:
            out.append(((da * ny - d * ay) / det, (ax * d - nx * da) / det))
        else:  # parallel neighbour edges: the vertex moves along its edge's normal
            out.append((pts[i][0] + margin * nx, pts[i][1] + margin * ny))
    return out


def offset_polygon(poly: np.ndarray, margin: float) -> np.ndarray:
    """Convex CCW polygon with every edge moved outwards by ``margin`` (m; negative shrinks).

    Vertex ``i`` is the intersection of the offset edges ``i - 1`` and ``i`` (valid while no edge vanishes);
    where the two are parallel the vertex moves along its edge's normal. In floats: a support polygon has a
    handful of vertices, where numpy's per-call cost dominates.
    """
    if margin == 0.0:
        return poly
    pts = poly.tolist()
    return np.array(_offset(pts, _edge_lines(pts), margin))


def _clamp(px: float, py: float, pts: list[tuple[float, float]] | list[list[float]]) -> tuple[float, float]:
    """:func:`clamp_to_polygon` on floats."""
    n = len(pts)
    edges = []
    inside = True
    for i in range(n):
        x0, y0 = pts[i]
        x1, y1 = pts[(i + 1) % n]
        ex, ey = x1 - x0, y1 - y0
        edges.append((x0, y0, ex, ey))
        if ex * (py - y0) - ey * (px - x0) < 0.0:
            inside = False
    if inside:
        return px, py
    best, best_d2 = (px, py), math.inf
    for x0, y0, ex, ey in edges:
        ee = ex * ex + ey * ey
        t = ((px - x0) * ex + (py - y0) * ey) / ee if ee > 0.0 else 0.0
        t = min(1.0, max(0.0, t))
        cx, cy = x0 + t * ex, y0 + t * ey
        d2 = (cx - px) ** 2 + (cy - py) ** 2
        if d2 < best_d2:
            best, best_d2 = (cx, cy), d2
    return best


def clamp_to_polygon(point: np.ndarray, poly: np.ndarray) -> np.ndarray:
    """The point itself if inside the convex CCW polygon, else the nearest point of its boundary."""
    return np.array(_clamp(float(point[0]), float(point[1]), poly.tolist()))


# ---------------------------------------------------------------------------------------------- balance
@dataclass
class BalanceSettings:
    """Gains of :class:`StandingBalance`.

    Attributes:
        dcm_gain: ``k / omega`` of the DCM law (dimensionless; the DCM error's time constant is
            ``1 / (dcm_gain omega)``).
        cop_margin: CoP kept this far inside the support polygon (m).
        cmp_margin: CMP allowed this far outside the support polygon (m); 0 disables the hip strategy.
        kp_height, kd_height: CoM height PD (1/s^2, 1/s).
        hip_strategy: set the angular-momentum rate reference from the CMP-CoP offset.
    """

    dcm_gain: float = 1.5
    cop_margin: float = 0.01
    cmp_margin: float = 0.06
    kp_height: float = 100.0
    kd_height: float = 20.0
    hip_strategy: bool = True


@dataclass
class BalanceState:
    """Quantities of one balance update (world frame, m, m/s, 1/s) for diagnostics and markers."""

    com: np.ndarray
    com_velocity: np.ndarray
    dcm: np.ndarray
    dcm_ref: np.ndarray
    omega: float
    cop: np.ndarray
    cmp: np.ndarray
    support_polygon: np.ndarray
    com_acceleration: np.ndarray
    angular_momentum_rate: np.ndarray
    yaw: float = 0.0  # heading of the feet (rad, about world z)


def default_com_offset(config: RobotConfig, pmodel: PinocchioRobotModel) -> np.ndarray:
    """CoM of the default standing pose minus the midpoint of the sole origins (m), robot upright at yaw 0.

    The z component is the CoM height above the soles.
    """
    model = pmodel.model
    data = model.createData()
    joints = config.array("default")
    q = pmodel.neutral_q(joints, standing_base_height(config, pmodel, joints))
    com = pin.centerOfMass(model, data, q)
    pin.framesForwardKinematics(model, data, q)
    mid = np.mean([data.oMf[fid].translation for fid in pmodel.sole_frame_ids.values()], axis=0)
    return np.array(com - mid)


class StandingBalance:
    """Turns the estimated state into CoM and angular-momentum task references (see module docstring)."""

    def __init__(
        self, config: RobotConfig, pmodel: PinocchioRobotModel, settings: BalanceSettings | None = None
    ) -> None:
        self.settings = settings or BalanceSettings()
        self.com_offset = default_com_offset(config, pmodel)
        # sole polygon corners (sole frame, m) per foot
        self._local = {s: [(float(x), float(y)) for x, y in foot.polygon] for s, foot in config.feet.items()}
        self.reference_shift = np.zeros(3)  # added to the reference CoM (m), e.g. to lean
        self.state: BalanceState | None = None

    def update(self, dyn: RobotDynamics, contacts: dict[str, bool]) -> BalanceState:
        """References for this tick from ``dyn`` (already updated) and the feet in contact."""
        s = self.settings
        c, cd = dyn.com, dyn.com_velocity
        # in floats: a dozen 2- and 3-vectors, where numpy's per-call cost would dominate
        cx, cy, cz = c.tolist()
        vx, vy, vz = cd.tolist()
        frames = [dyn.frames[side] for side in dyn.sides]
        sole_pos = [f.position.tolist() for f in frames]
        n_feet = len(sole_pos)
        mid = [sum(p[i] for p in sole_pos) / n_feet for i in range(3)]
        # yaw of the feet: mean heading of the sole x axes
        hx = sum(float(f.rotation[0, 0]) for f in frames)
        hy = sum(float(f.rotation[1, 0]) for f in frames)
        yaw = math.atan2(hy, hx)
        cyaw, syaw = math.cos(yaw), math.sin(yaw)
        off = self.com_offset
        shift = self.reference_shift
        ref = [
            mid[0] + cyaw * off[0] - syaw * off[1] + shift[0],
            mid[1] + syaw * off[0] + cyaw * off[1] + shift[1],
            mid[2] + off[2] + shift[2],
        ]
        # horizontal sole corners of the feet in contact (world frame), in floats
        corners: list[list[float]] = []
        for side, f, p in zip(dyn.sides, frames, sole_pos, strict=True):
            if contacts.get(side, False):
                (r00, r01, _), (r10, r11, _), _ = f.rotation.tolist()
                px, py = p[0], p[1]
                corners.extend([px + r00 * x + r01 * y, py + r10 * x + r11 * y] for x, y in self._local[side])
        pts = _hull(corners) if corners else [mid[:2]]
        ground = mid[2]
        height = max(cz - ground, 0.05)
        omega = math.sqrt(dyn.gravity / height)
        xi_x, xi_y = cx + vx / omega, cy + vy / omega
        px = xi_x + s.dcm_gain * (xi_x - ref[0])
        py = xi_y + s.dcm_gain * (xi_y - ref[1])
        if len(pts) >= 3:
            lines = _edge_lines(pts)  # shared by both offsets
            inner = _offset(pts, lines, -s.cop_margin) if s.cop_margin != 0.0 else pts
            cop_x, cop_y = _clamp(px, py, inner)
            if s.hip_strategy:
                outer = _offset(pts, lines, s.cmp_margin) if s.cmp_margin != 0.0 else pts
                cmp_x, cmp_y = _clamp(px, py, outer)
            else:
                cmp_x, cmp_y = cop_x, cop_y
        else:
            cop_x, cop_y = cmp_x, cmp_y = float(pts[0][0]), float(pts[0][1])
        w2 = omega * omega
        ax, ay = w2 * (cx - cmp_x), w2 * (cy - cmp_y)
        az = s.kp_height * (ref[2] - cz) - s.kd_height * vz
        acc = np.array([ax, ay, az])
        ldot = np.zeros(3)
        if s.hip_strategy:
            m = dyn.mass
            fx, fy, fz = m * ax, m * ay, m * (az + dyn.gravity)
            arm_x, arm_y, arm_z = cop_x - cx, cop_y - cy, ground - cz
            ldot[0] = arm_y * fz - arm_z * fy
            ldot[1] = arm_z * fx - arm_x * fz
        xi = np.array([xi_x, xi_y])
        xi_ref = np.array(ref[:2])
        cop = np.array([cop_x, cop_y])
        cmp = np.array([cmp_x, cmp_y])
        poly = np.array(pts)
        self.state = BalanceState(c.copy(), cd.copy(), xi, xi_ref, omega, cop, cmp, poly, acc, ldot, yaw)
        return self.state


# ---------------------------------------------------------------------------------------------- push bound
def push_impulse_bounds(
    config: RobotConfig, pmodel: PinocchioRobotModel, duration: float = 0.1
) -> dict[str, dict[str, float]]:
    """LIPM bound of the impulse (N s) a push of ``duration`` (s) at the CoM can have without stepping.

    Default standing pose, both feet down; CoP at the support-polygon edge from the start of the push:
    ``J* = m omega d k`` with ``k = omega T e^(omega T) / (e^(omega T) - 1)``, ``omega = sqrt(g / z_c)``,
    ``d`` the horizontal distance from the CoM to the polygon edge in the push direction (front +x, back -x,
    left +y, right -y of the base frame). Returns per direction ``{"bound_Ns", "d_m"}`` and ``omega``, ``k``.
    """
    model = pmodel.model
    data = model.createData()
    joints = config.array("default")
    q = pmodel.neutral_q(joints, standing_base_height(config, pmodel, joints))
    com = pin.centerOfMass(model, data, q)
    pin.framesForwardKinematics(model, data, q)
    corners = []
    ground = []
    for side, fid in pmodel.sole_frame_ids.items():
        oMs = data.oMf[fid]
        ground.append(oMs.translation[2])
        for x, y in config.feet[side].polygon:
            corners.append(oMs.act(np.array([x, y, 0.0]))[:2])
    poly = convex_hull(np.array(corners))
    mass = float(pin.computeTotalMass(model))
    g = float(np.linalg.norm(model.gravity.linear))
    omega = math.sqrt(g / (com[2] - float(np.mean(ground))))
    wt = omega * duration
    k = wt * math.exp(wt) / (math.exp(wt) - 1.0)
    out: dict[str, dict[str, float]] = {}
    for name, direction in (("front", (1, 0)), ("back", (-1, 0)), ("left", (0, 1)), ("right", (0, -1))):
        u = np.array(direction, dtype=float)
        d = _ray_to_polygon(com[:2], u, poly)
        out[name] = {"bound_Ns": mass * omega * d * k, "d_m": d}
    out["params"] = {"omega": omega, "k": k, "mass_kg": mass, "com_height_m": float(com[2] - np.mean(ground))}
    return out


def _ray_to_polygon(origin: np.ndarray, direction: np.ndarray, poly: np.ndarray) -> float:
    """Distance (m) from an inside point along a unit direction to the boundary of a convex CCW polygon."""
    best = math.inf
    for i in range(len(poly)):
        a, b = poly[i], poly[(i + 1) % len(poly)]
        e = b - a
        den = direction[0] * e[1] - direction[1] * e[0]
        if abs(den) < 1e-12:
            continue
        w = a - origin
        t = (w[0] * e[1] - w[1] * e[0]) / den
        s = (w[0] * direction[1] - w[1] * direction[0]) / den
        if t >= 0.0 and -1e-12 <= s <= 1.0 + 1e-12:
            best = min(best, t)
    return float(best)
