"""MIT-mode CAN codec: bit layout, bit-exact round trips over every code and at the boundaries, clamping."""

from __future__ import annotations

import math
import random

import pytest

from humanoid_control.hardware.mit_can import (
    ENTER_MOTOR_MODE,
    EXIT_MOTOR_MODE,
    SET_ZERO,
    MitCodecError,
    MitCommand,
    MitRanges,
    decode_command,
    decode_reply,
    encode_command,
    encode_reply,
    float_to_uint,
    pack_command_codes,
    special_frame,
    uint_to_float,
    unpack_command_codes,
)

# AK80-9 as in REFERENCES.md: p +-12.5 rad, v +-50 rad/s, kp 0-500, kd 0-5, t +-18 N m
AK80_9 = MitRanges(-12.5, 12.5, -50.0, 50.0, 0.0, 500.0, 0.0, 5.0, -18.0, 18.0)
# an asymmetric range catches offset mistakes that symmetric ones hide
ODD = MitRanges(-1.0, 3.0, -7.0, 2.0, 10.0, 30.0, 0.5, 1.5, -2.0, 5.0)
FIELDS = [("p", 16), ("v", 12), ("kp", 12), ("kd", 12), ("t", 12)]


def test_command_bit_layout() -> None:
    frame = pack_command_codes(0x1234, 0xABC, 0xDEF, 0x123, 0x456)
    assert frame == bytes.fromhex("1234ABCDEF123456")
    assert unpack_command_codes(frame) == (0x1234, 0xABC, 0xDEF, 0x123, 0x456)


@pytest.mark.parametrize("ranges", [AK80_9, ODD])
@pytest.mark.parametrize(("field", "bits"), FIELDS)
def test_every_code_round_trips(ranges: MitRanges, field: str, bits: int) -> None:
    lo, hi = getattr(ranges, f"{field}_min"), getattr(ranges, f"{field}_max")
    for code in range(1 << bits):
        assert float_to_uint(uint_to_float(code, lo, hi, bits), lo, hi, bits) == (code, False)
    assert uint_to_float(0, lo, hi, bits) == lo
    assert uint_to_float((1 << bits) - 1, lo, hi, bits) == pytest.approx(hi, abs=1e-12)


@pytest.mark.parametrize("ranges", [AK80_9, ODD])
def test_random_frames_decode_and_reencode_bit_exact(ranges: MitRanges) -> None:
    rng = random.Random(17)
    for _ in range(5000):
        frame = rng.randbytes(8)
        if special_frame(frame):
            continue
        encoded = encode_command(decode_command(frame, ranges), ranges)
        assert encoded.data == frame
        assert encoded.clamped == ()


@pytest.mark.parametrize("ranges", [AK80_9, ODD])
def test_boundary_frames_round_trip(ranges: MitRanges) -> None:
    # every field at 0, 1, top - 1 and top, in all combinations of min / max across fields
    for mask in range(32):
        for inner in (0, 1):
            codes = []
            for i, (_, bits) in enumerate(FIELDS):
                top = (1 << bits) - 1
                codes.append(top - inner if mask >> i & 1 else inner)
            frame = pack_command_codes(*codes)
            if special_frame(frame):
                continue
            assert encode_command(decode_command(frame, ranges), ranges).data == frame


def test_range_ends_map_to_extreme_codes_and_beyond_is_clamped_and_reported() -> None:
    r = AK80_9
    low = encode_command(MitCommand(r.p_min, r.v_min, r.kp_min, r.kd_min, r.t_min), r)
    assert unpack_command_codes(low.data) == (0, 0, 0, 0, 0) and low.clamped == ()
    high = encode_command(MitCommand(r.p_max, r.v_max, r.kp_max, r.kd_max, 0.0), r)
    assert unpack_command_codes(high.data)[:4] == (0xFFFF, 0xFFF, 0xFFF, 0xFFF) and high.clamped == ()

    beyond = encode_command(MitCommand(13.0, -50.001, 600.0, -1.0, math.inf), r)
    assert beyond.clamped == ("position", "velocity", "kp", "kd", "torque")
    p, v, kp, kd, t = unpack_command_codes(beyond.data)
    assert (p, v, kp, kd, t) == (0xFFFF, 0, 0xFFF, 0, 0xFFF)
    back = decode_command(beyond.data, r)
    assert (back.position, back.velocity, back.kp, back.kd, back.torque) == (12.5, -50.0, 500.0, 0.0, 18.0)


def test_quantisation_error_within_half_a_step() -> None:
    rng = random.Random(3)
    r = ODD
    for _ in range(2000):
        c = MitCommand(
            rng.uniform(r.p_min, r.p_max),
            rng.uniform(r.v_min, r.v_max),
            rng.uniform(r.kp_min, r.kp_max),
            rng.uniform(r.kd_min, r.kd_max),
            rng.uniform(r.t_min, r.t_max),
        )
        d = decode_command(encode_command(c, r).data, r)
        pairs = (("position", "p"), ("velocity", "v"), ("kp", "kp"), ("kd", "kd"), ("torque", "t"))
        for name, field in pairs:
            assert abs(getattr(d, name) - getattr(c, name)) <= r.step(field) / 2 + 1e-12


def test_nan_is_refused_not_encoded() -> None:
    with pytest.raises(MitCodecError, match="NaN"):
        encode_command(MitCommand(position=math.nan), AK80_9)


def test_special_frames() -> None:
    assert ENTER_MOTOR_MODE.hex() == "fffffffffffffffc"
    assert EXIT_MOTOR_MODE.hex() == "fffffffffffffffd"
    assert SET_ZERO.hex() == "fffffffffffffffe"
    kinds = [special_frame(f) for f in (ENTER_MOTOR_MODE, EXIT_MOTOR_MODE, SET_ZERO)]
    assert kinds == ["enter", "exit", "zero"]
    assert special_frame(bytes([0xFF] * 8)) is None


def test_saturated_command_never_encodes_as_a_special_frame() -> None:
    r = AK80_9
    for t_code in (0xFFC, 0xFFD, 0xFFE):
        torque = uint_to_float(t_code, r.t_min, r.t_max, 12)
        encoded = encode_command(MitCommand(100.0, 100.0, 1e4, 1e4, torque), r)
        assert special_frame(encoded.data) is None
        assert "velocity(special-frame)" in encoded.clamped
        assert unpack_command_codes(encoded.data) == (0xFFFF, 0xFFE, 0xFFF, 0xFFF, t_code)


def test_wrong_lengths_are_refused() -> None:
    with pytest.raises(MitCodecError):
        decode_command(bytes(7), AK80_9)
    with pytest.raises(MitCodecError):
        decode_reply(bytes(7), AK80_9)


def test_reply_bit_layout_and_round_trip() -> None:
    r = AK80_9
    # id 5, p code 0xABCD, v code 0x123, t code 0x456
    frame = bytes.fromhex("05ABCD123456")
    reply = decode_reply(frame, r)
    assert reply.can_id == 5
    assert reply.position == uint_to_float(0xABCD, r.p_min, r.p_max, 16)
    assert reply.velocity == uint_to_float(0x123, r.v_min, r.v_max, 12)
    assert reply.torque == uint_to_float(0x456, r.t_min, r.t_max, 12)
    assert reply.temperature_raw is None and reply.error_raw is None
    assert encode_reply(5, reply.position, reply.velocity, reply.torque, r) == frame

    rng = random.Random(5)
    for _ in range(3000):
        frame = rng.randbytes(8)
        reply = decode_reply(frame, r)
        again = encode_reply(reply.can_id, reply.position, reply.velocity, reply.torque, r,
                             extra=(reply.temperature_raw, reply.error_raw))  # fmt: skip
        assert again == frame


def test_reply_saturates_beyond_range() -> None:
    reply = decode_reply(encode_reply(1, 20.0, -60.0, 30.0, AK80_9), AK80_9)
    assert (reply.position, reply.velocity, reply.torque) == pytest.approx((12.5, -50.0, 18.0))


def test_ranges_must_be_ordered() -> None:
    with pytest.raises(MitCodecError):
        MitRanges(1.0, -1.0, -1, 1, 0, 1, 0, 1, -1, 1)
