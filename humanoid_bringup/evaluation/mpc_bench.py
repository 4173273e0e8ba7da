"""``humanoid-bench mpc``: the pattern generator's re-solve time on a recorded footstep plan, and PlaCo's.

The plan (``config/bench/mpc_walk_plan.json``, recorded from :class:`FootstepPlanner` by
:func:`record_walk_plan`): the G1 (``--robot``: another robot gets the same segments planned for it at the
start, :func:`robot_walk_plan`) starting from its nominal stance, 8 steps straight at 0.4 m/s, then 8 steps at
0.4 m/s turning at 0.3 rad/s (single support 0.4 s, double support 0.1 s, 0.4 s of weight transfer at the
start and the end; 8.7 s in all). Stored rather than re-planned so that the figures stay comparable when the
planner changes; :func:`load_walk_plan` refuses a malformed or infeasible file.

Ours: :class:`WalkingGenerator` (the ZMP preview QP on OSQP, 80 samples of 20 ms) solved once at the plan's
start from the CoM at rest, then re-solved at ``rate`` (50 Hz) along the plan from its own prediction
(``replan(t)``), as the walking controller does between touchdowns, until the horizon reaches the plan's
end; this is cycled ``repeats`` times. Each re-solve is timed whole (``time.perf_counter`` around
``replan``: the prediction, the assembly, OSQP's update, factorization and solve, the outputs):
``mpc_solve_us_median``, ``mpc_solve_us_p99``; OSQP's part alone is ``mpc_osqp_us_median``. The same calls
are also timed in this thread's CPU time (``time.thread_time``: ``mpc_solve_cpu_us_*``,
``placo_cpu_us_median``, ``ratio_vs_placo_cpu``), which leaves out the time the process waits for a core:
on a machine shared with other work the wall-clock figures measure the load as much as the code.

PlaCo: ``WalkPatternGenerator`` of ``placo`` 0.10.2 (Rhoban; a LIPM jerk QP per support, ZMP in the support
polygon, built and solved by its C++ ``problem`` layer with dense matrices) in its own virtual environment
(``make placo``: it pins ``pin`` 3.8.0), run as a subprocess (:mod:`.placo_peer`) on the same footsteps,
timing (``dt`` 20 ms, the same support durations), ZMP margin, CoM height, horizon (the supports covering
the same 80 samples, the last one cut) and re-solve times, re-solving from its own previous trajectory
(``replan``), timed the same way around the call. PlaCo's feet are rectangles: the sole
polygon's length at its narrowest width (inside the G1 sole). Both run single-threaded (one core's work;
``--cpu N`` pins both to core ``N``), in blocks of ``block`` re-solves in turn, so that both see the same
machine load; the 1-minute load average at the start and the end is reported
(``loadavg_1min_start`` / ``_end``: on a shared machine the figures move with it). ``placo_us_median``,
``placo_us_p99``, ``ratio_vs_placo`` (ours / PlaCo's median); null with the reason in ``placo`` when the
PlaCo environment is not there.

The two formulations differ (ours: one QP over the horizon with a terminal DCM term, the ZMP reference moving
linearly through each double support; PlaCo's: the ZMP reference at each support's centre, soft): the
comparison is the cost of one re-solve at the same size, not of identical problems.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_control.model.config_sources import config_dir_candidates
from humanoid_control.model.robot_config import RobotConfig, load_robot_config
from humanoid_control.walking.footsteps import SIDES, Footstep, FootstepPlan, FootstepPlanner, VelocityCommand
from humanoid_control.walking.geometry import Pose2D, inside_polygon

PLAN_NAME = "bench/mpc_walk_plan.json"
# the recorded plan: (vx m/s, vy m/s, wz rad/s, steps) segments
PLAN_SEGMENTS: tuple[tuple[float, float, float, int], ...] = ((0.4, 0.0, 0.0, 8), (0.4, 0.0, 0.3, 8))
_PLAN_KEYS = {"robot", "description", "segments", "timing", "start", "steps"}
_TIMING_KEYS = ("single_support", "double_support", "start_double_support")


# ---------------------------------------------------------------------------------------------- the plan
def record_walk_plan(config: RobotConfig, segments=PLAN_SEGMENTS) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The benchmark's footstep plan from the planner, as the JSON object :func:`load_walk_plan` reads:
    from the nominal stance at the origin, each ``(vx, vy, wz, steps)`` segment in turn, every plan after the
    first anchored on the foot that landed last (as the walking controller re-plans)."""
    planner = FootstepPlanner.from_config(config)
    feet = {side: planner.nominal_foot(Pose2D(0.0, 0.0, 0.0), side) for side in SIDES}
    start = dict(feet)
    steps: list[Footstep] = []
    for vx, vy, wz, n in segments:
        last = steps[-1].side if steps else None
        nxt = None if last is None else ("right" if last == "left" else "left")
        part = planner.plan_velocity(feet, VelocityCommand(vx, vy, wz), n, first_side=nxt, anchor=last)
        steps += part.steps
        feet = part.feet_after(len(part.steps))
    s = config.walking
    return {
        "robot": config.name,
        "description": "footsteps recorded from FootstepPlanner.plan_velocity, segment by segment "
        "(vx m/s, vy m/s, wz rad/s, steps); poses [x, y, yaw] of the sole frames (odom, m, rad)",
        "segments": [list(seg) for seg in segments],
        "timing": {k: getattr(s, k) for k in _TIMING_KEYS},
        "start": {side: [start[side].x, start[side].y, start[side].yaw] for side in SIDES},
        "steps": [{"side": st.side, "pose": [st.pose.x, st.pose.y, st.pose.yaw]} for st in steps],
    }


def find_walk_plan() -> Path:
    """The stored plan (``config/bench/mpc_walk_plan.json``, source tree or installed share folder)."""
    for folder in config_dir_candidates():
        path = folder / PLAN_NAME
        if path.is_file():
            return path
    raise FileNotFoundError(f"{PLAN_NAME} not found under the configuration folders")


def robot_walk_plan(config: RobotConfig) -> Path:
    """The stored plan (:func:`find_walk_plan`) if it was recorded for ``config``'s robot; otherwise
    :data:`PLAN_SEGMENTS` planned for this robot now (:func:`record_walk_plan`), written to a temporary
    file."""
    path = find_walk_plan()
    if json.loads(path.read_text()).get("robot") == config.name:
        return path
    out = Path(tempfile.mkdtemp(prefix="humanoid_bench_mpc_plan_")) / f"mpc_walk_plan_{config.name}.json"
    out.write_text(json.dumps(record_walk_plan(config), indent=1) + "\n")
    return out


def _pose(value: Any, what: str) -> Pose2D:
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, (int, float)) for v in value)):
        raise ValueError(f"{what}: expected [x, y, yaw] (3 numbers), got {value!r}")
    if not all(math.isfinite(v) for v in value):
        raise ValueError(f"{what}: non-finite pose {value!r}")
    return Pose2D(float(value[0]), float(value[1]), float(value[2]))


def load_walk_plan(path: Path | str, config: RobotConfig) -> FootstepPlan:
    """Read a plan written by :func:`record_walk_plan`. Raises ``ValueError`` (naming the file) for unknown
    or missing keys, another robot, non-positive or non-finite timing, bad poses, sides that do not
    alternate, or a step beyond the robot's kinematic limits."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the plan: {exc}") from exc
    try:
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        unknown = set(data) - _PLAN_KEYS
        missing = {"robot", "timing", "start", "steps"} - set(data)
        if unknown or missing:
            raise ValueError(f"unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
        if data["robot"] != config.name:
            raise ValueError(f"recorded for robot {data['robot']!r}, not {config.name!r}")
        timing = data["timing"]
        if not isinstance(timing, dict) or set(timing) != set(_TIMING_KEYS):
            raise ValueError(f"timing must have exactly the keys {list(_TIMING_KEYS)}")
        for key in _TIMING_KEYS:
            v = timing[key]
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0.0):
                raise ValueError(f"timing.{key} must be a positive number, got {v!r}")
        start = data["start"]
        if not isinstance(start, dict) or set(start) != set(SIDES):
            raise ValueError("start must give the poses of 'left' and 'right'")
        feet = {side: _pose(start[side], f"start.{side}") for side in SIDES}
        raw = data["steps"]
        if not isinstance(raw, list) or not raw:
            raise ValueError("steps must be a non-empty list")
        planner = FootstepPlanner.from_config(config)
        steps: list[Footstep] = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or set(item) != {"side", "pose"}:
                raise ValueError(f"steps[{i}] must be {{'side': ..., 'pose': [x, y, yaw]}}")
            side = item["side"]
            if side not in SIDES:
                raise ValueError(f"steps[{i}]: unknown side {side!r}")
            if steps and side == steps[-1].side:
                raise ValueError(f"steps[{i}]: the sides must alternate")
            step = Footstep(side, _pose(item["pose"], f"steps[{i}].pose"))
            stance = "right" if side == "left" else "left"
            problems = planner.violations(Footstep(stance, feet[stance]), step, tol=1e-6)
            if problems:
                raise ValueError(f"steps[{i}] beyond the robot's limits: {'; '.join(problems)}")
            feet[side] = step.pose
            steps.append(step)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return FootstepPlan(
        {side: _pose(start[side], side) for side in SIDES},
        steps,
        float(timing["single_support"]),
        float(timing["double_support"]),
        float(timing["start_double_support"]),
    )


# ---------------------------------------------------------------------------------------------- PlaCo
def find_placo_python() -> tuple[Path | None, str]:
    """The Python of PlaCo's environment: ``$HUMANOID_PLACO_PYTHON``, else ``.venv-placo`` at the source
    tree's root or beside the running environment (``make placo``). (None, why) when there is none."""
    env = os.environ.get("HUMANOID_PLACO_PYTHON")
    if env:
        path = Path(env)
        return (path, "") if path.is_file() else (None, f"HUMANOID_PLACO_PYTHON={env} is not a file")
    roots = [Path(__file__).resolve().parents[2], Path(sys.prefix).resolve().parent]
    for root in roots:
        path = root / ".venv-placo" / "bin" / "python"
        if path.is_file():
            return path, ""
    return None, "not installed (make placo)"


def _placo_footsteps(
    plan: FootstepPlan, soles: dict[str, np.ndarray]
) -> tuple[list[list[Any]], float, float]:
    """PlaCo's footstep list (first swing foot, stance foot, then the steps) as ``[side, x, y, yaw]`` of the
    foot rectangles' centres, and the rectangle's length and width (m): the sole polygon's length at its
    narrowest half-width, checked to lie inside the sole."""
    sole = soles["left"]
    x0, x1 = float(sole[:, 0].min()), float(sole[:, 0].max())
    half = float(np.abs(sole[:, 1]).min())
    corners = np.array([[x0, -half], [x1, -half], [x1, half], [x0, half]])
    for side in SIDES:
        if not all(inside_polygon(c, soles[side], 1e-9) for c in corners):
            raise ValueError(f"PlaCo's foot rectangle does not fit inside the {side} sole polygon")
    offset = Pose2D(0.5 * (x0 + x1), 0.0, 0.0)

    def entry(side: str, pose: Pose2D) -> list[Any]:
        c = pose.compose(offset)
        return [side, c.x, c.y, c.yaw]

    first = plan.steps[0].side
    stance = "right" if first == "left" else "left"
    out = [entry(first, plan.start[first]), entry(stance, plan.start[stance])]
    out += [entry(st.side, st.pose) for st in plan.steps]
    return out, x1 - x0, 2.0 * half


class _PlacoPeer:
    """The PlaCo subprocess (:mod:`.placo_peer`), driven block by block."""

    def __init__(self, python: Path, problem: dict[str, Any], workdir: Path) -> None:
        path = workdir / "placo_problem.json"
        path.write_text(json.dumps(problem))
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
            and not k.startswith("_ROS_WHEELS")
        }
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        script = Path(__file__).with_name("placo_peer.py")
        self._log = open(workdir / "placo_peer.stderr", "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [str(python), str(script), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                status = self.proc.wait()
                raise RuntimeError(f"the PlaCo process ended (status {status}); see {self._log.name}")
            if line.startswith("{"):
                msg = json.loads(line)
                if "error" in msg:
                    raise RuntimeError(f"PlaCo: {msg['error']}")
                return msg

    def next(self, count: int) -> tuple[list[float], list[float]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{count}\n")
        self.proc.stdin.flush()
        msg = self._read()
        return [float(v) for v in msg["us"]], [float(v) for v in msg["cpu_us"]]

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            self._log.close()


# ---------------------------------------------------------------------------------------------- ours
class _Ours:
    """:class:`WalkingGenerator` on the plan, re-solved from its own prediction (module docstring)."""

    def __init__(self, config: RobotConfig, plan: FootstepPlan, times: np.ndarray) -> None:
        from humanoid_control.walking.generator import WalkingGenerator

        self.gen = WalkingGenerator(config)
        self.schedule = self.gen.set_plan(plan, float(times[0]))
        self.state0 = np.zeros((2, 3))
        self.state0[:, 0] = self.schedule.zmp_reference(float(times[0]))  # at rest over the feet
        self.times = [float(t) for t in times]
        self._k = 0
        self.osqp_us: list[float] = []
        self.iterations: list[int] = []

    def next(self, count: int) -> tuple[list[float], list[float]]:
        n = len(self.times) - 1
        us: list[float] = []
        cpu: list[float] = []
        for _ in range(count):
            if self._k % n == 0:  # a new cycle: solve from rest at the start (not timed)
                out = self.gen.replan(self.times[0], self.state0)
                if not out.ok:
                    raise RuntimeError(f"the pattern generator failed at the start: {out.status}")
            t = self.times[1 + self._k % n]
            c0 = time.thread_time()
            t0 = time.perf_counter()
            out = self.gen.replan(t)
            t1 = time.perf_counter()
            cpu.append((time.thread_time() - c0) * 1e6)
            us.append((t1 - t0) * 1e6)
            if not out.ok:
                raise RuntimeError(f"the pattern generator failed at t = {t:.3f} s: {out.status}")
            self.osqp_us.append(out.solve_time_s * 1e6)
            self.iterations.append(out.iterations)
            self._k += 1
        return us, cpu


def bench_mpc(
    plan_path: Path | str | None = None,
    rate: float = 50.0,
    repeats: int = 3,
    block: int = 25,
    placo_python: Path | str | None = None,
    cpu: int | None = None,
    robot: str = "g1",
) -> dict[str, Any]:
    """Re-solve time of our pattern generator and PlaCo's on the recorded plan (module docstring).

    ``robot``: the configuration (``config/robots/<robot>.yaml``). Without ``plan_path``, the stored plan
    when it was recorded for this robot, else the same segments planned for it now (:func:`robot_walk_plan`).

    ``placo_python``: PlaCo's interpreter (default :func:`find_placo_python`; a missing file gives null
    PlaCo keys with the reason). ``cpu``: a core to pin both to (default: none; each is single-threaded,
    one core's work, and on a machine shared with other work a pinned process cannot move off a busy core)."""
    config = load_robot_config(robot)
    path = Path(plan_path) if plan_path is not None else robot_walk_plan(config)
    plan = load_walk_plan(path, config)
    if not (rate > 0.0 and math.isfinite(rate)) or repeats < 1 or block < 1:
        raise ValueError("rate must be > 0, repeats and block >= 1")
    allowed = os.sched_getaffinity(0)
    if cpu is None:
        return _bench_mpc(config, path, plan, rate, repeats, block, placo_python, cpu)
    if cpu not in allowed:
        raise ValueError(f"cpu {cpu} is not one this process may run on ({sorted(allowed)})")
    os.sched_setaffinity(0, {cpu})  # inherited by the PlaCo process; given back at the end
    try:
        return _bench_mpc(config, path, plan, rate, repeats, block, placo_python, cpu)
    finally:
        os.sched_setaffinity(0, allowed)


def _bench_mpc(
    config: RobotConfig,
    path: Path,
    plan: FootstepPlan,
    rate: float,
    repeats: int,
    block: int,
    placo_python: Path | str | None,
    cpu: int | None,
) -> dict[str, Any]:
    from humanoid_control.walking.pattern_generator import PreviewSettings

    preview = PreviewSettings()
    horizon_s = preview.horizon * preview.dt
    ours = _Ours(config, plan, np.zeros(1))
    t0 = 0.0
    t_last = ours.schedule.t_end - horizon_s  # the horizon stays within the plan (PlaCo's ends with it)
    times = t0 + np.arange(math.floor((t_last - t0) * rate + 1e-9) + 1) / rate
    ours = _Ours(config, plan, times)
    n_solves = (len(times) - 1) * repeats
    result: dict[str, Any] = {
        "benchmark": "mpc",
        "robot": config.name,
        "plan": str(path),
        "plan_steps": len(plan.steps),
        "plan_duration_s": ours.schedule.t_end,
        "rate_hz": rate,
        "horizon_samples": preview.horizon,
        "horizon_dt_s": preview.dt,
        "solves": n_solves,
        "cpu": cpu,
        "loadavg_1min_start": os.getloadavg()[0],
    }
    python, why = (Path(placo_python), "") if placo_python is not None else find_placo_python()
    if python is not None and not python.is_file():
        python, why = None, f"not installed ({python} missing; make placo)"
    peer: _PlacoPeer | None = None
    workdir = Path(tempfile.mkdtemp(prefix="humanoid_bench_mpc_"))
    try:
        if python is not None:
            soles = {side: np.array(config.feet[side].polygon) for side in SIDES}
            steps, length, width = _placo_footsteps(plan, soles)
            s = config.walking
            problem = {
                "timing": {"dt": preview.dt, **{k: getattr(plan, k) for k in _TIMING_KEYS}},
                "com_height": s.com_height,
                "zmp_margin": s.zmp_margin,
                "foot_length": length,
                "foot_width": width,
                "feet_spacing": s.foot_spacing,
                "footsteps": steps,
                "t0": t0,
                "com0": ours.state0[:, 0].tolist(),
                "horizon": preview.horizon,
                "times": times.tolist(),
            }
            peer = _PlacoPeer(python, problem, workdir)
        mine: list[float] = []
        mine_cpu: list[float] = []
        theirs: list[float] = []
        theirs_cpu: list[float] = []
        done = 0
        while done < n_solves:
            k = min(block, n_solves - done)
            us, cpu_us = ours.next(k)
            mine += us
            mine_cpu += cpu_us
            if peer is not None:
                us, cpu_us = peer.next(k)
                theirs += us
                theirs_cpu += cpu_us
            done += k
    finally:
        if peer is not None:
            peer.close()
    us, cpu = np.array(mine), np.array(mine_cpu)
    result.update(
        {
            "mpc_solve_us_median": float(np.median(us)),
            "mpc_solve_us_p99": float(np.percentile(us, 99)),
            "mpc_solve_us_max": float(us.max()),
            "mpc_solve_cpu_us_median": float(np.median(cpu)),
            "mpc_solve_cpu_us_p99": float(np.percentile(cpu, 99)),
            "mpc_osqp_us_median": float(np.median(ours.osqp_us)),
            "mpc_osqp_us_p99": float(np.percentile(ours.osqp_us, 99)),
            "mpc_iterations_median": float(np.median(ours.iterations)),
            "goal_mpc_solve_us_median": 2000.0,
            "goal_mpc_solve_us_p99": 5000.0,
            "placo_us_median": None,
            "placo_us_p99": None,
            "ratio_vs_placo": None,
            "placo_cpu_us_median": None,
            "ratio_vs_placo_cpu": None,
        }
    )
    if peer is None:
        result["placo"] = why
    else:
        them = np.array(theirs)
        result.update(
            {
                "placo": peer.info["placo"],
                "placo_pin": peer.info["pin"],
                "placo_horizon_samples_mean": peer.info["horizon_samples_mean"],
                "placo_horizon_samples_min": peer.info["horizon_samples_min"],
                "placo_us_median": float(np.median(them)),
                "placo_us_p99": float(np.percentile(them, 99)),
                "ratio_vs_placo": float(np.median(us) / np.median(them)),
                "placo_cpu_us_median": float(np.median(theirs_cpu)),
                "ratio_vs_placo_cpu": float(np.median(cpu) / np.median(theirs_cpu)),
            }
        )
    result["loadavg_1min_end"] = os.getloadavg()[0]
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m humanoid_bringup.evaluation.mpc_bench --record PATH``: write the recorded plan."""
    import argparse

    parser = argparse.ArgumentParser(description="record the footstep plan of humanoid-bench mpc")
    parser.add_argument("--record", required=True, help="where to write the plan (JSON)")
    parser.add_argument("--robot", default="g1", help="robot configuration (config/robots/<robot>.yaml)")
    args = parser.parse_args(argv)
    import re

    data = record_walk_plan(load_robot_config(args.robot))
    text = json.dumps(data, indent=1)
    # one line per innermost list and per step
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    text = re.sub(r"\{\s+(\"side\"[^{}]*?)\s+\}", lambda m: "{" + " ".join(m.group(1).split()) + "}", text)
    Path(args.record).write_text(text + "\n")
    print(f"wrote {args.record}: {len(data['steps'])} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
