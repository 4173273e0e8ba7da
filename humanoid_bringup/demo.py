"""``humanoid-demo``: headless simulation demo; brings a robot (``--robot``) up by the launch file, reports.

Runs ``humanoid-launch launch/sim.launch.yaml`` (robot driver on MuJoCo, robot description, joint hold
controller) in lockstep, each node in its own process, records the graph from a probe node, and writes to
``--out`` (default ``results/demo``):

- ``summary.json``: figures (base height vs nominal, driver modes, loop statistics, contact forces, ...);
- ``base_height.png``, ``contact_forces.png``: plots;
- ``robot.png``: a rendered picture of the robot at the end of the run;
- ``walk/``: the robot walking with a learned policy (``--policy``, default: the robot config's
  ``default_policy``) through the policy runner along a short command script (stand, forward 0.5 m/s, turn
  0.5 rad/s, stop):
  ``velocity_tracking_*.png`` (commanded vs achieved), ``trajectory_*.png``, ``robot_walking.png``, and the
  ``walk`` entry of ``summary.json`` (the ``humanoid-eval locomotion`` figures);
- ``wbc/``: the whole-body controller standing on the state estimator's ``/odom`` (driver, estimator and
  WBC in their own processes, lockstep) and recovering from a 0.1 s push at the pelvis of
  ``--push-fraction`` (0.5) of the direction's LIPM bound (``--push-direction``, default front):
  ``push_<direction>.png`` (CoM and capture point against the support polygon's edge) and the ``wbc``
  entry of ``summary.json``.

The last line of stdout is the summary as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# rendering must pick its OpenGL platform before mujoco is imported anywhere in this process
os.environ.setdefault("MUJOCO_GL", "egl")


def run_stand_demo(out: Path, hold_s: float, clock: str, controller: str, robot: str) -> dict[str, Any]:
    """Bring the robot up, hold it standing for ``hold_s`` seconds after the boot ramp, and report."""
    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height

    config = load_robot_config(robot)
    nominal = standing_base_height(config, load_pinocchio_model(config), config.array("default"))
    ramp_s, settle_s = 2.0, 0.5
    total = ramp_s + settle_s + hold_s + 0.02  # + margin: the last sample lands at or after the hold time
    isolated_ros_env(out / "logs")
    lockstep = clock == "lockstep"
    probe = GraphProbe(lockstep_peer=lockstep)
    graph = LaunchedGraph(
        {
            "robot": robot,
            "clock": clock,
            "controller": controller,
            "sim_duration_s": f"{total:.3f}",
            # paused until this probe's subscriptions are matched (and the controller joined), so the boot
            # ramp is recorded too
            "start_paused": "true",
        },
        out / "logs" / "launch.log",
    ).start()
    wall0 = time.monotonic()
    try:
        peers = ("joint_hold_controller",) if lockstep and controller == "joint_hold" else ()
        probe.start_graph(peers=peers, running=graph.running)
        code = graph.wait(timeout=60.0 + 20.0 * total)
        if code is None:
            raise RuntimeError(
                "the simulation did not finish in time; see " + str(out / "logs" / "launch.log")
            )
        probe.wait_for(lambda d: bool(d.truth_t) and d.truth_t[-1] >= total - 0.01, timeout=5.0)
    finally:
        wall = time.monotonic() - wall0
        close_graph(probe, graph)
    d = probe.data
    if not d.truth_t:
        raise RuntimeError("no /sim/ground_truth received; see " + str(out / "logs" / "launch.log"))
    t = np.array(d.truth_t)
    z = np.array([p[2] for p in d.truth_pos])
    settled = t >= ramp_s + settle_s
    err = z[settled] - nominal
    diag = d.diagnostics[-1] if d.diagnostics else {}
    contact = {s: np.array(v) for s, v in d.contact_fz.items()}
    summary: dict[str, Any] = {
        "robot": config.name,
        "clock": clock,
        "controller": controller,
        "sim_time_s": float(t[-1]),
        "wall_time_s": wall,
        "hold_duration_s": float(t[settled][-1] - t[settled][0]) if settled.any() else 0.0,
        "base_height_nominal_m": nominal,
        "base_height_mean_m": float(z[settled].mean()) if settled.any() else None,
        "base_height_max_abs_err_m": float(np.abs(err).max()) if settled.any() else None,
        "stood": bool(settled.any() and np.abs(err).max() <= 0.02),
        "fell": bool(z.min() < config.simulation.fall_height),
        "driver_modes": d.modes,
        "final_mode": diag.get("mode"),
        "commands_accepted": int(diag.get("commands_accepted", 0)),
        "lockstep_timeouts": int(diag.get("lockstep_timeouts", 0)),
        "loop_realtime_factor": float(diag.get("realtime_factor", 0.0)),
        "contact_fz_mean_N": {
            s: float(v[:, 1][v[:, 0] >= ramp_s + 0.5].mean())
            for s, v in contact.items()
            if len(v) and (v[:, 0] >= ramp_s + 0.5).any()
        },
        "weight_N": None,
        "joint_names_match_description": _names_match(d.joint_names, d.robot_description),
        "samples": len(t),
    }
    from humanoid_control.model.robot_model import load_mujoco_model

    summary["weight_N"] = float(load_mujoco_model(config, scene=False).model.body_subtreemass[1] * 9.81)
    _plots(out, t, z, nominal, ramp_s, contact, config.name)
    from humanoid_bringup.evaluation.render import qpos_from_state, render_robot

    qpos = qpos_from_state(
        config,
        np.array(d.truth_pos[-1]),
        np.array(d.truth_quat_wxyz[-1]),
        d.joint_names,
        np.array(d.joint_q[-1]),
    )
    render_robot(config, qpos, out / "robot.png")
    summary["pictures"] = ["robot.png", "base_height.png", "contact_forces.png"]
    return summary


def run_walk_demo(out: Path, policy: str, clock: str, robot: str) -> dict[str, Any]:
    """Walk the robot with a learned policy along a short command script (stand, forward, turn, stop)."""
    from humanoid_bringup.evaluation.locomotion_eval import run_locomotion
    from humanoid_bringup.evaluation.locomotion_scripts import SHORT_SCRIPT

    result = run_locomotion(
        policy,
        clock=clock,
        out_dir=out,
        script=SHORT_SCRIPT,
        robot=robot,
        log=lambda m: print(m, file=sys.stderr),
        render_to=out / "robot_walking.png",
    )
    name = policy.replace("/", "_")
    result["pictures"] = [
        f"walk/velocity_tracking_{name}.png",
        f"walk/trajectory_{name}.png",
        "walk/robot_walking.png",
    ]
    return result


def _names_match(names: list[str], urdf: str | None) -> bool | None:
    if urdf is None or not names:
        return None
    import xml.etree.ElementTree as ET

    joints = {
        j.get("name")
        for j in ET.fromstring(urdf).iter("joint")
        if j.get("type") in ("revolute", "continuous")
    }
    return set(names) == joints


def _plots(
    out: Path,
    t: np.ndarray,
    z: np.ndarray,
    nominal: float,
    ramp_s: float,
    contact: dict[str, np.ndarray],
    robot: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(t, z, label="base height (ground truth)")
    ax.axhline(nominal, color="k", ls="--", lw=1, label=f"nominal {nominal:.3f} m")
    ax.fill_between([t[0], t[-1]], nominal - 0.02, nominal + 0.02, color="g", alpha=0.15, label="+-2 cm")
    ax.axvline(ramp_s, color="gray", ls=":", label="end of boot ramp")
    ax.set_xlabel("sim time (s)")
    ax.set_ylabel("m")
    ax.set_title(f"{robot}: boot ramp and standing hold (lockstep, separate ROS 2 processes)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "base_height.png", dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4))
    for side, v in contact.items():
        if len(v):
            ax.plot(v[:, 0], v[:, 1], label=f"{side} sole normal force")
    ax.set_xlabel("sim time (s)")
    ax.set_ylabel("N")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "contact_forces.png", dpi=100)
    plt.close(fig)


def run_wbc_demo(out: Path, robot: str, direction: str, fraction: float) -> dict[str, Any]:
    """The WBC stands and takes one push through the graph (``evaluation.push_eval``); its figures."""
    from humanoid_bringup.evaluation.push_eval import PUSH_DURATION_S, plot_push, run_trial
    from humanoid_bringup.evaluation.wbc_graph import Kinematics, WbcGraph
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.balance import push_impulse_bounds

    config = load_robot_config(robot)
    kin = Kinematics(config)
    bound = push_impulse_bounds(config, kin.pmodel, PUSH_DURATION_S)[direction]
    impulse = fraction * bound["bound_Ns"]
    graph = WbcGraph(out, robot)
    try:
        graph.start()
        trial = run_trial(graph, kin, direction, impulse, config)
    finally:
        graph.stop()
    result: dict[str, Any] = {
        "controller": "wbc_stand",
        "push_direction": direction,
        "push_Ns": round(impulse, 3),
        "bound_Ns": round(bound["bound_Ns"], 3),
        "survived": trial.survived,
        "reason": trial.reason,
    }
    if trial.series.get("t"):
        plot_push(out / f"push_{direction}.png", direction, trial, bound)
        result["pictures"] = [f"wbc/push_{direction}.png"]
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the demo; print the summary JSON as the last line."""
    parser = argparse.ArgumentParser(
        prog="humanoid-demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="results/demo", help="result folder (default results/demo)")
    parser.add_argument("--hold", type=float, default=10.0, help="standing time after the boot ramp (s)")
    parser.add_argument("--clock", default="lockstep", choices=["lockstep", "realtime"])
    parser.add_argument("--controller", default="joint_hold", choices=["none", "joint_hold"])
    parser.add_argument("--robot", default="g1")
    parser.add_argument(
        "--policy",
        default="",
        help="learned policy for the walking part (default: the robot config's default_policy; 'none' skips "
        "it)",
    )
    parser.add_argument("--push-direction", default="front", choices=["front", "back", "left", "right"])
    parser.add_argument(
        "--push-fraction",
        type=float,
        default=0.5,
        help="WBC push as a fraction of the LIPM bound; 0 skips it",
    )
    args = parser.parse_args(argv)
    if not args.policy:
        from humanoid_control.model.robot_config import ConfigError, load_robot_config

        try:
            args.policy = load_robot_config(args.robot).default_policy or "none"
        except ConfigError as exc:
            print(f"humanoid-demo: error: {exc}", file=sys.stderr)
            return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "stand": run_stand_demo(out, args.hold, args.clock, args.controller, args.robot)
    }
    if args.policy != "none":
        summary["walk"] = run_walk_demo(out / "walk", args.policy, args.clock, args.robot)
    if args.push_fraction > 0:
        summary["wbc"] = run_wbc_demo(out / "wbc", args.robot, args.push_direction, args.push_fraction)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"results written to {out.resolve()}", file=sys.stderr)
    print(json.dumps(summary))
    ok = summary["stand"]["stood"] and not summary["stand"]["fell"]
    ok = ok and not summary.get("walk", {}).get("fell", False)
    return 0 if ok and summary.get("wbc", {}).get("survived", True) else 1


if __name__ == "__main__":
    sys.exit(main())
