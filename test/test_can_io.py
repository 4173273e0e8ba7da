"""MIT actuators over python-can's virtual bus: host frames reach emulated actuators, replies decode, a silent
actuator trips damping within 3 periods. Skipped where python-can is not installed."""

from __future__ import annotations

import itertools

import pytest

from humanoid_control.hardware.can_io import HAVE_PYTHON_CAN, EmulatedBusNode, MitHostBus, open_bus
from humanoid_control.hardware.hardware_config import load_can_mit_config
from humanoid_control.hardware.mit_can import ENTER_MOTOR_MODE, MitCommand
from humanoid_control.hardware.mit_emulator import MitActuatorEmulator, MitBusEmulator
from humanoid_control.hardware.watchdog import LinkMonitor, LinkMonitorConfig
from humanoid_control.model.robot_config import load_robot_config

pytestmark = pytest.mark.skipif(
    not HAVE_PYTHON_CAN, reason="python-can not installed (pip install python-can)"
)

CM = load_can_mit_config(load_robot_config("g1"))
_channels = itertools.count()


@pytest.fixture
def link():  # type: ignore[no-untyped-def]
    """The left leg's bus (can0 layout) on a fresh virtual channel: host end, emulated end, the actuators."""
    channel = f"test_can_io_{next(_channels)}"
    joints = [j for j in CM.joints if j.bus == "can0"]
    actuators = [MitActuatorEmulator(j.can_id, j.ranges) for j in joints]
    emulator = MitBusEmulator(actuators, host_id=CM.host_id)
    host_bus = open_bus(channel, interface="virtual")
    node_bus = open_bus(channel, interface="virtual")
    clock = [0.0]
    yield MitHostBus(host_bus, joints), EmulatedBusNode(node_bus, emulator, clock=lambda: clock[0]), joints
    host_bus.shutdown()
    node_bus.shutdown()


def test_commands_reach_the_actuators_and_replies_decode(link) -> None:  # type: ignore[no-untyped-def]
    host, node, joints = link
    host.send_special(ENTER_MOTOR_MODE)
    assert node.poll(timeout=0.5) == len(joints)
    replies = host.collect(timeout=0.5)
    assert sorted(replies) == [j.can_id for j in joints]
    actuators = node.emulator.actuators
    assert all(a.motor_mode for a in actuators.values())

    for j in joints:
        actuators[j.can_id].update(j.ranges.p_min + 1.0, 0.0, now=0.0)
    host.send_commands({j.can_id: MitCommand(0.2, 0.0, 30.0, 1.0, 0.5) for j in joints})
    host.send_commands({joints[0].can_id: MitCommand(0.0, 0.0, 5000.0, 1.0, 0.0)})  # kp beyond range
    assert host.clamped == {joints[0].joint: ("kp",)}
    node.poll(timeout=0.5)
    replies = host.collect(timeout=0.5)
    assert len(replies) == len(joints)
    for j in joints:
        assert replies[j.can_id].position == pytest.approx(j.ranges.p_min + 1.0, abs=j.ranges.step("p"))
    assert actuators[joints[0].can_id].command.kp == joints[0].ranges.kp_max
    assert actuators[joints[1].can_id].command.kp == pytest.approx(30.0, abs=joints[1].ranges.step("kp"))


def test_silent_actuator_trips_damping_within_three_periods(link) -> None:  # type: ignore[no-untyped-def]
    host, node, joints = link
    monitor = LinkMonitor([j.can_id for j in joints], LinkMonitorConfig(command_timeout=1.0, max_missed=3))
    monitor.start(0.0)
    silent = joints[2].can_id
    tripped_at = None
    for k in range(1, 10):
        if k == 3:
            node.emulator.silenced.add(silent)
        host.send_commands({j.can_id: MitCommand() for j in joints})
        node.poll(timeout=0.5)
        for can_id in host.collect(timeout=0.05):
            monitor.reply(can_id)
        decision = monitor.check(k * 0.002)
        if decision.damping:
            tripped_at = k
            assert decision.reasons == (f"{silent} silent for 3 periods",)
            break
    assert tripped_at == 5  # silent from period 3: periods 3, 4, 5 missed
