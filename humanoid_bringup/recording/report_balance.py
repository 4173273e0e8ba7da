"""``humanoid-report``'s balance figures from a recorded run: CoM, capture point and support polygon.

Computed with MuJoCo kinematics from the recorded ground truth (``/sim/ground_truth``: base pose in the world,
twist in the base frame) and ``/joint_states`` (positions, velocities): per sample the whole-body centre of
mass ``c`` and its velocity (world, m and m/s), the instantaneous capture point ``xi = c_xy + v_xy / omega``
with ``omega = sqrt(g / h)``, ``h`` the CoM height above the lowest sole (m), and the support polygon (the
convex hull, world x-y, of the sole polygons (the robot configuration's) of the feet in contact). A foot is in
contact while its recorded contact force (``/sim/contacts/<side>``, else the estimator's ``/contacts/<side>``)
is above ``contact_fraction`` of the robot's weight, or, without contact topics, while its sole is within
2 cm of the lowest one. Margins are signed distances to the polygon's edges (m; positive inside, negative
outside, NaN without a foot in contact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from humanoid_bringup.recording.report_bag import RunData, Series

__all__ = ["Balance", "BalanceModel", "convex_hull", "signed_margin"]

GRAVITY = 9.81


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull of 2D ``points`` (monotone chain); fewer than 3 points as given."""
    pts = sorted({(float(x), float(y)) for x, y in np.asarray(points, dtype=float).reshape(-1, 2)})
    if len(pts) < 3:
        return np.array(pts, dtype=float).reshape(-1, 2)

    def cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[float, float]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[tuple[float, float]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1], dtype=float)


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    ab = b - a
    s = float(np.clip(np.dot(p - a, ab) / max(float(np.dot(ab, ab)), 1e-18), 0.0, 1.0))
    return float(np.linalg.norm(p - (a + s * ab)))


def signed_margin(point: np.ndarray, polygon: np.ndarray) -> float:
    """Distance (m) from ``point`` to the edges of the convex counter-clockwise ``polygon``: positive
    inside, negative outside; NaN for an empty polygon (a point or segment: the negated distance)."""
    poly = np.asarray(polygon, dtype=float).reshape(-1, 2)
    p = np.asarray(point, dtype=float)[:2]
    if len(poly) == 0:
        return float("nan")
    if len(poly) == 1:
        return -float(np.linalg.norm(p - poly[0]))
    edges = [(poly[i], poly[(i + 1) % len(poly)]) for i in range(len(poly))]
    dist = min(_segment_distance(p, a, b) for a, b in edges)
    if len(poly) < 3:
        return -dist
    inside = all((b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) >= 0.0 for a, b in edges)
    return dist if inside else -dist


@dataclass
class Balance:
    """Per sample (time ``t``, s): ``com`` (n, 3) and ``com_vel`` (n, 3) in the world (m, m/s), ``cp`` (n, 2)
    capture point (m, world x-y), ``contact`` (n, 2) left/right in contact, ``polygons`` the support polygon
    (k, 2) of each sample, ``margin_com`` / ``margin_cp`` (m; positive inside)."""

    t: np.ndarray
    com: np.ndarray
    com_vel: np.ndarray
    cp: np.ndarray
    contact: np.ndarray
    polygons: list[np.ndarray]
    margin_com: np.ndarray
    margin_cp: np.ndarray
    contact_source: str


class BalanceModel:
    """The robot's MuJoCo model (scene, position actuators as the renderer loads it) and the recorded state
    put into it (ground truth + joint states)."""

    def __init__(self, robot: str = "g1") -> None:
        import mujoco

        from humanoid_control.model.robot_config import load_robot_config
        from humanoid_control.model.robot_model import load_mujoco_model

        self.mujoco = mujoco
        self.config = load_robot_config(robot)
        self.mj = load_mujoco_model(self.config, scene=True, torque_actuators=False)
        self.model: Any = self.mj.model
        self.data: Any = mujoco.MjData(self.model)
        self.sides = list(self.config.feet)
        self.polygons = {s: np.asarray(f.polygon, dtype=float) for s, f in self.config.feet.items()}
        root = self.mj.base_body_id
        self.mass = float(self.model.body_subtreemass[root])

    def state_at(self, run: RunData, t: float, max_gap: float = 0.05) -> tuple[np.ndarray, np.ndarray] | None:
        """MuJoCo ``(qpos, qvel)`` at time ``t`` (s) from the last ground truth and joint state at or before
        it (each at most ``max_gap`` s old); None where the bag lacks them."""
        truth, joints = run.truth, run.joints
        if truth is None or joints is None or not len(truth) or not len(joints):
            return None
        i = int(np.searchsorted(truth.t, t + 1e-9)) - 1
        j = int(np.searchsorted(joints.t, t + 1e-9)) - 1
        if i < 0 or j < 0 or t - truth.t[i] > max_gap or t - joints.t[j] > max_gap:
            return None
        return self.pack(truth.v[i], run.joint_names, joints.v[j])

    def pack(
        self, truth_row: np.ndarray, names: list[str], joint_row: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(qpos, qvel)`` from a ground-truth row (x, y, z, qw, qx, qy, qz, v base, w base) and a joint row
        (q..., dq... in ``names`` order); joints the model lacks are ignored."""
        from humanoid_control.model.robot_model import quat_wxyz_to_matrix

        m = self.mj
        qpos = np.array(self.model.qpos0, dtype=float)
        qvel = np.zeros(self.model.nv)
        b, v = m.base_qpos_adr, m.base_qvel_adr
        quat = np.asarray(truth_row[3:7], dtype=float)
        quat = quat / max(float(np.linalg.norm(quat)), 1e-12)
        qpos[b : b + 3], qpos[b + 3 : b + 7] = truth_row[0:3], quat
        qvel[v : v + 3] = quat_wxyz_to_matrix(quat) @ np.asarray(truth_row[7:10])  # world linear velocity
        qvel[v + 3 : v + 6] = truth_row[10:13]  # body angular velocity (MuJoCo's free joint convention)
        index = {n: k for k, n in enumerate(self.config.joint_names)}
        n = len(names)
        for k, name in enumerate(names):
            if name in index:
                qpos[m.qpos_adr[index[name]]] = joint_row[k]
                qvel[m.qvel_adr[index[name]]] = joint_row[n + k]
        return qpos, qvel

    def _forward(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        d = self.data
        d.qpos[:], d.qvel[:] = qpos, qvel
        self.mujoco.mj_forward(self.model, d)
        self.mujoco.mj_subtreeVel(self.model, d)

    def soles(self) -> dict[str, np.ndarray]:
        """Per side, the sole polygon's corners in the world (k, 3) at the current state."""
        out = {}
        for side in self.sides:
            sid = self.mj.sole_site_ids[side]
            pos, rot = self.data.site_xpos[sid], self.data.site_xmat[sid].reshape(3, 3)
            corners = np.column_stack([self.polygons[side], np.zeros(len(self.polygons[side]))])
            out[side] = pos + corners @ rot.T
        return out

    def balance(self, run: RunData, rate_hz: float = 50.0, contact_fraction: float = 0.05) -> Balance | None:
        """The :class:`Balance` series at up to ``rate_hz`` samples per second of the run; None without
        ground truth and joint states."""
        if run.truth is None or run.joints is None:
            return None
        prefix = next(
            (p for p in run.names.contacts if len(run.contacts.get(p, {})) == len(self.sides)), None
        )
        forces: dict[str, Series] = run.contacts[prefix] if prefix else {}
        threshold = contact_fraction * self.mass * GRAVITY
        times, last = [], -np.inf
        for t in run.truth.t:
            if t - last >= 1.0 / rate_hz - 1e-9:
                times.append(float(t))
                last = t
        rows: dict[str, list[Any]] = {k: [] for k in ("t", "com", "vel", "cp", "contact", "poly", "mc", "mp")}
        root = self.mj.base_body_id
        for t in times:
            state = self.state_at(run, t)
            if state is None:
                continue
            self._forward(*state)
            com = np.array(self.data.subtree_com[root])
            vel = np.array(self.data.subtree_linvel[root])
            soles = self.soles()
            ground = min(float(c[:, 2].min()) for c in soles.values())
            omega = np.sqrt(GRAVITY / max(com[2] - ground, 0.1))
            cp = com[:2] + vel[:2] / omega
            contact = []
            for side in self.sides:
                if forces:
                    s = forces[side]
                    k = int(np.searchsorted(s.t, t + 1e-9)) - 1
                    contact.append(k >= 0 and abs(t - s.t[k]) < 0.05 and float(s.v[k, 2]) > threshold)
                else:
                    contact.append(float(soles[side][:, 2].min()) < ground + 0.02)
            pts = [soles[s][:, :2] for s, on in zip(self.sides, contact, strict=True) if on]
            poly = convex_hull(np.vstack(pts)) if pts else np.zeros((0, 2))
            for key, value in zip(
                rows,
                (t, com, vel, cp, contact, poly, signed_margin(com, poly), signed_margin(cp, poly)),
                strict=True,
            ):
                rows[key].append(value)
        if not rows["t"]:
            return None
        return Balance(
            t=np.array(rows["t"]),
            com=np.array(rows["com"]),
            com_vel=np.array(rows["vel"]),
            cp=np.array(rows["cp"]),
            contact=np.array(rows["contact"], dtype=bool),
            polygons=rows["poly"],
            margin_com=np.array(rows["mc"]),
            margin_cp=np.array(rows["mp"]),
            contact_source=f"{prefix}/<side> above {threshold:.0f} N"
            if prefix
            else "sole height (no contact topics)",
        )
