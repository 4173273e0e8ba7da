"""The unitree_g1 backend against the G1 emulator over real DDS (the Unitree SDK's channels, cyclonedds
0.10.2, loopback): a stand through the driver's core, a bad-CRC LowCmd dropped, the sport service not
released -> activation refused with the message, LowState lost -> link fault and damping frames on the wire.

Emulator and backend share this process (the SDK allows one DDS domain per process; the emulator is a thread
here, its own process in the launch file) on a DDS domain of their own, in lockstep, so each check is a
function of the messages exchanged, not of the machine's speed."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("unitree_sdk2py.core.channel", reason="the Unitree SDK is installed by `make setup`")

from humanoid_control.driver.driver_core import DriverCore, DriverMode, DriverSettings, JointCommand
from humanoid_control.hardware import unitree_dds as dds
from humanoid_control.hardware.g1_emulator import G1Emulator, G1EmulatorSettings
from humanoid_control.hardware.types import RobotState
from humanoid_control.hardware.unitree_g1 import UnitreeG1Backend
from humanoid_control.hardware.unitree_hg import new_lowcmd, to_bytes
from humanoid_control.model.robot_config import load_robot_config

DOMAIN = 160 + os.getpid() % 70  # DDS domain of this test process (the G1 protocol, not ROS)


@pytest.fixture(scope="module")
def rig() -> tuple[G1Emulator, UnitreeG1Backend]:
    config = load_robot_config("g1")
    emu = G1Emulator(config, G1EmulatorSettings(lockstep=True))
    emu.start(DOMAIN, "lo")
    backend = UnitreeG1Backend(
        config, network_interface="lo", dds_domain=DOMAIN, emulator=True, lockstep=True, state_timeout_s=5.0
    )
    yield emu, backend
    backend.close()
    emu.stop()


def _run(backend: UnitreeG1Backend, core: DriverCore, ticks: int) -> RobotState:
    """The driver loop's order: read, link fault / activation block to the core, update, write; the last state
    read."""
    state = None
    for _ in range(ticks):
        state = backend.read()
        if backend.link_fault and core.mode != DriverMode.DAMPING:
            core.fault(backend.link_fault)
        core.activation_block = backend.activation_blocker or ""
        backend.write(core.update(state.q, state.dq))
    assert state is not None
    return state


def test_stand_crc_and_sport_mode(rig: tuple[G1Emulator, UnitreeG1Backend]) -> None:
    emu, backend = rig
    config = backend.config
    core = DriverCore(config, DriverSettings(ramp_duration=0.3))
    state = _run(backend, core, 250)  # 0.5 s: ramp from the measured (spawn) pose, then hold
    assert _wait(lambda: emu.status()["ticks"] == backend.counters["lowcmd_sent"])  # all LowCmd stepped
    status = emu.status()
    assert core.mode == DriverMode.HOLD
    assert backend.mode_machine == emu.settings.mode_machine  # copied from LowState: every LowCmd applied
    assert status["applied"] == status["lowcmd_received"] > 0
    assert status["crc_dropped"] == 0 and status["mode_machine_dropped"] == 0
    assert np.max(np.abs(state.q - config.array("default"))) < 0.05
    truth = backend.ground_truth()
    assert truth is not None and truth.position[2] > 0.7  # standing
    assert backend.activation_blocker is None

    # a LowCmd whose CRC is wrong is dropped: no motion and, in lockstep, no physics step
    ticks = status["ticks"]
    rec = new_lowcmd()
    rec["mode_machine"] = backend.mode_machine
    rec["motor_cmd"]["mode"][:29] = 1
    rec["motor_cmd"]["kp"][:29] = 50.0
    data = to_bytes(rec)
    good_crc = int.from_bytes(data[-4:], "little")
    rogue = dds.publisher(backend.hw.lowcmd_topic, dds.hg_types()[0])
    rogue.Write(dds.lowcmd_to_sdk(rec, good_crc ^ 0x1))
    rogue.Close()
    assert _wait(lambda: emu.status()["crc_dropped"] == 1)
    assert emu.status()["ticks"] == ticks
    _run(backend, core, 1)
    assert _wait(lambda: emu.status()["ticks"] == ticks + 1)  # a valid LowCmd still steps

    # the sport service not released: LowCmd ignored; the driver refuses to go active, with the reason
    emu.set_sport_mode(True)
    try:
        core = DriverCore(config, DriverSettings(ramp_duration=0.2))
        core.reset(state.q)
        _run(backend, core, 150)
        blocker = backend.activation_blocker
        assert blocker is not None and "sport" in blocker and "MotionSwitcher" in blocker
        assert emu.status()["ignored_sport_mode"] > 0
        cmd = JointCommand(q=config.array("default"), dq=np.zeros(29), tau_ff=np.zeros(29))
        assert core.mode == DriverMode.HOLD
        assert not core.submit(cmd)
        assert core.mode == DriverMode.HOLD
        assert "sport" in core.counters.last_refusal
    finally:
        emu.set_sport_mode(False)
    _run(backend, core, 60)  # released: the motors follow again, activation allowed
    assert backend.activation_blocker is None
    assert core.submit(JointCommand(q=config.array("default"), dq=np.zeros(29), tau_ff=np.zeros(29)))
    assert core.mode == DriverMode.ACTIVE

    # e-stop -> damping frames on the wire
    core.estop("test")
    _run(backend, core, 1)
    assert _wait(lambda: emu.status()["ticks"] == backend.counters["lowcmd_sent"])
    applied = emu.last_applied
    assert applied is not None and np.all(applied.kp == 0) and np.all(applied.tau_ff == 0)
    assert np.all(applied.kd > 0)


def test_lowstate_lost_damping_on_the_wire(rig: tuple[G1Emulator, UnitreeG1Backend]) -> None:
    emu, backend = rig
    config = backend.config
    core = DriverCore(config, DriverSettings(ramp_duration=0.1))
    state = _run(backend, core, 60)
    assert core.mode == DriverMode.HOLD and backend.link_fault is None
    # the LowState answering the last LowCmd has arrived: the next read consumes it, then the stream stops
    assert _wait(lambda: backend._state_tick == emu.tick_ms == 2 * backend.counters["lowcmd_sent"])
    # wall time waited for each LowState before counting it lost: short from here on (set after the stand, so
    # a loaded machine's late LowStates during it cannot fault the link)
    backend.state_timeout = 0.05
    emu.pause_lowstate(True)
    try:
        tripped = None
        for k in range(1, 7):
            _run(backend, core, 1)
            if backend.link_fault:
                tripped = k
                break
        # read 1 consumes the last LowState sent; reads 2, 3, 4 find none: the 3rd lost period trips
        assert tripped == 4
        assert "LowState lost" in backend.link_fault
        assert core.mode == DriverMode.DAMPING
        # what the emulated motors run once the LowCmd written after the trip arrived: the damping frame
        assert _wait(lambda: emu.status()["ticks"] == backend.counters["lowcmd_sent"])
        applied = emu.last_applied
        assert applied is not None
        assert np.all(applied.kp == 0) and np.all(applied.tau_ff == 0) and np.all(applied.kd > 0)
    finally:
        emu.pause_lowstate(False)
    backend.reset_link()
    backend.state_timeout = 5.0
    core.reset(state.q)
    _run(backend, core, 5)
    assert backend.link_fault is None and core.mode == DriverMode.RAMP


def _wait(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
