"""WBC evaluations through the ROS graph (driver, state estimator, WBC: separate processes, lockstep).

``humanoid-eval push --controller wbc_stand``: for each direction (front, back, left, right: world axes; the
robot spawns facing +x) bisects the largest impulse (N s) of a push of ``T = 0.1`` s at the pelvis that the
robot survives standing, in one graph: each trial respawns the robot (driver ``~/respawn``), resets the
estimator (``/state_estimator/reset``) while the driver settles, lets the WBC take over and stand, pushes
(driver ``~/push``) and watches. The bound of each direction is
:func:`~humanoid_control.wbc.balance.push_impulse_bounds` of the robot model (LIPM, CoP at the sole edge).

**Survived standing without stepping** (all from ``/sim/ground_truth`` + joint states, pinocchio):

- the driver never damps and the WBC never faults during the trial;
- the base stays above ``simulation.fall_height`` and tilts less than ``MAX_TILT_DEG`` from upright;
- no sole lifts (origin more than ``MAX_LIFT_M`` above its height at the push) or slides (more than
  ``MAX_SLIDE_M`` horizontally) from the push to the end of the trial;
- ``OBSERVE_S`` after the push ends the CoM moves slower than ``MAX_END_SPEED`` horizontally.

A trial stops early (failed) once the CoM is ``MAX_COM_OFFSET_M`` from its reference, the base is low or
tilted, the driver damps or the WBC faults.

``humanoid-eval stand --controller wbc_stand``: stands ``seconds`` (60 by default) once the WBC has the robot;
``com_error_rms_m`` is the RMS horizontal distance between the true CoM and the controller's reference (the
default pose's CoM relative to the sole midpoint, carried with the feet), both from ground truth;
``com_estimate_error_rms_m`` compares the CoM relative to the sole midpoint as the WBC sees it (``/odom`` +
joints) with the same from ground truth.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.wbc_graph import Kinematics, WbcGraph
from humanoid_control.hardware.push import DIRECTIONS, push_force

PUSH_DURATION_S = 0.1
SETTLE_S = 0.6  # standing under the WBC before each push (s, simulated)
OBSERVE_S = 1.5  # watched after the push ends (s)
MAX_TILT_DEG = 30.0
MAX_LIFT_M = 0.02
MAX_SLIDE_M = 0.03
MAX_END_SPEED = 0.15  # m/s
MAX_COM_OFFSET_M = 0.2  # early stop: the CoM this far from its reference is beyond every sole edge


@dataclass
class Trial:
    """One push: direction, impulse (N s), outcome and why, recorded series (s, m)."""

    direction: str
    impulse: float
    survived: bool
    reason: str
    push_t: float
    series: dict[str, list[Any]] = field(default_factory=dict)
    wall_s: float = 0.0


def run_trial(g: WbcGraph, kin: Kinematics, direction: str, impulse: float, config: Any) -> Trial:
    """Respawn, stand ``SETTLE_S``, push, watch ``OBSERVE_S``; judge with the module's criteria."""
    wall0 = time.monotonic()
    t_active = g.respawn_and_take_over()
    g.forget_before(t_active - 0.5)
    force = push_force(direction, impulse, PUSH_DURATION_S)
    g.set_push(force, PUSH_DURATION_S)
    g.run_to(t_active + SETTLE_S)
    n_events = len(g.push_events)
    with g.lock:
        n_states = len(g.wbc_states)
    ok, msg = g.probe.call_trigger("/robot_driver/push")
    if not ok:
        raise RuntimeError(f"push refused: {msg}")
    g.run_to(g.now() + 0.004)
    if len(g.push_events) <= n_events:
        raise RuntimeError("the driver never reported the push")
    push_t = g.push_events[n_events][0]
    end_t = push_t + PUSH_DURATION_S + OBSERVE_S
    reason = ""
    fall_h = config.simulation.fall_height
    cos_tilt = math.cos(math.radians(MAX_TILT_DEG))
    while True:  # watch live: stop early on a fall
        with g.probe.lock:
            d = g.probe.data
            t_now = d.joint_t[-1] if d.joint_t else 0.0
            z = d.truth_pos[-1][2] if d.truth_pos else 1.0
            qw = d.truth_quat_wxyz[-1] if d.truth_quat_wxyz else [1.0, 0.0, 0.0, 0.0]
            last = (d.truth_t[-1], d.truth_pos[-1], qw, d.truth_twist[-1]) if d.truth_t else None
            modes = list(d.modes)
        with g.lock:
            state = g.joints.get(round(last[0], 4)) if last is not None else None
        if last is not None and state is not None:
            com, _v, _soles, ref = kin.evaluate(last[1], last[2], last[3], *state)
            if np.linalg.norm(com[:2] - ref) > MAX_COM_OFFSET_M:
                reason = f"CoM {MAX_COM_OFFSET_M * 100:.0f} cm off its reference"
        upright = 1.0 - 2.0 * (qw[1] ** 2 + qw[2] ** 2)
        if reason:
            pass
        elif modes and modes[-1] == "damping":
            reason = "driver damping"
        elif z < fall_h:
            reason = f"base below {fall_h} m"
        elif upright < cos_tilt:
            reason = f"base tilt over {MAX_TILT_DEG:g} deg"
        with g.lock:
            if "fault" in g.wbc_states[n_states:]:
                reason = reason or "WBC fault"
        if reason or t_now >= end_t:
            break
        g.run_to(t_now + 0.01)  # the next check at a held tick: the same ticks in every run
    truth = g.truth_since(push_t - 0.3)
    with g.lock:
        joints = dict(g.joints)
    stamps = [t for t in sorted(truth) if t in joints]
    series: dict[str, list[Any]] = {"t": [], "com": [], "dcm": [], "ref": [], "soles": []}
    omega = math.sqrt(9.81 / max(kin.offset[2], 0.1))
    for t in stamps[::2]:
        p, qw, tw = truth[t]
        com, vcom, soles, ref = kin.evaluate(p, qw, tw, *joints[t])
        series["t"].append(t - push_t)
        series["com"].append(com.tolist())
        series["dcm"].append((com[:2] + vcom[:2] / omega).tolist())
        series["ref"].append(ref.tolist())
        series["soles"].append({s: v.tolist() for s, v in soles.items()})
    if not reason and series["t"]:
        ts = np.array(series["t"])
        at_push = int(np.argmin(np.abs(ts)))
        for side in series["soles"][0]:
            sole = np.array([s[side] for s in series["soles"]])[at_push:]
            lift = float((sole[:, 2] - sole[0, 2]).max())
            slide = float(np.linalg.norm(sole[:, :2] - sole[0, :2], axis=1).max())
            if lift > MAX_LIFT_M:
                reason = f"{side} sole lifted {lift * 100:.1f} cm"
            elif slide > MAX_SLIDE_M:
                reason = f"{side} sole slid {slide * 100:.1f} cm"
        if not reason:
            tail = np.array(series["com"])[ts >= ts[-1] - 0.1]
            speed = (
                float(np.linalg.norm(tail[-1, :2] - tail[0, :2]) / max(0.1, 1e-9)) if len(tail) > 1 else 0.0
            )
            if speed > MAX_END_SPEED:
                reason = f"CoM still moving {speed:.2f} m/s at the end"
        if not reason and series["t"][-1] < PUSH_DURATION_S + OBSERVE_S - 0.05:
            reason = "trial ended early"
    return Trial(direction, impulse, not reason, reason or "stood", push_t, series, time.monotonic() - wall0)


def bisect_direction(
    g: WbcGraph, kin: Kinematics, config: Any, direction: str, bound: float, iterations: int, log: Any
) -> tuple[float, list[Trial], Trial | None]:
    """Largest survived impulse (N s) by bisection on ``[0, 1.6 bound]`` (extended while the top survives)."""
    lo, hi = 0.0, 1.6 * bound
    trials: list[Trial] = []
    best: Trial | None = None
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        tr = run_trial(g, kin, direction, mid, config)
        trials.append(tr)
        log(
            f"  {direction}: {mid:6.2f} N s ({mid / bound * 100:5.1f} % of bound) -> {tr.reason} "
            f"[{tr.wall_s:.1f} s wall]"
        )
        if tr.survived:
            lo, best = mid, tr
        else:
            hi = mid
    if lo >= 1.6 * bound * (1 - 0.5**iterations) - 1e-9:  # never failed: probe beyond the bracket
        tr = run_trial(g, kin, direction, 2.0 * bound, config)
        trials.append(tr)
        if tr.survived:
            lo, best = 2.0 * bound, tr
    return lo, trials, best


def plot_push(path: Path, direction: str, trial: Trial, bound: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u = np.array(DIRECTIONS[direction])
    t = np.array(trial.series["t"])
    com = np.array(trial.series["com"])[:, :2]
    dcm = np.array(trial.series["dcm"])
    ref = np.array(trial.series["ref"])
    origin = ref[0]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(t, (com - origin) @ u * 100, label="CoM")
    ax.plot(t, (dcm - origin) @ u * 100, label="capture point (DCM)")
    ax.plot(t, (ref - origin) @ u * 100, "k--", lw=0.8, label="reference")
    ax.axhline(bound["d_m"] * 100, color="r", lw=0.8, label="support polygon edge")
    ax.axvspan(0.0, PUSH_DURATION_S, color="0.85", label="push")
    ax.set_xlabel("time since the push (s)")
    ax.set_ylabel(f"along the push ({direction}) (cm)")
    ax.set_title(
        f"{direction}: {trial.impulse:.2f} N s ({trial.impulse / bound['bound_Ns'] * 100:.0f} % of the LIPM "
        f"bound {bound['bound_Ns']:.1f} N s), survived; ground truth"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_push_eval(
    out_dir: Path,
    robot: str = "g1",
    directions: tuple[str, ...] = ("front", "back", "left", "right"),
    iterations: int = 5,
    log: Any = print,
) -> dict[str, Any]:
    """Bisect the survived push impulse per direction through the graph; the result dictionary."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.balance import push_impulse_bounds

    wall0 = time.monotonic()
    config = load_robot_config(robot)
    kin = Kinematics(config)
    bounds = push_impulse_bounds(config, kin.pmodel, PUSH_DURATION_S)
    g = WbcGraph(Path(out_dir), robot)
    result: dict[str, Any] = {
        "evaluation": "push",
        "controller": "wbc_stand",
        "push_duration_s": PUSH_DURATION_S,
    }
    try:
        g.start()
        log(f"graph up, WBC active after {time.monotonic() - wall0:.1f} s wall")
        for direction in directions:
            b = bounds[direction]
            best_ns, trials, best = bisect_direction(
                g, kin, config, direction, b["bound_Ns"], iterations, log
            )
            result[direction] = {
                "max_Ns": round(best_ns, 3),
                "bound_Ns": round(b["bound_Ns"], 3),
                "ratio": round(best_ns / b["bound_Ns"], 3),
                "trials": [[round(tr.impulse, 3), tr.survived, tr.reason] for tr in trials],
            }
            if best is not None:
                png = Path(out_dir) / f"push_{direction}.png"
                plot_push(png, direction, best, b)
                result[direction]["plot"] = str(png)
        diag = g.probe.last_diagnostics()
    finally:
        g.stop()
    result["lockstep_timeouts"] = int(diag.get("lockstep_timeouts", "0") or 0)
    result["respawn_retries"] = g.respawn_retries
    result["bound_params"] = {k: round(v, 4) for k, v in bounds["params"].items()}
    result["criteria"] = {
        "max_tilt_deg": MAX_TILT_DEG,
        "max_sole_lift_m": MAX_LIFT_M,
        "max_sole_slide_m": MAX_SLIDE_M,
        "max_end_com_speed_mps": MAX_END_SPEED,
        "early_stop_com_offset_m": MAX_COM_OFFSET_M,
        "settle_s": SETTLE_S,
        "observe_s": OBSERVE_S,
    }
    result["wall_s"] = round(time.monotonic() - wall0, 1)
    (Path(out_dir) / "push.json").write_text(json.dumps(result, indent=2))
    return result


def run_stand_eval(
    out_dir: Path, seconds: float = 60.0, robot: str = "g1", log: Any = print
) -> dict[str, Any]:
    """Stand ``seconds`` under the WBC; CoM errors against ground truth (see module docstring)."""
    from humanoid_control.model.robot_config import load_robot_config

    wall0 = time.monotonic()
    config = load_robot_config(robot)
    kin = Kinematics(config)
    g = WbcGraph(Path(out_dir), robot, sim_duration_s=seconds + 30.0)
    g.record_odom = True
    fell = False
    try:
        g.start()
        t0 = g.now()
        log(f"WBC active at t = {t0:.3f} s; standing {seconds:g} s")
        while True:
            t = g.now()
            with g.probe.lock:
                z = g.probe.data.truth_pos[-1][2] if g.probe.data.truth_pos else 1.0
                modes = list(g.probe.data.modes)
            if z < config.simulation.fall_height or modes[-1] == "damping":
                fell = True
                break
            if t >= t0 + seconds - 1e-9:
                break
            g.run_to(min(t + 0.5, t0 + seconds))
        sim_wall = time.monotonic() - wall0
        diag = g.probe.last_diagnostics()
        truth = g.truth_since(t0)
        with g.lock:
            joints, odom, wbc_states = dict(g.joints), dict(g.odom), list(g.wbc_states)
    finally:
        g.stop()
    stamps = [t for t in sorted(truth) if t in joints and t0 <= t <= t0 + seconds]
    err, est_err, ts = [], [], []
    for t in stamps:
        p, qw, tw = truth[t]
        com, _v, soles, ref = kin.evaluate(p, qw, tw, *joints[t])
        err.append(np.linalg.norm(com[:2] - ref))
        ts.append(t - t0)
        if t in odom:
            mid = np.mean(list(soles.values()), axis=0)
            op, oq, otw = odom[t]
            ecom, _ev, esoles, _eref = kin.evaluate(op, oq, otw, *joints[t])
            emid = np.mean(list(esoles.values()), axis=0)
            est_err.append(np.linalg.norm((ecom - emid) - (com - mid)))
    err_a = np.array(err)
    result = {
        "evaluation": "stand",
        "controller": "wbc_stand",
        "fell": bool(fell),
        "duration_s": round(ts[-1], 3) if ts else 0.0,
        "com_error_rms_m": round(float(np.sqrt(np.mean(err_a**2))), 5) if len(err_a) else None,
        "com_error_max_m": round(float(err_a.max()), 5) if len(err_a) else None,
        "com_estimate_error_rms_m": round(float(np.sqrt(np.mean(np.square(est_err)))), 5)
        if est_err
        else None,
        "samples": len(stamps),
        "wbc_states": wbc_states,
        "driver_modes": g.probe.data.modes,
        "lockstep_timeouts": int(diag.get("lockstep_timeouts", "0") or 0),
        "realtime_factor": round(seconds / max(sim_wall, 1e-9), 3),
        "wall_s": round(time.monotonic() - wall0, 1),
    }
    if len(err_a):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.plot(ts, err_a * 100)
        ax.set_xlabel("time since the WBC took over (s)")
        ax.set_ylabel("|CoM - reference| horizontal (cm)")
        ax.set_title("WBC standing through the graph (estimator /odom in the loop); ground truth")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(Path(out_dir) / "stand_com_error.png", dpi=110)
        plt.close(fig)
    (Path(out_dir) / "stand.json").write_text(json.dumps(result, indent=2))
    return result
