"""Robot driver node: the real-time joint loop around one hardware backend (``hardware`` parameter).

Topics (see docs/architecture.md for the whole contract):

- publishes ``/joint_states`` (sensor_msgs/JointState: position rad, velocity rad/s, effort = applied N m),
  ``/imu/data`` (sensor_msgs/Imu in the IMU frame), ``/diagnostics``, ``~/mode`` (std_msgs/String, latched);
  for simulators also ``/clock``, ``/sim/ground_truth`` (nav_msgs/Odometry, world -> base, twist in the base
  frame) and ``/sim/contacts/{left,right}`` (geometry_msgs/WrenchStamped in the sole frames).
- subscribes ``/joint_commands`` (sensor_msgs/JointState: position = q*, velocity = dq*, effort = tau_ff).
- publishes ``~/switch`` (std_msgs/String, latched, JSON) once per controller switch (a change of the law:
  ``hold`` -> ``active``, ``active`` -> ``ramp``, ``damping`` -> ``ramp``): its largest joint torque steps as
  fractions of the effort limits (see ``driver_core.SwitchRecord``); with ``switch_max_step`` > 0 the switch
  is blended so that no joint's torque changes by more than that per tick.
- publishes ``~/down`` (std_msgs/String, latched, JSON ``down``, ``tilt_deg``, ``fall_tilt_deg``, ``t``) at
  the first tick and whenever the robot goes down (base tilt beyond ``fall_tilt_deg``) or is up again
  (``DriverCore.down``), and while down when its tilt changed by 5 deg; the mode manager refuses reset and
  stand with "robot is down" while it is.
- services ``~/estop``, ``~/reset`` and ``~/hold`` (std_srvs/Trigger; ``hold`` hands control back from a
  controller: ramp from the current pose to the default pose, then hold).
- simulators only (evaluation tools, never on hardware): ``~/push`` (std_srvs/Trigger) applies the push set
  in the parameters ``push_force`` (N, world frame, [x, y, z]) and ``push_duration_s`` (s) at the base body
  for exactly that much simulated time, from the next physics step; each push is published on ``/sim/push``
  (geometry_msgs/WrenchStamped, frame ``world``, stamp = simulated start time) and again with a zero force at
  its end. ``~/respawn`` (std_srvs/Trigger) puts the robot back upright at its start pose (``initial_pose``,
  the origin by default) in the default pose, at rest, simulated time running on; the driver then ramps
  (default pose to itself, stand gains, commands ignored) for ``respawn_settle_s`` and holds. Both are for
  evaluations (repeatable trials in one graph); the mode manager's ``~/respawn`` calls it (recovery after a
  fall in simulation).

- simulators: ``scene`` (a world file: markers, boxes, a heightfield; ``humanoid_control/hardware/scene.py``)
  and ``initial_pose`` ([x, y, yaw] in the world frame: where the robot starts and respawns).

Real-time path (docs/realtime.md): ``in_loop_controller`` (none | joint_hold | policy | wbc) calls that
controller's core from this loop, in this process (its node, created here too, stays its ROS interface);
``thread_priority`` (SCHED_FIFO, ``auto``: 50 with a controller in the loop in realtime, else none),
``process_priority``, ``cpu_affinity``, ``lock_memory`` and ``gc_in_slack`` set up the loop thread, with a
warning and a normal thread where the system refuses; ``physics_thread`` (simulators, realtime) steps the
physics on a thread of its own from the command write to the next read; ``publish_rate_hz`` thins the
tooling streams (``/joint_states``, ``/imu/data``, ``/clock``, ground truth), which with a controller in the
loop are published after the command is written; ground truth and contacts are computed only while
subscribed.

Clock modes: ``realtime`` - a dedicated thread sleeps to absolute deadlines at ``rate_hz``; ``lockstep`` -
simulated time, and once a controller is active each tick waits until the command answering that tick's
``/joint_states`` (same ``header.stamp`` or later) has arrived, or ``lockstep_timeout_s`` of wall time passed.

The driver is one node, :class:`RobotDriverNode`, whose callbacks (executor thread) and loop (own thread)
share the core, the backend and one lock. Its methods are grouped by concept in mixins, its bases, one
module each (the pure parts are elsewhere: ``driver_core``, ``loop_stats``, ``hardware/``):

- this module: the node's ROS interface (publishers, subscriptions, services, the loop's shared state), the
  nodes it creates in its process (the in-loop controller's), ``close`` and ``main``;
- ``driver_parameters``: the parameter declarations and what is built from them at start-up;
- ``driver_callbacks``: the executor thread's callbacks (parameter changes, commands, acks, services);
- ``driver_loop``: the loop thread and its ticks (``_run_loop``, ``_step_in_loop``);
- ``driver_slack``: the publications in the loop's slack (realtime, a controller in the loop);
- ``driver_publishing``: the state, mode, switch, push and lockstep publications;
- ``driver_diagnostics``: the diagnostics, in stages;
- ``driver_hardware``: a hardware backend's link and activation checks, the robot's remote on ``/joy``.
"""

from __future__ import annotations

import collections
import gc
import math
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState, Joy
from std_msgs.msg import Header, String
from std_srvs.srv import SetBool, Trigger

from humanoid_control.controllers.registry import (
    load_controller,
    own_node_class,
    registered_controllers,
    resolve_name,
)
from humanoid_control.driver.driver_callbacks import DriverCallbacksMixin
from humanoid_control.driver.driver_diagnostics import DIAG_STAGES, DriverDiagnosticsMixin
from humanoid_control.driver.driver_hardware import DriverHardwareMixin
from humanoid_control.driver.driver_loop import DriverLoopMixin
from humanoid_control.driver.driver_parameters import DriverParametersMixin
from humanoid_control.driver.driver_publishing import DriverPublishingMixin
from humanoid_control.driver.driver_slack import DriverSlackMixin
from humanoid_control.driver.in_loop import InLoopController
from humanoid_control.hardware.push import PushRequest
from humanoid_control.loop.realtime import AppliedSettings, SlackGate, unlock_all_memory
from humanoid_control.loop.stats import Histogram, LoopStats
from humanoid_control.ros.lockstep import ACK_TOPIC, PeerTable, ack_qos, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, run_node


class RobotDriverNode(
    DriverParametersMixin,
    DriverCallbacksMixin,
    DriverLoopMixin,
    DriverHardwareMixin,
    DriverSlackMixin,
    DriverPublishingMixin,
    DriverDiagnosticsMixin,
    QuietNode,
):
    """ROS 2 adapter of :class:`DriverCore` + a :class:`RobotBackend`, with the loop in its own thread."""

    def __init__(self) -> None:
        super().__init__("robot_driver")
        rate, watchdog = self._declare_parameters()
        self._pending_push: PushRequest | None = None
        self._respawn_requested = False
        self._push_end_tick: int | None = None
        self.pushes = 0
        self.respawns = 0
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.lock = threading.Lock()
        self.command_arrived = threading.Condition(self.lock)
        self.latest_command_stamp = -math.inf
        self.last_seen_command_tick = -(10**9)
        self.stats = LoopStats(rate)
        self.lockstep_timeouts = 0
        self.peers = PeerTable()
        self._running = True
        self._last_mode = None
        self._last_down: bool | None = None
        self._down_tilt = 0.0  # base tilt (rad) of the last ~/down
        self.realtime_commands_late = 0
        # realtime with a controller in the loop: the tooling streams go out in the loop's slack
        self._tooling_pending: tuple[Any, int] | None = None  # (state, index of its next stream)
        # the streams of a publishing tick, in order; then the ground truth and the diagnostics (costs)
        self._tick_streams = (
            self._publish_joints,
            self._publish_imu,
            self._publish_clock,
            self._publish_mirror,
            self._publish_estimate,
        )
        # per stream, then the ground truth, the three stages (values, message, publication) of the
        # diagnostics of the driver, of the in-loop controller and of the in-loop estimator, the switch
        # records and the log lines: decaying peak cost (s), from 0.2 ms for the tick's streams and 1 ms for
        # the rest (measured 0.5-1.3 ms each; learnt from 0.2 ms, each cost an overrun or two at start-up)
        self._tooling_costs = [2e-4] * (len(self._tick_streams) + 1) + [1e-3] * (3 * DIAG_STAGES + 2)
        self.tooling_published = 0  # publishing ticks whose streams all went out
        self.tooling_deferred = 0  # ticks whose slack could not hold the next stream
        self.tooling_superseded = 0  # publishing ticks whose streams did not all go out before the next one
        self.tooling_truth_dropped = 0  # ground-truth samples the slack could not hold
        # realtime, a controller in the loop: the diagnostics (driver, in-loop controller, in-loop estimator)
        # not yet published, each stage of each waiting for a slack that holds it
        self._diag_pending: list[int] = []
        self._diag_stages: Iterator[None] | None = None  # the stages of the one in progress
        self._diag_stage = 0
        self._switches_pending: list[Any] = []  # ~/switch records waiting for the slack, likewise
        # info log lines (the mode changes, the in-loop controller's state changes) waiting for the slack
        self._logs_pending: list[tuple[Any, str]] = []
        self._state_out: dict[int, float] = {}  # state stamp (ns) -> perf_counter when it went out
        self._state_keys: collections.deque[int] = collections.deque()
        self._last_applied_key = -(2**62)
        self.state_to_command = Histogram()

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        stream = tick_stream_qos()  # per-tick streams (see lockstep.tick_stream_qos)
        self.pub_joints = self.create_publisher(JointState, "/joint_states", stream)
        self.pub_imu = self.create_publisher(Imu, "/imu/data", stream)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # latched state, depth 1: a late subscriber gets the current mode only. A subscriber matched before
        # gets every change (at most one per tick); the history with reasons is in the log and in
        # /diagnostics (mode, mode_reason; also sent on mode changes)
        self.pub_mode = self.create_publisher(
            String,
            "~/mode",
            QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        if self.backend.simulated:
            # per tick, transient-local like the other tick streams: the mode manager is a lockstep peer on it
            self.pub_clock = self.create_publisher(Clock, "/clock", stream)
            self.pub_truth = self.create_publisher(Odometry, "/sim/ground_truth", stream)
            self.pub_contacts = {
                side: self.create_publisher(WrenchStamped, f"/sim/contacts/{side}", stream)
                for side in self.config.feet
            }
            if hasattr(self.backend, "push"):  # the simulator itself (not an emulator behind a protocol)
                self.pub_push = self.create_publisher(WrenchStamped, "/sim/push", reliable)
                self.create_service(Trigger, "~/push", self._on_push)
                self.create_service(Trigger, "~/respawn", self._on_respawn)
        # the robot's own remote (hardware backends) as a joystick, joy_node's Xbox layout (modes/joy_mapping)
        self.pub_joy = self.create_publisher(Joy, "/joy", 10) if hasattr(self.backend, "remote") else None
        # realtime: commands are a latest-wins stream. A reliable reader holds every later sample back until a
        # lost one is repaired (head-of-line blocking; stalls of 40-340 ms measured under CPU load, tripping
        # the watchdog), so realtime reads them best-effort. Lockstep keeps them reliable: each tick waits for
        # its own command.
        command_qos = (
            QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
            if self.clock_mode == "realtime"
            else reliable
        )
        self.create_subscription(JointState, "/joint_commands", self._on_command, command_qos)
        self.create_service(Trigger, "~/estop", self._on_estop)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/hold", self._on_hold)
        self.create_service(SetBool, "~/set_pause", self._on_set_pause)
        self.pub_lockstep = self.create_publisher(
            String,
            "~/lockstep",
            QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        # every controller switch with its torque steps (JSON), once its blend is over
        self.pub_switch = self.create_publisher(
            String,
            "~/switch",
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        # whether the robot is down (base tilt beyond fall_tilt_deg; JSON), latched, on every change
        self.pub_down = self.create_publisher(
            String,
            "~/down",
            QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        if self.clock_mode == "lockstep":
            self.create_subscription(Header, ACK_TOPIC, self._on_ack, ack_qos(latched=False))
        self._publish_lockstep()

        self._joint_msg = JointState(name=self.config.joint_names)
        self._imu_msg = Imu()
        self._imu_msg.header.frame_id = self.config.imu.site
        if not self.publish_orientation:
            self._imu_msg.orientation_covariance[0] = -1.0
        self._stamp_cache: tuple[float, Any] = (math.nan, None)  # the last stamp and its message
        self._truth_msg = Odometry()
        self._truth_msg.header.frame_id = "world"
        self._truth_msg.child_frame_id = self.config.base_body
        self._truth_wrench_msgs = {side: WrenchStamped() for side in self.config.feet}
        self.get_logger().info(
            f"robot {self.config.name}: {self.config.num_joints} joints, hardware={self.hardware}, "
            f"clock={self.clock_mode}, {rate:g} Hz, watchdog {watchdog} ticks"
        )
        self.extra_nodes: list[Any] = []
        self.in_loop: InLoopController | None = None
        self.in_loop_estimator: Any = None  # the state estimator's node in this process (with the WBC)
        if self.in_loop_kind != "none":
            self.in_loop = self._make_in_loop_controller()
            self.extra_nodes.append(self.in_loop)
        self.rt_applied = AppliedSettings()
        # realtime, a controller in the loop: the executor's callbacks start only in the loop's slack
        # (node_utils.spin_in_windows reads spin_gate)
        gated = self.callbacks_in_slack and self.in_loop is not None and self.clock_mode == "realtime"
        self.spin_gate: SlackGate | None = SlackGate() if gated else None
        self._thread = threading.Thread(target=self._loop, name="rt_loop", daemon=True)
        self._thread.start()

    def _in_process_node_kwargs(self, params: dict[str, Any], parameter: str) -> dict[str, Any]:
        """Constructor arguments of a node in this process: this context, ``params`` (from the driver
        parameter ``parameter``; ``robot`` defaults to the driver's) as overrides, no global ROS arguments."""
        from rclpy.parameter import Parameter

        params = dict(params)
        params.setdefault("robot", self.robot_name)
        try:
            overrides = [Parameter(k, value=v) for k, v in params.items()]
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"parameter {parameter}: {exc}") from None
        return dict(context=self.context, parameter_overrides=overrides, use_global_arguments=False)

    def _make_in_loop_controller(self) -> Any:
        """The in-loop controller's node, in this process, its parameters from ``in_loop_parameters``: the
        generic node adapter hosting the registered controller, or, for a controller with a node of its own
        (its ``node``), that node class's ``in_loop_node(driver, kwargs)``."""
        kwargs = self._in_process_node_kwargs(self.in_loop_parameters, "in_loop_parameters")
        registered = load_controller(self.in_loop_kind)
        node_class = own_node_class(registered)
        if node_class is None:
            from humanoid_control.controllers.controller_node import ControllerNode

            if getattr(registered, "needs_estimate", False):
                self.make_in_loop_estimator()
            return ControllerNode(
                in_loop=True,
                in_loop_gains=self.set_controller_gains,
                default_controller=resolve_name(self.in_loop_kind),
                **kwargs,
            )
        factory = getattr(node_class, "in_loop_node", None)
        if factory is None:
            raise ValueError(
                f"parameter in_loop_controller: {self.in_loop_kind} cannot run in the driver's loop "
                f"(controllers registered: {', '.join(registered_controllers())})"
            )
        return factory(self, kwargs)

    def make_in_loop_estimator(self) -> Any:
        """The state estimator's node in this process, called before the in-loop controller each tick (as
        ``/odom`` before it), its parameters from ``in_loop_estimator_parameters``."""
        from humanoid_control.estimation.state_estimator_node import StateEstimatorNode

        self.in_loop_estimator = self.make_in_process_node(
            StateEstimatorNode,
            self.in_loop_estimator_parameters,
            "in_loop_estimator_parameters",
            in_loop=True,
        )
        self.extra_nodes.append(self.in_loop_estimator)
        return self.in_loop_estimator

    def set_controller_gains(self, gains: Any) -> str | None:
        """An in-loop controller's ``gains()``: a gain profile's name (the ``gain_profile`` parameter) or
        per-joint ``(kp, kd)`` (``command_kp`` / ``command_kd``); None, or why it was refused."""
        from rclpy.parameter import Parameter

        if isinstance(gains, str):
            result = self.set_parameters_atomically([Parameter("gain_profile", Parameter.Type.STRING, gains)])
            return None if result.successful else result.reason
        kp, kd = gains
        return self.set_gains_in_process([float(v) for v in kp], [float(v) for v in kd])

    def make_in_process_node(
        self, node_class: Any, params: dict[str, Any], parameter: str, **extra: Any
    ) -> Any:
        """A node of ``node_class`` in this process, with this context and ``params`` (from the driver
        parameter ``parameter``) as overrides; for an in-loop controller's factory."""
        return node_class(**extra, **self._in_process_node_kwargs(params, parameter))

    def set_gains_in_process(self, kp: list[float], kd: list[float]) -> str | None:
        """An in-loop controller's gains: the ``command_kp`` / ``command_kd`` parameters, set here."""
        from rclpy.parameter import Parameter

        result = self.set_parameters_atomically(
            [
                Parameter("command_kp", Parameter.Type.DOUBLE_ARRAY, kp),
                Parameter("command_kd", Parameter.Type.DOUBLE_ARRAY, kd),
            ]
        )
        return None if result.successful else result.reason

    def backend_time(self) -> float:
        """Backend clock (s): simulated time for simulators."""
        return float(getattr(self.backend, "time", time.monotonic()))

    def close(self) -> None:
        """Stop the loop thread and put the backend in a safe state."""
        self._running = False
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=2.0)
        self.backend.close()
        if self.rt_applied.gc_in_slack:
            gc.enable()
        if self.rt_applied.lock_memory:
            unlock_all_memory()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack robot_driver``."""
    # The loop thread and the executor thread (commands, services) share the GIL; with Python's default 5 ms
    # switch interval a busy loop thread can delay command callbacks by several ticks.
    sys.setswitchinterval(5e-4)

    return run_node(RobotDriverNode, args, "robot_driver")


if __name__ == "__main__":
    raise SystemExit(main())
