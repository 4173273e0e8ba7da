"""Task-space inverse dynamics as one QP per tick (pinocchio + a :class:`QpSolver`, OSQP by default).

Decision variables ``x = [qdd (nv), f_left (3 k), f_right (3 k)]``: generalized accelerations (base
twist rate in the base frame, joint accelerations; m/s^2, rad/s^2) and point forces at the ``k`` sole corners
of each foot (N, world frame). Joint torques are not variables: they follow from the actuated rows of the
dynamics, ``tau = M_a qdd + h_a - (J_c^T f)_a`` (N m).

Cost: ``sum_tasks 1/2 ||W^(1/2) (J qdd - b)||^2 + 1/2 r_a ||qdd||^2 + 1/2 r_f ||f||^2`` (the last two small
regularizations make the problem strictly convex).

Constraints (:mod:`humanoid_control.wbc.constraints`), in this row order: floating-base dynamics (6,
equality), torque limits (nv - 6), rigid contacts (6 per foot, equality), friction pyramids (5 per corner),
joint position/velocity limits (nv - 6).

Per tick: :meth:`WholeBodyQP.solve` refreshes the rigid-body terms (one ``computeAllTerms`` plus one
second-order kinematics pass), fills dense buffers in place, gathers the values of the fixed sparse
patterns (precomputed CSC index maps) and hands them to the warm-started solver. After a successful solve
the equality rows (dynamics, contacts) are re-imposed exactly by a minimum-norm correction of ``x``
(ADMM solves them to ``eps`` only), so the dynamics residual is at round-off level.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from humanoid_control.robot_config import RobotConfig
from humanoid_control.robot_model import PinocchioRobotModel
from humanoid_control.wbc.constraints import (
    Constraint,
    ContactConstraint,
    ContactForceMap,
    FloatingBaseDynamics,
    FrictionPyramid,
    JointLimits,
    TorqueLimits,
)
from humanoid_control.wbc.dynamics import RobotDynamics
from humanoid_control.wbc.solver import OsqpSolver, QpSolver, QpStatus
from humanoid_control.wbc.tasks import (
    AngularMomentumTask,
    ComTask,
    FootPoseTask,
    OrientationTask,
    PostureTask,
    Task,
)


@dataclass
class WbcSettings:
    """Weights, gains and limits of the whole-body QP (robot facts come from the robot configuration).

    Attributes:
        w_com, w_angular_momentum, w_base, w_torso, w_foot, w_posture: task weights (dimensionless).
        kp_base / kd_base, kp_torso / kd_torso: orientation gains (1/s^2, 1/s).
        kp_foot / kd_foot: swing-foot pose gains. kp_posture / kd_posture: posture gains.
        kd_angular_momentum: angular momentum damping (1/s).
        kd_contact: sole velocity bleed in the contact constraint (1/s).
        reg_qdd, reg_force: regularization weights on ``qdd`` and on the point forces.
        f_min, f_max: bounds of each corner's normal force in contact (N).
        horizon_position, horizon_velocity: joint-limit horizons (s); qdd_max: acceleration clip (rad/s^2).
        friction: overrides the configuration's ``wbc.friction`` when not None.
    """

    w_com: float = 1000.0
    w_angular_momentum: float = 5.0
    w_base: float = 200.0
    w_torso: float = 100.0
    w_foot: float = 100.0
    w_posture: float = 1.0
    kp_base: float = 200.0
    kd_base: float = 30.0
    kp_torso: float = 200.0
    kd_torso: float = 30.0
    kp_foot: float = 400.0
    kd_foot: float = 40.0
    kp_posture: float = 50.0
    kd_posture: float = 12.0
    kd_angular_momentum: float = 10.0
    kd_contact: float = 20.0
    reg_qdd: float = 1e-4
    reg_force: float = 1e-5
    f_min: float = 0.0
    f_max: float = 2000.0
    horizon_position: float = 0.1
    horizon_velocity: float = 0.05
    qdd_max: float = 1000.0
    friction: float | None = None


@dataclass
class WbcOutput:
    """Result of one tick.

    Attributes:
        status: QP outcome; ``ok`` False means ``qdd``/``forces``/``tau`` are not to be used.
        qdd (nv,): generalized accelerations. forces: per side (k, 3) corner forces, world frame (N).
        tau (nv - 6,): joint torques in velocity order (N m), from the dynamics.
        iterations: solver iterations. solve_time_s: solver alone; tick_time_s: whole tick incl. dynamics
            and assembly (s).
    """

    status: QpStatus
    qdd: np.ndarray
    forces: dict[str, np.ndarray]
    tau: np.ndarray
    iterations: int
    solve_time_s: float
    tick_time_s: float
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status.ok


def _csc_pattern(mask: np.ndarray) -> tuple[sp.csc_matrix, np.ndarray]:
    """CSC matrix (all stored values 1) of a boolean pattern and the flat dense indices in CSC data order."""
    rows, cols = np.nonzero(mask)
    order = np.lexsort((rows, cols))
    rows, cols = rows[order], cols[order]
    nr, nc = mask.shape
    indptr = np.zeros(nc + 1, dtype=np.int64)
    np.add.at(indptr, cols + 1, 1)
    indptr = np.cumsum(indptr)
    mat = sp.csc_matrix((np.ones(rows.size), rows.astype(np.int64), indptr), shape=(nr, nc))
    return mat, rows * nc + cols


class WholeBodyQP:
    """The task-space inverse-dynamics QP for a floating-base robot with point-contact soles."""

    def __init__(
        self,
        config: RobotConfig,
        pmodel: PinocchioRobotModel,
        settings: WbcSettings | None = None,
        solver: QpSolver | None = None,
    ) -> None:
        self.config = config
        self.settings = s = settings or WbcSettings()
        self.dyn = dyn = RobotDynamics(config, pmodel)
        nv = dyn.nv
        if dyn.nq - 7 != nv - 6:
            raise ValueError("WholeBodyQP expects one position per joint velocity (no continuous joints)")
        self.nv = nv
        # ---- variables
        self.force_cols: dict[str, slice] = {}
        col = nv
        for side in dyn.sides:
            k = len(dyn.contact_points_local[side])
            self.force_cols[side] = slice(col, col + 3 * k)
            col += 3 * k
        self.n = n = col
        # ---- robot limits in velocity order
        v_idx = pmodel.joint_v_idx - 6
        order = np.empty(len(v_idx), dtype=int)
        order[v_idx] = np.arange(len(v_idx))

        def in_v_order(values: np.ndarray) -> np.ndarray:
            return np.asarray(values, dtype=float)[order]

        self.to_v_order = order  # config array -> velocity order: values[order]
        self.v_idx = v_idx  # velocity-order array -> config order: values[v_idx]
        # ---- tasks
        self.com = ComTask(s.w_com)
        self.angular_momentum = AngularMomentumTask(s.w_angular_momentum, s.kd_angular_momentum)
        self.base_orientation = OrientationTask("base", s.w_base, s.kp_base, s.kd_base)
        self.tasks: list[Task] = [self.com, self.angular_momentum, self.base_orientation]
        self.torso_orientation: OrientationTask | None = None
        if "torso" in dyn.frames:
            self.torso_orientation = OrientationTask("torso", s.w_torso, s.kp_torso, s.kd_torso)
            self.tasks.append(self.torso_orientation)
        self.feet_tasks = {side: FootPoseTask(side, 0.0, s.kp_foot, s.kd_foot) for side in dyn.sides}
        self.tasks.extend(self.feet_tasks.values())
        self.posture = PostureTask(
            in_v_order(config.array("default")), s.w_posture, s.kp_posture, s.kd_posture
        )
        self._task_slices = []
        r = 0
        for t in self.tasks:
            self._task_slices.append(slice(r, r + t.dim))
            r += t.dim
        self._Jt = np.zeros((r, nv))
        self._bt = np.zeros(r)
        self._wt = np.zeros(r)
        self._WJ = np.zeros((r, nv))
        self._posture_target = np.zeros(nv - 6)
        # ---- constraints
        mu = config.wbc.friction if s.friction is None else s.friction
        self.force_map = ContactForceMap(dyn)
        self.floating_base = FloatingBaseDynamics(dyn, self.force_map, self.force_cols)
        self.torque_limits = TorqueLimits(
            dyn, self.force_map, self.force_cols, in_v_order(config.array("effort"))
        )
        self.contacts = {side: ContactConstraint(dyn, side, n, s.kd_contact) for side in dyn.sides}
        self.friction = {
            side: FrictionPyramid(dyn, side, self.force_cols[side], n, mu, s.f_min, s.f_max)
            for side in dyn.sides
        }
        self.joint_limits = JointLimits(
            dyn,
            n,
            in_v_order(config.array("lower")),
            in_v_order(config.array("upper")),
            in_v_order(config.array("velocity")),
            s.horizon_position,
            s.horizon_velocity,
            s.qdd_max,
        )
        self.constraints: list[Constraint] = [
            self.floating_base,
            self.torque_limits,
            *self.contacts.values(),
            *self.friction.values(),
            self.joint_limits,
        ]
        self._row_slices = []
        r = 0
        for c in self.constraints:
            self._row_slices.append(slice(r, r + c.rows))
            r += c.rows
        self.m = m = r
        # ---- fixed sparse patterns
        a_mask = np.zeros((m, n), dtype=bool)
        for c, rs in zip(self.constraints, self._row_slices, strict=True):
            a_mask[rs] = c.pattern()
        p_mask = np.zeros((n, n), dtype=bool)
        p_mask[:nv, :nv] = np.triu(np.ones((nv, nv), dtype=bool))
        p_mask[np.arange(nv, n), np.arange(nv, n)] = True
        self._A_csc, self._A_idx = _csc_pattern(a_mask)
        self._P_csc, self._P_idx = _csc_pattern(p_mask)
        self._A = np.zeros((m, n))
        self._P = np.zeros((n, n))
        self._g = np.zeros(n)
        self._l = np.zeros(m)
        self._u = np.zeros(m)
        self._P_diag = self._P.ravel()[:: n + 1]  # C-contiguous: the diagonal as a strided view
        assert np.shares_memory(self._P_diag, self._P)
        self._reg = np.full(n, s.reg_force)
        self._reg[:nv] = s.reg_qdd
        for c, rs in zip(self.constraints, self._row_slices, strict=True):
            c.bind(self._A[rs], self._l[rs], self._u[rs])
        self.solver = solver or OsqpSolver()
        self._setup_done = False
        self.x = np.zeros(n)
        self._eq_rows = np.zeros(m, dtype=bool)

    # ------------------------------------------------------------------ contacts
    def set_contact(self, side: str, in_contact: bool) -> None:
        """Switch a foot between contact (forces allowed, sole fixed) and swing (pose task, no force)."""
        self.contacts[side].active = in_contact
        self.friction[side].active = in_contact
        self.feet_tasks[side].set_weight(0.0 if in_contact else self.settings.w_foot)

    # ------------------------------------------------------------------ assembly
    def update_dynamics(self, q: np.ndarray, v: np.ndarray) -> None:
        """Refresh the rigid-body terms for state ``(q, v)`` (pinocchio layout); call before :meth:`solve`."""
        self.dyn.update(q, v)
        self.force_map.update()

    def _assemble(self) -> None:
        dyn, nv = self.dyn, self.nv
        for t, rs in zip(self.tasks, self._task_slices, strict=True):
            if t.weights.any():  # a disabled task's rows keep weight 0 and do not enter the cost
                t.fill(dyn, self._Jt[rs], self._bt[rs])
            self._wt[rs] = t.weights
        np.multiply(self._Jt, self._wt[:, None], out=self._WJ)
        P, g = self._P, self._g
        np.matmul(self._WJ.T, self._Jt, out=P[:nv, :nv])
        np.matmul(self._WJ.T, self._bt, out=g[:nv])
        np.negative(g[:nv], out=g[:nv])
        # posture: diagonal weight on the joint rows; regularization on all
        self.posture.target(dyn.q[7:], dyn.v[6:], self._posture_target)
        pw = self.posture.weights
        # the qdd block was overwritten above; the force block's diagonal is written (not added to: it would
        # grow every tick, and the forces with it be penalized more and more the longer the controller runs)
        diag = self._P_diag  # a view of P's diagonal
        diag[:nv] += self._reg[:nv]
        diag[nv:] = self._reg[nv:]
        diag[6:nv] += pw
        g[6:nv] -= pw * self._posture_target
        # constraints
        for c in self.constraints:
            c.fill()

    def solve(self) -> WbcOutput:
        """Assemble and solve for the state given to :meth:`update_dynamics`; tau recovered from dynamics."""
        t0 = time.perf_counter()
        self._assemble()
        Px = self._P.ravel()[self._P_idx]
        Ax = self._A.ravel()[self._A_idx]
        finite = np.isfinite(Px).all() and np.isfinite(Ax).all() and np.isfinite(self._g).all()
        if not finite or np.isnan(self._l).any() or np.isnan(self._u).any():
            # a non-finite state or reference: refused before it reaches the solver (its warm start would keep
            # the NaN and fail every later tick too)
            return self._failed(t0, QpStatus.NON_FINITE)
        if not self._setup_done:
            P = self._P_csc.copy()
            P.data[:] = Px
            A = self._A_csc.copy()
            A.data[:] = Ax
            self.solver.setup(P, self._g, A, self._l.copy(), self._u.copy())
            self._setup_done = True
        else:
            self.solver.update(Px, self._g, Ax, self._l.copy(), self._u.copy())
        res = self.solver.solve()
        status = res.status
        x = self.x
        if status.ok and np.all(np.isfinite(res.x)):
            x[:] = res.x
            self._project_equalities(x)
        elif status.ok:
            status = QpStatus.FAILED
        if not status.ok:
            self._setup_done = False  # start the next tick from a fresh solver: no warm start from a failure
        nv = self.nv
        qdd = x[:nv].copy()
        tau = self._A[6:nv] @ x + self.dyn.h[6:]
        forces = {side: x[c].reshape(-1, 3).copy() for side, c in self.force_cols.items()}
        return WbcOutput(status, qdd, forces, tau, res.iterations, res.solve_time_s, time.perf_counter() - t0)

    def _failed(self, t0: float, status: QpStatus) -> WbcOutput:
        """The output of a tick refused before the solver (non-finite problem data)."""
        nv = self.nv
        nan = np.full(nv, np.nan)
        forces = {side: np.full(((c.stop - c.start) // 3, 3), np.nan) for side, c in self.force_cols.items()}
        return WbcOutput(status, nan, forces, nan[6:].copy(), 0, 0.0, time.perf_counter() - t0)

    def _project_equalities(self, x: np.ndarray) -> None:
        """Minimum-norm correction of ``x`` so that the equality rows hold to round-off."""
        eq = np.equal(self._l, self._u, out=self._eq_rows)
        E = self._A[eq]
        r = self._l[eq] - E @ x
        _, y, info = lapack.dposv(E @ E.T, r)  # E E^T is symmetric positive definite (E has full row rank)
        if info != 0:
            y = np.linalg.lstsq(E @ E.T, r, rcond=None)[0]
        x += E.T @ y

    # ------------------------------------------------------------------ diagnostics
    def dynamics_residual(self, qdd: np.ndarray, forces: dict[str, np.ndarray], tau: np.ndarray) -> float:
        """``||M qdd + h - S^T tau - J_c^T f||_inf`` (N, N m) for the current tick's terms."""
        res = self.dyn.M @ qdd + self.dyn.h
        res[6:] -= tau
        for side, f in forces.items():
            res -= self.force_map.JtG[side] @ f.ravel()
        return float(np.abs(res).max())
