"""The locomotion evaluation (``humanoid-eval locomotion``): one command script through the ROS graph.

:func:`run_locomotion` launches ``launch/sim.launch.yaml`` (driver and the policy runner, or the walking
controller with the state estimator) paused, joins it as a lockstep peer (:class:`GraphProbe`), publishes
``/cmd_vel`` from a command script (:mod:`~humanoid_bringup.evaluation.locomotion_scripts`) on the simulated
clock, and scores the base velocity from ``/sim/ground_truth`` in the heading frame
(:mod:`~humanoid_bringup.evaluation.locomotion_metrics`). It writes the result JSON (its keys: the
``humanoid-eval`` help, :mod:`humanoid_bringup.evaluation.evaluate`), the tracking and path plots and,
``record``, the run's time series (:func:`save_series`, what ``humanoid-eval compare`` scores).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
from humanoid_bringup.evaluation.locomotion_metrics import (
    heading_frame_velocity,
    max_forward_speed,
    segment_metrics,
)
from humanoid_bringup.evaluation.locomotion_scripts import LOCOMOTION_SCRIPT, TOP_SPEED_SCRIPT
from humanoid_bringup.evaluation.script_source import ScriptSource
from humanoid_policy.inprocess import command_at


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
    """Run the command script through the ROS graph; the result dictionary (see :mod:`.evaluate`).

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

    if controller not in ("policy", "mpc_walk", "supervised"):
        raise ValueError(f"controller must be policy, mpc_walk or supervised, not {controller!r}")
    walking = controller == "mpc_walk"
    supervised = controller == "supervised"  # the policy under the supervisor, in the driver's loop
    if supervised:
        in_loop = True

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
    if supervised:
        args["controller_parameters"] = f"policy={policy}"
    elif not walking:
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
    elif supervised:  # its latched state (JSON: who is in control, the handovers) in runner_states
        source = ScriptSource(script, state_topic="/supervisor/state", start_on="driver_active")
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
        with probe.lock:  # the loop's overruns second by second (realtime: where in the run they fell), up to
            # the script's end: the seconds the driver ran on until the graph stopped depend on the wall clock
            end = (source.t0 if source.t0 is not None else 0.0) + total + 1e-6
            per_s = [
                int(d["overruns_last_s"])
                for t, d in zip(probe.data.diagnostics_t, probe.data.diagnostics, strict=True)
                if "overruns_last_s" in d and t <= end
            ]
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
        "runner_states": [] if supervised else source.runner_states,
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
    if supervised:  # the supervisor's last state: handovers (time, reason, duration) and the shares
        result["supervisor"] = json.loads(source.runner_states[-1]) if source.runner_states else None
        result.update(_supervised_shares(result["supervisor"], source.t0 or 0.0, total))
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


def _supervised_shares(state: dict[str, Any] | None, t0: float, total: float) -> dict[str, Any]:
    """``handovers`` (to the walking controller: time since the script's start, reason, duration; s) and the
    shares of the script's ``total`` seconds under the policy and under the walking controller, from the
    supervisor's last ``/supervisor/state`` (published at each handover: a handover still in force runs to
    the script's end)."""
    handovers = []
    model_s = 0.0
    for h in (state or {}).get("handovers", []):
        start = float(h["t"]) - t0
        duration = h.get("duration_s")
        end = total if duration is None else start + float(duration)
        model_s += max(0.0, min(end, total) - max(start, 0.0))
        handovers.append({**h, "t": round(start, 4)})
    share_model = model_s / total if total > 0 else 0.0
    return {
        "handovers": handovers,
        "share_policy": round(1.0 - share_model, 4),
        "share_model": round(share_model, 4),
    }
