"""Pure cores of the mode manager: transition rules, command mux, joystick mapping, operation record, keys."""

from __future__ import annotations

import json
import math

import pytest

from humanoid_control.modes.command_mux import CommandMux, MuxSettings, Source, VelocityLimits
from humanoid_control.modes.joy_mapping import JoyCommand, JoyMapping
from humanoid_control.modes.mode_machine import Available, Mode, ModeMachine, Request
from humanoid_control.modes.record import OperationRecord
from humanoid_control.modes.teleop_keys import TeleopKeys

POLICY = Available(policy=True)


def booted() -> ModeMachine:
    m = ModeMachine()
    m.on_driver_mode("ramp", 0.0)
    assert m.mode == Mode.BOOT
    tr = m.on_driver_mode("hold", 2.0)
    assert tr is not None and m.mode == Mode.HOLD
    return m


def test_boot_refuses_all_but_estop_and_damp() -> None:
    m = ModeMachine()
    for req in (Request.STAND, Request.RUN_POLICY, Request.AUTONOMY_ON):
        d = m.decide(req, POLICY)
        assert not d.allowed and "still booting" in d.reason
    assert m.decide(Request.ESTOP, POLICY).allowed
    assert m.decide(Request.DAMP, POLICY).allowed
    assert not m.decide(Request.RESET, POLICY).allowed


ALL = Available(policy=True, walking=True, wbc=True)


def test_walk_is_refused_with_the_reason_when_no_walking_controller_is_reachable() -> None:
    m = booted()
    d = m.decide(Request.WALK, Available(policy=True, wbc=True))
    assert not d.allowed and d.reason == (
        "walk: no walking controller is reachable (launch with mode_manager:=true and mode_walk:=mpc or "
        "controller:=mpc_walk)"
    )
    assert m.mode == Mode.HOLD and not m.walk_active
    assert m.decide(Request.WALK, Available(walking=True)).allowed
    # still refused while booting or damping, with those reasons
    assert "still booting" in ModeMachine().decide(Request.WALK, ALL).reason
    m.commit(m.decide(Request.ESTOP, ALL), 3.0)
    d = m.decide(Request.WALK, ALL)
    assert not d.allowed and d.reason == "walk: the driver is in damping; call reset first"


def test_walk_starts_the_walking_controller_after_stopping_the_one_in_charge() -> None:
    m = booted()
    d = m.decide(Request.WALK, ALL)
    assert d.allowed and d.actions == ("walk_start",) and d.target == Mode.WALK
    assert "walking controller follows /cmd_vel" in d.reason
    m.commit(d, 2.5)
    assert m.mode == Mode.WALK and m.walk_active
    assert m.decide(Request.WALK, ALL).reason == "walk: already in walk"
    assert m.decide(Request.WALK, ALL).actions == ()
    # walk -> stand (WBC): the walking controller stops (the driver holds), then the WBC starts
    d = m.decide(Request.STAND, ALL)
    assert d.actions == ("walk_stop", "wbc_start") and d.target == Mode.STAND
    m.commit(d, 4.0)
    assert not m.walk_active and m.wbc_active
    # stand (WBC) -> walk: the WBC stops first
    d = m.decide(Request.WALK, ALL)
    assert d.actions == ("wbc_stop", "walk_start")
    m.commit(d, 5.0)
    assert m.walk_active and not m.wbc_active
    # walk -> run_policy, and back
    d = m.decide(Request.RUN_POLICY, ALL)
    assert d.actions == ("walk_stop", "policy_start")
    m.commit(d, 6.0)
    assert m.decide(Request.WALK, ALL).actions == ("policy_stop", "walk_start")
    m.commit(m.decide(Request.WALK, ALL), 7.0)
    # walk -> stand without a WBC: the driver's hold
    d = m.decide(Request.STAND, Available(walking=True))
    assert d.actions == ("walk_stop",) and d.reason == "stand: standing (the driver's hold)"
    # autonomy may be switched on while walking (the mux's /cmd_vel drives the walking controller)
    assert m.decide(Request.AUTONOMY_ON, ALL).allowed


def test_leaving_walk_is_refused_while_moving_or_stepping() -> None:
    m = booted()
    m.commit(m.decide(Request.WALK, ALL), 2.5)
    for req in (Request.STAND, Request.RUN_POLICY):
        d = m.decide(req, ALL, moving=True)
        assert not d.allowed and d.reason == f"{req.value}: the robot is walking; command zero velocity first"
        d = m.decide(req, ALL, moving=False, stepping=True)
        assert not d.allowed and d.reason == (
            f"{req.value}: the walking controller is still stepping; wait until it stands on both feet"
        )
    assert m.mode == Mode.WALK and m.walk_active
    assert m.decide(Request.STAND, ALL, moving=False, stepping=False).allowed
    # stepping only concerns walk: the policy is left by the velocity rule alone
    p = booted()
    p.commit(p.decide(Request.RUN_POLICY, ALL), 2.5)
    assert p.decide(Request.STAND, ALL, stepping=True).allowed


@pytest.mark.parametrize("request_", [Request.ESTOP, Request.DAMP])
def test_damp_and_estop_stop_the_walking_controller_even_mid_step(request_: Request) -> None:
    m = booted()
    m.commit(m.decide(Request.WALK, ALL), 2.5)
    d = m.decide(request_, ALL, moving=True, stepping=True)
    assert d.allowed and d.actions == ("driver_estop", "walk_stop") and d.target == Mode.DAMP
    m.commit(d, 3.0)
    assert m.mode == Mode.DAMP and not m.walk_active
    # reset -> hold; walk again starts it again
    m.commit(m.decide(Request.RESET, ALL), 4.0)
    m.on_driver_mode("hold", 6.0)
    assert m.decide(Request.WALK, ALL).actions == ("walk_start",)


def test_a_driver_fault_while_walking_enters_damp() -> None:
    m = booted()
    m.commit(m.decide(Request.WALK, ALL), 2.5)
    m.on_driver_mode("active", 2.7)
    tr = m.on_driver_mode("damping", 3.0)
    assert tr is not None and m.mode == Mode.DAMP  # the node then stops the walking controller
    assert m.walk_active  # (cleared by the node, which calls walk_stop)


def test_initial_mode_walk() -> None:
    from humanoid_control.modes.mode_machine import INITIAL_MODES

    assert INITIAL_MODES["mpc_walk"] == Mode.WALK and INITIAL_MODES["walk"] == Mode.WALK


def test_sequence_hold_stand_policy_estop_reset_stand() -> None:
    m = booted()
    d = m.decide(Request.STAND, POLICY)
    assert d.allowed and d.actions == () and d.target == Mode.STAND
    m.commit(d, 2.5)
    d = m.decide(Request.RUN_POLICY, POLICY)
    assert d.actions == ("policy_start",) and d.target == Mode.RUN_POLICY
    m.commit(d, 3.0)
    assert m.decide(Request.RUN_POLICY, POLICY).reason.endswith("already in run_policy")
    d = m.decide(Request.ESTOP, POLICY)
    assert d.actions == ("driver_estop",)
    m.commit(d, 4.0)
    assert m.mode == Mode.DAMP
    for req in (Request.STAND, Request.RUN_POLICY, Request.AUTONOMY_ON):
        d = m.decide(req, POLICY)
        assert not d.allowed and "the driver is in damping; call reset first" in d.reason
    d = m.decide(Request.RESET, POLICY)
    assert d.actions == ("driver_reset", "policy_reset") and d.target == Mode.HOLD
    m.commit(d, 4.5)
    assert not m.decide(Request.RESET, POLICY).allowed
    m.commit(m.decide(Request.STAND, POLICY), 7.0)
    assert [t.new.value for t in m.history] == ["hold", "stand", "run_policy", "damp", "hold", "stand"]


def test_leaving_the_policy_stops_it_first() -> None:
    m = booted()
    m.commit(m.decide(Request.RUN_POLICY, POLICY), 3.0)
    assert m.decide(Request.STAND, POLICY).actions == ("policy_stop",)
    assert not m.decide(Request.RUN_POLICY, Available()).allowed  # no runner reachable


def test_driver_fault_and_direct_reset_are_followed() -> None:
    m = booted()
    tr = m.on_driver_mode("damping", 5.0)
    assert tr is not None and m.mode == Mode.DAMP and "damping" in tr.reason
    tr = m.on_driver_mode("ramp", 6.0)
    assert tr is not None and m.mode == Mode.HOLD


def test_busy_defers_reports_and_sync_applies_them() -> None:
    m = booted()
    m.busy = True
    assert m.on_driver_mode("damping", 5.0) is None and m.mode == Mode.HOLD
    m.busy = False
    assert m.sync(5.1) is not None and m.mode == Mode.DAMP


def test_policy_runner_stopping_by_itself_means_stand() -> None:
    m = booted()
    m.on_policy_state("wait_state", 2.0)
    m.commit(m.decide(Request.RUN_POLICY, POLICY), 2.0)
    assert m.on_policy_state("hold", 2.0) is None  # its idle start-up state, arriving late
    m.on_policy_state("wait_state", 3.0)
    m.on_policy_state("run", 3.1)
    tr = m.on_policy_state("hold", 8.0)
    assert tr is not None and m.mode == Mode.STAND


# ---------------------------------------------------------------------- mux
def test_timeout_gives_a_published_zero() -> None:
    mux = CommandMux(MuxSettings(teleop_timeout_s=0.5))
    mux.teleop_twist(0.0, 0.0, 0.0, 0.0)
    mux.update(0.0)
    mux.teleop_twist(0.0, 0.3, 0.0, 0.0)
    out = [mux.update(0.02 * k) for k in range(1, 20)]
    assert out[-1].vx == pytest.approx(0.3) and out[-1].source == Source.TELEOP
    late = mux.update(0.6)
    assert late.velocity == (0.0, 0.0, 0.0) and late.source == Source.NONE


def test_acceleration_limit_and_immediate_stop() -> None:
    mux = CommandMux(MuxSettings(limits=VelocityLimits(ax_max=1.0)))
    mux.update(0.0)
    mux.teleop_twist(0.0, 0.8, 0.0, 0.0)
    assert mux.update(0.1).vx == pytest.approx(0.1)
    assert mux.update(0.2).vx == pytest.approx(0.2)
    mux.teleop_twist(0.2, 0.0, 0.0, 0.0)
    assert mux.update(0.22).vx == 0.0


def test_nan_refused_and_out_of_limit_clipped_and_counted() -> None:
    mux = CommandMux(MuxSettings(limits=VelocityLimits(vx_max=0.5, ax_max=100.0)))
    assert mux.teleop_twist(0.0, math.nan, 0.0, 0.0) == (False, False)
    assert mux.teleop_twist(0.0, 0.0, math.inf, 0.0) == (False, False)
    assert mux.counters.refused["teleop"] == 2
    mux.update(0.0)
    mux.teleop_twist(0.0, 5.0, 0.0, 0.0)
    assert mux.counters.clipped["teleop"] == 1
    assert mux.update(0.1).vx == pytest.approx(0.5)
    assert not mux.autonomy_twist(0.1, 0.0, math.nan, 0.0)
    assert mux.counters.refused["autonomy"] == 1


def test_autonomy_drives_and_teleop_takes_over() -> None:
    mux = CommandMux(MuxSettings(limits=VelocityLimits(ax_max=100.0, awz_max=100.0)))
    mux.update(0.0)
    mux.set_autonomy(True)
    mux.autonomy_twist(0.0, 0.0, 0.0, 0.5)
    mux.teleop_twist(0.0, 0.0, 0.0, 0.0)  # an idle teleop publishing zeros does not take over
    out = mux.update(0.1)
    assert out.source == Source.AUTONOMY and out.wz == pytest.approx(0.5) and mux.autonomy
    accepted, takeover = mux.teleop_twist(0.1, 0.3, 0.0, 0.0)
    assert accepted and takeover and not mux.autonomy and mux.counters.takeovers == 1
    out = mux.update(0.2)
    assert out.source == Source.TELEOP and out.vx == pytest.approx(0.3) and out.wz == 0.0
    mux.autonomy_twist(0.2, 0.0, 0.0, 0.5)  # autonomy stays off until set again
    assert mux.update(0.3).source == Source.TELEOP
    mux.set_autonomy(True)
    assert mux.update(0.35).source == Source.AUTONOMY


def test_stale_autonomy_is_zero_not_teleop() -> None:
    mux = CommandMux()
    mux.set_autonomy(True)
    mux.autonomy_twist(0.0, 0.2, 0.0, 0.0)
    out = mux.update(1.0)
    assert out.velocity == (0.0, 0.0, 0.0) and out.source == Source.NONE


def test_joy_deadman_drives_and_release_gives_zero() -> None:
    mapping = JoyMapping()
    mux = CommandMux(MuxSettings(limits=VelocityLimits(ax_max=100.0)))
    mux.update(0.0)
    axes = [0.0, 0.5, 0.0, 0.0]
    held = [0, 0, 0, 0, 1]
    cmd = mapping.map(axes, held)
    assert isinstance(cmd, JoyCommand) and cmd.deadman and cmd.velocity[0] == pytest.approx(0.4)
    mux.joy(0.0, cmd)
    assert mux.update(0.1).vx == pytest.approx(0.4)
    mux.joy(0.1, mapping.map(axes, [0, 0, 0, 0, 0]))
    out = mux.update(0.12)
    assert out.velocity == (0.0, 0.0, 0.0) and out.source == Source.NONE


def test_joy_deadman_takes_over_from_autonomy() -> None:
    mux = CommandMux()
    mux.set_autonomy(True)
    assert mux.joy(0.0, JoyMapping().map([0.0] * 4, [0, 0, 0, 0, 1]))
    assert not mux.autonomy


def test_joy_with_too_few_axes_is_refused_with_a_clear_message() -> None:
    mapping = JoyMapping()
    result = mapping.map([0.0, 0.0], [0] * 8)
    assert isinstance(result, str)
    assert "2 axes" in result and "needs 4" in result
    mux = CommandMux()
    mux.joy(0.0, result)
    assert mux.counters.refused["joy"] == 1 and "2 axes" in mux.counters.last_refusal
    assert isinstance(mapping.map([0.0] * 4, [0, 0]), str)
    assert "non-finite" in str(mapping.map([math.nan, 0.0, 0.0, 0.0], [0] * 5))


def test_joy_buttons_on_rising_edge_and_estop_without_deadman() -> None:
    mapping = JoyMapping()
    cmd = mapping.map([0.0] * 4, [0, 1, 0, 1, 0])  # B (estop) and Y (run_policy) without the deadman
    assert isinstance(cmd, JoyCommand) and cmd.pressed == ("estop",)
    cmd = mapping.map([0.0] * 4, [0, 0, 0, 1, 1], previous=[0, 0, 0, 0, 1])
    assert isinstance(cmd, JoyCommand) and cmd.pressed == ("run_policy",)
    cmd = mapping.map([0.0] * 4, [0, 0, 0, 1, 1], previous=[0, 0, 0, 1, 1])
    assert isinstance(cmd, JoyCommand) and cmd.pressed == ()
    with pytest.raises(ValueError):
        JoyMapping(buttons={"fly": 2}).check()


# ---------------------------------------------------------------------- record
def test_record_shares_and_counts() -> None:
    rec = OperationRecord()
    rec.account(0.0, "idle")
    rec.account(2.0, "teleop")
    rec.event(2.0, "source", source="teleop")
    rec.account(5.0, "autonomy")
    rec.event(5.0, "autonomy", on=True)
    rec.account(6.5, "teleop")
    rec.event(6.5, "takeover")
    rec.event(7.0, "estop")
    rec.event(7.1, "refusal", request="stand", reason="stand: the driver is in damping; call reset first")
    rec.account(8.0, "idle")
    s = rec.summary()
    assert s["shares_s"] == {"teleop": 4.5, "autonomy": 1.5, "idle": 2.0}
    assert s["duration_s"] == 8.0 and s["shares"]["teleop"] == pytest.approx(0.5625)
    assert s["counts"]["takeovers"] == 1 and s["counts"]["estops"] == 1 and s["counts"]["refusals"] == 1
    assert json.loads(rec.to_json())["events"][0]["kind"] == "source"
    with pytest.raises(ValueError):
        rec.event(9.0, "party")


def test_record_counts_the_time_in_each_mode() -> None:
    rec = OperationRecord()
    rec.account(0.0, "idle", "boot")
    rec.account(2.0, "idle", "hold")
    rec.account(2.5, "idle", "walk")
    rec.account(3.0, "teleop")  # the mode stays: walk
    rec.account(6.0, "idle", "stand")
    rec.account(7.0, "idle", "damp")
    rec.account(7.5, "idle")
    s = rec.summary()
    modes = {"boot": 2.0, "hold": 0.5, "stand": 1.0, "walk": 3.5, "run_policy": 0.0, "damp": 0.5}
    assert s["modes_s"] == modes
    assert s["shares_s"]["teleop"] == 3.0 and s["duration_s"] == 7.5
    with pytest.raises(ValueError):
        rec.account(8.0, "idle", "fly")


# ---------------------------------------------------------------------- keys
def test_keys_steps_limits_stop_and_requests() -> None:
    keys = TeleopKeys()
    for _ in range(3):
        keys.press("w")
    keys.press("KEY_UP")
    keys.press("a")
    assert keys.velocity == pytest.approx((0.4, 0.0, 0.2))
    for _ in range(20):
        keys.press("z")
    assert keys.vy == pytest.approx(0.4)
    keys.press(" ")
    assert keys.velocity == (0.0, 0.0, 0.0)
    keys.press("w")
    r = keys.press("e")
    assert r.request == ("estop", None) and keys.velocity == (0.0, 0.0, 0.0)
    assert keys.press("3").request == ("run_policy", None)
    assert keys.press("o").request == ("set_autonomy", True)
    assert keys.press("R").request == ("respawn", None) and keys.press("r").request == ("reset", None)
    assert keys.press("q").quit
    assert not keys.press("#").known


def test_stand_uses_the_wbc_where_reachable_and_switches_stop_it_first() -> None:
    both = Available(policy=True, wbc=True)
    m = booted()
    d = m.decide(Request.STAND, both)
    assert d.actions == ("wbc_start",) and "WBC" in d.reason
    m.commit(d, 2.5)
    assert m.wbc_active
    d = m.decide(Request.RUN_POLICY, both)
    assert d.actions == ("wbc_stop", "policy_start")
    m.commit(d, 3.0)
    assert not m.wbc_active
    assert m.decide(Request.STAND, both).actions == ("policy_stop", "wbc_start")
    m.commit(m.decide(Request.STAND, both), 4.0)
    assert m.decide(Request.ESTOP, both).actions == ("driver_estop", "wbc_stop")
    m.commit(m.decide(Request.ESTOP, both), 5.0)
    assert not m.wbc_active


def test_leaving_a_walking_policy_is_refused_until_it_stands_still() -> None:
    m = booted()
    m.commit(m.decide(Request.RUN_POLICY, POLICY), 3.0)
    d = m.decide(Request.STAND, POLICY, moving=True)
    assert not d.allowed and d.reason == "stand: the robot is walking; command zero velocity first"
    assert m.decide(Request.STAND, POLICY, moving=False).allowed
    assert m.decide(Request.ESTOP, POLICY, moving=True).allowed


# ---------------------------------------------------------------------- recovery from a fall
SIM = Available(policy=True, respawn=True)  # the driver offers ~/respawn: a simulator
DOWN = "base tilt 88 deg beyond the driver's fall_tilt_deg 60"


def fallen(available: Available) -> ModeMachine:
    """run_policy, e-stop, the robot falls: damp, the runner faulted (the driver went to damping), down."""
    m = booted()
    m.commit(m.decide(Request.RUN_POLICY, available), 2.5)
    m.on_policy_state("run", 2.6)
    m.commit(m.decide(Request.ESTOP, available), 4.0)
    m.on_policy_state("fault", 4.0)
    assert m.on_down(True, DOWN)  # a fall (recorded by the node)
    assert not m.on_down(True, DOWN)  # the same report again is no new fall
    assert m.mode == Mode.DAMP and m.faulted() == ["policy"]
    return m


def test_a_fallen_robot_in_simulation_is_respawned_then_stands_and_runs_the_policy() -> None:
    m = fallen(SIM)
    for req in (Request.RESET, Request.STAND, Request.RUN_POLICY, Request.AUTONOMY_ON):
        d = m.decide(req, SIM)
        assert not d.allowed and d.reason == f"{req.value}: robot is down: {DOWN}; call respawn (simulation)"
    d = m.decide(Request.RESPAWN, SIM)
    assert d.allowed and d.actions == ("driver_respawn", "policy_reset") and d.target == Mode.HOLD
    assert d.reason.startswith("respawn: the robot is put back upright")
    tr = m.commit(d, 5.0)
    assert tr is not None and m.mode == Mode.HOLD and not m.down
    assert m.policy_state == "wait_state" and m.faulted() == []  # reset: out of fault at once
    # the driver ramps in place, then holds: stand (the driver's hold), then the policy again
    assert m.on_driver_mode("ramp", 5.0) is None and m.on_driver_mode("hold", 5.5) is None
    assert not m.on_down(False) and m.mode == Mode.HOLD
    d = m.decide(Request.STAND, SIM)
    assert d.allowed and d.target == Mode.STAND
    m.commit(d, 6.0)
    m.on_policy_state("hold", 6.0)
    d = m.decide(Request.RUN_POLICY, SIM)
    assert d.allowed and d.actions == ("policy_start",)
    m.commit(d, 6.5)
    assert [t.new.value for t in m.history] == ["hold", "run_policy", "damp", "hold", "stand", "run_policy"]


def test_a_fallen_robot_on_hardware_stays_refused_until_it_is_up_again() -> None:
    hardware = Available(policy=True)  # no ~/respawn: a real robot or an emulator
    m = fallen(hardware)
    d = m.decide(Request.RESPAWN, hardware)
    assert not d.allowed and d.reason.startswith("respawn: no respawn on hardware")
    upright = "put it upright by hand, then reset (no respawn on hardware)"
    for req in (Request.RESET, Request.STAND):
        d = m.decide(req, hardware)
        assert not d.allowed and d.reason == f"{req.value}: robot is down: {DOWN}; {upright}"
    assert m.mode == Mode.DAMP
    # put upright by hand: the driver reports it up; reset leaves damping and clears the runner's fault
    m.on_down(False)
    d = m.decide(Request.RESET, hardware)
    assert d.allowed and d.actions == ("driver_reset", "policy_reset") and d.target == Mode.HOLD
    d = m.decide(Request.STAND, hardware)
    assert not d.allowed and d.reason == "stand: the driver is in damping; call reset first"


def test_reset_clears_a_controller_fault_left_after_the_driver_was_respawned_directly() -> None:
    m = fallen(SIM)
    # /robot_driver/respawn called directly (not through the mode manager): the mode follows the driver
    tr = m.on_driver_mode("ramp", 5.0)
    assert tr is not None and m.mode == Mode.HOLD
    m.on_down(False)
    m.on_driver_mode("hold", 5.5)
    d = m.decide(Request.RUN_POLICY, SIM)
    assert not d.allowed and d.reason == "run_policy: the policy runner is in fault; call reset first"
    d = m.decide(Request.RESET, SIM)
    assert d.allowed and d.actions == ("policy_reset",) and d.target is None
    assert d.reason == "reset: clearing the fault of the policy runner"
    assert m.commit(d, 6.0) is None and m.mode == Mode.HOLD and m.faulted() == []
    assert m.decide(Request.RUN_POLICY, SIM).allowed
    d = m.decide(Request.RESET, SIM)  # nothing faulted any more, not damping
    assert not d.allowed and d.reason == "reset: the robot is not damping (mode hold); nothing to reset"


def test_respawn_stops_the_controller_in_charge_first_and_resets_the_faulted_ones() -> None:
    m = booted()
    m.commit(m.decide(Request.RUN_POLICY, SIM), 2.5)
    d = m.decide(Request.RESPAWN, SIM, moving=True)
    assert d.actions == ("policy_stop", "driver_respawn", "policy_reset") and d.target == Mode.HOLD
    everything = Available(policy=True, walking=True, wbc=True, respawn=True)
    w = booted()
    w.commit(w.decide(Request.WALK, everything), 2.5)
    w.walk_state = "fault"
    assert w.decide(Request.RESPAWN, everything).actions == (
        "walk_stop",
        "driver_respawn",
        "policy_reset",
        "walk_reset",
    )
    w.commit(w.decide(Request.RESPAWN, everything), 3.0)
    assert not w.walk_active and w.walk_state == "wait" and w.mode == Mode.HOLD
    # a WBC in fault while standing: stand is refused until reset, which clears it (-> hold)
    s = booted()
    s.commit(s.decide(Request.STAND, everything), 2.5)
    s.wbc_state = "fault"
    d = s.decide(Request.RESET, everything)
    assert d.actions == ("wbc_reset",) and d.target == Mode.HOLD
    s.commit(d, 3.0)
    assert s.wbc_state == "wait" and s.mode == Mode.HOLD
    # respawn while booting, too (the driver's respawn leaves any mode)
    assert ModeMachine().decide(Request.RESPAWN, SIM).allowed


def test_record_counts_falls_and_respawns() -> None:
    rec = OperationRecord()
    rec.account(0.0, "idle", "hold")
    rec.event(1.0, "estop")
    rec.event(1.5, "fall", reason=DOWN)
    rec.event(2.0, "respawn", origin="service")
    counts = rec.summary()["counts"]
    assert (counts["estops"], counts["falls"], counts["respawns"]) == (1, 1, 1)
