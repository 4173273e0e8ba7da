"""Kinematic reach of a crossing step (issue 14, standing sideways pushes): can the unloaded foot land beyond
the loaded one?

Standing default pose, the left (loaded) sole fixed flat where it stands, the pelvis upright at about the
standing height and shifted toward the left foot by ``--shifts``; for sole offsets ``dx`` (forward of the left
sole) the largest ``dy`` (left of the left sole's centre line) the right sole reaches flat, with a yaw within
``--max-yaw`` of the left sole's, without the two sole polygons overlapping (``--clearance``). Damped least
squares inside the joint limits (``scipy.optimize.least_squares``, bounded), leg joints and the pelvis's
x, height (within ``--height-range`` of the standing one) and yaw free. Each reached pose is then checked in
MuJoCo (bare robot model as the simulator loads it) for contacts between the two legs' collision geometry.

Usage: ``python scripts/crossing_reach.py [--shifts 0,0.05,0.1] [--dx ...]``
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pinocchio as pin
from scipy.optimize import least_squares

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import (
    load_mujoco_model,
    load_pinocchio_model,
    quat_xyzw_to_wxyz,
    standing_base_height,
)
from humanoid_control.walking.geometry import Pose2D, polygons_overlap

LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shifts", default="0,0.05,0.1", help="pelvis shift toward the left foot (m)")
    ap.add_argument("--dx", default="-0.3,-0.25,-0.2,-0.15,0.15,0.2,0.25,0.3", help="sole x offsets (m)")
    ap.add_argument("--dy-max", type=float, default=0.3)
    ap.add_argument("--dy-step", type=float, default=0.02)
    ap.add_argument("--max-yaw", type=float, default=0.5)
    ap.add_argument("--clearance", type=float, default=0.0)
    ap.add_argument("--height-range", default="-0.04,0.01", help="pelvis height range about standing (m)")
    ap.add_argument(
        "--gap",
        type=float,
        default=0.005,
        help="legs' collision geoms kept this far apart (m); < -1: not checked in the IK",
    )
    ap.add_argument("--pelvis-yaw", type=float, default=0.6, help="pelvis yaw bound (rad)")
    ap.add_argument("--try-fixed-yaws", action="store_true", help="retry overlapping soles with fixed yaws")
    ap.add_argument("--tol", type=float, default=2e-3, help="position (m) and angle (rad) tolerance")
    args = ap.parse_args()

    cfg = load_robot_config("g1")
    pm = load_pinocchio_model(cfg)
    model = pm.model
    data = model.createData()
    joints0 = cfg.array("default")
    lower, upper = cfg.array("lower"), cfg.array("upper")
    names = list(cfg.joint_names)
    leg_idx = [names.index(f"{side}_{j}_joint") for side in ("left", "right") for j in LEG]
    h0 = standing_base_height(cfg, pm, joints0)
    q0 = pm.neutral_q(joints0, h0)
    pin.framesForwardKinematics(model, data, q0)
    fl, fr = pm.sole_frame_ids["left"], pm.sole_frame_ids["right"]
    left_target = data.oMf[fl].copy()
    left_xy = left_target.translation[:2].copy()
    right0 = data.oMf[fr].translation.copy()
    mid_y = 0.5 * (left_xy[1] + right0[1])
    sole = np.array(cfg.feet["left"].polygon, dtype=float)
    sole_r = np.array(cfg.feet["right"].polygon, dtype=float)
    left_poly = Pose2D(float(left_xy[0]), float(left_xy[1]), 0.0).apply(sole)
    hlo, hhi = (float(v) for v in args.height_range.split(","))
    print(
        f"standing: pelvis z {h0:.3f}, left sole {np.round(left_target.translation, 4).tolist()}, "
        f"right sole {np.round(right0, 4).tolist()}; "
        f"left sole outer edge y {left_xy[1] + sole[:, 1].max():.4f}"
    )

    mj = load_mujoco_model(cfg, scene=False, torque_actuators=False)
    import mujoco

    mm = mj.model
    md = mujoco.MjData(mm)

    def leg_of(body_id: int) -> str | None:
        while body_id > 0:
            name = mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_BODY, body_id) or ""
            for side in ("left", "right"):
                if (
                    name.startswith(f"{side}_hip")
                    or name.startswith(f"{side}_knee")
                    or name.startswith(f"{side}_ankle")
                ):
                    return side
            body_id = int(mm.body_parentid[body_id])
        return None

    geom_leg = [leg_of(int(mm.geom_bodyid[g])) for g in range(mm.ngeom)]
    left_geoms = [g for g in range(mm.ngeom) if geom_leg[g] == "left" and mm.geom_contype[g]]
    right_geoms = [g for g in range(mm.ngeom) if geom_leg[g] == "right" and mm.geom_contype[g]]

    def set_pose(q: np.ndarray) -> None:
        """MuJoCo's kinematics at the pinocchio configuration ``q``."""
        qpos = np.array(mm.qpos0)
        qpos[mj.base_qpos_adr : mj.base_qpos_adr + 3] = q[:3]
        qpos[mj.base_qpos_adr + 3 : mj.base_qpos_adr + 7] = quat_xyzw_to_wxyz(q[3:7])
        qpos[mj.qpos_adr] = q[pm.joint_q_idx]
        md.qpos[:] = qpos
        mujoco.mj_kinematics(mm, md)

    def leg_gap(q: np.ndarray) -> tuple[float, str]:
        """Smallest distance (m) between the two legs' collision geoms (negative: penetration)."""
        set_pose(q)
        mujoco.mj_collision(mm, md)
        best, pair = math.inf, ""
        fromto = np.zeros(6)
        for a in left_geoms:
            for b in right_geoms:
                d = mujoco.mj_geomDistance(mm, md, a, b, 0.2, fromto)
                if d < best:
                    best = d
                    pair = (
                        f"{mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_BODY, int(mm.geom_bodyid[a]))}/"
                        f"{mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_BODY, int(mm.geom_bodyid[b]))}"
                    )
        return best, pair

    def config_of(z: np.ndarray, shift: float) -> np.ndarray:
        q = q0.copy()
        q[0] = z[0]
        q[1] = mid_y + shift
        q[2] = h0 + z[1]
        q[3:7] = pin.Quaternion(pin.utils.rpyToMatrix(0.0, 0.0, z[2])).coeffs()
        joints = joints0.copy()
        joints[leg_idx] = z[3:15]
        q[pm.joint_q_idx] = joints
        return q

    near = ("knee", "ankle_pitch", "hip_yaw")
    pairs = [
        (a, b)
        for a in left_geoms
        for b in right_geoms
        if any(
            n in (mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_BODY, int(mm.geom_bodyid[g])) or "")
            for g in (a, b)
            for n in near
        )
    ]

    def gap_residual(q: np.ndarray) -> float:
        set_pose(q)
        fromto = np.zeros(6)
        d = min(mujoco.mj_geomDistance(mm, md, a, b, 0.1, fromto) for a, b in pairs)
        return max(args.gap - d, 0.0)

    def residual(z: np.ndarray, shift: float, target: np.ndarray, yaw: float | None) -> np.ndarray:
        q = config_of(z, shift)
        pin.framesForwardKinematics(model, data, q)
        e_left = pin.log6(left_target.actInv(data.oMf[fl])).vector
        mr = data.oMf[fr]
        psi = z[15] if yaw is None else yaw
        want = pin.SE3(pin.utils.rpyToMatrix(0.0, 0.0, psi), np.array([target[0], target[1], 0.0]))
        e_right = pin.log6(want.actInv(mr)).vector
        extra = [gap_residual(q)] if args.gap > -1.0 else []
        return np.concatenate([e_left, e_right, extra])

    zlo = np.concatenate([[-0.5, hlo, -args.pelvis_yaw], lower[leg_idx], [-args.max_yaw]])
    zhi = np.concatenate([[0.5, hhi, args.pelvis_yaw], upper[leg_idx], [args.max_yaw]])
    z_default = np.concatenate([[0.0, 0.0, 0.0], joints0[leg_idx], [0.0]])

    def solve(
        shift: float, target: np.ndarray, yaw: float | None, starts: list[np.ndarray]
    ) -> np.ndarray | None:
        for z in starts:
            z = np.clip(z, zlo + 1e-9, zhi - 1e-9)
            r = least_squares(
                residual, z, bounds=(zlo, zhi), args=(shift, target, yaw), xtol=1e-10, ftol=1e-10
            )
            if np.max(np.abs(r.fun)) < args.tol:
                return r.x
        return None

    dxs = [float(v) for v in args.dx.split(",")]
    yaws = np.linspace(-args.max_yaw, args.max_yaw, 5)
    for shift in (float(v) for v in args.shifts.split(",")):
        print(f"\npelvis shifted {shift:+.2f} m toward the left foot")
        for dx in dxs:
            best: tuple[float, float, np.ndarray] | None = None
            warm: np.ndarray | None = None
            misses = 0
            dy = 0.0
            while dy <= args.dy_max + 1e-9 and misses < 3:
                target = left_xy + np.array([dx, dy])
                found = None
                starts = ([] if warm is None else [warm]) + [z_default]
                z = solve(shift, target, None, starts)
                for yaw in [None, *yaws]:  # the yaw free first, then fixed ones that keep the soles apart
                    if yaw is not None:
                        z = solve(shift, target, float(yaw), starts)
                    if z is None:
                        continue
                    psi = float(z[15]) if yaw is None else float(yaw)
                    pose = Pose2D(float(target[0]), float(target[1]), psi)
                    if not polygons_overlap(left_poly, pose.apply(sole_r), args.clearance):
                        found = (psi, z)
                        break
                    if yaw is None and not args.try_fixed_yaws:
                        break
                if found is not None:
                    best = (dy, found[0], found[1])
                    warm = found[1]
                    misses = 0
                else:
                    misses += 1
                dy += args.dy_step
            if best is None:
                print(f"  dx {dx:+.2f}: nothing reached")
                continue
            dy, yaw, z = best
            q = config_of(z, shift)
            gap, pair = leg_gap(q)
            jr = dict(
                zip(
                    [f"{s[0]}_{j}" for s in ("left", "right") for j in LEG], np.round(z[3:15], 2), strict=True
                )
            )
            print(
                f"  dx {dx:+.2f}: max dy {dy:+.2f} (right sole y {left_xy[1] + dy:+.3f}, yaw {yaw:+.2f}), "
                f"pelvis dz {z[1]:+.3f} yaw {z[2]:+.2f}; legs' collision geoms {gap * 1000:+.0f} mm apart "
                f"({pair}); r_hip_roll {jr['r_hip_roll']:+.2f} r_hip_yaw {jr['r_hip_yaw']:+.2f} "
                f"l_hip_roll {jr['l_hip_roll']:+.2f} l_hip_yaw {jr['l_hip_yaw']:+.2f}"
            )


if __name__ == "__main__":
    main()
