"""MIT actuator emulator core and the host-side watchdogs: firmware timeout -> zero torque, silent actuator /
bus error / stale controller -> damping within 3 periods, latched until reset."""

from __future__ import annotations

import pytest

from humanoid_control.hardware.mit_can import (
    ENTER_MOTOR_MODE,
    EXIT_MOTOR_MODE,
    SET_ZERO,
    MitCommand,
    MitRanges,
    damping_command,
    decode_command,
    decode_reply,
    encode_command,
)
from humanoid_control.hardware.mit_emulator import MitActuatorEmulator, MitBusEmulator, MotorModel
from humanoid_control.hardware.watchdog import CommandWatchdog, LinkMonitor, LinkMonitorConfig

AK80_9 = MitRanges(-12.5, 12.5, -50.0, 50.0, 0.0, 500.0, 0.0, 5.0, -18.0, 18.0)
PERIOD = 0.002


def _cmd(command: MitCommand) -> bytes:
    return encode_command(command, AK80_9).data


def test_no_torque_outside_motor_mode_and_commands_ignored_there() -> None:
    a = MitActuatorEmulator(1, AK80_9)
    a.receive(_cmd(MitCommand(1.0, 0.0, 100.0, 1.0, 2.0)), now=0.0)
    assert a.update(0.0, 0.0, now=0.001) == 0.0
    assert a.command is None


def test_motor_mode_runs_the_firmware_law_on_the_quantised_command() -> None:
    a = MitActuatorEmulator(1, AK80_9)
    a.receive(ENTER_MOTOR_MODE, now=0.0)
    assert a.update(0.3, 0.0, now=0.0) == 0.0  # entering alone applies no torque
    frame = _cmd(MitCommand(0.5, 0.1, 20.0, 0.5, 1.0))
    a.receive(frame, now=0.001)
    c = decode_command(frame, AK80_9)
    expected = c.torque + c.kp * (c.position - 0.3) + c.kd * (c.velocity - (-0.2))
    assert a.update(0.3, -0.2, now=0.002) == pytest.approx(expected, abs=1e-12)
    # clamped to the model's torque range
    a.receive(_cmd(MitCommand(5.0, 0.0, 500.0, 0.0, 0.0)), now=0.003)
    assert a.update(0.0, 0.0, now=0.004) == AK80_9.t_max
    a.receive(EXIT_MOTOR_MODE, now=0.005)
    assert a.update(0.0, 0.0, now=0.006) == 0.0


def test_firmware_timeout_zeroes_the_command() -> None:
    a = MitActuatorEmulator(1, AK80_9, MotorModel(timeout=0.025))
    a.receive(ENTER_MOTOR_MODE, now=0.0)
    a.receive(_cmd(MitCommand(0.0, 0.0, 0.0, 0.0, 3.0)), now=0.010)
    assert a.update(0.0, 0.0, now=0.034) == pytest.approx(3.0, abs=AK80_9.step("t"))
    assert a.update(0.0, 0.0, now=0.0351) == 0.0  # 25.1 ms after the last frame
    assert a.timeouts == 1 and a.motor_mode  # still in motor mode: the next command applies again
    a.receive(_cmd(MitCommand(0.0, 0.0, 0.0, 0.0, 3.0)), now=0.040)
    assert a.update(0.0, 0.0, now=0.041) == pytest.approx(3.0, abs=AK80_9.step("t"))


def test_zero_frame_only_outside_motor_mode() -> None:
    a = MitActuatorEmulator(3, AK80_9)
    a.update(1.25, 0.0, now=0.0)
    reply = decode_reply(a.receive(SET_ZERO, now=0.0), AK80_9)
    assert reply.can_id == 3 and reply.position == pytest.approx(0.0, abs=AK80_9.step("p"))
    a.receive(ENTER_MOTOR_MODE, now=0.0)
    a.update(2.0, 0.0, now=0.001)
    reply = decode_reply(a.receive(SET_ZERO, now=0.001), AK80_9)  # ignored in motor mode
    assert reply.position == pytest.approx(0.75, abs=AK80_9.step("p"))


def test_reply_reports_state_and_extended_bytes() -> None:
    a = MitActuatorEmulator(9, AK80_9, MotorModel(reply_extended=True, temperature_raw=70))
    a.receive(ENTER_MOTOR_MODE, now=0.0)
    a.receive(_cmd(MitCommand(0.0, 0.0, 0.0, 0.0, -4.0)), now=0.0)
    a.update(-0.4, 2.5, now=0.001)
    reply = decode_reply(a.reply(), AK80_9)
    assert (reply.can_id, reply.temperature_raw, reply.error_raw) == (9, 70, 0)
    assert reply.position == pytest.approx(-0.4, abs=AK80_9.step("p"))
    assert reply.velocity == pytest.approx(2.5, abs=AK80_9.step("v"))
    assert reply.torque == pytest.approx(-4.0, abs=2 * AK80_9.step("t"))


def test_torque_lag() -> None:
    a = MitActuatorEmulator(1, AK80_9, MotorModel(torque_time_constant=0.002))
    a.receive(ENTER_MOTOR_MODE, now=0.0)
    a.receive(_cmd(MitCommand(0.0, 0.0, 0.0, 0.0, 8.0)), now=0.0)
    first = a.update(0.0, 0.0, now=0.001, dt=0.001)
    assert 0.0 < first < 8.0
    for k in range(2, 21):  # within the 25 ms firmware timeout of the single command frame
        a.update(0.0, 0.0, now=0.001 * k, dt=0.001)
    assert a.torque == pytest.approx(8.0, abs=AK80_9.step("t"))


def test_bus_emulator_routes_by_id_and_can_silence_one() -> None:
    bus = MitBusEmulator([MitActuatorEmulator(1, AK80_9), MitActuatorEmulator(2, AK80_9)], host_id=0)
    assert bus.handle(1, ENTER_MOTOR_MODE, 0.0)[0][0] == 0
    assert bus.handle(7, ENTER_MOTOR_MODE, 0.0) == []
    bus.silenced.add(2)
    assert bus.handle(2, ENTER_MOTOR_MODE, 0.0) == []
    assert bus.actuators[2].motor_mode  # it still acts, it just does not answer
    with pytest.raises(ValueError):
        MitBusEmulator([MitActuatorEmulator(1, AK80_9), MitActuatorEmulator(1, AK80_9)])


def test_command_watchdog() -> None:
    w = CommandWatchdog(0.025)
    assert w.expired(0.0)  # never fed
    w.feed(1.0)
    assert not w.expired(1.025)
    assert w.expired(1.0251)
    w.clear()
    assert w.expired(1.0)


def test_silent_device_trips_damping_on_the_third_missed_period_and_latches() -> None:
    monitor = LinkMonitor(["hip", "knee"], LinkMonitorConfig(command_timeout=1.0, max_missed=3))
    monitor.start(0.0)
    t = 0.0
    for _ in range(5):
        t += PERIOD
        monitor.reply("hip")
        monitor.reply("knee")
        assert not monitor.check(t).damping
    decisions = []
    for _ in range(3):  # the knee goes silent
        t += PERIOD
        monitor.reply("hip")
        decisions.append(monitor.check(t))
    assert [d.damping for d in decisions] == [False, False, True]
    assert decisions[-1].tripped_now and decisions[-1].reasons == ("knee silent for 3 periods",)
    t += PERIOD
    monitor.reply("hip")
    monitor.reply("knee")  # the knee is back, but damping stays latched
    later = monitor.check(t)
    assert later.damping and not later.tripped_now
    monitor.reset(t)
    monitor.reply("hip")
    monitor.reply("knee")
    assert not monitor.check(t + PERIOD).damping


def test_bus_error_trips_at_the_next_check() -> None:
    monitor = LinkMonitor([1], LinkMonitorConfig())
    monitor.start(0.0)
    monitor.command(0.0)
    monitor.reply(1)
    monitor.bus_error("bus-off")
    decision = monitor.check(PERIOD)
    assert decision.damping and decision.reasons == ("bus error: bus-off",)


def test_stale_controller_command_trips_after_the_firmware_timeout() -> None:
    monitor = LinkMonitor([1], LinkMonitorConfig(command_timeout=0.025, max_missed=3))
    monitor.start(0.0)
    tripped = None
    for k in range(1, 50):
        if k <= 5:
            monitor.command(k * PERIOD)  # the controller stops commanding after 10 ms
        monitor.reply(1)
        if monitor.check(k * PERIOD).damping:
            tripped = k
            break
    assert tripped == 18  # first period more than 25 ms after the last command (k = 5)
    assert monitor.faults[0].startswith("no controller command for 26.0 ms")


def test_host_sends_damping_and_the_actuator_brakes() -> None:
    """Closed loop through the codec: when the monitor trips, the host's damping frame makes the emulated
    actuator produce -kd * velocity (and no stiffness, no feed-forward)."""
    actuator = MitActuatorEmulator(1, AK80_9)
    bus = MitBusEmulator([actuator])
    monitor = LinkMonitor([1], LinkMonitorConfig(command_timeout=0.025, max_missed=3))
    bus.handle(1, ENTER_MOTOR_MODE, 0.0)
    monitor.start(0.0)
    kd = 2.0
    t, velocity, damped_at = 0.0, 3.0, None
    for k in range(40):
        t = k * PERIOD
        if t < 0.02:
            monitor.command(t)
        decision = monitor.check(t)
        command = damping_command(kd) if decision.damping else MitCommand(0.0, 0.0, 50.0, 1.0, 0.0)
        for _, reply in bus.handle(1, encode_command(command, AK80_9).data, t):
            monitor.reply(decode_reply(reply, AK80_9).can_id)
        torque = actuator.update(0.1, velocity, t)
        if decision.damping and damped_at is None:
            damped_at = t
            # 0 is not a code on a symmetric range (2^12 - 1 codes): the velocity target and the feed-forward
            # torque of the damping frame are half a step off zero
            sent = decode_command(encode_command(command, AK80_9).data, AK80_9)
            assert sent.kp == 0.0 and 0 < abs(sent.velocity) <= AK80_9.step("v") / 2
            assert 0 < abs(sent.torque) <= AK80_9.step("t") / 2
            assert torque == pytest.approx(sent.torque + sent.kd * (sent.velocity - velocity), abs=1e-12)
            assert torque == pytest.approx(-kd * velocity, abs=0.03)
    assert damped_at is not None and damped_at <= 0.02 + 0.025 + PERIOD
