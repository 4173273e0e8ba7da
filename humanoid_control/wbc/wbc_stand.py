"""The whole-body standing controller as a plugin (registered as ``wbc_stand``): :class:`StandingController`
behind the controller interface (:mod:`humanoid_control.controllers.interface`).

Per tick: the base estimate of the state (``state.estimate``: base position in the odom / world frame, its
rotation base -> odom, linear and angular velocity in the base frame; from the state estimator or, in the
in-process runner, the simulator's truth) and the joint state (rad, rad/s) make pinocchio's state; the QP
answers with joint targets (rad, rad/s) and feed-forward torques (N m) that the driver applies with the
``low`` gain profile (:meth:`WbcStandController.gains`). A QP that keeps failing or no estimate: no
command (the driver's watchdog damps) and the controller reports a fault.

Its ROS face is still a node of its own (:class:`~humanoid_control.wbc.wbc_node.WbcNode`, ``node``); the
in-process runner (:mod:`humanoid_control.controllers.inprocess`) runs this class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pinocchio as pin

from humanoid_control.controllers.interface import Controller, ControllerState, ParameterSpec
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.wbc.command import CommandMode
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.dynamics import pinocchio_state


def estimate_to_pinocchio(pmodel: Any, state: ControllerState) -> tuple[np.ndarray, np.ndarray] | None:
    """Pinocchio's ``(q, v)`` from the state's base estimate and joints; None without an estimate."""
    e = state.estimate
    if e is None:
        return None
    return pinocchio_state(
        pmodel,
        np.asarray(e.position, dtype=float),
        pin.Quaternion(np.asarray(e.rotation, dtype=float)).coeffs(),
        np.asarray(e.linear_velocity, dtype=float),
        np.asarray(e.angular_velocity, dtype=float),
        state.q,
        state.dq,
    )


class WbcStandController(Controller):
    """Standing balance by the whole-body QP (CoM / DCM, ankle and hip strategies)."""

    name = "wbc_stand"
    #: its ROS node (module:class), which the driver asks for ``in_loop_node``
    node: ClassVar[str] = "humanoid_control.wbc.wbc_node:WbcNode"
    needs_estimate = True
    parameters: ClassVar[Mapping[str, ParameterSpec]] = {
        "gain_profile": ParameterSpec("low", "driver gain profile applied to this controller's commands"),
    }

    def __init__(self, controller: StandingController | None = None) -> None:
        """``controller``: a standing controller already built (tuning experiments); else one from the
        robot configuration."""
        super().__init__()
        self.ctl = controller
        self.fault = ""
        self.last_mode = ""

    def configure(self, robot: RobotConfig, params: Mapping[str, Any]) -> None:
        super().configure(robot, params)
        robot.gain_profile(self.params["gain_profile"])  # an unknown profile is refused here
        if self.ctl is None:
            self.ctl = StandingController(robot)

    def gains(self) -> str:
        return str(self.params["gain_profile"])

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        assert self.ctl is not None
        if self.fault:
            return None
        qv = estimate_to_pinocchio(self.ctl.pmodel, state)
        if qv is None:
            return None
        cmd = self.ctl.step(*qv)
        self.last_mode = cmd.mode.value
        if cmd.mode == CommandMode.DAMPING:
            self.fault = "the QP kept failing: damping"
            return None
        return JointCommand(q=cmd.q, dq=cmd.dq, tau_ff=cmd.tau_ff, stamp=t)

    def report(self) -> dict[str, str]:
        return {"command_mode": self.last_mode, "fault": self.fault}

    def status(self) -> dict[str, Any]:
        return {"command_mode": self.last_mode, "fault": self.fault}
