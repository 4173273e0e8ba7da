"""Rigid-body quantities of one control tick, computed once with pinocchio and shared by tasks/constraints.

Frames and conventions (pinocchio):

- ``q`` = ``[x y z qx qy qz qw, joints]``, ``v`` = ``[v_base (base frame), w_base (base frame), dq]``; nv =
  6 + number of joints.
- Frame Jacobians and velocities are ``LOCAL_WORLD_ALIGNED``: at the frame origin, axes of the world frame,
  rows ``[linear; angular]`` (m/s, rad/s per unit of ``v``).
- "Drift" of a task is its acceleration at ``qdd = 0``: ``Jdot v`` (classical acceleration for linear rows:
  the acceleration of the point, not the spatial one).
- Centroidal momentum ``h_G = A_G v`` = ``[m cdot; L]`` (N s, N m s), about the CoM with world axes;
  ``hdot_G = A_G qdd + Adot_G v``.
- Sole contact points: the corners of each sole polygon (sole frame, z = 0), expressed in the world frame
  relative to the sole origin.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import PinocchioRobotModel

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


class FrameState:
    """Kinematics of one frame at this tick (LOCAL_WORLD_ALIGNED).

    Attributes:
        frame_id: pinocchio frame id.
        position (3,) m, rotation (3, 3) frame-to-world, velocity (6,) [linear m/s, angular rad/s],
        drift (6,) classical acceleration at qdd = 0 (m/s^2, rad/s^2), jacobian (6, nv).
    """

    def __init__(self, frame_id: int, nv: int) -> None:
        self.frame_id = frame_id
        self.position = np.zeros(3)
        self.rotation = np.eye(3)
        self.velocity = np.zeros(6)
        self.drift = np.zeros(6)
        self.jacobian = np.zeros((6, nv))


class RobotDynamics:
    """Pinocchio model + data, refreshed by :meth:`update` with one state per tick.

    After :meth:`update`: ``M`` (nv, nv) mass matrix (kg, kg m, kg m^2), ``h`` (nv,) nonlinear effects
    (Coriolis, centrifugal, gravity; N, N m), ``Ag`` (6, nv), ``hg`` (6,), ``hg_drift`` (6,) centroidal
    momentum matrix, momentum and its rate at qdd = 0, ``com`` / ``com_velocity`` (3,) world frame (m, m/s),
    ``frames[name]`` (:class:`FrameState`) for the soles (``left``/``right``), the base and the torso.
    """

    def __init__(self, config: RobotConfig, pmodel: PinocchioRobotModel) -> None:
        self.config = config
        self.pmodel = pmodel
        self.model = pmodel.model
        self.data = self.model.createData()
        self.nv = int(self.model.nv)
        self.nq = int(self.model.nq)
        if self.model.njoints < 2 or self.model.joints[1].shortname() != "JointModelFreeFlyer":
            raise ValueError("RobotDynamics expects a floating-base model (joint 1 a free flyer)")
        self.mass = float(pin.computeTotalMass(self.model))
        self.gravity = float(np.linalg.norm(self.model.gravity.linear))
        self.gravity_vector = np.array(self.model.gravity.linear, dtype=float)  # (3,) world frame (m/s^2)
        d = self.data
        # M: pinocchio's own buffer is Fortran order; its transpose is a C-order view and, M being symmetric
        # (the binding fills both triangles), M itself. Checked once here, else copied every tick.
        probe = pin.integrate(self.model, pin.neutral(self.model), np.linspace(-0.3, 0.3, self.nv))
        pin.computeAllTerms(self.model, d, probe, np.zeros(self.nv))
        self._m_view = bool(
            np.shares_memory(d.M.T, d.M) and d.M.T.flags.c_contiguous and np.array_equal(d.M, d.M.T)
        )
        self.M = d.M.T if self._m_view else np.zeros((self.nv, self.nv))
        # views of pinocchio's own buffers, refreshed in place by computeAllTerms / updateFramePlacements (no
        # copy per tick); where a binding returns copies instead, they are copied every tick
        getters = (
            lambda: d.nle,
            lambda: d.hg.vector,
            lambda: d.com[0],
            lambda: d.vcom[0],
            lambda: d.oMf[0].translation,
            lambda: d.oMf[0].rotation,
        )
        self._views = all(np.shares_memory(get(), get()) for get in getters)
        if self._views:
            self.h, self.hg, self.com, self.com_velocity = d.nle, d.hg.vector, d.com[0], d.vcom[0]
        else:
            self.h, self.hg = np.zeros(self.nv), np.zeros(6)
            self.com, self.com_velocity = np.zeros(3), np.zeros(3)
        self.q = pin.neutral(self.model)
        self.v = np.zeros(self.nv)
        self.sides = tuple(sorted(config.feet))
        names: dict[str, int] = {s: pmodel.sole_frame_ids[s] for s in self.sides}
        names["base"] = self.model.getFrameId(config.base_body)
        if config.wbc.torso_frame:
            names["torso"] = self.model.getFrameId(config.wbc.torso_frame)
        self.frames = {k: FrameState(fid, self.nv) for k, fid in names.items()}
        if self._views:
            for fs in self.frames.values():
                oMf = d.oMf[fs.frame_id]
                fs.position, fs.rotation = oMf.translation, oMf.rotation
        # contact points: sole polygon corners in the sole frame (m)
        self.contact_points_local = {
            s: np.array([[x, y, 0.0] for x, y in config.feet[s].polygon]) for s in self.sides
        }

    # ------------------------------------------------------------------ structure
    def frame_support_mask(self, frame_id: int) -> np.ndarray:
        """(nv,) bool: velocity indices that can move the frame (its joint and every ancestor)."""
        joint = self.model.frames[frame_id].parentJoint
        mask = np.zeros(self.nv, dtype=bool)
        for j in self.model.supports[joint]:
            if j == 0:
                continue
            jm = self.model.joints[j]
            mask[jm.idx_v : jm.idx_v + jm.nv] = True
        return mask

    def mass_matrix_mask(self) -> np.ndarray:
        """(nv, nv) bool: structural non-zeros of ``M`` (velocities on a common branch of the tree)."""
        idx_joint = np.zeros(self.nv, dtype=int)
        for j in range(1, self.model.njoints):
            jm = self.model.joints[j]
            idx_joint[jm.idx_v : jm.idx_v + jm.nv] = j
        anc = np.zeros((self.model.njoints, self.model.njoints), dtype=bool)
        for j in range(1, self.model.njoints):
            for a in self.model.supports[j]:
                anc[a, j] = True
        related = anc | anc.T
        return related[np.ix_(idx_joint, idx_joint)]

    # ------------------------------------------------------------------ per tick
    def update(self, q: np.ndarray, v: np.ndarray) -> None:
        """Compute every quantity of the tick at configuration ``q`` (nq,) and velocity ``v`` (nv,)."""
        m, d = self.model, self.data
        self.q[:] = q
        self.v[:] = v
        # M, nle, joint Jacobians, com, vcom, Ag, hg; its RNEA pass at qdd = 0 also leaves data.a at the
        # zero-acceleration values, which the frame drifts below read
        pin.computeAllTerms(m, d, q, v)
        pin.updateFramePlacements(m, d)
        if not self._m_view:
            self.M[:] = d.M
            self.M += np.triu(self.M, 1).T - np.tril(self.M, -1)  # both triangles from the upper one
        views = self._views
        if not views:
            self.h[:], self.hg[:], self.com[:], self.com_velocity[:] = d.nle, d.hg.vector, d.com[0], d.vcom[0]
        for fs in self.frames.values():
            fid = fs.frame_id
            if not views:
                oMf = d.oMf[fid]
                fs.position[:], fs.rotation[:] = oMf.translation, oMf.rotation
            fs.jacobian = pin.getFrameJacobian(m, d, fid, _LWA)  # a new array (owns its data)
            fs.velocity[:] = pin.getFrameVelocity(m, d, fid, _LWA).vector  # a temporary's: copied
            fs.drift[:] = pin.getFrameClassicalAcceleration(m, d, fid, _LWA).vector

    @property
    def Ag(self) -> np.ndarray:
        """(6, nv) centroidal momentum matrix of the last update (a copy)."""
        return np.array(self.data.Ag)

    @property
    def hg_drift(self) -> np.ndarray:
        """(6,) ``Adot_G v``, the centroidal momentum rate at ``qdd = 0`` of the last update, from the
        nonlinear effects' base rows (no second kinematics pass).

        At ``qdd = 0`` the base rows of ``h`` are the wrench the root joint must transmit (base frame, about
        the base origin): the momentum rate minus gravity. Rotated to world axes, moved to the CoM and with
        gravity added back: ``hdot_G = [R f_b + m g; R n_b + (p_b - c) x R f_b]`` (N, N m); equal to
        pinocchio's ``computeCentroidalMomentumTimeVariation`` at ``qdd = 0`` to round-off.
        """
        oMb = self.data.oMi[1]
        fw = oMb.rotation @ self.h[0:6].reshape(2, 3).T  # (3, 2): columns R f_b, R n_b
        (fx, nx), (fy, ny), (fz, nz) = fw.tolist()
        rx, ry, rz = (oMb.translation - self.com).tolist()
        m = self.mass
        gx, gy, gz = self.gravity_vector.tolist()
        linear = [fx + m * gx, fy + m * gy, fz + m * gz]
        return np.array([*linear, nx + ry * fz - rz * fy, ny + rz * fx - rx * fz, nz + rx * fy - ry * fx])

    def contact_points_world(self, side: str) -> np.ndarray:
        """(k, 3) contact points of a sole in the world frame (m)."""
        fs = self.frames[side]
        return fs.position + self.contact_points_local[side] @ fs.rotation.T


def pinocchio_state(
    pmodel: PinocchioRobotModel,
    base_position: np.ndarray,
    base_quat_xyzw: np.ndarray,
    base_linear_velocity_body: np.ndarray,
    base_angular_velocity_body: np.ndarray,
    joint_positions: np.ndarray,
    joint_velocities: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio ``(q, v)`` from an estimated state (base pose in the world, base twist in the base frame,
    joints in configuration order)."""
    q = pin.neutral(pmodel.model)
    q[0:3] = base_position
    q[3:7] = np.asarray(base_quat_xyzw) / np.linalg.norm(base_quat_xyzw)
    q[pmodel.joint_q_idx] = joint_positions
    v = np.zeros(pmodel.model.nv)
    v[0:3] = base_linear_velocity_body
    v[3:6] = base_angular_velocity_body
    v[pmodel.joint_v_idx] = joint_velocities
    return q, v
