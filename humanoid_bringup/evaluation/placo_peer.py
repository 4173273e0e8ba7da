"""PlaCo's ``WalkPatternGenerator`` timed on a footstep plan, for ``humanoid-bench mpc`` (run as a script).

Runs in PlaCo's own virtual environment (``make placo``: ``placo`` 0.10.2 pins ``pin`` 3.8.0, which the
project's environment does not have), so it imports nothing from this project: only the standard library,
numpy and placo. ``humanoid-bench mpc`` starts it as a subprocess with the path of a JSON problem and then
drives it over stdin/stdout, one JSON object per line:

- out, once set up: ``{"ready": true, "placo": VERSION, "horizon_samples_mean": ..., "solves": N}``;
- in ``K``: run the next ``K`` re-solves; out ``{"us": [...], "cpu_us": [...]}`` (wall and thread CPU time
  of each, microseconds);
- in ``quit``: exit. Errors go out as ``{"error": "..."}`` and exit status 1.

The problem (all frames odom, units m, s, rad): ``timing`` (``dt``, ``single_support``, ``double_support``,
``start_double_support``), ``com_height``, ``zmp_margin``, ``foot_length``, ``foot_width``,
``feet_spacing``, ``footsteps`` in PlaCo's order (``[side, x, y, yaw]`` of each foot rectangle's centre:
first the first swing foot where it stands, then the stance foot, then every step), ``t0`` and ``com0``
(``[x, y]``, the CoM at rest at the plan's start), ``horizon`` (samples) and ``times``: the re-solve times,
``times[0] == t0``; the bench asks for them in cycles (as many ``K`` as it wants).

Each cycle plans once at ``t0`` (``plan``, from ``com0``, not timed) and then re-solves at every later time
from its own previous trajectory (``replan``: the CoM state is read from the old trajectory at that time,
as PlaCo's own re-planning does). Per re-solve the supports passed are those that cover
``[t, t + horizon * dt)``: the current one with the elapsed part as ``elapsed_ratio`` (as PlaCo's
``replan_supports`` sets it), and the last one cut to end at the horizon (through ``elapsed_ratio``, so its
samples keep the period ``dt``); a cut support loses its ``end`` flag (its stop constraints belong to the
plan's real end). PlaCo aims a single support's swing at the support after it, so a horizon that ends in a
single support gives it one sample less and the next support one (81 where it would get only one). A
re-solve exactly at a support's start is made 1 us later (PlaCo's trajectory counts a support's end time as
in it). The supports are built before the clock starts; only ``replan`` is timed, with
``time.perf_counter`` (and ``time.thread_time``) as the bench times ours.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from typing import Any

_URDF = """<?xml version="1.0"?>
<robot name="lipm">
  <link name="trunk"><inertial><mass value="30"/><origin xyz="0 0 0"/>
    <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="left_foot"><inertial><mass value="1"/><origin xyz="0 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="right_foot"><inertial><mass value="1"/><origin xyz="0 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="left_fixed" type="fixed"><parent link="trunk"/><child link="left_foot"/>
    <origin xyz="0 {half} -{height}"/></joint>
  <joint name="right_fixed" type="fixed"><parent link="trunk"/><child link="right_foot"/>
    <origin xyz="0 -{half} -{height}"/></joint>
</robot>
"""


def _send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class PlacoRun:
    """PlaCo's pattern generator set up on the problem (module docstring)."""

    def __init__(self, problem: dict[str, Any]) -> None:
        import numpy as np
        import placo

        self.np, self.placo = np, placo
        timing = problem["timing"]
        dt = float(timing["dt"])
        ss, ds, sds = (float(timing[k]) for k in ("single_support", "double_support", "start_double_support"))
        # the robot model is not used by the CoM planning; a trunk and two feet satisfy HumanoidRobot
        self._dir = tempfile.mkdtemp(prefix="placo_peer_")
        urdf = os.path.join(self._dir, "robot.urdf")
        with open(urdf, "w") as f:
            f.write(_URDF.format(half=0.5 * problem["feet_spacing"], height=problem["com_height"]))
        stderr = os.dup(2)  # HumanoidRobot warns on stderr about frames a walking robot would have
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                self.robot = placo.HumanoidRobot(urdf)
            finally:
                os.dup2(stderr, 2)
                os.close(stderr)
        p = placo.HumanoidParameters()
        p.dt = dt
        p.single_support_duration = ss
        p.single_support_timesteps = round(ss / dt)
        p.double_support_ratio = ds / ss
        p.startend_double_support_ratio = sds / ss
        p.walk_com_height = float(problem["com_height"])
        p.zmp_margin = float(problem["zmp_margin"])
        p.foot_length = float(problem["foot_length"])
        p.foot_width = float(problem["foot_width"])
        p.feet_spacing = float(problem["feet_spacing"])
        self.parameters = p
        self.wpg = placo.WalkPatternGenerator(self.robot, p)
        footsteps = placo.Footsteps()
        for side, x, y, yaw in problem["footsteps"]:
            fs = placo.Footstep(p.foot_width, p.foot_length)
            frame = np.eye(4)
            c, s = math.cos(yaw), math.sin(yaw)
            frame[:2, :2] = [[c, -s], [s, c]]
            frame[:2, 3] = (x, y)
            fs.frame = frame
            fs.side = placo.HumanoidRobot_Side.left if side == "left" else placo.HumanoidRobot_Side.right
            footsteps.append(fs)
        self.t0 = float(problem["t0"])
        middle = p.has_double_support()
        self.supports = placo.FootstepsPlanner.make_supports(footsteps, self.t0, True, middle, True)
        # each support's default duration and samples (as WalkPatternGenerator computes them)
        self.durations, self.steps = [], []
        for sup in self.supports:
            if sup.is_both():
                start_end = sup.start or sup.end
                self.durations.append(sds if start_end else ds)
                n = p.startend_double_support_timesteps() if start_end else p.double_support_timesteps()
                self.steps.append(n)
            else:
                self.durations.append(ss)
                self.steps.append(p.single_support_timesteps)
        self.starts = [self.t0]
        for d in self.durations[:-1]:
            self.starts.append(self.starts[-1] + d)
        self.horizon = int(problem["horizon"])
        self.com0 = np.array([*problem["com0"], p.walk_com_height], dtype=float)
        times = [float(t) for t in problem["times"]]
        if not times or abs(times[0] - self.t0) > 1e-12:
            raise ValueError("times[0] must be t0")
        self.times = times
        self.jobs = [self._supports_at(t) for t in times[1:]]
        # PlaCo's trajectory takes a support's end time as in it: re-planned exactly there, it would take the
        # swing foot's velocity from the support that ends (a double support: an error); a microsecond later
        # it is in the next support, as the supports given start
        self.calls = [t + 1e-6 if self._at_boundary(t) else t for t in times[1:]]
        self.samples = [n for _, n in self.jobs]
        self._k = 0  # next job
        self._trajectory: Any = None

    def _supports_at(self, t: float) -> tuple[Any, int]:
        """The supports covering ``[t, t + horizon dt)`` and their number of samples.

        PlaCo plans a single support's swing towards the support after it, so a horizon never ends in a
        single support: one cut there keeps one sample less and the following double support one sample
        (81 samples in all when a single support would get only one)."""
        out = self.placo.Supports()
        left = self.horizon
        total = 0
        last = len(self.supports) - 1
        i = 0
        while i <= last and self.starts[i] + self.durations[i] <= t + 1e-9 and i < last:
            i += 1  # over
        first = True
        while left > 0 and i <= last:
            out.append(self.supports[i])
            cur = out[len(out) - 1]
            steps = self.steps[i]
            elapsed = 0.0
            if first:
                elapsed = min(max((t - self.starts[i]) / self.durations[i], 0.0), 1.0)
                cur.elapsed_ratio = elapsed
                cur.t_start = self.starts[i]
            n = max(1, int((1.0 - elapsed) * steps))
            if n >= left:  # the horizon ends in this support: cut it
                single = not cur.is_both() and i < last
                keep = max(left - 1, 1) if single else left
                if keep < n:
                    cur.elapsed_ratio = self._ratio(steps, keep)
                    cur.end = False
                total += keep
                if single:  # one sample of the next (double) support, for the swing's target
                    out.append(self.supports[i + 1])
                    nxt = out[len(out) - 1]
                    if self.steps[i + 1] > 1:
                        nxt.elapsed_ratio = self._ratio(self.steps[i + 1], 1)
                        nxt.end = False
                    total += 1
                break
            total += n
            left -= n
            first = False
            i += 1
        return out, total

    def _at_boundary(self, t: float) -> bool:
        return any(abs(t - start) < 1e-9 for start in self.starts[1:])

    @staticmethod
    def _ratio(steps: int, keep: int) -> float:
        """The ``elapsed_ratio`` that leaves ``keep`` of a support's ``steps`` samples (PlaCo truncates
        ``(1 - ratio) steps`` to an integer)."""
        ratio = 1.0 - keep / steps
        while max(1, int((1.0 - ratio) * steps)) < keep:
            ratio -= 1e-12
        return ratio

    def next(self, count: int) -> tuple[list[float], list[float]]:
        """Run the next ``count`` re-solves (cycling); wall time and CPU time (this thread's) of each (us)."""
        us: list[float] = []
        cpu: list[float] = []
        for _ in range(count):
            if self._k % len(self.jobs) == 0:  # a new cycle: plan from rest at t0 (not timed)
                first, _ = self._supports_at(self.t0)
                self._trajectory = self.wpg.plan(first, self.com0, self.t0)
            supports, _ = self.jobs[self._k % len(self.jobs)]
            t = self.calls[self._k % len(self.jobs)]
            fresh = self.placo.Supports()  # replan() writes into its supports: give it a copy
            for sup in supports:
                fresh.append(sup)
            c_begin = time.thread_time()
            t_begin = time.perf_counter()
            trajectory = self.wpg.replan(fresh, self._trajectory, t)
            t_end = time.perf_counter()
            cpu.append((time.thread_time() - c_begin) * 1e6)
            us.append((t_end - t_begin) * 1e6)
            if not trajectory.replan_success:  # PlaCo then returns the old trajectory, trimmed
                raise RuntimeError(f"PlaCo could not re-plan at t = {t:.3f} s")
            self._trajectory = trajectory
            self._k += 1
        return us, cpu


def main(argv: list[str]) -> int:
    try:
        if len(argv) != 1:
            raise ValueError("usage: placo_peer.py PROBLEM.json")
        with open(argv[0]) as f:
            problem = json.load(f)
        run = PlacoRun(problem)
        from importlib.metadata import version

        samples = run.samples
        _send(
            {
                "ready": True,
                "placo": version("placo"),
                "pin": version("pin"),
                "solves": len(run.jobs),
                "horizon_samples_mean": sum(samples) / len(samples),
                "horizon_samples_min": min(samples),
            }
        )
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "quit":
                return 0
            us, cpu = run.next(int(cmd))
            _send({"us": us, "cpu_us": cpu})
    except Exception as exc:  # reported to the bench, which raises it
        _send({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
