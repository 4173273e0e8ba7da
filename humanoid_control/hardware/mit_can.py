"""MIT-mode CAN codec, pure functions (Ben Katz motor-controller protocol, also spoken by CubeMars AK motors).

Command frame, 8 bytes, sent to the actuator's CAN id::

    p[15:8] | p[7:0] | v[11:4] | v[3:0] kp[11:8] | kp[7:0] | kd[11:4] | kd[3:0] t[11:8] | t[7:0]

position ``p`` (rad) 16 bits; velocity ``v`` (rad/s), stiffness ``kp`` (N m/rad), damping ``kd``
(N m s/rad) and feed-forward torque ``t`` (N m) 12 bits each. Each value maps linearly from ``[min, max]`` of
the actuator model (:class:`MitRanges`) to ``[0, 2^bits - 1]``. The actuator runs
``t + kp (p - q) + kd (v - dq)`` on board.

Reply frame: ``id | p[15:8] | p[7:0] | v[11:4] | v[3:0] t[11:8] | t[7:0]`` (6 bytes), plus two bytes on AK
actuators (temperature, error code). This module exposes those two bytes raw: their scaling and meaning are
vendor-specific and not part of the facts this project relies on.

Special frames (8 bytes): ``FF FF FF FF FF FF FF FC`` enter motor mode, ``... FD`` exit motor mode, ``... FE``
set the current position as zero (honoured only outside motor mode).

Quantisation: this encoder rounds to the nearest code (error <= half a step); the decoder maps code ``k`` to
``min + k (max - min) / (2^bits - 1)``, so ``encode(decode(frame)) == frame`` for every frame that is not a
special frame. Values outside the
range are clamped to it and the clamped fields are reported (:class:`EncodedCommand`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

P_BITS = 16
V_BITS = 12
KP_BITS = 12
KD_BITS = 12
T_BITS = 12

COMMAND_LENGTH = 8
REPLY_LENGTH = 6
REPLY_LENGTH_EXTENDED = 8  # + temperature and error bytes (AK series)

ENTER_MOTOR_MODE = bytes([0xFF] * 7 + [0xFC])
EXIT_MOTOR_MODE = bytes([0xFF] * 7 + [0xFD])
SET_ZERO = bytes([0xFF] * 7 + [0xFE])
SPECIAL_FRAMES = {ENTER_MOTOR_MODE: "enter", EXIT_MOTOR_MODE: "exit", SET_ZERO: "zero"}


class MitCodecError(ValueError):
    """A frame or value that cannot be encoded or decoded (wrong length, not finite)."""


@dataclass(frozen=True)
class MitRanges:
    """Value ranges of one actuator model (each mapped linearly onto its field's integer codes).

    Attributes:
        p_min, p_max: position (rad). v_min, v_max: velocity (rad/s). kp_min, kp_max: stiffness (N m/rad).
        kd_min, kd_max: damping (N m s/rad). t_min, t_max: torque (N m), feed-forward in commands and measured
        in replies.
    """

    p_min: float
    p_max: float
    v_min: float
    v_max: float
    kp_min: float
    kp_max: float
    kd_min: float
    kd_max: float
    t_min: float
    t_max: float

    def __post_init__(self) -> None:
        for name in ("p", "v", "kp", "kd", "t"):
            lo, hi = getattr(self, f"{name}_min"), getattr(self, f"{name}_max")
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise MitCodecError(f"range of {name} must be finite with min < max: [{lo}, {hi}]")

    def step(self, field: str) -> float:
        """Quantisation step of ``field`` (``p``, ``v``, ``kp``, ``kd``, ``t``) in its unit."""
        bits = {"p": P_BITS, "v": V_BITS, "kp": KP_BITS, "kd": KD_BITS, "t": T_BITS}[field]
        return (getattr(self, f"{field}_max") - getattr(self, f"{field}_min")) / ((1 << bits) - 1)


@dataclass(frozen=True)
class MitCommand:
    """One actuator command in the actuator's own frame: position (rad), velocity (rad/s), kp (N m/rad),
    kd (N m s/rad), feed-forward torque (N m)."""

    position: float = 0.0
    velocity: float = 0.0
    kp: float = 0.0
    kd: float = 0.0
    torque: float = 0.0


@dataclass(frozen=True)
class EncodedCommand:
    """An encoded command frame and the fields that had to be clamped into range (empty when none)."""

    data: bytes
    clamped: tuple[str, ...] = ()


@dataclass(frozen=True)
class MitReply:
    """A decoded reply: the actuator's CAN id, position (rad), velocity (rad/s), torque (N m), and on 8-byte
    replies the raw temperature and error bytes (None on 6-byte replies)."""

    can_id: int
    position: float
    velocity: float
    torque: float
    temperature_raw: int | None = None
    error_raw: int | None = None


def float_to_uint(x: float, lo: float, hi: float, bits: int) -> tuple[int, bool]:
    """Code of ``x`` in ``[lo, hi]`` on ``bits`` bits (nearest), and whether ``x`` had to be clamped.

    Raises :class:`MitCodecError` for NaN (no code means "not a number"; a NaN command is a bug upstream).
    """
    if math.isnan(x):
        raise MitCodecError("cannot encode NaN")
    clamped = x < lo or x > hi
    x = min(max(float(x), lo), hi)
    top = (1 << bits) - 1
    code = round((x - lo) * top / (hi - lo))
    return min(max(code, 0), top), clamped


def uint_to_float(code: int, lo: float, hi: float, bits: int) -> float:
    """Value of ``code`` (0 .. 2^bits - 1) in ``[lo, hi]``."""
    top = (1 << bits) - 1
    if not 0 <= code <= top:
        raise MitCodecError(f"code {code} out of range for {bits} bits")
    return lo + code * (hi - lo) / top


def encode_command(command: MitCommand, ranges: MitRanges) -> EncodedCommand:
    """Command frame (8 bytes) for ``command``; out-of-range fields are clamped and named in the result.

    A saturated command whose bytes would equal a special frame (all fields at their maximum, torque within
    three codes of it) has its velocity lowered by one code so that it is not taken for enter / exit / zero;
    that is reported as ``velocity(special-frame)``.
    """
    p, cp = float_to_uint(command.position, ranges.p_min, ranges.p_max, P_BITS)
    v, cv = float_to_uint(command.velocity, ranges.v_min, ranges.v_max, V_BITS)
    kp, ckp = float_to_uint(command.kp, ranges.kp_min, ranges.kp_max, KP_BITS)
    kd, ckd = float_to_uint(command.kd, ranges.kd_min, ranges.kd_max, KD_BITS)
    t, ct = float_to_uint(command.torque, ranges.t_min, ranges.t_max, T_BITS)
    flags = (("position", cp), ("velocity", cv), ("kp", ckp), ("kd", ckd), ("torque", ct))
    clamped = [name for name, was_clamped in flags if was_clamped]
    data = pack_command_codes(p, v, kp, kd, t)
    if data in SPECIAL_FRAMES:
        data = pack_command_codes(p, v - 1, kp, kd, t)
        clamped.append("velocity(special-frame)")
    return EncodedCommand(data, tuple(clamped))


def pack_command_codes(p: int, v: int, kp: int, kd: int, t: int) -> bytes:
    """Command frame from integer codes (p 16 bits; v, kp, kd, t 12 bits)."""
    return bytes(
        (
            p >> 8,
            p & 0xFF,
            v >> 4,
            ((v & 0xF) << 4) | (kp >> 8),
            kp & 0xFF,
            kd >> 4,
            ((kd & 0xF) << 4) | (t >> 8),
            t & 0xFF,
        )
    )


def unpack_command_codes(data: bytes) -> tuple[int, int, int, int, int]:
    """Integer codes ``(p, v, kp, kd, t)`` of a command frame."""
    if len(data) != COMMAND_LENGTH:
        raise MitCodecError(f"command frame must be {COMMAND_LENGTH} bytes, got {len(data)}")
    p = (data[0] << 8) | data[1]
    v = (data[2] << 4) | (data[3] >> 4)
    kp = ((data[3] & 0xF) << 8) | data[4]
    kd = (data[5] << 4) | (data[6] >> 4)
    t = ((data[6] & 0xF) << 8) | data[7]
    return p, v, kp, kd, t


def decode_command(data: bytes, ranges: MitRanges) -> MitCommand:
    """Command carried by an 8-byte frame (what the actuator firmware decodes). Special frames are not
    commands: check :func:`special_frame` first."""
    p, v, kp, kd, t = unpack_command_codes(data)
    return MitCommand(
        position=uint_to_float(p, ranges.p_min, ranges.p_max, P_BITS),
        velocity=uint_to_float(v, ranges.v_min, ranges.v_max, V_BITS),
        kp=uint_to_float(kp, ranges.kp_min, ranges.kp_max, KP_BITS),
        kd=uint_to_float(kd, ranges.kd_min, ranges.kd_max, KD_BITS),
        torque=uint_to_float(t, ranges.t_min, ranges.t_max, T_BITS),
    )


def special_frame(data: bytes) -> str | None:
    """``enter``, ``exit`` or ``zero`` for the special frames, None for anything else."""
    return SPECIAL_FRAMES.get(bytes(data))


def encode_reply(
    can_id: int,
    position: float,
    velocity: float,
    torque: float,
    ranges: MitRanges,
    extra: tuple[int, int] | None = None,
) -> bytes:
    """Reply frame (what an actuator sends): 6 bytes, or 8 with ``extra`` = (temperature byte, error byte).
    Values beyond the ranges saturate (a reply reports what fits)."""
    if not 0 <= can_id <= 0xFF:
        raise MitCodecError(f"reply carries the CAN id in one byte: {can_id}")
    p, _ = float_to_uint(position, ranges.p_min, ranges.p_max, P_BITS)
    v, _ = float_to_uint(velocity, ranges.v_min, ranges.v_max, V_BITS)
    t, _ = float_to_uint(torque, ranges.t_min, ranges.t_max, T_BITS)
    out = bytes((can_id, p >> 8, p & 0xFF, v >> 4, ((v & 0xF) << 4) | (t >> 8), t & 0xFF))
    if extra is not None:
        temperature, error = extra
        out += bytes((temperature & 0xFF, error & 0xFF))
    return out


def decode_reply(data: bytes, ranges: MitRanges) -> MitReply:
    """Decode a 6- or 8-byte reply frame."""
    if len(data) not in (REPLY_LENGTH, REPLY_LENGTH_EXTENDED):
        raise MitCodecError(f"reply frame must be 6 or 8 bytes, got {len(data)}")
    p = (data[1] << 8) | data[2]
    v = (data[3] << 4) | (data[4] >> 4)
    t = ((data[4] & 0xF) << 8) | data[5]
    extended = len(data) == REPLY_LENGTH_EXTENDED
    return MitReply(
        can_id=data[0],
        position=uint_to_float(p, ranges.p_min, ranges.p_max, P_BITS),
        velocity=uint_to_float(v, ranges.v_min, ranges.v_max, V_BITS),
        torque=uint_to_float(t, ranges.t_min, ranges.t_max, T_BITS),
        temperature_raw=data[6] if extended else None,
        error_raw=data[7] if extended else None,
    )


def damping_command(kd: float, position: float = 0.0) -> MitCommand:
    """The safe command: no stiffness, no feed-forward, damping ``kd`` (N m s/rad) towards zero velocity
    (``position`` is irrelevant at kp = 0; pass the measured one to keep the frame readable)."""
    return MitCommand(position=position, velocity=0.0, kp=0.0, kd=kd, torque=0.0)


__all__ = [
    "ENTER_MOTOR_MODE",
    "EXIT_MOTOR_MODE",
    "SET_ZERO",
    "EncodedCommand",
    "MitCodecError",
    "MitCommand",
    "MitRanges",
    "MitReply",
    "damping_command",
    "decode_command",
    "decode_reply",
    "encode_command",
    "encode_reply",
    "float_to_uint",
    "pack_command_codes",
    "special_frame",
    "uint_to_float",
    "unpack_command_codes",
]
