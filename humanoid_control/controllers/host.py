"""The host of one controller: its lifecycle and rate, the same wherever it runs (no rclpy).

The driver's loop (``in_loop:=true``), the generic node adapter (the controller as a ROS 2 node of its own)
and the in-process runner all call :meth:`ControllerHost.step` once per loop tick with the tick's
:class:`~humanoid_control.controllers.interface.ControllerState`; the host

- activates the controller on the first state after a start (``autostart``: the first state it sees), from
  that measured state;
- calls ``update`` every tick, or every ``1 / rate_hz`` s (the last command, stamped with the tick, between);
- turns the controller's command into a checked driver command (right length, finite, stamped with the tick);
- deactivates it on :meth:`stop` (no command then: the driver's watchdog holds or damps as for any controller
  that stops streaming).

Nothing here knows the clock mode or the backend.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from humanoid_control.controllers.interface import Controller, ControllerState, checked_command
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.model.robot_config import RobotConfig


class ControllerHost:
    """Runs one configured :class:`Controller` tick by tick.

    Args:
        controller: an unconfigured controller.
        robot: the robot configuration it is configured with.
        params: its parameters (name -> value).
        autostart: activate on the first state (else on :meth:`start`).
    """

    def __init__(
        self,
        controller: Controller,
        robot: RobotConfig,
        params: Mapping[str, Any] | None = None,
        autostart: bool = True,
    ) -> None:
        controller.configure(robot, dict(params or {}))  # ValueError: a parameter refused
        if controller.rate_hz < 0:
            raise ValueError(f"controller {controller.name}: rate_hz {controller.rate_hz} is negative")
        self.controller = controller
        self.n_joints = robot.num_joints
        self.active = False
        self._start_requested = autostart
        self._next_update = -float("inf")
        self._last: JointCommand | None = None
        self.updates = 0
        self.update_us_last = 0.0
        self.update_us_max = 0.0
        self.last_stamp: float | None = None

    @property
    def name(self) -> str:
        """The controller's registered name."""
        return self.controller.name

    def start(self) -> tuple[bool, str]:
        """Ask for activation at the next state; (accepted, message)."""
        if self.active:
            return True, f"{self.name} already active"
        self._start_requested = True
        return True, f"{self.name} starts at the next state"

    def stop(self) -> tuple[bool, str]:
        """Deactivate now; no command until the next start."""
        self._start_requested = False
        if not self.active:
            return True, f"{self.name} already inactive"
        self.active = False
        self._last = None
        self.controller.deactivate()
        return True, f"{self.name} stopped"

    def step(self, state: ControllerState) -> JointCommand | None:
        """The command answering ``state`` (stamped ``state.stamp``), or None (inactive, or no command).

        Raises:
            CommandError: the controller's command has the wrong length or a non-finite value.
            Exception: whatever the controller raises (the caller faults the driver into damping).
        """
        if not self.active:
            if not self._start_requested:
                return None
            self.controller.activate(state)
            self.active = True
            self._next_update = -float("inf")
        t = state.stamp
        self.last_stamp = t
        period = 1.0 / self.controller.rate_hz if self.controller.rate_hz > 0 else 0.0
        if t + 1e-9 >= self._next_update or self._last is None:
            t0 = time.perf_counter()
            out = self.controller.update(state, t)
            us = (time.perf_counter() - t0) * 1e6
            self.update_us_last = us
            self.update_us_max = max(self.update_us_max, us)
            self.updates += 1
            self._next_update = t + period if period > 0 else -float("inf")
            if out is None:
                self._last = None
                return None
            self._last = checked_command(self.n_joints, t, out.q, out.dq, out.tau_ff)
            return self._last
        held = self._last
        return JointCommand(q=held.q, dq=held.dq, tau_ff=held.tau_ff, stamp=t)

    def status(self) -> dict[str, Any]:
        """The host's and the controller's state (for ``~/state``)."""
        return {
            "controller": self.name,
            "active": self.active,
            "updates": self.updates,
            "t": self.last_stamp,
            **self.controller.status(),
        }

    def report(self) -> dict[str, str]:
        """Diagnostics values: the host's and the controller's."""
        return {
            "controller": self.name,
            "active": str(self.active).lower(),
            "updates": str(self.updates),
            "update_us_last": f"{self.update_us_last:.0f}",
            "update_us_max": f"{self.update_us_max:.0f}",
            **self.controller.report(),
        }
