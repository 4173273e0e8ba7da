"""Input callbacks of the mode manager (:mod:`humanoid_control.modes.mode_manager_node`).

:class:`ModeManagerInputs` is a base class of the node (``ModeManagerNode``) holding its subscription
callbacks: the driver's mode, switch and fall (``~/down``) reports, the controllers' states, the walking
status, and the
velocity inputs (``/teleop/cmd_vel``, ``/autonomy/cmd_vel``, ``/joy``), applied at once or, in lockstep,
buffered until the next computing tick.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from geometry_msgs.msg import Twist
from sensor_msgs.msg import Joy
from std_msgs.msg import Float64MultiArray, String

from humanoid_control.modes.mode_machine import Mode, Request

if TYPE_CHECKING:
    from humanoid_control.modes.command_mux import CommandMux
    from humanoid_control.modes.joy_mapping import JoyMapping
    from humanoid_control.modes.mode_machine import ModeMachine, Transition


class ModeManagerInputs:
    """The mode manager node's input callbacks (a base class of the node: it reads and sets the node's
    state, and reports through the node's events, transitions and ``~/state``)."""

    # the node's state used here (set by the node)
    machine: ModeMachine
    mux: CommandMux
    joy_mapping: JoyMapping
    lockstep: bool
    max_torque_step: float
    switch_violations: int
    walk_stepping: bool
    _joy_buttons: list[int] | None
    _pending: list[tuple[str, Any]]

    if TYPE_CHECKING:  # the node's methods used here

        def get_logger(self) -> Any: ...

        def now(self) -> float: ...

        def perform(self, request: Request, origin: str) -> tuple[bool, str]: ...

        def _event(self, t: float, kind: str, **detail: Any) -> None: ...

        def _transition(self, tr: Transition | None) -> None: ...

        def _publish_state(self) -> None: ...

    def _on_driver_mode(self, msg: String) -> None:
        t = self.now()
        tr = self.machine.on_driver_mode(msg.data, t)
        if tr is not None and tr.new == Mode.DAMP:
            self._event(t, "fault", source="driver", reason=tr.reason)
        self._transition(tr)
        self._publish_state()

    def _on_policy_state(self, msg: String) -> None:
        t = self.now()
        if msg.data == "fault":
            self._event(t, "fault", source="policy_runner", state=msg.data)
        self._transition(self.machine.on_policy_state(msg.data, t))
        self._publish_state()

    def _on_driver_down(self, msg: String) -> None:
        """``{driver}/down`` (JSON: ``down``, ``tilt_deg``, ``fall_tilt_deg``, ``t``): the robot went down
        (base tilt beyond the driver's ``fall_tilt_deg``; recorded as a fall) or is up again."""
        try:
            data = json.loads(msg.data)
            down = bool(data["down"])
            tilt, limit = float(data.get("tilt_deg", math.nan)), float(data.get("fall_tilt_deg", math.nan))
            stamp = float(data.get("t", math.nan))
        except (ValueError, KeyError, TypeError, AttributeError):
            self.get_logger().warning(f"ignored a malformed driver down report: {msg.data!r}")
            return
        reason = f"base tilt {tilt:.0f} deg beyond the driver's fall_tilt_deg {limit:.0f}"
        was = self.machine.down
        # the fall is recorded at the driver's tick that saw it (the same in every lockstep run), not at the
        # tick this message happened to be read
        t = stamp if math.isfinite(stamp) else self.now()
        if self.machine.on_down(down, reason):
            self._event(t, "fall", reason=reason)
            self.get_logger().warning(f"the robot is down: {reason}")
        elif was and not down:
            self.get_logger().info(f"the robot is up again (base tilt {tilt:.0f} deg)")
        self._publish_state()

    def _on_wbc_state(self, msg: String) -> None:
        self.machine.wbc_state = msg.data
        if msg.data == "fault":
            self._event(self.now(), "fault", source="wbc_controller", state=msg.data)
        self._publish_state()

    def _on_walk_state(self, msg: String) -> None:
        self.machine.walk_state = msg.data
        if msg.data != "run":
            self.walk_stepping = False  # not stepping while idle, waiting or faulted (status stops)
        if msg.data == "fault":
            self._event(self.now(), "fault", source="walking_controller", state=msg.data)
        self._publish_state()

    def _on_walking_status(self, msg: Float64MultiArray) -> None:
        """``/walking/status``: its last field (``walking``: 1 while a footstep plan runs, 0 standing)."""
        if msg.data:
            value = float(msg.data[-1])
            self.walk_stepping = not (math.isfinite(value) and value < 0.5)

    def _on_switch(self, msg: String) -> None:
        try:
            data = json.loads(msg.data)
        except ValueError:
            return
        within = (
            float(data.get("step_at_switch", 0.0)) <= self.max_torque_step + 1e-9
            and float(data.get("max_step", 0.0)) <= self.max_torque_step + 1e-9
        )
        data["within_bound"] = within
        self.switch_violations += 0 if within else 1
        t = data.pop("t", None)
        self._event(float(t) if isinstance(t, int | float) else self.now(), "switch", **data)
        text = (
            f"switch {data.get('from')} -> {data.get('to')}: largest torque step {data.get('max_step')} of "
            f"the effort limit ({data.get('max_step_joint')}), at the switch {data.get('step_at_switch')}; "
            f"bound {self.max_torque_step:g}{'' if within else ' EXCEEDED'}"
        )
        if within:
            self.get_logger().info(text)
        else:
            self.get_logger().error(text)
        self._publish_state()

    def _on_teleop(self, msg: Twist) -> None:
        if self.lockstep:
            self._pending.append(("teleop", msg))
            return
        self._apply_teleop(msg, self.now())

    def _on_autonomy(self, msg: Twist) -> None:
        if self.lockstep:
            self._pending.append(("autonomy", msg))
            return
        self._apply_autonomy(msg, self.now())

    def _on_joy(self, msg: Joy) -> None:
        if self.lockstep:
            self._pending.append(("joy", msg))
            return
        self._apply_joy(msg, self.now())

    def _flush_inputs(self) -> None:
        """Lockstep: apply the buffered inputs, in arrival order, at :meth:`now`. Called at a computing tick
        and before a request (a service call made while the simulation is held applies the inputs that
        arrived before it first, as the immediate path would have)."""
        pending, self._pending = self._pending, []
        for kind, item in pending:
            self._apply_input(kind, item, self.now())

    def _apply_input(self, kind: str, msg: Any, t: float) -> None:
        {"teleop": self._apply_teleop, "autonomy": self._apply_autonomy, "joy": self._apply_joy}[kind](msg, t)

    def _apply_teleop(self, msg: Twist, t: float) -> None:
        accepted, takeover = self.mux.teleop_twist(t, msg.linear.x, msg.linear.y, msg.angular.z)
        if not accepted:
            self.get_logger().warning(
                f"refused /teleop/cmd_vel: {self.mux.counters.last_refusal}", throttle_duration_sec=1.0
            )
        if takeover:
            self._takeover(t, "/teleop/cmd_vel")

    def _apply_autonomy(self, msg: Twist, t: float) -> None:
        if not self.mux.autonomy_twist(t, msg.linear.x, msg.linear.y, msg.angular.z):
            self.get_logger().warning(
                f"refused /autonomy/cmd_vel: {self.mux.counters.last_refusal}", throttle_duration_sec=1.0
            )

    def _apply_joy(self, msg: Joy, t: float) -> None:
        buttons = list(msg.buttons)
        command = self.joy_mapping.map(list(msg.axes), buttons, self._joy_buttons)
        if isinstance(command, str):
            self.mux.joy(t, command)
            self.get_logger().warning(command, throttle_duration_sec=1.0)
            return
        self._joy_buttons = buttons
        if self.mux.joy(t, command):
            self._takeover(t, "/joy")
        for name in command.pressed:
            request = Request(name)
            self.perform(request, "joy")

    def _takeover(self, t: float, by: str) -> None:
        self._event(t, "takeover", by=by)
        self.get_logger().warning(f"teleop takeover ({by}): autonomy off until set again")
        self._publish_state()
