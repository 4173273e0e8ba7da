"""One scorecard trial: (controller, scenario family, level, seed, robot) -> its outcome and figures.

:func:`run_trial` is a pure function of its :class:`TrialSpec`: the world is drawn from the family file's
seed, the trial seed and the level key (:meth:`~humanoid_bringup.scorecard.scenarios.Family.rng`), the
controller runs in process on the driver core with the state estimator's state
(:mod:`humanoid_bringup.scorecard.sim`), single-threaded; the same spec gives the same dictionary bit for bit
except ``wall_s`` (the trial's wall-clock time, s). A real error raises (the caller records it).

The dictionary (JSON-safe)::

    {"outcome": "survived" | "fell" | "safe_stop",
     "figures": {...},          # the family's figures (below)
     "spec": {...},             # dataclasses.asdict(spec)
     "wall_s": float}

Figures: push families ``max_Ns`` (largest survived impulse, N s), ``time_to_fall_s`` (from the push, in the
smallest failed push; None if none fell) and the bisection's trials; walking families ``time_to_fall_s`` (from
the event, or from the start of the walk when the family has no event; None if it survived),
``tracking_error_mps`` (mean planar velocity error while walking, heading frame), ``foot_slip_m`` (horizontal
sole travel while in contact, summed over both feet), ``distance_m`` and the family's own (see
:mod:`humanoid_bringup.scorecard.walks`).
"""

from __future__ import annotations

import copy
import os
import re
import time
import zlib
from dataclasses import asdict, dataclass
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # render_world headless: before MuJoCo is first imported

import numpy as np

from humanoid_bringup.scorecard.scenarios import can_run, load_family, validate_controller

OUTCOMES = ("survived", "fell", "safe_stop")
CACHE_SIZE = 256  # trials of families without a random element remembered per process (see run_trial)
_cache: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}


def clear_trial_cache() -> None:
    """Forget the remembered trials (:func:`run_trial`)."""
    _cache.clear()


@dataclass(frozen=True)
class TrialSpec:
    """One trial. ``controller``: ``policy:<name or manifest / IO-descriptor path>``, ``mpc_walk``,
    ``wbc_stand`` or any registered controller; ``scenario``: a family name; ``level``: a level key of its
    file; ``seed``: the trial seed (>= 0); ``robot``: a robot configuration name."""

    controller: str
    scenario: str
    level: str
    seed: int
    robot: str = "g1"

    def key(self) -> str:
        """Stable, filename-safe and unique per spec: the readable fields plus a CRC of the exact spec."""

        def safe(text: str) -> str:
            return re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-")[:60] or "x"

        exact = "\x1f".join((self.controller, self.scenario, self.level, str(self.seed), self.robot))
        crc = zlib.crc32(exact.encode()) & 0xFFFFFFFF
        parts = (self.robot, safe(self.controller), self.scenario, safe(self.level), f"s{self.seed}")
        return "__".join(parts) + f"__{crc:08x}"


def check_spec(spec: TrialSpec) -> None:
    """``ValueError`` naming a bad field: unknown family, level or controller, a missing policy file, a
    standing controller on a walking family, a negative seed."""
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int) or spec.seed < 0:
        raise ValueError(f"seed must be an integer >= 0, not {spec.seed!r}")
    family = load_family(spec.scenario, spec.robot)
    family.level(spec.level)
    validate_controller(spec.controller, spec.robot)
    if not can_run(spec.controller, family):
        raise ValueError(f"controller {spec.controller!r} only stands: family {spec.scenario!r} walks")


def _json_safe(value: Any) -> Any:
    """Numbers rounded to 6 significant digits of floats (JSON-stable), numpy types to Python."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return float(f"{v:.6g}") if np.isfinite(v) else None
    return value


def run_trial(spec: TrialSpec) -> dict[str, Any]:
    """Run one trial (module docstring).

    A family without a random element (``seeded: false``) gives every trial seed the same trial: the first
    one run in this process is remembered (up to :data:`CACHE_SIZE`, keyed by the checked family and level
    values) and the others reuse its outcome and figures (the same dictionary; ``wall_s`` is then the
    lookup's)."""
    wall0 = time.monotonic()
    check_spec(spec)
    family = load_family(spec.scenario, spec.robot)
    level = family.level(spec.level)
    key = None
    if not family.seeded:
        values = (family.seed, family.settings, level.params)
        key = (spec.controller, spec.scenario, spec.level, spec.robot, repr(values))
    if key is not None and key in _cache:
        outcome, figures = copy.deepcopy(_cache[key])
    else:
        outcome, figures = _simulate(spec, family, level)
        if key is not None and len(_cache) < CACHE_SIZE:
            _cache[key] = copy.deepcopy((outcome, figures))
    return {
        "outcome": outcome,
        "figures": figures,
        "spec": asdict(spec),
        "wall_s": round(time.monotonic() - wall0, 3),
    }


def _simulate(spec: TrialSpec, family: Any, level: Any) -> tuple[str, dict[str, Any]]:
    """The trial's simulation: (outcome, JSON-safe figures)."""
    if family.name in ("push_standing", "push_walking"):
        from humanoid_bringup.scorecard.pushes import push_family_trial

        outcome, figures = push_family_trial(spec.controller, spec.robot, family, level, spec.seed)
    else:
        from humanoid_bringup.scorecard.walks import walk_family_trial

        outcome, figures = walk_family_trial(spec.controller, spec.robot, family, level, spec.seed)
    if outcome not in OUTCOMES:
        raise AssertionError(f"outcome {outcome!r}")
    return outcome, _json_safe(figures)


def render_world(spec: TrialSpec, width: int = 320, height: int = 240) -> np.ndarray:
    """One RGB picture (``height`` x ``width`` x 3, uint8) of the trial's world at its start: the robot in
    its spawn pose and the scenario's terrain, obstacles, payload or ball, seen from its left side
    (offscreen MuJoCo; headless needs ``MUJOCO_GL=egl`` or ``osmesa``)."""
    from humanoid_bringup.scorecard.render import render_world as _render

    check_spec(spec)
    return _render(spec, width, height)
