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
- services ``~/estop``, ``~/reset`` and ``~/hold`` (std_srvs/Trigger; ``hold`` hands control back from a
  controller: ramp from the current pose to the default pose, then hold).
- simulators only (evaluation tools, never on hardware): ``~/push`` (std_srvs/Trigger) applies the push set
  in the parameters ``push_force`` (N, world frame, [x, y, z]) and ``push_duration_s`` (s) at the base body
  for exactly that much simulated time, from the next physics step; each push is published on ``/sim/push``
  (geometry_msgs/WrenchStamped, frame ``world``, stamp = simulated start time) and again with a zero force at
  its end. ``~/respawn`` (std_srvs/Trigger) puts the robot back upright at its start pose (``initial_pose``,
  the origin by default) in the default pose, at rest, simulated time running on; the driver then ramps
  (default pose to itself, stand gains, commands ignored) for ``respawn_settle_s`` and holds. Both are for
  evaluations (repeatable trials in one graph).

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

One module past 600 lines, for one concept: the ROS side of the real-time loop. Its parameters, its
callbacks (executor thread) and its loop (own thread) share the core, the backend and one lock, so they stay
in one class where the lock discipline reads in one place; the pure parts are elsewhere (``driver_core``,
``loop_stats``, ``hardware/``).
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import json
import math
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState, Joy
from std_msgs.msg import Header, String
from std_srvs.srv import SetBool, Trigger

from humanoid_control.controllers.registry import (
    NO_CONTROLLER,
    is_controller_class,
    load_controller,
    registered_controllers,
    resolve_name,
)
from humanoid_control.driver.driver_core import (
    CommandError,
    DriverCore,
    DriverMode,
    DriverSettings,
    validate_command,
    validate_gains,
)
from humanoid_control.driver.in_loop import (
    InLoopController,
    InLoopState,
    parse_node_parameters,
)
from humanoid_control.hardware.base import RobotBackend
from humanoid_control.hardware.mujoco_sim import ImuNoise, tilt_from_quat
from humanoid_control.hardware.push import PushError, PushLimits, PushRequest, validate_push
from humanoid_control.hardware.registry import BACKENDS, HARDWARE_BACKENDS, create_backend
from humanoid_control.loop.realtime import (
    AUTO_PROCESS_PRIORITY,
    AUTO_THREAD_PRIORITY,
    AppliedSettings,
    RealtimeSettings,
    SlackCollector,
    SlackGate,
    apply_to_loop_thread,
    parse_cpus,
    parse_priority,
    sleep_until,
    unlock_all_memory,
)
from humanoid_control.loop.stats import Histogram, LoopStats
from humanoid_control.model.robot_config import ConfigError, load_robot_config
from humanoid_control.model.robot_model import FrictionPatch
from humanoid_control.ros.lockstep import ACK_TOPIC, PeerTable, ack_qos, tick_stream_qos
from humanoid_control.ros.node_utils import (
    QuietNode,
    declare,
    declare_double_array,
    from_time_msg,
    run_node,
    to_time_msg,
)

CLOCK_MODES = ("lockstep", "realtime")


#: specific force of a resting IMU (m/s^2): the in-loop estimator's input where a backend measures none
_GRAVITY_SPECIFIC_FORCE = np.array([0.0, 0.0, 9.81])
_DIAG_STAGES = 3  # of each diagnostics published from the loop's slack: values, message, publication


class RobotDriverNode(QuietNode):
    """ROS 2 adapter of :class:`DriverCore` + a :class:`RobotBackend`, with the loop in its own thread."""

    def __init__(self) -> None:
        super().__init__("robot_driver")
        self.robot_name = declare(
            self, "robot", "g1", "robot configuration name or YAML path", read_only=True
        )
        self.hardware = declare(
            self, "hardware", "mujoco", f"backend: {', '.join(sorted(BACKENDS))}", read_only=True
        )
        self.clock_mode = declare(self, "clock", "lockstep", "lockstep | realtime", read_only=True)
        rate = declare(self, "rate_hz", 500.0, "loop rate (Hz)", 50.0, 2000.0, read_only=True)
        watchdog = declare(self, "watchdog_ticks", 50, "ticks without a command before damping", 1, 10000)
        self.lockstep_timeout = declare(
            self,
            "lockstep_timeout_s",
            0.1,
            "lockstep: wall-clock wait for the tick's command (s)",
            0.001,
            10.0,
        )
        self.peer_timeout = declare(
            self,
            "lockstep_peer_timeout_s",
            5.0,
            "lockstep: wall-clock wait for each peer's /lockstep/ack of a tick (s); a peer that misses it is "
            "dropped",
            0.01,
            120.0,
        )
        self.paused = declare(
            self,
            "start_paused",
            False,
            "start with simulated time paused at 0; ~/set_pause (std_srvs/SetBool, data=false) starts it",
            read_only=True,
        )
        activation = declare(
            self,
            "activation_ticks",
            1,
            "hold -> active only after this many consecutive ticks with valid commands",
            1,
            10000,
        )
        ramp = declare(self, "ramp_duration_s", 2.0, "boot/reset ramp to the default pose (s)", 0.1, 20.0)
        switch_max_step = declare(
            self,
            "switch_max_step",
            0.0,
            "bumpless controller switches: largest torque change per tick while a switch is blended, as a "
            "fraction of each joint's effort limit (0 = off; the mode manager sets it)",
            0.0,
            1.0,
        )
        profile = declare(self, "gain_profile", "stand", "gain profile applied to /joint_commands")
        fall = declare(
            self, "fall_tilt_deg", 60.0, "base tilt that triggers damping (deg); 0 disables", 0.0, 180.0
        )
        self.sim_duration = declare(
            self,
            "sim_duration_s",
            0.0,
            "stop the node after this much backend time (s); 0 = run forever",
            0.0,
            1e6,
        )
        self.spin_margin = (
            declare(
                self,
                "spin_margin_us",
                100.0,
                "realtime: busy-wait this long before each deadline (us)",
                0.0,
                2000.0,
            )
            * 1e-6
        )
        self.realtime_command_wait = (
            declare(
                self,
                "realtime_command_wait_us",
                500.0,
                "realtime: wait at most this long each tick for the controller's answer to it (us)",
                0.0,
                1500.0,
            )
            * 1e-6
        )
        self.wait_for_subscribers = declare(
            self,
            "wait_for_subscribers",
            0,
            "lockstep: do not start simulating until /joint_states has this many subscribers (30 s max)",
            0,
            100,
        )
        self.publish_orientation = declare(
            self, "imu_orientation", True, "fill /imu/data orientation (the IMU's own estimate)"
        )
        noise = ImuNoise(
            gyro_noise_std=declare(self, "imu_gyro_noise_std", 0.0, "gyro white noise (rad/s)", 0.0, 1.0),
            gyro_bias_std=declare(self, "imu_gyro_bias_std", 0.0, "gyro constant bias std (rad/s)", 0.0, 1.0),
            gyro_bias_walk=declare(
                self, "imu_gyro_bias_walk", 0.0, "gyro bias walk (rad/s/sqrt(s))", 0.0, 1.0
            ),
            accel_noise_std=declare(self, "imu_accel_noise_std", 0.0, "accel white noise (m/s^2)", 0.0, 10.0),
            accel_bias_std=declare(
                self, "imu_accel_bias_std", 0.0, "accel constant bias std (m/s^2)", 0.0, 10.0
            ),
            accel_bias_walk=declare(
                self, "imu_accel_bias_walk", 0.0, "accel bias walk (m/s^2/sqrt(s))", 0.0, 10.0
            ),
            seed=declare(self, "imu_seed", 0, "noise seed", 0, 2**31 - 1),
        )
        self._declare_realtime(rate)
        if self.clock_mode not in CLOCK_MODES:
            raise ValueError(f"parameter clock: '{self.clock_mode}' is not one of {', '.join(CLOCK_MODES)}")
        if self.hardware not in BACKENDS:
            raise ValueError(
                f"parameter hardware: '{self.hardware}' is not one of {', '.join(sorted(BACKENDS))}"
            )

        self.config = load_robot_config(self.robot_name)
        if self.physics_timestep > 0:
            self.config = dataclasses.replace(
                self.config,
                simulation=dataclasses.replace(self.config.simulation, timestep=self.physics_timestep),
            )
        self.settings = DriverSettings(
            rate_hz=rate,
            watchdog_ticks=watchdog,
            ramp_duration=ramp,
            command_profile=profile,
            activation_ticks=activation,
            fall_tilt=math.radians(fall),
            switch_max_step=switch_max_step,
        )
        self.core = DriverCore(self.config, self.settings)  # raises ConfigError for an unknown profile
        patch = FrictionPatch.parse(
            declare(
                self,
                "friction_patch",
                "",
                "simulation: a floor rectangle with its own friction, 'x_min,x_max,y_min,y_max,friction' "
                "(m, world frame; empty: none)",
                read_only=True,
            )
        )
        extra: dict[str, Any] = {"friction_patch": patch} if patch is not None else {}
        if extra and self.hardware != "mujoco":
            raise ValueError("parameter friction_patch: only the mujoco backend simulates a floor")
        pose = list(
            declare(
                self,
                "initial_pose",
                [0.0, 0.0, 0.0],
                "simulation: the robot's start pose [x (m), y (m), yaw (rad)] in the world frame, also used "
                "by ~/respawn",
                read_only=True,
            )
        )
        if len(pose) != 3 or not all(math.isfinite(float(v)) for v in pose):
            raise ValueError(f"parameter initial_pose: [x, y, yaw] with finite values, got {pose}")
        scene_name = declare(
            self,
            "scene",
            "flat",
            "simulation: world file config/scenes/<name>.yaml (markers, boxes, heightfield) or a YAML path; "
            "flat: the plain floor",
            read_only=True,
        )
        if scene_name.strip().lower() not in ("", "none", "flat"):
            if self.hardware != "mujoco":
                raise ValueError("parameter scene: only the mujoco backend simulates a world")
            from humanoid_control.hardware.scene import load_scene

            extra["scene"] = load_scene(scene_name)  # SceneError (a ValueError) names what is wrong
        if any(float(v) != 0.0 for v in pose):
            if self.hardware != "mujoco":
                raise ValueError("parameter initial_pose: only a simulator can place the robot")
            extra["initial_pose"] = tuple(float(v) for v in pose)
        iface = declare(
            self,
            "network_interface",
            "eth0",
            "hardware backends: network interface of the robot's DDS (lo for the emulator)",
            read_only=True,
        )
        domain = declare(
            self,
            "dds_domain",
            0,
            "hardware backends: DDS domain of the robot's protocol",
            0,
            232,
            read_only=True,
        )
        emulator = declare(
            self,
            "emulator",
            False,
            "hardware backends: the robot is its emulator (MuJoCo behind the protocol): take its simulated "
            "clock and truth; lockstep possible",
            read_only=True,
        )
        if self.hardware in HARDWARE_BACKENDS:
            extra.update(
                network_interface=iface,
                dds_domain=domain,
                emulator=emulator,
                lockstep=self.clock_mode == "lockstep",
            )
            if self.clock_mode == "lockstep" and not emulator:
                raise ValueError(
                    f"parameter clock: lockstep needs a simulator; hardware '{self.hardware}' runs "
                    "clock:=realtime (or emulator:=true)"
                )
        try:
            self.backend: RobotBackend = create_backend(
                self.hardware, config=self.config, imu_noise=noise, **extra
            )
        except (ConnectionError, ImportError) as exc:  # no robot / emulator answering, SDK not installed
            raise ValueError(f"hardware {self.hardware}: {exc}") from None
        self.period = 1.0 / rate
        if self.backend.simulated:
            steps = self.period / self.config.simulation.timestep
            if abs(steps - round(steps)) > 1e-6:
                raise ValueError(
                    f"parameter rate_hz: {rate} Hz is not a whole number of physics steps of "
                    f"{self.config.simulation.timestep} s"
                )
        # explicit per-joint command gains (configuration order), e.g. set by a policy runner (manifest);
        # empty (the default) means unset: gain_profile applies. Always a value: ros2 param dump sees them.
        kp0, kd0 = (
            declare_double_array(
                self,
                name,
                f"command {what} per joint in configuration order; overrides gain_profile; "
                "empty (both): gain_profile applies",
            )
            for name, what in (("command_kp", "stiffness (N m/rad)"), ("command_kd", "damping (N m s/rad)"))
        )
        if kp0 or kd0:
            if not (kp0 and kd0):
                raise ValueError("parameters command_kp and command_kd must be given together")
            self.core.set_command_gains(list(kp0), list(kd0), name="command_kp/kd")
        self.push_limits = PushLimits(timestep=self.config.simulation.timestep)
        self.push_force = list(
            declare(
                self,
                "push_force",
                [0.0, 0.0, 0.0],
                "simulators: force of the next ~/push (N, world frame, [x, y, z]) at the base body",
            )
        )
        self.push_duration = declare(
            self,
            "push_duration_s",
            0.1,
            "simulators: duration of the next ~/push (s, a whole number of physics steps)",
            self.push_limits.timestep,
            self.push_limits.max_duration,
        )
        self.respawn_settle = declare(
            self,
            "respawn_settle_s",
            0.3,
            "simulators: after ~/respawn, ramp (default pose, stand gains, commands ignored) this long (s)",
            0.002,
            10.0,
        )
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
        self._tooling_costs = [2e-4] * (len(self._tick_streams) + 1) + [1e-3] * (3 * _DIAG_STAGES + 2)
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
        # depth 10: fast transitions (ramp -> damping) all reach subscribers; the last message is the
        # current mode
        self.pub_mode = self.create_publisher(
            String,
            "~/mode",
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
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

    def _declare_realtime(self, rate: float) -> None:
        """The real-time path's parameters (module docstring, docs/realtime.md); bad values raise."""
        from rcl_interfaces.msg import ParameterDescriptor

        self.in_loop_kind = declare(
            self,
            "in_loop_controller",
            NO_CONTROLLER,
            "registered controller called from this loop, in this process (none: no controller in the loop); "
            "its node is created here as its ROS interface",
            read_only=True,
        )
        launched = declare(
            self,
            "controller",
            NO_CONTROLLER,
            "the launch's controller (none or a registered controller's name): an unknown name is refused at "
            "start with the list of registered ones",
            read_only=True,
        )
        for parameter, value in (("in_loop_controller", self.in_loop_kind), ("controller", launched)):
            if value != NO_CONTROLLER:
                try:
                    load_controller(value)
                except ValueError as exc:  # UnknownControllerError lists the registered ones
                    raise ValueError(f"parameter {parameter}: {exc}") from None
        raw = declare(
            self,
            "in_loop_parameters",
            "",
            "parameters of the in-loop controller's node: name=value pairs separated by ';' (e.g. "
            "'policy=holosoma/g1_ppo;autostart=true'; true/false, numbers and text), or a JSON object",
            read_only=True,
        )
        params = parse_node_parameters(raw)  # ValueError names the bad pair
        self.in_loop_parameters: dict[str, Any] = params
        raw = declare(
            self,
            "in_loop_estimator_parameters",
            "",
            "with in_loop_controller wbc: parameters of the state estimator's node, which runs in the loop "
            "before the WBC (same format as in_loop_parameters, e.g. 'flat_ground_std=0.01')",
            read_only=True,
        )
        try:
            self.in_loop_estimator_parameters: dict[str, Any] = parse_node_parameters(raw)
        except ValueError as exc:
            raise ValueError(str(exc).replace("in_loop_parameters", "in_loop_estimator_parameters")) from None
        in_loop_rt = self.in_loop_kind != "none" and self.clock_mode == "realtime"
        priorities = {}
        for name, auto, what in (
            ("thread_priority", AUTO_THREAD_PRIORITY, "the loop thread"),
            ("process_priority", AUTO_PROCESS_PRIORITY, "the process's other threads (executor, DDS)"),
        ):
            value = self.declare_parameter(
                name,
                "auto",
                ParameterDescriptor(
                    description=f"SCHED_FIFO priority of {what}: 1..99, 0 = normal scheduling, auto = "
                    f"{auto} with a controller in the loop in realtime, else 0",
                    read_only=True,
                    dynamic_typing=True,
                ),
            ).value
            priorities[name] = parse_priority(name, value, in_loop_rt, auto)  # RealtimeSettingError
        cpus = parse_cpus(
            declare(
                self,
                "cpu_affinity",
                [-1],
                "CPUs the loop thread runs on ([-1]: any)",
                read_only=True,
            )
        )
        self.rt_settings = RealtimeSettings(
            thread_priority=priorities["thread_priority"],
            process_priority=priorities["process_priority"],
            cpu_affinity=cpus,
            lock_memory=declare(
                self, "lock_memory", False, "mlockall the process's memory (no page faults)", read_only=True
            ),
            gc_in_slack=declare(
                self,
                "gc_in_slack",
                True,
                "freeze the start-up objects and collect garbage only in the loop's slack between ticks",
                read_only=True,
            ),
        )
        publish_rate = declare(
            self,
            "publish_rate_hz",
            0.0,
            "rate of /joint_states, /imu/data, /clock and ground truth (Hz; a whole divisor of rate_hz; 0: "
            "every tick)",
            0.0,
            2000.0,
            read_only=True,
        )
        self.publish_every = 1
        if publish_rate > 0:
            every = rate / publish_rate
            if abs(every - round(every)) > 1e-6 or round(every) < 1:
                raise ValueError(
                    f"parameter publish_rate_hz: {publish_rate:g} Hz does not divide rate_hz {rate:g} Hz"
                )
            self.publish_every = round(every)
        self.physics_thread = declare(
            self,
            "physics_thread",
            True,
            "simulators in realtime: step the physics on a thread of its own after the command is written "
            "(the robot moving beside the loop's remaining work); the next tick's read waits for it",
            read_only=True,
        )
        self.callbacks_in_slack = declare(
            self,
            "callbacks_in_slack",
            True,
            "realtime, a controller in the loop: this process's ROS callbacks (services, subscriptions, "
            "timers) start only in the loop's slack, from the end of a tick's work to a margin before the "
            "next deadline",
            read_only=True,
        )
        self.physics_timestep = declare(
            self,
            "physics_timestep_s",
            0.0,
            "simulators: physics step (s; 0: the robot configuration's); the loop period must be a whole "
            "number of them",
            0.0,
            0.01,
            read_only=True,
        )

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
        generic node adapter for a :class:`~humanoid_control.controllers.interface.Controller`, else the
        registered node class's ``in_loop_node(driver, kwargs)``."""
        kwargs = self._in_process_node_kwargs(self.in_loop_parameters, "in_loop_parameters")
        registered = load_controller(self.in_loop_kind)
        if is_controller_class(registered):
            from humanoid_control.controllers.controller_node import ControllerNode

            return ControllerNode(in_loop=True, default_controller=resolve_name(self.in_loop_kind), **kwargs)
        factory = getattr(registered, "in_loop_node", None)
        if factory is None:
            raise ValueError(
                f"parameter in_loop_controller: {self.in_loop_kind} cannot run in the driver's loop "
                f"(controllers registered: {', '.join(registered_controllers())})"
            )
        return factory(self, kwargs)

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

    # ------------------------------------------------------------------ callbacks
    def _on_set_parameters(self, params: list[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        gains = {p.name: p.value for p in params if p.name in ("command_kp", "command_kd")}
        push = {p.name: p.value for p in params if p.name in ("push_force", "push_duration_s")}
        if push:
            try:
                validate_push(
                    push.get("push_force", self.push_force),
                    push.get("push_duration_s", self.push_duration),
                    self.push_limits,
                )
            except PushError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        for p in params:
            if p.name == "gain_profile":
                try:
                    self.config.gain_profile(p.value)
                except ConfigError as exc:
                    return SetParametersResult(successful=False, reason=str(exc))
        clear_gains = False
        if gains:
            if len(gains) != 2:
                return SetParametersResult(
                    successful=False, reason="set command_kp and command_kd together (one call)"
                )
            kp, kd = list(gains["command_kp"]), list(gains["command_kd"])
            clear_gains = not kp and not kd  # both empty: unset, gain_profile applies again
            if not clear_gains:
                try:
                    validate_gains(self.config, kp, kd)
                except (ValueError, TypeError) as exc:
                    return SetParametersResult(
                        successful=False,
                        reason=f"refused gains: {exc} (both empty: gain_profile applies)",
                    )
        with self.lock:
            if clear_gains:
                profile = self.get_parameter("gain_profile").value
                self.core.set_command_profile(profile)
                self.get_logger().info(f"command_kp / command_kd cleared: gain profile '{profile}' applies")
            elif gains:
                self.core.set_command_gains(
                    list(gains["command_kp"]), list(gains["command_kd"]), name="command_kp/kd"
                )
                self.get_logger().info("command gains set from command_kp / command_kd")
            for p in params:
                if p.name == "gain_profile":
                    self.core.set_command_profile(p.value)
                elif p.name == "watchdog_ticks":
                    self.settings.watchdog_ticks = int(p.value)
                elif p.name == "lockstep_timeout_s":
                    self.lockstep_timeout = float(p.value)
                elif p.name == "lockstep_peer_timeout_s":
                    self.peer_timeout = float(p.value)
                elif p.name == "switch_max_step":
                    self.settings.switch_max_step = float(p.value)
                elif p.name == "fall_tilt_deg":
                    self.settings.fall_tilt = math.radians(float(p.value))
                elif p.name == "push_force":
                    self.push_force = [float(v) for v in p.value]
                elif p.name == "push_duration_s":
                    self.push_duration = float(p.value)
                elif p.name == "respawn_settle_s":
                    self.respawn_settle = float(p.value)
        return SetParametersResult(successful=True)

    def _on_command(self, msg: JointState) -> None:
        stamp = from_time_msg(msg.header.stamp)
        try:
            command = validate_command(
                self.config, list(msg.name), msg.position, msg.velocity, msg.effort, stamp
            )
        except CommandError as exc:
            with self.lock:
                self.core.refuse(str(exc))
            self.get_logger().warning(f"refused /joint_commands: {exc}", throttle_duration_sec=1.0)
            return
        with self.command_arrived:
            self.core.submit(command)  # ignored (but still pacing lockstep) during ramp and damping
            self.latest_command_stamp = max(self.latest_command_stamp, stamp)
            self.last_seen_command_tick = self.core.tick
            self.command_arrived.notify_all()

    def _on_ack(self, msg: Header) -> None:
        with self.command_arrived:
            event = self.peers.handle(msg.frame_id, from_time_msg(msg.stamp))
            self.command_arrived.notify_all()
        if event is not None:
            self.get_logger().info(f"lockstep peer {msg.frame_id.split()[-1]}: {event}")
            self._publish_lockstep()

    def _on_set_pause(self, req: Any, resp: Any) -> Any:
        with self.command_arrived:
            changed = self.paused != bool(req.data)
            self.paused = bool(req.data)
            self.command_arrived.notify_all()
        verb = "paused" if self.paused else "running"
        resp.success = True
        resp.message = f"{verb} at simulated time {self.backend_time():.3f} s" + (
            "" if changed else " (no change)"
        )
        self.get_logger().info(f"set_pause: {resp.message}")
        self._publish_lockstep()
        return resp

    def _publish_lockstep(self) -> None:
        """Latched ``~/lockstep``: JSON with ``paused``, ``time`` (s), ``peers``, ``dropped``."""
        with self.lock:
            data = {
                "paused": bool(self.paused),
                "clock": self.clock_mode,
                "time": round(self.backend_time(), 6),
                "peers": self.peers.names,
                "dropped": list(self.peers.dropped),
            }
        self.pub_lockstep.publish(String(data=json.dumps(data)))

    def _on_estop(self, _req: Any, resp: Any) -> Any:
        with self.command_arrived:
            self.core.estop("e-stop service")
            # a controller calling the e-stop has stopped (a fault): lockstep must not wait for its commands
            # (one that still streams is seen again at its next command)
            self.last_seen_command_tick = -(10**9)
            self.command_arrived.notify_all()
        self.get_logger().error("E-STOP: damping latched until ~/reset")
        resp.success, resp.message = True, "damping latched until ~/reset"
        return resp

    def _on_hold(self, _req: Any, resp: Any) -> Any:
        state = self.backend_state
        with self.lock:
            resp.success, resp.message = self.core.hold(None if state is None else state.q)
            self.last_seen_command_tick = -(10**9)  # the controller stopped: lockstep no longer waits for it
        self.get_logger().info(f"hold: {resp.message}")
        return resp

    def _on_push(self, _req: Any, resp: Any) -> Any:
        try:
            request = validate_push(self.push_force, self.push_duration, self.push_limits)
        except PushError as exc:
            resp.success, resp.message = False, str(exc)
            return resp
        with self.lock:
            self._pending_push = request  # the loop thread applies it before its next advance
            self.command_arrived.notify_all()
        f = request.force
        resp.success = True
        resp.message = (
            f"push [{f[0]:.2f}, {f[1]:.2f}, {f[2]:.2f}] N for {request.duration:g} s "
            f"({request.impulse:.3f} N s) from the next physics step"
        )
        self.get_logger().info(resp.message)
        return resp

    def _on_respawn(self, _req: Any, resp: Any) -> Any:
        with self.command_arrived:
            self._respawn_requested = True  # the loop thread respawns at the start of its next tick
            self.command_arrived.notify_all()
        resp.success, resp.message = True, "respawn at the next tick (default pose, at rest), then hold"
        return resp

    def _respawn(self) -> None:
        """Loop thread, lock held: put the simulated robot back and hold it (see ``~/respawn``)."""
        self._respawn_requested = False
        self.backend.respawn(self.config.array("default"))  # type: ignore[attr-defined]
        self._pending_push = None
        self._push_end_tick = None
        self.core.respawned(self.respawn_settle)
        # a command answers a state of the respawned robot only; a controller that was streaming keeps pacing
        # lockstep through the settle ramp (its commands are ignored there), so the nodes behind it (e.g. the
        # state estimator) see every tick of the respawned robot instead of a driver running ahead
        self.latest_command_stamp = -math.inf
        self.respawns += 1
        self._last_mode = None  # publish the mode again, also when it was already hold

    def _on_reset(self, _req: Any, resp: Any) -> Any:
        state = self.backend_state
        if state is not None and self.settings.fall_tilt > 0:
            tilt = tilt_from_quat(state.imu_quat)
            if tilt > self.settings.fall_tilt:
                resp.success = False
                resp.message = (
                    f"refused: the robot is down (base tilt {math.degrees(tilt):.0f} deg > "
                    f"{math.degrees(self.settings.fall_tilt):.0f}); put it upright first"
                )
                self.get_logger().warning(f"reset {resp.message}")
                return resp
        with self.lock:
            reset_link = getattr(self.backend, "reset_link", None)
            if reset_link is not None:
                reset_link()  # re-arm the hardware link supervision (a fault still present trips again)
            self.core.reset(None if state is None else state.q)
            self.latest_command_stamp = -math.inf
        self.get_logger().info("reset: ramping to the default pose, then hold")
        resp.success, resp.message = True, "ramping to the default pose, then hold"
        return resp

    # ------------------------------------------------------------------ loop
    backend_state = None
    exit_code = 0

    def _loop(self) -> None:
        try:
            self._run_loop()
        except Exception as exc:
            if not rclpy.ok(context=self.context):
                # SIGINT shut the context down while a tick was publishing ("publisher's context is
                # invalid"): a normal shutdown, not a failure of the loop
                return
            self.exit_code = 1
            self.get_logger().fatal(f"real-time loop died: {exc!r}")
            self.context.try_shutdown()
        finally:
            if self.spin_gate is not None:
                self.spin_gate.open()  # the loop is over: callbacks whenever they come

    def _wait_for_subscribers(self) -> None:
        """Lockstep: hold simulated time at 0 until the expected observers/controllers are connected."""
        deadline = time.monotonic() + 30.0
        while self._running and rclpy.ok(context=self.context):
            count = self.count_subscribers("/joint_states")
            if count >= self.wait_for_subscribers:
                self.get_logger().info(f"{count} /joint_states subscribers: starting")
                return
            if time.monotonic() > deadline:
                self.get_logger().warning(
                    f"only {count} of {self.wait_for_subscribers} /joint_states subscribers "
                    "after 30 s: starting"
                )
                return
            time.sleep(0.01)

    def _apply_realtime(self) -> SlackCollector | None:
        """Loop thread, at its start: the real-time settings (warnings where the system refuses)."""
        self.rt_applied = apply_to_loop_thread(self.rt_settings)
        for why in self.rt_applied.warnings:
            self.get_logger().warning(f"real-time setting refused: {why}")
        a = self.rt_applied
        if a.thread_priority or a.process_priority or a.cpu_affinity or a.lock_memory:
            self.get_logger().info(
                f"loop thread: SCHED_FIFO {a.thread_priority or 'off'}, other threads "
                f"{a.process_priority or 'unchanged'}, CPUs {list(a.cpu_affinity) or 'any'}, memory "
                f"{'locked' if a.lock_memory else 'not locked'}"
            )
        if not a.gc_in_slack:
            return None
        return SlackCollector(min_slack_s=min(self.rt_settings.gc_min_slack_s, 0.4 * self.period))

    def _run_loop(self) -> None:
        realtime = self.clock_mode == "realtime"
        if not realtime and self.wait_for_subscribers > 0:
            self._wait_for_subscribers()
        collector = self._apply_realtime()
        in_loop = self.in_loop
        tooling = in_loop is not None and realtime  # the tooling streams go out in the loop's slack
        # realtime, a simulator: its physics steps on a thread of its own from the command write on, beside
        # the tick's remaining work (estimator update, slack publications); the next read waits for it
        physics_beside = realtime and self.physics_thread and hasattr(self.backend, "start_advance")
        last_diag = 0.0
        if realtime:
            # the first diagnostics cost 8-10 ms (first use of their messages and publishers): before the
            # first deadline, not in a tick (measured: an overrun at the start of every realtime run)
            self._publish_all_diagnostics()
            last_diag = time.perf_counter()
        next_deadline = time.perf_counter()
        last_second = math.floor(self.backend_time() + 1e-9)  # lockstep: of simulated time (s)
        last_roll = time.perf_counter()
        gate = self.spin_gate
        # the gate closes this long before a deadline: a callback started in the window has at least this
        gate_margin = max(3e-4, 0.15 * self.period)
        while self._running and rclpy.ok(context=self.context):
            if self.paused:
                if gate is not None:
                    gate.open()
                with self.command_arrived:
                    while self.paused and self._running and rclpy.ok(context=self.context):
                        self.command_arrived.wait(0.05)
                next_deadline = time.perf_counter()
                continue
            if realtime:
                if gate is not None:
                    gate.open_until(next_deadline - gate_margin)
                lateness = sleep_until(next_deadline, self.spin_margin)
                if gate is not None:
                    gate.close()
                tick_start = time.perf_counter()
                self.stats.record_wake(lateness, tick_start)
            else:
                tick_start = time.perf_counter()
                self.stats.record_wake(0.0, tick_start)
            if self._respawn_requested:
                with self.lock:
                    self._respawn()
            state = self.backend.read()
            self.backend_state = state
            self._check_backend()
            publish = self.core.tick % self.publish_every == 0
            # an external controller (and a lockstep peer) needs the state now; with the controller in the
            # loop, realtime publishes it in the loop's slack after the tick's work (tooling, off the critical
            # path), and lockstep after the controller's step (its mirrored command goes out before the state)
            deferred = publish and tooling
            if in_loop is None:
                if publish:
                    self._publish_state(state)
                self._mark_state(state.stamp)
            else:
                self._mark_state(state.stamp)
                self._step_in_loop(in_loop, state)
                self._take_in_loop_logs(in_loop, tooling)
                if publish and not deferred:
                    in_loop.in_loop_mirror()
                    self._publish_state(state)
            with self.command_arrived:
                # realtime: give a streaming controller a short, deadline-bounded chance to answer this tick.
                # Waiting on the condition also hands the GIL to the executor thread, which takes the
                # commands; a loop running behind schedule would otherwise starve it while it counts ticks
                # towards the watchdog (measured: watchdog trips with a controller answering every tick).
                if (
                    realtime
                    and in_loop is None
                    and self.realtime_command_wait > 0
                    and self._controller_streaming()
                ):
                    limit = min(
                        tick_start + self.realtime_command_wait,
                        next_deadline + self.period - 0.5 * self.period,
                    )
                    while self.latest_command_stamp < state.stamp - 1e-9 and self._controller_streaming():
                        remaining = limit - time.perf_counter()
                        if remaining <= 0:
                            self.realtime_commands_late += 1
                            break
                        self.command_arrived.wait(remaining)
                # lockstep: while a controller streams commands (accepted or not), it sets the pace
                waited = not realtime and self._controller_streaming()
                if waited:
                    deadline = time.perf_counter() + self.lockstep_timeout
                    while self.latest_command_stamp < state.stamp - 1e-9 and self._controller_streaming():
                        remaining = deadline - time.perf_counter()
                        if remaining <= 0:
                            break
                        self.command_arrived.wait(remaining)
                # lockstep: every peer acknowledges the tick (its outputs for it are published) before time
                # moves
                dropped: list[str] = []
                if not realtime and publish and self.peers.acked:
                    deadline = time.perf_counter() + self.peer_timeout
                    while missing := self.peers.missing(state.stamp):
                        if not (self._running and rclpy.ok(context=self.context)):
                            break  # shutting down: nobody to wait for
                        remaining = deadline - time.perf_counter()
                        if remaining <= 0:
                            self.peers.drop(missing)
                            dropped = missing
                            break
                        self.command_arrived.wait(min(remaining, 0.05))
                # counted only when the tick goes ahead without its command: a controller that is a peer
                # acknowledges after commanding, so a slow answer is waited for above and not counted
                if waited and self.latest_command_stamp < state.stamp - 1e-9 and self._controller_streaming():
                    self.lockstep_timeouts += 1
                command = self.core.update(state.q, state.dq, tilt_from_quat(state.imu_quat))
                self._mark_applied()
                mode, reason = self.core.mode, self.core.mode_reason
                switches = self._finished_switches(state.stamp)
                push, self._pending_push = self._pending_push, None
                if push is not None:
                    self.backend.push(push)  # type: ignore[attr-defined]
            if dropped:
                self.get_logger().error(
                    f"lockstep: peers {dropped} did not acknowledge t = {state.stamp:.3f} s within "
                    f"{self.peer_timeout:g} s: dropped (the run is no longer reproducible)"
                )
                self._publish_lockstep()
            self.backend.write(command)
            # the push, if any, went to the backend above; the step from here on sees only this tick's inputs
            if physics_beside:
                self.backend.start_advance(self.period)  # type: ignore[attr-defined]
            if self.in_loop_estimator is not None:
                self._estimator_correct()  # the tick's kinematic update, off the state -> command path
                if publish and not deferred:
                    self._publish_estimate()  # /odom of this tick (realtime: in the slack, below)
            if deferred:
                if self._tooling_pending is not None:
                    self.tooling_superseded += 1
                self._tooling_pending = (state, 0)
            if tooling:  # realtime, a controller in the loop: in the slack (a JSON message and a log line)
                self._switches_pending.extend(switches)
            else:
                for rec in switches:
                    self._publish_switch(rec)
            if push is not None:
                self._publish_push(push.force, state.stamp)
                self._push_end_tick = self.core.tick + round(push.duration / self.period) - 1
            if not physics_beside:
                self.backend.advance(self.period)
            end = self._push_end_tick
            if end is not None and self.core.tick >= end and not getattr(self.backend, "push_active", False):
                self._push_end_tick = None
                self._publish_push((0.0, 0.0, 0.0), self.backend_time())
            self.stats.record_sim_time(self.backend_time())
            if mode != self._last_mode:
                self._publish_mode(mode, reason, defer_log=tooling)
            now = time.perf_counter()
            if now - last_roll >= 1.0:
                self.stats.roll()
                last_roll = now
            # diagnostics at 1 Hz: of wall time in realtime; in lockstep on every whole second of simulated
            # time (the same ticks in every run, whatever the machine's speed), before that tick's state
            if realtime:
                diag_due = now - last_diag >= 1.0
            else:
                second = math.floor(self.backend_time() + 1e-9)
                diag_due, last_second = second != last_second, second
            if diag_due or mode != self._last_mode:
                if tooling:
                    # in the slack (below), like the tooling streams; a mode change too (the mode topic went
                    # out above): publishing the three nodes' diagnostics in the tick cost up to 2.3 ms
                    if not self._diag_pending:  # (else the last second's are still going out)
                        self._diag_pending = [0, 1, 2]
                else:
                    self._publish_all_diagnostics()
                last_diag = now
            self._last_mode = mode
            if self.sim_duration > 0 and self.backend_time() >= self.sim_duration:
                while self._switches_pending:
                    self._publish_switch(self._switches_pending.pop(0))
                while self._logs_pending:
                    self._log_info(self._logs_pending.pop(0))
                self._publish_all_diagnostics()
                self.get_logger().info(f"sim_duration_s reached ({self.sim_duration} s): stopping")
                self.context.try_shutdown()
                return
            if realtime:
                next_deadline += self.period
                # the simulator's state after this step is the next tick's: its ground truth, if it publishes
                truth_due = tooling and self.core.tick % self.publish_every == 0
                pending = (
                    self._tooling_pending is not None
                    or self._diag_pending
                    or self._switches_pending
                    or self._logs_pending
                )
                if pending or truth_due:
                    self._publish_in_slack(next_deadline, truth_due)
                done = time.perf_counter()
                if done > next_deadline:
                    self.stats.record_overrun()
                    if done > next_deadline + self.period:  # far behind: skip missed ticks, don't burst
                        next_deadline = done
                if collector is not None:
                    collector.maybe_collect(next_deadline)
            elif collector is not None:
                collector.maybe_collect(math.inf)

    def _publish_in_slack(self, deadline: float, truth_due: bool) -> None:
        """Loop thread, realtime, a controller in the loop, after the tick's work (command written, physics
        stepped): the tooling streams of the newest publishing tick, one at a time (``/joint_states``,
        ``/imu/data``, ``/clock``, the mirrored command, the in-loop estimator's ``/odom`` and contacts), each
        only if the slack before ``deadline`` (perf_counter s) holds it (the decaying peak of its past
        publications); the rest wait for a later tick's slack (``tooling_deferred``), and a newer publishing
        tick supersedes them (``tooling_superseded``). ``truth_due``: the next tick publishes, and the
        simulator's state after this tick's step is its state: the ground truth and contact wrenches go out
        now, stamped with its time, if the slack holds them (else that sample is dropped:
        ``tooling_truth_dropped``). Then the diagnostics (1 Hz and on a mode change) and the ``~/switch``
        records, when due and the slack holds them."""
        streams = self._tick_streams
        if self._tooling_pending is not None:
            state, i = self._tooling_pending
            while i < len(streams):
                if not self._fits(deadline, i):
                    self._tooling_pending = (state, i)
                    self.tooling_deferred += 1
                    if truth_due:  # dropped too (the tick's streams go first), and counted
                        self.tooling_truth_dropped += 1
                    return
                self._timed(i, streams[i], state)
                i += 1
            self._tooling_pending = None
            self.tooling_published += 1
        truth, diag = len(streams), len(streams) + 1  # their indices in _tooling_costs
        if truth_due:
            if self._fits(deadline, truth):
                self._timed(truth, self._publish_truth, None)  # None: stamped with the simulator's time
            else:
                self.tooling_truth_dropped += 1
        # the three diagnostics in turn, stage by stage, each stage when the slack holds it (else a later
        # tick's slack): together they cost more than a tick's slack with the WBC in the loop (measured
        # 1.5-1.9 ms; the driver's and the WBC node's alone 0.6-0.9 ms each)
        while self._diag_pending:
            part = self._diag_pending[0]
            if self._diag_stages is None:
                self._diag_stages, self._diag_stage = self._diagnostics_part(part), 0
            stage = diag + _DIAG_STAGES * part + min(self._diag_stage, _DIAG_STAGES - 1)
            if not self._fits(deadline, stage):
                break
            self._timed(stage, self._next_diagnostics_stage, None)
        switch = diag + 3 * _DIAG_STAGES
        while self._switches_pending and self._fits(deadline, switch):
            self._timed(switch, self._publish_switch, self._switches_pending.pop(0))
        while self._logs_pending and self._fits(deadline, switch + 1):
            self._timed(switch + 1, self._log_info, self._logs_pending.pop(0))

    def _log_info(self, line: tuple[Any, str]) -> None:
        line[0].info(line[1])

    def _take_in_loop_logs(self, node: Any, tooling: bool) -> None:
        """Loop thread: the in-loop controller's log lines (``in_loop_logs``), for the slack (``tooling``) or
        now."""
        lines = getattr(node, "in_loop_logs", None)
        while lines:
            line = (node.get_logger(), lines.pop(0))
            if tooling:
                self._logs_pending.append(line)
            else:
                self._log_info(line)

    def _timed(self, stream: int, publish: Any, arg: Any) -> None:
        """``publish(arg)``; its duration updates the decaying peak cost of tooling ``stream``. One sample
        at most doubles the peak: a single preempted publication (the VM, the GC) must not hold the stream
        back for hundreds of ticks, while a cost that stays high reaches the peak in a few publications."""
        start = time.perf_counter()
        publish(arg)
        costs = self._tooling_costs
        peak = costs[stream]
        costs[stream] = max(min(time.perf_counter() - start, 2.0 * peak), 0.99 * peak)

    def _publish_mirror(self, _state: Any) -> None:
        """The in-loop controller's latest command on its ``~/joint_commands`` (tooling)."""
        if self.in_loop is not None:
            self.in_loop.in_loop_mirror()

    def _fits(self, deadline: float, stream: int) -> bool:
        """The slack before ``deadline`` (perf_counter s) holds a publication of tooling ``stream``; if not,
        its expected cost decays (one slow publication must not hold the stream back for good)."""
        if deadline - time.perf_counter() >= self._tooling_costs[stream] + self.spin_margin:
            return True
        self._tooling_costs[stream] *= 0.99
        return False

    def _estimator_correct(self) -> None:
        """Loop thread, the command written: the in-loop estimator's leg-kinematics update of this tick."""
        try:
            self.in_loop_estimator.in_loop_correct()
        except Exception as exc:  # the next prediction goes on from the prior; the WBC refuses an aging one
            self.get_logger().error(f"in-loop estimator failed: {exc!r}", throttle_duration_sec=1.0)

    def _publish_all_diagnostics(self) -> None:
        """``/diagnostics`` of the driver and of the nodes in its loop (in-loop controller, estimator)."""
        self._diag_pending, self._diag_stages = [], None
        for part in range(3):
            for _ in self._diagnostics_part(part):
                pass

    def _next_diagnostics_stage(self, _arg: Any = None) -> None:
        """Loop thread, in the slack: the next stage of the diagnostics in progress."""
        assert self._diag_stages is not None
        try:
            next(self._diag_stages)
            self._diag_stage += 1
        except StopIteration:
            self._diag_pending.pop(0)
            self._diag_stages = None

    def _diagnostics_part(self, part: int) -> Iterator[None]:
        """The stages of one of the diagnostics published from the loop (each ``next`` runs one): the
        driver's (0), the in-loop controller's (1), the in-loop estimator's (2; each only where there is one,
        in stages where the node offers ``in_loop_diagnostics_stages``, else in one)."""
        if part == 0:
            yield from self._diagnostics_stages()
            return
        node = self.in_loop if part == 1 else self.in_loop_estimator
        stages = getattr(node, "in_loop_diagnostics_stages", None)
        if stages is not None:
            yield from stages()
            return
        publish = getattr(node, "in_loop_diagnostics", None)
        if publish is not None:
            publish()

    def _publish_estimate(self, _state: Any = None) -> None:
        """The in-loop estimator's outputs (``/odom``, contacts, its diagnostics) for its latest tick."""
        if self.in_loop_estimator is not None:
            self.in_loop_estimator.in_loop_publish()

    def _mark_state(self, stamp: float) -> None:
        """Loop thread: the state of ``stamp`` went out (published, or handed to the in-loop controller)."""
        key = round(stamp * 1e9)
        self._state_out[key] = time.perf_counter()
        self._state_keys.append(key)
        if len(self._state_keys) > 256:
            self._state_out.pop(self._state_keys.popleft(), None)

    def _mark_applied(self) -> None:
        """Loop thread, lock held, after the core's update: a command answering a state not yet answered was
        applied now; its latency from that state going out is recorded (``state_to_command_us_*``)."""
        cmd = self.core.last_command
        if cmd is None or self.core.mode != DriverMode.ACTIVE:
            return
        key = round(cmd.stamp * 1e9)
        if key <= self._last_applied_key:
            return
        self._last_applied_key = key
        sent = self._state_out.get(key)
        if sent is not None:
            self.state_to_command.add((time.perf_counter() - sent) * 1e6)

    def _step_in_loop(self, controller: InLoopController, state: Any) -> None:
        """Loop thread: the in-loop controller answers this tick's state; its command goes to the core as a
        ``/joint_commands`` message would (lockstep needs no wait: the answer is there)."""
        t0 = time.perf_counter()
        estimate = None
        try:
            if self.in_loop_estimator is not None:  # the estimator's node first, as /odom before the WBC
                estimate = self.in_loop_estimator.in_loop_predict(
                    state.stamp,
                    state.gyro,
                    state.accel if state.accel is not None else _GRAVITY_SPECIFIC_FORCE,
                    state.imu_quat,
                    state.q,
                    state.tau if state.tau is not None else np.zeros_like(state.q),
                    state.dq,
                )
        except Exception as exc:  # no estimate this tick: the WBC refuses the stale one it has
            self.get_logger().error(f"in-loop estimator failed: {exc!r}", throttle_duration_sec=1.0)
        view = InLoopState(
            stamp=state.stamp,
            q=state.q,
            dq=state.dq,
            imu_quat=state.imu_quat,
            gyro=state.gyro,
            driver_mode=self.core.mode.value,
            accel=state.accel,
            tau=state.tau,
            estimate=estimate,
        )
        try:
            command = controller.in_loop_step(view)
        except CommandError as exc:
            command = None
            with self.lock:
                self.core.refuse(str(exc))
            self.get_logger().warning(f"refused the in-loop command: {exc}", throttle_duration_sec=1.0)
        except Exception as exc:  # a failing controller must not take the loop (and its safety) down
            command = None
            with self.lock:
                if self.core.mode != DriverMode.DAMPING:
                    self.core.fault(f"in-loop controller failed: {exc!r}")
                    self.get_logger().error(f"in-loop controller failed: {exc!r}; damping")
        self.stats.record_controller(time.perf_counter() - t0)
        if command is None:
            return
        with self.command_arrived:
            self.core.submit(command)
            self.latest_command_stamp = max(self.latest_command_stamp, command.stamp)
            self.last_seen_command_tick = self.core.tick

    _joy_tick = 0

    def _check_backend(self) -> None:
        """Loop thread: a hardware backend's link fault latches damping; motors that do not follow block
        activation; the robot's remote goes out on /joy (every 10 ticks)."""
        fault = getattr(self.backend, "link_fault", None)
        blocker = getattr(self.backend, "activation_blocker", None) or ""
        with self.lock:
            if fault and self.core.mode != DriverMode.DAMPING:
                self.core.fault(fault)
            if blocker != self.core.activation_block:
                self.core.activation_block = blocker
                if blocker:
                    self.get_logger().error(f"refusing to go active: {blocker}")
                else:
                    self.get_logger().info("the motors follow the commands again: activation allowed")
        if self.pub_joy is not None:
            self._joy_tick += 1
            if self._joy_tick % 10 == 0:
                remote = self.backend.remote()  # type: ignore[attr-defined]
                if remote is not None:
                    self.pub_joy.publish(_remote_to_joy(remote, self.backend_time()))

    def _finished_switches(self, stamp: float) -> list[Any]:
        """Loop thread, lock held: stamp a switch made this tick; the switches whose blend ended."""
        recs = self.core.switches
        if recs and recs[-1].tick == self.core.tick - 1 and math.isnan(recs[-1].t):
            recs[-1].t = stamp
        done = [r for r in recs if r.done and not r.published]
        for r in done:
            r.published = True
        return done

    def _publish_switch(self, rec: Any) -> None:
        """``~/switch``: one controller switch and its torque steps (fractions of the effort limits)."""
        data = {
            "t": round(rec.t, 6),
            "from": rec.old,
            "to": rec.new,
            "unblended_step": round(rec.unblended_step, 4),
            "unblended_joint": rec.unblended_joint,
            "step_at_switch": round(rec.step_at_switch, 4),
            "step_joint": rec.step_joint,
            "max_step": round(rec.max_step, 4),
            "max_step_joint": rec.max_step_joint,
            "blend_ticks": rec.blend_ticks,
            "bound": self.settings.switch_max_step,
        }
        self.pub_switch.publish(String(data=json.dumps(data)))
        self.get_logger().info(
            f"switch {rec.old} -> {rec.new} at t = {rec.t:.3f} s: torque step {rec.step_at_switch:.3f} "
            f"of the effort limit at the switch ({rec.step_joint}), {rec.max_step:.3f} at most over "
            f"{max(rec.blend_ticks, 1)} ticks ({rec.max_step_joint}); unblended {rec.unblended_step:.3f} "
            f"({rec.unblended_joint}); bound {self.settings.switch_max_step:g}"
        )

    def _controller_streaming(self) -> bool:
        """A command was seen within the last ``watchdog_ticks`` ticks (call with the lock held)."""
        return self.core.tick - self.last_seen_command_tick <= self.settings.watchdog_ticks

    def backend_time(self) -> float:
        """Backend clock (s): simulated time for simulators."""
        return float(getattr(self.backend, "time", time.monotonic()))

    def _publish_state(self, state: Any) -> None:
        """The tick's state on ``/joint_states`` and ``/imu/data``; simulated: ``/clock`` and, while someone
        listens, the ground truth and contact wrenches."""
        self._publish_joints(state)
        self._publish_imu(state)
        if self.backend.simulated:
            self._publish_clock(state)
            self._publish_truth(state)

    def _stamp_msg(self, stamp: float) -> Any:
        """``stamp`` (s) as a ``builtin_interfaces/Time``, built once for all the streams of a tick."""
        if stamp != self._stamp_cache[0]:
            self._stamp_cache = (stamp, to_time_msg(stamp))
        return self._stamp_cache[1]

    def _publish_joints(self, state: Any) -> None:
        msg = self._joint_msg
        msg.header.stamp = self._stamp_msg(state.stamp)
        msg.position = state.q.tolist()
        msg.velocity = state.dq.tolist()
        msg.effort = state.tau.tolist()
        self.pub_joints.publish(msg)

    def _publish_imu(self, state: Any) -> None:
        imu = self._imu_msg
        imu.header.stamp = self._stamp_msg(state.stamp)
        if self.publish_orientation:
            w, x, y, z = state.imu_quat
            imu.orientation.w, imu.orientation.x, imu.orientation.y, imu.orientation.z = w, x, y, z
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = state.gyro.tolist()
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = state.accel.tolist()
        self.pub_imu.publish(imu)

    def _publish_clock(self, state: Any) -> None:
        if self.backend.simulated:
            self.pub_clock.publish(Clock(clock=self._stamp_msg(state.stamp)))

    def _publish_truth(self, state: Any | None) -> None:
        """Simulated, while someone listens: the simulator's current ground truth and contact wrenches,
        stamped with ``state``'s stamp (the state they belong to) or, with ``None`` (published after the
        physics stepped past the tick's state), with the simulator's own time."""
        if not self.backend.simulated or not self._truth_subscribed():
            return  # nobody listens: the ground truth and contact wrenches are not computed
        truth = self.backend.ground_truth()
        if truth is None:
            return
        stamp = self._stamp_msg(self.backend_time() if state is None else state.stamp)
        odom = self._truth_msg  # reused, like the IMU's: building a message costs as much as publishing it
        odom.header.stamp = stamp
        p = odom.pose.pose.position
        p.x, p.y, p.z = truth.position.tolist()
        o = odom.pose.pose.orientation
        o.w, o.x, o.y, o.z = truth.quat.tolist()
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        lin.x, lin.y, lin.z = truth.linear_velocity_body.tolist()
        ang.x, ang.y, ang.z = truth.angular_velocity_body.tolist()
        self.pub_truth.publish(odom)
        for side, wrench in truth.contacts.items():
            w = self._truth_wrench_msgs[side]
            w.header.stamp = stamp
            w.header.frame_id = wrench.frame
            w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = wrench.force.tolist()
            w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = wrench.torque.tolist()
            self.pub_contacts[side].publish(w)

    _truth_checked = -math.inf
    _truth_wanted = True

    def _truth_subscribed(self) -> bool:
        """Someone reads ``/sim/ground_truth`` or a contact topic (checked every tick in lockstep, every
        0.1 s of wall time in realtime)."""
        now = time.perf_counter()
        if self.clock_mode == "lockstep" or now - self._truth_checked >= 0.1:
            self._truth_checked = now
            self._truth_wanted = self.pub_truth.get_subscription_count() > 0 or any(
                pub.get_subscription_count() > 0 for pub in self.pub_contacts.values()
            )
        return self._truth_wanted

    def _publish_push(self, force: tuple[float, float, float], stamp: float) -> None:
        """A push starting (its force) or ending (zero force) at ``stamp`` (s, simulated time)."""
        if force != (0.0, 0.0, 0.0):
            self.pushes += 1
        msg = WrenchStamped()
        msg.header.stamp = to_time_msg(stamp)
        msg.header.frame_id = "world"
        msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = (float(v) for v in force)
        self.pub_push.publish(msg)

    def _publish_mode(self, mode: DriverMode, reason: str, defer_log: bool = False) -> None:
        """The new mode on ``~/mode`` at once, and a log line; ``defer_log`` (realtime, a controller in the
        loop): an info line waits for the loop's slack (a log line cost 1.5-1.9 ms in the tick, an overrun at
        each mode change); damping is logged at once."""
        self.pub_mode.publish(String(data=mode.value))
        if mode == DriverMode.DAMPING:
            self.get_logger().error(f"mode -> {mode.value} ({reason})")
        elif defer_log:
            self._logs_pending.append((self.get_logger(), f"mode -> {mode.value} ({reason})"))
        else:
            self.get_logger().info(f"mode -> {mode.value} ({reason})")

    def _publish_diagnostics(self) -> None:
        for _ in self._diagnostics_stages():
            pass

    def _diagnostics_stages(self) -> Iterator[None]:
        """The driver's ``/diagnostics`` in three stages (each ``next`` runs one): its values, the message,
        the publication."""
        with self.lock:
            core = self.core
            c = core.counters
            values = {
                "mode": core.mode.value,
                "mode_reason": core.mode_reason,
                "mode_entered_tick": core.mode_entered_tick,
                "tick": core.tick,
                "last_command_tick": core.last_command_tick,
                "watchdog_ticks": self.settings.watchdog_ticks,
                "gain_profile": self.settings.command_profile,
                "clock": self.clock_mode,
                "commands_accepted": c.commands_accepted,
                "commands_refused": c.commands_refused,
                "commands_ignored": c.commands_ignored,
                "last_refusal": c.last_refusal,
                "clamped_targets": c.clamped_targets,
                "watchdog_trips": c.watchdog_trips,
                "max_command_gap_ticks": c.max_command_gap_ticks,
                "estops": c.estops,
                "faults": c.faults,
                "lockstep_timeouts": self.lockstep_timeouts,
                "lockstep_peers": " ".join(self.peers.names),
                "lockstep_peer_timeouts": self.peers.timeouts,
                "paused": self.paused,
                "pushes": self.pushes,
                "respawns": self.respawns,
                "realtime_commands_late": self.realtime_commands_late,
                "tooling_published": self.tooling_published,
                "tooling_deferred": self.tooling_deferred,
                "tooling_superseded": self.tooling_superseded,
                "tooling_truth_dropped": self.tooling_truth_dropped,
            }
        values.update(self.stats.summary())
        lat = self.state_to_command
        values["state_to_command_us_p50"], values["state_to_command_us_p99"] = lat.percentiles((50.0, 99.0))
        values["state_to_command_us_max"] = round(lat.max, 1)
        values["state_to_command_samples"] = lat.n
        values["in_loop_controller"] = self.in_loop_kind
        values["publish_every_ticks"] = self.publish_every
        values.update(self.rt_applied.as_dict())
        backend_diag = getattr(self.backend, "diagnostics", None)
        if backend_diag is not None:
            values.update({f"hw_{k}": v for k, v in backend_diag().items()})
        yield
        status = DiagnosticStatus(
            name="robot_driver: loop", hardware_id=f"{self.config.name}/{self.hardware}"
        )
        if core.mode == DriverMode.DAMPING:
            status.level, status.message = DiagnosticStatus.ERROR, f"damping: {core.mode_reason}"
        elif core.activation_block:
            status.level, status.message = (
                DiagnosticStatus.WARN,
                f"{core.mode.value}; {core.activation_block}",
            )
        elif self.stats.overruns > 0 and self.clock_mode == "realtime":
            status.level, status.message = (
                DiagnosticStatus.WARN,
                f"{core.mode.value}, {self.stats.overruns} overruns",
            )
        else:
            status.level, status.message = DiagnosticStatus.OK, core.mode.value
        status.values = [KeyValue(key=k, value=_fmt(v)) for k, v in values.items()]
        statuses = [status]
        if self.in_loop is not None:
            # named after the controller's node (tools that read the driver's status by its name prefix
            # see the loop's status alone)
            ctl = DiagnosticStatus(
                name=f"{self.in_loop.get_name()}: in the driver's loop",  # type: ignore[attr-defined]
                hardware_id=f"{self.config.name}/{self.in_loop_kind}",
            )
            keys = [k for k in values if k.startswith("controller_")]
            over = values.get("controller_overruns", 0)
            ctl.level = DiagnosticStatus.WARN if over else DiagnosticStatus.OK
            ctl.message = f"{self.in_loop_kind}: {over} steps over half a period"
            ctl.values = [KeyValue(key=k, value=_fmt(values[k])) for k in keys]
            statuses.append(ctl)
        msg = DiagnosticArray(status=statuses)
        msg.header.stamp = to_time_msg(self.backend_time())
        yield
        self.pub_diag.publish(msg)

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


#: /joy layout of the robot's remote (joy_node's Xbox layout, which modes/joy_mapping.py expects): button
#: index -> remote button; axes 0 left stick left+, 1 left stick up+, 2 unused, 3 right stick left+,
#: 4 right stick up+
JOY_BUTTONS = (
    "A",
    "B",
    "X",
    "Y",
    "L1",
    "R1",
    "select",
    "start",
    "L2",
    "R2",
    "up",
    "down",
    "left",
    "right",
    "F1",
    "F2",
)


def _remote_to_joy(remote: Any, stamp: float) -> Joy:
    """sensor_msgs/Joy of the robot's remote (``JOY_BUTTONS`` order; sticks with joy_node's signs)."""
    msg = Joy()
    msg.header.stamp = to_time_msg(stamp)
    msg.header.frame_id = "wireless_remote"
    msg.axes = [float(-remote.lx), float(remote.ly), 0.0, float(-remote.rx), float(remote.ry)]
    msg.buttons = [int(remote.buttons.get(name, False)) for name in JOY_BUTTONS]
    return msg


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack robot_driver``."""
    # The loop thread and the executor thread (commands, services) share the GIL; with Python's default 5 ms
    # switch interval a busy loop thread can delay command callbacks by several ticks.
    sys.setswitchinterval(5e-4)

    return run_node(RobotDriverNode, args, "robot_driver")


if __name__ == "__main__":
    raise SystemExit(main())
