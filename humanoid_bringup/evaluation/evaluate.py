"""``humanoid-eval``: evaluations that run the ROS graph (separate processes), measured against the truth.

``humanoid-eval locomotion --controller policy --policy NAME`` launches ``launch/sim.launch.yaml`` with the
driver and the policy runner, publishes ``/cmd_vel`` from a fixed command script on the simulated clock, and
measures the base velocity from ``/sim/ground_truth`` (only the evaluator reads it). The last line of stdout
is one JSON object::

    {"fell": false, "time_survived_s": 22.0, "segments": {"forward": {"commanded": [vx, vy, wz],
     "achieved_mean": [...], "abs_err_mean": [...], "abs_err_max": [...], "joint_limit_fraction": ...,
     "torque_limit_fraction": ..., "limit_fraction": ...}, ...}, ...}

Velocities are in the heading frame (x forward along the base's yaw, y left, z up): vx, vy (m/s), wz (rad/s).
Each segment's statistics skip its first ``settle_s`` seconds (the response to the step in the command; at
most half of a segment);
``achieved_mean_full`` covers the whole segment.

``humanoid-eval perception`` is the exception: it scores the perception cores in one process against MuJoCo's
truth, without a ROS graph (:mod:`humanoid_bringup.evaluation.perception_eval`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.graph_probe import GraphProbe, LaunchedGraph, close_graph, isolated_ros_env
from humanoid_bringup.evaluation.script_source import ScriptSource
from humanoid_policy.inprocess import command_at

# (segment, duration s, (vx m/s, vy m/s, wz rad/s)) - the fixed script
LOCOMOTION_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    ("forward", 6.0, (0.5, 0.0, 0.0)),
    ("turn", 4.0, (0.0, 0.0, 0.5)),
    ("lateral", 4.0, (0.0, 0.3, 0.0)),
    ("backward", 4.0, (-0.3, 0.0, 0.0)),
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]
# a forward ramp: each speed held 4 s (the last 3 s are measured); max_forward_mps = the fastest held
TOP_SPEED_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    *[(f"forward_{v:.1f}", 4.0, (v, 0.0, 0.0)) for v in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)],
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]
HOLD_S = 3.0  # top speed: a speed counts when held this long (s) at the end of its segment
# blind walking over a scene's terrain (``--terrain``): forward at 0.3 m/s for 8 s
TERRAIN_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    ("forward", 8.0, (0.3, 0.0, 0.0)),
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]


def max_forward_speed(
    script: list[tuple[str, float, tuple[float, float, float]]],
    t: np.ndarray,
    vel: np.ndarray,
    fell_at: float,
) -> dict[str, Any]:
    """Top speed of a forward ramp: per ``forward_*`` segment finished before ``fell_at`` (s since the
    script started; inf: no fall), the mean forward speed (m/s, heading frame) over its last ``HOLD_S``
    seconds; ``max_forward_mps`` is the largest of them."""
    start, held = 0.0, {}
    for name, duration, _cmd in script:
        end = start + duration
        if name.startswith("forward") and end <= fell_at:
            sel = (t >= end - HOLD_S) & (t < end)
            if sel.any():
                held[name] = round(float(vel[sel, 0].mean()), 4)
        start = end
    return {"max_forward_mps": max(held.values()) if held else 0.0, "held_mps": held, "hold_s": HOLD_S}


SHORT_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 1.0, (0.0, 0.0, 0.0)),
    ("forward", 4.0, (0.5, 0.0, 0.0)),
    ("turn", 3.0, (0.0, 0.0, 0.5)),
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]


def heading_frame_velocity(quat_wxyz: np.ndarray, twist_body: np.ndarray) -> np.ndarray:
    """``[vx, vy, wz]`` in the heading frame from base orientations (N,4) and body twists (N,6: v, w)."""
    w, x, y, z = quat_wxyz.T
    # rotation matrix rows (body -> world)
    r00, r01, r02 = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
    r10, r11, r12 = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
    r20, r21, r22 = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
    v, om = twist_body[:, :3], twist_body[:, 3:]
    vw = np.stack(
        [
            r00 * v[:, 0] + r01 * v[:, 1] + r02 * v[:, 2],
            r10 * v[:, 0] + r11 * v[:, 1] + r12 * v[:, 2],
        ],
        axis=1,
    )
    wz = r20 * om[:, 0] + r21 * om[:, 1] + r22 * om[:, 2]
    yaw = np.arctan2(r10, r00)
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([c * vw[:, 0] + s * vw[:, 1], -s * vw[:, 0] + c * vw[:, 1], wz], axis=1)


def segment_metrics(
    script: list[tuple[str, float, tuple[float, float, float]]],
    t: np.ndarray,
    vel: np.ndarray,
    settle_s: float,
    joint_t: np.ndarray,
    at_joint_limit: np.ndarray,
    at_torque_limit: np.ndarray,
) -> dict[str, dict[str, Any]]:
    """Per-segment tracking statistics; ``t`` and ``joint_t`` are seconds since the script started."""
    out: dict[str, dict[str, Any]] = {}
    start = 0.0
    for name, duration, cmd in script:
        end = start + duration
        sel = (t >= start + min(settle_s, 0.5 * duration)) & (t < end)  # short segments: skip half at most
        full = (t >= start) & (t < end)
        jsel = (joint_t >= start) & (joint_t < end)
        c = np.array(cmd)
        if sel.any():
            err = np.abs(vel[sel] - c)
            seg: dict[str, Any] = {
                "commanded": [round(float(v), 4) for v in c],
                "achieved_mean": [round(float(v), 4) for v in vel[sel].mean(axis=0)],
                "abs_err_mean": [round(float(v), 4) for v in err.mean(axis=0)],
                "abs_err_max": [round(float(v), 4) for v in err.max(axis=0)],
                "achieved_mean_full": [round(float(v), 4) for v in vel[full].mean(axis=0)],
                "samples": int(sel.sum()),
            }
        else:
            seg = {
                "commanded": [float(v) for v in c],
                "achieved_mean": None,
                "abs_err_mean": None,
                "abs_err_max": None,
                "achieved_mean_full": None,
                "samples": 0,
            }
        if jsel.any():
            jl, tl = at_joint_limit[jsel], at_torque_limit[jsel]
            seg["joint_limit_fraction"] = round(float(jl.mean()), 4)
            seg["torque_limit_fraction"] = round(float(tl.mean()), 4)
            seg["limit_fraction"] = round(float((jl | tl).mean()), 4)
        out[name] = seg
        start = end
    return out


def _plot_tracking(path: Path, script: list[Any], t: np.ndarray, vel: np.ndarray, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    tc = np.linspace(0.0, sum(d for _, d, _ in script), 2000)
    cmd = np.array([command_at(script, v) for v in tc])
    labels = ["vx (m/s)", "vy (m/s)", "wz (rad/s)"]
    for i, ax in enumerate(axes):
        ax.plot(tc, cmd[:, i], "k--", lw=1.2, label="commanded")
        ax.plot(t, vel[:, i], lw=1.0, label="achieved (ground truth, heading frame)")
        ax.set_ylabel(labels[i])
        ax.grid(alpha=0.3)
    start = 0.0
    for name, d, _ in script:
        axes[0].text(start + 0.1, axes[0].get_ylim()[1] * 0.85, name, fontsize=8)
        for ax in axes:
            ax.axvline(start, color="0.8", lw=0.8)
        start += d
    axes[0].legend(loc="lower right", fontsize=8)
    axes[-1].set_xlabel("time since the script started (s)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_path(path: Path, pos: np.ndarray, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6))
    if len(pos):
        ax.plot(pos[:, 0], pos[:, 1], lw=1.2)
        ax.plot(pos[0, 0], pos[0, 1], "go", label="start")
        ax.plot(pos[-1, 0], pos[-1, 1], "rs", label="end")
        ax.legend()
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_locomotion(
    policy: str,
    clock: str = "lockstep",
    out_dir: Path | None = None,
    script: list[tuple[str, float, tuple[float, float, float]]] | None = None,
    settle_s: float = 1.0,
    robot: str = "g1",
    extra_args: dict[str, str] | None = None,
    log: Any = print,
    render_to: Path | None = None,
    controller: str = "policy",
    hardware: str = "mujoco",
    in_loop: bool = False,
    publish_rate_hz: float = 0.0,
    record: bool = False,
) -> dict[str, Any]:
    """Run the command script through the ROS graph; the result dictionary (see module docstring).

    ``record``: also record the feet's contact forces (``/sim/contacts/*``) and save the run's time series
    to ``series.npz`` in ``out_dir`` (what ``humanoid-eval compare`` scores: see :func:`save_series`).

    ``controller``: ``policy`` (the policy runner, ``policy`` names it) or ``mpc_walk`` (the walking
    controller with the state estimator; ``policy`` is ignored). ``hardware``: the driver's backend;
    ``unitree_g1`` and ``can_mit`` run against their protocol emulators (started by the launch file:
    ``emulator:=true``), in lockstep with the clock when ``clock`` is lockstep. ``in_loop``: the policy
    runs in the driver's loop (``in_loop:=true``; its start is seen on ``/policy_runner/joint_commands``, it
    is no lockstep peer); ``publish_rate_hz``: the driver's ``publish_rate_hz`` (0: every tick).
    """
    from humanoid_bringup.evaluation.walking_record import WalkingRecorder
    from humanoid_control.model.robot_config import load_robot_config

    if controller not in ("policy", "mpc_walk"):
        raise ValueError(f"controller must be policy or mpc_walk, not {controller!r}")
    walking = controller == "mpc_walk"

    script = script or LOCOMOTION_SCRIPT
    total = sum(d for _, d, _ in script)
    config = load_robot_config(robot)
    out_dir = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="humanoid_eval_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    isolated_ros_env(out_dir / "ros_logs")
    args = {
        "robot": robot,
        "controller": controller,
        "clock": clock,
        "start_paused": "true",  # this evaluator connects, then starts simulated time
        "sim_duration_s": f"{total + 60.0:.1f}",
    }
    if not walking:
        args["policy"] = policy
    if hardware != "mujoco":
        import os

        # the emulator on DDS over lo: a domain of its own per run (the G1 protocol is not ROS's DDS)
        args.update(hardware=hardware, emulator="true", dds_domain=str(100 + os.getpid() % 100))
    if in_loop:
        args["in_loop"] = "true"
    if publish_rate_hz > 0:
        args["publish_rate_hz"] = f"{publish_rate_hz}"
    args.update(extra_args or {})
    graph = LaunchedGraph(args, out_dir / "graph.log")
    if walking:
        source = ScriptSource(script, state_topic="/walking_controller/state", start_on="driver_active")
    elif in_loop:
        source = ScriptSource(script, command_topic="/policy_runner/joint_commands")
    else:
        source = ScriptSource(script)
    recorder = WalkingRecorder() if walking else None

    def setup(node: Any) -> None:
        source.setup(node)
        if recorder is not None:
            recorder.setup(node)

    lockstep = clock == "lockstep"
    probe = GraphProbe(
        subscribe_description=False,
        name="locomotion_eval",
        contacts=record,
        reliable_streams=lockstep,
        lockstep_peer=lockstep,
        on_tick=source.on_tick,
        setup=setup,
    )
    source.probe = probe
    peers = ("state_estimator", "walking_controller") if walking else (() if in_loop else ("policy_runner",))
    fell = False
    fall_reason = ""
    started_ok = False
    try:
        graph.start()
        probe.start_graph(peers=peers if lockstep else (), running=graph.running)
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline and graph.running():
            with source.lock:
                if source.t0 is not None:
                    started_ok = True
                    break
            time.sleep(0.05)
        if not started_ok:
            raise RuntimeError(
                f"the {controller} controller never started (states {source.runner_states}, driver modes "
                f"{source.driver_modes}); see {graph.log_path}"
            )
        log(f"{controller} running at sim t = {source.t0:.3f} s; script of {total:.0f} s")
        sim_wall0 = time.monotonic()
        while graph.running():
            with source.lock:
                t0, last = source.t0, source.last_t
            if last is not None and last - t0 >= total:
                break
            with probe.lock:
                z = probe.data.truth_pos[-1][2] if probe.data.truth_pos else 1.0
                modes = list(probe.data.modes)
            if z < config.simulation.fall_height:
                fell, fall_reason = True, f"base height {z:.2f} m"
                break
            if modes and modes[-1] == "damping":
                fell, fall_reason = True, "driver went to damping"
                break
            with source.lock:
                if source.runner_states and source.runner_states[-1] == "fault":
                    fell, fall_reason = True, f"{controller} controller fault"
                    break
            if time.monotonic() - sim_wall0 > 30 * total + 60:
                raise RuntimeError("the graph stopped advancing")
            time.sleep(0.02)
        sim_wall = time.monotonic() - sim_wall0
        diag = probe.last_diagnostics()
        with probe.lock:  # the loop's overruns second by second (realtime: where in the run they fell)
            per_s = [int(d["overruns_last_s"]) for d in probe.data.diagnostics if "overruns_last_s" in d]
    finally:
        close_graph(probe, graph)

    with probe.lock:
        data = probe.data
        tt = np.array(data.truth_t) - source.t0
        quat = np.array(data.truth_quat_wxyz)
        twist = np.array(data.truth_twist)
        pos = np.array(data.truth_pos)
        jt = np.array(data.joint_t) - source.t0
        jq = np.array(data.joint_q)
        je = np.array(
            [e if len(e) == config.num_joints else [0.0] * config.num_joints for e in data.joint_effort]
        )
        modes = list(data.modes)
        final = (data.truth_pos[-1], data.truth_quat_wxyz[-1], list(data.joint_names), data.joint_q[-1])
        contact_fz = {side: list(v) for side, v in data.contact_fz.items()}
    if record:
        save_series(out_dir / "series.npz", config, tt, pos, quat, twist, jt, jq, je, contact_fz, source.t0)
    keep = (tt >= 0) & (tt <= total + 1e-9)
    tt, quat, twist, pos = tt[keep], quat[keep], twist[keep], pos[keep]
    vel = heading_frame_velocity(quat, twist)
    lower, upper, effort = config.array("lower"), config.array("upper"), config.array("effort")
    at_joint = np.any((jq <= lower + 0.01) | (jq >= upper - 0.01), axis=1)
    at_torque = np.any(np.abs(je) >= 0.98 * effort, axis=1)
    fall_mask = (pos[:, 2] < config.simulation.fall_height) if len(pos) else np.zeros(0, bool)
    if fall_mask.any():
        fell = True
        fall_reason = fall_reason or "base below fall height"
    survived = float(tt[np.argmax(fall_mask)]) if fall_mask.any() else (float(tt[-1]) if len(tt) else 0.0)
    if not fell:
        survived = min(total, survived + (1.0 / 500.0))
    result: dict[str, Any] = {
        "evaluation": "locomotion",
        "controller": controller,
        "policy": None if walking else policy,
        "clock": clock,
        "hardware": hardware,
        "fell": bool(fell),
        "fall_reason": fall_reason,
        "time_survived_s": round(survived, 3),
        "script_s": total,
        "settle_s": settle_s,
        "segments": segment_metrics(script, tt, vel, settle_s, jt, at_joint, at_torque),
        "distance_m": round(float(np.sum(np.linalg.norm(np.diff(pos[:, :2], axis=0), axis=1))), 3)
        if len(pos) > 1
        else 0.0,
        "realtime_factor": round(min(total, float(tt[-1]) if len(tt) else 0.0) / max(sim_wall, 1e-9), 3),
        "driver_modes": modes,
        "runner_states": source.runner_states,
        "lockstep_timeouts": int(diag.get("lockstep_timeouts", "0") or 0),
        "commands_refused": int(diag.get("commands_refused", "0") or 0),
        "driver_gain_profile": diag.get("gain_profile", ""),
        "driver_max_command_gap_ticks": int(diag.get("max_command_gap_ticks", "0") or 0),
        "driver_overruns": int(diag.get("overruns", "0") or 0),
        "driver_overruns_pct": float(diag.get("overruns_pct", "0") or 0),
        "driver_overruns_per_s": per_s,
        "driver_lateness_us_p99": float(diag.get("lateness_us_p99", "0") or 0),
        "driver_watchdog_trips": int(diag.get("watchdog_trips", "0") or 0),
        "in_loop": in_loop,
        # hardware backends: their own counters (LowState timeouts, CRC errors, link faults, ...)
        "hardware_diagnostics": {k[3:]: v for k, v in diag.items() if k.startswith("hw_")},
        "out_dir": str(out_dir),
    }
    name = controller if walking else policy.replace("/", "_")
    label = controller if walking else policy
    _plot_tracking(
        out_dir / f"velocity_tracking_{name}.png",
        script,
        tt,
        vel,
        f"{label} ({clock}): commanded vs achieved",
    )
    _plot_path(out_dir / f"trajectory_{name}.png", pos, f"{label} ({clock}): base path, top view")
    if script is TOP_SPEED_SCRIPT:
        fell_at = survived if fell else float("inf")
        result.update(max_forward_speed(script, tt, vel, fell_at))
    if recorder is not None:
        result["walking"] = _walking_summary(
            recorder,
            config,
            out_dir / f"footsteps_{name}.png",
            data_arrays=(tt, pos, quat, jt, jq, source.t0),
        )
    if render_to is not None:
        from humanoid_bringup.evaluation.render import qpos_from_state, render_robot

        qpos = qpos_from_state(config, np.array(final[0]), np.array(final[1]), final[2], np.array(final[3]))
        render_robot(config, qpos, render_to)
    (out_dir / f"locomotion_{name}.json").write_text(json.dumps(result, indent=2))
    return result


def save_series(
    path: Path,
    config: Any,
    truth_t: np.ndarray,
    pos: np.ndarray,
    quat_wxyz: np.ndarray,
    twist: np.ndarray,
    joint_t: np.ndarray,
    joint_q: np.ndarray,
    joint_effort: np.ndarray,
    contact_fz: dict[str, list[tuple[float, float]]],
    t0: float,
) -> None:
    """Save a run's series (times in s since the script started, ``t0`` the script's start in simulated time):
    ground truth ``truth_t``, ``pos`` (m, world), ``quat_wxyz``, ``twist`` (body frame, m/s and rad/s); joint
    ``joint_t``, ``joint_q`` (rad), ``joint_effort`` (applied N m) in the configuration's joint order
    (``joint_names``); ``contact_<side>_t`` / ``_fz`` (N, the sole's normal contact force)."""
    arrays: dict[str, Any] = {
        "truth_t": np.asarray(truth_t, float),
        "pos": np.asarray(pos, float),
        "quat_wxyz": np.asarray(quat_wxyz, float),
        "twist": np.asarray(twist, float),
        "joint_t": np.asarray(joint_t, float),
        "joint_q": np.asarray(joint_q, float),
        "joint_effort": np.asarray(joint_effort, float),
        "joint_names": np.array(list(config.joint_names)),
    }
    for side, rows in contact_fz.items():
        a = np.array(rows, float).reshape(-1, 2)
        arrays[f"contact_{side}_t"] = a[:, 0] - t0
        arrays[f"contact_{side}_fz"] = a[:, 1]
    np.savez_compressed(path, **arrays)


def _walking_summary(
    recorder: Any, config: Any, figure: Path, data_arrays: tuple[Any, ...]
) -> dict[str, Any]:
    """Footstep statistics of a walking run and its ``footsteps_*.png``."""
    from humanoid_bringup.evaluation.walking_record import achieved_footsteps, footstep_errors, plot_footsteps

    tt, pos, quat, jt, jq, t0 = data_arrays
    status = recorder.status_array()
    if status:
        status = {k: v for k, v in status.items()}
        status["t"] = status["t"] - t0
    touchdowns = achieved_footsteps(config, status, tt, pos, quat, jt, jq)
    plans = [(tp - t0, steps) for tp, steps in recorder.plans]
    errors = footstep_errors(plans, touchdowns)
    plot_footsteps(figure, plans, touchdowns, status, tt, pos, "mpc_walk: planned vs achieved footsteps")
    return {
        "plans": len(plans),
        "touchdowns": len(touchdowns),
        "touchdown_error_m": {
            "median": round(float(np.median(errors)), 4) if errors else None,
            "max": round(float(np.max(errors)), 4) if errors else None,
        },
        "footsteps_figure": str(figure),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-eval``."""
    parser = argparse.ArgumentParser(prog="humanoid-eval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="evaluation", required=True)
    loco = sub.add_parser("locomotion", help="walk a fixed command script; velocity tracking vs ground truth")
    loco.add_argument("--controller", default="policy", choices=["policy", "mpc_walk"])
    loco.add_argument("--policy", default="holosoma/g1_ppo", help="policy name or manifest/ONNX path")
    loco.add_argument("--clock", default="lockstep", choices=["lockstep", "realtime"])
    loco.add_argument("--robot", default="g1")
    loco.add_argument("--out", default="results/eval", help="folder for plots, JSON and logs")
    loco.add_argument("--settle", type=float, default=1.0, help="seconds skipped at each segment start")
    loco.add_argument("--short", action="store_true", help="a 10 s script (stand, forward, turn, stop)")
    loco.add_argument(
        "--script",
        default="default",
        choices=["default", "short", "top-speed"],
        help="the command script: default (22 s), short (= --short) or top-speed (a forward ramp 0.3 to "
        "0.8 m/s, 4 s per speed; reports max_forward_mps, the fastest speed held 3 s)",
    )
    loco.add_argument(
        "--terrain",
        default="flat",
        help="the world (a scene: config/scenes/<name>.yaml or a YAML path), e.g. rough: a seeded +-2 cm "
        "heightfield; off flat, the default script is forward 0.3 m/s for 8 s (reports mean_forward_mps) "
        "and the estimator's flat-ground prior is off",
    )
    loco.add_argument(
        "--hardware",
        default="mujoco",
        choices=["mujoco", "unitree_g1", "can_mit"],
        help="driver backend; unitree_g1 / can_mit run through their protocol emulators (MuJoCo behind them)",
    )
    loco.add_argument(
        "--in-loop",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the policy in the driver's loop (in_loop:=true; the default with --clock realtime: the "
        "real-time path, docs/realtime.md) or, --no-in-loop, a policy_runner process of its own (the "
        "default in lockstep)",
    )
    loco.add_argument(
        "--publish-rate",
        type=float,
        default=None,
        help="the driver's publish_rate_hz (a whole divisor of 500; 0: every tick). Default: every tick in "
        "lockstep (the evaluator is a lockstep peer); 100 Hz in realtime with the policy in the loop (the "
        "evaluator samples the ground truth and joint states at 100 Hz, and its process loads the machine "
        "less)",
    )
    est = sub.add_parser(
        "estimator",
        help="60 s standing, 60 s walking with a noisy IMU, then walking over a low-friction patch; "
        "/odom and contacts vs ground truth",
    )
    est.add_argument("--policy", default="holosoma/g1_fastsac")
    est.add_argument("--imu-noise", default="mems", choices=["none", "mems"])
    est.add_argument("--out", default="results/eval")
    est.add_argument("--flat-ground-std", type=float, default=0.01, help="flat-ground prior (m); 0 = off")
    est.add_argument("--stand", type=float, default=60.0, help="standing time before the walk (s)")
    est.add_argument(
        "--friction-patch",
        default=None,
        help="'x_min,x_max,y_min,y_max,friction' of the second run's patch, or none (default: "
        "the documented patch across the forward walk)",
    )
    push = sub.add_parser(
        "push", help="WBC: bisect the largest survived 0.1 s pelvis push per direction (ROS graph, lockstep)"
    )
    push.add_argument("--controller", default="wbc_stand", choices=["wbc_stand", "mpc_walk"])
    push.add_argument("--robot", default="g1")
    push.add_argument("--out", default="results/eval")
    push.add_argument("--iterations", type=int, default=5, help="bisection steps per direction (1-12)")
    push.add_argument(
        "--directions",
        default="front,back,left,right",
        help="comma-separated subset of front,back,left,right",
    )
    push.add_argument(
        "--walking-speed",
        type=float,
        default=0.0,
        help="mpc_walk: push while walking forward at this speed (m/s), at mid single support; 0: standing",
    )
    push.add_argument(
        "--stances",
        default="left,right",
        help="walking: the stance feet pushed (comma-separated subset of left,right); max_Ns is the smaller",
    )
    push.add_argument(
        "--max-impulse",
        type=float,
        default=None,
        help="top of the bisection bracket (N s); default 40 for mpc_walk, 1.6 x the no-step bound for "
        "wbc_stand",
    )
    comp = sub.add_parser(
        "compare",
        help="the learned policy and mpc_walk on the same command script (lockstep graph): tracking error "
        "per segment, foot slip, peak and mean torque, cost of transport -> compare.md, .json, .png",
    )
    comp.add_argument("--policy", default="holosoma/g1_ppo", help="the policy run beside mpc_walk")
    comp.add_argument("--robot", default="g1")
    comp.add_argument("--out", default="results/eval", help="results in OUT/compare/")
    comp.add_argument("--script", default="default", choices=["default", "short"])
    comp.add_argument(
        "--recorded",
        action="store_true",
        help="score the runs already recorded in OUT/compare/{policy,mpc_walk} instead of running them",
    )
    stand = sub.add_parser("stand", help="WBC: stand through the graph; CoM error vs ground truth")
    stand.add_argument("--controller", default="wbc_stand", choices=["wbc_stand"])
    stand.add_argument("--robot", default="g1")
    stand.add_argument("--out", default="results/eval")
    stand.add_argument("--seconds", type=float, default=60.0)
    auto = sub.add_parser(
        "autonomy",
        help="the marker-approach task from seeded start poses (perception, autonomy, mode manager, "
        "learned policy; lockstep); error to the standoff pose vs ground truth",
    )
    auto.add_argument("--policy", default="holosoma/g1_ppo")
    auto.add_argument("--runs", type=int, default=3)
    auto.add_argument("--seed", type=int, default=0)
    auto.add_argument(
        "--distance",
        type=float,
        default=3.0,
        help="start distance to the marker (m); the head camera sees the floor up to about 2.3 m ahead, "
        "so from 3 m the task's search walks (docs/autonomy.md)",
    )
    auto.add_argument(
        "--off-deg", type=float, default=60.0, help="marker bearing off the start heading (deg)"
    )
    auto.add_argument("--camera-rate", type=float, default=5.0, help="camera frames per simulated second")
    auto.add_argument("--size", default="424x240", help="rendered image size WIDTHxHEIGHT")
    auto.add_argument("--out", default="results/eval")
    perc = sub.add_parser(
        "perception",
        help="marker pose over a grid of floor placements and the 2 cm height map over a seeded heightfield, "
        "against MuJoCo's truth (in-process, head camera rendered offscreen)",
    )
    perc.add_argument("--robot", default="g1")
    perc.add_argument("--out", default="results/eval/perception", help="folder for the JSON and pictures")
    perc.add_argument(
        "--dictionary", default="DICT_APRILTAG_36h11", help="cv2.aruco dictionary of the marker"
    )
    perc.add_argument("--marker-size", type=float, default=0.25, help="black square side (m)")
    perc.add_argument(
        "--corner-refinement", default="edges", choices=["subpix", "edges", "contour", "apriltag", "none"]
    )
    perc.add_argument("--noise-seed", type=int, default=0, help="seed of the depth noise")
    args = parser.parse_args(argv)
    from humanoid_control.model.robot_config import ConfigError, load_robot_config

    if args.evaluation == "autonomy":
        from humanoid_bringup.evaluation.autonomy_eval import run_autonomy_eval

        try:
            w, h = (int(v) for v in args.size.lower().split("x"))
        except ValueError:
            print(f"humanoid-eval: error: --size {args.size!r} is not WIDTHxHEIGHT", file=sys.stderr)
            return 2
        res = run_autonomy_eval(
            Path(args.out) / "autonomy",
            runs=args.runs,
            seed=args.seed,
            distance=args.distance,
            off_deg=args.off_deg,
            policy=args.policy,
            camera_rate_hz=args.camera_rate,
            size=(w, h),
            log=lambda m: print(m, file=sys.stderr, flush=True),
        )
        print(json.dumps(res), flush=True)
        return 0 if res["reached"] == len(res["runs"]) else 1

    if args.evaluation == "compare":
        from humanoid_bringup.evaluation.compare_eval import CompareError, run_compare
        from humanoid_policy.manifest import ManifestError, load_policy

        try:
            load_policy(args.policy, load_robot_config(args.robot))  # fail fast, with the reason
            res = run_compare(
                Path(args.out) / "compare",
                policy=args.policy,
                robot=args.robot,
                script=SHORT_SCRIPT if args.script == "short" else None,
                recorded=args.recorded,
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except (CompareError, ConfigError, ManifestError) as exc:
            print(f"humanoid-eval: error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(res), flush=True)
        return 0 if not any(r["fell"] for r in res["runs"].values()) else 1

    if args.evaluation == "perception":
        from humanoid_bringup.evaluation.perception_eval import run_perception_eval

        try:
            res = run_perception_eval(
                Path(args.out),
                robot=args.robot,
                dictionary=args.dictionary,
                marker_size=args.marker_size,
                corner_refinement=args.corner_refinement,
                noise_seed=args.noise_seed,
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except (ConfigError, ValueError) as exc:
            print(f"humanoid-eval: error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(res), flush=True)
        return 0 if all(res["goals"].values()) else 1

    if args.evaluation in ("push", "stand"):
        from humanoid_bringup.evaluation.push_eval import push_options, run_push_eval, run_stand_eval

        def err(m: str) -> None:
            print(m, file=sys.stderr, flush=True)

        if args.evaluation == "push":
            try:
                opts = push_options(args)
                opts.check(load_robot_config(args.robot).walking.max_forward)
            except (ConfigError, ValueError) as exc:
                print(f"humanoid-eval: error: {exc}", file=sys.stderr)
                return 2
            res = run_push_eval(Path(args.out) / opts.folder(), robot=args.robot, log=err, options=opts)
        else:
            res = run_stand_eval(Path(args.out) / "stand_wbc_stand", args.seconds, robot=args.robot, log=err)
        print(json.dumps(res), flush=True)
        return 0 if not res.get("fell", False) else 1

    if args.evaluation == "estimator":
        from humanoid_bringup.evaluation.estimator_eval import DEFAULT_PATCH, run_estimator_eval
        from humanoid_control.model.robot_model import FrictionPatch

        patch = DEFAULT_PATCH if args.friction_patch is None else args.friction_patch
        try:
            if FrictionPatch.parse(patch) is None:
                patch = None
        except ConfigError as exc:
            print(f"humanoid-eval: error: {exc}", file=sys.stderr)
            return 2
        res = run_estimator_eval(
            Path(args.out) / "estimator",
            policy=args.policy,
            imu_noise=args.imu_noise,
            flat_ground_std=args.flat_ground_std,
            stand_s=args.stand,
            friction_patch=patch,
            log=lambda m: print(m, file=sys.stderr),
        )
        print(json.dumps(res), flush=True)
        return 0
    from humanoid_policy.manifest import ManifestError, load_policy

    walking = args.controller == "mpc_walk"
    try:
        config = load_robot_config(args.robot)
        if not walking:
            load_policy(args.policy, config)  # fail fast, with the reason
    except (ManifestError, ConfigError) as exc:
        print(f"humanoid-eval: error: {exc}", file=sys.stderr)
        return 2
    from humanoid_control.hardware.scene import load_scene

    try:
        scene = load_scene(args.terrain)  # SceneError names what is wrong
    except ValueError as exc:
        print(f"humanoid-eval: error: --terrain: {exc}", file=sys.stderr)
        return 2
    terrain = not scene.empty
    name = "mpc_walk" if walking else args.policy.replace("/", "_")
    suffix = "_top_speed" if args.script == "top-speed" else ""
    hw = "" if args.hardware == "mujoco" else f"_{args.hardware}"
    if args.in_loop is None:
        args.in_loop = args.clock == "realtime" and not walking
    if args.publish_rate is None:
        args.publish_rate = 100.0 if args.in_loop and args.clock == "realtime" else 0.0
    if args.in_loop and walking:
        print("humanoid-eval: error: --in-loop runs the policy in the loop (not mpc_walk)", file=sys.stderr)
        return 2
    if args.in_loop:
        suffix += "_in_loop"
    ground = f"_{scene.name}" if terrain else ""
    out = Path(args.out) / f"locomotion_{name}_{args.clock}{hw}{ground}{suffix}"
    script = (
        TOP_SPEED_SCRIPT
        if args.script == "top-speed"
        else (SHORT_SCRIPT if args.short or args.script == "short" else None)
    )
    extra: dict[str, str] = {}
    if terrain:
        extra = {"scene": args.terrain, "estimator_flat_ground_std": "0"}
        script = script or TERRAIN_SCRIPT
    result = run_locomotion(
        args.policy,
        controller=args.controller,
        clock=args.clock,
        out_dir=out,
        script=script,
        settle_s=args.settle,
        robot=args.robot,
        extra_args=extra,
        log=lambda m: print(m, file=sys.stderr),
        hardware=args.hardware,
        in_loop=args.in_loop,
        publish_rate_hz=args.publish_rate,
    )
    if terrain:
        fwd = result["segments"].get("forward", {}).get("achieved_mean")
        result["terrain"] = args.terrain
        result["mean_forward_mps"] = fwd[0] if fwd else None
        (out / f"locomotion_{name}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result), flush=True)
    return 0 if not result["fell"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
