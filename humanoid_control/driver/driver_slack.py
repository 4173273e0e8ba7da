"""The robot driver's slack scheduling (realtime, a controller in the loop): after a tick's work, the
publications that would otherwise lengthen the tick go out in the slack before the next deadline, one at a
time and each only where the slack holds it (the decaying peak of its past costs): the tooling streams of
the newest publishing tick, the ground truth, the diagnostics stage by stage, the ``~/switch`` records and
info log lines. What does not fit waits for a later tick's slack.

:class:`DriverSlackMixin` is a base of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`;
its loop thread (:mod:`humanoid_control.driver.driver_loop`) calls ``_publish_in_slack``. The streams are
in :mod:`humanoid_control.driver.driver_publishing`, the diagnostics' stages in
:mod:`humanoid_control.driver.driver_diagnostics`.
"""

from __future__ import annotations

import time
from typing import Any

from humanoid_control.driver.driver_diagnostics import DIAG_STAGES


class DriverSlackMixin:
    """The slack scheduling of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`
    (``self`` is the driver node)."""

    def _publish_in_slack(self, deadline: float, truth_due: bool) -> None:
        """Loop thread, realtime, a controller in the loop, after the tick's work (command written, physics
        stepped): the tooling streams of the newest publishing tick, one at a time (``/joint_states``,
        ``/imu/data``, ``/clock``, the mirrored command, the in-loop estimator's ``/odom`` and contacts), each
        only if the slack before ``deadline`` (perf_counter s) holds it (the decaying peak of its past
        publications); the rest wait for a later tick's slack (``tooling_deferred``), and a newer publishing
        tick supersedes them (``tooling_superseded``). ``truth_due``: the next tick publishes, and the
        simulator's state after this tick's step is its state: the ground truth and contact wrenches go out
        now, stamped with its time, if the slack holds them (else that sample is dropped:
        ``tooling_truth_dropped``). Then the diagnostics (1 Hz and on a mode change) and the ``~/switch``
        records, when due and the slack holds them."""
        streams = self._tick_streams
        if self._tooling_pending is not None:
            state, i = self._tooling_pending
            while i < len(streams):
                if not self._fits(deadline, i):
                    self._tooling_pending = (state, i)
                    self.tooling_deferred += 1
                    if truth_due:  # dropped too (the tick's streams go first), and counted
                        self.tooling_truth_dropped += 1
                    return
                self._timed(i, streams[i], state)
                i += 1
            self._tooling_pending = None
            self.tooling_published += 1
        truth, diag = len(streams), len(streams) + 1  # their indices in _tooling_costs
        if truth_due:
            if self._fits(deadline, truth):
                self._timed(truth, self._publish_truth, None)  # None: stamped with the simulator's time
            else:
                self.tooling_truth_dropped += 1
        # the three diagnostics in turn, stage by stage, each stage when the slack holds it (else a later
        # tick's slack): together they cost more than a tick's slack with the WBC in the loop (measured
        # 1.5-1.9 ms; the driver's and the WBC node's alone 0.6-0.9 ms each)
        while self._diag_pending:
            part = self._diag_pending[0]
            if self._diag_stages is None:
                self._diag_stages, self._diag_stage = self._diagnostics_part(part), 0
            stage = diag + DIAG_STAGES * part + min(self._diag_stage, DIAG_STAGES - 1)
            if not self._fits(deadline, stage):
                break
            self._timed(stage, self._next_diagnostics_stage, None)
        switch = diag + 3 * DIAG_STAGES
        while self._switches_pending and self._fits(deadline, switch):
            self._timed(switch, self._publish_switch, self._switches_pending.pop(0))
        while self._logs_pending and self._fits(deadline, switch + 1):
            self._timed(switch + 1, self._log_info, self._logs_pending.pop(0))

    def _log_info(self, line: tuple[Any, str]) -> None:
        line[0].info(line[1])

    def _take_in_loop_logs(self, node: Any, tooling: bool) -> None:
        """Loop thread: the in-loop controller's log lines (``in_loop_logs``), for the slack (``tooling``) or
        now."""
        lines = getattr(node, "in_loop_logs", None)
        while lines:
            line = (node.get_logger(), lines.pop(0))
            if tooling:
                self._logs_pending.append(line)
            else:
                self._log_info(line)

    def _timed(self, stream: int, publish: Any, arg: Any) -> None:
        """``publish(arg)``; its duration updates the decaying peak cost of tooling ``stream``. One sample
        at most doubles the peak: a single preempted publication (the VM, the GC) must not hold the stream
        back for hundreds of ticks, while a cost that stays high reaches the peak in a few publications."""
        start = time.perf_counter()
        publish(arg)
        costs = self._tooling_costs
        peak = costs[stream]
        costs[stream] = max(min(time.perf_counter() - start, 2.0 * peak), 0.99 * peak)

    def _fits(self, deadline: float, stream: int) -> bool:
        """The slack before ``deadline`` (perf_counter s) holds a publication of tooling ``stream``; if not,
        its expected cost decays (one slow publication must not hold the stream back for good)."""
        if deadline - time.perf_counter() >= self._tooling_costs[stream] + self.spin_margin:
            return True
        self._tooling_costs[stream] *= 0.99
        return False
