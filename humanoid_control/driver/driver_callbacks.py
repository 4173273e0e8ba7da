"""The robot driver's callbacks on the executor thread: parameter changes (``_on_set_parameters``),
``/joint_commands``, the lockstep acknowledgements, and the services ``~/set_pause``, ``~/estop``,
``~/hold``, ``~/reset``, ``~/push`` and ``~/respawn`` (with ``_respawn``, the loop thread's half of a
respawn).

:class:`DriverCallbacksMixin` is a base of
:class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`, which subscribes and creates the
services. They share the core, the backend and the lock with the loop thread
(:mod:`humanoid_control.driver.driver_loop`): each takes ``lock`` (or ``command_arrived``, its condition,
where the loop may be waiting for what it changes) around what the loop reads.
"""

from __future__ import annotations

import math
from typing import Any

from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from humanoid_control.driver.driver_core import CommandError, validate_command, validate_gains
from humanoid_control.hardware.mujoco_sim import tilt_from_quat
from humanoid_control.hardware.push import PushError, validate_push
from humanoid_control.model.robot_config import ConfigError
from humanoid_control.ros.node_utils import from_time_msg


class DriverCallbacksMixin:
    """The executor thread's callbacks of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`
    (``self`` is the driver node)."""

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
