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

from humanoid_bringup.evaluation.push_eval import PushOptions, bisect
from humanoid_bringup.scorecard.pushes import CARDINAL, run_push

#: controllers this path evaluates (the others go through the graph: :mod:`.push_eval`)
IN_PROCESS = ("supervised",)


def run_push_inprocess(
    out_dir: Path, opts: PushOptions, policy: str = "", robot: str = "g1", log: Any = print
) -> dict[str, Any]:
    """Bisect the largest survived push per direction (module docstring) for ``opts`` (checked by
    :meth:`PushOptions.check`; its ``iterations`` and ``max_impulse``, else the family's ``top_Ns``); the
    result dictionary, also written to ``out_dir/push.json``. ``policy``: the learned policy inside (empty:
    the robot's default)."""
    from humanoid_bringup.evaluation.policy_bench import bench_policy_name
    from humanoid_bringup.scorecard.scenarios import load_family, validate_controller
    from humanoid_control.model.robot_config import load_robot_config

    if opts.controller not in IN_PROCESS:
        raise ValueError(f"in process: controller must be one of {list(IN_PROCESS)}, not {opts.controller!r}")
    config = load_robot_config(robot)
    opts.check(config.walking.max_forward)
    policy = bench_policy_name(policy, config)
    spec = f"{opts.controller}:{policy}"
    validate_controller(spec, robot)
    walking = opts.walking
    family = load_family("push_walking" if walking else "push_standing", robot)
    settings = dict(family.settings)
    if walking:
        settings["speed_mps"] = opts.walking_speed
    steps = opts.iterations
    top = float(opts.max_impulse if opts.max_impulse is not None else settings["top_Ns"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wall0 = time.monotonic()
    result: dict[str, Any] = {
        "evaluation": "push",
        "controller": opts.controller,
        "policy": policy,
        "path": "in_process",
        "push_duration_s": settings["push_duration_s"],
        "walking_speed_mps": opts.walking_speed,
    }
    worst = 0
    for direction in opts.directions:
        per_stance: dict[str, Any] = {}
        for stance in opts.stances if walking else ("",):
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
    walking = bool(stance)
    phase = f"mid_{stance}" if walking else None
    where = f"{direction} {stance} stance" if walking else direction

    def trial(impulse: float) -> Any:
        tr = run_push(spec, robot, settings, CARDINAL[direction], impulse, walking, phase)
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
