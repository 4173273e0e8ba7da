"""The can_mit backend against the MIT actuator emulators (python-can's virtual bus, MuJoCo behind them) in
lockstep: a stand through the driver's core, a silent actuator -> damping frames within 3 periods, a bus error
-> damping at the next period."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("can", reason="python-can is installed by `make setup`")

from humanoid_control.driver.driver_core import DriverCore, DriverMode, DriverSettings
from humanoid_control.hardware.can_mit_backend import CanMitBackend
from humanoid_control.hardware.types import RobotState
from humanoid_control.model.robot_config import load_robot_config


def _run(backend: CanMitBackend, core: DriverCore, ticks: int) -> tuple[RobotState, int | None]:
    """The driver loop's order; the last state and the first tick (1-based) with a link fault, if any."""
    tripped = None
    state = None
    for k in range(1, ticks + 1):
        state = backend.read()
        if backend.link_fault and core.mode != DriverMode.DAMPING:
            core.fault(backend.link_fault)
            tripped = tripped or k
        backend.write(core.update(state.q, state.dq))
    assert state is not None
    return state, tripped


def _damping_on_the_wire(backend: CanMitBackend) -> bool:
    """Every emulated actuator holds a damping command (kp = 0, a kd, torque ~ 0: half a code)."""
    cmds = [a.command for a in backend.emu.actuators]
    return all(
        c is not None and c.kp == 0.0 and c.kd > 0.0 and abs(c.torque) <= 2 * a.ranges.step("t")
        for c, a in zip(cmds, backend.emu.actuators, strict=True)
    )


def _answered(backend: CanMitBackend) -> None:
    """Wait until the emulator has stepped for (and answered) every period written."""
    import time

    deadline = time.monotonic() + 10.0
    while backend.emu.ticks < backend._periods and time.monotonic() < deadline:
        time.sleep(0.001)
    assert backend.emu.ticks == backend._periods


@pytest.fixture
def stood() -> tuple[CanMitBackend, DriverCore]:
    config = load_robot_config("g1")
    backend = CanMitBackend(config, emulator=True, lockstep=True, reply_timeout_s=0.5)
    core = DriverCore(config, DriverSettings(ramp_duration=0.2))
    state, tripped = _run(backend, core, 150)  # ramp from the measured pose, then hold
    assert tripped is None and core.mode == DriverMode.HOLD
    assert np.max(np.abs(state.q - config.array("default"))) < 0.05
    assert backend.ground_truth().position[2] > 0.7
    yield backend, core
    backend.close()


def test_silent_actuator_damping_within_3_periods(stood: tuple[CanMitBackend, DriverCore]) -> None:
    backend, core = stood
    assert not _damping_on_the_wire(backend)
    _answered(backend)
    backend.emu.silence("can1", 4)  # right knee: obeys, never answers
    _state, tripped = _run(backend, core, 6)
    # read 1 collects the answers to the frames sent before; the frames of periods 1, 2, 3 go unanswered and
    # read 4 (the 3rd without an answer) trips: the frames of that period are damping frames
    assert tripped == 4
    assert "('can1', 4) silent for 3 periods" in backend.link_fault
    assert core.mode == DriverMode.DAMPING
    _run(backend, core, 1)  # the frames of the period after the trip have been answered: in force
    assert _damping_on_the_wire(backend)


def test_bus_error_damping(stood: tuple[CanMitBackend, DriverCore]) -> None:
    backend, core = stood
    _answered(backend)
    backend.buses["can3"].bus.shutdown()  # the interface goes down: sends fail
    _state, tripped = _run(backend, core, 3)
    assert tripped is not None and tripped <= 2
    assert "bus error" in backend.link_fault
    assert core.mode == DriverMode.DAMPING
    # the buses still up carry damping frames
    ids = {(j.bus, j.can_id) for j in backend.hw.joints if j.bus != "can3"}
    for a, j in zip(backend.emu.actuators, backend.hw.joints, strict=True):
        if (j.bus, j.can_id) in ids:
            assert a.command is not None and a.command.kp == 0.0 and a.command.kd > 0.0
