"""Run and observe a ROS graph from Python: launch a launch file in its own processes and probe it.

Used by the demo, the benchmarks and the integration tests. :func:`isolated_ros_env` gives a private ROS graph
(random ``ROS_DOMAIN_ID``, localhost discovery, logs in a folder); :class:`LaunchedGraph` runs
``humanoid-launch`` on a launch file in a subprocess; :class:`GraphProbe` is an rclpy node in its own context,
spun in a background thread, that records the driver's topics and can act as a controller.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent


def default_launch_file() -> Path:
    """``launch/sim.launch.yaml`` of this package (source tree or installed share folder)."""
    from humanoid_bringup.launch_runner import find_launch_file

    return find_launch_file("humanoid_stack", "sim.launch.yaml")


def isolated_ros_env(log_dir: str | Path, domain_id: int | None = None) -> dict[str, str]:
    """Set (in ``os.environ``) and return the variables that isolate a ROS graph on this machine."""
    env = {
        "ROS_DOMAIN_ID": str(domain_id if domain_id is not None else random.SystemRandom().randint(1, 100)),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_LOG_DIR": str(log_dir),
        "PYTHONUNBUFFERED": "1",
    }
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    os.environ.update(env)
    return env


class LaunchedGraph:
    """``humanoid-launch FILE name:=value ...`` in a subprocess; output to ``log_path``."""

    def __init__(
        self, arguments: dict[str, str], log_path: str | Path, launch_file: str | Path | None = None
    ):
        self.launch_file = Path(launch_file) if launch_file else default_launch_file()
        self.arguments = arguments
        self.log_path = Path(log_path)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> LaunchedGraph:
        """Start the launch runner."""
        script = Path(sys.executable).parent / "humanoid-launch"  # the console script, where installed
        runner = (
            [str(script)] if script.exists() else [sys.executable, "-m", "humanoid_bringup.launch_runner"]
        )
        cmd = [*runner, str(self.launch_file)]
        cmd += [f"{k}:={v}" for k, v in self.arguments.items()]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
        return self

    def running(self) -> bool:
        """True while the runner is alive."""
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout: float) -> int | None:
        """Wait for the runner to exit by itself; its exit code, or None on timeout."""
        assert self.process is not None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGINT the runner (it stops every node) and wait; kill after ``timeout``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()
        return self.process.returncode

    def log(self) -> str:
        """Everything the graph printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> LaunchedGraph:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Recorded:
    """Time series recorded by :class:`GraphProbe` (stamps in seconds of the driver clock)."""

    truth_t: list[float] = field(default_factory=list)
    truth_pos: list[list[float]] = field(default_factory=list)
    truth_quat_wxyz: list[list[float]] = field(default_factory=list)
    truth_twist: list[list[float]] = field(default_factory=list)
    joint_t: list[float] = field(default_factory=list)
    joint_q: list[list[float]] = field(default_factory=list)
    joint_effort: list[list[float]] = field(default_factory=list)
    joint_names: list[str] = field(default_factory=list)
    contact_fz: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    modes: list[str] = field(default_factory=list)
    diagnostics: list[dict[str, str]] = field(default_factory=list)
    robot_description: str | None = None


class GraphProbe:
    """An rclpy node (own context, background spin thread) that records the driver topics and can command it.

    Args:
        controller: if given, called with each ``JointState`` on ``/joint_states``; a returned ``JointState``
            is published on ``/joint_commands`` (set ``header.stamp`` to the state's for lockstep).
        subscribe_description: also subscribe ``/robot_description`` (transient_local).
        contacts: also record ``/sim/contacts/{left,right}``.
        reliable_streams: read the 500 Hz streams reliably (lockstep); ``False`` reads them best-effort, so a
            pause of this observer (say a garbage collection) cannot hold back the publisher (realtime).
    """

    def __init__(
        self,
        controller: Callable[[Any], Any] | None = None,
        subscribe_description: bool = True,
        name: str = "graph_probe",
        contacts: bool = True,
        reliable_streams: bool = True,
    ) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"{name}_{os.getpid()}", context=self.context)
        self.data = Recorded()
        self.lock = threading.Lock()
        self.controller = controller
        reliable = QoSProfile(
            depth=100,
            reliability=ReliabilityPolicy.RELIABLE if reliable_streams else ReliabilityPolicy.BEST_EFFORT,
        )
        self.latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.cmd_pub = self.node.create_publisher(
            JointState, "/joint_commands", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.node.create_subscription(Odometry, "/sim/ground_truth", self._on_truth, reliable)
        self.node.create_subscription(JointState, "/joint_states", self._on_joints, reliable)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100)
        self.node.create_subscription(
            String,
            "/robot_driver/mode",
            self._on_mode,
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        for side in ("left", "right") if contacts else ():
            self.data.contact_fz[side] = []
            self.node.create_subscription(
                WrenchStamped, f"/sim/contacts/{side}", lambda m, s=side: self._on_contact(s, m), reliable
            )
        if subscribe_description:
            self.subscribe_description()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def subscribe_description(self) -> None:
        """Subscribe ``/robot_description`` (may be called late, to test latching)."""
        from std_msgs.msg import String

        self.node.create_subscription(String, "/robot_description", self._on_description, self.latched)

    def _spin(self) -> None:
        with contextlib.suppress(Exception):
            self.executor.spin()

    # ------------------------------------------------------------------ callbacks
    def _on_truth(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        tw = msg.twist.twist
        with self.lock:
            self.data.truth_t.append(t)
            self.data.truth_pos.append([p.x, p.y, p.z])
            self.data.truth_quat_wxyz.append([o.w, o.x, o.y, o.z])
            self.data.truth_twist.append(
                [tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y, tw.angular.z]
            )

    def _on_joints(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self.lock:
            self.data.joint_t.append(t)
            self.data.joint_q.append(list(msg.position))
            self.data.joint_effort.append(list(msg.effort))
            if not self.data.joint_names:
                self.data.joint_names = list(msg.name)
        if self.controller is not None:
            cmd = self.controller(msg)
            if cmd is not None:
                self.cmd_pub.publish(cmd)

    def _on_contact(self, side: str, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self.lock:
            self.data.contact_fz[side].append((t, msg.wrench.force.z))

    def _on_diag(self, msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith("robot_driver"):
                with self.lock:
                    self.data.diagnostics.append({kv.key: kv.value for kv in status.values})

    def _on_mode(self, msg: Any) -> None:
        with self.lock:
            self.data.modes.append(msg.data)

    def _on_description(self, msg: Any) -> None:
        with self.lock:
            self.data.robot_description = msg.data

    # ------------------------------------------------------------------ queries
    def wait_for(self, predicate: Callable[[Recorded], bool], timeout: float, poll: float = 0.02) -> bool:
        """Wait until ``predicate(recorded data)`` holds (True) or ``timeout`` wall seconds pass (False)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if predicate(self.data):
                    return True
            time.sleep(poll)
        with self.lock:
            return predicate(self.data)

    def sim_time(self) -> float:
        """Latest driver stamp seen (s)."""
        with self.lock:
            return self.data.joint_t[-1] if self.data.joint_t else -1.0

    def last_diagnostics(self) -> dict[str, str]:
        """Key-values of the latest driver diagnostics."""
        with self.lock:
            return dict(self.data.diagnostics[-1]) if self.data.diagnostics else {}

    def base_heights(self) -> tuple[np.ndarray, np.ndarray]:
        """(t, z) of the base from ``/sim/ground_truth``."""
        with self.lock:
            return np.array(self.data.truth_t), np.array([p[2] for p in self.data.truth_pos])

    def call_trigger(self, service: str, timeout: float = 10.0) -> tuple[bool, str]:
        """Call a ``std_srvs/Trigger`` service; (success, message)."""
        from std_srvs.srv import Trigger

        client = self.node.create_client(Trigger, service)
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f"service {service} not available")
        future = client.call_async(Trigger.Request())
        end = time.monotonic() + timeout
        while not future.done() and time.monotonic() < end:
            time.sleep(0.01)
        if not future.done():
            raise TimeoutError(f"service {service} did not answer")
        result = future.result()
        self.node.destroy_client(client)
        return bool(result.success), str(result.message)

    def close(self) -> None:
        """Stop spinning and shut the context down."""
        self.context.try_shutdown()
        self._thread.join(timeout=5)
        self.node.destroy_node()
