"""Task-space inverse dynamics as one QP per tick (pinocchio + a :class:`QpSolver`, OSQP by default).

Decision variables ``x = [qdd (nv), f_left (3 k), f_right (3 k)]``: generalized accelerations (base
twist rate in the base frame, joint accelerations; m/s^2, rad/s^2) and point forces at the ``k`` sole corners
of each foot (N, world frame). Joint torques are not variables: they follow from the actuated rows of the
dynamics, ``tau = M_a qdd + h_a - (J_c^T f)_a`` (N m).

Cost: ``sum_tasks 1/2 ||W^(1/2) (J y - b)||^2 + 1/2 r_a ||qdd||^2 + 1/2 r_f ||f||^2`` with ``y`` the task's
variables (``qdd``, or ``f`` for the centroidal tasks, see :mod:`humanoid_control.wbc.tasks`); the last two
small regularizations make the problem strictly convex.

Constraints (:mod:`humanoid_control.wbc.constraints`), in this row order: floating-base dynamics (6,
equality), rigid contacts (6 per foot, equality), friction pyramids (5 per corner), torque limits (nv - 6),
joint position/velocity limits (nv - 6); the last two are left out of a first, screened solve (see
``WbcSettings.limit_screening``). A foot out of contact is left out of the problem handed to the solver: its
forces (held at 0 by its friction rows) and its (free) contact rows (``WbcSettings.contact_reduction``).

Per tick: :meth:`WholeBodyQP.update_dynamics` refreshes the rigid-body terms (one ``computeAllTerms``, frame
placements, the soles' and orientation frames' Jacobians, velocities and drifts); :meth:`WholeBodyQP.solve`
fills dense buffers in place, gathers the values of the fixed sparse patterns of the problem for the feet in
contact (precomputed CSC index maps) and hands them to its warm-started solver. After a successful solve
the floating-base dynamics rows are re-imposed exactly by a correction of the (unactuated) base
accelerations (ADMM solves them to ``eps`` only), so the dynamics residual is at round-off level (the
torques come from the actuated rows, exact by construction).

The settings and the output (:class:`WbcSettings`, :class:`WbcOutput`) are in
:mod:`humanoid_control.wbc.qp_types`, the stacked task rows and the solver problems in
:mod:`humanoid_control.wbc.qp_problem`; the first two are re-exported here.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
from scipy.linalg import lapack

from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import PinocchioRobotModel
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
from humanoid_control.wbc.qp_problem import _Problem, _Problems, _TaskStack
from humanoid_control.wbc.qp_types import WbcOutput, WbcSettings
from humanoid_control.wbc.solver import OsqpSolver, QpSolver, QpStatus
from humanoid_control.wbc.tasks import (
    AngularMomentumTask,
    ComTask,
    FootPoseTask,
    OrientationTask,
    PostureTask,
    Task,
)


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
        self.force_map = ContactForceMap(dyn)
        self.com = ComTask(self.force_map, s.w_com)
        self.angular_momentum = AngularMomentumTask(
            self.force_map, s.w_angular_momentum, s.kd_angular_momentum
        )
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
        # rows of the tasks on qdd (Jacobians (r, nv)) and on the forces ((r_f, nf)), stacked; each task's
        # weights become a view of its rows' weights
        nf = n - nv
        self._spaces = {
            "qdd": _TaskStack([t for t in self.tasks if t.space == "qdd"], nv),
            "force": _TaskStack([t for t in self.tasks if t.space == "force"], nf),
        }
        self._posture_target = np.zeros(nv - 6)
        # ---- constraints
        mu = config.wbc.friction if s.friction is None else s.friction
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
        # the rows that limit screening drops come last: the screened problem is a prefix of the rows
        self.constraints: list[Constraint] = [
            self.floating_base,
            *self.contacts.values(),
            *self.friction.values(),
            self.torque_limits,
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
        p_mask[np.arange(n), np.arange(n)] = True  # regularization, posture
        blocks = ((p_mask[:nv, :nv], self._spaces["qdd"]), (p_mask[nv:, nv:], self._spaces["force"]))
        for block, stack in blocks:
            for t in stack.tasks:  # J^T W J can be non-zero where two variables move a task's rows together
                sup = t.support(dyn, block.shape[0])
                block |= np.triu(np.outer(sup, sup))
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
        # ---- the problems handed to solvers, per set of feet in contact: the full one and the one without
        # the limit rows (a prefix of the rows); a foot out of contact leaves its force columns and its
        # contact and friction rows out (see ``WbcSettings.contact_reduction``)
        self._a_mask, self._p_mask = a_mask, p_mask
        self._by_foot: set[Constraint] = {*self.contacts.values(), *self.friction.values()}
        base = solver or OsqpSolver()
        self.solver = base
        probe = base.spawn()
        self._spawns = probe is not None  # else one problem, the full one, on the given solver
        self._reduce = s.contact_reduction and self._spawns
        self._screen = s.limit_screening and self._spawns
        self._spare = [probe] if probe is not None else []
        self.problems: list[_Problem] = []
        self._relax = s.relax_limits and self._spawns
        self.relaxed_ticks = 0  # ticks answered with limit rows left out (``relax_limits``)
        self._by_contacts: dict[tuple[tuple[bool, bool], ...], _Problems] = {}
        self._full_next = not self._screen  # solve the full problem first next tick
        self._last: _Problem | None = None  # the problem of the last successful solve
        self._last_y: np.ndarray | None = None
        self._y = np.zeros(m)
        self.x = np.zeros(n)
        self._fb_rows, self._fb_lower = self.floating_base.A, self.floating_base.lower  # views (6, n), (6,)
        # every consistent set of feet in contact is set up now, not in the control loop
        self._problems(tuple((True, True) for _ in dyn.sides), base)
        if self._reduce:
            for key in itertools.product((True, False), repeat=len(dyn.sides)):
                self._problems(tuple((k, k) for k in key))

    def _solver(self) -> QpSolver:
        if self._spare:
            return self._spare.pop()
        new = self.solver.spawn()
        assert new is not None
        return new

    def _problems(self, key: tuple[tuple[bool, bool], ...], solver: QpSolver | None = None) -> _Problems:
        """The full, the screened and the relaxed problem (None without screening / relaxing) for ``key``,
        per foot (contact rows active, forces allowed), built and set up on first use."""
        found = self._by_contacts.get(key)
        if found is not None:
            return found
        m, n = self._A.shape
        keep_rows = np.ones(m, dtype=bool)
        keep_cols = np.ones(n, dtype=bool)
        if self._reduce:
            for side, (contact, forces) in zip(self.dyn.sides, key, strict=True):
                if not contact:  # free rows (+-inf): nothing to keep
                    keep_rows[self._row_slices[self.constraints.index(self.contacts[side])]] = False
                if not forces:  # its friction rows hold these forces at 0: the variables and rows go
                    keep_cols[self.force_cols[side]] = False
                    keep_rows[self._row_slices[self.constraints.index(self.friction[side])]] = False
        rows, cols = np.flatnonzero(keep_rows), np.flatnonzero(keep_cols)
        name = "".join("c" if c else "-" for c, _ in key)
        full = _Problem(f"full {name}", rows, cols, self._a_mask, self._p_mask, solver or self._solver())
        screened = None
        if self._screen:
            screen = keep_rows.copy()
            for c in (self.torque_limits, self.joint_limits):
                screen[self._row_slices[self.constraints.index(c)]] = False
            screened = _Problem(
                f"screened {name}", np.flatnonzero(screen), cols, self._a_mask, self._p_mask, self._solver()
            )
        relaxed = None
        if self._relax:
            relax = keep_rows.copy()
            relax[self._row_slices[self.constraints.index(self.joint_limits)]] = False
            relaxed = _Problem(
                f"relaxed {name}", np.flatnonzero(relax), cols, self._a_mask, self._p_mask, self._solver()
            )
        for problem in (full, screened, relaxed):
            if problem is not None:
                problem.setup_ahead()
                self.problems.append(problem)
        found = _Problems(full, screened, relaxed)
        self._by_contacts[key] = found
        return found

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
        P, g = self._P, self._g
        # task Hessians and gradients: P[:nv, :nv] from the tasks on qdd, P[nv:, nv:] from those on forces
        self._spaces["qdd"].fill(dyn, P[:nv, :nv], g[:nv])
        self._spaces["force"].fill(dyn, P[nv:, nv:], g[nv:])
        # posture: diagonal weight on the joint rows; regularization on all
        self.posture.target(dyn.q[7:], dyn.v[6:], self._posture_target)
        pw = self.posture.weights
        # both diagonal blocks were overwritten above, so the diagonal is added to (not a running sum)
        diag = self._P_diag  # a view of P's diagonal
        diag += self._reg
        diag[6:nv] += pw
        g[6:nv] -= pw * self._posture_target
        # constraints (those of a foot out of contact only where the problems keep their rows)
        reduce = self._reduce
        for c in self.constraints:
            if reduce and c in self._by_foot and not c.active:  # type: ignore[attr-defined]
                continue
            c.fill()

    def solve(self) -> WbcOutput:
        """Assemble and solve for the state given to :meth:`update_dynamics`; tau recovered from dynamics.

        With ``limit_screening`` the problem without the torque- and joint-limit rows is solved first; the
        full problem is solved (warm-started from its own last solution) when that answer breaks a limit, and
        first while the full problem's last answer was near one (see :class:`WbcSettings`). With
        ``contact_reduction`` both leave out the feet out of contact; when the feet in contact change, the
        first solve starts from the last tick's answer (primal and dual, mapped onto its variables and rows).
        """
        t0 = time.perf_counter()
        self._assemble()
        g, lower, upper = self._g, self._l, self._u
        # one sum per array: non-finite iff an entry is. g = -J^T W b carries any non-finite task Jacobian
        # (NaN * 0 is NaN), so P = J^T W J needs no check of its own. l holds -inf and u +inf legitimately, so
        # there only a NaN counts (l's sum minus u's is NaN iff either holds a NaN, or +inf sits in l / -inf
        # in u). The constraint matrix is checked per problem, on the values handed to the solver.
        if not math.isfinite(g.sum()) or math.isnan(lower.sum() - upper.sum()):
            # a non-finite state or reference: refused before it reaches the solver (its warm start would keep
            # the NaN and fail every later tick too)
            return self._failed(t0, QpStatus.NON_FINITE)
        nv, x = self.nv, self.x
        tau_rows = self.torque_limits.A  # (nv - 6, n) view
        h_a = self.dyn.h[6:]
        tau_max = self.torque_limits.tau_max * self.torque_limits.scale
        iterations, solve_time = 0, 0.0
        if self._reduce:
            key = tuple((self.contacts[s].active, self.friction[s].active) for s in self.dyn.sides)
        else:
            key = tuple((True, True) for _ in self.dyn.sides)
        full_problem, screened, relaxed = self._problems(key)
        full = self._full_next or screened is None
        status = QpStatus.FAILED
        tau = h_a
        problems = (full_problem,) if full else (screened, full_problem)
        last = self._last
        start = None
        if last is not None and last is not full_problem and last is not screened:
            start = self._start(last)  # the feet in contact changed: start from the last tick's answer
        queue = list(problems)
        relaxing = False
        answered, answered_status = None, status  # the problem whose answer ``x`` holds this tick
        while queue:
            problem = queue.pop(0)
            assert problem is not None
            res = problem.solve(self._P, g, self._A, lower, upper, start)
            start = None
            iterations += res.iterations
            solve_time += res.solve_time_s
            status = res.status
            if status.ok and not math.isfinite(res.x.sum()):
                status = QpStatus.FAILED
            if not status.ok:
                if problem is full_problem and relaxed is not None and self.settings.relax_limits:
                    # the joint-limit rows left out, then the torque-limit rows too (the screened problem,
                    # unless already answered this tick): more chances, from the last answer
                    relaxing = True
                    queue = [relaxed] if screened is None or answered is screened else [relaxed, screened]
                if relaxing and queue:
                    if self._last is not None and self._last is not queue[0]:
                        start = self._start(self._last)
                    continue
                if relaxing and answered is not None:
                    status = answered_status  # the screened answer of this tick is the last resort
                break  # the full problem has every row of the screened one: no better chance there
            self._last, self._last_y = problem, res.y
            answered, answered_status = problem, status
            if problem.all_cols:
                x[:] = res.x
            else:
                x[:] = 0.0
                x[problem.cols] = res.x
            self._project_dynamics(x)
            tau = tau_rows @ x + h_a
            qdd_j, jl = x[6:nv], self.joint_limits
            if relaxing:
                break
            if problem is full_problem:
                near = np.abs(tau) > self.settings.screening_margin * tau_max
                near_bound = (qdd_j <= jl.lower + jl.tolerance) | (qdd_j >= jl.upper - jl.tolerance)
                self._full_next = bool(near.any() or near_bound.any())
                full = True
                break
            if not ((np.abs(tau) > tau_max).any() or (qdd_j < jl.lower).any() or (qdd_j > jl.upper).any()):
                break  # the screened optimum keeps every limit: it is the full problem's optimum
        if not status.ok:
            for problem in self.problems:
                problem.setup_done = False  # the next tick starts from fresh solvers: no failed warm start
            self._full_next = not self._screen
            self._last = self._last_y = None
            return self._failed(t0, status, iterations, solve_time)
        if relaxing:
            self._full_next, full = True, False
        self.relaxed_ticks += int(relaxing)
        tick = time.perf_counter() - t0
        return WbcOutput(
            status, x.copy(), nv, self.force_cols, tau, iterations, solve_time, tick, full, relaxing
        )

    def _start(self, last: _Problem) -> tuple[np.ndarray, np.ndarray]:
        """The last answer as a warm start over all variables and rows: ``x`` as handed on, and ``last``'s
        dual on its rows (0 on the rows it did not have)."""
        y = self._y
        y[:] = 0.0
        if self._last_y is not None:
            y[last.rows] = self._last_y
        return self.x, y

    def _failed(self, t0: float, status: QpStatus, iterations: int = 0, solve_time: float = 0.0) -> WbcOutput:
        """The output of a failed tick: non-finite problem data refused, or the solver's failure (NaN)."""
        nv = self.nv
        nan = np.full(self.n, np.nan)
        tick = time.perf_counter() - t0
        return WbcOutput(status, nan, nv, self.force_cols, nan[6:nv].copy(), iterations, solve_time, tick)

    def _project_dynamics(self, x: np.ndarray) -> None:
        """Correct the base accelerations of ``x`` so that the floating-base dynamics rows ``E x = e`` hold
        to round-off: ``qdd_b += M_bb^-1 (e - E x)`` (``M_bb`` the base block of the mass matrix, symmetric
        positive definite, and ``E``'s qdd_b columns). The base is not actuated and not commanded: the joint
        accelerations and forces handed on stay the solver's."""
        r = self._fb_lower - self._fb_rows @ x
        _, y, info = lapack.dposv(self.dyn.M[0:6, 0:6], r)
        if info != 0:  # not positive definite: a degenerate model or state
            y = np.linalg.lstsq(self.dyn.M[0:6, 0:6], r, rcond=None)[0]
        x[0:6] += y

    # ------------------------------------------------------------------ diagnostics
    def dynamics_residual(self, qdd: np.ndarray, forces: dict[str, np.ndarray], tau: np.ndarray) -> float:
        """``||M qdd + h - S^T tau - J_c^T f||_inf`` (N, N m) for the current tick's terms."""
        res = self.dyn.M @ qdd + self.dyn.h
        res[6:] -= tau
        for side, f in forces.items():
            res -= self.force_map.JtG[side] @ f.ravel()
        return float(np.abs(res).max())


__all__ = ["WbcOutput", "WbcSettings", "WholeBodyQP"]
