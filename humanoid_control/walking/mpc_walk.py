"""Model-based walking as a plugin (registered as ``mpc_walk``): :class:`WalkingController` behind the
controller interface (:mod:`humanoid_control.controllers.interface`).

Per tick: the velocity command of the state (``cmd_vel``: vx, vy in m/s, wz in rad/s in the walking frame;
a non-finite one is refused and the previous kept), then the base estimate and joint state as pinocchio's
state (see :func:`~humanoid_control.wbc.wbc_stand.odom_sample`); the footstep planner, the ZMP preview
pattern generator and the whole-body QP answer with joint targets and feed-forward torques that the driver
applies with the ``low`` gain profile. A QP that keeps failing: no command, and a fault is reported.

Its ROS face is still a node of its own (:class:`~humanoid_control.walking.walking_node.WalkingNode`,
``node``); the in-process runner (:mod:`humanoid_control.controllers.inprocess`) runs this class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from humanoid_control.controllers.interface import ControllerState, ParameterSpec
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.walking.controller import WalkingController
from humanoid_control.wbc.wbc_stand import WbcStandController


class MpcWalkController(WbcStandController):
    """Walking from the velocity command: footsteps, ZMP preview, whole-body QP (the WBC's deploy logic)."""

    name = "mpc_walk"
    #: its ROS node (module:class), which the driver asks for ``in_loop_node``
    node: ClassVar[str] = "humanoid_control.walking.walking_node:WalkingNode"
    parameters: ClassVar[Mapping[str, ParameterSpec]] = {
        "gain_profile": ParameterSpec("low", "driver gain profile applied to this controller's commands"),
    }

    def __init__(self, controller: Any = None, runner: Any = None) -> None:
        super().__init__(controller, runner)
        self.commands_refused = 0
        self._cmd_stamp = -math.inf

    def _make_controller(self, robot: RobotConfig) -> Any:
        return WalkingController(robot)

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        ctl = self.ctl
        assert ctl is not None
        if state.cmd_vel is not None and state.cmd_vel_stamp != self._cmd_stamp:
            self._cmd_stamp = state.cmd_vel_stamp
            try:
                ctl.set_command(*state.cmd_vel)
            except ValueError:
                self.commands_refused += 1
        return super().update(state, t)

    def report(self) -> dict[str, str]:
        assert self.ctl is not None
        return {
            **super().report(),
            "walk_mode": self.ctl.status.mode.value,
            "commands_refused": str(self.commands_refused),
        }

    def status(self) -> dict[str, Any]:
        assert self.ctl is not None
        return {**super().status(), "walk_mode": self.ctl.status.mode.value}
