"""Unitree ``unitree_hg`` low-level messages (G1, H1-2): C-struct layouts, message CRC, the remote's bytes.

The robot checks a CRC-32 carried in the last word of ``LowCmd_`` and drops commands whose CRC is wrong; it
fills the same field of ``LowState_``. The CRC is not computed over the DDS (CDR) serialisation but over the
message laid out as the SDK's C struct: little-endian, every field aligned to its size, padding bytes zero.

CRC: CRC-32 with polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no reflection, no final XOR, fed with the
struct's 32-bit words most significant bit first, over every word but the last (the CRC itself): 250 words of
the 1004-byte ``LowCmd_``, 522 of the 2092-byte ``LowState_``. Fed with each word's big-endian bytes this is
the catalogued CRC-32/MPEG-2, which :func:`crc32_words` computes through :func:`zlib.crc32` (reflected CRC-32)
on bit-reversed bytes; :func:`crc32_words_bitwise` is the word-by-word definition, kept as the reference.

Layouts (offsets in bytes). ``LowCmd_``: ``mode_pr`` u8 @0, ``mode_machine`` u8 @1, ``motor_cmd[35]`` @4 of 28
bytes each {``mode`` u8 @0, ``q``, ``dq``, ``tau``, ``kp``, ``kd`` f32 @4..20, ``reserve`` u32 @24},
``reserve`` u32[4] @984, ``crc`` u32 @1000. ``LowState_``: ``version`` u32[2] @0, ``mode_pr`` @8,
``mode_machine`` @9, ``tick`` u32 @12, ``imu_state`` @16 {quaternion (w x y z) f32[4], gyroscope f32[3],
accelerometer f32[3], rpy f32[3], temperature i16} of 56 bytes, ``motor_state[35]`` @72 of 56 bytes each
{``mode`` u8, ``q``, ``dq``, ``ddq``, ``tau_est`` f32 @4..16, ``temperature`` i16[2] @20, ``vol`` f32 @24,
``sensor`` u32[2] @28, ``motorstate`` u32 @36, ``reserve`` u32[4] @40}, ``wireless_remote`` u8[40] @2032,
``reserve`` u32[4] @2072, ``crc`` u32 @2088. The ``LowCmd_`` field list and the CRC are in the project's
REFERENCES; the ``LowState_`` field types and both alignments follow the SDK's struct layout (checked against
the SDK's own CRC by ``test/test_unitree_hg.py`` when the SDK is installed).

Units: q (rad), dq (rad/s), ddq (rad/s^2), tau (N m), kp (N m/rad), kd (N m s/rad), gyroscope (rad/s),
accelerometer (m/s^2), rpy (rad).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

NUM_MOTOR_SLOTS = 35
CRC_POLYNOMIAL = 0x04C11DB7


def _struct(fields: list[tuple[str, object, int]], itemsize: int) -> np.dtype:
    """Structured dtype from ``(name, format, byte offset)`` entries (C layout: padding between fields)."""
    return np.dtype(
        {
            "names": [f[0] for f in fields],
            "formats": [f[1] for f in fields],
            "offsets": [f[2] for f in fields],
            "itemsize": itemsize,
        }
    )


F32, U32, N = "<f4", "<u4", NUM_MOTOR_SLOTS
MOTOR_CMD_DTYPE = _struct(
    [("mode", "u1", 0), ("q", F32, 4), ("dq", F32, 8), ("tau", F32, 12), ("kp", F32, 16), ("kd", F32, 20),
     ("reserve", U32, 24)],
    28,
)  # fmt: skip
LOWCMD_DTYPE = _struct(
    [("mode_pr", "u1", 0), ("mode_machine", "u1", 1), ("motor_cmd", (MOTOR_CMD_DTYPE, (N,)), 4),
     ("reserve", (U32, (4,)), 984), ("crc", U32, 1000)],
    1004,
)  # fmt: skip
IMU_STATE_DTYPE = _struct(
    [("quaternion", (F32, (4,)), 0), ("gyroscope", (F32, (3,)), 16), ("accelerometer", (F32, (3,)), 28),
     ("rpy", (F32, (3,)), 40), ("temperature", "<i2", 52)],
    56,
)  # fmt: skip
MOTOR_STATE_DTYPE = _struct(
    [("mode", "u1", 0), ("q", F32, 4), ("dq", F32, 8), ("ddq", F32, 12), ("tau_est", F32, 16),
     ("temperature", ("<i2", (2,)), 20), ("vol", F32, 24), ("sensor", (U32, (2,)), 28),
     ("motorstate", U32, 36), ("reserve", (U32, (4,)), 40)],
    56,
)  # fmt: skip
LOWSTATE_DTYPE = _struct(
    [("version", (U32, (2,)), 0), ("mode_pr", "u1", 8), ("mode_machine", "u1", 9), ("tick", U32, 12),
     ("imu_state", IMU_STATE_DTYPE, 16), ("motor_state", (MOTOR_STATE_DTYPE, (N,)), 72),
     ("wireless_remote", ("u1", (40,)), 2032), ("reserve", (U32, (4,)), 2072), ("crc", U32, 2088)],
    2092,
)  # fmt: skip
LOWCMD_SIZE = LOWCMD_DTYPE.itemsize
LOWSTATE_SIZE = LOWSTATE_DTYPE.itemsize

_BIT_REVERSED_BYTES = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


class UnitreeMessageError(ValueError):
    """A buffer that is not a message of the expected layout."""


# ------------------------------------------------------------------------------------------------------ CRC
def crc32_words_bitwise(words: np.ndarray | list[int]) -> int:
    """CRC of 32-bit ``words`` by its definition, one bit at a time (slow; the reference for tests)."""
    crc = 0xFFFFFFFF
    for word in (int(w) for w in words):
        for bit in range(31, -1, -1):
            top = (crc >> 31) ^ ((word >> bit) & 1)
            crc = (crc << 1) & 0xFFFFFFFF
            if top:
                crc ^= CRC_POLYNOMIAL
    return crc


def crc32_mpeg2(data: bytes) -> int:
    """CRC-32/MPEG-2 of a byte string (poly 0x04C11DB7, init 0xFFFFFFFF, unreflected, no final XOR)."""
    reflected = zlib.crc32(bytes(data).translate(_BIT_REVERSED_BYTES))
    return int(f"{reflected:032b}"[::-1], 2) ^ 0xFFFFFFFF


def crc32_words(words: np.ndarray) -> int:
    """CRC of 32-bit ``words`` as the robot computes it (fast path of :func:`crc32_words_bitwise`)."""
    return crc32_mpeg2(np.asarray(words, dtype="<u4").astype(">u4").tobytes())


def message_crc(buffer: bytes) -> int:
    """CRC of a message buffer laid out as its C struct: over all its little-endian words but the last."""
    if len(buffer) % 4 or len(buffer) < 8:
        raise UnitreeMessageError(f"message length {len(buffer)} is not a whole number of words (>= 2)")
    return crc32_words(np.frombuffer(buffer, dtype="<u4")[:-1])


def seal(buffer: bytes) -> bytes:
    """``buffer`` with its last word set to its CRC."""
    return bytes(buffer[:-4]) + int(message_crc(buffer)).to_bytes(4, "little")


def crc_ok(buffer: bytes) -> bool:
    """The last word of ``buffer`` holds its CRC."""
    return int.from_bytes(bytes(buffer[-4:]), "little") == message_crc(buffer)


# ------------------------------------------------------------------------------------------------- messages
def new_lowcmd() -> np.ndarray:
    """A zeroed ``LowCmd_`` record (numpy structured scalar array; fields as in the module docstring)."""
    return np.zeros((), dtype=LOWCMD_DTYPE)


def new_lowstate() -> np.ndarray:
    """A zeroed ``LowState_`` record."""
    return np.zeros((), dtype=LOWSTATE_DTYPE)


def to_bytes(record: np.ndarray, sealed: bool = True) -> bytes:
    """C-layout bytes of a ``LowCmd_`` or ``LowState_`` record, padding bytes zeroed (numpy does not keep the
    padding of a copied record), with the CRC written when ``sealed``."""
    record = np.asarray(record)
    data = np.frombuffer(record.tobytes(), dtype=np.uint8).copy()
    data[_padding(record.dtype)] = 0
    return seal(data.tobytes()) if sealed else data.tobytes()


_PADDING: dict[np.dtype, np.ndarray] = {}


def _padding(dtype: np.dtype) -> np.ndarray:
    """Boolean mask of the bytes of ``dtype`` that belong to no field."""
    if dtype not in _PADDING:
        used = np.zeros(dtype.itemsize, dtype=bool)
        _mark_fields(dtype, used, 0)
        _PADDING[dtype] = ~used
    return _PADDING[dtype]


def _mark_fields(dtype: np.dtype, used: np.ndarray, base: int) -> None:
    if dtype.fields is not None:
        for sub, offset, *_ in dtype.fields.values():
            _mark_fields(sub, used, base + offset)
    elif dtype.subdtype is not None:
        item, shape = dtype.subdtype
        for k in range(int(np.prod(shape))):
            _mark_fields(item, used, base + k * item.itemsize)
    else:
        used[base : base + dtype.itemsize] = True


def parse_lowcmd(buffer: bytes) -> np.ndarray:
    """``LowCmd_`` record from its C-layout bytes (check :func:`crc_ok` separately)."""
    return _parse(buffer, LOWCMD_DTYPE, "LowCmd_")


def parse_lowstate(buffer: bytes) -> np.ndarray:
    """``LowState_`` record from its C-layout bytes."""
    return _parse(buffer, LOWSTATE_DTYPE, "LowState_")


def _parse(buffer: bytes, dtype: np.dtype, name: str) -> np.ndarray:
    if len(buffer) != dtype.itemsize:
        raise UnitreeMessageError(f"{name} is {dtype.itemsize} bytes, got {len(buffer)}")
    return np.frombuffer(bytearray(buffer), dtype=dtype).reshape(())  # writable, owns a copy of the bytes


# --------------------------------------------------------------------------------------------------- remote
REMOTE_BUTTONS = (
    "R1",
    "L1",
    "start",
    "select",
    "R2",
    "L2",
    "F1",
    "F2",
    "A",
    "B",
    "X",
    "Y",
    "up",
    "right",
    "down",
    "left",
)


@dataclass(frozen=True)
class RemoteState:
    """The robot's own remote as reported in ``LowState_.wireless_remote``: pressed buttons by name
    (:data:`REMOTE_BUTTONS`) and the stick axes (dimensionless, about -1..1)."""

    buttons: dict[str, bool] = field(default_factory=dict)
    lx: float = 0.0
    ly: float = 0.0
    rx: float = 0.0
    ry: float = 0.0


def decode_wireless_remote(raw: bytes | np.ndarray) -> RemoteState:
    """Decode the 40 remote bytes: buttons as a little-endian uint16 at bytes 2-3 (bit i is
    ``REMOTE_BUTTONS[i]``), float32 sticks lx @4, rx @8, ry @12, ly @20."""
    data = bytes(np.asarray(raw, dtype=np.uint8).tobytes()) if isinstance(raw, np.ndarray) else bytes(raw)
    if len(data) != 40:
        raise UnitreeMessageError(f"wireless_remote is 40 bytes, got {len(data)}")
    bits = int.from_bytes(data[2:4], "little")
    f = np.frombuffer(data, dtype="<f4")
    return RemoteState(
        buttons={name: bool(bits >> i & 1) for i, name in enumerate(REMOTE_BUTTONS)},
        lx=float(f[1]),
        rx=float(f[2]),
        ry=float(f[3]),
        ly=float(f[5]),
    )


def encode_wireless_remote(state: RemoteState) -> bytes:
    """The 40 remote bytes for ``state`` (emulators and tests; other bytes zero)."""
    out = bytearray(40)
    bits = sum(1 << i for i, name in enumerate(REMOTE_BUTTONS) if state.buttons.get(name, False))
    out[2:4] = bits.to_bytes(2, "little")
    for offset, value in ((4, state.lx), (8, state.rx), (12, state.ry), (20, state.ly)):
        out[offset : offset + 4] = np.float32(value).astype("<f4").tobytes()
    return bytes(out)


__all__ = [
    "LOWCMD_DTYPE",
    "LOWCMD_SIZE",
    "LOWSTATE_DTYPE",
    "LOWSTATE_SIZE",
    "NUM_MOTOR_SLOTS",
    "REMOTE_BUTTONS",
    "RemoteState",
    "UnitreeMessageError",
    "crc32_mpeg2",
    "crc32_words",
    "crc32_words_bitwise",
    "crc_ok",
    "decode_wireless_remote",
    "encode_wireless_remote",
    "message_crc",
    "new_lowcmd",
    "new_lowstate",
    "parse_lowcmd",
    "parse_lowstate",
    "seal",
    "to_bytes",
]
