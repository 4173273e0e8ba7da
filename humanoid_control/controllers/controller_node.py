"""The generic node adapter: any registered controller as a ROS 2 node, or in the driver's loop.

``ros2 run humanoid_stack controller_node --ros-args -p controller:=<name>`` (the launch file's
``controller:=<name>`` for every registered controller that has no node of its own) hosts the controller
registered under ``<name>`` (:mod:`~humanoid_control.controllers.registry`) through a
:class:`~humanoid_control.controllers.host.ControllerHost`:

- parameters: ``controller``, ``robot``, ``lockstep``, ``autostart`` and every parameter the controller
  declares (with its description and range; read-only: a controller is configured once);
- in: ``/joint_states`` and ``/imu/data`` (paired by stamp: tick k is answered from both of tick k),
  ``/cmd_vel`` (geometry_msgs/Twist, base frame; the latest one is in each tick's state);
- out: ``/joint_commands`` (position, velocity, effort; stamped with the state it answers), ``~/state``
  (std_msgs/String, JSON, latched: on every start and stop), the controller's own ``state_topic`` where it
  has one (std_msgs/String, JSON, latched: whenever its ``topic_state`` version changes; the supervised
  controller's ``/supervisor/state``), ``/diagnostics`` (once a second of the driver's clock);
- services: ``~/start`` and ``~/stop`` (std_srvs/Trigger): activate at the next state, deactivate now;
- gains: what the controller's ``gains()`` asks for (a gain profile's name, or per-joint kp / kd) is set on
  the driver's parameters (``gain_profile``, ``command_kp`` / ``command_kd``; the parameter ``driver`` names
  the driver node) before the node answers any state; in lockstep it joins the driver's peers only once the
  driver took them;
- lockstep (``lockstep:=true``): a peer of the driver, acknowledging each tick once its command is out.

In the driver's loop (driver parameter ``in_loop_controller: <name>``) the driver creates this node in its
process with ``in_loop`` set: the driver's loop thread calls :meth:`ControllerNode.in_loop_step` each tick
(the same host, the same calls) and the commands are mirrored on ``~/joint_commands`` for tooling.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from humanoid_control.controllers.host import ControllerHost
from humanoid_control.controllers.hosted import HostedInLoopMixin
from humanoid_control.controllers.interface import ControllerState
from humanoid_control.controllers.registry import create_controller
from humanoid_control.driver.driver_core import CommandError, JointCommand
from humanoid_control.driver.in_loop import parse_node_parameters
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, declare, from_time_msg, run_node, to_time_msg

_PENDING_MAX = 50  # unpaired samples kept per stream (a quarter of a second at 200 Hz)


class ControllerNode(HostedInLoopMixin, QuietNode):
    """Hosts one registered controller (see the module docstring).

    Args:
        in_loop: created by the driver to be called from its loop (no state subscriptions, no lockstep peer).
        in_loop_gains: in the loop, the driver's setter of the controller's gains (a profile name or
            ``(kp, kd)``; returns None or why it refused).
        default_controller: the ``controller`` parameter's default (the driver passes its
            ``in_loop_controller``; the ``joint_hold_controller`` entry point passes ``joint_hold``).
        node_name: the node's name (default ``<controller>_controller``).
    """

    def __init__(
        self,
        in_loop: bool = False,
        in_loop_gains: Any = None,
        default_controller: str = "joint_hold",
        node_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(node_name or f"{default_controller}_controller", **kwargs)
        name = declare(
            self, "controller", default_controller, "registered controller to host", read_only=True
        )
        controller = create_controller(name)  # UnknownControllerError (a ValueError) lists the registered
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        self.config = load_robot_config(robot)
        lockstep = declare(
            self, "lockstep", False, "lockstep peer of the driver (/lockstep/ack)", read_only=True
        )
        autostart = declare(
            self, "autostart", True, "activate at the first state (false: at ~/start)", read_only=True
        )
        raw = declare(
            self,
            "parameters",
            "",
            "the controller's parameters as name=value pairs separated by ';' (the launch argument "
            "controller_parameters); a ROS parameter of the same name given on its own wins",
            read_only=True,
        )
        given = parse_node_parameters(raw)  # ValueError names the bad pair
        unknown = sorted(set(given) - set(controller.parameters))
        if unknown:
            raise ValueError(
                f"parameters: {', '.join(unknown)} not declared by controller {name} (it declares: "
                f"{', '.join(sorted(controller.parameters)) or 'none'})"
            )
        # as parameter overrides: declare() then types them as it does launch parameters (6 -> 6.0)
        overrides = getattr(self, "_parameter_overrides", None)
        if given and not isinstance(overrides, dict):
            raise ValueError(
                "parameters: this rclpy keeps no parameter overrides; give each as a ROS parameter"
            )
        for key, value in given.items():
            overrides.setdefault(key, Parameter(key, value=value))
        params = {
            key: declare(self, key, spec.default, spec.description, spec.low, spec.high, read_only=True)
            for key, spec in controller.parameters.items()
        }
        if controller.needs_estimate and not in_loop:
            raise ValueError(
                f"controller {name} reads the state estimate: it runs in the driver's loop only "
                "(in_loop:=true)"
            )
        self.driver = declare(
            self, "driver", "/robot_driver", "robot driver node name", read_only=True
        ).rstrip("/")
        self.host = ControllerHost(controller, self.config, params, autostart=autostart)
        self.in_loop = in_loop
        self.gains = controller.gains()
        self.gains_ready = self.gains is None
        if self.gains is not None and in_loop:
            if in_loop_gains is None:
                raise ValueError(f"controller {name}: its gains need the driver's in-loop setter")
            why = in_loop_gains(self.gains)
            if why is not None:
                raise ValueError(f"controller {name}: the driver refused its gains: {why}")
            self.gains_ready = True
        self.names = list(self.config.joint_names)
        self.cmd_vel: np.ndarray | None = None
        self.cmd_vel_stamp = -math.inf
        self._last_stamp = -math.inf  # the stamp of the last state handed to the host (s)
        self._published_active = False
        self._last_command: JointCommand | None = None
        self._last_diag_s = -1
        self.in_loop_logs: list[str] = []
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.pub_topic_state = (  # the controller's own latched state topic, where it has one
            self.create_publisher(String, f"{controller.state_topic}", latched)
            if controller.state_topic
            else None
        )
        self._topic_version = -1  # the first state is published at the first tick
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(Twist, "/cmd_vel", self._on_cmd_vel, 10)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        if in_loop:
            self.pub = self.create_publisher(JointState, "~/joint_commands", qos)
            self.peer = LockstepPeer(self, False)
        else:
            self.pub = self.create_publisher(JointState, "/joint_commands", qos)
            stream = tick_stream_qos(latched=lockstep)
            self._states: dict[int, JointState] = {}
            self._imus: dict[int, Imu] = {}
            self._done_key = -1
            self.create_subscription(JointState, "/joint_states", self._on_joint_states, stream)
            self.create_subscription(Imu, "/imu/data", self._on_imu, stream)
            self.peer = LockstepPeer(self, lockstep, ready=lambda: self.gains_ready)
            if not self.gains_ready:
                self._request_gains()
        self.index = None  # /joint_states order -> configuration order, from the first message
        self._publish_status()

    # ------------------------------------------------------------------ inputs
    def _on_cmd_vel(self, msg: Twist) -> None:
        values = np.array([msg.linear.x, msg.linear.y, msg.angular.z], dtype=float)
        if np.all(np.isfinite(values)):
            self.cmd_vel = values
            self.cmd_vel_stamp = self._last_stamp
        else:
            self.get_logger().warning("refused a non-finite /cmd_vel", throttle_duration_sec=1.0)

    def _on_joint_states(self, msg: JointState) -> None:
        self._pair(self._states, msg)

    def _on_imu(self, msg: Imu) -> None:
        self._pair(self._imus, msg)

    def _pair(self, store: dict[int, Any], msg: Any) -> None:
        key = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        if key <= self._done_key:
            return
        store[key] = msg
        if len(store) > _PENDING_MAX:
            store.pop(min(store))
        if key in self._states and key in self._imus:
            self._done_key = key
            self._process(self._states.pop(key), self._imus.pop(key))
            for pending in (self._states, self._imus):
                for old in [k for k in pending if k <= key]:
                    del pending[old]

    def _reorder(self, msg: JointState) -> tuple[np.ndarray, np.ndarray] | None:
        if self.index is None or len(self.index) != len(self.names):
            where = {n: i for i, n in enumerate(msg.name)}
            missing = [n for n in self.names if n not in where]
            if missing:
                self.get_logger().error(
                    f"/joint_states lacks {len(missing)} joints (e.g. {missing[0]})",
                    throttle_duration_sec=5.0,
                )
                return None
            self.index = np.array([where[n] for n in self.names])
        q = np.asarray(msg.position, dtype=float)[self.index]
        dq = (
            np.asarray(msg.velocity, dtype=float)[self.index]
            if len(msg.velocity)
            else np.zeros(len(self.names))
        )
        return q, dq

    def _process(self, joints: JointState, imu: Imu) -> None:
        pair = self._reorder(joints) if self.gains_ready else None  # no command before the driver's gains
        if pair is not None:
            o, w, a = imu.orientation, imu.angular_velocity, imu.linear_acceleration
            state = ControllerState(
                stamp=from_time_msg(joints.header.stamp),
                q=pair[0],
                dq=pair[1],
                imu_quat=np.array([o.w, o.x, o.y, o.z]),
                gyro=np.array([w.x, w.y, w.z]),
                driver_mode="",
                accel=np.array([a.x, a.y, a.z]),
                tau=np.asarray(joints.effort, dtype=float)[self.index] if len(joints.effort) else None,
                cmd_vel=self.cmd_vel,
                cmd_vel_stamp=self.cmd_vel_stamp,
            )
            try:
                command = self._step(state)
            except CommandError as exc:
                command = None
                self.get_logger().warning(f"not sent: {exc}", throttle_duration_sec=1.0)
            if command is not None:
                self._publish_command(self.pub, command)
            self._maybe_diagnostics(state.stamp)
        self.peer.ack(joints.header.stamp)

    def _request_gains(self) -> None:
        """Own node: the controller's gains on the driver's parameters (retried every 0.2 s until set)."""
        from rcl_interfaces.srv import SetParametersAtomically
        from rclpy.clock import Clock, ClockType
        from rclpy.parameter import Parameter

        if isinstance(self.gains, str):
            params = [Parameter("gain_profile", Parameter.Type.STRING, self.gains)]
        else:
            kp, kd = (np.asarray(g, dtype=float).tolist() for g in self.gains)
            params = [
                Parameter("command_kp", Parameter.Type.DOUBLE_ARRAY, kp),
                Parameter("command_kd", Parameter.Type.DOUBLE_ARRAY, kd),
            ]
        request = SetParametersAtomically.Request(parameters=[p.to_parameter_msg() for p in params])
        client = self.create_client(SetParametersAtomically, f"{self.driver}/set_parameters_atomically")
        pending: list[Any] = []

        def attempt() -> None:
            if self.gains_ready:
                timer.cancel()
                return
            if pending or not client.service_is_ready():
                return
            future = client.call_async(request)
            pending.append(future)
            future.add_done_callback(done)

        def done(future: Any) -> None:
            pending.clear()
            try:
                result = future.result().result
            except Exception as exc:
                self.get_logger().error(f"setting the driver's gains failed: {exc}")
                return
            if result.successful:
                self.gains_ready = True
                self.get_logger().info(f"the driver applies {self.host.name}'s gains to its commands")
            else:
                self.get_logger().error(f"the driver refused {self.host.name}'s gains: {result.reason}")

        timer = self.create_timer(0.2, attempt, clock=Clock(clock_type=ClockType.STEADY_TIME))

    # ------------------------------------------------------------------ the host
    def _step(self, state: ControllerState) -> JointCommand | None:
        """Own node: the tick's state (paired from ``/joint_states`` and ``/imu/data``) through the same
        in-loop path the driver's loop calls."""
        return self.in_loop_step(state)

    def _before_host_step(self, state: ControllerState) -> bool:
        """Driver's loop thread: the latest velocity command goes into the driver's state of this tick."""
        state.cmd_vel, state.cmd_vel_stamp = self.cmd_vel, self.cmd_vel_stamp
        self._last_stamp = state.stamp
        return True

    def _after_host_step(self, state: ControllerState, command: JointCommand | None) -> None:
        self._last_command = command
        if self.host.active != self._published_active:
            self._publish_status()
        if self.pub_topic_state is not None:
            version, payload = self.host.controller.topic_state()
            if version != self._topic_version:
                self._topic_version = version
                self.pub_topic_state.publish(String(data=json.dumps(payload)))

    def in_loop_mirror(self) -> None:
        """Driver's loop thread, off the critical path: the latest command on ``~/joint_commands``."""
        if self._last_command is not None:
            self._publish_command(self.pub, self._last_command)

    def in_loop_diagnostics(self) -> None:
        """Driver's loop thread, in the slack: this controller's diagnostics."""
        if self.host.last_stamp is not None:
            self._publish_diagnostics(self.host.last_stamp)

    # ------------------------------------------------------------------ outputs
    def _publish_command(self, pub: Any, command: JointCommand) -> None:
        msg = JointState(name=self.names)
        msg.header.stamp = to_time_msg(command.stamp)
        msg.position = command.q.tolist()
        msg.velocity = command.dq.tolist()
        msg.effort = command.tau_ff.tolist()
        pub.publish(msg)

    def _publish_status(self) -> None:
        self._published_active = self.host.active
        text = json.dumps(self.host.status())
        self.pub_state.publish(String(data=text))

    def _maybe_diagnostics(self, stamp: float) -> None:
        second = int(stamp)
        if second != self._last_diag_s:
            self._last_diag_s = second
            self._publish_diagnostics(stamp)

    def _publish_diagnostics(self, stamp: float) -> None:
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK,
            name=f"{self.get_name()}: controller {self.host.name}",
            message="active" if self.host.active else "inactive",
            hardware_id=f"{self.config.name}/{self.host.name}",
            values=[KeyValue(key=k, value=v) for k, v in self.host.report().items()],
        )
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = to_time_msg(stamp)
        self.pub_diag.publish(msg)

    # ------------------------------------------------------------------ services
    def _on_start(self, _req: Any, resp: Any) -> Any:
        resp.success, resp.message = self.host.start()
        self._publish_status()
        return resp

    def _on_stop(self, _req: Any, resp: Any) -> Any:
        resp.success, resp.message = self.host.stop()
        self._publish_status()
        return resp

    def close(self) -> None:
        """Leave the driver's lockstep."""
        self.peer.leave()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack controller_node --ros-args -p controller:=<name>``."""
    return run_node(lambda: ControllerNode(node_name="controller"), args, "controller_node")


def joint_hold_main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack joint_hold_controller`` (the generic node, joint_hold)."""
    return run_node(lambda: ControllerNode(default_controller="joint_hold"), args, "joint_hold_controller")


if __name__ == "__main__":
    raise SystemExit(main())
