"""Robot-driver core: command validation, the safety state machine and the joint-level command, without rclpy.

Each tick the driver turns the latest accepted command into a low-level command for the backend::

    tau = kp (q* - q) + kd (dq* - dq) + tau_ff        (per joint, N m, clamped to the effort limit)

Modes (``DriverMode``):

- ``ramp``: boot (or reset) - interpolate q* from the pose at the start of the ramp to the default standing
  pose over ``ramp_duration`` seconds with the ``stand`` gains; then ``hold``. Commands are ignored.
- ``hold``: q* = default pose, ``stand`` gains. A valid command switches to ``active`` (after
  ``activation_ticks`` consecutive ticks with valid commands, if set: a handshake), unless
  ``activation_block`` holds a reason (a hardware backend's motors do not follow): then it is refused with it.
- ``active``: q*, dq*, tau_ff from the latest command (clamped to the limits) with the command gain profile.
  A command older than ``watchdog_ticks`` ticks puts the driver in ``damping``.
- ``damping``: kp = 0, tau_ff = 0, dq* = 0, kd of the profile in use kept: tau = -kd dq. Latched (e-stop,
  watchdog, fault) until :meth:`DriverCore.reset`, which starts a ramp back to the default pose.

Besides the mode, :attr:`DriverCore.down` says whether the robot is down: set when the base tilt exceeds
``fall_tilt`` (the same tick the fall detection damps), cleared once it is back below ``fall_tilt`` less
:data:`UPRIGHT_MARGIN` (put upright by hand, or respawned in a simulator); the node publishes it on
``~/down``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from humanoid_control.hardware.types import LowLevelCommand
from humanoid_control.model.robot_config import GainProfile, RobotConfig


class DriverMode(str, Enum):
    """Safety state of the driver."""

    RAMP = "ramp"
    HOLD = "hold"
    ACTIVE = "active"
    DAMPING = "damping"


class CommandError(ValueError):
    """A joint command was refused; the message says why."""


@dataclass
class JointCommand:
    """A validated command in configuration joint order.

    Attributes:
        q: target positions q* (rad). dq: target velocities dq* (rad/s). tau_ff: feed-forward torques (N m).
        stamp: time stamp of the command (s, the clock of the driver's state messages).
    """

    q: np.ndarray
    dq: np.ndarray
    tau_ff: np.ndarray
    stamp: float = 0.0


#: hysteresis of :attr:`DriverCore.down`: up again below ``fall_tilt`` less this (rad; at most half of it)
UPRIGHT_MARGIN = math.radians(10.0)


@dataclass
class DriverSettings:
    """Tunable settings of the driver core.

    Attributes:
        rate_hz: loop rate (Hz); one tick lasts ``1 / rate_hz`` seconds.
        watchdog_ticks: a command older than this many ticks (in ``active``) triggers damping.
        ramp_duration: boot/reset ramp to the default pose (s).
        command_profile: gain profile applied to commands in ``active``.
        fall_tilt: base tilt from upright (rad) beyond which the driver goes to damping; 0 disables.
        activation_ticks: in ``hold``, a controller takes over only after its valid commands have streamed
            for this many ticks without a gap of more than 5 ticks (a handshake: the stream must be steady
            before it gets the robot); 1 = at once.
        switch_max_step: bumpless switching (fraction of each joint's effort limit; 0 = off): when the law
            changes (hold -> active, active -> ramp, damping -> ramp), the torque the old law would apply at
            the measured state is kept as a feed-forward offset that decays to zero in as many ticks as it
            takes to change no joint's torque by more than half this fraction per tick (at most 1 s; the
            other half is left to the new controller's own changes). Entering damping is never blended (a
            safety stop acts at once).
    """

    rate_hz: float = 500.0
    watchdog_ticks: int = 50
    activation_ticks: int = 1
    ramp_duration: float = 2.0
    command_profile: str = "stand"
    fall_tilt: float = math.radians(60.0)
    switch_max_step: float = 0.0


@dataclass
class SwitchRecord:
    """A change of the law that commands the joints (``hold`` -> ``active``: a controller takes over;
    ``active`` -> ``ramp``: it hands back; ``damping`` -> ``ramp``: reset), with its torque steps.

    Steps are fractions of each joint's effort limit, the largest over the joints: ``unblended_step`` is the
    step the switch would have made (old law minus new law at the measured state of the switch tick);
    ``step_at_switch`` the applied torque's change from the tick before the switch to the switch tick;
    ``max_step`` the largest change from one tick to the next from the tick before the switch to the end of
    the blend (this includes the new controller's own changes).

    Attributes:
        tick: the switch tick. old, new: the laws (driver modes). blend_ticks: ticks of the blend (0: none).
        unblended_joint, step_joint, max_step_joint: the joints of those steps. done: the blend has ended.
    """

    tick: int
    old: str
    new: str
    unblended_step: float
    unblended_joint: str
    blend_ticks: int
    step_at_switch: float = 0.0
    step_joint: str = ""
    max_step: float = 0.0
    max_step_joint: str = ""
    done: bool = False
    t: float = math.nan  # stamp of the switch tick (s), set by the node
    published: bool = False  # (the node's bookkeeping)


@dataclass
class DriverCounters:
    """Counts published on /diagnostics."""

    commands_accepted: int = 0
    commands_refused: int = 0
    commands_ignored: int = 0
    clamped_targets: int = 0
    watchdog_trips: int = 0
    max_command_gap_ticks: int = 0
    estops: int = 0
    faults: int = 0
    last_refusal: str = ""
    history: list[tuple[int, str, str]] = field(default_factory=list)


def validate_gains(config: RobotConfig, kp: object, kd: object) -> tuple[np.ndarray, np.ndarray]:
    """Per-joint gains (configuration order) as arrays.

    Raises:
        ValueError: wrong length, non-finite or negative values, or values above the robot's
            ``gain_limits``.
    """
    n = config.num_joints
    out = []
    for label, values in (("kp", kp), ("kd", kd)):
        arr = np.asarray(values, dtype=float)
        if arr.shape != (n,):
            raise ValueError(f"{label} has {arr.size} values; the robot has {n} joints")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"{label} must be finite and non-negative")
        out.append(arr)
    beyond = config.gain_limit_violations(out[0], out[1])
    if beyond:
        raise ValueError(f"gains beyond the robot's limits: {'; '.join(beyond)}")
    return out[0], out[1]


def validate_command(
    config: RobotConfig,
    names: list[str],
    position: list[float] | np.ndarray,
    velocity: list[float] | np.ndarray,
    effort: list[float] | np.ndarray,
    stamp: float = 0.0,
) -> JointCommand:
    """Check a ``sensor_msgs/JointState``-shaped command and reorder it into configuration joint order.

    Rules: ``names`` lists every configured joint exactly once (any order); each of ``position`` (q*, rad),
    ``velocity`` (dq*, rad/s), ``effort`` (tau_ff, N m) is empty (meaning zeros) or has one value per name;
    every value is finite.

    Raises:
        CommandError: with the reason (unknown/missing/duplicate joints, wrong length, NaN/Inf).
    """
    joint_names = config.joint_names
    index = {n: i for i, n in enumerate(joint_names)}
    names = list(names)
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise CommandError(f"duplicate joint names {dupes}")
    unknown = [n for n in names if n not in index]
    if unknown:
        raise CommandError(f"unknown joint names {unknown}")
    missing = [n for n in joint_names if n not in set(names)]
    if missing:
        raise CommandError(f"missing joints {missing} (a command names all {len(joint_names)} joints)")
    order = np.array([index[n] for n in names])
    out = []
    for label, values in (("position", position), ("velocity", velocity), ("effort", effort)):
        arr = np.asarray(values, dtype=float)
        full = np.zeros(len(joint_names))
        if arr.size:
            if arr.shape != (len(names),):
                raise CommandError(f"wrong length: {label} has {arr.size} values for {len(names)} names")
            bad = ~np.isfinite(arr)
            if bad.any():
                raise CommandError(f"non-finite {label} for joints {[names[i] for i in np.flatnonzero(bad)]}")
            full[order] = arr
        out.append(full)
    if not math.isfinite(stamp):
        raise CommandError("non-finite stamp")
    return JointCommand(q=out[0], dq=out[1], tau_ff=out[2], stamp=stamp)


class DriverCore:
    """Safety state machine and command law of the robot driver (pure: no rclpy, no backend).

    Call :meth:`submit` when a command arrives and :meth:`update` once per tick with the measured state.
    Time is counted in ticks, so the same logic runs on wall clock and on simulated (lockstep) time.
    """

    def __init__(self, config: RobotConfig, settings: DriverSettings) -> None:
        self.config = config
        self.settings = settings
        self.lower = config.array("lower")
        self.upper = config.array("upper")
        self.velocity_limit = config.array("velocity")
        self.effort = config.array("effort")
        self.default = config.array("default")
        self.stand = config.gain_profile("stand")
        self.command_profile: GainProfile = config.gain_profile(settings.command_profile)
        self.counters = DriverCounters()
        self.mode = DriverMode.RAMP
        self.mode_reason = "boot"
        self.mode_entered_tick = 0
        self.tick = 0
        self.last_command: JointCommand | None = None
        self.last_command_tick = -1
        self._ramp_start: np.ndarray | None = None
        self._ramp_start_tick = 0
        self._ramp_ticks: int | None = None  # this ramp's length when not ramp_duration (respawn)
        self._damping_kd = self.stand.kd
        self._streak = 0
        self._streak_tick = -(10**9)
        self.switches: list[SwitchRecord] = []
        self._prev_law: DriverMode | None = None
        self._prev_cmd: LowLevelCommand | None = None
        self._prev_tau: np.ndarray | None = None
        self._blend_offset: np.ndarray | None = None
        self._blend_ticks = 0
        self._blend_k = 0
        self._open_switch: SwitchRecord | None = None
        #: set by the node from the backend (e.g. motors that do not follow): while set, commands in ``hold``
        #: are refused with this reason (no controller takes the robot)
        self.activation_block: str = ""
        #: the robot is down (see the module docstring) and the base tilt (rad) of the last tick
        self.down = False
        self.tilt = 0.0

    # ----------------------------------------------------------------- inputs
    def set_command_profile(self, name: str) -> None:
        """Select the gain profile applied to commands (raises ConfigError if unknown)."""
        self.command_profile = self.config.gain_profile(name)
        self.settings.command_profile = name

    def set_command_gains(self, kp: np.ndarray, kd: np.ndarray, name: str = "custom") -> None:
        """Use explicit per-joint gains (configuration order) for commands, e.g. a learned policy's PD gains.

        Raises:
            ValueError: wrong length, non-finite or negative values.
        """
        kp, kd = validate_gains(self.config, kp, kd)
        self.command_profile = GainProfile(name=name, kp=kp.copy(), kd=kd.copy())
        self.settings.command_profile = name

    def submit(self, command: JointCommand) -> bool:
        """Offer a validated command. Returns True if it is now the command in force.

        Ignored (False) during ``ramp`` and ``damping``; in ``hold`` it switches the driver to ``active``.
        """
        if self.mode in (DriverMode.RAMP, DriverMode.DAMPING):
            self.counters.commands_ignored += 1
            return False
        if self.mode == DriverMode.HOLD and self.activation_block:
            self.refuse(f"not going active: {self.activation_block}")
            return False
        if self.mode == DriverMode.HOLD and self.settings.activation_ticks > 1:
            if self.tick != self._streak_tick:  # count ticks; a gap of more than 5 ticks restarts the count
                gap = self.tick - self._streak_tick
                self._streak = self._streak + gap if gap <= 5 else 1
                self._streak_tick = self.tick
            if self._streak < self.settings.activation_ticks:
                self.counters.commands_ignored += 1
                return False
        clamped = np.clip(command.q, self.lower, self.upper)
        if np.any(clamped != command.q):
            self.counters.clamped_targets += 1
        command = JointCommand(
            q=clamped,
            dq=np.clip(command.dq, -self.velocity_limit, self.velocity_limit),
            tau_ff=np.clip(command.tau_ff, -self.effort, self.effort),
            stamp=command.stamp,
        )
        self.last_command = command
        self.last_command_tick = self.tick
        self.counters.commands_accepted += 1
        if self.mode == DriverMode.HOLD:
            self._enter(DriverMode.ACTIVE, "command stream started")
        return True

    def refuse(self, reason: str) -> None:
        """Record a refused command (validation failed)."""
        self.counters.commands_refused += 1
        self.counters.last_refusal = reason

    def estop(self, reason: str = "e-stop") -> None:
        """Latch damping until :meth:`reset`."""
        self.counters.estops += 1
        self._enter(DriverMode.DAMPING, reason)

    def fault(self, reason: str) -> None:
        """A safety fault (non-finite state, fall): latch damping until :meth:`reset`."""
        if self.mode != DriverMode.DAMPING:
            self.counters.faults += 1
            self._enter(DriverMode.DAMPING, reason)

    def hold(self, q_measured: np.ndarray | None = None) -> tuple[bool, str]:
        """Controller hand-back: ramp from the measured pose to the default pose (``stand`` gains), then hold.

        Refused in ``damping`` (that needs :meth:`reset`).
        """
        if self.mode == DriverMode.DAMPING:
            return False, f"refused: damping ({self.mode_reason}); call reset"
        if self.mode == DriverMode.RAMP:
            return True, "already ramping to the default pose"
        self.last_command = None
        self._ramp_ticks = None
        self._ramp_start = None if q_measured is None else np.array(q_measured, dtype=float)
        self._enter(DriverMode.RAMP, "hold requested")
        return True, "ramping to the default pose, then hold"

    def reset(self, q_measured: np.ndarray | None = None) -> None:
        """Leave damping (or restart): ramp from the measured pose to the default pose, then hold."""
        self.last_command = None
        self._ramp_ticks = None
        self._ramp_start = None if q_measured is None else np.array(q_measured, dtype=float)
        self._enter(DriverMode.RAMP, "reset")

    def respawned(self, settle_s: float) -> None:
        """The simulator put the robot back in the default pose at rest (an evaluation's reset between trials,
        never a real robot): ``ramp`` from the default pose to itself for ``settle_s`` seconds (stand gains,
        commands ignored but still pacing lockstep, so estimators can be reset meanwhile), then ``hold``.

        Leaves any mode, damping included.
        """
        self.last_command = None
        self._ramp_start = self.default.copy()
        self._ramp_ticks = max(1, round(settle_s * self.settings.rate_hz))
        self._enter(DriverMode.RAMP, "respawned")

    # ----------------------------------------------------------------- per tick
    def update(self, q: np.ndarray, dq: np.ndarray, base_tilt: float = 0.0) -> LowLevelCommand:
        """Advance one tick with the measured joint state; returns the command to apply until the next tick.

        Args:
            q, dq: measured joint positions (rad) and velocities (rad/s), configuration order.
            base_tilt: angle between the base z axis and the world z axis (rad), from the IMU orientation.
        """
        finite = bool(np.isfinite(q).all() and np.isfinite(dq).all())
        self._update_down(base_tilt)
        if not (finite and math.isfinite(base_tilt)):
            self.fault("non-finite joint state or IMU")
        elif (
            self.settings.fall_tilt > 0
            and base_tilt > self.settings.fall_tilt
            and self.mode != DriverMode.DAMPING
        ):
            self.fault(f"fall detected: base tilt {math.degrees(base_tilt):.0f} deg")
        if self.mode == DriverMode.ACTIVE:
            gap = self.tick - self.last_command_tick
            self.counters.max_command_gap_ticks = max(self.counters.max_command_gap_ticks, gap)
        if (
            self.mode == DriverMode.ACTIVE
            and self.tick - self.last_command_tick > self.settings.watchdog_ticks
        ):
            self.counters.watchdog_trips += 1
            self._enter(
                DriverMode.DAMPING,
                f"watchdog: no command for {self.tick - self.last_command_tick} ticks "
                f"(limit {self.settings.watchdog_ticks})",
            )
        if not finite:
            q, dq = np.nan_to_num(q), np.nan_to_num(dq)
        law = self.mode if (self.mode != DriverMode.ACTIVE or self.last_command is not None) else None
        cmd = self._switch(law or DriverMode.DAMPING, self._command(q, dq), q, dq)
        self.tick += 1
        return cmd

    def _update_down(self, base_tilt: float) -> None:
        """:attr:`down` from this tick's base tilt (rad), with hysteresis; never down while ``fall_tilt`` is 0
        (fall detection off) or the tilt is not finite (a fault of its own)."""
        fall = self.settings.fall_tilt
        if not math.isfinite(base_tilt):
            return
        self.tilt = base_tilt
        if fall <= 0:
            self.down = False
        elif base_tilt > fall:
            self.down = True
        elif base_tilt < fall - min(UPRIGHT_MARGIN, 0.5 * fall):
            self.down = False

    # ----------------------------------------------------------------- switching
    @staticmethod
    def _raw_torque(cmd: LowLevelCommand, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """``kp (q* - q) + kd (dq* - dq) + tau_ff`` before the effort clamp (N m)."""
        return cmd.kp * (cmd.q - q) + cmd.kd * (cmd.dq - dq) + cmd.tau_ff

    def _switch(
        self, law: DriverMode, cmd: LowLevelCommand, q: np.ndarray, dq: np.ndarray
    ) -> LowLevelCommand:
        """Detect a change of law, blend it (``switch_max_step``) and measure its torque steps."""
        prev_law, prev_cmd = self._prev_law, self._prev_cmd
        if (
            prev_law is not None
            and prev_cmd is not None
            and law != prev_law
            and law != DriverMode.DAMPING
            and not (prev_law == DriverMode.RAMP and law == DriverMode.HOLD)  # a ramp ends where hold starts
        ):
            offset = self._raw_torque(prev_cmd, q, dq) - self._raw_torque(cmd, q, dq)
            ratio = np.abs(offset) / self.effort  # unclamped: the blend moves the unclamped torque
            j = int(np.argmax(ratio))
            bound = self.settings.switch_max_step
            longest = max(1, round(self.settings.rate_hz))  # at most 1 s
            # the blend moves at most half the bound per tick: the other half is left to the new
            # controller's own changes (a policy's next target), so that the applied torque stays within it
            n = min(longest, max(1, math.ceil(float(ratio[j]) / (0.5 * bound) - 1e-9))) if bound > 0 else 0
            self._blend_offset, self._blend_ticks, self._blend_k = (offset, n, 0) if n else (None, 0, 0)
            if self._open_switch is not None:
                self._open_switch.done = True
            self._open_switch = SwitchRecord(
                self.tick, prev_law.value, law.value, float(ratio[j]), self.config.joint_names[j], n
            )
            self.switches.append(self._open_switch)
            del self.switches[:-50]
        if law == DriverMode.DAMPING:
            self._blend_offset = None
        if self._blend_offset is not None:
            weight = 1.0 - self._blend_k / self._blend_ticks
            cmd = LowLevelCommand(cmd.q, cmd.dq, cmd.kp, cmd.kd, cmd.tau_ff + weight * self._blend_offset)
            self._blend_k += 1
            if self._blend_k >= self._blend_ticks:
                self._blend_offset = None
        tau = cmd.torque(q, dq, self.effort)
        rec = self._open_switch
        if rec is not None and self._prev_tau is not None:
            step = np.abs(tau - self._prev_tau) / self.effort
            j = int(np.argmax(step))
            if rec.tick == self.tick:
                rec.step_at_switch, rec.step_joint = float(step[j]), self.config.joint_names[j]
            if step[j] >= rec.max_step:
                rec.max_step, rec.max_step_joint = float(step[j]), self.config.joint_names[j]
            if self.tick >= rec.tick + max(rec.blend_ticks, 1) or law == DriverMode.DAMPING:
                rec.done = True
                self._open_switch = None
        self._prev_law, self._prev_cmd, self._prev_tau = law, cmd, tau
        return cmd

    def _command(self, q: np.ndarray, dq: np.ndarray) -> LowLevelCommand:
        zeros = np.zeros_like(self.default)
        if self.mode == DriverMode.RAMP:
            if self._ramp_start is None:
                self._ramp_start = q.copy()
                self._ramp_start_tick = self.tick
            n = self._ramp_ticks or max(1, round(self.settings.ramp_duration * self.settings.rate_hz))
            alpha = min(1.0, (self.tick - self._ramp_start_tick) / n)
            target = (1 - alpha) * self._ramp_start + alpha * self.default
            if alpha >= 1.0:
                self._ramp_ticks = None
                self._enter(DriverMode.HOLD, "ramp complete")
            return LowLevelCommand(target, zeros, self.stand.kp, self.stand.kd, zeros)
        if self.mode == DriverMode.HOLD:
            return LowLevelCommand(self.default.copy(), zeros, self.stand.kp, self.stand.kd, zeros)
        if self.mode == DriverMode.ACTIVE and self.last_command is not None:
            c = self.last_command
            return LowLevelCommand(c.q, c.dq, self.command_profile.kp, self.command_profile.kd, c.tau_ff)
        return LowLevelCommand(q.copy(), zeros, zeros, self._damping_kd, zeros)

    def _enter(self, mode: DriverMode, reason: str) -> None:
        if mode == DriverMode.DAMPING:
            # keep the kd of the profile that was in use
            self._damping_kd = self.command_profile.kd if self.mode == DriverMode.ACTIVE else self.stand.kd
        if mode == DriverMode.RAMP:
            self._ramp_start_tick = self.tick
        self.mode = mode
        self.mode_reason = reason
        self.mode_entered_tick = self.tick
        self.counters.history.append((self.tick, mode.value, reason))
        del self.counters.history[:-20]
