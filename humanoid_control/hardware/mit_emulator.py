"""MIT-mode actuator emulator core: what one actuator's firmware does with the frames it receives.

Pure logic with no bus and no physics: a transport (python-can's virtual bus, see
:mod:`humanoid_control.hardware.can_io`) hands it frames, and a simulator asks it for the torque to apply at
each physics step given the joint's measured position and velocity (actuator frame, output side).

Behaviour (the protocol facts are in :mod:`humanoid_control.hardware.mit_can`):

- starts outside motor mode with zero torque; ``enter`` (``...FC``) enables the motor with an empty command
  (zero torque until the first command frame), ``exit`` (``...FD``) disables it;
- ``zero`` (``...FE``) makes the current position the zero, only outside motor mode;
- command frames are applied only in motor mode; the firmware law is ``t + kp (p - q) + kd (v - dq)``, clamped
  to the model's torque range;
- firmware timeout: ``timeout`` seconds (about 25 ms) after the last command frame the command is zeroed, so
  the torque drops to zero until the next command frame;
- every frame addressed to the actuator is answered with a reply frame (position, velocity, torque).

Assumptions beyond the protocol facts: replies to special frames as to commands; command frames outside motor
mode are ignored; the motor model is ideal torque (saturation plus an optional first-order lag standing in for
the current loop).
"""

from __future__ import annotations

from dataclasses import dataclass

from humanoid_control.hardware.mit_can import (
    COMMAND_LENGTH,
    MitCommand,
    MitRanges,
    decode_command,
    encode_reply,
    special_frame,
)


@dataclass(frozen=True)
class MotorModel:
    """Emulated actuator physics.

    Attributes:
        timeout: firmware command timeout (s); after it the command is zeroed (zero torque).
        torque_time_constant: first-order lag of the produced torque (s); 0: the torque follows at once.
        reply_extended: answer 8-byte replies (with temperature and error bytes, both sent as
            ``temperature_raw`` / 0) instead of 6-byte ones.
        temperature_raw: raw temperature byte sent in extended replies (no unit is assumed).
    """

    timeout: float = 0.025
    torque_time_constant: float = 0.0
    reply_extended: bool = False
    temperature_raw: int = 0


class MitActuatorEmulator:
    """One emulated actuator with CAN id ``can_id`` and value ranges ``ranges``."""

    def __init__(self, can_id: int, ranges: MitRanges, model: MotorModel | None = None) -> None:
        self.can_id = int(can_id)
        self.ranges = ranges
        self.model = model or MotorModel()
        self.motor_mode = False
        self.command: MitCommand | None = None
        self.last_command_time: float | None = None
        self.zero_offset = 0.0  # raw output position that reads as zero (rad)
        self.raw_position = 0.0
        self.velocity = 0.0
        self.torque = 0.0
        self.frames_received = 0
        self.timeouts = 0

    # ------------------------------------------------------------------ bus side
    @property
    def position(self) -> float:
        """Position the actuator reports (rad): the raw output position minus the zero offset."""
        return self.raw_position - self.zero_offset

    def receive(self, data: bytes, now: float) -> bytes | None:
        """Handle a frame addressed to this actuator at time ``now`` (s); the reply frame, or None for a frame
        of the wrong length (ignored, as a firmware ignores it)."""
        data = bytes(data)
        if len(data) != COMMAND_LENGTH:
            return None
        self.frames_received += 1
        kind = special_frame(data)
        if kind == "enter":
            self.motor_mode = True
            self.command = None
        elif kind == "exit":
            self.motor_mode = False
            self.command = None
        elif kind == "zero":
            if not self.motor_mode:
                self.zero_offset = self.raw_position
        elif self.motor_mode:
            self.command = decode_command(data, self.ranges)
            self.last_command_time = float(now)
        return self.reply()

    def reply(self) -> bytes:
        """Reply frame with the current position, velocity and torque."""
        extra = (self.model.temperature_raw, 0) if self.model.reply_extended else None
        return encode_reply(self.can_id, self.position, self.velocity, self.torque, self.ranges, extra)

    # ------------------------------------------------------------------ physics side
    def timed_out(self, now: float) -> bool:
        """The firmware timeout has elapsed since the last command frame."""
        return self.last_command_time is not None and float(now) - self.last_command_time > self.model.timeout

    def update(self, raw_position: float, velocity: float, now: float, dt: float = 0.0) -> float:
        """Set the measured output position (rad, before the zero offset) and velocity (rad/s) at ``now`` (s)
        and return the torque the actuator produces (N m); ``dt`` (s) drives the optional torque lag."""
        self.raw_position = float(raw_position)
        self.velocity = float(velocity)
        if self.command is not None and self.timed_out(now):
            self.command = None  # the firmware zeroes its command
            self.timeouts += 1
        target = 0.0
        if self.motor_mode and self.command is not None:
            c = self.command
            target = c.torque + c.kp * (c.position - self.position) + c.kd * (c.velocity - self.velocity)
            target = min(max(target, self.ranges.t_min), self.ranges.t_max)
        tc = self.model.torque_time_constant
        if tc > 0.0 and dt > 0.0:
            self.torque += (target - self.torque) * min(1.0, dt / tc)
        else:
            self.torque = target
        if not self.motor_mode:
            self.torque = 0.0
        return self.torque


class MitBusEmulator:
    """Actuators sharing one bus, addressed by CAN id; replies go out with arbitration id ``host_id``."""

    def __init__(self, actuators: list[MitActuatorEmulator], host_id: int = 0) -> None:
        self.actuators = {a.can_id: a for a in actuators}
        if len(self.actuators) != len(actuators):
            raise ValueError("two emulated actuators share a CAN id")
        self.host_id = int(host_id)
        self.silenced: set[int] = set()  # ids that receive but never answer (tests of a silent actuator)

    def handle(self, arbitration_id: int, data: bytes, now: float) -> list[tuple[int, bytes]]:
        """Deliver one frame; the ``(arbitration_id, data)`` frames sent back (none for unknown ids)."""
        actuator = self.actuators.get(int(arbitration_id))
        if actuator is None:
            return []
        reply = actuator.receive(data, now)
        if reply is None or actuator.can_id in self.silenced:
            return []
        return [(self.host_id, reply)]


__all__ = ["MitActuatorEmulator", "MitBusEmulator", "MotorModel"]
