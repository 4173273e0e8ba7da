"""``humanoid-bench driver``: the real-time loop in realtime, per scenario, beside a bare-loop baseline
measured in the same run (docs/realtime.md).

Scenarios (``--scenarios``, default all; ``--seconds`` each, default 60):

- ``hold``: the driver holding (no controller);
- ``joint_hold``: the joint hold controller in the driver's loop (``in_loop:=true``);
- ``policy``: the learned policy in the driver's loop, walking the evaluation script (``/cmd_vel`` from this
  process, the script repeated);
- ``wbc_stand``: the whole-body controller standing in the driver's loop with the state estimator's node
  beside it; ``wbc_stand_external`` (not in the default list): the WBC and the estimator in processes apart;
- ``joint_hold_1khz``: ``joint_hold`` at 1 kHz (physics step 1 ms);
- ``supervised`` (not in the default list): the supervised controller in the driver's loop (the policy walking
  the script as in ``policy``, the viability monitor on the in-loop state estimator every tick); its baseline
  does the same work (the estimator, the policy, the monitor) in the bare loop.

Each scenario's ROS run is the launch file's graph in its own processes, measured by the driver's own
``/diagnostics`` (whole run): ``overruns_pct``, ``lateness_us_p99`` (wake-up lateness against the absolute
deadlines), ``lateness_us_max``, ``max_gap_us``, the in-loop controller's ``controller_us_p99`` and
``controller_overruns`` (steps longer than half a period), and for the policy and the WBC
``state_to_command_us_p99`` (a state going out -> the command answering it applied by the loop). Its baseline
(``baseline_overruns_pct``, ``baseline_lateness_us_p99``, ``baseline_work_us_p99``,
``baseline_controller_overruns``, ...) is a bare deadline loop in a process of its own with the same work per
tick and no ROS: MuJoCo step, the driver core, and the controller's core (for the WBC, the estimator's core
and the QP, as in the loop), with the real-time settings the driver was granted.

``record`` (``humanoid-bench driver --record``): each scenario's ROS run is recorded (launch ``record:=``,
every topic, a bag per scenario in the logs folder) and its keys gain the recorder's cost:
``recorder_cpu_pct`` (the recorder process's CPU time over its wall time, %, 100 = one core; from the bag's
``metadata.yaml``, else its last ``/recorder/status``), ``record_messages``, ``record_duration_s`` (the
bag's span of log time, s), ``record_bytes``, ``record_bag``. The recorder subscribes to the ground truth
and contact wrenches too, which the driver then computes every tick: that is part of what recording costs
the loop.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: scenario -> launch arguments and the baseline's work per tick
SCENARIOS: dict[str, dict[str, Any]] = {
    "hold": {"controller": "none", "in_loop": False, "rate": 500.0, "work": "hold"},
    "joint_hold": {"controller": "joint_hold", "in_loop": True, "rate": 500.0, "work": "joint_hold"},
    "policy": {"controller": "policy", "in_loop": True, "rate": 500.0, "work": "policy"},
    "wbc_stand": {"controller": "wbc_stand", "in_loop": True, "rate": 500.0, "work": "wbc"},
    "wbc_stand_external": {"controller": "wbc_stand", "in_loop": False, "rate": 500.0, "work": "wbc"},
    "supervised": {"controller": "supervised", "in_loop": True, "rate": 500.0, "work": "supervised"},
    "joint_hold_1khz": {
        "controller": "joint_hold",
        "in_loop": True,
        "rate": 1000.0,
        "physics": 0.001,
        "work": "joint_hold",
    },
}

_KEYS = (
    "rate_hz",
    "overruns",
    "overruns_pct",
    "ticks",
    "lateness_us_p50",
    "lateness_us_p99",
    "lateness_us_p999",
    "lateness_us_max",
    "max_gap_us",
    "controller_us_median",
    "controller_us_p99",
    "controller_us_max",
    "controller_overruns",
    "state_to_command_us_p50",
    "state_to_command_us_p99",
    "state_to_command_us_max",
    "state_to_command_samples",
    "rt_thread_priority",
    "rt_process_priority",
    "rt_refused",
    "tooling_published",
    "tooling_deferred",
    "tooling_superseded",
    "tooling_truth_dropped",
)


def _num(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


# ----------------------------------------------------------------------------------------------- baseline
def baseline_loop(
    work: str,
    rate: float,
    seconds: float,
    physics: float = 0.0,
    thread_priority: int = 0,
    process_priority: int = 0,
    gc_in_slack: bool = True,
    spin_margin_s: float = 100e-6,
    physics_thread: bool = True,
    robot: str = "g1",
) -> dict[str, Any]:
    """A bare deadline loop, no ROS: per tick the driver's work (MuJoCo read/step, driver core) and the
    controller's core for ``work`` (hold | joint_hold | policy | wbc: estimator core + QP | supervised:
    estimator core + policy + monitor); returns its loop
    statistics. ``physics_thread``: the physics steps on the backend's thread from the command write to the
    next read, as in the driver's realtime loop (its ``physics_thread`` parameter, default true). ``robot``:
    the configuration (``config/robots/<robot>.yaml``); the policy work runs :func:`.bench_policy_name`'s."""
    import numpy as np

    from humanoid_control.controllers.host import ControllerHost
    from humanoid_control.controllers.interface import ControllerState
    from humanoid_control.controllers.joint_hold import JointHoldController
    from humanoid_control.driver.driver_core import DriverCore, DriverMode, DriverSettings, JointCommand
    from humanoid_control.driver.in_loop import checked_command
    from humanoid_control.hardware.mujoco_sim import MujocoBackend, tilt_from_quat
    from humanoid_control.loop.realtime import (
        RealtimeSettings,
        SlackCollector,
        apply_to_loop_thread,
        sleep_until,
    )
    from humanoid_control.loop.stats import LoopStats
    from humanoid_control.model.robot_config import load_robot_config

    config = load_robot_config(robot)
    if physics > 0:
        config = dataclasses.replace(
            config, simulation=dataclasses.replace(config.simulation, timestep=physics)
        )
    backend = MujocoBackend(config)
    core = DriverCore(config, DriverSettings(rate_hz=rate))
    period = 1.0 / rate
    step: Any = None
    if work == "joint_hold":
        hold = ControllerHost(JointHoldController(), config)  # as the driver's loop hosts it

        def step(t: float, s: Any) -> JointCommand | None:
            return hold.step(
                ControllerState(
                    stamp=t, q=s.q, dq=s.dq, imu_quat=s.imu_quat, gyro=s.gyro, driver_mode=core.mode.value
                )
            )

    elif work == "policy":
        from humanoid_bringup.evaluation.policy_bench import bench_policy_name
        from humanoid_policy.manifest import load_policy
        from humanoid_policy.policy_core import PolicyCore
        from humanoid_policy.runner import ImuSample, PolicyRunner

        manifest = load_policy(bench_policy_name("", config), config)
        pcore = PolicyCore(manifest, config, threads=1)
        runner = PolicyRunner(pcore)
        core.set_command_gains(pcore.kp, pcore.kd, name="policy")
        runner.gains_ready = True

        def step(t: float, s: Any) -> JointCommand | None:
            runner.set_command(np.array([0.5, 0.0, 0.0]), t)
            runner.set_imu(ImuSample(t, s.imu_quat, s.gyro))
            out = runner.update(t, s.q, s.dq, core.mode.value)
            return None if out.q_target is None else checked_command(len(s.q), t, out.q_target)

    elif work == "wbc":  # as in the loop: the estimator's prediction, the QP on it, then its kinematic update
        from humanoid_control.estimation.ekf import EstimatorNoise
        from humanoid_control.estimation.estimator import StateEstimator
        from humanoid_control.estimation.state_estimator_node import _rot_to_quat_wxyz
        from humanoid_control.wbc.controller import StandingController
        from humanoid_control.wbc.dynamics import pinocchio_state

        ctl = StandingController(config)
        est = StateEstimator(config, EstimatorNoise(ground_height=0.01))

        def step(t: float, s: Any) -> JointCommand | None:
            e = _estimate(est, t, s, after_write)
            w, x, y, z = _rot_to_quat_wxyz(e.rotation)
            quat_xyzw = np.array([x, y, z, w])
            q, v = pinocchio_state(
                ctl.pmodel, e.position, quat_xyzw, e.linear_velocity, e.angular_velocity, s.q, s.dq
            )
            cmd = ctl.step(q, v)
            return JointCommand(q=cmd.q, dq=cmd.dq, tau_ff=cmd.tau_ff, stamp=t)

    elif work == "supervised":  # as in the loop: the estimator, then the supervisor (policy + monitor)
        from humanoid_bringup.evaluation.policy_bench import bench_policy_name
        from humanoid_control.estimation.ekf import EstimatorNoise
        from humanoid_control.estimation.estimator import StateEstimator
        from humanoid_policy.supervised import SupervisedController

        sup = ControllerHost(SupervisedController(), config, {"policy": bench_policy_name("", config)})
        kp, kd = sup.controller.gains()
        core.set_command_gains(kp, kd, name="supervised")
        sest = StateEstimator(config, EstimatorNoise(ground_height=0.01))
        walk = np.array([0.5, 0.0, 0.0])

        def step(t: float, s: Any) -> JointCommand | None:
            state = ControllerState(
                stamp=t,
                q=s.q,
                dq=s.dq,
                imu_quat=s.imu_quat,
                gyro=s.gyro,
                driver_mode=core.mode.value,
                accel=s.accel,
                tau=s.tau,
                estimate=_estimate(sest, t, s, after_write),
                cmd_vel=walk,
                cmd_vel_stamp=round(t * 20.0) / 20.0,  # /cmd_vel at 20 Hz
            )
            return sup.step(state)

    elif work != "hold":
        raise ValueError(f"work must be hold, joint_hold, policy, wbc or supervised, not {work!r}")

    stats = LoopStats(rate)
    result: dict[str, Any] = {}
    after_write: list[Any] = []  # the tick's work that follows the command (the estimator's update)

    def loop() -> None:
        applied = apply_to_loop_thread(
            RealtimeSettings(
                thread_priority=thread_priority, process_priority=process_priority, gc_in_slack=gc_in_slack
            )
        )
        collector = SlackCollector(min(0.0008, 0.4 * period)) if applied.gc_in_slack else None
        n = round(seconds * rate)
        deadline = time.perf_counter()
        for _ in range(n):
            lateness = sleep_until(deadline, spin_margin_s)
            stats.record_wake(lateness)
            s = backend.read()
            if step is not None:
                t0 = time.perf_counter()
                cmd = step(s.stamp, s)
                stats.record_controller(time.perf_counter() - t0)
                if cmd is not None and core.mode in (DriverMode.HOLD, DriverMode.ACTIVE):
                    core.submit(cmd)
            backend.write(core.update(s.q, s.dq, tilt_from_quat(s.imu_quat)))
            if physics_thread:  # as the driver does in realtime: the physics beside the rest of the tick
                backend.start_advance(period)
            while after_write:
                after_write.pop()()
            if not physics_thread:
                backend.advance(period)
            deadline += period
            done = time.perf_counter()
            if done > deadline:
                stats.record_overrun()
                if done > deadline + period:
                    deadline = done
            if collector is not None:
                collector.maybe_collect(deadline)
        result.update(
            thread_priority=applied.thread_priority,
            refused="; ".join(applied.warnings),
            final_mode=core.mode.value,
        )

    thread = threading.Thread(target=loop, name="baseline_loop")
    thread.start()
    thread.join()
    backend.close()
    summary = stats.summary()
    return {
        "baseline_overruns_pct": summary["overruns_pct"],
        "baseline_overruns": summary["overruns"],
        "baseline_ticks": summary["ticks"],
        "baseline_lateness_us_p50": summary["lateness_us_p50"],
        "baseline_lateness_us_p99": summary["lateness_us_p99"],
        "baseline_lateness_us_max": summary["lateness_us_max"],
        "baseline_max_gap_us": summary["max_gap_us"],
        "baseline_work_us_median": summary["controller_us_median"],
        "baseline_work_us_p99": summary["controller_us_p99"],
        "baseline_work_us_max": summary["controller_us_max"],
        "baseline_controller_overruns": summary["controller_overruns"],
        "baseline_thread_priority": result.get("thread_priority"),
        "baseline_final_mode": result.get("final_mode"),
        "baseline_refused": result.get("refused", ""),
    }


def _estimate(est: Any, t: float, s: Any, after_write: list[Any]) -> Any:
    """The estimator's work of one tick as in the driver's loop: its prediction now, its kinematic update
    queued for after the command's write (``after_write``; the first tick initializes it); the estimate."""
    if est.initialized:
        est.predict(t, s.gyro, s.accel)
        after_write.append(lambda: est.correct(s.q, s.tau, s.dq, s.gyro))
    else:
        est.initialize(t, s.imu_quat, s.q)
        est.correct(s.q, s.tau, s.dq, s.gyro)
    return est.estimate(t, s.gyro)


def _run_baseline(
    spec: dict[str, Any],
    seconds: float,
    priorities: tuple[int, int],
    physics_thread: bool = True,
    robot: str = "g1",
) -> dict[str, Any]:
    args = {
        "robot": robot,
        "physics_thread": physics_thread,
        "work": spec["work"],
        "rate": spec["rate"],
        "seconds": seconds,
        "physics": spec.get("physics", 0.0),
        "thread_priority": priorities[0],
        "process_priority": priorities[1],
    }
    out = subprocess.run(
        [sys.executable, "-m", "humanoid_bringup.evaluation.rt_bench", json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=seconds * 3 + 120,
    )
    if out.returncode != 0:
        raise RuntimeError(f"baseline loop failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------- ROS run
class _Observer:
    """This process's node: the driver's diagnostics; for the policy, ``/cmd_vel`` playing the script."""

    def __init__(self, walk: bool, record: bool = False) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import Twist
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("rt_bench", context=self.context)
        self.lock = threading.Lock()
        self.diag: dict[str, str] = {}
        self.runner_state = ""
        self.run_since: float | None = None
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 10)
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.node.create_subscription(String, "/policy_runner/state", self._on_state, latched)
        self.recorder_status: dict[str, Any] = {}
        if record:
            self.node.create_subscription(String, "/recorder/status", self._on_recorder, latched)
        self.walk = walk
        self.pub = self.node.create_publisher(Twist, "/cmd_vel", 10) if walk else None
        self._twist = Twist
        if walk:
            self.node.create_timer(0.05, self._publish_cmd)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        with contextlib.suppress(Exception):  # shutdown
            self.executor.spin()

    def _on_diag(self, msg: Any) -> None:
        for status in msg.status:
            if status.name == "robot_driver: loop":
                with self.lock:
                    self.diag = {kv.key: kv.value for kv in status.values}

    def _on_state(self, msg: Any) -> None:
        with self.lock:
            self.runner_state = msg.data
            if msg.data == "run" and self.run_since is None:
                self.run_since = time.monotonic()

    def _on_recorder(self, msg: Any) -> None:
        with self.lock:
            self.recorder_status = json.loads(msg.data)

    def _publish_cmd(self) -> None:
        from humanoid_bringup.evaluation.locomotion_scripts import LOCOMOTION_SCRIPT
        from humanoid_policy.inprocess import command_at

        with self.lock:
            since = self.run_since
        cmd = (0.0, 0.0, 0.0)
        if since is not None:
            total = sum(d for _, d, _ in LOCOMOTION_SCRIPT)
            cmd = command_at(LOCOMOTION_SCRIPT, (time.monotonic() - since) % total)
        tw = self._twist()
        tw.linear.x, tw.linear.y, tw.angular.z = (float(v) for v in cmd)
        assert self.pub is not None
        self.pub.publish(tw)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def run_scenario(
    name: str,
    seconds: float,
    log_dir: Path,
    thread_priority: int = 50,
    process_priority: int = 40,
    physics_thread: bool = True,
    callbacks_in_slack: bool = True,
    publish_rate_hz: float = 0.0,
    record: bool = False,
    robot: str = "g1",
) -> dict[str, Any]:
    """One scenario: the ROS run (the driver's ``thread_priority``, ``process_priority`` and
    ``physics_thread`` as given; ``record``: recorded, module docstring), then its bare-loop baseline with the
    priorities the driver was granted and the same ``physics_thread``. ``robot``: launched with ``robot:=``
    (the policy scenario with :func:`.bench_policy_name`'s policy), the baseline on the same robot."""
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph
    from humanoid_bringup.evaluation.policy_bench import bench_policy_name
    from humanoid_control.model.robot_config import load_robot_config

    spec = SCENARIOS[name]
    args = {
        "robot": robot,
        "clock": "realtime",
        "controller": spec["controller"],
        "in_loop": "true" if spec["in_loop"] else "false",
        "rate_hz": f"{spec['rate']}",
        "sim_duration_s": f"{seconds}",
        # the real-time settings in every scenario (auto would give the hold and the WBC a normal thread)
        "thread_priority": f"{thread_priority}",
        "process_priority": f"{process_priority}",
        "physics_thread": "true" if physics_thread else "false",
        "callbacks_in_slack": "true" if callbacks_in_slack else "false",
        "publish_rate_hz": f"{publish_rate_hz}",
    }
    if spec["controller"] == "policy":
        args["policy"] = bench_policy_name("", load_robot_config(robot))
    elif spec["controller"] == "supervised":
        args["controller_parameters"] = f"policy={bench_policy_name('', load_robot_config(robot))}"
    if "physics" in spec:
        args["physics_timestep_s"] = f"{spec['physics']}"
    bag = log_dir / f"bag_{name}"
    if record:
        args["record"] = str(bag)
    observer = _Observer(walk=spec["work"] in ("policy", "supervised"), record=record)
    graph = LaunchedGraph(args, log_dir / f"launch_{name}.log").start()
    try:
        code = graph.wait(seconds * 3 + 120)
        if code is None:
            raise RuntimeError(f"{name}: the graph did not finish: {graph.log()[-2000:]}")
        if code != 0:
            raise RuntimeError(f"{name}: the graph failed ({code}): {graph.log()[-2000:]}")
        time.sleep(0.5)
        with observer.lock:
            diag = dict(observer.diag)
            recorder_status = dict(observer.recorder_status)
    finally:
        observer.close()
        graph.stop()
    if not diag:
        raise RuntimeError(f"{name}: no /diagnostics from the driver; see {log_dir}")
    out: dict[str, Any] = {k: _num(diag[k]) for k in _KEYS if k in diag}
    out["final_mode"] = diag.get("mode")
    out["in_loop_controller"] = diag.get("in_loop_controller")
    out["target_rate_hz"] = spec["rate"]
    priorities = (int(out.get("rt_thread_priority", 0)), int(out.get("rt_process_priority", 0)))
    out.update(_run_baseline(spec, seconds, priorities, physics_thread, robot))
    out["physics_thread"] = physics_thread
    out["callbacks_in_slack"] = callbacks_in_slack
    out["publish_rate_hz"] = publish_rate_hz
    out["record"] = record
    if record:
        out.update(recorder_cost(bag, recorder_status))
    return out


def recorder_cost(bag: Path, status: dict[str, Any]) -> dict[str, Any]:
    """The recorder's figures for a recorded run (module docstring): from the bag's ``metadata.yaml`` (written
    when the recorder closed it), else from its last status (a recorder that did not close its bag)."""
    import yaml

    out: dict[str, Any] = {"record_bag": str(bag), "record_complete": False}
    with contextlib.suppress(OSError):
        out["record_bytes"] = sum(p.stat().st_size for p in bag.iterdir() if p.is_file())
    try:
        meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        out["recorder_cpu_pct"] = float(meta["custom_data"]["recorder_cpu_pct"])
        out["record_messages"] = int(meta["message_count"])
        out["record_duration_s"] = round(int(meta["duration"]["nanoseconds"]) * 1e-9, 3)
        out["record_complete"] = True
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError):
        out["recorder_cpu_pct"] = status.get("recorder_cpu_pct")
        out["record_messages"] = status.get("messages")
    return out


def bench_driver_scenarios(
    seconds: float,
    scenarios: list[str],
    thread_priority: int = 50,
    process_priority: int = 40,
    physics_thread: bool = True,
    callbacks_in_slack: bool = True,
    publish_rate_hz: float = 0.0,
    record: bool = False,
    robot: str = "g1",
) -> dict[str, Any]:
    """Every scenario in turn (see module docstring); the JSON object of ``humanoid-bench driver``.
    ``robot``: the configuration every run uses (``config/robots/<robot>.yaml``)."""
    from humanoid_bringup.evaluation.launched_graph import isolated_ros_env

    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenarios {unknown}; choose from {', '.join(SCENARIOS)}")
    log_dir = Path(tempfile.mkdtemp(prefix="humanoid_bench_driver_"))
    isolated_ros_env(log_dir)
    load0 = os.getloadavg()
    results = {
        name: run_scenario(
            name,
            seconds,
            log_dir,
            thread_priority,
            process_priority,
            physics_thread,
            callbacks_in_slack,
            publish_rate_hz,
            record,
            robot,
        )
        for name in scenarios
    }
    return {
        "benchmark": "driver",
        "robot": robot,
        "hardware": "mujoco",
        "seconds": seconds,
        "thread_priority": thread_priority,
        "process_priority": process_priority,
        "physics_thread": physics_thread,
        "callbacks_in_slack": callbacks_in_slack,
        "publish_rate_hz": publish_rate_hz,
        "record": record,
        "load_average_start": [round(v, 2) for v in load0],
        "load_average_end": [round(v, 2) for v in os.getloadavg()],
        "cpus": os.cpu_count(),
        "scenarios": results,
        "logs": str(log_dir),
    }


def main(argv: list[str] | None = None) -> int:
    """Baseline subprocess entry: one JSON argument (see :func:`_run_baseline`); prints one JSON line."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="rt_bench", description="bare-loop baseline (internal)")
    parser.add_argument("spec", help="JSON: work, rate, seconds, physics, thread_priority, process_priority")
    spec = json.loads(parser.parse_args(argv).spec)
    print(json.dumps(baseline_loop(**spec)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
