"""A learned policy with a model-based guardian (registered as ``supervised``).

The learned policy (:class:`~humanoid_policy.controller.PolicyController`, any manifest) commands; every tick
the viability monitor (:mod:`humanoid_control.supervision.viability`) judges the state estimator's state. The
tick a trigger is crossed (capture point beyond the reachable support, tilt, tilt rate, no contact, action
saturation) the walking controller (:class:`~humanoid_control.walking.mpc_walk.MpcWalkController`) takes over
in that same tick: seeded from the measured state in whatever phase the gait is (both feet down: it stands or
steps as after a push; a foot in the air: a capture step with that foot from where it is), it steps, then
stands (``model_walks_on``: walks on with the current velocity command). Once the robot has been viable with
margin for ``handback_s`` (and the walking controller has been in charge ``min_model_s`` at least, standing or
walking without a capture step in flight), the policy takes over again: its observation history was kept warm
all the while (it ran on the measured state, its output unused), its last action is reset to zero.

Gains: the driver applies the policy's PD gains throughout (:meth:`SupervisedController.gains`); the walking
controller's commands, meant for the robot's ``low`` gain profile, get the feed-forward that gives the same
torque at the measured state (:func:`~humanoid_control.supervision.handover.regain`). Each switch is bumpless
(:class:`~humanoid_control.supervision.handover.SwitchBlend`, bound ``switch_max_step``).

Transparency: :meth:`SupervisedController.supervisor_state` (the JSON published latched on
``/supervisor/state``: who commands, every handover with its reason, monitor values, latency and duration,
the time under each), :meth:`report` (``/diagnostics``).

Frames and units as in :mod:`humanoid_control.controllers.interface`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from humanoid_control.controllers.interface import Controller, ControllerState, ParameterSpec
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.supervision.handover import SwitchBlend, regain
from humanoid_control.supervision.viability import (
    THRESHOLDS,
    ViabilityMonitor,
    ViabilitySettings,
)
from humanoid_control.walking.controller_types import WalkMode
from humanoid_control.walking.mpc_walk import MpcWalkController
from humanoid_control.wbc.dynamics import pinocchio_state
from humanoid_policy.controller import PolicyController
from humanoid_policy.runner import RunnerState

POLICY = "policy"
MODEL = "model"

_DEFAULTS = ViabilitySettings()


def _threshold_specs() -> dict[str, ParameterSpec]:
    return {
        name: ParameterSpec(float(getattr(_DEFAULTS, name)), spec.description, spec.low, spec.high)
        for name, spec in THRESHOLDS.items()
    }


class SupervisedController(Controller):
    """The learned policy, handed over to model-based stepping and back (module docstring)."""

    name = "supervised"
    state_topic = "/supervisor/state"
    needs_estimate = True
    parameters: ClassVar[Mapping[str, ParameterSpec]] = {
        # the policy's own, but autostart (the host's: the supervisor starts the policy when it is started)
        **{k: v for k, v in PolicyController.parameters.items() if k != "autostart"},
        **_threshold_specs(),
        "handback_s": ParameterSpec(
            1.0, "viable with margin this long before the policy takes over again (s)", 0.05, 60.0
        ),
        "min_model_s": ParameterSpec(
            1.0, "the walking controller commands at least this long (s)", 0.0, 60.0
        ),
        "handback": ParameterSpec(
            True, "hand the robot back to the policy (false: the walking controller keeps it)"
        ),
        "model_walks_on": ParameterSpec(
            False,
            "the walking controller follows /cmd_vel after its capture steps (false: it stands until the "
            "hand-back, and the policy walks on)",
        ),
        "switch_max_step": ParameterSpec(
            0.2, "switch bound: torque step per tick (fraction of the effort limits)", 0.01, 1.0
        ),
        "model_gain_profile": ParameterSpec(
            "low", "gain profile the walking controller's commands are meant for"
        ),
    }

    def __init__(self) -> None:
        super().__init__()
        self.policy = PolicyController()
        self.walker = MpcWalkController()
        self.monitor: ViabilityMonitor | None = None
        self.blend: SwitchBlend | None = None
        self.mode = POLICY
        self.handovers: list[dict[str, Any]] = []
        self.time_policy_s = 0.0
        self.time_model_s = 0.0
        self.last_values: dict[str, float] = {}
        self._since = 0.0  # when the controller in charge took over (s)
        self._margin_since: float | None = None
        self._last_t: float | None = None
        self._last_policy: JointCommand | None = None
        self._last_out: JointCommand | None = None
        self._low: tuple[np.ndarray, np.ndarray] | None = None
        self._gains: tuple[np.ndarray, np.ndarray] | None = None
        self._lower = self._upper = np.zeros(0)  # joint limits less 1 mrad (rad), set by configure
        self.changes = 0  # bumps whenever the published state changes (a handover)
        self._requested = ""  # a hand-over asked for (request_handover): its reason
        self._state_version = -1  # the version of the cached topic state
        self._state: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle
    def configure(self, robot: RobotConfig, params: Mapping[str, Any]) -> None:
        super().configure(robot, params)
        p = self.params
        settings = ViabilitySettings.from_params(p)  # ranges checked by the parameter specs already
        self.policy.configure(robot, {k: p[k] for k in PolicyController.parameters if k in p})
        self.walker.configure(robot, {"gain_profile": p["model_gain_profile"]})
        self.monitor = ViabilityMonitor(robot, settings)
        self._gains = self.policy.gains()
        low = robot.gain_profile(p["model_gain_profile"])
        self._low = (np.asarray(low.kp, dtype=float), np.asarray(low.kd, dtype=float))
        self.blend = SwitchBlend(self._gains, robot.array("effort"), p["switch_max_step"])
        self._lower, self._upper = robot.array("lower") + 1e-3, robot.array("upper") - 1e-3

    def gains(self) -> tuple[np.ndarray, np.ndarray]:
        """The policy's PD gains (the driver applies them to both controllers' commands)."""
        assert self._gains is not None
        return self._gains

    def activate(self, state: ControllerState) -> None:
        self.policy.activate(state)
        self.mode = POLICY
        self._since = state.stamp
        self._margin_since = None
        assert self.monitor is not None
        self.monitor.reset()

    def deactivate(self) -> None:
        self.policy.deactivate()

    def request_handover(self, reason: str = "request") -> None:
        """Hand over to the walking controller at the next tick as if the monitor had triggered (an operator
        or a test), recorded with ``reason``; the hand-back then follows the monitor as usual."""
        self._requested = reason

    # ------------------------------------------------------------------ per tick
    @property
    def policy_running(self) -> bool:
        """The policy runs (past its ramp): the monitor may hand over."""
        r = self.policy.runner
        return r is not None and r.state == RunnerState.RUN

    def _saturation(self, cmd: JointCommand | None) -> float:
        """Share of joints whose target is at (within 1 mrad of) a joint limit."""
        if cmd is None:
            return 0.0
        return float(np.mean((cmd.q <= self._lower) | (cmd.q >= self._upper)))

    def _walker_command(self, state: ControllerState, t: float) -> JointCommand | None:
        if not self.params["model_walks_on"]:
            state = replace(state, cmd_vel=None)  # it stands after its capture steps (take_over zeroed it)
        out = self.walker.update(state, t)
        if out is None:
            return None
        assert self._low is not None and self._gains is not None
        return regain(out, self._low, self._gains, state.q, state.dq)

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        assert self.monitor is not None and self.blend is not None
        if self._last_t is not None:
            dt = max(t - self._last_t, 0.0)
            if self.mode == POLICY:
                self.time_policy_s += dt
            else:
                self.time_model_s += dt
        self._last_t = t
        pol = self.policy.update(state, t)  # always: the policy's history stays warm
        est = state.estimate
        if est is None or not self.policy_running:
            out = pol if self.mode == POLICY else self._walker_command(state, t)
            return self._finish(out, state)
        cmd_speed = 0.0
        if state.cmd_vel is not None and math.isfinite(state.cmd_vel_stamp):
            cmd_speed = float(math.hypot(state.cmd_vel[0], state.cmd_vel[1]))
        # the speed the controller in charge is asked for: the walking controller stands unless it walks on
        asked = cmd_speed if self.mode == POLICY or self.params["model_walks_on"] else 0.0
        verdict = self.monitor.check(t, est, state.q, state.dq, self._saturation(pol), asked)
        self.last_values = verdict.values
        if self.mode == POLICY:
            reason, self._requested = verdict.reason or self._requested, ""
            if not reason:
                return self._finish(pol, state)
            return self._hand_to_model(state, t, pol, reason, verdict.values)
        out = self._walker_command(state, t)
        if out is None:  # the walking controller faulted: no command (the driver damps), safe stop
            return self._finish(None, state)
        ctl = self.walker.ctl
        # a capture step in flight (a walk on /cmd_vel, with model_walks_on, may be handed back mid-walk)
        stepping = ctl is not None and ctl.mode == WalkMode.WALK and (ctl.recovering or cmd_speed == 0.0)
        if verdict.margin and not stepping:
            if self._margin_since is None:
                self._margin_since = t
        else:
            self._margin_since = None
        p = self.params
        if (
            p["handback"]
            and pol is not None
            and self._margin_since is not None
            and t - self._margin_since >= p["handback_s"]
            and t - self._since >= p["min_model_s"]
        ):
            return self._hand_to_policy(state, t, pol)
        return self._finish(out, state)

    def _hand_to_model(
        self,
        state: ControllerState,
        t: float,
        pol: JointCommand | None,
        reason: str,
        values: dict[str, float],
    ) -> JointCommand | None:
        walker, est = self.walker, state.estimate
        ctl = walker.ctl
        assert ctl is not None and self.blend is not None
        if walker.runner is not None and walker.runner.state.value == "fault":
            walker.runner.reset()
        from pinocchio import Quaternion

        quat = Quaternion(np.asarray(est.rotation, dtype=float)).coeffs()
        qp, vp = pinocchio_state(
            ctl.pmodel, est.position, quat, est.linear_velocity, est.angular_velocity, state.q, state.dq
        )
        contacts = {side: bool(c) for side, c in zip(("left", "right"), est.contact, strict=False)}
        plan = ctl.take_over(qp, vp, contacts)
        walker._cmd_stamp = -math.inf  # the velocity command in force now applies to it too
        out = self._walker_command(state, t)
        if out is None:  # it cannot command (no estimate yet): the policy keeps the robot
            return self._finish(pol, state)
        self.blend.switch(self._last_out, out, state.q, state.dq)
        self.mode = MODEL
        self._since = t
        self._margin_since = None
        self.handovers.append(
            {
                "t": round(t, 6),
                "to": MODEL,
                "reason": reason,
                "plan": plan,
                "latency_ticks": 0,
                "values": {k: round(v, 4) for k, v in values.items()},
                "duration_s": None,
            }
        )
        self.changes += 1
        return self._finish(out, state, switched=True)

    def _hand_to_policy(self, state: ControllerState, t: float, pol: JointCommand) -> JointCommand | None:
        assert self.blend is not None
        core = self.policy.core
        if core is not None:
            core.last_action = np.zeros_like(core.last_action)
        # the policy's target this tick came from an action of its own it never applied: its next step
        # (from the reset last action) is the first it commands; until then the walking controller's command
        self.blend.switch(self._last_out, pol, state.q, state.dq)
        self.mode = POLICY
        duration = t - self._since
        self._since = t
        self._margin_since = None
        if self.monitor is not None:
            self.monitor.reset()
        if self.handovers and self.handovers[-1]["duration_s"] is None:
            self.handovers[-1]["duration_s"] = round(duration, 6)
        self.handovers.append(
            {"t": round(t, 6), "to": POLICY, "reason": "viable", "latency_ticks": 0, "duration_s": None}
        )
        self.changes += 1
        return self._finish(pol, state, switched=True)

    def _finish(
        self, out: JointCommand | None, state: ControllerState, switched: bool = False
    ) -> JointCommand | None:
        if out is None:
            self._last_out = None
            return None
        assert self.blend is not None
        if self.mode == POLICY:
            self._last_policy = out
        applied = self.blend.apply(out, state.q, state.dq)
        if switched and self.handovers:
            self.handovers[-1]["switch_step"] = round(self.blend.switch_step_at, 4)
        self._last_out = out
        return applied

    # ------------------------------------------------------------------ transparency
    def summary(self) -> dict[str, Any]:
        """Handovers (time, reason, duration) and the shares of time under each controller."""
        total = self.time_policy_s + self.time_model_s
        to_model = [h for h in self.handovers if h["to"] == MODEL]
        return {
            "policy": self.policy.manifest.name if self.policy.manifest is not None else "",
            "handovers": [
                {
                    "t": h["t"],
                    "reason": h["reason"],
                    "duration_s": h["duration_s"],
                    "latency_ticks": h["latency_ticks"],
                    "plan": h.get("plan", ""),
                    "switch_step": h.get("switch_step"),
                }
                for h in to_model
            ],
            "handbacks": sum(1 for h in self.handovers if h["to"] == POLICY),
            "time_policy_s": round(self.time_policy_s, 6),
            "time_model_s": round(self.time_model_s, 6),
            "share_policy": round(self.time_policy_s / total, 6) if total > 0 else 1.0,
            "share_model": round(self.time_model_s / total, 6) if total > 0 else 0.0,
        }

    def supervisor_state(self) -> dict[str, Any]:
        """What ``/supervisor/state`` publishes (JSON): who commands, since when, the last handover with its
        monitor values, and :meth:`summary`."""
        return {
            "in_control": self.mode,
            "since": round(self._since, 6),
            "last": self.handovers[-1] if self.handovers else None,
            **self.summary(),
        }

    def topic_state(self) -> tuple[int, dict[str, Any]]:
        """``/supervisor/state``: a new version at each handover (and the first tick); the state is built
        when the version changes, not every tick (what is published is the state at that change)."""
        if self._state_version != self.changes:
            self._state_version, self._state = self.changes, self.supervisor_state()
        return self._state_version, self._state

    def report(self) -> dict[str, str]:
        s = self.summary()
        return {
            "in_control": self.mode,
            "handovers": str(len(s["handovers"])),
            "time_policy_s": f"{s['time_policy_s']:.2f}",
            "time_model_s": f"{s['time_model_s']:.2f}",
            **{f"policy_{k}": v for k, v in self.policy.report().items()},
            **{f"monitor_{k}": f"{v:.3f}" for k, v in self.last_values.items()},
        }

    def status(self) -> dict[str, Any]:
        return {"in_control": self.mode, "handovers": len(self.summary()["handovers"])}
