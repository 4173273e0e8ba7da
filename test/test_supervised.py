"""The supervised controller (a learned policy guarded by model-based stepping): its parameters, the bumpless
switch, the walking controller's take-over in any gait phase, and the hand-over and hand-back in MuJoCo
through the in-process runner (the state estimator's state, the driver core)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from humanoid_control.controllers.inprocess import InProcessRunner, RunnerSettings
from humanoid_control.controllers.registry import create_controller
from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.hardware.mujoco_sim import MujocoBackend
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.supervision.handover import SwitchBlend, law_torque, regain
from humanoid_control.supervision.viability import ViabilitySettings
from humanoid_control.walking.footsteps import Footstep, FootstepPlan
from humanoid_control.walking.geometry import Pose2D
from humanoid_control.walking.schedule import ContactSchedule
from humanoid_policy.supervised import SupervisedController


@pytest.fixture(scope="module")
def g1():
    return load_robot_config("g1")


# ---------------------------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"tilt_max_rad": 5.0}, "tilt_max_rad"),
        ({"cp_max_m": math.nan}, "cp_max_m"),
        ({"handback_s": -1.0}, "handback_s"),
        ({"switch_max_step": 0.0}, "switch_max_step"),
        ({"tilt_rate_max": "fast"}, "tilt_rate_max"),
        ({"no_such_threshold": 1.0}, "no_such_threshold"),
    ],
)
def test_bad_thresholds_are_refused(g1, params, message):
    ctl = create_controller("supervised")
    with pytest.raises(ValueError, match=message):
        ctl.configure(g1, params)


def test_viability_settings_check_their_ranges():
    with pytest.raises(ValueError, match="tilt_max_rad"):
        ViabilitySettings(tilt_max_rad=2.0)
    with pytest.raises(ValueError, match="flight_max_s"):
        ViabilitySettings(flight_max_s=math.inf)
    assert ViabilitySettings.from_params({"tilt_max_rad": 0.3, "other": 1}).tilt_max_rad == 0.3


# ---------------------------------------------------------------------------------------------- the switch
def test_regain_gives_the_same_torque_under_other_gains():
    rng = np.random.default_rng(3)
    n = 6
    q, dq = rng.normal(size=n), rng.normal(size=n)
    cmd = JointCommand(q=q + 0.1 * rng.normal(size=n), dq=rng.normal(size=n), tau_ff=rng.normal(size=n))
    meant = (rng.uniform(10, 50, n), rng.uniform(0.5, 3, n))
    applied = (rng.uniform(20, 100, n), rng.uniform(1, 6, n))
    effort = np.full(n, 1e3)
    out = regain(cmd, meant, applied, q, dq)
    np.testing.assert_allclose(
        law_torque(out, *applied, effort, q, dq), law_torque(cmd, *meant, effort, q, dq), atol=1e-9
    )


def test_switch_blend_keeps_the_torque_step_within_the_bound():
    n = 4
    kp, kd, effort = np.full(n, 50.0), np.full(n, 2.0), np.full(n, 100.0)
    blend = SwitchBlend((kp, kd), effort, max_step=0.2)
    q, dq = np.zeros(n), np.zeros(n)
    old = JointCommand(q=np.full(n, 1.0), dq=np.zeros(n), tau_ff=np.zeros(n))  # 50 N m
    new = JointCommand(q=np.zeros(n), dq=np.zeros(n), tau_ff=np.full(n, -40.0))  # -40 N m
    blend.apply(old, q, dq)
    blend.switch(old, new, q, dq)
    taus = [law_torque(blend.apply(new, q, dq), kp, kd, effort, q, dq) for _ in range(20)]
    assert taus[0][0] == pytest.approx(50.0)  # the switch tick applies the old law's torque
    steps = np.abs(np.diff(taus, axis=0)).max(axis=1) / 100.0
    assert steps.max() <= 0.1 + 1e-12  # half the bound per tick: the offset's decay
    assert taus[-1][0] == pytest.approx(-40.0)  # then the new law alone
    assert not blend.blending
    assert blend.switch_step <= 0.2


def test_a_swing_taken_over_in_the_air_starts_where_the_sole_is(g1):
    soles = {side: np.asarray(g1.feet[side].polygon, dtype=float) for side in ("left", "right")}
    feet = {"left": Pose2D(0.0, 0.1, 0.0), "right": Pose2D(0.05, -0.1, 0.0)}
    plan = FootstepPlan(
        feet, [Footstep("right", Pose2D(0.25, -0.12, 0.0))], 0.25, 0.1, 0.0, first_lift=(0.05, 0.02)
    )
    sched = ContactSchedule(plan, soles, t0=1.0, swing_height=0.06, ground_z=0.01)
    assert sched.contacts(1.0) == {"left": True, "right": False}  # single support from the first tick
    start = sched.foot_state("right", 1.0)
    np.testing.assert_allclose(start.position, [0.05, -0.1, 0.06], atol=1e-9)
    mid = sched.foot_state("right", 1.125)
    assert 0.01 < mid.position[2] < 0.06 + 0.02  # down towards the ground, a low apex
    np.testing.assert_allclose(sched.foot_state("right", 1.25).position, [0.25, -0.12, 0.01], atol=1e-9)


# ---------------------------------------------------------------------------------------------- in MuJoCo
def _runner(g1, params):
    ctl = SupervisedController()
    backend = MujocoBackend(g1, initial_joint_positions=g1.array("default"))
    settings = RunnerSettings(rate_hz=500.0, ramp_s=1.0, estimator="ekf")
    return ctl, InProcessRunner(g1, ctl, params, settings, backend=backend)


@pytest.mark.slow
def test_handover_to_the_walking_controller_and_back_standing(g1):
    """Asked to hand over while the policy stands, the walking controller takes the robot in that tick,
    stands it, and once viable with margin for handback_s hands it back; the policy stands on; every switch
    keeps the torque step within the bound."""
    ctl, runner = _runner(g1, {"handback_s": 0.5, "min_model_s": 0.5})
    modes = []
    try:
        for _ in range(int(5.0 * 500)):
            if runner.time >= 2.5 and not ctl.handovers:
                ctl.request_handover("test")
            tick = runner.step()
            modes.append(ctl.mode)
            assert not runner.fell(tick.truth), f"fell at {tick.t:.2f} s under {ctl.mode}"
            assert tick.mode == "active" or tick.t < 2.0
    finally:
        runner.close()
    s = ctl.summary()
    assert len(s["handovers"]) == 1 and s["handbacks"] == 1
    h = s["handovers"][0]
    assert h["reason"] == "test" and h["latency_ticks"] == 0 and h["plan"] == "stand"
    assert 0.5 <= h["duration_s"] < 2.0
    assert modes[-1] == "policy" and "model" in modes
    assert ctl.blend.switch_step <= 0.2  # the last switch (the hand-back) and everything after it
    assert s["share_model"] > 0.05 and s["share_policy"] > 0.5
    version, state = ctl.topic_state()
    assert version == 2 and state["in_control"] == "policy" and state["last"]["to"] == "policy"


@pytest.mark.slow
def test_no_handover_on_a_nominal_walk_and_the_policy_tracks_as_alone(g1):
    """The policy walking 0.3 m/s under the supervisor (default thresholds): no handover, and the same
    motion as the policy alone (the supervisor's command is the policy's, bit for bit)."""
    from humanoid_policy.controller import PolicyController

    def walk(ctl, params):
        backend = MujocoBackend(g1, initial_joint_positions=g1.array("default"))
        settings = RunnerSettings(rate_hz=500.0, ramp_s=1.0, estimator="ekf")
        runner = InProcessRunner(g1, ctl, params, settings, backend=backend)
        xs = []
        try:
            for _ in range(int(7.0 * 500)):
                runner.set_cmd_vel(0.3 if runner.time >= 2.0 else 0.0, 0.0, 0.0)
                tick = runner.step()
                xs.append(float(tick.truth.position[0]))
                assert not runner.fell(tick.truth)
        finally:
            runner.close()
        return np.array(xs)

    sup = SupervisedController()
    x_sup = walk(sup, {})
    x_pol = walk(PolicyController(), {})
    assert sup.summary()["handovers"] == [] and sup.mode == "policy"
    assert x_sup[-1] - x_sup[int(3.0 * 500)] > 0.8  # walked
    np.testing.assert_allclose(x_sup, x_pol, atol=1e-9)
    assert sup.summary()["share_policy"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("swing", [1, 2])
def test_a_handover_in_the_middle_of_a_swing_is_caught_and_handed_back(g1, swing):
    """The policy walking 0.3 m/s, a handover asked in the middle of its ``swing``-th single support after
    3 s: the walking controller lands the foot in the air as a capture step (``capture_<side>``), stands, and
    hands the robot back to the policy, which walks on; no fall."""
    ctl, runner = _runner(g1, {"handback_s": 0.5, "min_model_s": 0.5})
    single, seen, xs = 0, 0, []
    try:
        for _ in range(int(7.5 * 500)):
            runner.set_cmd_vel(0.3 if runner.time >= 2.0 else 0.0, 0.0, 0.0)
            if runner.time >= 3.0 and not ctl.handovers:
                single = single + 1 if ctl.last_values.get("contacts") == 1.0 else 0
                if single == 40:  # 0.08 s into a single support
                    seen += 1
                    if seen == swing:
                        ctl.request_handover("test")
            tick = runner.step()
            xs.append(float(tick.truth.position[0]))
            assert not runner.fell(tick.truth), f"fell at {tick.t:.2f} s under {ctl.mode}"
    finally:
        runner.close()
    s = ctl.summary()
    assert s["handbacks"] == 1, s
    h = s["handovers"][0]
    assert h["plan"].startswith("capture_") and h["latency_ticks"] == 0, h
    back = ctl.handovers[1]["t"]  # the hand-back (the summary lists the hand-overs)
    assert ctl.mode == "policy" and xs[-1] - xs[int(back * 500)] > 0.3  # walked on after the hand-back


def test_the_locomotion_json_shares_from_the_supervisor_state():
    """``humanoid-eval locomotion --controller supervised``: the handovers relative to the script's start and
    the shares of the script under each controller, a handover still in force running to the end."""
    from humanoid_bringup.evaluation.locomotion_eval import _supervised_shares

    state = {
        "handovers": [
            {"t": 4.0, "reason": "tilt", "duration_s": 1.5, "latency_ticks": 0},
            {"t": 10.0, "reason": "cp", "duration_s": None, "latency_ticks": 0},
        ]
    }
    out = _supervised_shares(state, t0=2.0, total=10.0)
    assert [h["t"] for h in out["handovers"]] == [2.0, 8.0]
    assert out["share_model"] == pytest.approx((1.5 + 2.0) / 10.0)
    assert out["share_policy"] == pytest.approx(1.0 - 0.35)
    assert _supervised_shares(None, 0.0, 10.0) == {"handovers": [], "share_policy": 1.0, "share_model": 0.0}


@pytest.mark.slow
def test_humanoid_eval_push_supervised_names_the_policy_and_counts_handovers(tmp_path, capsys):
    """``humanoid-eval push --controller supervised --walking-speed 0.3``: a bisection per stance, the JSON
    names the policy, every push's handovers and the largest count per push (at most 2: no chattering)."""
    import json

    from humanoid_bringup.evaluation.evaluate import main

    argv = ["push", "--controller", "supervised", "--directions", "front", "--iterations", "1"]
    argv += ["--walking-speed", "0.3", "--stances", "left", "--out", str(tmp_path)]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["controller"] == "supervised" and res["policy"] == "holosoma/g1_ppo"
    assert res["path"] == "in_process" and res["walking_speed_mps"] == 0.3
    trials = res["front"]["stances"]["left"]["trials"]
    assert trials and all(isinstance(h, int) for *_, h in trials)
    assert res["front"]["max_Ns"] >= 20.0  # the policy walks on after a 20 N s front push
    assert res["max_handovers_per_push"] <= 2
    assert (tmp_path / "push_supervised_walking_0.3" / "push.json").is_file()
