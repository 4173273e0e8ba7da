"""The walking families of the scorecard: terrain, payload, trip, impact, floor, randomized, faults.

One trial: the family's world (:mod:`~humanoid_bringup.scorecard.worlds`), the robot standing ``stand_s``
after the controller took over, then walking forward at ``speed_mps`` for ``walk_s`` (the velocity command;
heading frame); the family's event (:mod:`~humanoid_bringup.scorecard.events`) at the first mid single
support after ``event_after_s`` of walking. Judged from the ground truth (:class:`~.sim.Recorder`): ``fell``
(base below the robot's ``simulation.fall_height`` or tilted past ``fall_tilt_deg``), ``safe_stop`` (the
driver went to damping before any fall) or ``survived``.

Figures (units m, s, m/s, deg): ``time_to_fall_s`` (from the event, or from the start of the walk without
one; None: no fall), ``tracking_error_mps`` (mean planar velocity error from 1 s into the walk to its end or
the fall), ``foot_slip_m``, ``distance_m`` (forward travel of the base), ``event_t_s`` (since the walk
started), the world's drawn values (``world``), and per family: ``base_height_change_m`` / ``tilt_change_deg``
(payload, impact, faults: mean over 1 s after the event minus 1 s before), ``bar_contact`` (trip: a robot
geom touched the bar), ``ball_hit`` (impact: the ball touched the robot).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from humanoid_bringup.scorecard.events import Event, events_for
from humanoid_bringup.scorecard.scenarios import Family, Level
from humanoid_bringup.scorecard.sim import RATE_HZ, PhaseTracker, Recorder, make_runner, robot_config
from humanoid_bringup.scorecard.worlds import BALL_BODY, BAR_GEOM, world_for

TRACK_SKIP_S = 1.0  # the first second of the walk (accelerating) is not scored for tracking (s)
START_LIMIT_S = 10.0  # the controller must take over within this (s)
EVENT_STANDING_S = 2.0  # a timed event due with no single support for this long comes anyway (s)


class _Touch:
    """Whether a geom (or any geom of a body) touched the robot's bodies in the last physics state."""

    def __init__(self, runner: Any, geom: str | None = None, body: str | None = None) -> None:
        m = runner.backend.model
        self.data = runner.backend.data
        root = m.body_rootid[runner.backend.mj.base_body_id]
        self.robot_geom = m.body_rootid[m.geom_bodyid] == root
        if geom is not None:
            self.ids = np.array([m.geom(geom).id])
        else:
            self.ids = np.flatnonzero(m.geom_bodyid == m.body(body).id)
        self.first: float | None = None

    def update(self, t: float) -> None:
        if self.first is not None:
            return
        n = self.data.ncon
        if n == 0:
            return
        g = np.array(self.data.contact.geom[:n])
        mine = np.isin(g, self.ids)
        hit = (mine[:, 0] & self.robot_geom[g[:, 1]]) | (mine[:, 1] & self.robot_geom[g[:, 0]])
        if hit.any():
            self.first = t


def walk_family_trial(
    controller: str, robot: str, family: Family, level: Level, seed: int
) -> tuple[str, dict[str, Any]]:
    """One walking trial (module docstring): (outcome, figures)."""
    cfg = robot_config(robot)
    s = family.settings
    world = world_for(family, level, seed, cfg)
    events: list[Event] = events_for(family, level, world, cfg)
    delay = round(float(world.drawn.get("latency_s", 0.0)) * RATE_HZ)
    runner = make_runner(controller, robot, edit=world.edit, delay_ticks=delay)
    rec = Recorder(
        runner, cfg.simulation.fall_height, math.radians(s["fall_tilt_deg"]), s.get("contact_force_n", 30.0)
    )
    tracker = PhaseTracker()
    touch = None
    if family.name == "trip":
        touch = _Touch(runner, geom=BAR_GEOM)
    elif family.name == "impact":
        touch = _Touch(runner, body=BALL_BODY)
    timed = [e for e in events if family.name != "randomized"]
    for e in events:
        e.install(runner)
    walk_t0: float | None = None
    event_t: float | None = None
    event_in_stance = False
    end_t = math.inf
    try:
        while runner.time < min(end_t, START_LIMIT_S if walk_t0 is None else math.inf):
            t = runner.time
            if walk_t0 is None and rec.active_at is not None:
                walk_t0 = rec.active_at + s["stand_s"]
                end_t = walk_t0 + s["walk_s"]
            walking = walk_t0 is not None and t >= walk_t0 - 1e-9
            runner.set_cmd_vel(s["speed_mps"] if walking else 0.0, 0.0, 0.0)
            tick = runner.control()
            rec.update(tick)
            ev = tracker.update(t, rec.contact[-1])
            if touch is not None:
                touch.update(t)
            if timed and walk_t0 is not None and rec.contact:
                due_t = walk_t0 + s.get("event_after_s", 0.0)
                if event_t is None and t >= due_t - 1e-9:
                    contact = rec.contact[-1]
                    # at mid single support; a robot that stopped stepping (a supervisor's walking controller
                    # standing after its capture steps) gets the event standing, EVENT_STANDING_S after due
                    mid = any(tracker.due(f"mid_{side}", t, 0.0, contact, ev) for side in ("left", "right"))
                    if mid or t >= due_t + EVENT_STANDING_S - 1e-9:
                        event_in_stance = not mid
                        event_t = t
                        for e in timed:
                            e.start(runner, t)
                elif event_t is not None:
                    for e in timed:
                        e.tick(runner, t)
            runner.advance()
            if rec.finished():
                break
    finally:
        runner.close()
    if walk_t0 is None:
        raise RuntimeError(f"{controller} never took over within {START_LIMIT_S:g} s")
    outcome = rec.outcome()
    ref = event_t if event_t is not None else walk_t0
    t_end = rec.t[-1] if rec.fell_at is None else rec.fell_at
    base = np.array(rec.base)
    figures: dict[str, Any] = {
        "time_to_fall_s": None if rec.fell_at is None else round(rec.fell_at - ref, 4),
        "tracking_error_mps": rec.tracking_error(walk_t0 + TRACK_SKIP_S, t_end),
        "foot_slip_m": rec.foot_slip,
        "distance_m": float(base[-1, 0] - base[0, 0]),
        "event_t_s": None if event_t is None else round(event_t - walk_t0, 4),
        "world": {k: v for k, v in world.drawn.items() if not isinstance(v, list) or len(v) <= 3},
    }
    if event_in_stance:  # the robot was not stepping when the event was due (it came standing)
        figures["event_in_stance"] = True
    if timed and event_t is None and outcome == "survived":
        raise RuntimeError(f"{family.name}/{level.key}: the event never happened (no mid single support)")
    if event_t is not None:  # payload, impact, faults
        t = np.array(rec.t)
        before, after = (t >= event_t - 1.0) & (t < event_t), (t >= event_t) & (t < event_t + 1.0)
        if before.any() and after.any():
            tilt = np.degrees(np.array(rec.tilt))
            figures["base_height_change_m"] = float(base[after, 2].mean() - base[before, 2].mean())
            figures["tilt_change_deg"] = float(tilt[after].mean() - tilt[before].mean())
    supervisor = getattr(runner.controller, "summary", None)
    if supervisor is not None:  # the supervised controller: its handovers and shares
        figures["supervisor"] = supervisor()
    if touch is not None:
        key = "bar_contact" if family.name == "trip" else "ball_hit"
        figures[key] = touch.first is not None
        figures[key + "_t_s"] = None if touch.first is None else round(touch.first - walk_t0, 4)
    return outcome, figures
