"""Leg kinematics on pinocchio: sole positions and motion in the IMU frame, foot forces from joint torques."""

from __future__ import annotations

import math

import numpy as np

from humanoid_control.estimation.ekf import GRAVITY, N_FEET
from humanoid_control.estimation.linalg import as_slice, solve
from humanoid_control.estimation.so3 import cross, skew

_I3 = np.eye(3)


class LegKinematics:
    """Forward kinematics and static foot-force estimation on pinocchio (robot configuration order).

    All positions are of the sole frames, expressed in the IMU frame; forces are ground reaction forces on the
    feet in the world-aligned frame (N), from the joint torques of each leg: at quasi-static balance
    ``tau_leg = g_leg(q) - J_leg^T F``, so ``F = J_leg^-T (g_leg - tau_leg)``.

    The pinocchio base stays at the origin with identity orientation; the base orientation enters through the
    gravity vector, expressed in the base frame (``g_base = R^T g``), so kinematics are base-relative and the
    forces are rotated to the world-aligned frame at the end.
    """

    def __init__(self, config: object) -> None:
        import pinocchio as pin

        from humanoid_control.model.robot_config import ConfigError
        from humanoid_control.model.robot_model import load_pinocchio_model

        self.pin = pin
        self.config = config
        self.pm = load_pinocchio_model(config)  # type: ignore[arg-type]
        full = self.pm.model
        self.mass = float(pin.computeTotalMass(full))
        self.sides = list(self.pm.sole_frame_ids)
        # Only the joints between the base and the soles / the IMU matter here: the sole poses, their
        # Jacobians and the leg joints' gravity torques (each leg joint carries the bodies below it only).
        # The other joints (arms, waist, ...) are locked, their bodies merged into their parents: the
        # kinematic tree pinocchio walks each tick is about half as long for the G1.
        keep: set[int] = set()
        for fid in [*self.pm.sole_frame_ids.values(), self.pm.imu_frame_id]:
            joint = full.frames[fid].parentJoint
            while joint > 0:
                keep.add(joint)
                joint = full.parents[joint]
        locked = [j for j in range(2, full.njoints) if j not in keep]
        model = pin.buildReducedModel(full, locked, pin.neutral(full)) if locked else full
        self.model = model
        self.data = self.model.createData()
        sole_ids = {
            side: model.getFrameId(full.frames[fid].name) for side, fid in self.pm.sole_frame_ids.items()
        }
        self._imu_frame_id = model.getFrameId(full.frames[self.pm.imu_frame_id].name)
        # the kept joints: their places in the configuration order of the inputs, and in the model's q / v
        names = list(config.joint_names)  # type: ignore[attr-defined]
        inputs, q_idx, v_idx = [], [], []
        for k, name in enumerate(names):
            if model.existJointName(name):
                jid = model.getJointId(name)
                inputs.append(k)
                q_idx.append(model.joints[jid].idx_q)
                v_idx.append(model.joints[jid].idx_v)
        self._inputs = as_slice(np.array(inputs))
        # leg joints: the joints on the path from the base to each sole (indices into v) that are on that
        # path only; a joint both legs hang from (a waist between the base and the hips) carries the sum of
        # both feet's forces and is left out of each leg's 6 x 6 system
        paths: dict[str, list[int]] = {}
        for side, fid in sole_ids.items():
            joint = model.frames[fid].parentJoint
            idx = []
            while joint > 1:  # stop at the free flyer
                idx.append(model.joints[joint].idx_v)
                joint = model.parents[joint]
            paths[side] = idx
        shared = set.intersection(*(set(p) for p in paths.values())) if len(paths) > 1 else set()
        self.leg_v: dict[str, np.ndarray] = {
            side: np.array(sorted(i for i in idx if i not in shared)) for side, idx in paths.items()
        }
        self.q = pin.neutral(self.model)
        self.v = np.zeros(self.model.nv)
        self.rotation = _I3  # base orientation in the world (set_state)
        self.model.gravity = pin.Motion.Zero()  # gravity enters as a base acceleration (foot_forces)
        self._acc = np.zeros(self.model.nv)
        self._zero_v = np.zeros(self.model.nv)
        self._tau = np.zeros(self.model.nv)
        # the sole origin and its polygon's corners, [x; y] columns in the sole frame (m): a rolling foot
        # keeps one of them still
        self._corners_xy = [
            np.hstack([np.zeros((2, 1)), np.array(config.feet[side].polygon, dtype=float).T])  # type: ignore[attr-defined]
            for side in self.pm.sole_frame_ids
        ]
        self._jac: list[np.ndarray] = []
        self.base_frame_id = self.model.getFrameId(config.base_body)  # type: ignore[attr-defined]
        self._leg_cols = [as_slice(self.leg_v[side]) for side in self.pm.sole_frame_ids]
        # foot_forces' block-diagonal system: the rows / columns of each leg, and the legs' joints in v
        sizes = [self.leg_v[side].size for side in self.pm.sole_frame_ids]
        if any(size != 6 for size in sizes):
            raise ConfigError(
                f"state estimator: each leg needs 6 joints from the base to its sole, got {sizes}"
            )
        self._leg_rows = [slice(6 * k, 6 * k + 6) for k in range(len(sizes))]
        self._legs_v = as_slice(np.concatenate([self.leg_v[side] for side in self.pm.sole_frame_ids]))
        self._legs_jt = np.zeros((6 * len(sizes), 6 * len(sizes)))
        self._sole_ids = list(sole_ids.values())
        self._q_idx, self._v_idx = as_slice(np.array(q_idx)), as_slice(np.array(v_idx))
        # the IMU is usually on the base body: then the base pose in the IMU frame is a constant
        imu_joint = self.model.frames[self._imu_frame_id].parentJoint
        self._base_fixed_to_imu = imu_joint == self.model.frames[self.base_frame_id].parentJoint
        self._base_in_imu: tuple[np.ndarray, np.ndarray] | None = None
        self.base_aligned_with_imu = False  # base axes = IMU axes (set by base_in_imu)
        self._imu: tuple[np.ndarray, np.ndarray] | None = None  # (R_iw, p_wi) of the IMU in the base frame
        self._sole_h: list[np.ndarray] = []
        self._feet: list[np.ndarray] | None = None  # feet_in_imu of the current state

    def set_state(
        self, joint_q: np.ndarray, base_rotation: np.ndarray | None = None, joint_dq: np.ndarray | None = None
    ) -> None:
        """Joint positions (configuration order, rad), the base orientation (force estimation) and rates."""
        pin = self.pin
        self.q[self._q_idx] = joint_q[self._inputs]  # base: origin, identity orientation (class docstring)
        self.rotation = _I3 if base_rotation is None else base_rotation
        if joint_dq is not None:
            self.v[self._v_idx] = joint_dq[self._inputs]
        else:
            self.v[:] = 0.0
        self._feet = None
        model, data = self.model, self.data
        pin.computeJointJacobians(model, data, self.q)  # also the joint placements
        frame = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        self._jac = [pin.getFrameJacobian(model, data, fid, frame) for fid in self._sole_ids]
        # the frames used, only (the model has tens): base frame, 4 x 4
        self._sole_h = [pin.updateFramePlacement(model, data, fid).homogeneous for fid in self._sole_ids]
        if self._imu is None or not self._base_fixed_to_imu:  # constant when the IMU is on the base body
            imu = pin.updateFramePlacement(model, data, self._imu_frame_id).homogeneous
            self._imu = (imu[:3, :3].T.copy(), imu[:3, 3].copy())

    def feet_in_imu(self) -> list[np.ndarray]:
        """Sole origins in the IMU frame (m), in :attr:`sides` order (after :meth:`set_state`)."""
        if self._feet is None:  # once per set_state
            r_iw, p_wi = self._imu  # type: ignore[misc]
            self._feet = [r_iw @ (h[:3, 3] - p_wi) for h in self._sole_h]
        return self._feet

    def sole_motion_in_imu(self, foot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Sole ``foot`` relative to the IMU frame, in the IMU frame: origin position (m), rotation (sole ->
        IMU), linear velocity of the origin (m/s) and angular velocity (rad/s), from the joint rates given to
        :meth:`set_state`."""
        r_iw, p_wi = self._imu
        h = self._sole_h[foot]
        twist = (self._jac[foot] @ self.v).reshape(2, 3) @ r_iw.T  # rows: linear, angular (IMU frame)
        return r_iw @ (h[:3, 3] - p_wi), r_iw @ h[:3, :3], twist[0], twist[1]

    def sole_speeds(
        self,
        foot: int,
        v_imu: np.ndarray,
        w_imu: np.ndarray,
        r_wi: np.ndarray,
        below: float | None = None,
    ) -> np.ndarray:
        """Horizontal speed in the world (m/s) of the sole origin and of each polygon corner of ``foot``.

        Given the IMU frame's velocity in the world ``v_imu`` (m/s), its angular velocity ``w_imu`` (rad/s,
        IMU frame) and orientation ``r_wi``: ``v_k = v_imu + R (w x p + v_sole + W x R_is c_k)``,
        ``W = w + w_sole``. With ``below``: just the origin's, if that is below ``below`` (the minimum is).
        """
        r_iw, _ = self._imu  # type: ignore[misc]
        h = self._sole_h[foot]
        p = self.feet_in_imu()[foot]
        jv = self._jac[foot] @ self.v  # sole twist relative to the base, base axes: linear, angular
        v_sole = r_iw @ jv[:3]
        v0 = v_imu + r_wi @ (cross(w_imu, p) + v_sole)
        vx, vy = float(v0[0]), float(v0[1])
        if below is not None and vx * vx + vy * vy < below * below:
            return np.array([math.hypot(vx, vy)])  # the origin is slower than ``below``: enough
        w_sole = r_iw @ jv[3:]
        r_is = r_iw @ h[:3, :3]
        a = (r_wi @ skew(w_imu + w_sole) @ r_is)[:2, :2]  # corners lie in the sole plane (z = 0)
        v = v0[:2, None] + a @ self._corners_xy[foot]  # 2 x (1 + corners)
        return np.sqrt((v * v).sum(axis=0))

    def slowest_sole_speed(
        self, foot: int, v_imu: np.ndarray, w_imu: np.ndarray, r_wi: np.ndarray, below: float
    ) -> float:
        """The smallest of :meth:`sole_speeds` (m/s), as a float: the origin's alone if under ``below``."""
        speeds = self.sole_speeds(foot, v_imu, w_imu, r_wi, below)
        return float(speeds[0]) if speeds.size == 1 else float(speeds.min())

    def base_in_imu(self) -> tuple[np.ndarray, np.ndarray]:
        """(rotation, translation) of the base frame in the IMU frame."""
        if self._base_in_imu is not None:
            return self._base_in_imu
        imu = self.pin.updateFramePlacement(self.model, self.data, self._imu_frame_id)
        base = self.pin.updateFramePlacement(self.model, self.data, self.base_frame_id)
        rel = imu.actInv(base)
        out = (rel.rotation.copy(), rel.translation.copy())
        self.base_aligned_with_imu = bool(np.allclose(out[0], _I3, atol=1e-12))
        if self._base_fixed_to_imu:
            self._base_in_imu = out
        return out

    def foot_forces(self, joint_tau: np.ndarray) -> list[np.ndarray]:
        """Ground reaction force on each foot, world-aligned axes (N), from measured joint torques (N m)."""
        # gravity torques as the torques that accelerate the base upwards at g (model gravity is zero): one
        # RNEA with the base acceleration -R^T g (base frame), nothing else moving
        self._acc[:3] = -(self.rotation.T @ GRAVITY)
        g = self.pin.rnea(self.model, self.data, self.q, self._zero_v, self._acc)
        self._tau[self._v_idx] = joint_tau[self._inputs]
        # both legs as one block-diagonal system [J_l^T 0; 0 J_r^T] [w_l; w_r] = g_legs - tau_legs (one
        # solve; least squares if a leg is singular, knee straight, which keeps the blocks apart)
        a = self._legs_jt
        for k, (jac, cols) in enumerate(zip(self._jac, self._leg_cols, strict=True)):
            a[self._leg_rows[k], self._leg_rows[k]] = jac[:, cols].T
        wrenches = solve(a, g[self._legs_v] - self._tau[self._legs_v])
        # the forces (the first 3 of each wrench), base frame -> world-aligned: rows F_i^T R^T
        forces = wrenches.reshape(N_FEET, -1)[:, :3] @ self.rotation.T
        return list(forces)
