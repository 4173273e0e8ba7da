"""The walking evaluations of issue 14: ``humanoid-eval push --controller mpc_walk``, ``locomotion --terrain
rough`` and ``compare``. Fast tests of their options, JSON, bisection, scene and scoring (recorded data built
here with known answers); one slow test pushes the walking controller through the ROS graph."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from humanoid_bringup.evaluation import compare_eval
from humanoid_bringup.evaluation.compare_eval import (
    CompareError,
    effort_metrics,
    foot_slip_mm,
    load_series,
    run_compare,
)
from humanoid_bringup.evaluation.evaluate import main
from humanoid_bringup.evaluation.locomotion_eval import save_series
from humanoid_bringup.evaluation.push_eval import (
    PUSH_DURATION_S,
    PUSH_TARGETS_NS,
    PushOptions,
    Trial,
    _judge_series,
    bisect,
    combine_stances,
    direction_entry,
    push_options,
)
from humanoid_control.model.robot_config import load_robot_config


@pytest.fixture(scope="module")
def g1():
    return load_robot_config("g1")


# ----------------------------------------------------------------------------------------- push: options
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--controller", "wbc_stand", "--walking-speed", "0.3"], "needs --controller mpc_walk"),
        (["--controller", "mpc_walk", "--walking-speed", "nan"], "walking speed must be a finite"),
        (["--controller", "mpc_walk", "--walking-speed", "-0.1"], "walking speed must be a finite"),
        (["--controller", "mpc_walk", "--walking-speed", "2"], "beyond the limit"),
        (["--controller", "mpc_walk", "--directions", "up"], "directions must be"),
        (["--controller", "mpc_walk", "--directions", "front,front"], "listed twice"),
        (["--controller", "mpc_walk", "--directions", ","], "directions must be"),
        (["--controller", "mpc_walk", "--stances", "middle"], "stances must be"),
        (["--controller", "mpc_walk", "--iterations", "0"], "iterations must be in"),
        (["--controller", "mpc_walk", "--iterations", "40"], "iterations must be in"),
        (["--controller", "mpc_walk", "--max-impulse", "-1"], "max impulse"),
        (["--controller", "mpc_walk", "--max-impulse", "inf"], "max impulse"),
    ],
)
def test_push_refuses_bad_options_before_starting_anything(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["push", *argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # no graph was launched, nothing written


def test_push_options_from_the_command_line(g1) -> None:
    import argparse

    args = argparse.Namespace(
        controller="mpc_walk",
        directions="front, left",
        walking_speed=0.3,
        stances="right",
        iterations=4,
        max_impulse=None,
    )
    opts = push_options(args).check(g1.walking.max_forward)
    assert opts.directions == ("front", "left") and opts.stances == ("right",) and opts.walking
    assert opts.folder() == "push_mpc_walk_walking_0.3"
    assert opts.bracket(12.0) == 40.0  # mpc_walk: the default bracket, not the no-step bound's
    assert opts.target("front") == PUSH_TARGETS_NS["walking"]["front"] == 20.0
    assert opts.target("left") == 15.0
    standing = PushOptions(controller="mpc_walk").check()
    assert standing.folder() == "push_mpc_walk" and not standing.walking
    assert standing.target("left") == 25.0 and standing.target("back") == 20.0
    wbc = PushOptions().check()
    assert wbc.folder() == "push_wbc_stand" and wbc.target("front") is None
    assert wbc.bracket(12.0) == pytest.approx(19.2)  # 1.6 x the bound, as before
    assert PushOptions(max_impulse=30.0).bracket(12.0) == 30.0


# ----------------------------------------------------------------------------------------- push: bisection
def _threshold_trial(limit: float, log: list[float]):
    def trial(impulse: float) -> SimpleNamespace:
        log.append(impulse)
        return SimpleNamespace(survived=impulse <= limit, impulse=impulse)

    return trial


def test_bisection_brackets_the_largest_survived_push() -> None:
    tried: list[float] = []
    best, trials, top_trial = bisect(_threshold_trial(13.0, tried), 40.0, 5)
    assert tried == [20.0, 10.0, 15.0, 12.5, 13.75]  # halving [0, 40] towards the threshold
    assert best == 12.5 and top_trial.impulse == 12.5 and len(trials) == 5
    tried.clear()
    best, _trials, top_trial = bisect(_threshold_trial(0.5, tried), 40.0, 3)
    assert best == 0.0 and top_trial is None  # nothing survived
    tried.clear()
    best, trials, _ = bisect(_threshold_trial(100.0, tried), 40.0, 3)
    assert tried == [20.0, 30.0, 35.0, 50.0]  # never failed: one more beyond the bracket
    assert best == 50.0 and len(trials) == 4


def _trial(impulse: float, survived: bool, reason: str = "stood") -> Trial:
    return Trial("front", impulse, survived, reason, 1.0)


def test_push_json_per_direction_and_per_stance() -> None:
    entry = direction_entry(12.5, 12.2, None, [_trial(20.0, False, "fell"), _trial(12.5, True)])
    assert entry == {
        "max_Ns": 12.5,
        "bound_Ns": 12.2,
        "ratio": round(12.5 / 12.2, 3),
        "target_Ns": None,
        "meets_target": None,
        "trials": [[20.0, False, "fell"], [12.5, True, "stood"]],
    }
    left = direction_entry(21.25, 12.2, 20.0, [_trial(21.25, True)])
    right = direction_entry(17.5, 12.2, 20.0, [_trial(17.5, True)])
    assert left["meets_target"] is True and right["meets_target"] is False
    both = combine_stances({"left": left, "right": right}, 20.0)
    assert both["max_Ns"] == 17.5 and both["meets_target"] is False  # the weaker stance counts
    assert both["left_stance"]["max_Ns"] == 21.25 and both["right_stance"]["max_Ns"] == 17.5
    assert both["target_Ns"] == 20.0 and "trials" in both["left_stance"]
    json.dumps(both)


def _series(com_x: list[float], sole_dz: float = 0.0, dt: float = 0.05) -> dict[str, list]:
    n = len(com_x)
    return {
        "t": [i * dt for i in range(n)],
        "com": [[x, 0.0, 0.7] for x in com_x],
        "soles": [
            {"left": [0.0, 0.1, sole_dz if i > 2 else 0.0], "right": [0.0, -0.1, 0.0]} for i in range(n)
        ],
    }


def test_trial_judgement_by_controller() -> None:
    rest = [0.0] * 60  # 3 s at rest
    assert _judge_series(_series(rest), stepping=False, walking=False, observe_s=1.5) == ""
    # the no-step controller may not lift a foot; the walking controller may (it steps)
    assert "sole lifted" in _judge_series(_series(rest, 0.05), stepping=False, walking=False, observe_s=1.5)
    assert _judge_series(_series(rest, 0.05), stepping=True, walking=False, observe_s=2.5) == ""
    moving = [0.02 * i for i in range(60)]  # 0.4 m/s to the end
    assert "still moving" in _judge_series(_series(moving), stepping=True, walking=False, observe_s=2.5)
    assert _judge_series(_series(moving), stepping=True, walking=True, observe_s=2.5) == ""  # walking on
    short = [0.0] * 20  # 1 s of a 2.6 s watch
    assert _judge_series(_series(short), stepping=True, walking=True, observe_s=2.5) == "trial ended early"
    assert PUSH_DURATION_S == 0.1


# ----------------------------------------------------------------------------------------- rough terrain
def test_rough_scene_is_a_seeded_four_centimetre_heightfield_ahead_of_the_robot(g1) -> None:
    from humanoid_control.hardware.scene import load_scene
    from humanoid_control.model.robot_model import load_mujoco_model

    scene = load_scene("rough")
    hf = scene.heightfield
    assert scene.name == "rough" and hf is not None and not scene.markers and not scene.boxes
    h = hf.heights()
    assert h.min() == pytest.approx(0.0) and h.max() == pytest.approx(0.04)  # +-2 cm about its middle
    assert np.array_equal(h, load_scene("rough").heightfield.heights())  # seeded: the same every load
    assert np.std(h) > 0.005  # rough, not a ramp
    x0, x1 = hf.center[0] - hf.size[0] / 2, hf.center[0] + hf.size[0] / 2
    assert 0.2 <= x0 <= 0.5  # starts ahead of the standing robot's toes: it spawns on the flat floor
    assert x1 - 0.3 >= 0.3 * 8.0  # forward 0.3 m/s for 8 s stays on it
    assert hf.height_at(0.0, 0.0) == 0.0 and hf.height_at(1.5, 0.0) > 0.0
    mj = load_mujoco_model(g1, scene_spec=scene)  # the driver's model compiles with it
    assert mj.model.nhfield == 1


def test_locomotion_refuses_an_unknown_terrain(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["locomotion", "--controller", "mpc_walk", "--terrain", "moon", "--out", str(tmp_path)]) == 2
    assert "unknown scene 'moon'" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- compare
def test_foot_slip_counts_only_loaded_feet() -> None:
    t = np.arange(0.0, 1.0, 0.01)
    sliding = np.stack([0.1 * t, np.zeros_like(t), np.zeros_like(t)], axis=1)  # 0.1 m/s along x
    soles = {"left": sliding, "right": sliding.copy()}
    ct = np.arange(0.0, 1.0, 0.002)
    contacts = {"left": (ct, np.full_like(ct, 200.0)), "right": (ct, np.where(ct < 0.5, 200.0, 5.0))}
    slip = foot_slip_mm(t, soles, contacts, 330.0)
    assert slip["left"] == pytest.approx(99.0, abs=0.01)  # 99 intervals of 1 mm, all loaded
    assert slip["right"] == pytest.approx(49.0, abs=1.01)  # loaded for the first half only
    assert slip["total"] == pytest.approx(slip["left"] + slip["right"])


def test_effort_metrics_peak_mean_and_energy() -> None:
    t = np.linspace(0.0, 2.0, 1001)
    q = np.stack([0.5 * t, -0.25 * t], axis=1)  # 0.5 and -0.25 rad/s
    tau = np.stack([np.full_like(t, 10.0), np.full_like(t, -40.0)], axis=1)
    m = effort_metrics(t, q, tau, np.array([50.0, 80.0]), ["a", "b"])
    assert m["peak_torque_Nm"] == 40.0 and m["peak_torque_joint"] == "b"
    assert m["peak_torque_fraction"] == 0.5 and m["peak_torque_fraction_joint"] == "b"
    assert m["mean_abs_torque_Nm"] == 25.0
    m = effort_metrics(t, q, tau, np.array([15.0, 80.0]), ["a", "b"])
    assert m["peak_torque_joint"] == "b" and m["peak_torque_fraction_joint"] == "a"  # 10/15 > 40/80
    assert m["peak_torque_fraction"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["energy_J"] == pytest.approx((10 * 0.5 + 40 * 0.25) * 2.0, rel=1e-6)  # |tau qdot| dt


def _record_run(folder: Path, config, name: str, speed: float, loaded: bool, torque: float) -> dict:
    """A run of 2 s: the robot in its default pose carried along x at ``speed``, feet loaded or not, a
    constant torque on every joint while each joint above the legs moves at 0.1 rad/s: known slip, energy,
    distance."""
    folder.mkdir(parents=True)
    t = np.arange(0.0, 3.0 + 1e-9, 0.002)
    x = speed * np.clip(t - 1.0, 0.0, 1.0)  # stands 1 s, moves 1 s, stands 1 s
    sway = 0.05 * np.sin(2 * np.pi * t) * ((t > 1.0) & (t < 2.0))  # one gait cycle of sideways sway
    pos = np.stack([x, sway, np.full_like(t, 0.78)], axis=1)
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (len(t), 1))
    q0 = config.array("default")
    upper = np.array([not any(k in n for k in ("hip", "knee", "ankle")) for n in config.joint_names])
    q = np.tile(q0, (len(t), 1)) + 0.1 * t[:, None] * upper  # the legs still: the soles ride the base
    effort = np.full_like(q, torque)
    fz = np.full_like(t, 200.0 if loaded else 0.0)
    save_series(
        folder / "series.npz",
        config,
        t,
        pos,
        quat,
        np.zeros((len(t), 6)),
        t,
        q,
        effort,
        {
            "left": [(v + 5.0, f) for v, f in zip(t, fz, strict=True)],
            "right": [(v + 5.0, f) for v, f in zip(t, fz, strict=True)],
        },
        5.0,
    )
    result = {
        "fell": False,
        "time_survived_s": 3.0,
        "script_s": 3.0,
        "segments": {
            "walk": {
                "commanded": [0.5, 0.0, 0.0],
                "achieved_mean": [speed, 0.0, 0.0],
                "abs_err_mean": [abs(0.5 - speed), 0.0, 0.0],
            }
        },
    }
    (folder / f"locomotion_{name}.json").write_text(json.dumps(result))
    return pos


def test_compare_scores_recorded_runs_and_writes_its_files(g1, tmp_path: Path, capsys) -> None:
    import pinocchio as pin

    from humanoid_control.model.robot_model import load_pinocchio_model

    pos = _record_run(tmp_path / "compare" / "policy", g1, "holosoma_g1_ppo", 0.4, loaded=True, torque=2.0)
    _record_run(tmp_path / "compare" / "mpc_walk", g1, "mpc_walk", 0.5, loaded=False, torque=1.0)
    assert main(["compare", "--recorded", "--out", str(tmp_path)]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    pol, mpc = res["runs"]["policy"], res["runs"]["mpc_walk"]
    # both soles carried along the base's path (sway included) while loaded; the unloaded run's do not count
    path = float(np.linalg.norm(np.diff(pos[:, :2], axis=0), axis=1).sum())
    assert path > 0.45 and pol["path_length_m"] == pytest.approx(path, abs=1e-3)
    assert pol["foot_slip_mm"] == pytest.approx(2000.0 * path, rel=1e-3) and mpc["foot_slip_mm"] == 0.0
    # the distance walked takes the sway out: 0.4 and 0.5 m
    assert pol["distance_m"] == pytest.approx(0.4, rel=0.05) and mpc["distance_m"] == pytest.approx(
        0.5, rel=0.02
    )
    mass = pin.computeTotalMass(load_pinocchio_model(g1).model)
    n = sum(not any(k in name for k in ("hip", "knee", "ankle")) for name in g1.joint_names)
    assert 0 < n < g1.num_joints
    assert pol["energy_J"] == pytest.approx(n * 2.0 * 0.1 * 3.0, rel=1e-3)
    cot = pol["energy_J"] / (mass * 9.81 * pol["distance_m"])
    assert pol["cost_of_transport"] == pytest.approx(cot, rel=2e-3)
    assert pol["peak_torque_Nm"] == 2.0 and mpc["mean_abs_torque_Nm"] == 1.0
    assert pol["tracking_abs_err_mean"]["walk"] == pytest.approx([0.1, 0.0, 0.0])
    assert pol["tracking_mean_err"]["walk"] == pytest.approx([0.1, 0.0, 0.0])
    assert mpc["tracking_mean_err"]["walk"] == [0.0, 0.0, 0.0]
    md = (tmp_path / "compare" / "compare.md").read_text()
    assert "| | holosoma/g1_ppo | mpc_walk |" in md and "cost of transport" in md and "foot slip" in md
    assert (tmp_path / "compare" / "compare.png").stat().st_size > 10_000
    assert (
        json.loads((tmp_path / "compare" / "compare.json").read_text())["runs"]["mpc_walk"]["fell"] is False
    )


def test_compare_refuses_missing_and_malformed_recordings(g1, tmp_path: Path, capsys) -> None:
    assert main(["compare", "--recorded", "--out", str(tmp_path)]) == 2
    assert "no recorded locomotion result" in capsys.readouterr().err
    _record_run(tmp_path / "compare" / "policy", g1, "holosoma_g1_ppo", 0.4, loaded=True, torque=2.0)
    _record_run(tmp_path / "compare" / "mpc_walk", g1, "mpc_walk", 0.5, loaded=True, torque=2.0)
    path = tmp_path / "compare" / "mpc_walk" / "series.npz"
    data = dict(np.load(path))
    data["joint_q"][3, 2] = np.nan
    np.savez(path, **data)
    with pytest.raises(CompareError, match="NaN"):
        load_series(path)
    del data["pos"]
    np.savez(path, **data)
    with pytest.raises(CompareError, match="missing arrays"):
        run_compare(tmp_path / "compare", recorded=True)
    path.write_text("not a series")
    assert main(["compare", "--recorded", "--out", str(tmp_path)]) == 2
    assert "not a readable series" in capsys.readouterr().err
    assert compare_eval.RUNS == ("policy", "mpc_walk")


# ----------------------------------------------------------------------------------------- through the graph
@pytest.mark.slow
def test_walking_controller_survives_a_push_beyond_the_no_step_bound(g1, tmp_path: Path) -> None:
    """Driver, estimator and walking controller in lockstep: a 0.1 s front push 5 % beyond the LIPM bound of
    standing in place (CoP at the sole's edge; the no-step WBC holds 12.2 N s, docs/wbc.md) is survived and
    the robot comes to rest, the controller never faulting."""
    from humanoid_bringup.evaluation.push_eval import run_trial
    from humanoid_bringup.evaluation.wbc_graph import Kinematics, WbcGraph
    from humanoid_control.wbc.balance import push_impulse_bounds

    kin = Kinematics(g1)
    bound = push_impulse_bounds(g1, kin.pmodel, PUSH_DURATION_S)["front"]["bound_Ns"]
    g = WbcGraph(tmp_path, sim_duration_s=120.0, controller="mpc_walk")
    try:
        g.start()
        trial = run_trial(g, kin, "front", 1.05 * bound, g1)
        modes = g.modes()
    finally:
        g.stop()
    print(
        f"front push {trial.impulse:.2f} N s (bound {bound:.2f}): {trial.reason} [{trial.wall_s:.0f} s wall]"
    )
    assert trial.survived, trial.reason
    assert modes[-1] == "active" and "fault" not in g.wbc_states
    com = np.array(trial.series["com"])
    t = np.array(trial.series["t"])
    assert t[-1] >= PUSH_DURATION_S + 2.4  # watched to the end
    assert com[:, 0].max() - com[0, 0] > 0.02  # the push carried it forward; it came to rest (survived)
