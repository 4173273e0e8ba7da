"""unitree_hg LowCmd / LowState: struct layouts, the CRC (catalogue check value, word-by-word definition, the
SDK's own CRC when the SDK is installed), bad CRCs detected, the remote's bytes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from humanoid_control.hardware.unitree_hg import (
    LOWCMD_DTYPE,
    LOWCMD_SIZE,
    LOWSTATE_DTYPE,
    LOWSTATE_SIZE,
    REMOTE_BUTTONS,
    RemoteState,
    UnitreeMessageError,
    crc32_mpeg2,
    crc32_words,
    crc32_words_bitwise,
    crc_ok,
    decode_wireless_remote,
    encode_wireless_remote,
    message_crc,
    new_lowcmd,
    new_lowstate,
    parse_lowcmd,
    parse_lowstate,
    seal,
    to_bytes,
)


def _random_lowcmd(rng: np.random.Generator) -> np.ndarray:
    cmd = new_lowcmd()
    cmd["mode_pr"] = rng.integers(0, 2)
    cmd["mode_machine"] = rng.integers(0, 256)
    m = cmd["motor_cmd"]
    m["mode"] = rng.integers(0, 2, 35)
    for name in ("q", "dq", "tau", "kp", "kd"):
        m[name] = rng.normal(0.0, 10.0, 35).astype(np.float32)
    m["reserve"] = rng.integers(0, 2**32, 35, dtype=np.uint64)
    cmd["reserve"] = rng.integers(0, 2**32, 4, dtype=np.uint64)
    return cmd


def _random_lowstate(rng: np.random.Generator) -> np.ndarray:
    st = new_lowstate()
    st["version"] = rng.integers(0, 2**32, 2, dtype=np.uint64)
    st["mode_machine"] = 5
    st["tick"] = rng.integers(0, 2**32, dtype=np.uint64)
    imu = st["imu_state"]
    for name, n in (("quaternion", 4), ("gyroscope", 3), ("accelerometer", 3), ("rpy", 3)):
        imu[name] = rng.normal(0.0, 1.0, n).astype(np.float32)
    imu["temperature"] = 31
    ms = st["motor_state"]
    for name in ("q", "dq", "ddq", "tau_est", "vol"):
        ms[name] = rng.normal(0.0, 5.0, 35).astype(np.float32)
    ms["temperature"] = rng.integers(-40, 120, (35, 2))
    ms["sensor"] = rng.integers(0, 2**32, (35, 2), dtype=np.uint64)
    st["wireless_remote"] = rng.integers(0, 256, 40)
    return st


def test_layout_sizes_and_offsets() -> None:
    assert LOWCMD_SIZE == 1004 and LOWSTATE_SIZE == 2092
    assert LOWCMD_DTYPE.fields["motor_cmd"][1] == 4 and LOWCMD_DTYPE.fields["crc"][1] == 1000
    assert LOWSTATE_DTYPE.fields["motor_state"][1] == 72 and LOWSTATE_DTYPE.fields["crc"][1] == 2088
    # CRC spans all words but the last: 250 for LowCmd (as the robot's spec says), 522 for LowState
    assert (LOWCMD_SIZE // 4 - 1, LOWSTATE_SIZE // 4 - 1) == (250, 522)
    # the padding bytes are zero and a field lands where the layout says
    cmd = new_lowcmd()
    cmd["mode_machine"] = 7
    cmd["motor_cmd"]["kd"][1] = 1.5
    data = to_bytes(cmd, sealed=False)
    assert data[1] == 7 and data[2:4] == b"\x00\x00"
    assert data[4 + 28 + 20 : 4 + 28 + 24] == np.float32(1.5).tobytes()


def test_crc_core_matches_the_catalogue_check_value() -> None:
    assert crc32_mpeg2(b"123456789") == 0x0376E6E7  # CRC-32/MPEG-2 check value
    assert crc32_mpeg2(b"") == 0xFFFFFFFF


def test_fast_crc_equals_the_word_by_word_definition() -> None:
    rng = random.Random(11)
    for n in (1, 2, 7, 250, 522):
        words = [rng.getrandbits(32) for _ in range(n)]
        assert crc32_words(np.array(words, dtype=np.uint32)) == crc32_words_bitwise(words)
    for words in ([0] * 250, [0xFFFFFFFF] * 250):
        assert crc32_words(np.array(words, dtype=np.uint32)) == crc32_words_bitwise(words)


def test_sealed_messages_check_and_every_single_bit_error_is_detected() -> None:
    rng = np.random.default_rng(2)
    for record in (_random_lowcmd(rng), _random_lowstate(rng)):
        data = to_bytes(record)
        assert crc_ok(data)
        crc = int.from_bytes(data[-4:], "little")
        assert crc == crc32_words_bitwise(np.frombuffer(data, dtype="<u4")[:-1].tolist())
        for bit in rng.choice(len(data) * 8 - 32, 300, replace=False):
            broken = bytearray(data)
            broken[bit // 8] ^= 1 << (bit % 8)
            assert not crc_ok(bytes(broken))
        wrong_crc = data[:-4] + ((crc + 1) & 0xFFFFFFFF).to_bytes(4, "little")
        assert not crc_ok(wrong_crc)


def test_round_trip_through_bytes() -> None:
    rng = np.random.default_rng(4)
    cmd = _random_lowcmd(rng)
    back = parse_lowcmd(to_bytes(cmd))
    assert to_bytes(back, sealed=False) == to_bytes(cmd)
    assert np.array_equal(back["motor_cmd"]["q"], cmd["motor_cmd"]["q"])
    state = _random_lowstate(rng)
    assert to_bytes(parse_lowstate(to_bytes(state)), sealed=False) == to_bytes(state)
    assert seal(to_bytes(state)) == to_bytes(state)
    # padding is zero whatever numpy left in a copied record's gaps (numpy does not copy them)
    padded = np.frombuffer(bytes(range(256)) * 3 + bytes(range(236)), dtype=LOWCMD_DTYPE).reshape(()).copy()
    data = to_bytes(padded, sealed=False)
    assert data[2:4] == b"\x00\x00" and data[5:8] == b"\x00\x00\x00"
    assert data[4] == padded["motor_cmd"]["mode"][0] and data[8:12] == padded["motor_cmd"]["q"][:1].tobytes()
    with pytest.raises(UnitreeMessageError):
        parse_lowcmd(bytes(1000))
    with pytest.raises(UnitreeMessageError):
        message_crc(bytes(6))


def test_wireless_remote() -> None:
    state = RemoteState(buttons={"A": True, "L2": True, "select": True}, lx=0.5, ly=-1.0, rx=0.25, ry=0.125)
    raw = encode_wireless_remote(state)
    assert len(raw) == 40
    assert int.from_bytes(raw[2:4], "little") == (1 << 8) | (1 << 5) | (1 << 3)
    assert raw[20:24] == np.float32(-1.0).tobytes()
    decoded = decode_wireless_remote(np.frombuffer(raw, dtype=np.uint8))
    assert decoded == state.__class__(
        buttons={name: name in ("A", "L2", "select") for name in REMOTE_BUTTONS},
        lx=0.5,
        ly=-1.0,
        rx=0.25,
        ry=0.125,
    )
    with pytest.raises(UnitreeMessageError):
        decode_wireless_remote(bytes(39))


def _sdk() -> tuple[object, object, object]:
    """The SDK's CRC class and default message factories, or skip."""
    try:
        from unitree_sdk2py.idl.default import (  # type: ignore[import-not-found]
            unitree_hg_msg_dds__LowCmd_,
            unitree_hg_msg_dds__LowState_,
        )
        from unitree_sdk2py.utils.crc import CRC  # type: ignore[import-not-found]
    except Exception as exc:  # not installed, or its DDS binding missing
        pytest.skip(f"Unitree SDK (unitree-sdk2py-dimos) not importable here: {exc!r}")
    return CRC(), unitree_hg_msg_dds__LowCmd_, unitree_hg_msg_dds__LowState_


def test_crc_byte_exact_against_the_sdk_lowcmd() -> None:
    crc, make_cmd, _ = _sdk()
    rng = np.random.default_rng(7)
    for _ in range(20):
        rec = _random_lowcmd(rng)
        msg = make_cmd()
        msg.mode_pr = int(rec["mode_pr"])
        msg.mode_machine = int(rec["mode_machine"])
        for i in range(35):
            m, r = msg.motor_cmd[i], rec["motor_cmd"][i]
            m.mode = int(r["mode"])
            m.q, m.dq, m.tau, m.kp, m.kd = (float(r[k]) for k in ("q", "dq", "tau", "kp", "kd"))
            m.reserve = int(r["reserve"])
        msg.reserve = [int(v) for v in rec["reserve"]]
        assert crc.Crc(msg) == message_crc(to_bytes(rec, sealed=False))


def test_crc_byte_exact_against_the_sdk_lowstate() -> None:
    crc, _, make_state = _sdk()
    rng = np.random.default_rng(8)
    for _ in range(10):
        rec = _random_lowstate(rng)
        msg = make_state()
        msg.version = [int(v) for v in rec["version"]]
        msg.mode_pr, msg.mode_machine, msg.tick = (
            int(rec["mode_pr"]),
            int(rec["mode_machine"]),
            int(rec["tick"]),
        )
        imu = rec["imu_state"]
        for name in ("quaternion", "gyroscope", "accelerometer", "rpy"):
            setattr(msg.imu_state, name, [float(v) for v in imu[name]])
        msg.imu_state.temperature = int(imu["temperature"])
        for i in range(35):
            m, r = msg.motor_state[i], rec["motor_state"][i]
            m.mode = int(r["mode"])
            m.q, m.dq, m.ddq, m.tau_est, m.vol = (float(r[k]) for k in ("q", "dq", "ddq", "tau_est", "vol"))
            m.temperature = [int(v) for v in r["temperature"]]
            m.sensor = [int(v) for v in r["sensor"]]
            m.motorstate = int(r["motorstate"])
            m.reserve = [int(v) for v in r["reserve"]]
        msg.wireless_remote = [int(v) for v in rec["wireless_remote"]]
        msg.reserve = [int(v) for v in rec["reserve"]]
        assert crc.Crc(msg) == message_crc(to_bytes(rec, sealed=False))
