"""Model-based walking as a plugin (registered as ``mpc_walk``): :class:`WalkingController` behind the
controller interface (:mod:`humanoid_control.controllers.interface`).

Per tick: the velocity command of the state (``cmd_vel``: vx, vy in m/s, wz in rad/s in the walking frame;
a non-finite one is refused and the previous kept), then the base estimate and joint state as
pinocchio's state
(see :func:`~humanoid_control.wbc.wbc_stand.estimate_to_pinocchio`); the footstep planner, the ZMP preview
pattern generator and the whole-body QP answer with joint targets and feed-forward torques that the driver
applies with the ``low`` gain profile. A QP that keeps failing: no command, and a fault is reported.

Its ROS face is still a node of its own (:class:`~humanoid_control.walking.walking_node.WalkingNode`,
``node``); the in-process runner (:mod:`humanoid_control.controllers.inprocess`) runs this class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from humanoid_control.controllers.interface import Controller, ControllerState, ParameterSpec
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.walking.controller import WalkingController
from humanoid_control.wbc.command import CommandMode
from humanoid_control.wbc.wbc_stand import estimate_to_pinocchio


class MpcWalkController(Controller):
    """Walking from the velocity command: footsteps, ZMP preview, whole-body QP."""

    name = "mpc_walk"
    #: its ROS node (module:class), which the driver asks for ``in_loop_node``
    node: ClassVar[str] = "humanoid_control.walking.walking_node:WalkingNode"
    needs_estimate = True
    parameters: ClassVar[Mapping[str, ParameterSpec]] = {
        "gain_profile": ParameterSpec("low", "driver gain profile applied to this controller's commands"),
    }

    def __init__(self, controller: WalkingController | None = None) -> None:
        """``controller``: a walking controller already built (tuning, push trials); else one from the robot
        configuration."""
        super().__init__()
        self.ctl = controller
        self.fault = ""
        self.last_mode = ""
        self.commands_refused = 0
        self._cmd_stamp = -math.inf

    def configure(self, robot: RobotConfig, params: Mapping[str, Any]) -> None:
        super().configure(robot, params)
        robot.gain_profile(self.params["gain_profile"])  # an unknown profile is refused here
        if self.ctl is None:
            self.ctl = WalkingController(robot)

    def gains(self) -> str:
        return str(self.params["gain_profile"])

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        ctl = self.ctl
        assert ctl is not None
        if self.fault:
            return None
        if state.cmd_vel is not None and state.cmd_vel_stamp != self._cmd_stamp:
            self._cmd_stamp = state.cmd_vel_stamp
            try:
                ctl.set_command(*state.cmd_vel)
            except ValueError:
                self.commands_refused += 1
        qv = estimate_to_pinocchio(ctl.pmodel, state)
        if qv is None:
            return None
        cmd = ctl.step(*qv)
        self.last_mode = cmd.mode.value
        if cmd.mode == CommandMode.DAMPING:
            self.fault = "the QP kept failing: damping"
            return None
        return JointCommand(q=cmd.q, dq=cmd.dq, tau_ff=cmd.tau_ff, stamp=t)

    def report(self) -> dict[str, str]:
        assert self.ctl is not None
        return {
            "walk_mode": self.ctl.status.mode.value,
            "command_mode": self.last_mode,
            "commands_refused": str(self.commands_refused),
            "fault": self.fault,
        }

    def status(self) -> dict[str, Any]:
        assert self.ctl is not None
        return {"walk_mode": self.ctl.status.mode.value, "fault": self.fault}
