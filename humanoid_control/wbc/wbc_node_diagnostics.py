"""The whole-body controller node's ``/diagnostics`` (:mod:`humanoid_control.wbc.wbc_node`), in stages.

:class:`WbcDiagnosticsMixin` is a base class of :class:`~humanoid_control.wbc.wbc_node.WbcNode` holding the
key-values (``diagnostic_values``: QP status, tick and solve times, iterations, failure and refusal
counters), the level and message (``_diagnostic_level``) and the message built and published in three
stages, one per ``next`` (``_diagnostics_stages``: the values, the message, the publication; the driver's
loop runs each in a tick's slack). The walking node extends the values and the level.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from humanoid_control.wbc.runner import WbcState

if TYPE_CHECKING:
    from collections import deque

    from humanoid_control.model.robot_config import RobotConfig
    from humanoid_control.wbc.runner import WbcRunner


class WbcDiagnosticsMixin:
    """The WBC node's ``/diagnostics`` (a base class of the node: it reads the node's state and counters)."""

    # the node's state used here (set in ``WbcNode.__init__``)
    config: RobotConfig
    controller: Any
    runner: WbcRunner
    driver_mode: str | None
    answered: int
    skipped: int
    full_problem_ticks: int
    pub_diag: Any
    _tick_us: deque[float]
    _solve_us: deque[float]
    _iterations: deque[int]

    if TYPE_CHECKING:  # the node's methods used here

        def get_name(self) -> str: ...

    def diagnostic_values(self) -> dict[str, Any]:
        """Key-values of ``/diagnostics``."""
        res = self.controller.last_output
        fc = self.controller.commands.counters
        ic = self.runner.counters
        # in the driver's loop this runs in the loop's slack: one pass per series (measured 0.6 ms before)
        tick = _series(self._tick_us)
        solve = _series(self._solve_us)
        its = _series(self._iterations)
        tick_p50, tick_p99 = np.percentile(tick, (50.0, 99.0))
        return {
            "state": self.runner.state.value,
            "reason": self.runner.reason,
            "driver_mode": self.driver_mode or "unknown",
            "gains_set": self.runner.gains_ready,
            "qp_status": res.status.value if res is not None else "none",
            "tick_us_median": f"{tick_p50:.1f}",
            "tick_us_p99": f"{tick_p99:.1f}",
            "solve_us_median": f"{np.median(solve):.1f}",
            "iterations_median": f"{np.median(its):.0f}",
            "iterations_max": int(its.max()),
            "qp_full_problem_ticks": self.full_problem_ticks,
            "qp_relaxed_ticks": self.controller.qp.relaxed_ticks,
            "qp_solved": fc.solved,
            "qp_failed": fc.failed,
            "qp_failed_longest_run": fc.longest,
            "qp_damping_requests": fc.damping_requests,
            "faults": ic.faults,
            "states_refused": ic.states_refused,
            "odom_refused": ic.odom_refused,
            "odom_stale": ic.odom_stale,
            "last_refusal": ic.last_refusal,
            "answered": self.answered,
            "answered_without_matching_odom": self.skipped,
        }

    def _diagnostic_level(self) -> tuple[bytes, str]:
        """Level and message of this node's ``/diagnostics`` status."""
        if self.runner.state == WbcState.FAULT:
            return DiagnosticStatus.ERROR, f"fault: {self.runner.reason}"
        if self.controller.commands.counters.failed:
            return DiagnosticStatus.WARN, f"{self.runner.state.value}, QP failures"
        return DiagnosticStatus.OK, self.runner.state.value

    def _publish_diagnostics(self, stamp: Any) -> None:
        for _ in self._diagnostics_stages(stamp):
            pass

    def _diagnostics_stages(self, stamp: Any) -> Iterator[None]:
        values = self.diagnostic_values()
        level = self._diagnostic_level()
        yield
        status = DiagnosticStatus(name=self.get_name(), hardware_id=self.config.name)
        status.level, status.message = level
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = stamp
        yield
        self.pub_diag.publish(msg)


def _series(values: Any) -> np.ndarray:
    """A deque of numbers as an array (one zero when empty)."""
    return np.fromiter(values, dtype=float, count=len(values)) if values else np.zeros(1)
