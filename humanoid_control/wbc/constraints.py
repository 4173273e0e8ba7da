"""Constraints of the whole-body QP: rows ``l <= C x <= u`` over ``x = [qdd (nv), f (3 k per foot)]``.

``f`` are point forces (N, world frame) exerted by the ground on the sole at the sole polygon corners.
Their generalized force is ``J_c^T f = sum_i J_i^T f_i`` with ``J_i = J_lin - [r_i]x J_ang`` the Jacobian of
corner ``i`` (``r_i``: corner minus sole origin, world frame); per foot ``J_c^T f = J_sole^T G f`` with
``G = [I .. I; [r_1]x .. [r_k]x]`` (6 x 3k), the wrench of the corner forces about the sole origin.
:class:`ContactForceMap` computes ``JtG = J_c^T G`` (nv x 3k per foot) once per tick for the dynamics rows.

Each class declares its rows' structural sparsity (``pattern``) once and fills values and bounds per tick
into views of the QP's dense buffers (``fill``), so the sparse pattern never changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from humanoid_control.wbc.dynamics import RobotDynamics

INF = np.inf


class ContactForceMap:
    """Maps of the corner forces of the soles, refreshed once per tick by :meth:`update`.

    - ``JtG[side]`` (nv, 3k): generalized force of a sole's corner forces (LOCAL_WORLD_ALIGNED Jacobians);
    - ``centroidal`` (6, 3K), all feet in column order: the wrench of every corner force about the CoM,
      world axes, ``[sum_i f_i; sum_i (p_i - c) x f_i]`` (N, N m). The floating-base rows of the dynamics
      make it the rate of centroidal momentum minus gravity: ``hdot_G = centroidal f + [m g; 0]``.
    """

    def __init__(self, dyn: RobotDynamics) -> None:
        self.dyn = dyn
        self.G = {}
        self.JtG = {}
        ks = [len(dyn.contact_points_local[side]) for side in dyn.sides]
        self.centroidal = np.zeros((6, 3 * sum(ks)))
        for i in range(sum(ks)):
            self.centroidal[0:3, 3 * i : 3 * i + 3] = np.eye(3)
        # all feet's generalized forces side by side (nv, 3K), in the QP's force-column order
        self.JtG_all = np.zeros((dyn.nv, 3 * sum(ks)))
        # every foot's G as a block of one block-diagonal (6 S, 3K) array, filled by one indexed write
        self._G_all = np.zeros((6 * len(ks), 3 * sum(ks)))
        col = 0
        for i, (side, k) in enumerate(zip(dyn.sides, ks, strict=True)):
            G = self._G_all[6 * i : 6 * i + 6, col : col + 3 * k]
            G[0:3] = self.centroidal[0:3, : 3 * k]
            self.G[side] = G
            self.JtG[side] = self.JtG_all[:, col : col + 3 * k]  # a view
            col += 3 * k
        # entries of [r]x in G (rows 3..5), per corner i: (row, col, component of r, sign)
        #   row 3: (0, -z, y); row 4: (z, 0, -x); row 5: (-y, x, 0)
        pattern = [
            (3, 1, 2, -1.0),
            (3, 2, 1, 1.0),
            (4, 0, 2, 1.0),
            (4, 2, 0, -1.0),
            (5, 0, 1, -1.0),
            (5, 1, 0, 1.0),
        ]

        def skew_index(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            rows = np.array([[row for row, _, _, _ in pattern] for _ in range(k)]).ravel()
            cols = np.array([[3 * i + col for _, col, _, _ in pattern] for i in range(k)]).ravel()
            comp = np.array([[3 * i + c for _, _, c, _ in pattern] for i in range(k)]).ravel()
            sign = np.tile([sg for _, _, _, sg in pattern], k)
            return rows, cols, comp, sign

        self._skew_all = skew_index(sum(ks))
        # the same entries in the block-diagonal G: foot i's rows start at 6 i
        rows, cols, comp, sign = self._skew_all
        foot = np.repeat(np.arange(len(ks)), [6 * k for k in ks])
        self._skew_blocks = (rows + 6 * foot, cols, comp, sign)
        self._local = [dyn.contact_points_local[side] for side in dyn.sides]
        self._offsets = np.zeros((sum(ks), 3))  # corner minus CoM (m, world)
        self._slices = []
        start = 0
        for k in ks:
            self._slices.append(slice(start, start + k))
            start += k

    def update(self) -> None:
        """Recompute ``G``, ``JtG`` and ``centroidal`` from the current sole placements and Jacobians."""
        dyn = self.dyn
        offsets = self._offsets
        flat = offsets.ravel()
        frames = [dyn.frames[side] for side in dyn.sides]
        for fs, local, sl in zip(frames, self._local, self._slices, strict=True):
            np.matmul(local, fs.rotation.T, out=offsets[sl])  # corner minus sole origin (world axes)
        rows, cols, comp, sign = self._skew_blocks
        self._G_all[rows, cols] = flat[comp] * sign
        com = dyn.com
        for side, fs, sl in zip(dyn.sides, frames, self._slices, strict=True):
            np.matmul(fs.jacobian.T, self.G[side], out=self.JtG[side])
            offsets[sl] += fs.position - com  # corner minus CoM
        rows, cols, comp, sign = self._skew_all
        self.centroidal[rows, cols] = flat[comp] * sign


class Constraint(ABC):
    """Base class: ``rows`` constraint rows; ``pattern()`` (rows, n) bool.

    The QP binds each constraint once to its rows of the dense buffers (:meth:`bind`); :meth:`fill` then
    writes this tick's values and bounds there.
    """

    rows: int = 0
    name: str = ""
    A: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @abstractmethod
    def pattern(self) -> np.ndarray:
        """Which entries of the (rows, n) block can be non-zero (the QP's fixed sparsity)."""

    def bind(self, A: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Views (rows, n), (rows,), (rows,) of the QP's constraint matrix and bounds."""
        self.A, self.lower, self.upper = A, lower, upper

    @abstractmethod
    def fill(self) -> None:
        """Write this tick's rows and bounds into the bound views."""


class _DynamicsRows(Constraint):
    """Rows ``sel`` of the equation of motion ``M qdd + h - J_c^T f = S^T tau`` over ``[qdd, f]``."""

    def __init__(self, dyn: RobotDynamics, fmap: ContactForceMap, force_cols: dict[str, slice], sel: slice):
        self.dyn, self.fmap, self.force_cols, self.sel = dyn, fmap, force_cols, sel
        self.rows = sel.stop - sel.start
        self.n = dyn.nv + sum(s.stop - s.start for s in force_cols.values())
        starts = [force_cols[side].start for side in dyn.sides]
        widths = [force_cols[side].stop - force_cols[side].start for side in dyn.sides]
        self._contiguous = starts == list(dyn.nv + np.cumsum([0, *widths[:-1]])) and (
            sum(widths) == fmap.JtG_all.shape[1]
        )

    def pattern(self) -> np.ndarray:
        pat = np.zeros((self.rows, self.n), dtype=bool)
        pat[:, : self.dyn.nv] = self.dyn.mass_matrix_mask()[self.sel]
        for side, cols in self.force_cols.items():
            support = self.dyn.frame_support_mask(self.dyn.frames[side].frame_id)[self.sel]
            pat[support, cols] = True
        return pat

    def _fill_matrix(self, A: np.ndarray) -> None:
        nv = self.dyn.nv
        A[:, :nv] = self.dyn.M[self.sel]
        if self._contiguous:  # the force columns follow qdd in ContactForceMap's order: one block
            np.negative(self.fmap.JtG_all[self.sel], out=A[:, nv:])
            return
        for side, cols in self.force_cols.items():
            np.negative(self.fmap.JtG[side][self.sel], out=A[:, cols])


class FloatingBaseDynamics(_DynamicsRows):
    """The 6 unactuated rows of the equation of motion (equality): ``M_b qdd - (J_c^T f)_b = -h_b``.

    Rows are the base's generalized forces (force N and moment N m in the base frame): the contact forces
    alone must produce the whole-body momentum rate.
    """

    name = "floating_base_dynamics"

    def __init__(self, dyn: RobotDynamics, fmap: ContactForceMap, force_cols: dict[str, slice]) -> None:
        super().__init__(dyn, fmap, force_cols, slice(0, 6))

    def fill(self) -> None:
        A, lower, upper = self.A, self.lower, self.upper
        self._fill_matrix(A)
        np.negative(self.dyn.h[0:6], out=lower)
        upper[:] = lower


class TorqueLimits(_DynamicsRows):
    """Actuated rows: ``-tau_max <= tau = M_a qdd + h_a - (J_c^T f)_a <= tau_max`` (N m).

    ``tau_max`` (nv - 6,) in velocity order; :attr:`scale` multiplies it (0 forces infeasibility in tests).
    """

    name = "torque_limits"

    def __init__(
        self, dyn: RobotDynamics, fmap: ContactForceMap, force_cols: dict[str, slice], tau_max: np.ndarray
    ) -> None:
        super().__init__(dyn, fmap, force_cols, slice(6, dyn.nv))
        self.tau_max = np.array(tau_max, dtype=float)
        self.scale = 1.0

    def fill(self) -> None:
        A, lower, upper = self.A, self.lower, self.upper
        self._fill_matrix(A)
        h = self.dyn.h[6:]
        lim = self.tau_max * self.scale
        np.subtract(-lim, h, out=lower)
        np.subtract(lim, h, out=upper)


class ContactConstraint(Constraint):
    """Rigid sole contact (6 rows): ``J_sole qdd + drift = -kd v_sole`` (m/s^2, rad/s^2, world axes).

    ``kd`` (1/s) bleeds off residual sole velocity (0 gives ``J qdd + Jdot v = 0``). When the foot is not in
    contact (:attr:`active` False) the rows are left free (``+-inf``), keeping the sparsity.
    """

    rows = 6

    def __init__(self, dyn: RobotDynamics, side: str, n: int, kd: float = 0.0) -> None:
        self.dyn, self.side, self.n, self.kd = dyn, side, n, kd
        self.name = f"contact_{side}"
        self.active = True

    def pattern(self) -> np.ndarray:
        pat = np.zeros((6, self.n), dtype=bool)
        pat[:, : self.dyn.nv] = self.dyn.frame_support_mask(self.dyn.frames[self.side].frame_id)[None, :]
        return pat

    def fill(self) -> None:
        A, lower, upper = self.A, self.lower, self.upper
        fs = self.dyn.frames[self.side]
        A[:, : self.dyn.nv] = fs.jacobian
        if self.active:
            np.multiply(fs.velocity, -self.kd, out=lower)
            lower -= fs.drift
            upper[:] = lower
        else:
            lower[:] = -INF
            upper[:] = INF


class FrictionPyramid(Constraint):
    """Per corner of a sole (5 rows each), in the sole frame ``(t1, t2, n)`` (world-frame unit vectors):

    ``+-t1.f - mu n.f <= 0``, ``+-t2.f - mu n.f <= 0`` (inner linearized friction cone, ``mu`` = friction),
    ``f_min <= n.f <= f_max`` (unilateral, N). Not in contact: ``n.f = 0``, hence ``f = 0``.
    """

    def __init__(
        self, dyn: RobotDynamics, side: str, cols: slice, n: int, mu: float, f_min: float, f_max: float
    ) -> None:
        self.dyn, self.side, self.cols, self.n = dyn, side, cols, n
        self.name = f"friction_{side}"
        self.k = len(dyn.contact_points_local[side])
        self.rows = 5 * self.k
        self.mu, self.f_min, self.f_max = mu, f_min, f_max
        self.active = True
        self._coef = np.zeros((5, 3))  # a corner's block in the sole's axes (t1, t2, n): block = C R^T
        self._coef_mu: float | None = None  # the friction it was built for
        self._diag = np.zeros((self.k, 5, 3))
        self._bounds_written: tuple[bool, float, float] | None = None  # bounds: (active, f_min, f_max)

    def bind(self, A: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        super().bind(A, lower, upper)
        # the k diagonal 5 x 3 blocks of this foot's force columns, as one strided view
        sub = A[:, self.cols]
        rs, cs = sub.strides
        self._diag = np.lib.stride_tricks.as_strided(sub, (self.k, 5, 3), (5 * rs + 3 * cs, rs, cs))

    def pattern(self) -> np.ndarray:
        pat = np.zeros((self.rows, self.n), dtype=bool)
        start = self.cols.start
        for i in range(self.k):
            pat[5 * i : 5 * i + 5, start + 3 * i : start + 3 * i + 3] = True
        return pat

    def fill(self) -> None:
        lower, upper = self.lower, self.upper
        # rows t1 - mu n, -t1 - mu n, t2 - mu n, -t2 - mu n, n (world axes): one product for the k corners
        if self._coef_mu != self.mu:
            m = self._coef_mu = float(self.mu)
            self._coef[:] = [
                [1.0, 0.0, -m],
                [-1.0, 0.0, -m],
                [0.0, 1.0, -m],
                [0.0, -1.0, -m],
                [0.0, 0.0, 1.0],
            ]
        self._diag[:] = self._coef @ self.dyn.frames[self.side].rotation.T
        key = (self.active, self.f_min, self.f_max)
        if self._bounds_written == key:
            return
        self._bounds_written = key
        lower.reshape(self.k, 5)[:, 0:4] = -INF
        upper.reshape(self.k, 5)[:, 0:4] = 0.0
        if self.active:
            lower[4::5] = self.f_min
            upper[4::5] = self.f_max
        else:
            lower[4::5] = 0.0
            upper[4::5] = 0.0


class JointLimits(Constraint):
    """Joint position and velocity limits as bounds on joint accelerations (rad/s^2).

    Position, over horizon ``T_p`` (s): ``q + dq T_p + qdd T_p^2 / 2`` within ``[q_min, q_max]``; velocity,
    over ``T_v`` (s): ``dq + qdd T_v`` within ``[-dq_max, dq_max]``; the tighter of the two, clipped to
    ``+-qdd_max``. If the bounds cross (a joint already beyond a limit), both take the value that brakes
    towards the limit, so the QP stays feasible.
    """

    name = "joint_limits"

    def __init__(
        self,
        dyn: RobotDynamics,
        n: int,
        q_min: np.ndarray,
        q_max: np.ndarray,
        dq_max: np.ndarray,
        horizon_position: float = 0.1,
        horizon_velocity: float = 0.05,
        qdd_max: float = 1000.0,
    ) -> None:
        self.dyn, self.n = dyn, n
        self.rows = dyn.nv - 6
        self.q_min, self.q_max, self.dq_max = (np.asarray(a, dtype=float) for a in (q_min, q_max, dq_max))
        self.tp, self.tv, self.qdd_max = horizon_position, horizon_velocity, qdd_max
        self.tolerance = 1e-3  # rad/s^2: an acceleration this close to a bound counts as at it
        self._written = False
        # bounds as (2, rows) arrays, row 0 lower, row 1 upper: the terms that do not change between ticks
        c = 2.0 / (self.tp * self.tp)
        self._c = c
        self._pos = np.stack([c * self.q_min, c * self.q_max])
        self._vel = np.stack([-self.dq_max / self.tv, self.dq_max / self.tv])
        self._t = np.zeros(self.rows)
        self._s = np.zeros(self.rows)
        self._bp = np.zeros((2, self.rows))
        self._bv = np.zeros((2, self.rows))
        self._crossed = np.zeros(self.rows, dtype=bool)

    def pattern(self) -> np.ndarray:
        pat = np.zeros((self.rows, self.n), dtype=bool)
        pat[np.arange(self.rows), 6 + np.arange(self.rows)] = True
        return pat

    def fill(self) -> None:
        A, lower, upper = self.A, self.lower, self.upper
        if not self._written:
            A[np.arange(self.rows), 6 + np.arange(self.rows)] = 1.0
            self._written = True
        q = self.dyn.q[7:]
        dq = self.dyn.v[6:]
        t, s, bp, bv = self._t, self._s, self._bp, self._bv
        # position bounds c q_lim - c (q + dq T_p); velocity bounds (-+dq_max - dq) / T_v
        np.multiply(dq, self.tp, out=t)
        t += q
        t *= -self._c
        np.add(self._pos, t, out=bp)
        np.multiply(dq, -1.0 / self.tv, out=s)
        np.add(self._vel, s, out=bv)
        qm = self.qdd_max
        np.maximum(bp[0], bv[0], out=lower)
        np.maximum(lower, -qm, out=lower)
        np.minimum(bp[1], bv[1], out=upper)
        np.minimum(upper, qm, out=upper)
        np.minimum(lower, qm, out=lower)
        np.maximum(upper, -qm, out=upper)
        crossed = np.greater(lower, upper, out=self._crossed)
        if crossed.any():
            mid = 0.5 * (lower + upper)
            lower[crossed] = mid[crossed]
            upper[crossed] = mid[crossed]
