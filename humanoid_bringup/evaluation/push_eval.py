"""Push and stand evaluations through the ROS graph (driver, state estimator, WBC or walking controller:
separate processes, lockstep).

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

``humanoid-eval push --controller mpc_walk [--walking-speed V]``: the same bisection with the walking
controller (``walking_controller``), which may step. Bisected on ``[0, --max-impulse]`` (40 N s by default).

- Standing (``V`` = 0): the push comes ``SETTLE_S`` after the controller took over. **Survived**: no fall (the
  driver never damps, the controller never faults, the base stays above ``simulation.fall_height`` and tilts
  less than ``MAX_TILT_DEG``) for ``OBSERVE_STEP_S`` after the push, and the CoM then moves slower than
  ``MAX_END_SPEED`` (it stepped and came to rest). Lifting or moving a foot is allowed.
- Walking (``V`` > 0, forward): ``/cmd_vel`` = (V, 0, 0) from ``SETTLE_S`` after the take-over; after
  ``WALK_S`` of walking the push is centred on the middle of the next single support of the named stance
  foot (``--stances left,right``; from ``/walking/status``, 50 Hz, so up to 20 ms late). **Survived**: no
  fall for ``OBSERVE_STEP_S`` after the push (whether it walks on is not judged). Per direction ``max_Ns``
  is the smaller of ``left_stance`` and ``right_stance`` (each with its bisection's ``max_Ns`` and trials).

Every controller's JSON also has ``target_Ns`` and ``meets_target`` per direction: the issue's goals for
``mpc_walk`` (:data:`PUSH_TARGETS_NS`), null for ``wbc_stand`` (the no-step bound is its yardstick).

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
OBSERVE_STEP_S = 2.5  # mpc_walk: watched after the push ends (s): the recovery steps and coming to rest
WALK_S = 2.0  # mpc_walk walking: walked before the stance foot's single support is looked for (s)
STANCE_SEARCH_S = 1.5  # ... and the longest that single support is waited for (s)
DEFAULT_MAX_IMPULSE_NS = 40.0  # mpc_walk: the bisection's bracket (N s)
STANCES = ("left", "right")
# the goals (N s) for the walking controller: standing (stepping allowed) and walking at 0.3 m/s
PUSH_TARGETS_NS: dict[str, dict[str, float]] = {
    "standing": {"front": 20.0, "back": 20.0, "left": 25.0, "right": 25.0},
    "walking": {"front": 20.0, "back": 20.0, "left": 15.0, "right": 15.0},
}


@dataclass(frozen=True)
class PushOptions:
    """What one push evaluation bisects: controller, push directions (world axes), walking speed (m/s,
    forward; 0 standing), stance feet (walking), bisection steps and bracket (N s; None: 1.6 x the no-step
    bound per direction, the ``wbc_stand`` default)."""

    controller: str = "wbc_stand"
    directions: tuple[str, ...] = ("front", "back", "left", "right")
    walking_speed: float = 0.0
    stances: tuple[str, ...] = STANCES
    iterations: int = 5
    max_impulse: float | None = None

    @property
    def walking(self) -> bool:
        """Pushed while walking (mpc_walk, speed > 0)."""
        return self.walking_speed > 0.0

    def check(self, max_forward: float = math.inf) -> PushOptions:
        """Refuse what cannot be run (``ValueError`` naming it); ``max_forward``: the command limit (m/s)."""
        if self.controller not in ("wbc_stand", "mpc_walk", "supervised"):  # supervised: push_inprocess
            raise ValueError(f"controller must be wbc_stand, mpc_walk or supervised, not {self.controller!r}")
        if not self.directions or any(d not in DIRECTIONS for d in self.directions):
            raise ValueError(
                f"directions must be a non-empty subset of {list(DIRECTIONS)}, not {self.directions!r}"
            )
        if len(set(self.directions)) != len(self.directions):
            raise ValueError(f"directions listed twice: {self.directions}")
        if (
            not self.stances
            or any(s not in STANCES for s in self.stances)
            or len(set(self.stances)) != len(self.stances)
        ):
            raise ValueError(f"stances must be a non-empty subset of {list(STANCES)}: {self.stances}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int):
            raise ValueError(f"iterations must be an integer, not {self.iterations!r}")
        if not 1 <= self.iterations <= 12:
            raise ValueError(f"iterations must be in [1, 12], not {self.iterations}")
        if self.max_impulse is not None and not (math.isfinite(self.max_impulse) and self.max_impulse > 0):
            raise ValueError(f"max impulse must be a finite number > 0 N s, not {self.max_impulse}")
        if not math.isfinite(self.walking_speed) or self.walking_speed < 0:
            raise ValueError(f"walking speed must be a finite number >= 0 m/s, not {self.walking_speed}")
        if self.walking_speed > 0 and self.controller == "wbc_stand":
            raise ValueError("a walking speed needs --controller mpc_walk (or supervised)")
        if self.walking_speed > max_forward + 1e-9:
            raise ValueError(f"walking speed {self.walking_speed} m/s is beyond the limit {max_forward} m/s")
        return self

    def bracket(self, bound_ns: float) -> float:
        """Top of the bisection bracket (N s) for a direction whose no-step bound is ``bound_ns``."""
        if self.max_impulse is not None:
            return float(self.max_impulse)
        return DEFAULT_MAX_IMPULSE_NS if self.controller == "mpc_walk" else 1.6 * bound_ns

    def target(self, direction: str) -> float | None:
        """The issue's goal (N s) for this direction, None for ``wbc_stand``."""
        if self.controller != "mpc_walk":
            return None
        return PUSH_TARGETS_NS["walking" if self.walking else "standing"][direction]

    def folder(self) -> str:
        """Result folder name: ``push_<controller>`` (``_walking_<V>`` when walking)."""
        return f"push_{self.controller}" + (f"_walking_{self.walking_speed:g}" if self.walking else "")


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
    phase_s: float | None = None  # walking: push start since the stance's single support began (s)


def push_options(args: Any) -> PushOptions:
    """:class:`PushOptions` from ``humanoid-eval push``'s parsed arguments (not yet checked)."""

    def names(text: str) -> tuple[str, ...]:
        return tuple(v.strip() for v in str(text).split(",") if v.strip())

    return PushOptions(
        controller=args.controller,
        directions=names(args.directions),
        walking_speed=float(args.walking_speed),
        stances=names(args.stances),
        iterations=args.iterations,
        max_impulse=args.max_impulse,
    )


def _stance_start(g: WbcGraph, stance: str) -> float:
    """mpc_walk walking: run on to the next single support of ``stance`` in ``/walking/status``; the
    simulated time (s) of its first status row there."""
    other = "right" if stance == "left" else "left"

    def single(row: dict[str, float]) -> bool:
        on, off = row.get(f"contact_{stance}", 0.0), row.get(f"contact_{other}", 1.0)
        return bool(row) and on > 0.5 and off < 0.5

    end = g.now() + STANCE_SEARCH_S
    was = single(g.latest_status())
    while g.now() < end:
        g.run_to(g.now() + 0.02)  # the status rate: one row per step, read at a held tick
        row = g.latest_status()
        now = single(row)
        if now and not was:
            return row["t"]
        was = now
    raise RuntimeError(f"no {stance} single support within {STANCE_SEARCH_S} s of walking")


def run_trial(
    g: WbcGraph,
    kin: Kinematics,
    direction: str,
    impulse: float,
    config: Any,
    walking_speed: float = 0.0,
    stance: str | None = None,
) -> Trial:
    """Respawn, stand ``SETTLE_S`` (walk ``WALK_S`` and wait for ``stance``'s single support when
    ``walking_speed`` > 0), push, watch; judge with the module's criteria (``g.controller``'s)."""
    wall0 = time.monotonic()
    stepping = g.walking
    t_single: float | None = None
    if stepping:
        g.set_cmd_vel(0.0)
    t_active = g.respawn_and_take_over()
    g.forget_before(t_active - 0.5)
    force = push_force(direction, impulse, PUSH_DURATION_S)
    g.set_push(force, PUSH_DURATION_S)
    g.run_to(t_active + SETTLE_S)
    if walking_speed > 0.0:
        g.set_cmd_vel(walking_speed)
        g.run_to(t_active + SETTLE_S + WALK_S)
        t_single = _stance_start(g, stance or "left")
        mid = t_single + 0.5 * config.walking.single_support
        g.run_to(mid - 0.5 * PUSH_DURATION_S - 0.002)  # the push acts from the next tick
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
    observe = OBSERVE_STEP_S if stepping else OBSERVE_S
    end_t = push_t + PUSH_DURATION_S + observe
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
        if not stepping and last is not None and state is not None:  # a step moves the reference
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
                reason = reason or f"{g.node_name} fault"
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
        reason = _judge_series(series, stepping=stepping, walking=walking_speed > 0.0, observe_s=observe)
    phase = None if t_single is None else round(push_t - t_single, 4)
    wall = time.monotonic() - wall0
    return Trial(
        direction,
        impulse,
        not reason,
        reason or ("walked on" if walking_speed > 0.0 else "stood"),
        push_t,
        series,
        wall,
        phase,
    )


def _judge_series(series: dict[str, list[Any]], stepping: bool, walking: bool, observe_s: float) -> str:
    """Why a trial that did not fall failed after all ("" if it survived): from its recorded series (times
    since the push, s; ground-truth CoM and soles, m). No step allowed (``wbc_stand``): a sole lifted or
    slid; standing: the CoM still moving at the end; always: the series ends early."""
    reason = ""
    ts = np.array(series["t"])
    if not stepping:
        at_push = int(np.argmin(np.abs(ts)))
        for side in series["soles"][0]:
            sole = np.array([s[side] for s in series["soles"]])[at_push:]
            lift = float((sole[:, 2] - sole[0, 2]).max())
            slide = float(np.linalg.norm(sole[:, :2] - sole[0, :2], axis=1).max())
            if lift > MAX_LIFT_M:
                reason = f"{side} sole lifted {lift * 100:.1f} cm"
            elif slide > MAX_SLIDE_M:
                reason = f"{side} sole slid {slide * 100:.1f} cm"
    if not reason and not walking:
        tail = np.array(series["com"])[ts >= ts[-1] - 0.1]
        speed = float(np.linalg.norm(tail[-1, :2] - tail[0, :2]) / 0.1) if len(tail) > 1 else 0.0
        if speed > MAX_END_SPEED:
            reason = f"CoM still moving {speed:.2f} m/s at the end"
    if not reason and ts[-1] < PUSH_DURATION_S + observe_s - 0.05:
        reason = "trial ended early"
    return reason


def bisect(trial: Any, top: float, iterations: int) -> tuple[float, list[Any], Any]:
    """Largest impulse (N s) for which ``trial(impulse)`` survives (its result has ``survived``), by
    bisection on ``[0, top]``; if no trial failed, one more at ``1.25 top``. Returns (largest survived, all
    trials in order, the trial of the largest survived or None)."""
    lo, hi = 0.0, float(top)
    trials: list[Any] = []
    best = None
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        tr = trial(mid)
        trials.append(tr)
        if tr.survived:
            lo, best = mid, tr
        else:
            hi = mid
    if lo >= top * (1 - 0.5**iterations) - 1e-9:  # never failed: probe beyond the bracket
        tr = trial(1.25 * top)
        trials.append(tr)
        if tr.survived:
            lo, best = 1.25 * top, tr
    return lo, trials, best


def bisect_direction(
    g: WbcGraph,
    kin: Kinematics,
    config: Any,
    direction: str,
    bound: float,
    iterations: int,
    log: Any,
    top: float | None = None,
    walking_speed: float = 0.0,
    stance: str | None = None,
) -> tuple[float, list[Trial], Trial | None]:
    """Largest survived impulse (N s) by :func:`bisect` on ``[0, top]`` (default ``1.6 bound``)."""
    label = direction + (f" ({stance} stance)" if stance else "")

    def trial(impulse: float) -> Trial:
        tr = run_trial(g, kin, direction, impulse, config, walking_speed=walking_speed, stance=stance)
        phase = "" if tr.phase_s is None else f", pushed {tr.phase_s:.3f} s into single support"
        log(
            f"  {label}: {impulse:6.2f} N s ({impulse / bound * 100:5.1f} % of bound) -> {tr.reason} "
            f"[{tr.wall_s:.1f} s wall{phase}]"
        )
        return tr

    return bisect(trial, 1.6 * bound if top is None else top, iterations)


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


def direction_entry(
    best_ns: float, bound_ns: float, target: float | None, trials: list[Trial]
) -> dict[str, Any]:
    """One direction's JSON: ``max_Ns``, ``bound_Ns``, ``ratio``, ``target_Ns``, ``meets_target``,
    ``trials`` ([impulse N s, survived, reason])."""
    return {
        "max_Ns": round(best_ns, 3),
        "bound_Ns": round(bound_ns, 3),
        "ratio": round(best_ns / bound_ns, 3),
        "target_Ns": target,
        "meets_target": None if target is None else bool(best_ns >= target - 1e-9),
        "trials": [[round(tr.impulse, 3), tr.survived, tr.reason] for tr in trials],
    }


def combine_stances(per_stance: dict[str, dict[str, Any]], target: float | None) -> dict[str, Any]:
    """A walking direction's JSON from its per-stance entries: ``max_Ns`` (and ``ratio``, ``meets_target``)
    of the weaker stance, each stance's entry under ``<side>_stance``."""
    weakest = min(per_stance.values(), key=lambda e: e["max_Ns"])
    out: dict[str, Any] = {
        "max_Ns": weakest["max_Ns"],
        "bound_Ns": weakest["bound_Ns"],
        "ratio": weakest["ratio"],
        "target_Ns": target,
        "meets_target": None if target is None else bool(weakest["max_Ns"] >= target - 1e-9),
    }
    for side, entry in per_stance.items():
        out[f"{side}_stance"] = {k: v for k, v in entry.items() if k not in ("bound_Ns", "target_Ns")}
    return out


def run_push_eval(
    out_dir: Path,
    robot: str = "g1",
    directions: tuple[str, ...] = ("front", "back", "left", "right"),
    iterations: int = 5,
    log: Any = print,
    options: PushOptions | None = None,
) -> dict[str, Any]:
    """Bisect the survived push impulse per direction through the graph; the result dictionary.
    ``options`` (:class:`PushOptions`) overrides ``directions`` and ``iterations``."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.balance import push_impulse_bounds

    wall0 = time.monotonic()
    config = load_robot_config(robot)
    opts = options or PushOptions(directions=tuple(directions), iterations=iterations)
    opts.check(config.walking.max_forward)
    if opts.controller == "supervised":
        raise ValueError("supervised is bisected in process: push_inprocess.run_push_inprocess")
    kin = Kinematics(config)
    bounds = push_impulse_bounds(config, kin.pmodel, PUSH_DURATION_S)
    g = WbcGraph(Path(out_dir), robot, controller=opts.controller)
    result: dict[str, Any] = {
        "evaluation": "push",
        "controller": opts.controller,
        "push_duration_s": PUSH_DURATION_S,
        "walking_speed_mps": opts.walking_speed,
    }
    try:
        g.start()
        log(f"graph up, {g.node_name} active after {time.monotonic() - wall0:.1f} s wall")
        for direction in opts.directions:
            b = bounds[direction]
            top = opts.bracket(b["bound_Ns"])
            target = opts.target(direction)
            stances: tuple[str | None, ...] = opts.stances if opts.walking else (None,)
            entries: dict[str, dict[str, Any]] = {}
            for stance in stances:
                best_ns, trials, best = bisect_direction(
                    g,
                    kin,
                    config,
                    direction,
                    b["bound_Ns"],
                    opts.iterations,
                    log,
                    top=top,
                    walking_speed=opts.walking_speed,
                    stance=stance,
                )
                entry = direction_entry(best_ns, b["bound_Ns"], target, trials)
                if best is not None:
                    name = f"push_{direction}" + (f"_{stance}_stance" if stance else "")
                    png = Path(out_dir) / f"{name}.png"
                    plot_push(png, direction, best, b)
                    entry["plot"] = str(png)
                entries[stance or ""] = entry
            result[direction] = entries[""] if "" in entries else combine_stances(entries, target)
        diag = g.probe.last_diagnostics()
    finally:
        g.stop()
    result["lockstep_timeouts"] = int(diag.get("lockstep_timeouts", "0") or 0)
    result["respawn_retries"] = g.respawn_retries
    result["parameter_retries"] = g.parameter_retries
    result["bound_params"] = {k: round(v, 4) for k, v in bounds["params"].items()}
    stepping = opts.controller == "mpc_walk"
    result["criteria"] = {
        "max_tilt_deg": MAX_TILT_DEG,
        "max_sole_lift_m": None if stepping else MAX_LIFT_M,
        "max_sole_slide_m": None if stepping else MAX_SLIDE_M,
        "max_end_com_speed_mps": None if opts.walking else MAX_END_SPEED,
        "early_stop_com_offset_m": None if stepping else MAX_COM_OFFSET_M,
        "settle_s": SETTLE_S,
        "observe_s": OBSERVE_STEP_S if stepping else OBSERVE_S,
        "walk_before_push_s": WALK_S if opts.walking else None,
        "bisection_top_Ns": opts.max_impulse or (DEFAULT_MAX_IMPULSE_NS if stepping else "1.6 x bound_Ns"),
        "iterations": opts.iterations,
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
