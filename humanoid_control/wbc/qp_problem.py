"""Building blocks of the whole-body QP (:class:`~humanoid_control.wbc.qp.WholeBodyQP`): stacked task
rows and the sparse problems handed to a :class:`~humanoid_control.wbc.solver.QpSolver`.

- ``_csc_pattern``: the CSC matrix of a fixed boolean sparsity pattern and the flat dense indices of its
  entries in CSC data order (values are gathered from the QP's dense buffers by these indices each tick);
- ``_TaskStack``: the tasks acting on one group of variables (``qdd`` or the contact forces), their rows
  stacked; fills their Hessian ``J^T W J`` and gradient ``-J^T W b``;
- ``_Problem``: one QP handed to a solver, a subset of the constraint rows and of the variables, set up
  ahead of the control loop and solved warm-started;
- ``_Problems``: the full, screened and relaxed problem of one set of feet in contact.

Units are those of the QP (:mod:`humanoid_control.wbc.qp`): accelerations m/s^2, rad/s^2; forces N, world
frame.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from humanoid_control.wbc.dynamics import RobotDynamics
from humanoid_control.wbc.solver import QpResult, QpSolver, QpStatus
from humanoid_control.wbc.tasks import Task


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


class _TaskStack:
    """The tasks acting on one group of variables, their rows stacked: ``J`` (r, nx), ``b`` (r,), ``w`` (r,).

    :meth:`fill` writes their Hessian ``J^T W J`` and gradient ``-J^T W b`` into the given blocks.
    """

    def __init__(self, tasks: list[Task], nx: int) -> None:
        self.tasks = tasks
        r = sum(t.dim for t in tasks)
        self.J = np.zeros((r, nx))
        self.b = np.zeros(r)
        self.w = np.zeros(r)
        self.WJ = np.zeros((r, nx))
        self.rows = []
        start = 0
        for t in tasks:
            rs = slice(start, start + t.dim)
            start += t.dim
            self.w[rs] = t.weights
            t.weights = self.w[rs]  # the task's weights live in the stack's row-weight vector
            self.rows.append((t, self.J[rs], self.b[rs]))

    def fill(self, dyn: RobotDynamics, hessian: np.ndarray, gradient: np.ndarray) -> None:
        if not self.tasks:
            hessian[:] = 0.0
            gradient[:] = 0.0
            return
        for t, J, b in self.rows:
            if t.enabled:  # a disabled task's rows keep weight 0 and do not enter the cost
                t.fill(dyn, J, b)
        np.multiply(self.J, self.w[:, None], out=self.WJ)
        np.matmul(self.WJ.T, self.J, out=hessian)
        np.matmul(self.WJ.T, self.b, out=gradient)
        np.negative(gradient, out=gradient)


class _Problem:
    """One QP handed to a solver: a subset of the constraint rows and of the variables (their fixed CSC
    patterns) and the solver.

    ``rows`` index the QP's constraint rows, ``cols`` its variables (the left-out variables are 0 in the
    answer: the forces of a foot out of contact). :meth:`solve` gathers this problem's values from the QP's
    dense buffers, sets the solver up on first use (and after a failure) and solves warm-started.
    """

    def __init__(
        self,
        name: str,
        rows: np.ndarray,
        cols: np.ndarray,
        a_mask: np.ndarray,
        p_mask: np.ndarray,
        solver: QpSolver,
    ) -> None:
        self.name, self.rows, self.cols, self.solver = name, rows, cols, solver
        n = a_mask.shape[1]
        self.all_cols = bool(cols.size == n)
        self.P_csc, idx = _csc_pattern(p_mask[np.ix_(cols, cols)])
        nc = cols.size
        self.P_idx = cols[idx // nc] * n + cols[idx % nc]  # flat indices into the QP's (n, n) Hessian
        self.A_csc, idx = _csc_pattern(a_mask[np.ix_(rows, cols)])
        self.A_idx = rows[idx // nc] * n + cols[idx % nc]  # flat indices into the QP's (m, n) buffer
        self.setup_done = False
        self._Px = np.zeros(self.P_idx.size)
        self._Ax = np.zeros(self.A_idx.size)
        # a prefix of the rows (the full problem, or the screened one): the bounds are handed over as views
        self._prefix = bool(rows.size == 0 or np.array_equal(rows, np.arange(rows.size)))
        self._nrows = rows.size
        self._g = np.zeros(nc)

    def setup_ahead(self) -> None:
        """Set the solver up now on the fixed patterns (a diagonally dominant Hessian, unit constraint
        values: only the structure matters), so that the first tick that needs this problem only updates
        values: no setup inside the control loop."""
        P = self.P_csc.copy()
        rows = P.indices
        cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
        P.data[:] = np.where(rows == cols, 1.0, 1e-6)
        m = self._nrows
        self.solver.setup(P, self._g, self.A_csc.copy(), np.full(m, -1.0), np.full(m, 1.0))
        self.setup_done = True

    def solve(
        self,
        P: np.ndarray,
        g: np.ndarray,
        A: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        start: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> QpResult:
        """Solve with the QP's buffers' values, warm-started from ``start`` (``x`` (n,) and ``y`` (m,) over
        the QP's variables and rows) where given, else from this problem's last solution."""
        Px = np.take(P, self.P_idx, out=self._Px)
        Ax = np.take(A, self.A_idx, out=self._Ax)
        if not math.isfinite(Ax.sum()):
            return QpResult(QpStatus.NON_FINITE, np.full(self.cols.size, np.nan), 0, 0.0)
        gs = g if self.all_cols else np.take(g, self.cols, out=self._g)
        # the solver may clip the bounds' free sides to its own infinity in place: on the QP's own buffers
        # that only replaces -inf / +inf by a huge finite bound, which every later use reads the same way
        if self._prefix:
            lo, up = lower[: self._nrows], upper[: self._nrows]
        else:
            lo, up = lower[self.rows], upper[self.rows]
        if not self.setup_done:
            Pm = self.P_csc.copy()
            Pm.data[:] = Px
            Am = self.A_csc.copy()
            Am.data[:] = Ax
            self.solver.setup(Pm, gs, Am, lo, up)
            self.setup_done = True
        else:
            self.solver.update(Px, gs, Ax, lo, up)
        if start is not None:
            self.solver.warm_start(start[0][self.cols], start[1][self.rows])
        return self.solver.solve()


class _Problems(NamedTuple):
    """The problems of one set of feet in contact: every row, without the limit rows (limit screening) and
    without the joint-limit rows (``WbcSettings.relax_limits``)."""

    full: _Problem
    screened: _Problem | None
    relaxed: _Problem | None
