"""Policy runner state machine (pure, no rclpy): what a deploy loop does around the network.

States (``RunnerState``), as in real deploy code:

- ``wait_state``: no joint state or IMU sample yet, the driver has not taken the policy's gains, or the
  driver is still ramping: no command.
- ``ramp``: only when the driver is not already holding the default pose: interpolate q* from the measured
  pose to the policy's default pose over ``ramp_s`` seconds with the robot's ``stand`` gains (the driver's
  hold law: a policy's gains may be too soft to hold a pose still, e.g. holosoma's T1 pose under its kp 50
  ankles); the policy's own gains take over with its first step. The driver applies
  one gain set to the runner's commands (:attr:`PolicyRunner.command_gains`), so the ramp's commands carry
  the difference as feed-forward torque: ``tau_ff = (kp_s - kp) (q* - q) - (kd_s - kd) dq``, which makes the
  driver's law exactly ``kp_s (q* - q) - kd_s dq``.
- ``run``: the policy at its rate; between policy steps the latest targets are repeated at the loop rate. When
  the driver holds the default pose (its ``hold`` mode, stiff ``stand`` gains) the runner starts here:
  the first command switches the driver to the policy's gains in the same tick, so the policy starts from the
  pose it was trained to start from instead of a pose sagging under its softer gains.
- ``hold``: after ``stop``: no command; the node asks the driver to ramp back to its ``hold`` (default pose,
  ``stand`` gains). ``start`` resumes ``run`` with a fresh policy state (last action, phase, history).
- ``fault``: stale or non-finite input, or a non-finite action: no more commands. The driver's watchdog then
  damps the joints; the node also calls the driver's e-stop. Latched until :meth:`PolicyRunner.reset`.

Time ``t`` is the stamp of the joint state (s, the driver's clock), so the same logic runs in lockstep and
in realtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from humanoid_policy.policy_core import PolicyCore, PolicyStep


class RunnerState(str, Enum):
    """State of the policy runner."""

    WAIT_STATE = "wait_state"
    RAMP = "ramp"
    RUN = "run"
    HOLD = "hold"
    FAULT = "fault"


@dataclass
class RunnerSettings:
    """Settings of :class:`PolicyRunner`.

    Attributes:
        ramp_s: duration of the ramp to the default pose (s).
        autostart: go from ``ramp`` straight to ``run`` (else to ``hold`` until :meth:`PolicyRunner.start`).
        max_imu_age_s: an IMU sample older than this (relative to the joint state) is stale -> ``fault``.
        command_timeout_s: a velocity command older than this (robot time) is replaced by zero - the robot
            stops walking when its operator goes silent (s; 0 disables).
        command_timeout_action: ``zero`` (walk on with a zero velocity command) or ``hold``: once a command
            has been received since the last start, a silence longer than ``hold_after_s`` (the policy has
            stood still on a zero command since ``command_timeout_s``) stops the policy and the driver holds
            the default pose (``hold_requested``). Under the mode manager, which publishes ``/cmd_vel`` all
            the time, silence means the mode manager is gone. (Handing a walking robot straight to the
            driver's stiff hold tipped it over in the first test of this: it stops walking first.)
        hold_after_s: see ``command_timeout_action`` (s, robot time; at least ``command_timeout_s``).
    """

    ramp_s: float = 1.0
    autostart: bool = True
    max_imu_age_s: float = 0.05
    command_timeout_s: float = 1.0
    command_timeout_action: str = "zero"
    hold_after_s: float = 3.0


@dataclass
class ImuSample:
    """IMU reading: stamp (s), orientation (w, x, y, z; base -> world), angular velocity (rad/s, base)."""

    t: float
    quat_wxyz: np.ndarray
    gyro: np.ndarray


@dataclass
class RunnerOutput:
    """Joint targets (robot order, rad) to send now, or ``None`` to send nothing; ``tau_ff``: feed-forward
    torques to send with them (N m, robot order; None: zeros)."""

    q_target: np.ndarray | None
    policy_step: PolicyStep | None = None
    tau_ff: np.ndarray | None = None


class PolicyRunner:
    """Deploy-loop logic around a :class:`PolicyCore`; call :meth:`update` with every joint state."""

    def __init__(self, core: PolicyCore, settings: RunnerSettings | None = None) -> None:
        self.core = core
        self.settings = settings or RunnerSettings()
        self.period = 1.0 / core.manifest.rate_hz
        self.state = RunnerState.WAIT_STATE
        self.reason = "waiting for joint states and IMU"
        self.gains_ready = False
        self.command = np.zeros(3)
        self.command_t = -np.inf
        self.imu: ImuSample | None = None
        self.target: np.ndarray | None = None
        self.steps = 0
        self.transitions: list[tuple[float, str, str]] = []
        self._ramp_start: np.ndarray | None = None
        self._ramp_t0 = 0.0
        self._next_step_t = 0.0
        self._start_requested = False
        self.hold_requested = False  # set when the runner stopped by itself; the node asks the driver to hold
        #: (kp, kd) the driver applies to this runner's commands (robot order); its owner sets them when it
        #: scales the policy's gains
        self.command_gains: tuple[np.ndarray, np.ndarray] = (core.kp, core.kd)
        stand = core.robot.gain_profile("stand")
        self._ramp_gains = (stand.kp, stand.kd)  # the law of the ramp: the robot's stand gains

    # ------------------------------------------------------------------ inputs
    def set_command(self, command: np.ndarray, t: float) -> None:
        """Operator velocity command ``(vx, vy, wz)`` received at time ``t`` (clipped at use)."""
        self.command = np.asarray(command, dtype=float).copy()
        self.command_t = t

    def set_imu(self, sample: ImuSample) -> bool:
        """A new IMU sample; refused (False) if it has non-finite values."""
        if not (np.all(np.isfinite(sample.quat_wxyz)) and np.all(np.isfinite(sample.gyro))):
            return False
        if abs(np.linalg.norm(sample.quat_wxyz) - 1.0) > 0.1:
            return False
        self.imu = sample
        return True

    def start(self) -> tuple[bool, str]:
        """Run the policy (from ``hold``, or right after the ramp). Fresh policy state."""
        if self.state in (RunnerState.HOLD, RunnerState.WAIT_STATE, RunnerState.RAMP):
            self.command_t = -np.inf  # a command silence counts from the first command after this start
        if self.state == RunnerState.HOLD:
            self._set(RunnerState.WAIT_STATE, "start requested", None)
            self._start_requested = True
            return True, "running the policy once the driver holds the default pose"
        if self.state in (RunnerState.WAIT_STATE, RunnerState.RAMP):
            self._start_requested = True
            return True, "will run the policy after the ramp"
        if self.state == RunnerState.RUN:
            return True, "already running"
        return False, f"refused: runner in fault ({self.reason}); reset first"

    @property
    def start_requested(self) -> bool:
        """A start was requested and the policy has not begun yet."""
        return self._start_requested

    def stop(self) -> tuple[bool, str]:
        """Stop the policy; the driver is to ramp back to its ``hold`` (the node asks it)."""
        if self.state in (RunnerState.RUN, RunnerState.RAMP):
            self._set(RunnerState.HOLD, "stop requested", None)
            self.target = None
            return True, "policy stopped; the driver holds the default pose"
        if self.state == RunnerState.HOLD:
            return True, "already holding"
        self._start_requested = False
        return True, f"not running ({self.state.value})"

    def fault(self, reason: str, t: float | None = None) -> None:
        """Latch ``fault``: no more commands."""
        if self.state != RunnerState.FAULT:
            self._set(RunnerState.FAULT, reason, t)
        self.target = None

    def reset(self) -> None:
        """Leave ``fault``: wait for fresh state, then ramp again."""
        self.core.reset()
        self.imu = None
        self.target = None
        self._set(RunnerState.WAIT_STATE, "reset", None)

    # ------------------------------------------------------------------ per joint state
    def update(self, t: float, q: np.ndarray, dq: np.ndarray, driver_mode: str | None = None) -> RunnerOutput:
        """Advance with a joint state (robot order) stamped ``t``; the targets to send now (or None).

        ``driver_mode`` is the robot driver's latest mode (``ramp``, ``hold``, ``active``,
        ``damping``; None while unknown: the runner waits for it).
        """
        s = self.settings
        if self.state == RunnerState.FAULT:
            return RunnerOutput(None)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(dq))):
            self.fault("non-finite joint state", t)
            return RunnerOutput(None)
        if driver_mode == "damping" and self.state in (RunnerState.RAMP, RunnerState.RUN):
            self.fault("the driver went to damping", t)
            return RunnerOutput(None)
        if self.state == RunnerState.HOLD:
            return RunnerOutput(None)
        if self.state == RunnerState.WAIT_STATE:
            if self.imu is None or not self.gains_ready or driver_mode in (None, "ramp", "damping"):
                return RunnerOutput(None)
            if t - self.imu.t > s.max_imu_age_s:
                return RunnerOutput(None)
            if driver_mode == "hold" and self.core.default_matches_robot:
                if not (s.autostart or self._start_requested):
                    self._set(RunnerState.HOLD, "the driver holds the default pose", t)
                    return RunnerOutput(None)
                self._begin_run("the driver holds the default pose", t)
            else:
                # from the pose the driver holds (its target: no torque step at the hand-over), else measured
                held = driver_mode == "hold"
                self._ramp_start = self.core.robot.array("default") if held else np.asarray(q, dtype=float)
                self._ramp_start = self._ramp_start.copy()
                self._ramp_t0 = t
                self._set(RunnerState.RAMP, "state received", t)
        assert self.imu is not None
        age = t - self.imu.t
        if age > s.max_imu_age_s:
            self.fault(f"stale IMU: last sample {age * 1000:.0f} ms older than the joint state", t)
            return RunnerOutput(None)
        if self.state == RunnerState.RAMP:
            assert self._ramp_start is not None
            alpha = 1.0 if s.ramp_s <= 0 else min(1.0, (t - self._ramp_t0) / s.ramp_s)
            self.target = (1 - alpha) * self._ramp_start + alpha * self.core.default_target
            if alpha < 1.0:
                return RunnerOutput(self.target.copy(), tau_ff=self._ramp_feedforward(q, dq))
            if not (s.autostart or self._start_requested):
                self._set(RunnerState.HOLD, "ramp complete", t)
                return RunnerOutput(None)
            self._begin_run("ramp complete", t)
        # RUN: a policy step when its period has elapsed (tolerance: a tenth of a loop tick)
        if t + 1e-6 < self._next_step_t:
            return RunnerOutput(None if self.target is None else self.target.copy())
        self._next_step_t = (
            t + self.period if t - self._next_step_t > self.period else self._next_step_t + self.period
        )
        command = self.command
        if s.command_timeout_s > 0 and t - self.command_t > s.command_timeout_s:
            silence = t - self.command_t
            if (
                s.command_timeout_action == "hold"
                and np.isfinite(self.command_t)
                and silence > max(s.hold_after_s, s.command_timeout_s)
            ):
                self._set(
                    RunnerState.HOLD,
                    f"no /cmd_vel for {silence:.2f} s: policy stopped, the driver holds",
                    t,
                )
                self.target = None
                self.hold_requested = True
                return RunnerOutput(None)
            command = np.zeros(3)
        step = self.core.step(q, dq, self.imu.gyro, self.imu.quat_wxyz, command)
        self.steps += 1
        if not step.finite:
            bad = int(np.sum(~np.isfinite(step.action)))
            self.fault(f"non-finite policy action ({bad} of {step.action.size} values)", t)
            return RunnerOutput(None, step)
        self.target = step.q_target
        return RunnerOutput(self.target.copy(), step)

    def _ramp_feedforward(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Feed-forward torque (N m) that turns the driver's law with :attr:`command_gains` into the ramp's
        stand law at the target :attr:`target` (zero target velocity)."""
        assert self.target is not None
        (kp, kd), (kp_s, kd_s) = self.command_gains, self._ramp_gains
        return (kp_s - kp) * (self.target - np.asarray(q)) - (kd_s - kd) * np.asarray(dq)

    def _begin_run(self, reason: str, t: float) -> None:
        self.core.reset()
        self._next_step_t = -np.inf
        self._start_requested = False
        self._set(RunnerState.RUN, reason, t)

    def _set(self, state: RunnerState, reason: str, t: float | None) -> None:
        self.state = state
        self.reason = reason
        self.transitions.append((float("nan") if t is None else t, state.value, reason))
        del self.transitions[:-50]
