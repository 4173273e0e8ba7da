"""Mode manager node (``mode_manager``): the one authority over the active controller and the velocity
command.

Services (std_srvs; a refused request answers ``success: false`` with the reason):

- ``~/stand``, ``~/walk``, ``~/run_policy``, ``~/damp``, ``~/estop``, ``~/reset``, ``~/respawn``
  (Trigger; respawn only in simulation, where the driver offers ``~/respawn``), ``~/set_autonomy``
  (SetBool), ``~/report`` (Trigger: the operation record as JSON in ``message``, also written to
  ``record_path`` when set). Rules: :mod:`humanoid_control.modes.mode_machine`.

Topics:

- subscribes ``/teleop/cmd_vel`` and ``/autonomy/cmd_vel`` (geometry_msgs/Twist: linear.x, linear.y in m/s,
  angular.z in rad/s, heading frame), ``/joy`` (sensor_msgs/Joy, mapping in
  :mod:`humanoid_control.modes.joy_mapping`), ``{driver}/mode``, ``{driver}/switch`` and ``{driver}/down``
  (latched; the last says whether the robot is down),
  ``{policy_runner}/state``, ``{wbc}/state`` and ``{walking}/state`` (latched), ``/walking/status``
  (std_msgs/Float64MultiArray of the walking controller while it runs: whether a step is in progress);
- publishes ``/cmd_vel`` (geometry_msgs/Twist) at ``rate_hz`` of the node clock (simulated time in
  simulation), always: zero when no source is fresh (:mod:`humanoid_control.modes.command_mux`), and
  ``~/state`` (std_msgs/String, latched with depth 1: a late subscriber gets the current state; JSON:
  ``mode``, ``reason``, ``source``, ``autonomy``, ``driver_mode``, ``policy_state``, ``wbc_state``,
  ``walk_state``, ``robot_down``, ``t``, ``counts``, ``last_event``) on every change and once a second.

Controllers: the WBC (``stand``, where ``{wbc}/start`` is reachable, else the driver's hold), the walking
controller (``walk``, where ``{walking}/start`` is reachable; it follows ``/cmd_vel``) and the policy runner
(``run_policy``), reached through their services; the mode manager sets the driver's
``switch_max_step`` to its ``max_torque_step`` so every switch is bumpless, and records each switch's torque
steps from ``{driver}/switch``. If this node dies, ``/cmd_vel`` stops: a policy runner launched with
``command_timeout_action:=hold`` then stops and the driver holds the default pose (docs/modes.md).

The parameter tables and settings builders are in :mod:`humanoid_control.modes.mode_manager_settings`, the
subscription callbacks in :mod:`humanoid_control.modes.mode_manager_inputs` (a base class of the node).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

from geometry_msgs.msg import Twist
from rcl_interfaces.msg import SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Joy
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from humanoid_control.modes.command_mux import CommandMux, Source
from humanoid_control.modes.mode_machine import (
    INITIAL_MODES,
    Available,
    Mode,
    ModeMachine,
    Request,
    Transition,
)
from humanoid_control.modes.mode_manager_inputs import ModeManagerInputs
from humanoid_control.modes.mode_manager_settings import (
    JOY_PARAMS,
    LIMIT_PARAMS,
    MUX_PARAMS,
    SHARE_OF,
    make_joy_mapping,
    make_mux_settings,
)
from humanoid_control.modes.record import OperationRecord
from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, declare, from_time_msg, run_node
from humanoid_control.ros.service_caller import ServiceCaller

#: subscriptions to latched topics, deep: ``{driver}/switch`` is an event stream (every switch counts)
LATCHED = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
#: ``~/state``: latched state, depth 1 (a late subscriber gets the current state only, not the past)
STATE = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class ModeManagerNode(ModeManagerInputs, QuietNode):
    """ROS 2 adapter of :class:`ModeMachine`, :class:`CommandMux` and :class:`OperationRecord`."""

    def __init__(self) -> None:
        super().__init__("mode_manager")
        self.driver = declare(
            self, "driver", "/robot_driver", "robot driver node name", read_only=True
        ).rstrip("/")
        self.policy_runner = declare(
            self, "policy_runner", "/policy_runner", "policy runner node name", read_only=True
        ).rstrip("/")
        self.wbc = declare(
            self,
            "wbc",
            "/wbc_controller",
            "whole-body controller node name (stand, where it runs)",
            read_only=True,
        ).rstrip("/")
        self.walking = declare(
            self,
            "walking",
            "/walking_controller",
            "walking controller node name (walk, where it runs)",
            read_only=True,
        ).rstrip("/")
        initial = declare(
            self,
            "initial_mode",
            "none",
            "mode entered once the driver holds: none (hold), stand or wbc_stand, policy (run_policy), "
            "walk or mpc_walk (walk)",
            read_only=True,
        )
        if initial not in INITIAL_MODES:
            raise ValueError(
                f"parameter initial_mode: '{initial}' is not one of {', '.join(INITIAL_MODES)} (with "
                "mode_manager:=true, controller:= may be none, policy, wbc_stand or mpc_walk; the joint hold "
                "controller is not switchable by the mode manager)"
            )
        self.initial_mode: Mode | None = (
            INITIAL_MODES[initial] if INITIAL_MODES[initial] != Mode.HOLD else None
        )
        rate = declare(self, "rate_hz", 50.0, "/cmd_vel publishing rate (Hz, node clock)", 5.0, 500.0, True)
        self.max_torque_step = declare(
            self,
            "max_torque_step",
            0.2,
            "bound of every controller switch: largest joint torque change per tick as a fraction of the "
            "joint's effort limit (set on the driver as switch_max_step)",
            0.01,
            1.0,
        )
        self.stand_settle_s = declare(
            self,
            "stand_settle_s",
            1.0,
            "leaving run_policy or walk is refused until the published velocity has been zero this long (s)",
            0.0,
            10.0,
        )
        self.call_timeout = declare(
            self,
            "call_timeout_s",
            5.0,
            "wall time a request waits for each controller's service to answer (s)",
            0.1,
            60.0,
        )
        self.record_path = declare(
            self,
            "record_path",
            "",
            "write the operation record (JSON) here at shutdown and on ~/report ('' or none: do not write)",
        )
        values = {
            name: declare(self, name, d, desc, lo, hi) for name, (d, lo, hi, desc) in LIMIT_PARAMS.items()
        }
        values.update(
            {name: declare(self, name, d, desc, lo, hi) for name, (d, lo, hi, desc) in MUX_PARAMS.items()}
        )
        values.update({name: declare(self, name, d, desc, 0, 63) for name, (d, desc) in JOY_PARAMS.items()})
        self.mux = CommandMux(make_mux_settings(values))
        self.joy_mapping = make_joy_mapping(values)
        self.values = values
        self.machine = ModeMachine()
        self.record = OperationRecord()
        self._last_source: Source | None = None
        self._last_event: dict[str, Any] = {}
        self._joy_buttons: list[int] | None = None
        self._state_t = -1.0
        self._moving_t = -1e9  # last time (s) a non-zero velocity was published
        self._driver_step_set = False
        self._step_request: Any = None
        self.switch_violations = 0
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.pub_cmd = self.create_publisher(Twist, "/cmd_vel", 10)
        self.pub_state = self.create_publisher(String, "~/state", STATE)
        self.create_subscription(String, f"{self.driver}/mode", self._on_driver_mode, LATCHED)
        self.create_subscription(String, f"{self.driver}/switch", self._on_switch, LATCHED)
        self.create_subscription(String, f"{self.driver}/down", self._on_driver_down, LATCHED)
        self.create_subscription(String, f"{self.policy_runner}/state", self._on_policy_state, LATCHED)
        self.create_subscription(String, f"{self.wbc}/state", self._on_wbc_state, LATCHED)
        self.create_subscription(String, f"{self.walking}/state", self._on_walk_state, LATCHED)
        # the walking controller's status (only published while it runs): is a step in progress?
        self.create_subscription(Float64MultiArray, "/walking/status", self._on_walking_status, 10)
        self.walk_stepping = False
        self.create_subscription(Twist, "/teleop/cmd_vel", self._on_teleop, 10)
        self.create_subscription(Twist, "/autonomy/cmd_vel", self._on_autonomy, 10)
        self.create_subscription(Joy, "/joy", self._on_joy, 10)
        for name in ("stand", "walk", "run_policy", "damp", "estop", "reset", "respawn"):
            self.create_service(Trigger, f"~/{name}", self._trigger_handler(Request(name)))
        self.create_service(SetBool, "~/set_autonomy", self._on_set_autonomy)
        self.create_service(Trigger, "~/report", self._on_report)
        self.caller = ServiceCaller(
            self.context,
            f"{self.get_name()}_calls",
            {
                "driver_estop": f"{self.driver}/estop",
                "driver_reset": f"{self.driver}/reset",
                "driver_respawn": f"{self.driver}/respawn",
                "policy_start": f"{self.policy_runner}/start",
                "policy_stop": f"{self.policy_runner}/stop",
                "policy_reset": f"{self.policy_runner}/reset",
                "wbc_start": f"{self.wbc}/start",
                "wbc_stop": f"{self.wbc}/stop",
                "wbc_reset": f"{self.wbc}/reset",
                "walk_start": f"{self.walking}/start",
                "walk_stop": f"{self.walking}/stop",
                "walk_reset": f"{self.walking}/reset",
            },
        )
        self.param_client = self.create_client(SetParameters, f"{self.driver}/set_parameters")
        from rclpy.clock import Clock, ClockType

        self.create_timer(0.2, self._push_driver_step, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.period = 1.0 / rate
        self.lockstep = declare(
            self,
            "lockstep",
            False,
            "lockstep peer of the driver: /cmd_vel computed on the driver's ticks from the inputs that "
            "arrived before them, every tick acknowledged (a lockstep run through it is reproducible)",
            read_only=True,
        )
        self._tick_t = 0.0  # lockstep: stamp of the last tick processed (s)
        self._next_t = 0.5 / rate  # lockstep: the next computing time, mid-way between grid points (s)
        self._pending: list[tuple[str, Any]] = []  # lockstep: inputs waiting for the next computing tick
        self.peer = LockstepPeer(self, self.lockstep)
        if self.lockstep:
            from rosgraph_msgs.msg import Clock as ClockMsg

            self.create_subscription(ClockMsg, "/clock", self._on_clock, tick_stream_qos(latched=True))
        else:
            self.create_timer(self.period, self._tick)  # node clock: simulated time in simulation
        self._publish_state()
        self.get_logger().info(
            f"mode manager: driver {self.driver}, policy runner {self.policy_runner}, /cmd_vel at "
            f"{rate:g} Hz, switch bound {self.max_torque_step:g} of the effort limits, initial mode "
            f"{(self.initial_mode or Mode.HOLD).value}"
        )

    # ------------------------------------------------------------------ configuration
    def _on_set_parameters(self, params: list[Any]) -> SetParametersResult:
        values = dict(self.values)
        for p in params:
            if p.name in values:
                values[p.name] = p.value
        try:
            settings = make_mux_settings(values)
            mapping = make_joy_mapping(values)
        except (ValueError, TypeError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self.values = values
        self.mux.settings = settings
        self.joy_mapping = mapping
        for p in params:
            if p.name == "max_torque_step":
                self.max_torque_step = float(p.value)
                self._driver_step_set = False  # pushed to the driver again
            elif p.name == "stand_settle_s":
                self.stand_settle_s = float(p.value)
            elif p.name == "record_path":
                self.record_path = str(p.value)
        return SetParametersResult(successful=True)

    def _push_driver_step(self) -> None:
        """Set the driver's ``switch_max_step`` to ``max_torque_step`` (retried until it took it)."""
        if (
            self._driver_step_set
            or self._step_request is not None
            or not self.param_client.service_is_ready()
        ):
            return
        req = SetParameters.Request(
            parameters=[
                Parameter(
                    "switch_max_step", Parameter.Type.DOUBLE, float(self.max_torque_step)
                ).to_parameter_msg()
            ]
        )
        value = self.max_torque_step
        self._step_request = self.param_client.call_async(req)

        def done(future: Any) -> None:
            self._step_request = None
            try:
                result = future.result().results[0]
            except Exception as exc:
                self.get_logger().error(f"setting {self.driver}/switch_max_step failed: {exc}")
                return
            if result.successful:
                self._driver_step_set = value == self.max_torque_step
                self.get_logger().info(
                    f"driver switches are blended: {self.driver}/switch_max_step = {value:g}"
                )
            else:
                self.get_logger().error(f"{self.driver} refused switch_max_step = {value:g}: {result.reason}")

        self._step_request.add_done_callback(done)

    # ------------------------------------------------------------------ helpers
    def now(self) -> float:
        """Node clock (s): simulated time in simulation; in lockstep the stamp of the last tick processed
        (the same in every run, whatever the delivery timing)."""
        if self.lockstep:
            return self._tick_t
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_clock(self, msg: Any) -> None:
        """Lockstep: one driver tick. At the first tick after each grid point of ``rate_hz`` the inputs that
        arrived since the last one are applied and ``/cmd_vel`` is computed and published; then the tick is
        acknowledged. An input a lockstep peer published at grid tick k was sent before that peer
        acknowledged k, so before tick k + 1 existed: it is applied at k + 1 in every run. The ``/cmd_vel`` of
        tick k + 1 is on the wire before tick k + 2, long before the policy's next step (the next grid
        point)."""
        t = from_time_msg(msg.clock)
        self._tick_t = t
        try:
            if t >= self._next_t - 1e-9:
                self._flush_inputs()
                self._tick()
                half = 0.5 * self.period
                self._next_t = (math.floor((t - half) / self.period + 1e-6) + 1) * self.period + half
        finally:
            self.peer.ack(msg.clock)

    def available(self) -> Available:
        """Controllers reachable now."""
        return Available(
            policy=self.caller.ready("policy_start"),
            walking=self.caller.ready("walk_start"),
            wbc=self.caller.ready("wbc_start"),
            respawn=self.caller.ready("driver_respawn"),
        )

    def _event(self, t: float, kind: str, **detail: Any) -> None:
        ev = self.record.event(t, kind, **detail)
        self._last_event = {"t": round(ev.t, 6), "kind": kind, **detail}

    def _transition(self, tr: Transition | None) -> None:
        if tr is None:
            return
        # the time until now goes to the old mode (operation record: modes_s)
        self.record.account(tr.t, SHARE_OF[self._last_source or Source.NONE], tr.new.value)
        self._event(tr.t, "mode", old=tr.old.value, new=tr.new.value, reason=tr.reason)
        text = f"mode {tr.old.value} -> {tr.new.value} ({tr.reason})"
        # (one call site per severity: rclpy refuses a call site whose severity changes)
        if tr.new == Mode.DAMP:
            self.get_logger().error(text)
        else:
            self.get_logger().info(text)
        if tr.new == Mode.DAMP:
            self._stop_motion(tr.t)
            if self.machine.wbc_active and not self.machine.busy:  # the driver damped by itself
                self.machine.wbc_active = False
                self.caller.call_async("wbc_stop")
            if self.machine.walk_active and not self.machine.busy:
                self.machine.walk_active = False
                self.caller.call_async("walk_stop")

    def _stop_motion(self, t: float, why: str = "damping") -> None:
        was = self.mux.autonomy
        self.mux.stop()
        self.pub_cmd.publish(Twist())
        if was:
            self._event(t, "autonomy", on=False, reason=why)

    def state(self) -> dict[str, Any]:
        """The latched ``~/state`` content."""
        c = self.mux.counters
        return {
            "mode": self.machine.mode.value,
            "reason": self.machine.reason,
            "source": (self._last_source or Source.NONE).value,
            "autonomy": self.mux.autonomy,
            "driver_mode": self.machine.driver_mode,
            "policy_state": self.machine.policy_state,
            "wbc_state": self.machine.wbc_state,
            "walk_state": self.machine.walk_state,
            "robot_down": self.machine.down,
            "t": round(self.now(), 6),
            "counts": {
                "takeovers": self.record.counts["takeover"],
                "estops": self.record.counts["estop"],
                "refusals": self.record.counts["refusal"],
                "mode_changes": self.record.counts["mode"],
                "switches": self.record.counts["switch"],
                "switches_over_bound": self.switch_violations,
                "falls": self.record.counts["fall"],
                "respawns": self.record.counts["respawn"],
                "inputs_refused": sum(c.refused.values()),
                "inputs_clipped": sum(c.clipped.values()),
            },
            "last_event": self._last_event,
            # the operation record so far (its time shares accounted up to end_t): a recording of this
            # topic alone gives /mode_manager/report's shares and counts (humanoid-report)
            "record": _record_so_far(self.record),
        }

    def _publish_state(self) -> None:
        state = self.state()
        self._state_t = state["t"]
        self.pub_state.publish(String(data=json.dumps(state)))

    # ------------------------------------------------------------------ requests
    def _trigger_handler(self, request: Request) -> Any:
        def handle(_req: Any, resp: Any) -> Any:
            resp.success, resp.message = self.perform(request, "service")
            return resp

        return handle

    def _on_set_autonomy(self, req: Any, resp: Any) -> Any:
        request = Request.AUTONOMY_ON if req.data else Request.AUTONOMY_OFF
        resp.success, resp.message = self.perform(request, "service")
        return resp

    def perform(self, request: Request, origin: str) -> tuple[bool, str]:
        """Carry out one operator request; (success, message). Blocks this node's executor while the
        controllers answer (requests are carried out one at a time, in order)."""
        self._flush_inputs()  # lockstep: the inputs that came before the request count before it
        t = self.now()
        moving = t - self._moving_t < self.stand_settle_s
        stepping = self.walk_stepping and self.machine.walk_state == "run"
        decision = self.machine.decide(request, self.available(), moving, stepping)
        name = request.value if request != Request.AUTONOMY_OFF else "set_autonomy"
        if not decision.allowed:
            return self._refuse(t, name, decision.reason, origin)
        if request in (Request.ESTOP, Request.DAMP, Request.RESPAWN):
            # zero velocity at once, before anything else
            self._stop_motion(t, "respawn" if request == Request.RESPAWN else "damping")
        if request == Request.ESTOP:
            self._event(t, "estop", origin=origin)
            self.get_logger().error(f"E-STOP ({origin})")
        self.machine.busy = True
        try:
            for action in decision.actions:
                ok, message = self.caller.call(action, self.call_timeout)
                stopping = request in (Request.ESTOP, Request.DAMP)
                if not ok and action in ("wbc_stop", "walk_stop") and stopping:
                    what = "the WBC" if action == "wbc_stop" else "the walking controller"
                    self.get_logger().error(f"{name}: {what} did not stop: {message}")  # the driver damps
                elif not ok:
                    return self._refuse(self.now(), name, f"{name}: {message}", origin)
                if action in ("driver_reset", "driver_respawn"):
                    self.machine.driver_mode = "ramp"  # what the driver publishes at its next tick
                if action == "driver_respawn":  # counted once the driver took it, whatever follows
                    self._event(self.now(), "respawn", origin=origin)
                    self.get_logger().warning(f"respawn ({origin}): the robot back upright at its start pose")
        finally:
            self.machine.busy = False
        t = self.now()
        self._transition(self.machine.commit(decision, t))
        if request in (Request.AUTONOMY_ON, Request.AUTONOMY_OFF):
            on = request == Request.AUTONOMY_ON
            if self.mux.autonomy != on:
                self.mux.set_autonomy(on)
                self._event(t, "autonomy", on=on, origin=origin)
                self.get_logger().info(f"autonomy {'on' if on else 'off'} ({origin})")
        self._transition(self.machine.sync(t))
        self._publish_state()
        return True, decision.reason

    def _refuse(self, t: float, name: str, reason: str, origin: str) -> tuple[bool, str]:
        self._event(t, "refusal", request=name, reason=reason, origin=origin)
        self.get_logger().warning(f"refused {name} ({origin}): {reason}")
        self._publish_state()
        return False, reason

    # ------------------------------------------------------------------ output
    def _tick(self) -> None:
        t = self.now()
        out = self.mux.update(t)
        if out.velocity != (0.0, 0.0, 0.0):
            self._moving_t = t
        msg = Twist()
        msg.linear.x, msg.linear.y, msg.angular.z = out.velocity
        self.pub_cmd.publish(msg)
        self.record.account(t, SHARE_OF[out.source], self.machine.mode.value)
        if out.source != self._last_source:
            old = self._last_source
            self._last_source = out.source
            if old is not None:
                self._event(t, "source", old=old.value, new=out.source.value)
            self._publish_state()
        elif t - self._state_t >= 1.0 or t < self._state_t:
            self._publish_state()  # once a second as well: the input counters
        initial = self.initial_mode
        if (
            initial is not None
            and self.machine.mode == Mode.HOLD
            and not self.machine.busy
            and (initial != Mode.RUN_POLICY or self.available().policy)
            and (initial != Mode.WALK or self.available().walking)
        ):
            self.initial_mode = None
            request = {Mode.STAND: Request.STAND, Mode.WALK: Request.WALK}.get(initial, Request.RUN_POLICY)
            self.perform(request, "initial_mode")

    # ------------------------------------------------------------------ record
    def report(self) -> str:
        """The operation record as JSON; written to ``record_path`` when set."""
        self.record.account(self.now(), SHARE_OF[self._last_source or Source.NONE], self.machine.mode.value)
        text = self.record.to_json()
        if self.record_path not in ("", "none"):
            path = Path(self.record_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return text

    def _on_report(self, _req: Any, resp: Any) -> Any:
        resp.success, resp.message = True, self.report()
        return resp

    def close(self) -> None:
        """At shutdown: the record's summary in the log, and the file when ``record_path`` is set."""
        with contextlib.suppress(Exception):
            self.caller.close()
        try:
            text = self.report()
        except Exception as exc:  # shutting down: never hide the exit
            self.get_logger().error(f"could not write the operation record: {exc}")
            return
        summary = json.loads(text)
        summary.pop("events", None)
        self.get_logger().info(f"operation record: {json.dumps(summary)}")


def _record_so_far(record: OperationRecord) -> dict[str, Any]:
    """The operation record's ``start_t``, ``end_t`` (s, node clock: its time shares are accounted up to
    there), ``shares_s``, ``modes_s`` and ``counts``, as ``~/report`` gives them."""
    summary = record.summary(events=False)
    return {k: summary[k] for k in ("start_t", "end_t", "shares_s", "modes_s", "counts")}


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack mode_manager``."""
    return run_node(ModeManagerNode, args, "mode_manager")


if __name__ == "__main__":
    raise SystemExit(main())
