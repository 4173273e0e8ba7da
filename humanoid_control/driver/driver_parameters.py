"""The robot driver's parameters: their declaration (names, defaults, descriptors, in this order) and what
the driver builds from them at start-up: the robot configuration, the safety core's settings and the core,
the hardware backend (with the simulated world's and the hardware link's parameters), the command gains, the
push and respawn settings and the real-time path's settings (``_declare_realtime``). A bad value raises a
``ValueError`` that names the parameter.

:class:`DriverParametersMixin` is a base of
:class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`, whose ``__init__`` calls
``_declare_parameters`` first; the parameters changed at run time are handled by ``_on_set_parameters``
(:mod:`humanoid_control.driver.driver_callbacks`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from humanoid_control.controllers.registry import NO_CONTROLLER, load_controller
from humanoid_control.driver.driver_core import DriverCore, DriverSettings
from humanoid_control.driver.in_loop import parse_node_parameters
from humanoid_control.hardware.base import RobotBackend
from humanoid_control.hardware.mujoco_sim import ImuNoise
from humanoid_control.hardware.push import PushLimits
from humanoid_control.hardware.registry import BACKENDS, HARDWARE_BACKENDS, create_backend
from humanoid_control.loop.realtime import (
    AUTO_PROCESS_PRIORITY,
    AUTO_THREAD_PRIORITY,
    RealtimeSettings,
    parse_cpus,
    parse_priority,
)
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import FrictionPatch
from humanoid_control.ros.node_utils import declare, declare_double_array

CLOCK_MODES = ("lockstep", "realtime")


class DriverParametersMixin:
    """The parameter declarations of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode` (a
    ROS node: ``self`` is the driver node)."""

    def _declare_parameters(self) -> tuple[float, int]:
        """Declare the driver's parameters, in their order, and build from them the robot configuration, the
        core and the backend; returns ``rate_hz`` and ``watchdog_ticks`` (for the loop statistics and the
        start-up log line). Bad values raise ``ValueError``."""
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
        declared = declare(
            self,
            "lockstep_peers",
            "",
            "lockstep: names of the peer nodes the launch starts, separated by spaces or commas ('' or "
            "'none': none declared); simulated time stays at 0 until each has joined",
            read_only=True,
        )
        self.declared_peers = [n for n in declared.replace(",", " ").split() if n != "none"]
        self.peer_startup_timeout = declare(
            self,
            "lockstep_startup_timeout_s",
            120.0,
            "lockstep: wall-clock wait for a declared peer to join and acknowledge its first tick (s); one "
            "that does not stops the run with an error naming it",
            1.0,
            3600.0,
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
        return rate, watchdog

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
