"""The whole-body standing controller as a plugin (registered as ``wbc_stand``): :class:`StandingController`
behind the controller interface (:mod:`humanoid_control.controllers.interface`).

The controller's deploy logic is :class:`~humanoid_control.wbc.runner.WbcRunner`'s (wait for the driver's
gains, its mode and an estimate; pacing commands while the driver ramps; a fault latched after repeated QP
failures or bad input), the same the WBC node runs. Per tick: the base estimate of the state
(``state.estimate``: base position in the odom / world frame, its rotation base -> odom, linear and angular
velocity in the base frame; from the state estimator or, in the in-process runner, the simulator's truth)
and the joint state (rad, rad/s) make pinocchio's state; the QP answers with joint targets (rad, rad/s) and
feed- forward torques (N m) that the driver applies with the ``low`` gain profile
(:meth:`WbcStandController.gains`). A QP that keeps failing or no estimate: no command (the driver's
watchdog damps) and the controller reports a fault.

Its ROS face is still a node of its own (:class:`~humanoid_control.wbc.wbc_node.WbcNode`, ``node``); the
in- process runner (:mod:`humanoid_control.controllers.inprocess`) runs this class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pinocchio as pin

from humanoid_control.controllers.interface import Controller, ControllerState, ParameterSpec
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.runner import OdomSample, WbcRunner, WbcRunnerSettings, WbcState


def odom_sample(state: ControllerState) -> OdomSample | None:
    """The state's base estimate as an ``/odom`` sample (pose in the odom frame, quaternion x-y-z-w, twist in
    the base frame), stamped with the state; None without an estimate."""
    e = state.estimate
    if e is None:
        return None
    return OdomSample(
        state.stamp,
        np.asarray(e.position, dtype=float),
        pin.Quaternion(np.asarray(e.rotation, dtype=float)).coeffs().copy(),
        np.asarray(e.linear_velocity, dtype=float),
        np.asarray(e.angular_velocity, dtype=float),
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

    def __init__(self, controller: Any = None, runner: WbcRunner | None = None) -> None:
        """``controller``: the QP controller already built (tuning experiments, push trials); else one from
        the robot configuration. ``runner``: a runner already built by the controller's node (its ROS face,
        which then owns its settings, the gains hand-shake, start and stop)."""
        super().__init__()
        self.runner = runner
        self.ctl = runner.controller if runner is not None else controller
        self._own_runner = runner is None
        self.last_mode = ""

    def _make_controller(self, robot: RobotConfig) -> Any:
        return StandingController(robot)

    def configure(self, robot: RobotConfig, params: Mapping[str, Any]) -> None:
        super().configure(robot, params)
        robot.gain_profile(self.params["gain_profile"])  # an unknown profile is refused here
        if self.ctl is None:
            self.ctl = self._make_controller(robot)
        if self.runner is None:
            self.runner = WbcRunner(self.ctl, WbcRunnerSettings())
            self.runner.gains_ready = True  # the host hands gains() to the driver before the first update

    def gains(self) -> str:
        return str(self.params["gain_profile"])

    @property
    def fault(self) -> str:
        """Why the runner latched its fault (no more commands until the driver ramps again), or ''."""
        r = self.runner
        return r.reason if r is not None and r.state == WbcState.FAULT else ""

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        runner = self.runner
        assert runner is not None
        sample = odom_sample(state)
        if sample is not None and not runner.set_odom(sample):
            runner.counters.last_refusal = "in-loop estimate refused"
        cmd = runner.update(t, state.q, state.dq, state.driver_mode)
        if cmd is None:
            return None
        self.last_mode = cmd.mode.value
        return JointCommand(q=cmd.q, dq=cmd.dq, tau_ff=cmd.tau_ff, stamp=t)

    def report(self) -> dict[str, str]:
        r = self.runner
        state = r.state.value if r is not None else ""
        return {"runner_state": state, "command_mode": self.last_mode, "fault": self.fault}

    def status(self) -> dict[str, Any]:
        r = self.runner
        return {"state": r.state.value if r is not None else "", "fault": self.fault}
