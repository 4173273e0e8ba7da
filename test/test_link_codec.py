"""The fast link codecs against the reference ones: the numpy CDR codec of LowCmd_ / LowState_ byte for byte
against the Unitree SDK's own serialisation (and raw channels talking to the SDK's own publisher and
subscriber over DDS on loopback), the batch MIT codec frame for frame against the per-frame codec."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from humanoid_control.hardware.hardware_config import load_can_mit_config, load_unitree_g1_config
from humanoid_control.hardware.mit_batch import CLAMP_FIELDS, BatchHostBus, MitBatchCodec, clamped_fields
from humanoid_control.hardware.mit_can import (
    ENTER_MOTOR_MODE,
    MitCodecError,
    MitCommand,
    MitRanges,
    decode_reply,
    encode_command,
    encode_reply,
)
from humanoid_control.hardware.unitree_cdr import cdr_byte_map, lowcmd_codec, lowstate_codec
from humanoid_control.hardware.unitree_hg import (
    LOWCMD_DTYPE,
    LOWSTATE_DTYPE,
    UnitreeMessageError,
    message_crc,
    new_lowcmd,
    to_bytes,
)
from humanoid_control.model.robot_config import load_robot_config

DOMAIN = 160 + os.getpid() % 70  # as test_unitree_g1_backend.py: the SDK allows one DDS domain per process


def _sdk() -> tuple[object, object, object]:
    """The SDK's unitree_hg classes and CRC, or skip."""
    try:
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import (  # type: ignore[import-not-found]
            LowCmd_,
            LowState_,
        )
        from unitree_sdk2py.utils.crc import CRC  # type: ignore[import-not-found]
    except Exception as exc:  # not installed, or its DDS binding missing
        pytest.skip(f"Unitree SDK (unitree-sdk2py-dimos) not importable here: {exc!r}")
    return LowCmd_, LowState_, CRC()


def _f32(rng: np.random.Generator, n: int) -> list[float]:
    """Random float32-representable values over many magnitudes (signs, zeros, large and tiny)."""
    v = rng.normal(size=n) * 10.0 ** rng.integers(-6, 7, size=n)
    v[rng.random(n) < 0.1] = 0.0
    return [float(x) for x in v.astype(np.float32)]


def _random_sdk_lowcmd(rng: np.random.Generator) -> object:
    from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_  # type: ignore[import-not-found]

    msg = unitree_hg_msg_dds__LowCmd_()
    msg.mode_pr, msg.mode_machine = (int(x) for x in rng.integers(0, 256, 2))
    for m in msg.motor_cmd:
        m.mode = int(rng.integers(0, 256))
        m.q, m.dq, m.tau, m.kp, m.kd = _f32(rng, 5)
        m.reserve = int(rng.integers(0, 2**32))
    msg.reserve = [int(x) for x in rng.integers(0, 2**32, 4)]
    return msg


def _random_sdk_lowstate(rng: np.random.Generator) -> object:
    from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowState_  # type: ignore[import-not-found]

    msg = unitree_hg_msg_dds__LowState_()
    msg.version = [int(x) for x in rng.integers(0, 2**32, 2)]
    msg.mode_pr, msg.mode_machine = (int(x) for x in rng.integers(0, 256, 2))
    msg.tick = int(rng.integers(0, 2**32))
    s = msg.imu_state
    s.quaternion, s.gyroscope, s.accelerometer, s.rpy = _f32(rng, 4), _f32(rng, 3), _f32(rng, 3), _f32(rng, 3)
    s.temperature = int(rng.integers(-(2**15), 2**15))
    for m in msg.motor_state:
        m.mode = int(rng.integers(0, 256))
        m.q, m.dq, m.ddq, m.tau_est, m.vol = _f32(rng, 5)
        m.temperature = [int(x) for x in rng.integers(-(2**15), 2**15, 2)]
        m.sensor = [int(x) for x in rng.integers(0, 2**32, 2)]
        m.motorstate = int(rng.integers(0, 2**32))
        m.reserve = [int(x) for x in rng.integers(0, 2**32, 4)]
    msg.wireless_remote = [int(x) for x in rng.integers(0, 256, 40)]
    msg.reserve = [int(x) for x in rng.integers(0, 2**32, 4)]
    return msg


def test_cdr_layout_sizes() -> None:
    for dtype, payload in ((LOWCMD_DTYPE, 1000), (LOWSTATE_DTYPE, 2088)):
        c_idx, cdr_idx, size = cdr_byte_map(dtype)
        assert size == payload
        assert len(set(c_idx.tolist())) == len(c_idx) == len(set(cdr_idx.tolist()))  # one-to-one
    assert lowcmd_codec().wire_size == 1004 and lowstate_codec().wire_size == 2092


def test_lowcmd_bytes_and_crc_identical_to_the_sdk() -> None:
    lowcmd_t, _, crc = _sdk()
    from humanoid_control.hardware import unitree_dds as dds

    codec = lowcmd_codec()
    rng = np.random.default_rng(46)
    for _ in range(30):
        msg = _random_sdk_lowcmd(rng)
        rec = dds.lowcmd_from_sdk(msg)  # the values as the SDK holds them
        data, ours = codec.encode_sealed(rec)
        assert ours == crc.Crc(msg) == message_crc(to_bytes(rec, sealed=False))
        msg.crc = ours
        assert data == msg.serialize()  # the SDK's own CDR, byte for byte
        back, ok = codec.decode_checked(msg.serialize())
        assert ok and to_bytes(back) == to_bytes(rec)
        assert lowcmd_t.deserialize(data) == msg


def test_lowstate_from_the_sdk_decodes_to_the_same_values() -> None:
    _, lowstate_t, crc = _sdk()
    codec = lowstate_codec()
    rng = np.random.default_rng(47)
    for _ in range(20):
        msg = _random_sdk_lowstate(rng)
        msg.crc = crc.Crc(msg)
        rec, ok = codec.decode_checked(msg.serialize())
        assert ok
        assert rec["version"].tolist() == list(msg.version) and int(rec["tick"]) == msg.tick
        assert (int(rec["mode_pr"]), int(rec["mode_machine"])) == (msg.mode_pr, msg.mode_machine)
        imu, s = rec["imu_state"], msg.imu_state
        for name in ("quaternion", "gyroscope", "accelerometer", "rpy"):
            assert imu[name].tolist() == list(getattr(s, name))
        assert int(imu["temperature"]) == s.temperature
        m = rec["motor_state"]
        for i, sm in enumerate(msg.motor_state):
            for name in ("mode", "q", "dq", "ddq", "tau_est", "vol", "motorstate"):
                assert m[name][i].item() == getattr(sm, name), (i, name)
            for name in ("temperature", "sensor", "reserve"):
                assert m[name][i].tolist() == list(getattr(sm, name)), (i, name)
        assert bytes(rec["wireless_remote"].tobytes()) == bytes(msg.wireless_remote)
        assert rec["reserve"].tolist() == list(msg.reserve) and int(rec["crc"]) == msg.crc
        data, _ = codec.encode_sealed(rec)
        assert data == msg.serialize()
        assert lowstate_t.deserialize(data) == lowstate_t.deserialize(msg.serialize())  # uint8[] as bytes
        msg.crc ^= 1
        assert not codec.decode_checked(msg.serialize())[1]  # a wrong CRC is seen


def test_bad_samples_are_refused() -> None:
    codec = lowcmd_codec()
    good, _ = codec.encode_sealed(new_lowcmd())
    with pytest.raises(UnitreeMessageError, match="1004 bytes"):
        codec.decode(good[:-8])
    with pytest.raises(UnitreeMessageError, match="little-endian"):
        codec.decode(b"\x00\x00\x00\x00" + good[4:])  # big-endian CDR


def test_raw_channels_talk_to_the_sdk_publisher_and_subscriber() -> None:
    lowcmd_t, lowstate_t, crc = _sdk()
    from humanoid_control.hardware import unitree_dds as dds
    from humanoid_control.hardware.unitree_cdr import RawReader, RawWriter

    dds.init_channels(DOMAIN, "lo")
    got_raw: list[bytes] = []
    got_sdk: list[object] = []
    reader = RawReader("test/link/lowcmd", lowcmd_t, got_raw.append)
    sdk_sub = dds.subscriber("test/link/lowstate", lowstate_t, got_sdk.append)
    sdk_pub = dds.publisher("test/link/lowcmd", lowcmd_t)
    writer = RawWriter("test/link/lowstate", lowstate_t)
    rng = np.random.default_rng(48)
    cmd = _random_sdk_lowcmd(rng)
    cmd.crc = crc.Crc(cmd)
    state = _random_sdk_lowstate(rng)
    state.crc = crc.Crc(state)
    state_bytes, _ = lowstate_codec().encode_sealed(lowstate_codec().decode(state.serialize()))
    deadline = time.monotonic() + 20.0  # discovery on loopback; each side resends until it is heard
    while (not got_raw or not got_sdk) and time.monotonic() < deadline:
        sdk_pub.Write(cmd)
        writer.write(state_bytes)
        time.sleep(0.02)
    try:
        assert got_raw and got_sdk, "no sample across DDS within 20 s"
        _, ok = lowcmd_codec().decode_checked(got_raw[0])
        assert ok and got_raw[0] == cmd.serialize()
        assert got_sdk[0] == lowstate_t.deserialize(state.serialize())
    finally:
        reader.close()
        writer.close()
        sdk_sub.Close()
        sdk_pub.Close()


def test_the_g1_emulator_talks_to_the_sdks_own_publisher_and_subscriber() -> None:
    _, lowstate_t, crc = _sdk()
    from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_  # type: ignore[import-not-found]

    from humanoid_control.hardware import unitree_dds as dds
    from humanoid_control.hardware.g1_emulator import G1Emulator, G1EmulatorSettings

    config = load_robot_config("g1")
    hw = load_unitree_g1_config(config)
    emu = G1Emulator(config, G1EmulatorSettings(lockstep=True, republish_s=0.02))
    got: list = []
    sub = dds.subscriber(hw.lowstate_topic, lowstate_t, got.append)  # the SDK's own reader and classes
    emu.start(DOMAIN, "lo")
    pub = dds.publisher(hw.lowcmd_topic, dds.hg_types()[0])  # the SDK's own writer
    try:
        assert _wait(lambda: bool(got)), "no LowState reached the SDK's subscriber"
        state = got[-1]
        assert state.crc == crc.Crc(state) and state.mode_machine == emu.settings.mode_machine
        assert [m.mode for m in state.motor_state[:29]] == [1] * 29
        cmd = unitree_hg_msg_dds__LowCmd_()  # built and sealed by the SDK
        cmd.mode_pr, cmd.mode_machine = hw.mode_pr, emu.settings.mode_machine
        for i in range(29):
            cmd.motor_cmd[i].mode, cmd.motor_cmd[i].kp, cmd.motor_cmd[i].kd = 1, 40.0, 1.0
            cmd.motor_cmd[i].q = float(state.motor_state[i].q)
        cmd.crc = crc.Crc(cmd)
        pub.Write(cmd)
        assert _wait(lambda: emu.status()["applied"] >= 1)
        assert _wait(lambda: any(s.tick >= emu.period_ms for s in got))  # the step's LowState came back
        assert emu.status()["crc_dropped"] == 0 and emu.last_applied is not None
        assert np.allclose(emu.last_applied.kp, 40.0)
        cmd.crc ^= 1  # the SDK's message with a wrong CRC: dropped
        pub.Write(cmd)
        assert _wait(lambda: emu.status()["crc_dropped"] == 1)
    finally:
        emu.stop()
        pub.Close()
        sub.Close()


def _wait(predicate: object, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


# ------------------------------------------------------------------------------------------------- CAN
def _can_joints() -> tuple:
    return load_can_mit_config(load_robot_config("g1")).joints


def test_batch_command_frames_identical_to_the_per_frame_codec() -> None:
    joints = _can_joints()
    codec = MitBatchCodec(joints)
    rng = np.random.default_rng(49)
    n = len(joints)
    lo, hi = codec.lo, codec.hi
    for trial in range(300):
        span = hi - lo
        values = lo - 0.1 * span + rng.random((5, n)) * 1.2 * span  # about 8 % out of range each side
        if trial % 3 == 1:  # exact boundaries, the middle, code midpoints (round half to even)
            pick = rng.integers(0, 4, size=(5, n))
            top = np.array([[65535], [4095], [4095], [4095], [4095]])
            half = lo + (rng.integers(0, 4095, size=(5, n)) + 0.5) * span / top
            values = np.choose(pick, [lo, hi, (lo + hi) / 2, half])
        if trial % 3 == 2:  # infinities clamp like the per-frame codec
            values[rng.random((5, n)) < 0.1] = np.inf
            values[rng.random((5, n)) < 0.1] = -np.inf
        frames, flags = codec.encode(values)
        for i, j in enumerate(joints):
            ref = encode_command(MitCommand(*(float(v) for v in values[:, i])), j.ranges)
            assert frames[i].tobytes() == ref.data, (trial, j.joint)
            assert tuple(f for f, on in zip(CLAMP_FIELDS, flags[i], strict=True) if on) == ref.clamped
        assert clamped_fields(flags, joints) == {
            j.joint: encode_command(MitCommand(*(float(v) for v in values[:, i])), j.ranges).clamped
            for i, j in enumerate(joints)
            if flags[i].any()
        }


def test_batch_joint_encoding_and_the_special_frame_guard() -> None:
    joints = _can_joints()
    codec = MitBatchCodec(joints)
    n = len(joints)
    rng = np.random.default_rng(50)
    q, dq, kp, kd, tau = (rng.normal(size=n) for _ in range(5))
    frames, _ = codec.encode_joint(q, dq, np.abs(kp) * 50, np.abs(kd), tau)
    for i, j in enumerate(joints):
        ref = encode_command(j.to_motor(q[i], dq[i], abs(kp[i]) * 50, abs(kd[i]), tau[i]), j.ranges)
        assert frames[i].tobytes() == ref.data
    # saturated fields collide with the special frames: the velocity goes one code lower, reported
    saturated = codec.hi.copy()
    codes = 4092 + np.arange(len(joints)) % 3  # torque codes 0xFFC..0xFFE: last byte FC, FD, FE
    saturated[4] = codec.lo[4] + codes * (codec.hi[4] - codec.lo[4]) / 4095
    frames, flags = codec.encode(saturated)
    for i, j in enumerate(joints):
        ref = encode_command(MitCommand(*(float(v) for v in saturated[:, i])), j.ranges)
        assert frames[i].tobytes() == ref.data and flags[i, 5] == ("velocity(special-frame)" in ref.clamped)
    assert flags[:, 5].all()
    values = codec.lo.copy()
    values[2, 3] = np.nan
    with pytest.raises(MitCodecError, match="NaN"):
        codec.encode(values)


def test_batch_reply_decoding_identical_to_the_per_frame_codec() -> None:
    joints = _can_joints()
    codec = MitBatchCodec(joints)
    rng = np.random.default_rng(51)
    for _ in range(100):
        frames = rng.integers(0, 256, size=(len(joints), 8), dtype=np.uint8)
        p, v, t = codec.decode_replies(frames)
        q, dq, tau = codec.decode_joint(frames)
        for i, j in enumerate(joints):
            for length in (6, 8):
                ref = decode_reply(frames[i, :length].tobytes(), j.ranges)
                assert (p[i], v[i], t[i]) == (ref.position, ref.velocity, ref.torque)
            assert (q[i], dq[i], tau[i]) == j.from_motor(ref)


def test_batch_host_bus_on_virtual_can() -> None:
    can = pytest.importorskip("can", reason="python-can is optional")
    from humanoid_control.hardware.can_io import EmulatedBusNode, open_bus
    from humanoid_control.hardware.mit_emulator import MitActuatorEmulator, MitBusEmulator, MotorModel

    joints = [j for j in _can_joints() if j.bus == "can0"]
    channel = f"test-link-{os.getpid()}"
    node_bus, host_bus, spy = (open_bus(channel, "virtual") for _ in range(3))
    emu = MitBusEmulator([MitActuatorEmulator(j.can_id, j.ranges, MotorModel(timeout=1e9)) for j in joints])
    node = EmulatedBusNode(node_bus, emu)
    host = BatchHostBus(host_bus, joints)
    codec = MitBatchCodec(joints)
    try:
        host.send_special(ENTER_MOTOR_MODE)
        assert node.poll(1.0) == len(joints)
        heard, _ = host.receive_frames(1.0)
        assert heard.all() and not host.errors
        while spy.recv(0.0) is not None:  # what the spy saw so far
            pass
        n = len(joints)
        frames, _ = codec.encode_joint(
            np.full(n, 0.1), np.zeros(n), np.full(n, 20.0), np.ones(n), np.zeros(n)
        )
        host.send_frames(frames)
        seen = [spy.recv(1.0) for _ in range(n)]  # every other end of the channel gets the frames
        assert [(m.arbitration_id, bytes(m.data)) for m in seen] == [
            (j.can_id, frames[i].tobytes()) for i, j in enumerate(joints)
        ]
        assert all(m.is_rx and not m.is_extended_id for m in seen)
        assert node.poll(1.0) == n
        heard, rows = host.receive_frames(1.0)
        assert heard.all()
        q, _, _ = codec.decode_joint(rows)
        for i, j in enumerate(joints):  # the replies decode as the per-frame codec decodes them
            ref = decode_reply(rows[i, :6].tobytes(), j.ranges)
            assert q[i] == j.from_motor(ref)[0]
        # a reply of the wrong length is an error, not a crash
        host_bus_peer = node_bus
        host_bus_peer.send(
            can.Message(arbitration_id=0, data=bytes([joints[0].can_id, 1, 2]), is_extended_id=False)
        )
        heard, _ = host.receive_frames(0.2, expected=1)
        assert not heard.any() and "6 or 8 bytes" in host.errors[0]
        host_bus.shutdown()
        host.send_frames(frames)
        assert host.errors and "closed" in host.errors[0]
    finally:
        for bus in (node_bus, host_bus, spy):
            bus.shutdown()


def test_encode_reply_round_trip_through_the_batch_decoder() -> None:
    ranges = MitRanges(-12.5, 12.5, -50.0, 50.0, 0.0, 500.0, 0.0, 5.0, -18.0, 18.0)
    joints = [j for j in _can_joints()][:1]
    codec = MitBatchCodec([type(joints[0])(**{**joints[0].__dict__, "ranges": ranges})])
    data = encode_reply(joints[0].can_id, 1.25, -3.0, 4.5, ranges)
    p, v, t = codec.decode_replies(np.frombuffer(data, dtype=np.uint8).reshape(1, 6))
    ref = decode_reply(data, ranges)
    assert (p[0], v[0], t[0]) == (ref.position, ref.velocity, ref.torque)
