"""QP solver interface for the whole-body controller, and its OSQP implementation.

The problem solved every tick is

    minimize    1/2 x^T P x + g^T x
    subject to  l <= A x <= u

with ``P`` (n x n, symmetric positive semi-definite) and ``A`` (m x n) of a **fixed sparsity pattern** given
once at :meth:`QpSolver.setup`; later ticks only change the values (in the pattern's CSC order), ``g``, ``l``
and ``u``. Equality rows have ``l == u``; a free side is ``+-inf``.

Any other solver (daqp, proxsuite, qpOASES, ...) plugs in by implementing :class:`QpSolver`.
"""

from __future__ import annotations

import abc
import enum
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


class QpStatus(enum.Enum):
    """Outcome of one solve, solver independent."""

    SOLVED = "solved"
    SOLVED_INACCURATE = "solved_inaccurate"
    INFEASIBLE = "infeasible"
    MAX_ITER = "max_iter"
    FAILED = "failed"
    NON_FINITE = "non_finite_input"  # refused before the solver: a NaN or inf in the problem data

    @property
    def ok(self) -> bool:
        """True when the solution may be used (solved, or solved to reduced accuracy)."""
        return self in (QpStatus.SOLVED, QpStatus.SOLVED_INACCURATE)


@dataclass
class QpResult:
    """Result of :meth:`QpSolver.solve`.

    Attributes:
        status: outcome.
        x: primal solution (n,), a view owned by the solver: copy it to keep it past the next solve.
        iterations: solver iterations.
        solve_time_s: wall time of the solve call alone (s).
        y: dual solution (m,) where the solver gives it (a view, as ``x``), else None.
    """

    status: QpStatus
    x: np.ndarray
    iterations: int
    solve_time_s: float
    y: np.ndarray | None = None


class QpSolver(abc.ABC):
    """A sparse QP solver with a fixed sparsity pattern, updated in place and warm-started."""

    @abc.abstractmethod
    def setup(
        self, P: sp.csc_matrix, g: np.ndarray, A: sp.csc_matrix, lower: np.ndarray, upper: np.ndarray
    ) -> None:
        """Build the solver for this pattern. ``P`` is the upper triangle (CSC); ``A`` is CSC."""

    @abc.abstractmethod
    def update(
        self, Px: np.ndarray, g: np.ndarray, Ax: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> None:
        """New values: ``Px`` / ``Ax`` in the CSC data order of the matrices given to :meth:`setup`. The
        solver may change ``lower`` and ``upper`` in place (e.g. clip a free side to its own infinity)."""

    @abc.abstractmethod
    def solve(self) -> QpResult:
        """Solve, warm-started from the previous solution."""

    def warm_start(self, x: np.ndarray, y: np.ndarray) -> bool:
        """Start the next solve from the primal ``x`` (n,) and dual ``y`` (m,) instead of the previous
        solution (call after :meth:`update`). Returns False where the solver cannot (the default)."""
        return False

    def spawn(self) -> QpSolver | None:
        """A new, not yet set-up solver with the same settings (for a second problem), or None if this solver
        cannot make one (the QP then solves its full problem every tick)."""
        return None


@dataclass
class OsqpSettings:
    """OSQP settings used by :class:`OsqpSolver` (see the OSQP documentation for their meaning).

    Attributes:
        eps_abs, eps_rel: absolute / relative residual tolerances.
        max_iter: iteration cap per solve (a tick must end in bounded time).
        max_iter_retry: a solve that reaches ``max_iter`` goes on from where it stopped for up to this many
            more iterations (0: it fails there). Rare ill-conditioned ticks need them: a crossed stance with
            the DCM far out after a sideways push took 1000 iterations to converge, and failing them for 6
            ticks faulted the controller. A solve is still bounded, by ``max_iter + max_iter_retry``.
        rho: initial ADMM step; adaptive_rho_interval: iterations between rho updates (0 = automatic).
        polish: solution polishing (more accurate, slower).
        scaling: Ruiz scaling iterations.
        check_termination: iterations between convergence checks while solves are long (a check costs
            about one iteration, so a long solve wants few of them).
        fast_check_termination: the interval while warm starts converge quickly: consecutive ticks of a
            running controller are close, the previous solution is nearly this one, and checking early ends
            the solve after a few iterations instead of ``check_termination``. 0 keeps ``check_termination``.
        fast_iterations: a solve that ends within this many iterations keeps (or goes back to) the fast
            interval; a longer one switches to ``check_termination``, which is retried fast every
            ``fast_retry`` solves.
    """

    eps_abs: float = 1e-4
    eps_rel: float = 1e-4
    max_iter: int = 400
    max_iter_retry: int = 1600
    rho: float = 0.1
    adaptive_rho_interval: int = 25
    polish: bool = False
    scaling: int = 0
    check_termination: int = 25
    fast_check_termination: int = 5
    fast_iterations: int = 10
    fast_retry: int = 50


_OSQP_STATUS = {
    1: QpStatus.SOLVED,
    2: QpStatus.SOLVED_INACCURATE,
    3: QpStatus.INFEASIBLE,
    4: QpStatus.INFEASIBLE,
    7: QpStatus.MAX_ITER,
}


class OsqpSolver(QpSolver):
    """:class:`QpSolver` on OSQP (ADMM, sparse LDL^T of the KKT matrix, refactored when values change)."""

    def __init__(self, settings: OsqpSettings | None = None) -> None:
        self.settings = settings or OsqpSettings()
        self._solver = None

    def setup(
        self, P: sp.csc_matrix, g: np.ndarray, A: sp.csc_matrix, lower: np.ndarray, upper: np.ndarray
    ) -> None:
        import osqp

        s = self.settings
        prob = osqp.OSQP()
        prob.setup(
            P,
            g,
            A,
            lower,
            upper,
            verbose=False,
            warm_starting=True,
            eps_abs=s.eps_abs,
            eps_rel=s.eps_rel,
            max_iter=s.max_iter,
            rho=s.rho,
            adaptive_rho_interval=s.adaptive_rho_interval,
            polishing=s.polish,
            scaling=s.scaling,
            check_termination=s.check_termination,
        )
        self._prob = prob
        self._solver = prob._solver  # the compiled solver: update/solve without the wrapper's bookkeeping
        self._infty = float(prob.constant("OSQP_INFTY"))
        self._osqp_settings = prob.settings  # the compiled settings object, to change the check interval
        self._check = s.check_termination
        self._slow_solves = 0

    def spawn(self) -> OsqpSolver:
        return OsqpSolver(self.settings)

    def update(
        self, Px: np.ndarray, g: np.ndarray, Ax: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> None:
        assert self._solver is not None, "setup() first"
        # OSQP's infinity is finite: a free side (lower -inf, upper +inf) is clipped to it. A lower bound of
        # +inf or an upper bound of -inf is an infeasible row either way: it is left for the solver to report.
        np.maximum(lower, -self._infty, out=lower)
        np.minimum(upper, self._infty, out=upper)
        self._solver.update_data_vec(q=g, l=lower, u=upper)
        self._solver.update_data_mat(P_x=Px, P_i=None, A_x=Ax, A_i=None)

    def solve(self) -> QpResult:
        assert self._solver is not None, "setup() first"
        t0 = time.perf_counter()
        self._solver.solve()
        info = self._solver.info
        status = _OSQP_STATUS.get(int(info.status_val), QpStatus.FAILED)
        iterations = int(info.iter)
        s = self.settings
        if status is QpStatus.MAX_ITER and s.max_iter_retry > 0:
            status, more = self._go_on(s.max_iter_retry)
            iterations += more
        dt = time.perf_counter() - t0
        if s.fast_check_termination > 0:
            if iterations <= s.fast_iterations:
                self._set_check(s.fast_check_termination)
            else:
                self._slow_solves += 1
                fast = self._slow_solves % s.fast_retry == 0
                self._set_check(s.fast_check_termination if fast else s.check_termination)
        return QpResult(status, self._solver.solution.x, iterations, dt, self._solver.solution.y)

    def _go_on(self, iterations: int) -> tuple[QpStatus, int]:
        """Continue a solve that stopped at ``max_iter`` (warm-started from its own iterate) for up to
        ``iterations`` more, checking convergence every ``check_termination``; its status and iterations."""
        st = self._osqp_settings
        check = self._check
        st.max_iter, st.check_termination = iterations, self.settings.check_termination
        self._solver.update_settings(st)
        self._solver.solve()
        st.max_iter, st.check_termination = self.settings.max_iter, check
        self._solver.update_settings(st)
        info = self._solver.info
        return _OSQP_STATUS.get(int(info.status_val), QpStatus.FAILED), int(info.iter)

    def warm_start(self, x: np.ndarray, y: np.ndarray) -> bool:
        assert self._solver is not None, "setup() first"
        self._solver.warm_start(x, y)
        return True

    def _set_check(self, interval: int) -> None:
        """Change OSQP's convergence-check interval (between solves; the factorization is kept)."""
        if interval != self._check:
            self._check = interval
            self._osqp_settings.check_termination = interval
            self._solver.update_settings(self._osqp_settings)
