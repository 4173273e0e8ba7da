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
from pathlib import Path

from humanoid_bringup.evaluation.locomotion_eval import run_locomotion
from humanoid_bringup.evaluation.locomotion_scripts import (
    SHORT_SCRIPT,
    TERRAIN_SCRIPT,
    TOP_SPEED_SCRIPT,
)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-eval``."""
    parser = argparse.ArgumentParser(prog="humanoid-eval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="evaluation", required=True)
    loco = sub.add_parser("locomotion", help="walk a fixed command script; velocity tracking vs ground truth")
    loco.add_argument("--controller", default="policy", choices=["policy", "mpc_walk", "supervised"])
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
    est.add_argument("--robot", default="g1")
    est.add_argument(
        "--policy",
        default="",
        help="walking policy (default: holosoma/g1_fastsac where it is one of the robot's policies, else "
        "the robot's default_policy)",
    )
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
    push.add_argument(
        "--controller",
        default="wbc_stand",
        choices=["wbc_stand", "mpc_walk", "supervised"],
        help="supervised: the learned policy under its guardian, bisected in process (the scorecard's push "
        "trial; docs/supervised.md), not through the graph",
    )
    push.add_argument(
        "--policy", default="", help="--controller supervised: the policy inside (default: the robot's)"
    )
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
    start = sub.add_parser(
        "startup",
        help="the full graph (perception, autonomy, mode manager, policy) started unpaused in lockstep, "
        "with CPU burners: no peer dropped, identical records (docs/architecture.md, 'Lockstep')",
    )
    start.add_argument("--runs", type=int, default=5)
    start.add_argument("--burners", type=int, default=2, help="processes keeping a CPU core busy each")
    start.add_argument("--seconds", type=float, default=3.0, help="simulated time per run (s)")
    start.add_argument("--out", default="results/eval")
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
    from humanoid_bringup.scorecard.cli import add_scorecard_arguments

    score = sub.add_parser(
        "scorecard",
        help="robustness scorecard: controllers x scenario families x levels x seeds, each trial a Ray task "
        "(in-process, estimator in the loop); docs/scorecard.md",
    )
    add_scorecard_arguments(score)
    for graph_evaluation in (loco, est, push, comp, stand, auto, start):
        graph_evaluation.add_argument(
            "--record",
            action="store_true",
            help="record each run's ROS graph to a rosbag2 folder (MCAP) beside its log and JSON: bag/ "
            "(launch record:=; replay with humanoid-replay; docs/recording.md)",
        )
    args = parser.parse_args(argv)
    if args.evaluation == "scorecard":
        from humanoid_bringup.scorecard.cli import scorecard_main

        return scorecard_main(args)
    if getattr(args, "record", False):
        from humanoid_bringup.evaluation.launched_graph import record_runs

        record_runs()
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

    if args.evaluation == "startup":
        from humanoid_bringup.evaluation.startup_eval import run_startup_eval

        try:
            res = run_startup_eval(
                Path(args.out) / "startup",
                runs=args.runs,
                burners=args.burners,
                seconds=args.seconds,
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except ValueError as exc:
            print(f"humanoid-eval: error: {exc}", file=sys.stderr)
            return 2
        res.pop("record")
        print(json.dumps(res), flush=True)
        return 0 if res["no_peer_dropped"] == len(res["runs"]) and res["identical"] else 1

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

        if args.evaluation == "push" and args.controller == "supervised":
            from humanoid_bringup.evaluation.push_inprocess import run_push_inprocess

            try:
                opts = push_options(args)
                res = run_push_inprocess(Path(args.out) / opts.folder(), opts, args.policy, args.robot, err)
            except (ConfigError, ValueError) as exc:
                print(f"humanoid-eval: error: {exc}", file=sys.stderr)
                return 2
            print(json.dumps(res), flush=True)
            return 0
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
        from humanoid_bringup.evaluation.policy_bench import bench_policy_name
        from humanoid_control.model.robot_model import FrictionPatch
        from humanoid_policy.manifest import ManifestError, load_policy

        patch = DEFAULT_PATCH if args.friction_patch is None else args.friction_patch
        try:
            if FrictionPatch.parse(patch) is None:
                patch = None
            config = load_robot_config(args.robot)  # fail fast, with the reason
            policy = bench_policy_name(args.policy, config, "holosoma/g1_fastsac")
            load_policy(policy, config)
        except (ConfigError, ManifestError, ValueError) as exc:
            print(f"humanoid-eval: error: {exc}", file=sys.stderr)
            return 2
        res = run_estimator_eval(
            Path(args.out) / "estimator",
            policy=policy,
            robot=args.robot,
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
