"""The joint hold controller: q* = the robot's default standing pose (rad), dq* = 0, tau_ff = 0.

The simplest controller of the stack and the reference for the lockstep contract: it answers every state with
a command stamped with that state's time; the driver applies its ``gain_profile``.
"""

from __future__ import annotations

import numpy as np

from humanoid_control.controllers.interface import Controller, ControllerState
from humanoid_control.driver.driver_core import JointCommand


class JointHoldController(Controller):
    """Holds the robot configuration's ``default`` joint positions."""

    name = "joint_hold"

    def __init__(self) -> None:
        super().__init__()
        self.target = np.zeros(0)
        self._zeros = np.zeros(0)

    def configure(self, robot, params) -> None:  # type: ignore[no-untyped-def]
        super().configure(robot, params)
        self.target = np.asarray(robot.array("default"), dtype=float).copy()
        self._zeros = np.zeros_like(self.target)

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        """The default pose, stamped ``t`` (s)."""
        return JointCommand(q=self.target, dq=self._zeros, tau_ff=self._zeros, stamp=t)
