"""Walking pattern generator: ZMP preview control of the LIPM as a QP over a receding horizon, on OSQP.

The preview controller of Kajita et al. (ICRA 2003) minimizes ZMP tracking error and CoM jerk over a horizon
of future ZMP references; here the same cost is a QP, so the ZMP can also be **constrained to the support
polygon** of each future instant (Wieber, Humanoids 2006), solved by OSQP warm-started from the last solve.

Model (:mod:`humanoid_control.walking.lipm`): per horizontal axis ``a`` (x, y; odom frame) the state
``s = [c, cdot, cddot]`` (m, m/s, m/s^2) and the jerk ``u`` (m/s^3), ``s_{k+1} = A s_k + B u_k`` over the
sampling period ``dt`` (s), ZMP ``p_k = C s_k`` (m).

Decision variables ``x = [u_0 dt, s_1, u_1 dt, s_2, ..., u_{N-1} dt, s_N]``, ``u_k = [u_x, u_y]`` (the jerk
enters as the acceleration step ``u dt``, m/s^2, of the same scale as the states: a better conditioned
problem for ADMM), ``s_k = [c_x, cdot_x, cddot_x, c_y, cdot_y, cddot_y]`` (interleaved in time, so the KKT
matrix is banded).

Cost::

    sum_{k=1..N} w_zmp ||p_k - p_ref(t + k dt)||^2 + w_jerk ||u_{k-1}||^2
                 + w_dcm ||xi_N - p_ref(t + N dt)||^2

(``xi = c + cdot / omega``, the DCM: the terminal term asks the horizon to end capturable on its last ZMP
reference). Constraints: the dynamics (equalities, the first one carrying the current state ``s_0``) and, at
every sample ``k = 1..N``, ``n_e . p_k <= d_e`` for the edges ``e`` of the support polygon at ``t + k dt``
(of the single support when one begins or ends within ``dt`` of the sample: the ZMP must stay on the stance
sole between the samples too; padded to ``max_edges`` rows per sample with empty rows, so the sparsity
pattern never changes). Between samples the ZMP is a cubic in time, close to the chord (a tenth of a
millimetre beyond it in the tests), which ``zmp_margin`` absorbs.

Per solve: the polygon normals (matrix values), their offsets and the initial state (bounds) and the ZMP
references (linear cost) change; ``P`` is constant; OSQP re-factors the KKT matrix once. The assembly is
vectorized over the horizon (:meth:`ZmpPreviewQP.assemble`): per contact schedule the phases' times, ZMP
references and swing flags are gathered into arrays once (:class:`_ScheduleTables`), and each phase's polygon
rows are computed the first time a sample needs them; per solve the samples' phases are found with one
``searchsorted`` and the rows gathered by index. It gives the same numbers as looking each sample up in the
schedule (:meth:`ContactSchedule.zmp_reference`, :meth:`ContactSchedule.phase_polygon`, the rule of
:meth:`ZmpPreviewQP._constraining_phase`): the test keeps that per-sample assembly as its reference.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from humanoid_control.walking.geometry import halfspaces
from humanoid_control.walking.lipm import Lipm
from humanoid_control.walking.schedule import ContactSchedule
from humanoid_control.wbc.solver import OsqpSettings, OsqpSolver, QpSolver, QpStatus


@dataclass
class PreviewSettings:
    """Horizon and weights of :class:`ZmpPreviewQP`.

    Attributes:
        dt: sampling period of the horizon (s).
        horizon: number of samples ``N`` (the preview is ``N dt`` s; Kajita's 1.6 s is ample).
        w_zmp: weight of the ZMP tracking error (1/m^2).
        w_jerk: weight of the CoM jerk (s^6/m^2).
        w_dcm: weight of the terminal DCM error (1/m^2).
        max_edges: support polygon edges per sample (the hull of two quadrilateral soles has at most 8).
        constrain_zmp: keep the ZMP in the support polygon as a constraint (else tracking cost only).
        shift_warm_start: when a solve comes a whole number of samples after the last one, start OSQP from the
            last solution moved by as many samples (its tail repeated), not from the last solution as it is.
    """

    dt: float = 0.02
    horizon: int = 80
    w_zmp: float = 1.0
    w_jerk: float = 1e-6
    w_dcm: float = 10.0
    max_edges: int = 8
    constrain_zmp: bool = True
    shift_warm_start: bool = True


@dataclass
class PatternOutput:
    """One solve of the pattern generator.

    Attributes:
        status: the QP outcome; when not ``ok`` the other arrays are NaN.
        t: time of the first sample (s); sample ``k`` is at ``t + k dt``.
        dt: sampling period (s).
        states: ``(N + 1, 2, 3)`` CoM state per sample and axis ``[c, cdot, cddot]`` (m, m/s, m/s^2, odom).
        jerk: ``(N, 2)`` CoM jerk held over each period (m/s^3).
        zmp, zmp_reference: ``(N + 1, 2)`` planned and reference ZMP (m).
        iterations: OSQP iterations. solve_time_s: OSQP alone; total_time_s: assembly and solve (s).
    """

    status: QpStatus
    t: float
    dt: float
    states: np.ndarray
    jerk: np.ndarray
    zmp: np.ndarray
    zmp_reference: np.ndarray
    iterations: int
    solve_time_s: float
    total_time_s: float

    @property
    def ok(self) -> bool:
        return self.status.ok

    @property
    def end_time(self) -> float:
        """Time of the last sample (s)."""
        return self.t + self.dt * self.jerk.shape[0]

    def com_state(self, t: float) -> np.ndarray:
        """``(2, 3)`` CoM state ``[c, cdot, cddot]`` per axis at ``t`` (s), integrating the constant jerk of
        its period exactly; clamped to the horizon (beyond its end: the last state, extrapolated)."""
        n = self.jerk.shape[0]
        k = min(max(math.floor((t - self.t) / self.dt), 0), n - 1)
        tau = min(max(t - (self.t + k * self.dt), 0.0), self.dt if k < n - 1 else math.inf)
        s, u = self.states[k], self.jerk[k]
        return np.stack(
            [
                s[:, 0] + s[:, 1] * tau + 0.5 * s[:, 2] * tau**2 + u * tau**3 / 6.0,
                s[:, 1] + s[:, 2] * tau + 0.5 * u * tau**2,
                s[:, 2] + u * tau,
            ],
            axis=1,
        )


class ZmpPreviewQP:
    """The ZMP preview QP of a LIPM over ``settings.horizon`` samples (see the module docstring)."""

    def __init__(
        self, lipm: Lipm, settings: PreviewSettings | None = None, solver: QpSolver | None = None
    ) -> None:
        self.lipm = lipm
        self.settings = s = settings or PreviewSettings()
        if s.horizon < 2 or not s.dt > 0.0:
            raise ValueError("horizon must be >= 2 samples and dt > 0")
        self.solver = solver or OsqpSolver(
            OsqpSettings(eps_abs=1e-5, eps_rel=1e-5, max_iter=4000, check_termination=10)
        )
        N, E = s.horizon, s.max_edges
        self.n = 8 * N
        A, B = lipm.transition(s.dt)
        self._A = A
        C = lipm.zmp_row
        # ---- constraint matrix: dynamics rows (6 N) then polygon rows (E N); entries as COO in a fixed order
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []

        def add(r: int, c: int, v: float) -> None:
            rows.append(r)
            cols.append(c)
            vals.append(float(v))

        def u_col(k: int, a: int) -> int:
            return 8 * k + a

        def s_col(k: int, a: int, i: int) -> int:  # state s_k, k = 1..N
            return 8 * (k - 1) + 2 + 3 * a + i

        for k in range(N):
            for a in range(2):
                for i in range(3):
                    r = 6 * k + 3 * a + i
                    add(r, s_col(k + 1, a, i), 1.0)
                    add(r, u_col(k, a), -B[i] / s.dt)  # the variable is the acceleration step u dt
                    if k > 0:
                        for j in range(i, 3):
                            add(r, s_col(k, a, j), -A[i, j])
        n_dyn = len(vals)
        self._m_dyn = 6 * N
        # polygon rows: n_x C s_x + n_y C s_y on the position and acceleration entries
        for k in range(1, N + 1):
            for e in range(E):
                r = self._m_dyn + E * (k - 1) + e
                for a in range(2):
                    for i in (0, 2):
                        add(r, s_col(k, a, i), 0.0)
        self.m = self._m_dyn + E * N
        self._A_vals = np.array(vals)
        self._A_csc, self._A_perm = self._csc_pattern(rows, cols, (self.m, self.n))
        self._n_dyn_vals = n_dyn
        self._C_pos, self._C_acc = C[0], C[2]
        # ---- cost: per state block and axis a 3x3 upper triangle (ZMP, terminal DCM); jerk: diagonal
        w = 1.0 / lipm.omega
        zmp_block = s.w_zmp * np.outer(C, C)
        dcm_vec = np.array([1.0, w, 0.0])
        p_rows: list[int] = []
        p_cols: list[int] = []
        p_vals: list[float] = []

        def add_p(r: int, c: int, v: float) -> None:
            p_rows.append(r)
            p_cols.append(c)
            p_vals.append(float(v))

        for k in range(N):
            for a in range(2):
                add_p(u_col(k, a), u_col(k, a), 2.0 * s.w_jerk / s.dt**2)
            block = zmp_block + (s.w_dcm * np.outer(dcm_vec, dcm_vec) if k == N - 1 else 0.0)
            for a in range(2):
                for i in range(3):
                    for j in range(i, 3):
                        add_p(s_col(k + 1, a, i), s_col(k + 1, a, j), 2.0 * block[i, j])
        P = sp.csc_matrix((p_vals, (p_rows, p_cols)), shape=(self.n, self.n))
        P.sort_indices()
        self._P = P
        self._Px = P.data.copy()
        # linear cost: -2 w_zmp C^T p_ref per state (and the DCM term on the last)
        self._g = np.zeros(self.n)
        self._zmp_grad = -2.0 * s.w_zmp * C
        self._dcm_grad = -2.0 * s.w_dcm * dcm_vec
        self._s_cols = np.array(
            [[[s_col(k, a, i) for i in range(3)] for a in range(2)] for k in range(1, N + 1)]
        )
        self._u_cols = np.array([[u_col(k, a) for a in range(2)] for k in range(N)])
        self._lower = np.zeros(self.m)
        self._upper = np.zeros(self.m)
        self._steps = np.arange(N + 1)  # sample k at t + k dt
        # the matrix values in CSC order: the dynamics' fixed, the polygon rows' (entries n_dyn..) written at
        # their CSC positions per solve
        self._Ax = self._A_vals[self._A_perm]
        inverse = np.empty_like(self._A_perm)
        inverse[self._A_perm] = np.arange(self._A_perm.size)
        self._poly_pos = inverse[n_dyn:]
        self._schedule_tables: _ScheduleTables | None = None
        self._last: tuple[float, np.ndarray, np.ndarray | None] | None = None  # t, x, y of the last solve
        self._setup_done = False

    @staticmethod
    def _csc_pattern(
        rows: list[int], cols: list[int], shape: tuple[int, int]
    ) -> tuple[sp.csc_matrix, np.ndarray]:
        """The CSC pattern of COO entries (every entry a distinct position, zeros kept) and the indices into
        the entry list in CSC data order."""
        tags = np.arange(1, len(rows) + 1, dtype=float)
        m = sp.csc_matrix((tags, (rows, cols)), shape=shape)
        m.sort_indices()
        if m.nnz != len(rows):
            raise AssertionError("duplicate entries in the QP pattern")
        return m, m.data.astype(np.int64) - 1

    def _tables(self, schedule: ContactSchedule) -> _ScheduleTables:
        """The per-schedule tables of ``schedule`` (built on its first solve, kept while it is the plan)."""
        tables = self._schedule_tables
        if tables is None or tables.schedule is not schedule:
            s = self.settings
            tables = _ScheduleTables(schedule, s.max_edges, self._C_pos, self._C_acc)
            self._schedule_tables = tables
        return tables

    def assemble(
        self, t: float, state: np.ndarray, schedule: ContactSchedule
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The QP data of a solve at ``t`` (s) from ``state`` ``(2, 3)`` along ``schedule``: the linear cost
        ``g`` (n,), the constraint matrix values ``Ax`` in the CSC order of the pattern, the bounds ``lower``
        and ``upper`` (m,) and the ZMP references ``(N + 1, 2)`` at ``t + k dt``, ``k = 0..N`` (m, odom).

        The arrays are buffers of this QP, overwritten by the next call: copy them to keep them."""
        s = self.settings
        dt = s.dt
        tables = self._tables(schedule)
        times = t + dt * self._steps  # k = 0..N
        refs = tables.zmp_reference(times)
        # ---- bounds: the dynamics (the first rows carry A s_0), polygon rows
        lower, upper = self._lower, self._upper
        first = (self._A @ state.T).T  # (2, 3)
        lower[: self._m_dyn] = 0.0
        lower[0:6] = first.ravel()
        upper[: self._m_dyn] = lower[: self._m_dyn]
        lower[self._m_dyn :] = -np.inf
        Ax = self._Ax
        if s.constrain_zmp:
            phases = tables.constraining_phases(times[1:], dt)
            values, offsets = tables.polygon_rows(phases)
            Ax[self._poly_pos] = values.ravel()
            upper[self._m_dyn :] = offsets.ravel()
        else:
            Ax[self._poly_pos] = 0.0
            upper[self._m_dyn :] = np.inf
        # ---- linear cost
        g = self._g
        g[:] = 0.0
        cols = self._s_cols  # (N, 2, 3)
        g[cols] = refs[1:, :, None] * self._zmp_grad[None, None, :]
        g[cols[-1]] += refs[-1][:, None] * self._dcm_grad[None, :]
        return g, Ax, lower, upper, refs

    def solve(self, t: float, state: np.ndarray, schedule: ContactSchedule) -> PatternOutput:
        """Plan from the CoM state ``state`` ``(2, 3)`` (per axis ``[c, cdot, cddot]``, odom frame) at ``t``
        (s) along the contact schedule. Non-finite input is refused (status ``non_finite_input``)."""
        t_start = time.perf_counter()
        s = self.settings
        N, dt = s.horizon, s.dt
        state = np.asarray(state, dtype=float).reshape(2, 3)
        if not (math.isfinite(t) and np.isfinite(state).all()):
            return self._failed(QpStatus.NON_FINITE, t, t_start)
        g, Ax, lower, upper, refs = self.assemble(t, state, schedule)
        if not (np.isfinite(refs).all() and np.isfinite(Ax).all()):
            return self._failed(QpStatus.NON_FINITE, t, t_start)
        if not self._setup_done:
            A = self._A_csc.copy()
            A.data[:] = Ax
            self.solver.setup(self._P, g, A, lower, upper)
            self._setup_done = True
        else:
            self.solver.update(self._Px, g, Ax, lower, upper)
            if s.shift_warm_start:
                self._shift_warm_start(t)
        result = self.solver.solve()
        if not result.status.ok:
            self._setup_done = False  # start the next solve from a fresh solver
            self._last = None
            return self._failed(result.status, t, t_start, result.iterations, result.solve_time_s)
        x = result.x
        self._last = (t, x.copy(), None if result.y is None else result.y.copy())
        states = np.empty((N + 1, 2, 3))
        states[0] = state
        states[1:] = x[self._s_cols]
        jerk = x[self._u_cols] / dt
        zmp = self.lipm.zmp(states)
        zmp_ref = refs.copy()
        return PatternOutput(
            result.status,
            t,
            dt,
            states,
            jerk,
            zmp,
            zmp_ref,
            result.iterations,
            result.solve_time_s,
            time.perf_counter() - t_start,
        )

    def _shift_warm_start(self, t: float) -> None:
        """Warm-start from the last solution moved by the whole number ``j`` of samples since it
        (``PreviewSettings.shift_warm_start``): sample ``k`` of the last plan is sample ``k - j`` now; the
        last ``j`` samples repeat its last one. Dual values move with their rows (dynamics, polygon)."""
        if self._last is None or self._last[2] is None:
            return
        t_last, x, y = self._last
        s = self.settings
        N, E, dt = s.horizon, s.max_edges, s.dt
        j = round((t - t_last) / dt)
        if not (1 <= j < N and abs(t - t_last - j * dt) < 1e-9):
            return
        xs = np.concatenate([x[8 * j :], np.tile(x[-8:], j)])
        dyn, poly = y[: self._m_dyn], y[self._m_dyn :]
        ys = np.concatenate([dyn[6 * j :], np.tile(dyn[-6:], j), poly[E * j :], np.tile(poly[-E:], j)])
        self.solver.warm_start(xs, ys)

    @staticmethod
    def _constraining_phase(schedule: ContactSchedule, tk: float, dt: float) -> int:
        """The phase whose support polygon constrains the sample at ``tk`` (s).

        The ZMP is constrained at the samples only and moves (almost) linearly between them, so a sample must
        lie in the polygon of every phase of the periods on either side of it: a single support phase that
        starts or ends within ``dt`` of ``tk`` constrains it (its sole is inside the double-support polygon
        around it). Where two single supports fall within ``dt`` (a double support shorter than ``2 dt``) the
        phase at ``tk`` is used."""
        here = schedule.phase_index(tk)
        lo = schedule.phase_index(tk - dt + 1e-9)
        hi = schedule.phase_index(tk + dt - 1e-9)
        single = [i for i in range(lo, hi + 1) if i < len(schedule.phases) and schedule.phases[i].swing]
        return single[0] if len(single) == 1 else here

    def _failed(
        self, status: QpStatus, t: float, t_start: float, iterations: int = 0, solve_time: float = 0.0
    ) -> PatternOutput:
        N = self.settings.horizon
        nan = np.full((N + 1, 2, 3), np.nan)
        return PatternOutput(
            status,
            t,
            self.settings.dt,
            nan,
            np.full((N, 2), np.nan),
            np.full((N + 1, 2), np.nan),
            np.full((N + 1, 2), np.nan),
            iterations,
            solve_time,
            time.perf_counter() - t_start,
        )


class _ScheduleTables:
    """A :class:`ContactSchedule` as arrays, for the vectorized assembly of :class:`ZmpPreviewQP`.

    Phases ``0..P-1`` are the schedule's; index ``P`` is standing after the plan (the final feet). The
    look-ups give the same numbers as the schedule's own per-time methods (same floating-point operations).

    Attributes:
        schedule: the schedule these tables describe.
        t_start, t_end: (P,) phase times (s). zmp_from, zmp_to: (P, 2) ZMP reference at them (m, odom).
        swing_before: (P + 1,) number of single-support phases before each index.
        next_swing: (P + 1,) the first single-support phase at or after each index (P: none).
        values: (P + 1, E, 2, 2) polygon row values per phase: per edge and axis the coefficients of the CoM
            position and acceleration (``n_a C_pos``, ``n_a C_acc``), zero in the padding rows.
        offsets: (P + 1, E) the rows' upper bounds (m), ``+inf`` in the padding rows.
        ready: (P + 1,) whether a phase's rows are computed (on first use).
    """

    def __init__(self, schedule: ContactSchedule, max_edges: int, c_pos: float, c_acc: float) -> None:
        self.schedule = schedule
        phases = schedule.phases
        P = len(phases)
        self.n_phases = P
        self.t_end_plan = schedule.t_end
        self.t_start = np.array([p.t_start for p in phases], dtype=float)
        self.t_end = np.array([p.t_end for p in phases], dtype=float)
        self.zmp_from = np.array([p.zmp_from for p in phases], dtype=float).reshape(P, 2)
        self.zmp_to = np.array([p.zmp_to for p in phases], dtype=float).reshape(P, 2)
        self.final_zmp = schedule.zmp_reference(math.inf)
        swing = np.array([p.swing is not None for p in phases] + [False])
        self.swing_before = np.concatenate([[0], np.cumsum(swing[:P])])
        nxt = np.full(P + 1, P)
        for i in range(P - 1, -1, -1):
            nxt[i] = i if swing[i] else nxt[i + 1]
        self.next_swing = nxt
        self.max_edges = max_edges
        self._c = (c_pos, c_acc)
        self.values = np.zeros((P + 1, max_edges, 2, 2))
        self.offsets = np.full((P + 1, max_edges), np.inf)
        self.ready = np.zeros(P + 1, dtype=bool)

    def phase_index(self, times: np.ndarray) -> np.ndarray:
        """:meth:`ContactSchedule.phase_index` of each time: the last phase with ``t_start <= t`` (the first
        before the plan), ``P`` from the plan's end on."""
        P = self.n_phases
        if P == 0:
            return np.zeros(times.shape, dtype=np.int64)
        idx = np.searchsorted(self.t_start, times, side="right") - 1
        np.maximum(idx, 0, out=idx)
        idx[times >= self.t_end_plan] = P
        return idx

    def zmp_reference(self, times: np.ndarray) -> np.ndarray:
        """:meth:`ContactSchedule.zmp_reference` at each time: ``(len(times), 2)`` (m, odom)."""
        P = self.n_phases
        out = np.empty((times.size, 2))
        out[:] = self.final_zmp
        if P == 0:
            return out
        idx = self.phase_index(times)
        inside = idx < P
        i = idx[inside]
        t0 = self.t_start[i]
        a = np.clip((times[inside] - t0) / (self.t_end[i] - t0), 0.0, 1.0)[:, None]
        out[inside] = (1.0 - a) * self.zmp_from[i] + a * self.zmp_to[i]
        return out

    def constraining_phases(self, times: np.ndarray, dt: float) -> np.ndarray:
        """Per sample time, the phase whose polygon constrains it: the rule of
        :meth:`ZmpPreviewQP._constraining_phase` (the single support within ``dt`` of the sample when there is
        exactly one, else the phase at the sample)."""
        here = self.phase_index(times)
        lo = self.phase_index(times - dt + 1e-9)
        hi = self.phase_index(times + dt - 1e-9)
        P = self.n_phases
        count = self.swing_before[np.minimum(hi, P - 1) + 1] - self.swing_before[lo] if P else 0 * here
        return np.where(count == 1, self.next_swing[lo], here)

    def polygon_rows(self, phases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The polygon row values ``(len(phases), E, 2, 2)`` and upper bounds ``(len(phases), E)`` of the
        given phases (computed on first use)."""
        if not self.ready[phases].all():
            c_pos, c_acc = self._c
            E = self.max_edges
            for i in np.unique(phases[~self.ready[phases]]):
                normals, offsets = halfspaces(self.schedule.phase_polygon(int(i)))
                ne = min(len(offsets), E)
                # columns per row: x position, x acceleration, y position, y acceleration
                self.values[i, :ne, :, 0] = normals[:ne] * c_pos
                self.values[i, :ne, :, 1] = normals[:ne] * c_acc
                self.offsets[i, :ne] = offsets[:ne]
                self.ready[i] = True
        return self.values[phases], self.offsets[phases]
