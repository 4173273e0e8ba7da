"""``humanoid-bench``: benchmarks that print figures as JSON (last line of stdout).

``humanoid-bench driver``: the real-time loop per scenario (hold, joint_hold, policy, wbc_stand,
joint_hold_1khz; ``--scenarios``, ``--seconds``, default 60 s each at 500 Hz), each beside a bare-loop
baseline measured in the same run (``baseline_overruns_pct``, ``baseline_lateness_us_p99``; see
``humanoid_bringup/evaluation/rt_bench.py`` and docs/realtime.md). ``humanoid-bench driver --lockstep`` gives
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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _run_graph(arguments: dict[str, str], log_dir: Path, timeout: float) -> dict[str, str]:
    from humanoid_bringup.evaluation.graph_probe import GraphProbe, LaunchedGraph, close_graph

    probe = GraphProbe(subscribe_description=False, name="bench_probe")
    graph = LaunchedGraph(
        arguments, log_dir / f"launch_{arguments['clock']}_{arguments['controller']}.log"
    ).start()
    try:
        code = graph.wait(timeout)
        if code is None:
            raise RuntimeError(f"benchmark graph did not finish in {timeout} s: {graph.log()[-2000:]}")
        if code != 0:
            raise RuntimeError(f"benchmark graph failed ({code}): {graph.log()[-2000:]}")
        probe.wait_for(lambda d: bool(d.diagnostics), 5.0)
        time.sleep(0.5)
    finally:
        close_graph(probe, graph)
    diag = probe.last_diagnostics()
    if not diag:
        raise RuntimeError("no /diagnostics received from the driver")
    return diag


def _run_graph_for(arguments: dict[str, str], log_dir: Path, wall_s: float) -> dict[str, str]:
    """Run a graph for ``wall_s`` seconds of wall time after the driver's first diagnostics, then stop it; the
    driver's last diagnostics (an emulator in realtime may fall behind wall time on a loaded machine, so its
    simulated time cannot bound the run)."""
    from humanoid_bringup.evaluation.graph_probe import GraphProbe, LaunchedGraph, close_graph

    probe = GraphProbe(subscribe_description=False, name="bench_probe", reliable_streams=False)
    log = log_dir / f"launch_{arguments['clock']}_{arguments['controller']}.log"
    graph = LaunchedGraph(arguments, log).start()
    try:
        if not probe.wait_for(lambda d: bool(d.diagnostics), 120.0):
            raise RuntimeError(f"no /diagnostics from the driver: {graph.log()[-2000:]}")
        time.sleep(wall_s)
        if not graph.running():
            raise RuntimeError(f"benchmark graph stopped early: {graph.log()[-2000:]}")
        diag = probe.last_diagnostics()
    finally:
        close_graph(probe, graph)
    return diag


def bench_driver_hardware(
    hardware: str, seconds: float, rate: float, lockstep_seconds: float
) -> dict[str, Any]:
    """The driver on a hardware backend through its protocol emulator (see module docstring), beside the same
    figures on MuJoCo (``mujoco`` key)."""
    import os

    from humanoid_bringup.evaluation.graph_probe import isolated_ros_env

    log_dir = Path(tempfile.mkdtemp(prefix=f"humanoid_bench_{hardware}_"))
    isolated_ros_env(log_dir)

    def num(d: dict[str, str], key: str) -> float | None:
        v = d.get(key, "")
        return float(v) if v not in ("", "None") else None

    def measure(backend: str) -> dict[str, Any]:
        """Realtime for ``seconds`` of wall time, then the driver alone in lockstep, on one backend."""
        extra = (
            {}
            if backend == "mujoco"
            else {"hardware": backend, "emulator": "true", "dds_domain": str(100 + os.getpid() % 100)}
        )
        sub = log_dir / backend
        sub.mkdir()
        rt = _run_graph_for(
            {"clock": "realtime", "controller": "none", "rate_hz": f"{rate}", **extra}, sub, seconds
        )
        alone = _run_graph(
            {
                "clock": "lockstep",
                "controller": "none",
                "rate_hz": f"{rate}",
                "sim_duration_s": f"{lockstep_seconds}",
                **extra,
            },
            sub,
            timeout=lockstep_seconds * 60 + 120,
        )
        out: dict[str, Any] = {
            "hardware": backend,
            "rate_hz": float(rt["rate_hz"]),
            "jitter_us_median": float(rt["jitter_us_median"]),
            "jitter_us_p99": float(rt["jitter_us_p99"]),
            "jitter_us_max": float(rt["jitter_us_max"]),
            "overruns": int(rt["overruns"]),
            "ticks": int(rt["ticks"]),
            "realtime_mode_final": rt["mode"],
            "realtime_mode_reason": rt.get("mode_reason", ""),
            # backend time / wall time: an emulator (or MuJoCo) that falls behind the wall clock shows here
            "realtime_backend_realtime_factor": num(rt, "realtime_factor"),
            "lockstep_realtime_factor_driver_only": float(alone["realtime_factor"]),
        }
        if backend != "mujoco":
            out["roundtrip_us_median"] = num(alone, "hw_roundtrip_us_median")
            out["roundtrip_us_p99"] = num(alone, "hw_roundtrip_us_p99")
        return out

    result: dict[str, Any] = {
        "benchmark": "driver",
        "robot": "g1",
        "emulator": True,
        "target_rate_hz": rate,
        "duration_s": seconds,
        "lockstep_sim_seconds": lockstep_seconds,
        **measure(hardware),
        "mujoco": measure("mujoco"),
        "logs": str(log_dir),
    }
    return result


def bench_driver(seconds: float, rate: float, lockstep_seconds: float) -> dict[str, Any]:
    """Realtime and lockstep figures of the robot driver (see module docstring)."""
    from humanoid_bringup.evaluation.graph_probe import isolated_ros_env

    log_dir = Path(tempfile.mkdtemp(prefix="humanoid_bench_"))
    isolated_ros_env(log_dir)
    # realtime: the driver holds the robot (boot ramp + hold), nothing else running
    rt = _run_graph(
        {"clock": "realtime", "controller": "none", "rate_hz": f"{rate}", "sim_duration_s": f"{seconds}"},
        log_dir,
        timeout=seconds * 3 + 60,
    )
    ls = _run_graph(
        {
            "clock": "lockstep",
            "controller": "joint_hold",
            "rate_hz": f"{rate}",
            "sim_duration_s": f"{lockstep_seconds}",
        },
        log_dir,
        timeout=lockstep_seconds * 20 + 60,
    )
    alone = _run_graph(
        {
            "clock": "lockstep",
            "controller": "none",
            "rate_hz": f"{rate}",
            "sim_duration_s": f"{lockstep_seconds}",
        },
        log_dir,
        timeout=lockstep_seconds * 20 + 60,
    )
    return {
        "benchmark": "driver",
        "robot": "g1",
        "hardware": "mujoco",
        "target_rate_hz": rate,
        "duration_s": seconds,
        "rate_hz": float(rt["rate_hz"]),
        "jitter_us_median": float(rt["jitter_us_median"]),
        "jitter_us_p99": float(rt["jitter_us_p99"]),
        "jitter_us_max": float(rt["jitter_us_max"]),
        "overruns": int(rt["overruns"]),
        "ticks": int(rt["ticks"]),
        "realtime_mode_final": rt["mode"],
        "lockstep_realtime_factor": float(ls["realtime_factor"]),
        "lockstep_sim_seconds": lockstep_seconds,
        "lockstep_commands_accepted": int(ls["commands_accepted"]),
        "lockstep_timeouts": int(ls["lockstep_timeouts"]),
        "lockstep_realtime_factor_driver_only": float(alone["realtime_factor"]),
        "logs": str(log_dir),
    }


def bench_policy(policy: str, steps: int, seconds: float) -> dict[str, Any]:
    """In-process step timing and cross-process observation-to-command latency (see module docstring)."""
    import threading

    import numpy as np
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from humanoid_bringup.evaluation.graph_probe import (
        GraphProbe,
        LaunchedGraph,
        close_graph,
        isolated_ros_env,
    )
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_policy.inprocess import run_in_process
    from humanoid_policy.manifest import load_policy
    from humanoid_policy.policy_core import PolicyCore

    robot = load_robot_config("g1")
    manifest = load_policy(policy, robot)
    # states recorded while walking (same cores, in process), then timed step by step
    log = run_in_process(manifest, robot, [("walk", 4.0, (0.5, 0.0, 0.3))])
    core = PolicyCore(manifest, robot, threads=1)
    n_states = len(log.step_q)
    infer_us, step_us = [], []
    for k in range(steps):
        i = k % n_states
        t0 = time.perf_counter()
        step = core.step(log.step_q[i], log.step_dq[i], log.step_gyro[i], log.step_quat[i], log.step_cmd[i])
        t1 = time.perf_counter()
        core.infer(step.obs)
        t2 = time.perf_counter()
        step_us.append((t1 - t0) * 1e6)
        infer_us.append((t2 - t1) * 1e6)

    log_dir = Path(tempfile.mkdtemp(prefix="humanoid_bench_policy_"))
    isolated_ros_env(log_dir)
    recv_state: dict[float, float] = {}
    latency: list[tuple[float, float]] = []
    lock = threading.Lock()
    probe = GraphProbe(subscribe_description=False, name="bench_policy")

    def on_state(msg: Any) -> None:
        now = time.perf_counter()
        with lock:
            recv_state[msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec] = now

    def on_command(msg: Any) -> None:
        now = time.perf_counter()
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with lock:
            if t in recv_state:
                latency.append((t, (now - recv_state.pop(t)) * 1e6))

    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    probe.node.create_subscription(JointState, "/joint_states", on_state, qos)
    probe.node.create_subscription(JointState, "/joint_commands", on_command, qos)
    graph = LaunchedGraph(
        {
            "controller": "policy",
            "policy": policy,
            "clock": "lockstep",
            "wait_for_subscribers": "2",
            "sim_duration_s": f"{seconds + 3.0}",
        },
        log_dir / "launch_policy.log",
    ).start()
    try:
        if graph.wait(seconds * 30 + 120) is None:
            raise RuntimeError(f"benchmark graph did not finish: {graph.log()[-2000:]}")
    finally:
        close_graph(probe, graph)
    if len(latency) < 100:
        raise RuntimeError(f"too few command answers observed ({len(latency)}); see {log_dir}")
    lat = np.array([v for _, v in latency])
    period = 1.0 / manifest.rate_hz
    on_step = np.array([abs(t / period - round(t / period)) < 1e-3 for t, _ in latency])

    def pct(a: Any, q: float) -> float:
        return round(float(np.percentile(a, q)), 1)

    return {
        "benchmark": "policy",
        "policy": manifest.name,
        "onnx": manifest.onnx_path.name,
        "obs_size": manifest.obs_size,
        "steps": steps,
        "inference_us_median": pct(infer_us, 50),
        "inference_us_p99": pct(infer_us, 99),
        "step_us_median": pct(step_us, 50),
        "step_us_p99": pct(step_us, 99),
        "obs_to_command_us_median": pct(lat, 50),
        "obs_to_command_us_p99": pct(lat, 99),
        "obs_to_command_policy_step_us_median": pct(lat[on_step], 50) if on_step.any() else None,
        "obs_to_command_policy_step_us_p99": pct(lat[on_step], 99) if on_step.any() else None,
        "obs_to_command_samples": len(latency),
        "logs": str(log_dir),
    }


def _wbc_states(n: int, seed: int) -> list[tuple[Any, Any]]:
    """``n`` pinocchio states near the default standing pose (small joint, base and velocity noise)."""
    import numpy as np
    import pinocchio as pin

    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height

    config = load_robot_config("g1")
    pmodel = load_pinocchio_model(config)
    joints = config.array("default")
    q0 = pmodel.neutral_q(joints, standing_base_height(config, pmodel, joints))
    rng = np.random.default_rng(seed)
    nv = pmodel.model.nv
    return [
        (pin.integrate(pmodel.model, q0, rng.normal(scale=0.01, size=nv)), rng.normal(scale=0.05, size=nv))
        for _ in range(n)
    ]


class _TsidTicker:
    """TSID (``InverseDynamicsFormulationAccForce`` + ``SolverHQuadProgFast``) with a task set equivalent to
    ours: CoM, angular momentum, base and torso orientation, posture, joint position/velocity/acceleration
    bounds, 6D contacts with the 4 sole corners and friction pyramids, actuation bounds. :meth:`tick` times
    one state: problem data, solve, accelerations and torques. Raises ImportError when ``tsid`` is absent.

    The robot, its model, the QP settings (weights, gains, limits) and the joint order are those of ``ctl``,
    the controller it is compared with."""

    def __init__(self, ctl: Any, q0: Any, v0: Any) -> None:
        import warnings

        import numpy as np

        with warnings.catch_warnings():  # tsid 1.10 registers a converter pinocchio already has
            warnings.filterwarnings("ignore", "to-Python converter", RuntimeWarning)
            import tsid

        config, pmodel, s = ctl.config, ctl.pmodel, ctl.qp.settings

        def model_order(name: str) -> Any:  # a configuration array in the model's joint order
            return config.array(name)[ctl.qp.to_v_order]

        robot = tsid.RobotWrapper(pmodel.model, False)
        form = tsid.InverseDynamicsFormulationAccForce("wbc", robot, False)
        # the formulation holds raw references: the robot, its tasks and their references must outlive it
        self._keep: list[Any] = [robot]
        form.computeProblemData(0.0, q0, v0)
        data = form.data()
        for side, foot in config.feet.items():
            points = np.array([[x, y, 0.0] for x, y in foot.polygon]).T
            contact = tsid.Contact6d(
                f"contact_{side}",
                robot,
                foot.sole_frame,
                points,
                np.array([0.0, 0.0, 1.0]),
                config.wbc.friction,
                s.f_min,
                s.f_max,
            )
            contact.setKp(np.zeros(6))
            contact.setKd(s.kd_contact * np.ones(6))
            contact.setReference(robot.framePosition(data, pmodel.sole_frame_ids[side]))
            form.addRigidContact(contact, s.reg_force)
            self._keep.append(contact)
        com = tsid.TaskComEquality("com", robot)
        com.setKp(100.0 * np.ones(3))
        com.setKd(20.0 * np.ones(3))
        com_ref = tsid.TrajectoryEuclidianConstant("com_ref", robot.com(data))
        com.setReference(com_ref.computeNext())
        form.addMotionTask(com, s.w_com, 1, 0.0)
        am = tsid.TaskAMEquality("am", robot)
        am.setKp(np.zeros(3))
        am.setKd(s.kd_angular_momentum * np.ones(3))
        am_ref = tsid.TrajectoryEuclidianConstant("am_ref", np.zeros(3))
        am.setReference(am_ref.computeNext())
        form.addMotionTask(am, s.w_angular_momentum, 1, 0.0)
        self._keep += [com, am, com_ref, am_ref]
        for name, frame, kp, kd, w in (
            ("base", config.base_body, s.kp_base, s.kd_base, s.w_base),
            ("torso", config.wbc.torso_frame, s.kp_torso, s.kd_torso, s.w_torso),
        ):
            task = tsid.TaskSE3Equality(name, robot, frame)
            task.setKp(kp * np.ones(6))
            task.setKd(kd * np.ones(6))
            task.setMask(np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]))
            traj = tsid.TrajectorySE3Constant(
                f"{name}_ref", robot.framePosition(data, robot.model().getFrameId(frame))
            )
            task.setReference(traj.computeNext())
            form.addMotionTask(task, w, 1, 0.0)
            self._keep += [task, traj]
        posture = tsid.TaskJointPosture("posture", robot)
        posture.setKp(s.kp_posture * np.ones(robot.na))
        posture.setKd(s.kd_posture * np.ones(robot.na))
        q_ref = tsid.TrajectoryEuclidianConstant("q_ref", model_order("default"))
        posture.setReference(q_ref.computeNext())
        form.addMotionTask(posture, s.w_posture, 1, 0.0)
        limits = tsid.TaskJointPosVelAccBounds("joint_limits", robot, 0.002, False)
        limits.setPositionBounds(model_order("lower"), model_order("upper"))
        limits.setVelocityBounds(model_order("velocity"))
        limits.setAccelerationBounds(s.qdd_max * np.ones(robot.na))
        form.addMotionTask(limits, 1.0, 0, 0.0)
        bounds = tsid.TaskActuationBounds("tau", robot)
        effort = model_order("effort")
        bounds.setBounds(-effort, effort)
        form.addActuationTask(bounds, 1.0, 0, 0.0)
        self._keep += [posture, q_ref, limits, bounds]
        solver = tsid.SolverHQuadProgFast("qp")
        solver.resize(form.nVar, form.nEq, form.nIn)
        self._form, self._solver, self.failed = form, solver, 0

    def tick(self, q: Any, v: Any) -> float:
        t0 = time.perf_counter()
        sol = self._solver.solve(self._form.computeProblemData(0.0, q, v))
        self._form.getAccelerations(sol)
        self._form.getActuatorForces(sol)  # the torques, as our tick recovers them
        dt = time.perf_counter() - t0
        self.failed += int(sol.status != 0)
        return dt


def _wbc_trajectory() -> list[tuple[Any, Any]]:
    """The states a running controller meets: 3 s of closed-loop standing in MuJoCo (in process, ground-truth
    state, 500 Hz) with a 7 N s push to the front at 1 s; both feet stay down."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.controller import StandingController
    from humanoid_control.wbc.sim_loop import Push, run_standing

    class Recorder(StandingController):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.states: list[tuple[Any, Any]] = []

        def step(self, q: Any, v: Any) -> Any:
            self.states.append((q.copy(), v.copy()))
            return super().step(q, v)

    config = load_robot_config("g1")
    recorder = Recorder(config)
    log = run_standing(config, 3.0, push=Push((70.0, 0.0), 1.0, 0.1), controller=recorder)
    if log.fell:
        raise RuntimeError("the recorded standing trajectory fell")
    return recorder.states


def _time_side_by_side(states: list[tuple[Any, Any]], chunk: int = 100) -> dict[str, Any]:
    """Our controller and TSID (if importable) over ``states`` in order, alternating blocks of ``chunk``
    states so that both see the same machine load; our warm starts carry over from tick to tick."""
    import numpy as np

    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.controller import StandingController

    ctl = StandingController(load_robot_config("g1"))
    theirs: _TsidTicker | None = None
    note = "not installed"
    try:
        theirs = _TsidTicker(ctl, *states[0])
    except ImportError:
        pass
    except Exception as exc:  # an installed but broken binding (e.g. ABI mismatch with pinocchio)
        note = f"failed: {exc!r}"
    for q, v in states[:50]:  # warm-up: first setup, caches
        ctl.step(q, v)
        if theirs is not None:
            theirs.tick(q, v)
    steps, ticks, solves, iters, tsid_ticks, ok, full = [], [], [], [], [], 0, 0
    for start in range(0, len(states), chunk):
        block = states[start : start + chunk]
        for q, v in block:
            t0 = time.perf_counter()
            ctl.step(q, v)
            steps.append(time.perf_counter() - t0)
            ticks.append(ctl.qp_tick_s)
            out = ctl.last_output
            assert out is not None
            solves.append(out.solve_time_s)
            iters.append(out.iterations)
            ok += int(out.ok)
            full += int(out.full_problem)
        if theirs is not None:
            tsid_ticks += [theirs.tick(q, v) for q, v in block]
    us, step_us = np.array(ticks) * 1e6, np.array(steps) * 1e6
    result: dict[str, Any] = {
        "qp_variables": ctl.qp.n,
        "qp_constraints": ctl.qp.m,
        "solved_fraction": ok / len(states),
        "full_problem_fraction": full / len(states),
        "solve_us_median": float(np.median(solves) * 1e6),
        "iterations_median": float(np.median(iters)),
        "wbc_tick_us_median": float(np.median(us)),
        "wbc_tick_us_p99": float(np.percentile(us, 99)),
        "controller_step_us_median": float(np.median(step_us)),
        "controller_step_us_p99": float(np.percentile(step_us, 99)),
        "tsid_tick_us_median": None,
        "tsid_tick_us_p99": None,
        "ratio_vs_tsid": None,
        "ratio_controller_step_vs_tsid": None,
    }
    if theirs is None:
        result["tsid"] = note
        return result
    if theirs.failed:
        raise RuntimeError(f"TSID failed to solve {theirs.failed} states")
    from importlib.metadata import PackageNotFoundError, version

    try:
        result["tsid"] = version("tsid")
    except PackageNotFoundError:  # importable, but not installed as a distribution
        result["tsid"] = "installed"
    tsid_us = np.array(tsid_ticks) * 1e6
    result["tsid_tick_us_median"] = float(np.median(tsid_us))
    result["tsid_tick_us_p99"] = float(np.percentile(tsid_us, 99))
    result["ratio_vs_tsid"] = result["wbc_tick_us_median"] / result["tsid_tick_us_median"]
    result["ratio_controller_step_vs_tsid"] = (
        result["controller_step_us_median"] / result["tsid_tick_us_median"]
    )
    return result


WALK_SPEED = 0.3  # m/s, forward: the walking trajectory of humanoid-bench wbc


def _walking_trajectory(seconds: float) -> list[tuple[Any, Any, tuple[bool, ...]]]:
    """The states the walking controller meets: ``seconds`` of closed-loop walking forward at
    :data:`WALK_SPEED` in MuJoCo (in process, ground-truth state, 500 Hz; ``run_walking``), recorded tick by
    tick with the planned contacts of each tick. Raises if the walk fell."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.walking.controller import WalkingController
    from humanoid_control.walking.sim_loop import run_walking

    class Recorder(WalkingController):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.states: list[tuple[Any, Any, tuple[bool, ...]]] = []

        def step(self, q: Any, v: Any) -> Any:
            q, v = q.copy(), v.copy()
            out = super().step(q, v)
            self.states.append((q, v, tuple(self.contacts.values())))
            return out

    config = load_robot_config("g1")
    recorder = Recorder(config)
    log = run_walking(config, seconds, lambda t: (WALK_SPEED, 0.0, 0.0), controller=recorder)
    if log.fell:
        raise RuntimeError("the recorded walking trajectory fell")
    return recorder.states


def _time_walking(
    states: list[tuple[Any, Any, tuple[bool, ...]]], standing: list[tuple[Any, Any]] | None = None
) -> dict[str, Any]:
    """The walking controller replayed on the recorded states, in order, with the command of the recording:
    it makes the same decisions tick by tick (plans, contact switches, swing references), so each tick's
    whole-body QP is the one the running controller solved. Timed per tick: the QP tick (``qp_tick_s``:
    rigid-body terms, assembly, solve, torques) and the whole controller step (with the ZMP preview
    re-solves every 20 ms and the footstep re-plans), split by single and double support. The QP tick's calls
    are also timed in this thread's CPU time (``..._cpu_us_median``: without the waits for a core of a
    machine shared with other work). With ``standing`` (the recorded standing trajectory) a standing
    controller replays it tick for tick in turn with the walk, so both see the same load: their ratio
    (``walking_single_support_vs_standing_tick``) moves less with the load than the absolute figures.
    Raises if the replay's contacts differ from the recording's (it would not be the recorded walk)."""
    import numpy as np

    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.walking.controller import WalkingController
    from humanoid_control.wbc.controller import StandingController

    ctl = WalkingController(load_robot_config("g1"))
    # the CPU time (this thread's) of the same calls as the QP tick: rigid-body terms and solve
    cpu_s = [0.0]

    def cpu_timed(call: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            c0 = time.thread_time()
            out = call(*args, **kwargs)
            cpu_s[0] += time.thread_time() - c0
            return out

        return timed

    for name in ("update_dynamics", "solve"):
        setattr(ctl.qp, name, cpu_timed(getattr(ctl.qp, name)))
    stand = StandingController(load_robot_config("g1")) if standing else None
    stand_ticks: list[float] = []
    ticks, cpu, steps, single, solves, iters, ok, full = [], [], [], [], [], [], 0, 0
    for k, (q, v, contacts) in enumerate(states):
        ctl.set_command(WALK_SPEED, 0.0, 0.0)
        cpu_s[0] = 0.0
        t0 = time.perf_counter()
        ctl.step(q, v)
        steps.append(time.perf_counter() - t0)
        ticks.append(ctl.qp_tick_s)
        cpu.append(cpu_s[0])
        if stand is not None and standing:
            stand.step(*standing[k % len(standing)])
            stand_ticks.append(stand.qp_tick_s)
        if tuple(ctl.contacts.values()) != contacts:
            raise RuntimeError(f"the replay left the recorded walk at tick {k}")
        single.append(sum(contacts) == 1)
        out = ctl.last_output
        assert out is not None
        ok += int(out.ok)
        full += int(out.full_problem)
        solves.append(out.solve_time_s)
        iters.append(out.iterations)
    us, step_us, ss = np.array(ticks) * 1e6, np.array(steps) * 1e6, np.array(single)
    cpu_us = np.array(cpu) * 1e6
    solve_us, iters_arr = np.array(solves) * 1e6, np.array(iters)
    if not ss.any():
        raise RuntimeError("the walking trajectory has no single support")
    result: dict[str, Any] = {
        "walking_speed_mps": WALK_SPEED,
        "walking_states": len(states),
        "walking_single_support_states": int(ss.sum()),
        "walking_solved_fraction": ok / len(states),
        "walking_single_support_wbc_tick_us_median": float(np.median(us[ss])),
        "walking_single_support_wbc_tick_us_p99": float(np.percentile(us[ss], 99)),
        "walking_single_support_wbc_tick_cpu_us_median": float(np.median(cpu_us[ss])),
        "walking_single_support_solve_us_median": float(np.median(solve_us[ss])),
        "walking_single_support_iterations_median": float(np.median(iters_arr[ss])),
        "walking_full_problem_fraction": full / len(states),
        "walking_double_support_wbc_tick_us_median": float(np.median(us[~ss])) if (~ss).any() else None,
        "walking_wbc_tick_us_median": float(np.median(us)),
        "walking_wbc_tick_us_p99": float(np.percentile(us, 99)),
        "walking_controller_step_us_median": float(np.median(step_us)),
        "walking_controller_step_us_p99": float(np.percentile(step_us, 99)),
        "goal_walking_single_support_wbc_tick_us_median": 400.0,
        "walking_interleaved_standing_tick_us_median": None,
        "walking_single_support_vs_standing_tick": None,
    }
    if stand_ticks:
        st_us = float(np.median(stand_ticks) * 1e6)
        result["walking_interleaved_standing_tick_us_median"] = st_us
        result["walking_single_support_vs_standing_tick"] = (
            result["walking_single_support_wbc_tick_us_median"] / st_us
        )
    return result


def bench_wbc(n_states: int, seed: int, walking_seconds: float = 4.0) -> dict[str, Any]:
    """WBC tick time over ``n_states`` perturbed standing states, over a recorded closed-loop standing
    trajectory and over ``walking_seconds`` of recorded walking (see module docstring); TSID side by side
    (standing) if installed."""
    result: dict[str, Any] = {"states": n_states, **_time_side_by_side(_wbc_states(n_states, seed))}
    trajectory = _wbc_trajectory()
    traj = _time_side_by_side(trajectory)
    result["trajectory_states"] = len(trajectory)
    for key in (
        "wbc_tick_us_median",
        "wbc_tick_us_p99",
        "iterations_median",
        "solve_us_median",
        "full_problem_fraction",
        "tsid_tick_us_median",
        "ratio_vs_tsid",
    ):
        result[f"trajectory_{key}"] = traj[key]
    result.update(_time_walking(_walking_trajectory(walking_seconds), trajectory))
    return result


def bench_estimator(seconds: float, seed: int) -> dict[str, Any]:
    """Estimator update time per tick (IMU propagation + leg kinematics, contacts, slip + estimate), in
    process, over a recorded walk of the G1 (holosoma fastsac, MEMS IMU noise, in-process MuJoCo)."""
    import time

    import numpy as np

    from humanoid_bringup.evaluation.estimator_eval import ESTIMATOR_SCRIPT
    from humanoid_control.estimation.ekf import EstimatorNoise
    from humanoid_control.estimation.estimator import StateEstimator
    from humanoid_control.hardware.mujoco_sim import ImuNoise
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_policy.inprocess import run_in_process
    from humanoid_policy.manifest import load_policy

    config = load_robot_config("g1")
    script, left = [], seconds
    for name, duration, cmd in ESTIMATOR_SCRIPT:  # the evaluation's script, cut to ``seconds``
        if left <= 0:
            break
        script.append((name, min(duration, left), cmd))
        left -= duration
    noise = ImuNoise(
        gyro_noise_std=0.004,
        gyro_bias_std=0.005,
        gyro_bias_walk=1e-4,
        accel_noise_std=0.03,
        accel_bias_std=0.05,
        accel_bias_walk=1e-3,
        seed=seed,
    )
    log = run_in_process(
        load_policy("holosoma/g1_fastsac", config), config, script, imu_noise=noise, record_sensors=True
    )
    est = StateEstimator(config, EstimatorNoise(ground_height=0.01))
    n = len(log.t)
    predict_us, correct_us, tick_us = np.zeros(n), np.zeros(n), np.zeros(n)
    clock = time.perf_counter
    for k in range(n):
        t0 = clock()
        if k == 0:
            est.initialize(log.t[0], log.imu_quat[0], log.joint_q[0])
        else:
            est.predict(log.t[k], log.imu_gyro[k], log.imu_accel[k])
        t1 = clock()
        est.correct(log.joint_q[k], log.joint_tau[k], log.joint_dq[k], log.imu_gyro[k])
        est.estimate(log.t[k], log.imu_gyro[k])
        t2 = clock()
        predict_us[k], correct_us[k], tick_us[k] = (t1 - t0) * 1e6, (t2 - t1) * 1e6, (t2 - t0) * 1e6
    tick_us, predict_us, correct_us = tick_us[1:], predict_us[1:], correct_us[1:]
    return {
        "benchmark": "estimator",
        "ticks": int(tick_us.size),
        "update_us_median": float(np.median(tick_us)),
        "update_us_p99": float(np.percentile(tick_us, 99)),
        "predict_us_median": float(np.median(predict_us)),
        "correct_us_median": float(np.median(correct_us)),
        "goal_update_us_median": 100.0,
    }


def bench_perception(frames: int) -> dict[str, Any]:
    """Render, detection and height-map times per frame (ms; see the module docstring)."""
    import mujoco
    import numpy as np

    from humanoid_bringup.evaluation.perception_eval import SHOWCASE, standing_data
    from humanoid_control.hardware.scene import MarkerSpec, SceneSpec, load_scene
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_perception.camera import SimCamera, load_camera_model
    from humanoid_perception.heightmap import build_heightmap, depth_to_points, transform_points
    from humanoid_perception.markers import MarkerDetector, MarkerDetectorConfig

    def stats(ms: list[float]) -> dict[str, float]:
        return {"median": round(float(np.median(ms)), 2), "p95": round(float(np.percentile(ms, 95)), 2)}

    config = load_robot_config("g1")
    base = load_scene("markers")
    extra = tuple(
        MarkerSpec("DICT_APRILTAG_36h11", 10 + i, 0.25, (x, y, 0.0), (0.0, 0.0, np.radians(yaw)))
        for i, (x, y, yaw) in enumerate(SHOWCASE)
    )
    scene = SceneSpec("bench", markers=extra, boxes=base.boxes)
    mj, cam = load_camera_model(config, scene)
    data = standing_data(config, mj)
    detector = MarkerDetector()
    corner_search = MarkerDetector(MarkerDetectorConfig(corner_refinement="subpix"))
    result: dict[str, Any] = {
        "frames": frames,
        "mujoco_gl": os.environ.get("MUJOCO_GL", ""),
        "markers_in_view": 0,
    }
    for name in ("render_rgb", "render_depth", "detect", "detect_subpix", "heightmap"):
        result[f"{name}_ms"], result[f"{name}_cpu_ms"] = {}, {}
    for width, height in ((640, 480), (424, 240)):
        size = f"{width}x{height}"
        with SimCamera(mj.model, data, cam, width, height) as camera:
            k = camera.intrinsics()
            p, rot = camera.optical_pose(data)
            camera.render_rgb(data), camera.render_depth(data)  # warm-up: context, textures
            names = ("render_rgb", "render_depth", "detect", "detect_subpix", "heightmap")
            wall: dict[str, list[float]] = {name: [] for name in names}
            cpu: dict[str, list[float]] = {name: [] for name in names}

            def timed(
                name: str, t0: float, c0: float, wall: dict = wall, cpu: dict = cpu
            ) -> tuple[float, float]:
                t1, c1 = time.perf_counter(), time.process_time()
                wall[name].append(1e3 * (t1 - t0))
                cpu[name].append(1e3 * (c1 - c0))
                return t1, c1

            for _ in range(frames):
                mujoco.mj_forward(mj.model, data)
                t, c = time.perf_counter(), time.process_time()
                rgb = camera.render_rgb(data)
                t, c = timed("render_rgb", t, c)
                depth = camera.render_depth(data)
                t, c = timed("render_depth", t, c)
                observations = detector.detect(rgb, k)
                t, c = timed("detect", t, c)
                corner_search.detect(rgb, k)
                t, c = timed("detect_subpix", t, c)
                build_heightmap(transform_points(depth_to_points(depth, k), rot, p), (0.0, 0.0))
                timed("heightmap", t, c)
            if size == "640x480":
                result["markers_in_view"] = len(observations)
            for name in names:
                result[f"{name}_ms"][size] = stats(wall[name])
                result[f"{name}_cpu_ms"][size] = stats(cpu[name])
    return result


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
    pol.add_argument("--policy", default="holosoma/g1_ppo", help="policy name or manifest/ONNX path")
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
    args = parser.parse_args(argv)
    if args.benchmark == "perception":
        if args.frames < 1:
            parser.error("--frames must be >= 1")
        if args.rtf_seconds < 0:
            parser.error("--rtf-seconds must be >= 0")
        result = bench_perception(args.frames)
        if args.rtf_seconds > 0:
            from humanoid_bringup.evaluation.camera_rtf import camera_rtf

            result.update(camera_rtf(seconds=args.rtf_seconds, rate_hz=args.camera_rate))
        print(json.dumps(result))
        return 0
    if args.benchmark == "estimator":
        result = bench_estimator(args.seconds, args.seed)
    elif args.benchmark == "mpc":
        from humanoid_bringup.evaluation.mpc_bench import bench_mpc

        result = bench_mpc(args.plan, args.rate, args.repeats, args.block, args.placo_python, args.cpu)
    elif args.benchmark == "wbc":
        result = bench_wbc(args.states, args.seed, args.walking_seconds)
    elif args.benchmark == "driver":
        if args.hardware != "mujoco":
            seconds = 30.0 if args.seconds is None else args.seconds
            result = bench_driver_hardware(args.hardware, seconds, args.rate, args.lockstep_seconds)
        elif args.lockstep:
            seconds = 30.0 if args.seconds is None else args.seconds
            result = bench_driver(seconds, args.rate, args.lockstep_seconds)
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
                )
            except ValueError as exc:
                parser.error(str(exc))
    else:
        result = bench_policy(args.policy, args.steps, args.seconds)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
