"""The policy runner node's ``/diagnostics`` (:mod:`humanoid_policy.policy_runner_node`), in stages.

:class:`PolicyDiagnosticsMixin` is a base class of
:class:`~humanoid_policy.policy_runner_node.PolicyRunnerNode` holding its ``/diagnostics``: the state, the
policy, the refusal and lockstep counters, the inference times and the largest gaps between and in the
callbacks, built and published in three stages, one per ``next`` (``_diagnostics_stages``: the values, the
message, the publication; the driver's loop runs each in a tick's slack), or at once
(``_publish_diagnostics``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from humanoid_policy.runner import RunnerState

if TYPE_CHECKING:
    from humanoid_policy.manifest_types import PolicyManifest
    from humanoid_policy.runner import PolicyRunner


class PolicyDiagnosticsMixin:
    """The policy runner node's ``/diagnostics`` (a base class of the node: it reads the node's state and
    counters)."""

    # the node's state used here (set in ``PolicyRunnerNode.__init__``)
    manifest: PolicyManifest
    runner: PolicyRunner
    driver_mode: str | None
    imu_refused: int
    states_refused: int
    last_refusal: str
    inference_us: list[float]
    max_state_gap_ms: float
    max_callback_ms: float
    sync_timeouts: int
    pub_diag: Any

    def _publish_diagnostics(self, stamp: Any) -> None:
        for _ in self._diagnostics_stages(stamp):
            pass

    def _diagnostics_stages(self, stamp: Any, publish: bool = True) -> Iterator[None]:
        """This node's ``/diagnostics`` stamped ``stamp``, in three stages (each ``next`` runs one): the
        values, the message, the publication (none when not ``publish``)."""
        inf = np.array(self.inference_us) if self.inference_us else np.zeros(1)
        p50, p99 = np.percentile(inf, (50.0, 99.0))
        values = {
            "state": self.runner.state.value,
            "reason": self.runner.reason,
            "policy": self.manifest.name,
            "policy_steps": self.runner.steps,
            "gains_set": self.runner.gains_ready,
            "driver_mode": self.driver_mode or "unknown",
            "imu_refused": self.imu_refused,
            "states_refused": self.states_refused,
            "last_refusal": self.last_refusal,
            "command": " ".join(f"{v:.3f}" for v in self.runner.command),
            "step_us_median": f"{p50:.1f}",
            "step_us_p99": f"{p99:.1f}",
            "max_state_gap_ms": f"{self.max_state_gap_ms:.1f}",
            "max_callback_ms": f"{self.max_callback_ms:.1f}",
            "lockstep_sync_timeouts": self.sync_timeouts,
        }
        fault = self.runner.state == RunnerState.FAULT
        yield
        status = DiagnosticStatus(name="policy_runner", hardware_id=self.manifest.name)
        if fault:
            status.level, status.message = DiagnosticStatus.ERROR, f"fault: {values['reason']}"
        else:
            status.level, status.message = DiagnosticStatus.OK, str(values["state"])
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        if stamp is not None:
            msg.header.stamp = stamp
        yield
        if publish:
            self.pub_diag.publish(msg)
