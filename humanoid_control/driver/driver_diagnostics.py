"""The robot driver's ``/diagnostics``: its own status (mode, command counters, loop statistics, latencies,
real-time settings, the hardware's values) and, with nodes in its loop, the in-loop controller's and the
in-loop estimator's, each built in stages (values, message, publication) so that the loop's slack
(:mod:`humanoid_control.driver.driver_slack`) can publish them a stage at a time.

:class:`DriverDiagnosticsMixin` is a base of
:class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from humanoid_control.driver.driver_core import DriverMode
from humanoid_control.ros.node_utils import to_time_msg

DIAG_STAGES = 3  # of each diagnostics published from the loop's slack: values, message, publication


class DriverDiagnosticsMixin:
    """The diagnostics of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode` (``self`` is the
    driver node)."""

    def _publish_all_diagnostics(self) -> None:
        """``/diagnostics`` of the driver and of the nodes in its loop (in-loop controller, estimator)."""
        self._diag_pending, self._diag_stages = [], None
        for part in range(3):
            for _ in self._diagnostics_part(part):
                pass

    def _next_diagnostics_stage(self, _arg: Any = None) -> None:
        """Loop thread, in the slack: the next stage of the diagnostics in progress."""
        assert self._diag_stages is not None
        try:
            next(self._diag_stages)
            self._diag_stage += 1
        except StopIteration:
            self._diag_pending.pop(0)
            self._diag_stages = None

    def _diagnostics_part(self, part: int) -> Iterator[None]:
        """The stages of one of the diagnostics published from the loop (each ``next`` runs one): the
        driver's (0), the in-loop controller's (1), the in-loop estimator's (2; each only where there is one,
        in stages where the node offers ``in_loop_diagnostics_stages``, else in one)."""
        if part == 0:
            yield from self._diagnostics_stages()
            return
        node = self.in_loop if part == 1 else self.in_loop_estimator
        stages = getattr(node, "in_loop_diagnostics_stages", None)
        if stages is not None:
            yield from stages()
            return
        publish = getattr(node, "in_loop_diagnostics", None)
        if publish is not None:
            publish()

    def _publish_diagnostics(self) -> None:
        for _ in self._diagnostics_stages():
            pass

    def _diagnostics_stages(self) -> Iterator[None]:
        """The driver's ``/diagnostics`` in three stages (each ``next`` runs one): its values, the message,
        the publication."""
        with self.lock:
            core = self.core
            c = core.counters
            values = {
                "mode": core.mode.value,
                "mode_reason": core.mode_reason,
                "mode_entered_tick": core.mode_entered_tick,
                "tick": core.tick,
                "last_command_tick": core.last_command_tick,
                "watchdog_ticks": self.settings.watchdog_ticks,
                "gain_profile": self.settings.command_profile,
                "clock": self.clock_mode,
                "commands_accepted": c.commands_accepted,
                "commands_refused": c.commands_refused,
                "commands_ignored": c.commands_ignored,
                "last_refusal": c.last_refusal,
                "clamped_targets": c.clamped_targets,
                "watchdog_trips": c.watchdog_trips,
                "max_command_gap_ticks": c.max_command_gap_ticks,
                "estops": c.estops,
                "faults": c.faults,
                "lockstep_timeouts": self.lockstep_timeouts,
                "lockstep_peers": " ".join(self.peers.names),
                "lockstep_peer_timeouts": self.peers.timeouts,
                "paused": self.paused,
                "pushes": self.pushes,
                "respawns": self.respawns,
                "realtime_commands_late": self.realtime_commands_late,
                "tooling_published": self.tooling_published,
                "tooling_deferred": self.tooling_deferred,
                "tooling_superseded": self.tooling_superseded,
                "tooling_truth_dropped": self.tooling_truth_dropped,
            }
        values.update(self.stats.summary())
        lat = self.state_to_command
        values["state_to_command_us_p50"], values["state_to_command_us_p99"] = lat.percentiles((50.0, 99.0))
        values["state_to_command_us_max"] = round(lat.max, 1)
        values["state_to_command_samples"] = lat.n
        values["in_loop_controller"] = self.in_loop_kind
        values["publish_every_ticks"] = self.publish_every
        values.update(self.rt_applied.as_dict())
        backend_diag = getattr(self.backend, "diagnostics", None)
        if backend_diag is not None:
            values.update({f"hw_{k}": v for k, v in backend_diag().items()})
        yield
        status = DiagnosticStatus(
            name="robot_driver: loop", hardware_id=f"{self.config.name}/{self.hardware}"
        )
        if core.mode == DriverMode.DAMPING:
            status.level, status.message = DiagnosticStatus.ERROR, f"damping: {core.mode_reason}"
        elif core.activation_block:
            status.level, status.message = (
                DiagnosticStatus.WARN,
                f"{core.mode.value}; {core.activation_block}",
            )
        elif self.stats.overruns > 0 and self.clock_mode == "realtime":
            status.level, status.message = (
                DiagnosticStatus.WARN,
                f"{core.mode.value}, {self.stats.overruns} overruns",
            )
        else:
            status.level, status.message = DiagnosticStatus.OK, core.mode.value
        status.values = [KeyValue(key=k, value=_fmt(v)) for k, v in values.items()]
        statuses = [status]
        if self.in_loop is not None:
            # named after the controller's node (tools that read the driver's status by its name prefix
            # see the loop's status alone)
            ctl = DiagnosticStatus(
                name=f"{self.in_loop.get_name()}: in the driver's loop",  # type: ignore[attr-defined]
                hardware_id=f"{self.config.name}/{self.in_loop_kind}",
            )
            keys = [k for k in values if k.startswith("controller_")]
            over = values.get("controller_overruns", 0)
            ctl.level = DiagnosticStatus.WARN if over else DiagnosticStatus.OK
            ctl.message = f"{self.in_loop_kind}: {over} steps over half a period"
            ctl.values = [KeyValue(key=k, value=_fmt(values[k])) for k in keys]
            statuses.append(ctl)
        msg = DiagnosticArray(status=statuses)
        msg.header.stamp = to_time_msg(self.backend_time())
        yield
        self.pub_diag.publish(msg)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
