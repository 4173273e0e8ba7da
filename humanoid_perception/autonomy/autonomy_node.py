"""Autonomy node (``autonomy_node``): the marker-approach task (``approach.ApproachTask``) on the ROS graph.

- subscribes ``/perception/detections`` (std_msgs/String, JSON of the perception node: the markers of each
  camera frame in ``odom`` and the base pose in ``odom`` at the frame's stamp) and ``/mode_manager/state``
  (latched JSON: ``autonomy`` on/off);
- publishes ``/autonomy/cmd_vel`` (geometry_msgs/Twist, heading frame: linear.x, linear.y m/s, angular.z
  rad/s) once per camera frame while the task runs, and a zero when it ends; the mode manager's mux passes it
  on to ``/cmd_vel`` while autonomy is on (docs/modes.md);
- ``~/state`` (std_msgs/String, latched JSON: ``phase``, ``reason``, ...) on every change of phase and
  ``~/outcome`` (std_msgs/String, latched JSON, :meth:`ApproachTask.outcome`) when the task ends: ``phase``
  ``reached``, ``aborted`` (marker lost in view, perception error, autonomy off / teleop takeover, stop) or
  ``failed`` (nothing found by the search: a full turn, then a walk out and around; timeout), with ``reason``;
- services ``~/start`` (std_srvs/Trigger): switch autonomy on (``/mode_manager/set_autonomy``; its refusal is
  the answer) and start the task at the next camera frame; ``~/stop`` (Trigger): abort, zero velocity,
  autonomy off.

A perception error (``status: error`` in a frame) aborts the task with a zero command at once. When the task
ends by itself the node switches autonomy off at the mode manager (control back to the operator).

Lockstep (``lockstep: true``): a lockstep peer that acknowledges, after publishing the command for the frame
due at tick t, every tick up to the next due frame (the camera's ``rate_hz`` grid).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from humanoid_control.ros.node_utils import QuietNode, context_ok, declare, run_node, to_time_msg
from humanoid_perception.autonomy.approach import ApproachSettings, ApproachTask, Phase, Pose2D, Sighting
from humanoid_perception.camera_mount import quat_xyzw_to_matrix
from humanoid_perception.camera_node import ACK_MARGIN_S, frame_period_ms, next_due

#: node parameters that go into ApproachSettings (name, description, low, high)
SETTING_RANGES: dict[str, tuple[str, float, float]] = {
    "marker_id": ("marker to approach; -1: the first one confirmed", -1, 100000),
    "standoff_m": ("standoff distance from the marker centre (m)", 0.1, 5.0),
    "search_wz": ("search turn rate (rad/s; sign = direction)", -1.0, 1.0),
    "search_radius_m": ("radius of the walking search after the scan (m); 0: scan only", 0.0, 10.0),
    "search_vx": ("forward speed of the walking search (m/s)", 0.05, 0.8),
    "vx_max": ("forward speed limit (m/s)", 0.05, 0.8),
    "vy_max": ("lateral speed limit (m/s)", 0.01, 0.4),
    "wz_max": ("turn rate limit (rad/s)", 0.05, 1.0),
    "position_tolerance_m": ("goal position tolerance (m)", 0.01, 1.0),
    "heading_tolerance_rad": ("goal heading tolerance (rad)", 0.005, 1.0),
    "lost_timeout_s": ("abort when the marker, expected in view, was unseen this long (s)", 0.2, 60.0),
    "timeout_s": ("fail after this long (s)", 1.0, 3600.0),
}


class AutonomyNode(QuietNode):
    """ROS adapter of :class:`ApproachTask` (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("autonomy_node")
        from geometry_msgs.msg import Twist
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String
        from std_srvs.srv import SetBool, Trigger

        from humanoid_control.ros.lockstep import LockstepPeer
        from humanoid_control.ros.service_caller import ServiceCaller

        defaults = ApproachSettings()
        values: dict[str, Any] = {}
        for name, (desc, lo, hi) in SETTING_RANGES.items():
            default = getattr(defaults, name)
            values[name] = declare(self, name, default, desc, lo, hi)
        self.settings = ApproachSettings.from_mapping(values)
        rate = declare(self, "rate_hz", 5.0, "the camera's frame rate (lockstep grid)", 0.1, 100.0, True)
        self.lockstep = declare(self, "lockstep", False, "lockstep peer of the driver", read_only=True)
        self.mode_manager = declare(
            self, "mode_manager", "/mode_manager", "mode manager node", read_only=True
        )
        self.call_timeout = declare(
            self, "call_timeout_s", 5.0, "wall time a service call waits (s)", 0.1, 60.0
        )
        self.period_ms = frame_period_ms(rate)
        self.task = ApproachTask(self.settings)
        self._start_requested = False
        self._stop_requested = ""
        self._autonomy_on: bool | None = None
        self._acked_t = -math.inf
        self._twist = Twist
        self._string = String

        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.pub_cmd = self.create_publisher(Twist, "/autonomy/cmd_vel", 10)
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.pub_outcome = self.create_publisher(String, "~/outcome", latched)
        self.create_subscription(
            String,
            f"{self.mode_manager}/state",
            self._on_mode_state,
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        self.create_subscription(String, "/perception/detections", self._on_detections, 10)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.caller = ServiceCaller(
            self.context,
            f"{self.get_name()}_calls",
            {
                "set_autonomy": (SetBool, f"{self.mode_manager}/set_autonomy"),
            },
        )
        self._set_bool = SetBool
        self.peer = LockstepPeer(self, self.lockstep)
        self._publish_state()

    # ------------------------------------------------------------------ services
    def _set_autonomy(self, on: bool) -> tuple[bool, str]:
        result = self.caller.request("set_autonomy", self._set_bool.Request(data=on), self.call_timeout)
        if isinstance(result, str):
            return False, result
        return bool(result.success), str(result.message)

    def _on_start(self, _req: Any, resp: Any) -> Any:
        if self.task.active or self._start_requested:
            resp.success, resp.message = False, f"the task is already running ({self.task.phase.value})"
            return resp
        ok, why = self._set_autonomy(True)
        if not ok:
            resp.success, resp.message = False, f"set_autonomy refused: {why}"
            self.get_logger().warning(resp.message)
            return resp
        self._autonomy_on = True
        self._start_requested = True
        self._stop_requested = ""
        resp.success, resp.message = True, "autonomy on; the task starts at the next camera frame"
        self.get_logger().info(resp.message)
        return resp

    def _on_stop(self, _req: Any, resp: Any) -> Any:
        was = self.task.active or self._start_requested
        self._start_requested = False
        if self.task.active:
            self._stop_requested = "stopped by request"
        self.pub_cmd.publish(self._twist())
        self._set_autonomy(False)
        resp.success = True
        resp.message = "stopping (zero velocity, autonomy off)" if was else "not running; autonomy off"
        return resp

    def _on_mode_state(self, msg: Any) -> None:
        try:
            state = json.loads(msg.data)
        except ValueError:
            return
        if isinstance(state, dict) and "autonomy" in state:
            self._autonomy_on = bool(state["autonomy"])

    # ------------------------------------------------------------------ frames
    def _on_detections(self, msg: Any) -> None:
        try:
            det = json.loads(msg.data)
            t = float(det["stamp"])
        except (ValueError, KeyError, TypeError) as exc:
            self.get_logger().error(f"unreadable /perception/detections: {exc}", throttle_duration_sec=2.0)
            if self.task.active:
                self._finish(self.task.stop(self.task.t_start or 0.0, "unreadable perception message"))
            return
        if self._start_requested:
            self._start_requested = False
            self.task.start(t)
            self._publish_state()
        if self.task.active:
            phase = self.task.phase
            cmd = self._step(t, det)
            self.pub_cmd.publish(self._twist_of(cmd))
            if not self.task.active:
                self._finish(cmd)
            elif self.task.phase != phase:
                self._publish_state()
        if self.lockstep and t > self._acked_t:
            self._acked_t = t
            self.peer.ack(to_time_msg(next_due(t, self.period_ms) - ACK_MARGIN_S))

    def _step(self, t: float, det: dict[str, Any]) -> Any:
        if self._stop_requested:
            return self.task.stop(t, self._stop_requested)
        error = str(det.get("error", "")) if det.get("status") != "ok" else ""
        base = det.get("base_pose_odom")
        if error or base is None:
            return self.task.step(
                t, self.task.last_pose or Pose2D(0.0, 0.0, 0.0), None, error or "no robot pose"
            )
        pose = Pose2D(float(base[0]), float(base[1]), float(base[2]))
        sightings = []
        for m in det.get("markers", []):
            if "position_odom" not in m or "quat_odom_xyzw" not in m:
                continue
            q = np.asarray(m["quat_odom_xyzw"], dtype=float)
            if q.shape != (4,) or not np.all(np.isfinite(q)) or np.linalg.norm(q) < 1e-6:
                continue
            sightings.append(
                Sighting(int(m["id"]), np.asarray(m["position_odom"], dtype=float), quat_xyzw_to_matrix(q))
            )
        enabled = self._autonomy_on is not False
        return self.task.step(t, pose, sightings, "", enabled)

    def _twist_of(self, cmd: Any) -> Any:
        tw = self._twist()
        tw.linear.x, tw.linear.y, tw.angular.z = float(cmd.vx), float(cmd.vy), float(cmd.wz)
        return tw

    def _finish(self, _cmd: Any) -> None:
        out = self.task.outcome()
        self.pub_outcome.publish(self._string(data=json.dumps(out)))
        self._publish_state()
        text = f"task {out['phase']}: {out['reason']} ({json.dumps(out)})"
        if self.task.phase == Phase.REACHED:
            self.get_logger().info(text)
        else:  # rclpy refuses two severities from one call site
            self.get_logger().warning(text)
        if self._autonomy_on is not False:
            ok, why = self._set_autonomy(False)
            if not ok:
                self.get_logger().warning(f"could not switch autonomy off: {why}")

    def _publish_state(self) -> None:
        self.pub_state.publish(
            self._string(data=json.dumps({"phase": self.task.phase.value, "reason": self.task.reason}))
        )

    def close(self) -> None:
        """Zero velocity, leave the lockstep, stop the service caller (nothing is published once the context
        is gone)."""
        if self.task.active and context_ok(self):
            self.pub_cmd.publish(self._twist())
        self.peer.leave()
        self.caller.close()


def main(args: list[str] | None = None) -> int:
    """Entry point of ``autonomy_node``."""
    return run_node(AutonomyNode, args, program="autonomy_node")


if __name__ == "__main__":
    raise SystemExit(main())
