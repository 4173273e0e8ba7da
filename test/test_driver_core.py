"""Driver safety core: command validation, modes, watchdog, e-stop, clamping (no ROS, no physics)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from humanoid_control.driver.driver_core import (
    CommandError,
    DriverCore,
    DriverMode,
    DriverSettings,
    JointCommand,
    LowLevelCommand,
    validate_command,
)
from humanoid_control.model.robot_config import ConfigError, load_robot_config

CONFIG = load_robot_config("g1")
NAMES = CONFIG.joint_names
N = len(NAMES)


def _core(**kw: float) -> DriverCore:
    settings = DriverSettings(rate_hz=500.0, watchdog_ticks=10, ramp_duration=0.1, **kw)  # type: ignore[arg-type]
    return DriverCore(CONFIG, settings)


def _to_hold(core: DriverCore) -> None:
    q = np.zeros(N)
    while core.mode == DriverMode.RAMP:
        core.update(q, np.zeros(N))


def _cmd(q: np.ndarray | None = None) -> JointCommand:
    return JointCommand(CONFIG.array("default") if q is None else q, np.zeros(N), np.zeros(N))


def test_validate_reorders_and_fills_missing_fields() -> None:
    perm = list(reversed(NAMES))
    values = np.arange(N, dtype=float) * 0.01
    cmd = validate_command(CONFIG, perm, values, [], [], stamp=1.5)
    assert cmd.q[NAMES.index(perm[0])] == 0.0 and cmd.q[NAMES.index(perm[5])] == pytest.approx(0.05)
    assert np.all(cmd.dq == 0) and np.all(cmd.tau_ff == 0) and cmd.stamp == 1.5


@pytest.mark.parametrize(
    ("names", "position", "match"),
    [
        (NAMES, [0.0] * (N - 1), "wrong length: position has 28 values for 29 names"),
        (NAMES, [math.nan] + [0.0] * (N - 1), "non-finite position for joints \\['left_hip_pitch_joint'\\]"),
        (NAMES, [math.inf] * N, "non-finite position"),
        ([*NAMES[:-1], "tail_joint"], [0.0] * N, "unknown joint names \\['tail_joint'\\]"),
        (NAMES[:-1], [0.0] * (N - 1), "missing joints \\['right_wrist_yaw_joint'\\]"),
        ([*NAMES, NAMES[0]], [0.0] * (N + 1), "duplicate joint names"),
    ],
)
def test_validate_refuses_bad_commands(names: list[str], position: list[float], match: str) -> None:
    with pytest.raises(CommandError, match=match):
        validate_command(CONFIG, names, position, [], [])


def test_boot_ramp_reaches_default_then_hold_then_active() -> None:
    core = _core()
    assert core.mode == DriverMode.RAMP
    assert not core.submit(_cmd())  # ignored during the ramp
    q0 = np.zeros(N)
    first = core.update(q0, np.zeros(N))
    np.testing.assert_allclose(first.q, q0)  # ramp starts at the measured pose
    _to_hold(core)
    hold = core.update(q0, np.zeros(N))
    np.testing.assert_allclose(hold.q, CONFIG.array("default"))
    np.testing.assert_allclose(hold.kp, CONFIG.gain_profile("stand").kp)
    assert core.submit(_cmd()) and core.mode == DriverMode.ACTIVE


def test_watchdog_trips_after_configured_ticks_and_latches() -> None:
    core = _core()
    _to_hold(core)
    core.submit(_cmd())
    submitted_at = core.last_command_tick
    q = np.zeros(N)
    while core.mode == DriverMode.ACTIVE:
        core.update(q, np.zeros(N))
    assert core.mode == DriverMode.DAMPING and "watchdog" in core.mode_reason
    assert core.mode_entered_tick - submitted_at == core.settings.watchdog_ticks + 1
    # damping: kp = 0, tau_ff = 0, kd kept
    cmd = core.update(q, np.ones(N))
    assert np.all(cmd.kp == 0) and np.all(cmd.tau_ff == 0)
    np.testing.assert_allclose(cmd.kd, CONFIG.gain_profile("stand").kd)
    tau = cmd.torque(q, np.ones(N), CONFIG.array("effort"))
    np.testing.assert_allclose(tau, -CONFIG.gain_profile("stand").kd)
    # latched: new commands are ignored
    assert not core.submit(_cmd()) and core.mode == DriverMode.DAMPING


def test_estop_latches_until_reset() -> None:
    core = _core()
    _to_hold(core)
    core.submit(_cmd())
    core.estop()
    for _ in range(100):
        core.update(np.zeros(N), np.zeros(N))
        assert not core.submit(_cmd())
    assert core.mode == DriverMode.DAMPING
    core.reset(np.zeros(N))
    assert core.mode == DriverMode.RAMP
    _to_hold(core)
    assert core.mode == DriverMode.HOLD


def test_targets_and_torques_are_clamped() -> None:
    core = _core()
    _to_hold(core)
    q = CONFIG.array("upper") + 1.0
    core.submit(JointCommand(q, np.full(N, 1e3), np.full(N, 1e3)))
    cmd = core.update(np.zeros(N), np.zeros(N))
    np.testing.assert_allclose(cmd.q, CONFIG.array("upper"))
    np.testing.assert_allclose(cmd.dq, CONFIG.array("velocity"))
    np.testing.assert_allclose(cmd.tau_ff, CONFIG.array("effort"))
    assert core.counters.clamped_targets == 1
    tau = cmd.torque(np.zeros(N), np.zeros(N), CONFIG.array("effort"))
    assert np.all(np.abs(tau) <= CONFIG.array("effort") + 1e-12)


def test_faults_nan_state_and_fall() -> None:
    core = _core()
    _to_hold(core)
    q = np.zeros(N)
    q[3] = math.nan
    cmd = core.update(q, np.zeros(N))
    assert core.mode == DriverMode.DAMPING and "non-finite" in core.mode_reason
    assert np.all(np.isfinite(cmd.q)) and np.all(cmd.kp == 0)
    core = _core()
    _to_hold(core)
    core.update(np.zeros(N), np.zeros(N), base_tilt=math.radians(80))
    assert core.mode == DriverMode.DAMPING and "fall" in core.mode_reason


def test_down_is_reported_with_hysteresis_whatever_the_mode() -> None:
    """``down`` (published on ``~/down``, read by the mode manager): set beyond fall_tilt (60 deg) also when
    the driver already damps (an e-stop before the fall), cleared only below 50 deg; never with the fall
    detection off."""
    core = _core()
    _to_hold(core)
    assert not core.down
    core.estop("e-stop service")
    for deg, down in ((30, False), (61, True), (89, True), (55, True), (49, False), (58, False)):
        core.update(np.zeros(N), np.zeros(N), base_tilt=math.radians(deg))
        assert core.down == down and core.tilt == pytest.approx(math.radians(deg)), deg
    core.update(np.zeros(N), np.zeros(N), base_tilt=math.nan)  # a fault of its own; down keeps its value
    assert not core.down and core.mode == DriverMode.DAMPING
    off = _core(fall_tilt=0.0)
    off.update(np.zeros(N), np.zeros(N), base_tilt=math.radians(90))
    assert not off.down and off.mode == DriverMode.RAMP


def test_command_profile_selection() -> None:
    core = _core()
    core.set_command_profile("low")
    _to_hold(core)
    core.submit(_cmd())
    cmd = core.update(np.zeros(N), np.zeros(N))
    np.testing.assert_allclose(cmd.kp, CONFIG.gain_profile("low").kp)
    with pytest.raises(ConfigError):
        core.set_command_profile("nope")


def test_low_level_law() -> None:
    c = LowLevelCommand(
        np.ones(2), np.zeros(2), np.array([10.0, 10.0]), np.array([1.0, 1.0]), np.array([0.5, 0])
    )
    np.testing.assert_allclose(
        c.torque(np.zeros(2), np.array([1.0, 0.0]), np.array([100.0, 5.0])), [9.5, 5.0]
    )


def test_explicit_command_gains_apply_in_active_and_are_validated() -> None:
    core = _core()
    n = CONFIG.num_joints
    kp, kd = np.linspace(10, 60, n), np.full(n, 1.5)
    core.set_command_gains(kp, kd, name="policy")
    _to_hold(core)
    core.submit(_cmd())
    cmd = core.update(CONFIG.array("default"), np.zeros(n))
    np.testing.assert_array_equal(cmd.kp, kp)
    np.testing.assert_array_equal(cmd.kd, kd)
    for bad_kp, bad_kd, match in [
        (kp[:5], kd, "kp has 5 values"),
        (kp, np.full(n, np.nan), "kd must be finite"),
        (-kp, kd, "kp must be finite and non-negative"),
    ]:
        with pytest.raises(ValueError, match=match):
            core.set_command_gains(bad_kp, bad_kd)
    np.testing.assert_array_equal(core.command_profile.kp, kp)  # a refused change keeps the gains in force


def test_hold_hands_control_back_to_the_driver() -> None:
    core = _core()
    n = CONFIG.num_joints
    _to_hold(core)
    core.submit(_cmd())
    core.update(CONFIG.array("default"), np.zeros(n))
    assert core.mode == DriverMode.ACTIVE
    q_now = CONFIG.array("default") + 0.1
    ok, _ = core.hold(q_now)
    assert ok and core.mode == DriverMode.RAMP
    first = core.update(q_now, np.zeros(n))
    np.testing.assert_allclose(first.q, q_now)  # ramps from where the robot is
    assert core.submit(_cmd()) is False  # commands ignored while ramping back
    core.estop()
    ok, msg = core.hold(q_now)
    assert not ok and "damping" in msg


def test_activation_handshake_needs_a_steady_stream() -> None:
    core = _core(activation_ticks=20)
    _to_hold(core)
    q, z = CONFIG.array("default"), np.zeros(N)
    for _ in range(15):  # 15 ticks of commands, then a 10-tick gap: the count restarts
        core.submit(_cmd())
        core.update(q, z)
    for _ in range(10):
        core.update(q, z)
    assert core.mode == DriverMode.HOLD
    ticks = 0
    while core.mode == DriverMode.HOLD:
        if ticks % 2 == 0:  # small gaps (every other tick) still count
            core.submit(_cmd())
        core.update(q, z)
        ticks += 1
        assert ticks < 100
    assert core.mode == DriverMode.ACTIVE and 19 <= ticks <= 22


def _switch_run(bound: float) -> tuple[DriverCore, list[np.ndarray]]:
    """hold -> active with a command far from the hold (a controller taking over with another pose), then
    active -> ramp (hand-back); the applied torques of every tick."""
    core = _core(switch_max_step=bound)
    q, dq = CONFIG.array("default") + 0.05, np.zeros(N)
    while core.mode == DriverMode.RAMP:
        core.update(q, dq)
    taus = []
    for _ in range(5):
        taus.append(core.update(q, dq).torque(q, dq, core.effort))
    target = CONFIG.array("default") - 0.3
    for k in range(40):
        core.submit(JointCommand(np.clip(target, core.lower, core.upper), np.zeros(N), np.zeros(N), k))
        taus.append(core.update(q, dq).torque(q, dq, core.effort))
    core.hold(q)
    for _ in range(60):
        taus.append(core.update(q, dq).torque(q, dq, core.effort))
    return core, taus


def test_switches_are_recorded_and_blended_within_the_bound() -> None:
    raw_core, raw = _switch_run(0.0)
    core, taus = _switch_run(0.2)
    assert [(s.old, s.new) for s in core.switches] == [("hold", "active"), ("active", "ramp")]
    effort = core.effort
    raw_steps = [float(np.max(np.abs(b - a) / effort)) for a, b in itertools.pairwise(raw)]
    steps = [float(np.max(np.abs(b - a) / effort)) for a, b in itertools.pairwise(taus)]
    assert max(raw_steps) > 0.2  # without the blend the switch jolts
    assert max(steps) <= 0.1 + 1e-9  # with it, the blend changes no joint's torque by more than 10 % a tick
    for rec, raw_rec in zip(core.switches, raw_core.switches, strict=True):
        assert rec.done and rec.blend_ticks >= 1 and raw_rec.blend_ticks == 0
        assert rec.unblended_step == pytest.approx(raw_rec.unblended_step)
        assert 0.2 < raw_rec.step_at_switch <= raw_rec.unblended_step + 1e-9  # (applied torques are clamped)
        assert rec.step_at_switch <= 1e-9 and rec.max_step <= 0.2 + 1e-9
    assert max(steps) == pytest.approx(max(r.max_step for r in core.switches))


def test_damping_is_never_blended() -> None:
    core = _core(switch_max_step=0.01)
    q, dq = CONFIG.array("default") + 0.1, np.zeros(N)
    while core.mode == DriverMode.RAMP:
        core.update(q, dq)
    core.update(q, dq)
    core.estop()
    cmd = core.update(q, dq)
    assert np.all(cmd.kp == 0) and np.all(cmd.tau_ff == 0)
    assert core.switches == []
