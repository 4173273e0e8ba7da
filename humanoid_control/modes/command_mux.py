"""The velocity command mux (pure, no rclpy): teleop (``/teleop/cmd_vel`` and the joystick) against autonomy
(``/autonomy/cmd_vel``), with timeouts, a deadman, limits and takeover; the output goes to ``/cmd_vel``.

Velocities are in the heading frame of the robot (x forward, y left; REP-103): ``vx``, ``vy`` in m/s, ``wz``
in rad/s. Times are seconds of the node's clock (simulated time in simulation).

Rules (docs/modes.md):

- A source is *fresh* while its last valid message is at most its timeout old. A stale source, a released
  deadman or nothing at all gives a **published zero**, never silence.
- With autonomy on, a fresh ``/autonomy/cmd_vel`` drives. Teleop wins: a teleop command with a speed above
  ``takeover_threshold`` (or the joystick's deadman pressed) while autonomy is on is a *takeover*: autonomy
  goes off and stays off until it is set again.
- With autonomy off, the joystick drives while its deadman is held, else a fresh ``/teleop/cmd_vel``.
- Inputs with NaN or Inf are refused (counted); values beyond the velocity limits are clipped (counted).
- The output changes by at most the acceleration limits per second, except that a stop (all zero) is applied
  at once: stopping is never delayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from humanoid_control.modes.joy_mapping import JoyCommand


class Source(str, Enum):
    """Who determines the published velocity."""

    TELEOP = "teleop"
    AUTONOMY = "autonomy"
    NONE = "none"  # nothing fresh (or the deadman released): zero


@dataclass
class VelocityLimits:
    """Velocity (m/s, rad/s) and acceleration (m/s^2, rad/s^2) limits of the published command."""

    vx_max: float = 0.8
    vx_min: float = -0.5
    vy_max: float = 0.4
    wz_max: float = 1.0
    ax_max: float = 1.5
    ay_max: float = 1.5
    awz_max: float = 3.0

    def clip(self, v: tuple[float, float, float]) -> tuple[tuple[float, float, float], bool]:
        """``v`` clipped to the velocity limits, and whether anything was clipped."""
        out = (
            min(max(v[0], self.vx_min), self.vx_max),
            min(max(v[1], -self.vy_max), self.vy_max),
            min(max(v[2], -self.wz_max), self.wz_max),
        )
        return out, out != tuple(v)


@dataclass
class MuxSettings:
    """Timeouts (s), takeover threshold (m/s or rad/s, any axis) and limits."""

    teleop_timeout_s: float = 0.5
    autonomy_timeout_s: float = 0.5
    joy_timeout_s: float = 0.5
    takeover_threshold: float = 0.05
    limits: VelocityLimits = field(default_factory=VelocityLimits)


@dataclass
class MuxCounters:
    """Inputs refused (NaN/Inf, malformed joystick messages) and clipped, per source."""

    refused: dict[str, int] = field(default_factory=lambda: {"teleop": 0, "joy": 0, "autonomy": 0})
    clipped: dict[str, int] = field(default_factory=lambda: {"teleop": 0, "joy": 0, "autonomy": 0})
    takeovers: int = 0
    last_refusal: str = ""


@dataclass
class MuxOutput:
    """The velocity to publish now and who determined it."""

    vx: float
    vy: float
    wz: float
    source: Source

    @property
    def velocity(self) -> tuple[float, float, float]:
        """(vx, vy, wz)."""
        return (self.vx, self.vy, self.wz)


@dataclass
class _Input:
    t: float = -math.inf
    v: tuple[float, float, float] = (0.0, 0.0, 0.0)


class CommandMux:
    """Call the input methods as messages arrive and :meth:`update` at the publishing rate."""

    def __init__(self, settings: MuxSettings | None = None) -> None:
        self.settings = settings or MuxSettings()
        self.autonomy = False
        self.counters = MuxCounters()
        self._teleop = _Input()
        self._autonomy = _Input()
        self._joy = _Input()
        self._deadman = False
        self._out = (0.0, 0.0, 0.0)
        self._last_t: float | None = None

    # ------------------------------------------------------------------ inputs
    def _accept(self, name: str, v: tuple[float, float, float]) -> tuple[float, float, float] | None:
        if not all(math.isfinite(x) for x in v):
            self.counters.refused[name] += 1
            self.counters.last_refusal = f"{name}: non-finite velocity {v}"
            return None
        clipped, was = self.settings.limits.clip(v)
        if was:
            self.counters.clipped[name] += 1
        return clipped

    def _active(self, v: tuple[float, float, float]) -> bool:
        return max(abs(x) for x in v) > self.settings.takeover_threshold

    def teleop_twist(self, t: float, vx: float, vy: float, wz: float) -> tuple[bool, bool]:
        """A ``/teleop/cmd_vel`` message at ``t``. Returns (accepted, takeover)."""
        v = self._accept("teleop", (vx, vy, wz))
        if v is None:
            return False, False
        self._teleop = _Input(t, v)
        return True, self._take_over(self._active(v))

    def autonomy_twist(self, t: float, vx: float, vy: float, wz: float) -> bool:
        """A ``/autonomy/cmd_vel`` message at ``t``. Returns accepted."""
        v = self._accept("autonomy", (vx, vy, wz))
        if v is None:
            return False
        self._autonomy = _Input(t, v)
        return True

    def joy(self, t: float, command: JoyCommand | str) -> bool:
        """A joystick message at ``t``, already mapped (:meth:`JoyMapping.map`) or its refusal (a string).
        Returns takeover."""
        if isinstance(command, str):
            self.counters.refused["joy"] += 1
            self.counters.last_refusal = command
            return False
        self._deadman = command.deadman
        if not command.deadman:
            self._joy = _Input(t, (0.0, 0.0, 0.0))
            return False
        v = self._accept("joy", command.velocity)
        if v is None:
            self._deadman = False
            return False
        self._joy = _Input(t, v)
        return self._take_over(True)

    def _take_over(self, active: bool) -> bool:
        if active and self.autonomy:
            self.autonomy = False
            self.counters.takeovers += 1
            return True
        return False

    def set_autonomy(self, on: bool) -> None:
        """Autonomy on (``/autonomy/cmd_vel`` drives while fresh) or off."""
        self.autonomy = bool(on)

    def stop(self) -> None:
        """E-stop: the output is zero from now on, until a source commands again; autonomy off."""
        self.autonomy = False
        self._out = (0.0, 0.0, 0.0)
        self._teleop = _Input()
        self._autonomy = _Input()
        self._joy = _Input()
        self._deadman = False

    # ------------------------------------------------------------------ output
    def select(self, t: float) -> tuple[tuple[float, float, float], Source]:
        """The target velocity at ``t`` before the acceleration limits, and its source."""
        s = self.settings
        if self.autonomy:
            if t - self._autonomy.t <= s.autonomy_timeout_s:
                return self._autonomy.v, Source.AUTONOMY
            return (0.0, 0.0, 0.0), Source.NONE
        if self._deadman and t - self._joy.t <= s.joy_timeout_s:
            return self._joy.v, Source.TELEOP
        if t - self._teleop.t <= s.teleop_timeout_s:
            return self._teleop.v, Source.TELEOP
        return (0.0, 0.0, 0.0), Source.NONE

    def update(self, t: float) -> MuxOutput:
        """The command to publish at ``t`` (call at the publishing rate)."""
        target, source = self.select(t)
        dt = 0.0 if self._last_t is None else max(0.0, t - self._last_t)
        self._last_t = t
        if target == (0.0, 0.0, 0.0):
            out = target  # stopping is never delayed
        else:
            lim = self.settings.limits
            out = tuple(
                o + min(max(g - o, -a * dt), a * dt)
                for o, g, a in zip(self._out, target, (lim.ax_max, lim.ay_max, lim.awz_max), strict=True)
            )
        self._out = (float(out[0]), float(out[1]), float(out[2]))
        return MuxOutput(*self._out, source=source)
