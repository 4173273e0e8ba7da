"""``humanoid-bench``: benchmarks that print figures as JSON (last line of stdout).

``humanoid-bench driver``: the real-time loop per scenario (hold, joint_hold, policy, wbc_stand,
joint_hold_1khz; ``--scenarios``, ``--seconds``, default 60 s each at 500 Hz), each beside a bare-loop
baseline measured in the same run (``baseline_overruns_pct``, ``baseline_lateness_us_p99``; see
``humanoid_bringup/evaluation/rt_bench.py`` and docs/realtime.md). ``--record``: each scenario's ROS run
recorded to a bag (launch ``record:=``), with the recorder's cost beside the figures (``recorder_cpu_pct``:
the recorder process's CPU, % of one core; ``record_messages``, ``record_bytes``, ``record_bag``;
docs/recording.md). ``humanoid-bench driver --lockstep`` gives
the earlier figures instead: the robot driver on MuJoCo, launched through ``launch/sim.launch.yaml`` in its
own processes, measured from its own ``/diagnostics``:

- realtime mode at ``--rate`` Hz (default 500) for ``--seconds`` (default 30): achieved ``rate_hz``, wake-up
  jitter relative to the absolute deadlines (``jitter_us_median``, ``jitter_us_p99``, ``jitter_us_max``) and
  ``overruns`` (ticks whose work ended after the next deadline);
- lockstep mode with the joint hold controller in a separate process answering every tick:
  ``lockstep_realtime_factor`` (simulated seconds per wall second), plus the driver alone in lockstep
  (``lockstep_realtime_factor_driver_only``, no controller to wait for).

``humanoid-bench driver --hardware unitree_g1`` (or ``can_mit``): the same driver through the protocol's
emulator (``emulator:=true``, MuJoCo behind it): the realtime run (the emulator stepping physics on wall time
in its own process, as a robot would; ``--seconds`` of wall time) gives ``rate_hz``, jitter and ``overruns``
at 500 Hz and the final mode (a lost LowState latches damping); a lockstep run of the driver alone gives
``roundtrip_us_median`` / ``_p99``: a LowCmd written -> the LowState answering it read (DDS both ways through
the SDK's Python channels, one physics period in the emulator); the key ``mujoco`` holds the same two runs on
MuJoCo, measured in the same call, side by side. (can_mit: no round trip
key, the actuator emulators run in the driver's process.)

``humanoid-bench link``: the per-tick cost of the hardware links in the driver's process (G1 LowCmd / LowState
over DDS on loopback, 29 MIT frames each way on virtual CAN) beside the SDK's / python-can's own path on the
same messages (``link_us_median``, ``link_us_p99``, ``sdk_link_us_median``, ``ratio_vs_sdk``; see
``humanoid_bringup/evaluation/link_bench.py`` and docs/hardware.md).

``humanoid-bench wbc [--states N]``: the whole-body controller in one process (one core): G1, full task set
(CoM from the DCM balance, angular momentum, base and torso orientation, posture; both feet in contact, 4
corner forces each with friction pyramids; torque and joint limits), over ``N`` (1000) standing states with
small random perturbations (fixed seed):

- ``wbc_tick_us_median`` / ``_p99``: the QP tick, assembly included: rigid-body terms (pinocchio), task and
  constraint assembly, solve, torque recovery; what TSID's ``computeProblemData`` + ``solve`` +
  ``getAccelerations`` + ``getActuatorForces`` do;
- ``controller_step_us_median`` / ``_p99``: the whole controller step: the QP tick plus the balance
  references (capture point, support polygon) and the joint-command integration;
- the solver alone, iterations, and how often the full problem (with torque-limit rows) was solved.

The perturbed states are independent draws, so a warm start from the previous tick's solution helps little
there. The same figures on the states a running controller meets are the ``trajectory_*`` keys: 3 s of
closed-loop standing in MuJoCo (in process, ground truth, 500 Hz) with a 7 N s push at 1 s, replayed in order.

If the optional ``tsid`` package is importable (``scripts/install_tsid.sh``), both state sets are run in the
same process through an equivalent TSID formulation (``tsid_tick_us_median``, ``ratio_vs_tsid`` = our QP tick
/ TSID's tick, ``ratio_controller_step_vs_tsid``, ``trajectory_tsid_tick_us_median``,
``trajectory_ratio_vs_tsid``); otherwise these keys are null and ``"tsid": "not installed"``.

``humanoid-bench policy [--policy NAME]``: the learned-policy runner.

- in one process, one core: the policy step over states recorded while walking: ONNX inference alone
  (``inference_us_median``, ``inference_us_p99``) and the whole step - command clip, gait clock, observation,
  inference, targets (``step_us_median``, ``step_us_p99``);
- across processes (driver and policy runner launched in lockstep, this process observing both topics): the
  time from a ``/joint_states`` message to the ``/joint_commands`` answering it (same stamp), as received here
  (``obs_to_command_us_median``, ``obs_to_command_us_p99``), and for the ticks where the policy ran
  (``obs_to_command_policy_step_us_median``, ``..._p99``).

``humanoid-bench perception [--frames N]``: the perception cores in one process (Mesa's software renderer may
use several threads), the G1 standing with four markers on the floor ahead (``perception_eval.SHOWCASE``) and
the ``markers`` scene's box:

- ``render_rgb_ms`` / ``render_depth_ms``: offscreen rendering of the head camera per frame (``MUJOCO_GL``,
  software OpenGL on a CPU-only machine; shadows, reflections and skybox off), at 640x480 and 424x240
  (``{"640x480": {"median", "p95"}, ...}``);
- ``detect_ms``: marker detection and pose per RGB frame (four markers in view), same sizes, with the default
  corner refinement (edge lines); ``detect_subpix_ms`` with OpenCV's corner search alone;
- ``heightmap_ms``: depth frame -> points (world) -> 2 cm height map, same sizes;
- each also as ``*_cpu_ms``: the process's CPU time for the step (all its threads), which other work on the
  machine inflates far less than the wall time;
- ``lockstep_rtf_camera_off`` / ``lockstep_rtf_camera_on``: simulated seconds per wall second of the lockstep
  ROS graph (driver, policy runner walking in place, estimator; with ``perception:=true`` also the camera node
  rendering RGB and depth at ``--camera-rate`` Hz, 424x240, and the perception node), over ``--rtf-seconds``
  (``humanoid_bringup/evaluation/camera_rtf.py``; details under ``camera_rtf``).

``--robot NAME`` (``wbc``, ``mpc``, ``policy``, ``estimator``, ``perception``, ``driver``; default ``g1``):
the robot configuration (``config/robots/NAME.yaml``) loaded in process and launched (``robot:=``); the JSON's
``robot`` key. A policy left out is the benchmark's G1 default where it is one of the robot's ``policies``,
else the robot's ``default_policy``; ``perception`` refuses a robot without a ``camera:`` section (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys

from humanoid_bringup.evaluation.driver_bench import bench_driver, bench_driver_hardware
from humanoid_bringup.evaluation.estimator_bench import bench_estimator
from humanoid_bringup.evaluation.perception_bench import bench_perception
from humanoid_bringup.evaluation.policy_bench import bench_policy, bench_policy_name
from humanoid_bringup.evaluation.wbc_bench import bench_wbc


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark; print its JSON object as the last line of stdout."""
    parser = argparse.ArgumentParser(
        prog="humanoid-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="benchmark", required=True)
    drv = sub.add_parser("driver", help="real-time loop rate/jitter/overruns and lockstep real-time factor")
    drv.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="realtime run length per scenario (s, default 60; 30 with --lockstep or --hardware)",
    )
    drv.add_argument(
        "--scenarios",
        default="hold,joint_hold,policy,wbc_stand,joint_hold_1khz",
        help="comma-separated realtime scenarios (default all five)",
    )
    drv.add_argument(
        "--thread-priority",
        type=int,
        default=50,
        help="scenarios: the driver's thread_priority (SCHED_FIFO 1..99, 0: normal; default 50)",
    )
    drv.add_argument(
        "--process-priority",
        type=int,
        default=40,
        help="scenarios: the driver's process_priority (default 40)",
    )
    for flag, what in (
        ("--physics-thread", "physics_thread, and the baseline likewise"),
        ("--callbacks-in-slack", "callbacks_in_slack"),
    ):
        help_text = f"scenarios: the driver's {what} (default true)"
        drv.add_argument(flag, choices=["true", "false"], default="true", help=help_text)
    drv.add_argument(
        "--publish-rate-hz",
        type=float,
        default=0.0,
        help="scenarios: the driver's publish_rate_hz, the tooling streams' rate (default 0: every tick)",
    )
    drv.add_argument(
        "--record",
        action="store_true",
        help="scenarios: record every topic to a bag during each ROS run (launch record:=) and report the "
        "recorder's cost (recorder_cpu_pct, record_messages, record_bytes, record_bag)",
    )
    drv.add_argument(
        "--lockstep",
        action="store_true",
        help="the earlier figures: realtime hold without baseline, lockstep real-time factors",
    )
    drv.add_argument("--rate", type=float, default=500.0, help="loop rate (Hz, default 500)")
    drv.add_argument("--lockstep-seconds", type=float, default=10.0, help="lockstep simulated time (s)")
    drv.add_argument(
        "--hardware",
        default="mujoco",
        choices=["mujoco", "unitree_g1", "can_mit"],
        help="backend; unitree_g1 / can_mit through their emulators, with the mujoco figures beside them",
    )
    pol = sub.add_parser("policy", help="policy step / inference latency and observation-to-command latency")
    pol.add_argument(
        "--policy",
        default="",
        help="policy name or manifest/ONNX path (default: holosoma/g1_ppo where it is one of the robot's "
        "policies, else the robot's default_policy)",
    )
    pol.add_argument("--steps", type=int, default=2000, help="in-process policy steps timed")
    pol.add_argument("--seconds", type=float, default=10.0, help="simulated seconds of the ROS graph run")
    wbc = sub.add_parser("wbc", help="whole-body controller QP tick time (and TSID's, if installed)")
    wbc.add_argument("--states", type=int, default=1000, help="perturbed standing states timed")
    wbc.add_argument("--seed", type=int, default=0, help="random seed of the perturbations")
    wbc.add_argument("--walking-seconds", type=float, default=4.0, help="recorded walking at 0.3 m/s (s)")
    mpc = sub.add_parser("mpc", help="walking pattern generator re-solve time (and PlaCo's, if installed)")
    mpc.add_argument("--plan", default=None, help="footstep plan (JSON; default: the recorded one)")
    mpc.add_argument("--rate", type=float, default=50.0, help="re-solve rate along the plan (Hz, default 50)")
    mpc.add_argument("--repeats", type=int, default=3, help="passes over the plan (default 3)")
    mpc.add_argument("--block", type=int, default=25, help="re-solves per turn of ours and PlaCo's")
    mpc.add_argument("--placo-python", default=None, help="PlaCo's python (default .venv-placo/bin/python)")
    mpc.add_argument("--cpu", type=int, default=None, help="core to pin both to (default: none)")
    est = sub.add_parser("estimator", help="state estimator update time per tick (median, p99)")
    est.add_argument("--seconds", type=float, default=20.0, help="simulated seconds of recorded walking")
    est.add_argument("--seed", type=int, default=1, help="IMU noise seed")
    per = sub.add_parser(
        "perception", help="head camera render time (RGB, depth), marker detection, height map"
    )
    per.add_argument("--frames", type=int, default=30, help="frames timed per image size")
    per.add_argument(
        "--rtf-seconds",
        type=float,
        default=5.0,
        help="simulated seconds of each lockstep graph run (camera on / off); 0: skip those runs",
    )
    per.add_argument("--camera-rate", type=float, default=5.0, help="camera frames per simulated second")
    from humanoid_bringup.evaluation.console_bench import add_console_arguments

    add_console_arguments(
        sub.add_parser("console", help="browser console: scene updates/s reaching the page and its CPU")
    )
    from humanoid_bringup.evaluation.link_bench import add_link_arguments

    add_link_arguments(
        sub.add_parser("link", help="per-tick hardware link cost (G1 DDS, MIT CAN) beside the SDK's path")
    )
    from humanoid_bringup.scorecard.cli import add_scorecard_arguments

    score = sub.add_parser(
        "scorecard", help="scorecard trials per second with 1 and 2 Ray workers on the same trial set"
    )
    add_scorecard_arguments(score, bench=True)
    for robot_bench in (drv, pol, wbc, mpc, est, per):
        robot_bench.add_argument(
            "--robot", default="g1", help="robot configuration: config/robots/<robot>.yaml (default g1)"
        )
    est.add_argument(
        "--policy",
        default="",
        help="walking policy (default: holosoma/g1_fastsac where it is one of the robot's policies, else "
        "the robot's default_policy)",
    )
    args = parser.parse_args(argv)
    if args.benchmark == "console":
        from humanoid_bringup.evaluation.console_bench import bench_main as console_main

        return console_main(args)
    if args.benchmark == "link":
        from humanoid_bringup.evaluation.link_bench import link_main

        return link_main(args)
    if args.benchmark == "scorecard":
        from humanoid_bringup.scorecard.cli import bench_main

        return bench_main(args)
    from humanoid_control.model.robot_config import ConfigError, load_robot_config

    try:  # fail fast, with the reason: an unknown robot, a robot without a camera for perception
        config = load_robot_config(args.robot)
        if args.benchmark == "perception":
            from humanoid_perception.camera import load_camera_spec

            load_camera_spec(config)
    except (ConfigError, ValueError) as exc:
        print(f"humanoid-bench: error: {exc}", file=sys.stderr)
        return 2
    if args.benchmark == "perception":
        if args.frames < 1:
            parser.error("--frames must be >= 1")
        if args.rtf_seconds < 0:
            parser.error("--rtf-seconds must be >= 0")
        result = bench_perception(args.frames, args.robot)
        if args.rtf_seconds > 0:
            from humanoid_bringup.evaluation.camera_rtf import camera_rtf

            policy = bench_policy_name("", config)
            result.update(
                camera_rtf(
                    seconds=args.rtf_seconds, rate_hz=args.camera_rate, policy=policy, robot=args.robot
                )
            )
        print(json.dumps(result))
        return 0
    if args.benchmark == "estimator":
        result = bench_estimator(args.seconds, args.seed, args.robot, args.policy)
    elif args.benchmark == "mpc":
        from humanoid_bringup.evaluation.mpc_bench import bench_mpc

        result = bench_mpc(
            args.plan, args.rate, args.repeats, args.block, args.placo_python, args.cpu, robot=args.robot
        )
    elif args.benchmark == "wbc":
        result = bench_wbc(args.states, args.seed, args.walking_seconds, args.robot)
    elif args.benchmark == "driver":
        if args.record and (args.hardware != "mujoco" or args.lockstep):
            parser.error("--record applies to the realtime scenarios (not with --lockstep or --hardware)")
        if args.hardware != "mujoco":
            seconds = 30.0 if args.seconds is None else args.seconds
            result = bench_driver_hardware(
                args.hardware, seconds, args.rate, args.lockstep_seconds, args.robot
            )
        elif args.lockstep:
            seconds = 30.0 if args.seconds is None else args.seconds
            result = bench_driver(seconds, args.rate, args.lockstep_seconds, args.robot)
        else:
            from humanoid_bringup.evaluation.rt_bench import bench_driver_scenarios

            seconds = 60.0 if args.seconds is None else args.seconds
            if seconds <= 0:
                parser.error("--seconds must be > 0")
            names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
            try:
                result = bench_driver_scenarios(
                    seconds,
                    names,
                    args.thread_priority,
                    args.process_priority,
                    physics_thread=args.physics_thread == "true",
                    callbacks_in_slack=args.callbacks_in_slack == "true",
                    publish_rate_hz=args.publish_rate_hz,
                    record=args.record,
                    robot=args.robot,
                )
            except ValueError as exc:
                parser.error(str(exc))
    else:
        result = bench_policy(args.policy, args.steps, args.seconds, args.robot)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
