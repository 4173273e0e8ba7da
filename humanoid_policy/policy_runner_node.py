"""Policy runner node: a learned locomotion policy (ONNX, described by a manifest) driving the robot driver.

Topics:

- subscribes ``/joint_states`` (sensor_msgs/JointState), ``/imu/data`` (sensor_msgs/Imu: orientation and
  angular velocity in the IMU frame), ``/cmd_vel`` (geometry_msgs/Twist: linear.x, linear.y in m/s and
  angular.z in rad/s, heading frame; clipped to the manifest's ranges), ``/robot_driver/mode`` (latched);
  it never reads ``/sim/*``;
- publishes ``/joint_commands`` (sensor_msgs/JointState: position = q*, stamped with the joint state it
  answers,
  once per joint state, so the driver's lockstep and watchdog see a steady stream), ``~/state``
  (std_msgs/String, latched) and ``/diagnostics``.

Services (std_srvs/Trigger): ``~/start`` (fresh policy state: last action, history, gait phase and a recurrent
network's state; with ``autostart: false`` the driver's gains are set again first), ``~/stop`` (the driver
ramps back to ``hold``), ``~/reset`` (leave ``fault``; a fresh policy state and fresh statistics: the
policy steps, inference times, largest gaps between and in the callbacks, refusal and lockstep counters of the
diagnostics and of the next FAULT message start again from zero). The mode manager calls it in its
``reset`` and ``respawn``.

Gains: at start-up the node sets the driver's ``command_kp`` / ``command_kd`` parameters (robot joint order)
to the manifest's PD gains through ``<driver>/set_parameters_atomically``, and sends nothing before the
driver accepted them. Faults (stale IMU, non-finite state, NaN action, driver in damping) stop the command
stream; for a NaN action or stale input the node also calls ``<driver>/estop``, so the joints are damped
at once (the driver's watchdog would do it ``watchdog_ticks`` later anyway).

In the driver's loop (driver parameter ``in_loop_controller: policy``): the driver creates this node in its
own process with ``in_loop`` set; its loop thread calls :meth:`PolicyRunnerNode.in_loop_step` every tick
with the measured state (no ``/joint_states`` / ``/imu/data`` subscriptions, no lockstep peer: the driver
calls it synchronously), the gains go to the driver directly, and the commands are mirrored on
``~/joint_commands`` for tooling. Services, ``/cmd_vel``, ``~/state`` and ``/diagnostics`` are as above.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from rcl_interfaces.srv import SetParametersAtomically
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from humanoid_control.controllers.host import ControllerHost
from humanoid_control.controllers.hosted import HostedInLoopMixin
from humanoid_control.model.joint_order import JointOrder
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, declare, from_time_msg, run_node, to_time_msg
from humanoid_control.ros.service_caller import ServiceCaller
from humanoid_policy.controller import PolicyController
from humanoid_policy.manifest import load_policy
from humanoid_policy.policy_core import PolicyCore
from humanoid_policy.policy_runner_diagnostics import PolicyDiagnosticsMixin
from humanoid_policy.policy_runner_gains import PolicyGainsMixin
from humanoid_policy.policy_runner_in_loop import PolicyInLoopMixin
from humanoid_policy.policy_runner_inputs import PolicyInputsMixin
from humanoid_policy.runner import PolicyRunner, RunnerOutput, RunnerSettings, RunnerState


class PolicyRunnerNode(
    PolicyInputsMixin,
    PolicyGainsMixin,
    PolicyInLoopMixin,
    HostedInLoopMixin,
    PolicyDiagnosticsMixin,
    QuietNode,
):
    """ROS 2 adapter of :class:`PolicyRunner`; its gains hand-shake, input callbacks, in-loop methods and
    diagnostics are in its base classes (:mod:`.policy_runner_gains`, :mod:`.policy_runner_inputs`,
    :mod:`.policy_runner_in_loop`, :mod:`.policy_runner_diagnostics`)."""

    def __init__(
        self, in_loop_gains: Callable[[list[float], list[float]], str | None] | None = None, **kwargs: Any
    ) -> None:
        """``in_loop_gains``: set by the driver that calls this node from its loop (see the module
        docstring): sets the driver's ``command_kp`` / ``command_kd``, returns None or why it refused."""
        super().__init__("policy_runner", **kwargs)
        self.in_loop_gains = in_loop_gains
        self.in_loop = in_loop_gains is not None
        self._lock = threading.RLock()  # in the loop: the loop thread and the executor share the runner
        self._last_target: tuple[float, np.ndarray] | None = None
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        policy = declare(
            self,
            "policy",
            "holosoma/g1_ppo",
            "policy name (config/policies), or a path: manifest, ONNX, Isaac Lab IO descriptors, deploy.yaml",
            read_only=True,
        )
        policy_onnx = declare(
            self,
            "policy_onnx",
            "auto",
            "the ONNX of an Isaac Lab IO-descriptor or deploy YAML policy; auto: the one beside it "
            "(<task>.onnx, policy.onnx, ../exported/policy.onnx)",
            read_only=True,
        )
        settings = RunnerSettings(
            ramp_s=declare(
                self, "ramp_s", 1.0, "ramp to the default pose when the driver is not holding (s)", 0.0, 30.0
            ),
            autostart=declare(self, "autostart", True, "run the policy as soon as the robot stands ready"),
            max_imu_age_s=declare(
                self,
                "max_imu_age_s",
                0.05,
                "IMU sample older than the joint state by more -> fault (s)",
                0.001,
                5.0,
            ),
            command_timeout_s=declare(
                self,
                "command_timeout_s",
                1.0,
                "a /cmd_vel older than this (s, robot time) counts as zero; 0 keeps the last forever",
                0.0,
                60.0,
            ),
            command_timeout_action=declare(
                self,
                "command_timeout_action",
                "zero",
                "zero: a /cmd_vel older than command_timeout_s counts as zero; hold: once one came, such a "
                "silence (after hold_after_s, walking on a zero command meanwhile) stops the policy and the "
                "driver holds the default pose (under the mode manager)",
                read_only=True,
            ),
            hold_after_s=declare(
                self,
                "hold_after_s",
                3.0,
                "command_timeout_action hold: /cmd_vel silence (s, robot time) after which the policy stops",
                0.0,
                60.0,
            ),
        )
        if settings.command_timeout_action not in ("zero", "hold"):
            raise ValueError(
                f"parameter command_timeout_action: '{settings.command_timeout_action}' is not zero or hold"
            )
        self.driver = declare(
            self, "driver", "/robot_driver", "robot driver node name", read_only=True
        ).rstrip("/")
        state_qos = declare(
            self,
            "state_reliability",
            "reliable",
            "QoS of the /joint_states and /imu/data readers: reliable (lockstep) or best_effort (realtime: "
            "latest-wins, no head-of-line blocking behind a lost sample)",
            read_only=True,
        )
        if state_qos not in ("reliable", "best_effort"):
            raise ValueError(f"parameter state_reliability: '{state_qos}' is not reliable or best_effort")
        self.estop_on_fault = declare(self, "estop_on_fault", True, "call <driver>/estop on a fault")
        threads = declare(self, "inference_threads", 1, "onnxruntime intra-op threads", 1, 16, read_only=True)
        self.lockstep = declare(
            self,
            "lockstep",
            False,
            "lockstep peer of the driver: each joint state waits for the IMU sample of the same stamp, and "
            "each "
            "tick is acknowledged on /lockstep/ack once its command is out",
            read_only=True,
        )
        if self.in_loop:
            self.lockstep = False  # called synchronously by the driver's loop: not a peer
        self.sync_timeout = declare(
            self,
            "sync_timeout_s",
            1.0,
            "lockstep: wall time a joint state waits for its IMU sample before it runs with the latest (s)",
            0.001,
            60.0,
        )

        self.robot = load_robot_config(robot)
        onnx = None if policy_onnx in ("", "auto") else policy_onnx
        self.manifest = load_policy(policy, self.robot, onnx)  # every contract check here, before moving
        self.core = PolicyCore(self.manifest, self.robot, threads=threads)
        self.runner = PolicyRunner(self.core, settings)
        # the policy as a controller (its runner shared with this node): what the driver's loop calls, through
        # the same host as every controller (HostedInLoopMixin.in_loop_step)
        self.controller = PolicyController(runner=self.runner)
        self.host = ControllerHost(self.controller, self.robot, {}, autostart=True)
        self.host_lock = self._lock
        self._imu_refused_seen = 0
        self._step_wall = 0.0
        self.names = list(self.robot.joint_names)
        self.driver_mode: str | None = None
        self.imu_refused = 0
        self.states_refused = 0
        self.last_refusal = ""
        self.inference_us: list[float] = []
        # in the driver's loop: state-change log lines, emitted by the loop (in realtime in its slack: a log
        # line costs about 1-2 ms, more than a tick's slack)
        self.in_loop_logs: list[str] = []
        self._published_state = ""
        self._estop_sent = False
        self._last_diag = -1e9
        self._diag_t: float | None = None  # in the loop: the stamp of the last step (its diagnostics)
        self._last_cb_wall: float | None = None
        self.max_state_gap_ms = 0.0  # wall time between /joint_states callbacks (stalls show here)
        self.max_callback_ms = 0.0
        self.joint_order = JointOrder(self.names)
        self._zeros = [0.0] * len(self.names)
        self._pending_state: JointState | None = None  # lockstep: waiting for the IMU sample of its stamp
        self._pending_since = 0.0
        self.sync_timeouts = 0
        self._last_t = 0.0  # stamp of the last joint state processed (s): the time a /cmd_vel is taken at

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        if self.in_loop:  # commands mirrored for tooling (the driver takes them directly)
            self.pub_cmd = self.create_publisher(JointState, "~/joint_commands", reliable)
        else:
            self.pub_cmd = self.create_publisher(JointState, "/joint_commands", reliable)
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        stream = (
            tick_stream_qos(latched=self.lockstep)  # transient-local in lockstep: tick 0 is never lost
            if state_qos == "reliable"
            else QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        )
        self._stream_qos = stream
        self._state_subs: list[Any] = []
        self.create_subscription(Twist, "/cmd_vel", self._on_cmd_vel, 10)
        self.create_subscription(
            String,
            f"{self.driver}/mode",
            self._on_driver_mode,
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        # idle in realtime (started by the mode manager, not yet started or stopped): the 500 Hz state streams
        # are not read (measured: 28 % of a core for reading them while idle); in lockstep the runner is a
        # peer and reads every tick
        self._idle_unsubscribe = not self.in_loop and not self.lockstep and not self.runner.settings.autostart
        # in the driver's loop the loop hands each tick's state over: no state subscriptions
        if not self.in_loop and not self._idle_unsubscribe:
            self._subscribe_states()
        elif not self.in_loop:
            self.get_logger().info("idle until ~/start: /joint_states and /imu/data are not read until then")
            from rclpy.clock import Clock, ClockType

            self.create_timer(0.2, self._unsubscribe_when_idle, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.param_client = self.create_client(
            SetParametersAtomically, f"{self.driver}/set_parameters_atomically"
        )
        self.estop_client = self.create_client(Trigger, f"{self.driver}/estop")
        self.hold_client = self.create_client(Trigger, f"{self.driver}/hold")
        self._gain_request: Any = None
        # started by the mode manager (no autostart): ~/start sets the driver's gains before it answers, so
        # the start takes effect at the same tick in every lockstep run (the caller holds the clock)
        self._caller = (
            None
            if self.runner.settings.autostart or self.in_loop
            else ServiceCaller(
                self.context,
                f"{self.get_name()}_calls",
                {"gains": (SetParametersAtomically, f"{self.driver}/set_parameters_atomically")},
            )
        )
        from rclpy.clock import Clock, ClockType

        steady = Clock(clock_type=ClockType.STEADY_TIME)
        # cancelled once the driver took the gains, restarted by ~/start: in the driver's loop every wake of
        # the executor thread takes the GIL from the loop thread
        self._gains_timer = self.create_timer(0.2, self._request_gains, clock=steady)
        if self.lockstep:
            self.create_timer(0.05, self._expire_pending, clock=steady)
        # joins the driver's lockstep once the driver took the policy's gains: from then on every tick is
        # the same
        self.peer = LockstepPeer(self, self.lockstep, ready=lambda: self.runner.gains_ready)
        self._publish_state()
        # warm-up: the diagnostics built once, not published; the first statistics and message cost 10-15 ms
        # (numpy's and the message type's first use), which must not land in a tick's slack
        for _ in self._diagnostics_stages(None, publish=False):
            pass
        gc.collect()
        gc.freeze()  # long-lived objects out of the collector's way: shorter pauses in the 500 Hz callbacks
        self.get_logger().info(
            f"policy {self.manifest.name}: {self.manifest.onnx_path.name}, "
            f"{self.manifest.num_joints} joints, obs {self.manifest.obs_size}, {self.manifest.rate_hz:g} Hz"
            + (
                f", recurrent ({len(self.manifest.recurrent)} state tensors)"
                if self.manifest.recurrent
                else ""
            )
        )

    # ------------------------------------------------------------------ state streams
    def _subscribe_states(self) -> None:
        """Read ``/imu/data`` then ``/joint_states`` (created after ``/cmd_vel`` and the driver's mode, whose
        messages must be served first; docs/architecture.md, "Lockstep contract" rule 3)."""
        if self._state_subs:
            return
        self._state_subs = [
            self.create_subscription(Imu, "/imu/data", self._on_imu, self._stream_qos),
            self.create_subscription(JointState, "/joint_states", self._on_joint_states, self._stream_qos),
        ]

    def _unsubscribe_when_idle(self) -> None:
        """Realtime, no autostart: stop reading the state streams once the policy is stopped (``hold``)."""
        if self._state_subs and self.runner.state == RunnerState.HOLD and not self.runner.start_requested:
            for sub in self._state_subs:
                self.destroy_subscription(sub)
            self._state_subs = []
            self.runner.imu = None  # a stale sample must not count at the next start
            self._last_cb_wall = None
            self.get_logger().info("idle: /joint_states and /imu/data no longer read until ~/start")

    def _process(self, msg: JointState) -> None:
        """One tick: the joint state (and the IMU sample of its stamp, in lockstep) -> command, then the
        ack."""
        try:
            self._step(msg)
        finally:
            self.peer.ack(msg.header.stamp)

    def _step(self, msg: JointState) -> None:
        wall = time.perf_counter()
        state = self._reorder(msg)
        if state is None:
            return
        out = self._advance(from_time_msg(msg.header.stamp), state[0], state[1], wall)
        # a new state (ramp, run) goes out before the command it produced: an evaluator that starts its
        # script at the first command of a run without a ramp learns of a ramp first
        self._publish_state()
        if out.q_target is not None:
            effort = self._zeros if out.tau_ff is None else out.tau_ff.tolist()
            cmd = JointState(
                name=self.names, position=out.q_target.tolist(), velocity=self._zeros, effort=effort
            )
            cmd.header.stamp = msg.header.stamp
            self.pub_cmd.publish(cmd)
        self._after_step(msg.header.stamp, from_time_msg(msg.header.stamp), wall)

    def _advance(self, t: float, q: np.ndarray, dq: np.ndarray, wall: float) -> RunnerOutput:
        """The runner's update at stamp ``t`` (s) with the state in robot order: its output (the joint targets
        and feed-forward torques, or None)."""
        if self._last_cb_wall is not None and self.runner.state == RunnerState.RUN:
            self.max_state_gap_ms = max(self.max_state_gap_ms, (wall - self._last_cb_wall) * 1e3)
        self._last_cb_wall = wall
        self._last_t = t
        t0 = time.perf_counter()
        out = self.runner.update(t, q, dq, self.driver_mode)
        if out.policy_step is not None:
            self.inference_us.append((time.perf_counter() - t0) * 1e6)
            del self.inference_us[:-2000]
        return out

    def _after_step(self, stamp: Any, t: float, wall: float) -> None:
        """Hold / e-stop requests, the latched state and the diagnostics after a step."""
        if self.runner.hold_requested:
            self.runner.hold_requested = False
            self.get_logger().warning(f"{self.runner.reason}; asking {self.driver}/hold")
            if self.hold_client.service_is_ready():
                self.hold_client.call_async(Trigger.Request())
        if self.runner.state == RunnerState.FAULT and not self._estop_sent:
            self._estop_sent = True
            self.get_logger().error(
                f"FAULT: {self.runner.reason}; command stream stopped (largest gap between joint states "
                f"{self.max_state_gap_ms:.1f} ms, slowest callback {self.max_callback_ms:.1f} ms)"
            )
            if self.estop_on_fault and self.runner.reason != "the driver went to damping":
                if self.estop_client.service_is_ready():
                    self.estop_client.call_async(Trigger.Request())
                else:
                    self.get_logger().error(
                        f"{self.driver}/estop unavailable; the driver's watchdog will damp"
                    )
        self._publish_state()
        if self.runner.state == RunnerState.RUN:
            self.max_callback_ms = max(self.max_callback_ms, (time.perf_counter() - wall) * 1e3)
        if self.in_loop:
            self._diag_t = t  # the diagnostics go out off the critical path (in_loop_diagnostics)
        elif t - self._last_diag >= 1.0:
            self._last_diag = t
            self._publish_diagnostics(stamp if stamp is not None else to_time_msg(t))

    # ------------------------------------------------------------------ services
    def _on_start(self, req: Any, resp: Any) -> Any:
        with self._lock:
            return self._start(resp)

    def _start(self, resp: Any) -> Any:
        if not self.runner.settings.autostart and self.runner.state in (
            RunnerState.HOLD,
            RunnerState.WAIT_STATE,
        ):
            # switched by the mode manager: another controller may have changed the driver's gains since
            self.runner.gains_ready = False
            self._gains_timer.reset()
            if self._caller is not None:
                why = self._set_gains_now()
                if why is not None:
                    resp.success, resp.message = False, f"start: {why}"
                    return resp
        resp.success, resp.message = self.runner.start()
        if resp.success and not self.in_loop:
            self._subscribe_states()
        self._publish_state()
        return resp

    def _on_stop(self, _req: Any, resp: Any) -> Any:
        with self._lock:
            return self._stop(resp)

    def _stop(self, resp: Any) -> Any:
        was_running = self.runner.state in (RunnerState.RUN, RunnerState.RAMP)
        resp.success, resp.message = self.runner.stop()
        if was_running and self.hold_client.service_is_ready():
            self.hold_client.call_async(Trigger.Request())
        self._publish_state()
        return resp

    def _on_reset(self, _req: Any, resp: Any) -> Any:
        with self._lock:
            return self._reset(resp)

    def _reset(self, resp: Any) -> Any:
        self.runner.reset()
        self._estop_sent = False
        self._reset_statistics()
        resp.success, resp.message = True, "waiting for state; reset the driver too if it is damping"
        self._publish_state()
        return resp

    def _reset_statistics(self) -> None:
        """Fresh statistics (``~/reset``): what ``/diagnostics`` and the FAULT message report describes the
        run after the reset, not the earlier one."""
        self.runner.steps = 0
        self.inference_us.clear()
        self.max_state_gap_ms = 0.0
        self.max_callback_ms = 0.0
        self._last_cb_wall = None
        self.imu_refused = 0
        self.states_refused = 0
        self.last_refusal = ""
        self.sync_timeouts = 0

    # ------------------------------------------------------------------ outputs
    def _publish_state(self) -> None:
        state = self.runner.state.value
        if state != self._published_state:
            self._published_state = state
            self.pub_state.publish(String(data=state))
            text = f"state -> {state} ({self.runner.reason})"
            if self.in_loop:
                self.in_loop_logs.append(text)
            else:
                self.get_logger().info(text)

    @classmethod
    def in_loop_node(cls, driver: Any, kwargs: dict[str, Any]) -> PolicyRunnerNode:
        """The policy runner in the driver's loop (registered controller ``policy``): its gains set on the
        driver's parameters directly."""
        return cls(in_loop_gains=driver.set_gains_in_process, **kwargs)

    def close(self) -> None:
        """Leave the driver's lockstep (it stops waiting for this node)."""
        self.peer.leave()
        if self._caller is not None:
            with contextlib.suppress(Exception):
                self._caller.close()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack policy_runner``."""
    return run_node(PolicyRunnerNode, args, "policy_runner")


if __name__ == "__main__":
    raise SystemExit(main())
