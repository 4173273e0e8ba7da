"""The learned policy as a controller (registered as ``policy``): :class:`PolicyRunner` behind the controller
interface (:mod:`humanoid_control.controllers.interface`).

Per tick (the loop's rate; the policy steps at its manifest's rate, holding its target between steps): the
IMU sample of the state (orientation (w, x, y, z) IMU -> world, angular velocity rad/s in the IMU frame) and
the velocity command (vx, vy m/s, wz rad/s, base frame; stamped when it came, so a silence times out as in the
node) go to the runner, which answers the joint state (rad, rad/s; configuration order) with joint targets
(rad) that the driver applies with the policy's own PD gains (:meth:`PolicyController.gains`, from its
manifest).

Its ROS face is still a node of its own (:class:`~humanoid_policy.policy_runner_node.PolicyRunnerNode`,
``node``): the launch file starts it for ``controller:=policy`` and the driver's loop creates it with
``in_loop:=true``. The in-process runner (:mod:`humanoid_control.controllers.inprocess`) runs this class.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from humanoid_control.controllers.interface import Controller, ControllerState, ParameterSpec
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_policy.manifest import PolicyManifest, load_policy
from humanoid_policy.policy_core import PolicyCore, PolicyStep
from humanoid_policy.runner import ImuSample, PolicyRunner, RunnerSettings, RunnerState


class PolicyController(Controller):
    """A learned policy (any manifest :func:`~humanoid_policy.manifest.load_policy` reads)."""

    name = "policy"
    #: its ROS node (module:class), which the driver asks for ``in_loop_node``
    node: ClassVar[str] = "humanoid_policy.policy_runner_node:PolicyRunnerNode"
    parameters: ClassVar[Mapping[str, ParameterSpec]] = {
        "policy": ParameterSpec(
            "holosoma/g1_ppo",
            "policy name (config/policies), or a path: manifest, ONNX, Isaac Lab IO descriptors, deploy.yaml",
        ),
        "policy_onnx": ParameterSpec(
            "auto", "the ONNX of an IO-descriptor or deploy YAML policy; auto: beside it"
        ),
        "ramp_s": ParameterSpec(
            1.0, "ramp to the default pose when the driver is not holding (s)", 0.0, 30.0
        ),
        "autostart": ParameterSpec(True, "run the policy as soon as the robot stands ready"),
        "max_imu_age_s": ParameterSpec(
            0.05, "IMU sample older than the joint state by more -> fault (s)", 0.001, 5.0
        ),
        "command_timeout_s": ParameterSpec(
            1.0, "a velocity command older than this (s) counts as zero; 0 keeps the last forever", 0.0, 60.0
        ),
        "command_timeout_action": ParameterSpec("zero", "zero | hold (a command silence stops the policy)"),
        "hold_after_s": ParameterSpec(
            3.0, "command_timeout_action hold: silence (s) before it stops", 0.0, 60.0
        ),
        "inference_threads": ParameterSpec(1, "onnxruntime intra-op threads", 1, 16),
        "gain_scale": ParameterSpec(1.0, "scale of the policy's PD gains (experiments)", 0.05, 10.0),
    }

    def __init__(self, manifest: PolicyManifest | None = None, runner: PolicyRunner | None = None) -> None:
        """``manifest``: a policy already loaded (then the ``policy`` and ``policy_onnx`` parameters are
        unused). ``runner``: a runner already built by the policy's node (its ROS face, which then owns its
        settings, start and stop, gains hand-shake and velocity commands)."""
        super().__init__()
        self.runner = runner
        self.core: PolicyCore | None = runner.core if runner is not None else None
        self.manifest = manifest if manifest is not None else (self.core.manifest if self.core else None)
        self.last_step: PolicyStep | None = None
        self.last_inference_us = 0.0  # the runner's update of the last policy step (us)
        self.imu_refused = 0
        self._own_runner = runner is None
        self._cmd_stamp = -np.inf

    def configure(self, robot: RobotConfig, params: Mapping[str, Any]) -> None:
        super().configure(robot, params)
        if not self._own_runner:
            return
        p = self.params
        if p["command_timeout_action"] not in ("zero", "hold"):
            action = p["command_timeout_action"]
            raise ValueError(f"parameter command_timeout_action: '{action}' is not zero or hold")
        manifest = self.manifest
        if manifest is None:
            onnx = None if p["policy_onnx"] in ("", "auto") else p["policy_onnx"]
            manifest = load_policy(p["policy"], robot, onnx)  # every contract check here, before moving
            self.manifest = manifest
        self.core = PolicyCore(manifest, robot, threads=p["inference_threads"])
        settings = RunnerSettings(
            ramp_s=p["ramp_s"],
            autostart=p["autostart"],
            max_imu_age_s=p["max_imu_age_s"],
            command_timeout_s=p["command_timeout_s"],
            command_timeout_action=p["command_timeout_action"],
            hold_after_s=p["hold_after_s"],
        )
        self.runner = PolicyRunner(self.core, settings)
        self.runner.command_gains = self.gains()  # the ramp's stand law is relative to these
        self.runner.gains_ready = True  # the host hands gains() to the driver before the first update

    def gains(self) -> tuple[np.ndarray, np.ndarray]:
        """The policy's PD gains (its manifest's kp, kd; configuration order), times ``gain_scale``."""
        assert self.core is not None
        scale = self.params["gain_scale"]
        return scale * np.asarray(self.core.kp, dtype=float), scale * np.asarray(self.core.kd, dtype=float)

    def activate(self, state: ControllerState) -> None:
        assert self.runner is not None
        if self._own_runner and (self.runner.state == RunnerState.HOLD or not self.params["autostart"]):
            self.runner.start()

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        runner = self.runner
        assert runner is not None
        if not runner.set_imu(ImuSample(t, state.imu_quat, state.gyro)):
            self.imu_refused += 1
        if state.cmd_vel is not None and state.cmd_vel_stamp != self._cmd_stamp:
            self._cmd_stamp = state.cmd_vel_stamp
            runner.set_command(state.cmd_vel, state.cmd_vel_stamp)
        t0 = time.perf_counter()
        out = runner.update(t, state.q, state.dq, state.driver_mode)
        self.last_step = out.policy_step
        if out.policy_step is not None:
            self.last_inference_us = (time.perf_counter() - t0) * 1e6
        if out.q_target is None:
            return None
        zeros = np.zeros_like(out.q_target)
        tau_ff = zeros if out.tau_ff is None else out.tau_ff
        return JointCommand(q=out.q_target, dq=zeros, tau_ff=tau_ff, stamp=t)

    def deactivate(self) -> None:
        if self.runner is not None:
            self.runner.stop()

    def report(self) -> dict[str, str]:
        r = self.runner
        if r is None:
            return {}
        return {
            "policy": r.core.manifest.name,
            "state": r.state.value,
            "reason": r.reason,
            "steps": str(r.steps),
        }

    def status(self) -> dict[str, Any]:
        r = self.runner
        return (
            {} if r is None else {"state": r.state.value, "reason": r.reason, "policy": r.core.manifest.name}
        )
