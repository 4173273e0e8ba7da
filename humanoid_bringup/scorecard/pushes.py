"""The push families of the scorecard: the largest survived push (N s) in one direction, bisected.

A push is a constant horizontal force (N, world frame; the robot spawns facing +x, ``direction_deg`` 0 is
front, 90 left) on the base body for ``push_duration_s`` (the backend's
:meth:`~humanoid_control.hardware.mujoco_sim.MujocoBackend.push`). The bisection and the verdict are those of
``humanoid-eval push`` (:mod:`humanoid_bringup.evaluation.push_eval`: :func:`~push_eval.bisect`,
:func:`~push_eval._judge_series`, its tilt limit, settle and observation times as set in the family file), run
here in process with the estimator in the loop:

- ``push_standing``: the push ``settle_s`` after the controller took over. A standing-only controller
  (``wbc_stand``) must not step (no sole lifts or slides) and is watched ``observe_no_step_s``; the bracket
  is 1.6 x the LIPM no-step bound of the direction (as ``humanoid-eval push``; between the cardinal bounds
  on an ellipse for diagonals). Others may step, are watched ``observe_s`` and must come to rest; bracket
  ``top_Ns``.
- ``push_walking``: standing ``settle_s`` after the take-over, then walking forward at ``speed_mps``; after
  ``walk_s`` of walking the push lands at the seeded gait phase
  (the trial seed picks one of ``mid_left``, ``mid_right``, ``touchdown_left``, ``touchdown_right``: centred
  on the middle of that foot's single support, or starting as that foot touches down); survived: no fall for
  ``observe_s`` after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.push_eval import _judge_series, bisect
from humanoid_bringup.scorecard.scenarios import Family, Level
from humanoid_bringup.scorecard.sim import (
    PhaseTracker,
    Recorder,
    is_standing_controller,
    make_runner,
    robot_config,
)
from humanoid_control.hardware.push import PushLimits, validate_push

PHASES = ("mid_left", "mid_right", "touchdown_left", "touchdown_right")
CARDINAL = {"front": 0.0, "left": 90.0, "back": 180.0, "right": -90.0}


@dataclass
class PushTrial:
    """One push: impulse (N s), verdict and why, time from the push to the fall (s; None: no fall), the gait
    phase it landed at (walking) and the push start (s)."""

    impulse: float
    survived: bool
    reason: str
    time_to_fall_s: float | None
    phase: str | None
    push_t: float | None
    handovers: int | None = None  # the supervised controller: hand-overs to the model-based controller


def push_phase(seed: int) -> str:
    """The gait phase of a walking push trial with this seed."""
    return PHASES[int(seed) % len(PHASES)]


def no_step_bound(robot: str, direction_deg: float, duration: float) -> float:
    """The LIPM no-step impulse bound (N s) in a direction: the cardinal bounds of
    :func:`~humanoid_control.wbc.balance.push_impulse_bounds`, between them on an ellipse."""
    from humanoid_control.model.robot_model import load_pinocchio_model
    from humanoid_control.wbc.balance import push_impulse_bounds

    cfg = robot_config(robot)
    b = push_impulse_bounds(cfg, load_pinocchio_model(cfg), duration)
    a = math.radians(direction_deg)
    cx, sy = math.cos(a), math.sin(a)
    bx = b["front"]["bound_Ns"] if cx >= 0 else b["back"]["bound_Ns"]
    by = b["left"]["bound_Ns"] if sy >= 0 else b["right"]["bound_Ns"]
    return 1.0 / math.sqrt((cx / bx) ** 2 + (sy / by) ** 2)


def run_push(
    controller: str,
    robot: str,
    settings: dict[str, Any],
    direction_deg: float,
    impulse: float,
    walking: bool,
    phase: str | None = None,
) -> PushTrial:
    """One push trial (module docstring) of ``impulse`` N s."""
    cfg = robot_config(robot)
    runner = make_runner(controller, robot)
    s = settings
    rec = Recorder(
        runner,
        cfg.simulation.fall_height,
        math.radians(s["fall_tilt_deg"]),
        contact_force=s.get("contact_force_n", 30.0),
    )
    tracker = PhaseTracker()
    duration = s["push_duration_s"]
    a = math.radians(direction_deg)
    mag = impulse / duration
    request = validate_push(
        (mag * math.cos(a), mag * math.sin(a), 0.0), duration, PushLimits(timestep=cfg.simulation.timestep)
    )
    standing_ctl = is_standing_controller(controller)
    observe = float(s.get("observe_no_step_s", s["observe_s"]) if standing_ctl else s["observe_s"])
    push_t: float | None = None
    landed: str | None = None
    end_t = math.inf
    start_limit = 20.0  # s: the controller must take over (and walking reach its phase) before this
    try:
        while runner.time < min(end_t, start_limit if push_t is None else math.inf):
            t = runner.time
            active = rec.active_at
            if walking and active is not None and t >= active + s["settle_s"] - 1e-9:
                runner.set_cmd_vel(s["speed_mps"], 0.0, 0.0)
            tick = runner.control()
            rec.update(tick)
            if push_t is None and active is not None:
                if not walking:
                    due = t >= active + s["settle_s"] - 1e-9
                else:
                    contact = rec.contact[-1]
                    ev = tracker.update(t, contact)
                    walked = t >= active + s["settle_s"] + s["walk_s"]
                    late = t >= active + s["settle_s"] + s["walk_s"] + s["phase_search_s"]
                    due = walked and (tracker.due(str(phase), t, 0.5 * duration, contact, ev) or late)
                    landed = str(phase) if walked and not late else f"{phase} (not found)"
                if due:
                    runner.backend.push(request)
                    push_t = t
                    end_t = t + duration + observe
            elif walking and rec.contact:
                tracker.update(t, rec.contact[-1])
            runner.advance()
            if push_t is not None and (rec.finished() or _stepped(rec, push_t, standing_ctl)):
                break
    finally:
        runner.close()
    if push_t is None:
        raise RuntimeError(f"{controller} never took over (or never walked) within {start_limit:g} s")
    out = _verdict(rec, impulse, push_t, walking, standing_ctl, duration, observe, landed)
    summary = getattr(runner.controller, "summary", None)
    if summary is not None:
        out.handovers = len(summary()["handovers"])
    return out


def _stepped(rec: Recorder, push_t: float, standing_ctl: bool) -> bool:
    """A no-step controller lifted or slid a sole since the push (the trial has failed: stop early)."""
    if not standing_ctl or len(rec.t) % 25:
        return False
    from humanoid_bringup.evaluation.push_eval import MAX_LIFT_M, MAX_SLIDE_M

    i0 = next(i for i, t in enumerate(rec.t) if t >= push_t)
    for side in rec.soles[-1]:
        p0, p = rec.soles[i0][side], rec.soles[-1][side]
        if p[2] - p0[2] > MAX_LIFT_M or np.linalg.norm(p[:2] - p0[:2]) > MAX_SLIDE_M:
            return True
    return False


def _verdict(
    rec: Recorder,
    impulse: float,
    push_t: float,
    walking: bool,
    standing_ctl: bool,
    duration: float,
    observe_s: float,
    phase: str | None,
) -> PushTrial:
    if rec.outcome() != "survived":
        reason = rec.fall_reason if rec.outcome() == "fell" else "driver damping"
        ttf = None if rec.fell_at is None else round(rec.fell_at - push_t, 4)
        return PushTrial(impulse, False, reason, ttf, phase, push_t)
    series: dict[str, list[Any]] = {"t": [], "com": [], "soles": []}
    for k in range(0, len(rec.t), 2):
        if rec.t[k] >= push_t - 0.3:
            series["t"].append(rec.t[k] - push_t)
            series["com"].append(rec.com[k].tolist())
            series["soles"].append({side: p.tolist() for side, p in rec.soles[k].items()})
    reason = _judge_series(series, stepping=not standing_ctl, walking=walking, observe_s=observe_s)
    return PushTrial(
        impulse, not reason, reason or ("walked on" if walking else "stood"), None, phase, push_t
    )


def push_family_trial(
    controller: str, robot: str, family: Family, level: Level, seed: int
) -> tuple[str, dict[str, Any]]:
    """Bisect the largest survived push of one level (a direction): (outcome, figures). Outcome
    ``survived`` when that push is at least the family's ``survive_Ns``, else ``fell``."""
    s = family.settings
    walking = family.name == "push_walking"
    direction = float(level.params["direction_deg"])
    standing_ctl = is_standing_controller(controller)
    if walking and standing_ctl:
        raise ValueError(f"{controller} cannot walk: push_walking is not for it")
    phase = push_phase(seed) if walking else None
    bound = no_step_bound(robot, direction, s["push_duration_s"])
    top = 1.6 * bound if standing_ctl else float(s["top_Ns"])

    def trial(impulse: float) -> PushTrial:
        return run_push(controller, robot, s, direction, impulse, walking, phase)

    best, trials, _ = bisect(trial, top, int(s["iterations"]))
    failed = [tr for tr in trials if not tr.survived]
    first_fail = min(failed, key=lambda tr: tr.impulse) if failed else None
    outcome = "survived" if best >= s["survive_Ns"] - 1e-9 else "fell"
    figures: dict[str, Any] = {
        "max_Ns": round(best, 4),
        "bracket_Ns": round(top, 4),
        "beyond_bracket": not failed,  # nothing fell, not even the probe at 1.25 x top: at least max_Ns
        "step_Ns": round(top / 2 ** int(s["iterations"]), 4),
        "no_step_bound_Ns": round(bound, 4),
        "target_Ns": level.params.get("target_Ns"),
        "time_to_fall_s": None if first_fail is None else first_fail.time_to_fall_s,
        "direction_deg": direction,
        "phase": phase,
        "trials": [[round(tr.impulse, 4), tr.survived, tr.reason] for tr in trials],
    }
    if walking:
        figures["phases_landed"] = sorted({str(tr.phase) for tr in trials})
    if any(tr.handovers is not None for tr in trials):  # the supervised controller, per bisection push
        figures["handovers"] = [[round(tr.impulse, 4), tr.handovers] for tr in trials]
    return outcome, figures
