"""``humanoid-eval push --controller supervised``: the push bisection of ``humanoid-eval push`` for the
supervised controller, run in process (MuJoCo, the state estimator in the loop, the driver core: the
scorecard's push trial, :func:`humanoid_bringup.scorecard.pushes.run_push`), not through the ROS graph.

Why in process: the graph evaluation (:mod:`.push_eval`) finds the walking controller's phases on
``/walking/status`` and its take-over on the controller node's state; the supervised controller runs in the
driver's loop, and its gait is the policy's. The scorecard's trial finds the gait phase from the feet's
contacts instead, and its verdicts and bisection are those of ``humanoid-eval push`` (its push families'
settings: ``config/scenarios/push_standing.yaml`` and ``push_walking.yaml``; the graph check of the scorecard
compares both paths: ``humanoid-eval scorecard --graph-check``).

Per direction (world axes; the robot spawns facing +x): standing, the push ``settle_s`` after the take-over;
walking (``--walking-speed`` V > 0, forward), one bisection per stance foot, centred on the middle of its
single support; ``max_Ns`` is the smaller over the stances. Each push's number of handovers to the walking
controller is kept (``trials``: impulse N s, survived, reason, handovers) and ``max_handovers_per_push``
(the issue's bound: at most 2 per disturbance) is reported.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from humanoid_bringup.evaluation.push_eval import bisect

#: world-axis directions (deg, counter-clockwise from +x): those of ``humanoid-eval push``
DIRECTION_DEG = {"front": 0.0, "left": 90.0, "back": 180.0, "right": -90.0}
STANCES = ("left", "right")
#: controllers this path evaluates (the others go through the graph: :mod:`.push_eval`)
IN_PROCESS = ("supervised",)


def run_push_inprocess(
    out_dir: Path,
    controller: str,
    policy: str = "",
    robot: str = "g1",
    directions: tuple[str, ...] = ("front", "back", "left", "right"),
    walking_speed: float = 0.0,
    stances: tuple[str, ...] = STANCES,
    iterations: int | None = None,
    max_impulse: float | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Bisect the largest survived push per direction (module docstring); the result dictionary, also
    written to ``out_dir/push.json``. ``policy``: the learned policy inside (empty: the robot's default)."""
    import math

    from humanoid_bringup.evaluation.policy_bench import bench_policy_name
    from humanoid_bringup.scorecard.scenarios import load_family, validate_controller
    from humanoid_control.model.robot_config import load_robot_config

    if controller not in IN_PROCESS:
        raise ValueError(f"in process: controller must be one of {list(IN_PROCESS)}, not {controller!r}")
    if (
        not directions
        or any(d not in DIRECTION_DEG for d in directions)
        or len(set(directions)) < len(directions)
    ):
        raise ValueError(f"directions must be a non-empty subset of {list(DIRECTION_DEG)}: {directions}")
    if not stances or any(s not in STANCES for s in stances) or len(set(stances)) < len(stances):
        raise ValueError(f"stances must be a non-empty subset of {list(STANCES)}: {stances}")
    config = load_robot_config(robot)
    if not math.isfinite(walking_speed) or not 0.0 <= walking_speed <= config.walking.max_forward:
        top_speed = config.walking.max_forward
        raise ValueError(f"walking speed must be in [0, {top_speed}] m/s, not {walking_speed}")
    if max_impulse is not None and not (math.isfinite(max_impulse) and max_impulse > 0.0):
        raise ValueError(f"max impulse must be a finite number > 0 N s, not {max_impulse}")
    policy = bench_policy_name(policy, config)
    spec = f"{controller}:{policy}"
    validate_controller(spec, robot)
    walking = walking_speed > 0.0
    family = load_family("push_walking" if walking else "push_standing", robot)
    settings = dict(family.settings)
    if walking:
        settings["speed_mps"] = walking_speed
    steps = int(iterations if iterations is not None else settings["iterations"])
    if not 1 <= steps <= 12:
        raise ValueError(f"iterations must be in [1, 12], not {steps}")
    top = float(max_impulse if max_impulse is not None else settings["top_Ns"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wall0 = time.monotonic()
    result: dict[str, Any] = {
        "evaluation": "push",
        "controller": controller,
        "policy": policy,
        "path": "in_process",
        "push_duration_s": settings["push_duration_s"],
        "walking_speed_mps": walking_speed,
    }
    worst = 0
    for direction in directions:
        per_stance: dict[str, Any] = {}
        for stance in stances if walking else ("",):
            per_stance[stance] = _bisect(spec, robot, settings, direction, stance, top, steps, log)
            worst = max([worst, *(h or 0 for *_, h in per_stance[stance]["trials"])])
        entry: dict[str, Any] = {"max_Ns": min(e["max_Ns"] for e in per_stance.values())}
        if walking:
            entry["stances"] = per_stance
        else:
            entry.update(per_stance[""])
        entry["step_Ns"] = round(top / 2**steps, 4)
        result[direction] = entry
    result["max_handovers_per_push"] = worst
    result["criteria"] = {
        "bisection_top_Ns": top,
        "iterations": steps,
        "settle_s": settings["settle_s"],
        "observe_s": settings["observe_s"],
        "fall_tilt_deg": settings["fall_tilt_deg"],
        "walk_before_push_s": settings.get("walk_s") if walking else None,
    }
    result["wall_s"] = round(time.monotonic() - wall0, 1)
    (out_dir / "push.json").write_text(json.dumps(result, indent=2))
    return result


def _bisect(
    spec: str,
    robot: str,
    settings: dict[str, Any],
    direction: str,
    stance: str,
    top: float,
    steps: int,
    log: Any,
) -> dict[str, Any]:
    """One bisection: ``direction``, standing (``stance`` empty) or at the middle of ``stance``'s single
    support; its largest survived push and every push (impulse, survived, reason, handovers)."""
    from humanoid_bringup.scorecard.pushes import run_push

    walking = bool(stance)
    phase = f"mid_{stance}" if walking else None
    where = f"{direction} {stance} stance" if walking else direction

    def trial(impulse: float) -> Any:
        tr = run_push(spec, robot, settings, DIRECTION_DEG[direction], impulse, walking, phase)
        log(
            f"{where}: {impulse:.2f} N s {'survived' if tr.survived else 'fell'} ({tr.reason}), "
            f"handovers {tr.handovers}"
        )
        return tr

    best, trials, _ = bisect(trial, top, steps)
    return {
        "max_Ns": round(best, 4),
        "beyond_bracket": all(tr.survived for tr in trials),
        "trials": [[round(tr.impulse, 4), tr.survived, tr.reason, tr.handovers] for tr in trials],
    }
