"""Whole-body controller node (``wbc_controller``): standing balance with the QP of :mod:`.wbc`.

Topics:

- subscribes ``/joint_states`` (sensor_msgs/JointState), ``/odom`` (nav_msgs/Odometry from the state
  estimator: pose of the base in the ``odom`` frame, twist in the base frame; never ``/sim/*``) and
  ``<driver>/mode`` (latched);
- publishes ``/joint_commands`` (sensor_msgs/JointState, all joints: position = q*, velocity = dq* integrated
  from the QP accelerations over one tick, effort = tau_ff from the QP; stamped with the joint state it
  answers), ``~/state`` (std_msgs/String, latched: ``idle``, ``wait``, ``run``, ``fault``), ``/diagnostics``
  (1 Hz of the driver clock: QP status, tick and solve times, iterations, failure and refusal counters) and,
  when ``visualization_msgs`` is installed, ``/wbc/markers`` (visualization_msgs/MarkerArray in the ``odom``
  frame at ``marker_rate_hz``: CoM, capture point, its reference, CoP, CMP, support polygon, sole contact
  forces).

Pairing: each joint state is answered once the ``/odom`` of the same stamp (or a newer one) has arrived, so in
lockstep the driver, the estimator and this node advance tick by tick. If the next joint state arrives first,
the older one is answered with the latest ``/odom`` (refused when older than ``max_odom_age_s``).

Gains: at start-up the node sets the driver's ``gain_profile`` parameter to its own ``gain_profile`` (``low``
of the robot configuration by default: the QP's feed-forward torques do the work, the PD terms only correct
within a tick) through ``<driver>/set_parameters_atomically`` and sends nothing before the driver accepted it.

Services (std_srvs/Trigger): ``~/reset`` (leave ``fault``); ``~/start`` and ``~/stop`` for a node launched
with ``autostart: false`` (under the mode manager): idle, it solves nothing and only acknowledges the
lockstep ticks; ``~/start`` sets the driver's gains again (``gain_profile``, and ``command_kp`` /
``command_kd`` cleared, which another controller may have set) and commands once the driver took them;
``~/stop`` stops commanding and asks ``<driver>/hold``. States and the failure policy:
:mod:`humanoid_control.wbc.runner`; on ``fault`` the node calls ``<driver>/estop``.

In the driver's loop (driver parameter ``in_loop_controller: wbc``, docs/realtime.md): the driver creates this
node in its process, and the state estimator's node beside it; each tick its loop runs the estimator on the
tick's IMU sample and joint state, then calls :meth:`WbcNode.in_loop_step` with the measured joint state and,
with ``estimate_in_loop`` (the default), that estimate (``InLoopState.estimate``), so the QP answers the tick
with the estimate of that tick and depends on no other process; otherwise it answers with the latest ``/odom``
(the in-loop estimator's, published for the previous tick: in lockstep the step waits for it, at most
``pending_timeout_s``). No ``/joint_states`` subscription, no lockstep
peer, no markers; the commands are mirrored on ``~/joint_commands``.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections import deque
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rcl_interfaces.srv import SetParametersAtomically
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from humanoid_control.controllers.host import ControllerHost
from humanoid_control.controllers.hosted import HostedInLoopMixin
from humanoid_control.model.joint_order import JointOrder
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, declare, run_node
from humanoid_control.ros.service_caller import ServiceCaller
from humanoid_control.wbc.balance import BalanceSettings
from humanoid_control.wbc.command import CommandSettings
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.markers import MarkerSet, marker_set
from humanoid_control.wbc.runner import WbcRunner, WbcRunnerSettings
from humanoid_control.wbc.wbc_node_diagnostics import WbcDiagnosticsMixin
from humanoid_control.wbc.wbc_node_gains import WbcGainsMixin
from humanoid_control.wbc.wbc_node_in_loop import WbcInLoopMixin
from humanoid_control.wbc.wbc_node_inputs import WbcInputsMixin
from humanoid_control.wbc.wbc_stand import WbcStandController

try:  # optional: ros-visualization-msgs
    from visualization_msgs.msg import Marker, MarkerArray
except ImportError:  # pragma: no cover - depends on the installation
    Marker = MarkerArray = None


class WbcNode(
    WbcInputsMixin, WbcGainsMixin, WbcInLoopMixin, HostedInLoopMixin, WbcDiagnosticsMixin, QuietNode
):
    """ROS 2 adapter of :class:`WbcRunner` + :class:`StandingController`; its gains hand-shake, input
    callbacks, in-loop methods and diagnostics are in its base classes (:mod:`.wbc_node_gains`,
    :mod:`.wbc_node_inputs`, :mod:`.wbc_node_in_loop`, :mod:`.wbc_node_diagnostics`)."""

    #: the controller this node is the ROS face of (sharing the node's runner)
    hosted_class: type[WbcStandController] = WbcStandController
    #: publish the standing balance markers on ``/wbc/markers``; a subclass whose controller has no standing
    #: balance state sets False, and the topic is not advertised at all
    balance_markers: bool = True

    def __init__(
        self,
        node_name: str = "wbc_controller",
        in_loop: bool = False,
        in_loop_lockstep: bool = False,
        **kwargs: Any,
    ) -> None:
        """``in_loop``: called from the driver's loop in its process (module docstring); ``in_loop_lockstep``:
        the driver runs in lockstep (each step waits for the ``/odom`` of the previous tick)."""
        super().__init__(node_name, **kwargs)
        self.in_loop = in_loop
        self.in_loop_lockstep = in_loop and in_loop_lockstep
        self._lock = threading.RLock()  # in the loop: the loop thread and the executor share the runner
        self._odom_arrived = threading.Condition(self._lock)
        self._prev_t: float | None = None
        self._last_cmd: tuple[float, Any] | None = None
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        self.driver = declare(
            self, "driver", "/robot_driver", "robot driver node name", read_only=True
        ).rstrip("/")
        rate = declare(
            self, "rate_hz", 500.0, "control rate = driver loop rate (Hz)", 50.0, 2000.0, read_only=True
        )
        self.gain_profile = declare(
            self, "gain_profile", "low", "driver gain profile applied to this node's commands", read_only=True
        )
        runner_settings = WbcRunnerSettings(
            max_odom_age_s=declare(
                self, "max_odom_age_s", 0.02, "joint state newer than /odom by more -> refused (s)", 0.0, 1.0
            ),
            max_bad_ticks=declare(
                self, "max_bad_ticks", 10, "consecutive refused ticks before fault", 0, 10000
            ),
        )
        command = CommandSettings(
            dt=1.0 / rate,
            max_hold_ticks=declare(
                self, "max_hold_ticks", 5, "QP failures bridged by the last safe command", 0, 100
            ),
        )
        balance = BalanceSettings(
            dcm_gain=declare(self, "dcm_gain", BalanceSettings.dcm_gain, "DCM gain k/omega", 0.0, 20.0),
            hip_strategy=declare(self, "hip_strategy", True, "angular momentum (hip) strategy"),
        )
        self.autostart = declare(
            self,
            "autostart",
            True,
            "command as soon as ready; false: idle (no QP, lockstep ticks acknowledged) until ~/start",
            read_only=True,
        )
        self.active = self.autostart
        self.marker_period = 1.0 / max(
            1e-6,
            declare(self, "marker_rate_hz", 10.0, "MarkerArray rate (Hz, driver clock); 0 = off", 0.0, 500.0),
        )
        self.markers_on = (
            self.balance_markers and self.marker_period < 1e5 and MarkerArray is not None and not in_loop
        )
        self.config = load_robot_config(robot)
        self.controller = self._make_controller(balance, command)
        self.runner = WbcRunner(self.controller, runner_settings)
        # the WBC as a controller (its runner shared with this node): what the driver's loop calls, through
        # the same host as every controller (HostedInLoopMixin.in_loop_step; the node's condition held)
        self.hosted = self.hosted_class(runner=self.runner)
        self.host = ControllerHost(self.hosted, self.config, {"gain_profile": self.gain_profile})
        self.host_lock = self._odom_arrived
        self._host_t0 = 0.0
        self.names = list(self.config.joint_names)
        self.joint_order = JointOrder(self.names)
        self.driver_mode: str | None = None
        self._pending: tuple[float, np.ndarray, np.ndarray, Any] | None = None
        self._pending_since = 0.0
        # the last 2000 ticks (diagnostics statistics)
        self._tick_us: deque[float] = deque(maxlen=2000)
        self._solve_us: deque[float] = deque(maxlen=2000)
        self._iterations: deque[int] = deque(maxlen=2000)
        self._last_diag = -1e9
        self._diag_t: float | None = None  # in the loop: the stamp of the last step (its diagnostics)
        self._last_marker = -1e9
        self._published_state = ""
        self.answered = 0
        self.skipped = 0
        self.full_problem_ticks = 0  # ticks that solved the QP with its limit rows (limit screening)

        self.lockstep = declare(
            self,
            "lockstep",
            False,
            "lockstep peer of the driver: every joint state is answered with the /odom of its own stamp "
            "(waiting for it at most pending_timeout_s) and acknowledged on /lockstep/ack once its command "
            "is out",
            read_only=True,
        )
        estimate = declare(
            self,
            "estimate_in_loop",
            True,
            "in the driver's loop: take the base state from the estimator that runs in the loop before this "
            "node (its estimate of the same tick) instead of reading /odom",
            read_only=True,
        )
        self.estimate_in_loop = bool(in_loop and estimate)
        if in_loop:
            self.lockstep = False  # called synchronously by the driver's loop: not a peer
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        if in_loop:  # commands mirrored for tooling (the driver takes them directly)
            self.pub_cmd = self.create_publisher(JointState, "~/joint_commands", reliable)
        else:
            self.pub_cmd = self.create_publisher(JointState, "/joint_commands", reliable)
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.pub_markers = self.create_publisher(MarkerArray, "/wbc/markers", 10) if self.markers_on else None
        # transient-local in lockstep: tick 0 is never lost
        deep = tick_stream_qos(100, latched=self.lockstep)
        self.create_subscription(
            String,
            f"{self.driver}/mode",
            self._on_driver_mode,
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        if not self.estimate_in_loop:  # (in the loop with the loop's estimate: /odom is not read)
            self.create_subscription(Odometry, "/odom", self._on_odom, deep)
        if not in_loop:
            self.create_subscription(JointState, "/joint_states", self._on_joint_states, deep)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.hold_client = self.create_client(Trigger, f"{self.driver}/hold")
        self.param_client = self.create_client(
            SetParametersAtomically, f"{self.driver}/set_parameters_atomically"
        )
        self.estop_client = self.create_client(Trigger, f"{self.driver}/estop")
        self._gain_request: Any = None
        # started by the mode manager (no autostart): ~/start sets the driver's gains before it answers, so
        # the start takes effect at the same tick in every lockstep run (the caller holds the clock)
        self._caller = (
            None
            if self.autostart or in_loop
            else ServiceCaller(
                self.context,
                f"{self.get_name()}_calls",
                {"gains": (SetParametersAtomically, f"{self.driver}/set_parameters_atomically")},
            )
        )
        from rclpy.clock import Clock, ClockType

        steady = Clock(clock_type=ClockType.STEADY_TIME)
        # cancelled once the driver took the gains, restarted by ~/start: in the driver's loop every wake of
        # the executor thread takes the GIL from the loop thread (a 5 Hz timer left overruns every 100 ticks)
        self._gains_timer = self.create_timer(0.2, self._request_gains, clock=steady)
        self.pending_timeout = declare(
            self,
            "pending_timeout_s",
            2.0,
            "wall time a joint state waits for its /odom before it is answered with the latest one (s)",
            0.001,
            10.0,
        )
        if not in_loop:  # in the loop no joint state waits for an /odom
            self.create_timer(0.01, self._expire_pending, clock=steady)
        self.peer = LockstepPeer(self, self.lockstep, ready=lambda: self.runner.gains_ready)
        self._publish_state()
        gc.collect()
        gc.freeze()
        self.get_logger().info(
            f"WBC for {self.config.name}: {self.controller.qp.n} QP variables, {self.controller.qp.m} "
            f"constraint rows, {rate:g} Hz, gain profile '{self.gain_profile}', markers "
            f"{'on' if self.markers_on else 'off'}"
        )

    def _make_controller(self, balance: BalanceSettings, command: CommandSettings) -> Any:
        """The controller this node runs (the walking node runs its own)."""
        return StandingController(self.config, balance=balance, command=command)

    @classmethod
    def in_loop_node(cls, driver: Any, kwargs: dict[str, Any]) -> WbcNode:
        """The WBC in the driver's loop (registered controller ``wbc_stand``): the state estimator's node in
        the driver's process too (its ``in_loop_estimator``, called before the WBC each tick, as /odom
        before it)."""
        driver.make_in_loop_estimator()
        return cls(in_loop=True, in_loop_lockstep=driver.clock_mode == "lockstep", **kwargs)

    def close(self) -> None:
        """Leave the driver's lockstep."""
        self.peer.leave()
        if self._caller is not None:
            with contextlib.suppress(Exception):
                self._caller.close()

    # ------------------------------------------------------------------ per tick
    def _answer(self, t: float, q: np.ndarray, dq: np.ndarray, stamp: Any) -> None:
        try:
            self._tick(t, q, dq, stamp)
        finally:
            self.peer.ack(stamp)

    def _tick(self, t: float, q: np.ndarray, dq: np.ndarray, stamp: Any) -> None:
        t0 = time.perf_counter()
        cmd = self.runner.update(t, q, dq, self.driver_mode)
        if cmd is not None:
            out = JointState(
                name=self.names, position=cmd.q.tolist(), velocity=cmd.dq.tolist(), effort=cmd.tau_ff.tolist()
            )
            out.header.stamp = stamp
            self.pub_cmd.publish(out)
            self._count_answer(t0)
        self._forward_estop()
        self._publish_state()
        if t - self._last_diag >= 1.0 or t < self._last_diag:
            self._last_diag = t
            self._publish_diagnostics(stamp)
        if (
            self.markers_on
            and cmd is not None
            and (t - self._last_marker >= self.marker_period or t < self._last_marker)
        ):
            self._last_marker = t
            self._publish_markers(stamp)

    def _count_answer(self, t0: float) -> None:
        """A command went out: count it and keep the tick's timing (from ``t0``, perf_counter s) and the QP's
        solve figures for the diagnostics."""
        self.answered += 1
        res = self.controller.last_output
        if res is not None:
            self._tick_us.append((time.perf_counter() - t0) * 1e6)
            self._solve_us.append(res.solve_time_s * 1e6)
            self._iterations.append(res.iterations)
            self.full_problem_ticks += int(res.full_problem)

    def _forward_estop(self) -> None:
        """The runner asked for an e-stop (a fault): call the driver's ``~/estop`` once."""
        if not self.runner.estop_requested:
            return
        self.runner.estop_requested = False
        self.get_logger().error(f"FAULT: {self.runner.reason}; calling {self.driver}/estop")
        if self.estop_client.service_is_ready():
            self.estop_client.call_async(Trigger.Request())
        else:
            self.get_logger().error(f"{self.driver}/estop unavailable; the driver's watchdog will damp")

    # ------------------------------------------------------------------ services
    def _on_start(self, req: Any, resp: Any) -> Any:
        with self._lock:
            return self._start(resp)

    def _start(self, resp: Any) -> Any:
        if self.active:
            resp.success, resp.message = True, "already commanding"
            return resp
        self.runner.reset()
        self.runner.gains_ready = False  # set the driver's gains again before the first command
        if self._caller is not None:
            why = self._set_gains_now()
            if why is not None:
                self._publish_state()
                resp.success, resp.message = False, f"start: {why}"
                self.get_logger().error(resp.message)
                return resp
            resp.message = "commanding (the driver took the gain profile)"
        else:
            self._gains_timer.reset()
            resp.message = "commanding once the driver took the gain profile"
        self.active = True
        self._publish_state()
        resp.success = True
        self.get_logger().info("start: " + resp.message)
        return resp

    def _on_stop(self, req: Any, resp: Any) -> Any:
        with self._lock:
            return self._stop(resp)

    def _stop(self, resp: Any) -> Any:
        if not self.active:
            resp.success, resp.message = True, "not commanding"
            return resp
        self.active = False
        self._pending = None
        if self.driver_mode in ("hold", "active") and self.hold_client.service_is_ready():
            self.hold_client.call_async(Trigger.Request())
        self.runner.reset()
        self._publish_state()
        resp.success, resp.message = True, "stopped; the driver holds the default pose"
        self.get_logger().info("stop: " + resp.message)
        return resp

    def _on_reset(self, _req: Any, resp: Any) -> Any:
        with self._lock:
            self.runner.reset()
            self._publish_state()
        resp.success, resp.message = True, "waiting for fresh input; reset the driver too if it is damping"
        return resp

    # ------------------------------------------------------------------ outputs
    def _publish_state(self) -> None:
        state = self.runner.state.value if self.active else "idle"
        if state != self._published_state:
            self._published_state = state
            self.pub_state.publish(String(data=state))
            self.get_logger().info(f"state -> {state} ({self.runner.reason})")

    def _publish_markers(self, stamp: Any) -> None:
        bal, out = self.controller.balance.state, self.controller.last_output
        if bal is None or out is None or self.pub_markers is None:
            return
        dyn = self.controller.qp.dyn
        ms = marker_set(
            bal, {s: dyn.contact_points_world(s) for s in dyn.sides}, out.forces, dyn.mass * dyn.gravity
        )
        self.pub_markers.publish(_marker_array(ms, stamp))


def _marker_array(ms: MarkerSet, stamp: Any) -> Any:
    """visualization_msgs/MarkerArray of a :class:`MarkerSet` (frame ``odom``)."""
    from geometry_msgs.msg import Point

    arr = MarkerArray()
    for i, m in enumerate(ms.markers):
        mk = Marker()
        mk.header.stamp = stamp
        mk.header.frame_id = "odom"
        mk.ns, mk.id, mk.action = m.ns, i, Marker.ADD
        mk.type = {"sphere": Marker.SPHERE, "line_strip": Marker.LINE_STRIP, "arrow": Marker.ARROW}[m.kind]
        mk.pose.orientation.w = 1.0
        if m.kind == "sphere":
            mk.pose.position.x, mk.pose.position.y, mk.pose.position.z = (float(v) for v in m.points[0])
            mk.scale.x = mk.scale.y = mk.scale.z = m.size
        else:
            mk.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in m.points]
            mk.scale.x = m.size
            if m.kind == "arrow":
                mk.scale.y, mk.scale.z = 2 * m.size, 3 * m.size
        mk.color.r, mk.color.g, mk.color.b, mk.color.a = m.rgba
        arr.markers.append(mk)
    return arr


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack wbc_controller``."""
    return run_node(WbcNode, args, "wbc_controller")


if __name__ == "__main__":
    raise SystemExit(main())
