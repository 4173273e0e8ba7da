"""Walking controller node (``walking_controller``): :class:`~.controller.WalkingController` in the loop.

The whole-body controller node (:mod:`humanoid_control.wbc.wbc_node`) with the walking controller inside:
the same inputs (``/joint_states``, ``/odom`` from the state estimator, the driver's mode; never ``/sim/*``),
the same ``/joint_commands``, lockstep pairing, gains hand-shake, ``~/start`` / ``~/stop`` / ``~/reset`` and
failure policy; plus:

- subscribes ``/cmd_vel`` (geometry_msgs/Twist: ``linear.x``, ``linear.y`` m/s, ``angular.z`` rad/s in the
  walking frame). A non-finite command is refused (counted, logged, the previous one kept); one beyond the
  command limits is clipped and ``/diagnostics`` warns; a command older than ``cmd_vel_timeout_s`` (robot
  time) counts as zero: the robot finishes its step, brings its feet together and stands. In lockstep the
  latest command received is applied at the first tick at or after 6 ms past each 10 ms point of
  simulated time (the grid on which the evaluations and the mode manager publish it), and only then: a
  command published at a grid tick is in by then (the driver has advanced three ticks since), so it takes
  effect at the same tick in every run, whatever the order in which the executor serves ``/cmd_vel`` and
  ``/joint_states``. In realtime a command applies on arrival.
- publishes ``/walking/footsteps`` (visualization_msgs/MarkerArray, ``odom`` frame: the planned soles,
  left blue, right red, for rviz2) and ``/walking/plan`` (nav_msgs/Path, ``odom`` frame: the planned sole
  poses in order), both latched (transient-local, depth 1: a late subscriber gets the current plan): the
  plan at each new plan, an empty plan (no poses; a DELETEALL marker only) at start-up (stamp 0) and
  whenever the robot stands; ``/walking/status`` (std_msgs/Float64MultiArray at ``status_rate_hz``,
  robot time; its layout labels name the fields: time, CoM and its plan, DCM and its plan, the ZMP
  commanded and planned (m, odom frame), contacts (1/0), mode (0 stand, 1 walk)). No ``/wbc/markers``: the
  standing balance markers of the WBC node do not apply to walking.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Path
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from humanoid_control.ros.node_utils import declare, run_node
from humanoid_control.walking.controller import WalkingController, WalkingSettings, WalkMode
from humanoid_control.walking.footsteps import SIDES, FootstepPlan
from humanoid_control.walking.mpc_walk import MpcWalkController
from humanoid_control.wbc.balance import BalanceSettings
from humanoid_control.wbc.command import CommandSettings
from humanoid_control.wbc.runner import WbcState
from humanoid_control.wbc.wbc_node import MarkerArray, WbcNode

CMD_GRID_MS = 10  # lockstep: /cmd_vel is published on this grid of simulated time (ms)
CMD_PHASE_MS = 6  # lockstep: and applied at the first tick this far past each grid point (ms)

STATUS_FIELDS = (
    "t",
    "com_x",
    "com_y",
    "com_ref_x",
    "com_ref_y",
    "dcm_x",
    "dcm_y",
    "dcm_ref_x",
    "dcm_ref_y",
    "zmp_x",
    "zmp_y",
    "zmp_ref_x",
    "zmp_ref_y",
    "contact_left",
    "contact_right",
    "walking",
)


class WalkingNode(WbcNode):
    """ROS 2 adapter of :class:`WalkingController` (module docstring)."""

    hosted_class = MpcWalkController
    balance_markers = False  # /walking/footsteps and /walking/status instead (module docstring)

    def __init__(self) -> None:
        self._walk_settings: WalkingSettings | None = None
        super().__init__("walking_controller")
        self.cmd_timeout = declare(
            self,
            "cmd_vel_timeout_s",
            0.5,
            "a /cmd_vel older than this (robot time, s) counts as zero",
            0.05,
            10.0,
        )
        self.controller.settings.stale_command_s = self.cmd_timeout
        self.status_period = 1.0 / declare(
            self, "status_rate_hz", 50.0, "/walking/status rate (Hz, robot time)", 1.0, 500.0
        )
        self.cmd_refused = 0
        self.cmd_clipped = 0
        self.last_cmd_problem = ""
        self._plans_published = 0
        self._plan_shown = False  # the plan last published has footsteps (else it is the empty one)
        # capture and crossing steps already logged
        self._recoveries_logged = self._crossings_logged = self._steps_logged = 0
        self._touchdowns_logged = 0
        self._last_status = -1e9
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.pub_plan = self.create_publisher(Path, "/walking/plan", latched)
        self.pub_footsteps = (
            self.create_publisher(MarkerArray, "/walking/footsteps", latched)
            if MarkerArray is not None
            else None
        )
        self._publish_plan(None, None)  # standing: nothing planned yet
        self.pub_status = self.create_publisher(Float64MultiArray, "/walking/status", 10)
        self._pending_cmd: tuple[float, float, float] | None = None  # lockstep: the latest, not yet applied
        self._cmd_slot = -(2**62)  # lockstep: the slot (CMD_GRID_MS periods) of the last tick
        self.create_subscription(Twist, "/cmd_vel", self._on_cmd_vel, 10)

    def _make_controller(self, balance: BalanceSettings, command: CommandSettings) -> Any:
        settings = WalkingSettings(stand_dcm_gain=balance.dcm_gain)
        return WalkingController(self.config, settings=settings, command=command)

    # ------------------------------------------------------------------ inputs
    def _on_cmd_vel(self, msg: Twist) -> None:
        vx, vy, wz = msg.linear.x, msg.linear.y, msg.angular.z
        if self.lockstep:
            if not all(math.isfinite(x) for x in (vx, vy, wz)):
                self._refuse_cmd(ValueError(f"non-finite velocity command ({vx}, {vy}, {wz})"))
            else:
                self._pending_cmd = (vx, vy, wz)  # applied at the next command slot (_tick)
            return
        self._apply_cmd(vx, vy, wz)

    def _refuse_cmd(self, exc: ValueError) -> None:
        self.cmd_refused += 1
        self.last_cmd_problem = str(exc)
        self.get_logger().error(f"refused /cmd_vel: {exc}", throttle_duration_sec=1.0)

    def _apply_cmd(self, vx: float, vy: float, wz: float) -> None:
        try:
            clipped = self.controller.set_command(vx, vy, wz)
        except ValueError as exc:
            self._refuse_cmd(exc)
            return
        if clipped:
            self.cmd_clipped += 1
            c = self.controller.command
            self.last_cmd_problem = (
                f"/cmd_vel ({vx:.3g}, {vy:.3g}, {wz:.3g}) clipped to the limits: ({c.vx:.3g}, {c.vy:.3g}, "
                f"{c.wz:.3g})"
            )
            self.get_logger().warning(self.last_cmd_problem, throttle_duration_sec=1.0)

    def _on_driver_mode(self, msg: Any) -> None:
        if msg.data == "ramp":  # reset or respawn: stand on the new feet
            self.controller.stand_now()
        super()._on_driver_mode(msg)

    # ------------------------------------------------------------------ per tick
    def _tick(self, t: float, q: np.ndarray, dq: np.ndarray, stamp: Any) -> None:
        # lockstep: the first tick of each command slot applies what came before it; a command that comes
        # later in the slot waits for the next one (never applied at a tick that depends on its arrival)
        slot = math.floor((round(t * 1000.0) - CMD_PHASE_MS) / CMD_GRID_MS)
        if slot != self._cmd_slot:
            self._cmd_slot = slot
            if self._pending_cmd is not None:
                self._apply_cmd(*self._pending_cmd)
                self._pending_cmd = None
        super()._tick(t, q, dq, stamp)
        ctl: WalkingController = self.controller
        standing = ctl.mode == WalkMode.STAND
        if len(ctl.plans) != self._plans_published:
            self._plans_published = len(ctl.plans)
            if not standing:  # (a plan whose preview failed leaves the robot standing)
                self._publish_plan(ctl.plans[-1][1], stamp)
        if standing and self._plan_shown:
            self._publish_plan(None, stamp)  # the walk or the step is over: nothing planned
        if len(ctl.recoveries) + len(ctl.crossings) != self._steps_logged:
            self._log_recovery_steps(ctl)
        if len(ctl.touchdowns) != self._touchdowns_logged:
            self._log_touchdowns(ctl)
        if self.runner.state == WbcState.RUN and (t - self._last_status >= self.status_period - 1e-9):
            self._last_status = t
            self._publish_status(t)

    def _log_recovery_steps(self, ctl: WalkingController) -> None:
        """One log line per capture or crossing step the controller took since the last call (sim time s,
        the stepping foot, its landing pose in the odom frame: m, m, rad)."""
        for t, side, adj in ctl.recoveries[self._recoveries_logged :]:
            p = adj.step.pose
            self.get_logger().info(
                f"capture step at t = {t:.3f} s: {side} foot to ({p.x:.3f}, {p.y:.3f}, {p.yaw:.3f})"
            )
        for t, side, step in ctl.crossings[self._crossings_logged :]:
            p = step.pose
            self.get_logger().info(
                f"crossing step at t = {t:.3f} s: {side} foot to ({p.x:.3f}, {p.y:.3f}, {p.yaw:.3f})"
            )
        self._recoveries_logged, self._crossings_logged = len(ctl.recoveries), len(ctl.crossings)
        self._steps_logged = self._recoveries_logged + self._crossings_logged

    def _log_touchdowns(self, ctl: WalkingController) -> None:
        """One log line per touchdown since the last call (sim time s, foot, measured sole pose in the odom
        frame: m, m, rad, and the DCM then: m): at info level in a capture or crossing step's plan, at
        debug level while walking."""
        log = self.get_logger().info if ctl.recovering else self.get_logger().debug
        xi = ctl.status.dcm
        for t, side, p in ctl.touchdowns[self._touchdowns_logged :]:
            log(
                f"touchdown at t = {t:.3f} s: {side} foot at ({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}), "
                f"DCM ({xi[0]:.3f}, {xi[1]:.3f})"
            )
        self._touchdowns_logged = len(ctl.touchdowns)

    def _publish_plan(self, plan: FootstepPlan | None, stamp: Any | None) -> None:
        """``/walking/plan`` and ``/walking/footsteps`` of ``plan`` (odom frame, m; z: the ground under the
        schedule), or the empty plan for ``None`` (standing); ``stamp`` None: 0 (before the first tick)."""
        steps = plan.steps if plan is not None else []
        self._plan_shown = bool(steps)
        path = Path()
        if stamp is not None:
            path.header.stamp = stamp
        path.header.frame_id = "odom"
        z = self.controller.generator.schedule.ground_z if self.controller.generator.schedule else 0.0
        for step in steps:
            ps = PoseStamped()
            ps.header = path.header
            ps.pose.position.x, ps.pose.position.y, ps.pose.position.z = step.pose.x, step.pose.y, z
            ps.pose.orientation.z = math.sin(0.5 * step.pose.yaw)
            ps.pose.orientation.w = math.cos(0.5 * step.pose.yaw)
            path.poses.append(ps)
        self.pub_plan.publish(path)
        if self.pub_footsteps is None:
            return
        from visualization_msgs.msg import Marker

        arr = MarkerArray()
        clear = Marker()
        clear.header = path.header
        clear.ns, clear.action = "footsteps", Marker.DELETEALL
        arr.markers.append(clear)
        soles = self.controller.planner.soles
        for i, (step, ps) in enumerate(zip(steps, path.poses, strict=True)):
            poly = soles[step.side]
            mk = Marker()
            mk.header = path.header
            mk.ns, mk.id, mk.type, mk.action = "footsteps", i, Marker.CUBE, Marker.ADD
            centre = step.pose.apply(poly.mean(axis=0)[None, :])[0]
            mk.pose.position.x, mk.pose.position.y, mk.pose.position.z = float(centre[0]), float(centre[1]), z
            mk.pose.orientation = ps.pose.orientation
            mk.scale.x = float(np.ptp(poly[:, 0]))
            mk.scale.y = float(np.ptp(poly[:, 1]))
            mk.scale.z = 0.01
            left = step.side == SIDES[0]
            mk.color.r, mk.color.g, mk.color.b, mk.color.a = (
                (0.2, 0.4, 1.0, 0.7) if left else (1.0, 0.3, 0.2, 0.7)
            )
            arr.markers.append(mk)
        self.pub_footsteps.publish(arr)

    def _publish_status(self, t: float) -> None:
        st = self.controller.status
        values = [
            t,
            *st.com[:2],
            *st.com_ref[:2],
            *st.dcm,
            *st.dcm_ref,
            *st.zmp_cmd,
            *st.zmp_ref,
            float(st.contacts["left"]),
            float(st.contacts["right"]),
            float(st.mode == WalkMode.WALK),
        ]
        msg = Float64MultiArray(data=[float(v) for v in values])
        msg.layout.dim = [
            MultiArrayDimension(label=",".join(STATUS_FIELDS), size=len(values), stride=len(values))
        ]
        self.pub_status.publish(msg)

    # ------------------------------------------------------------------ outputs
    def diagnostic_values(self) -> dict[str, Any]:
        ctl: WalkingController = self.controller
        values = super().diagnostic_values()
        c = ctl.active_command()
        values.update(
            {
                "walk_mode": ctl.mode.value,
                "cmd_vel_active": f"{c.vx:.3f},{c.vy:.3f},{c.wz:.3f}",
                "cmd_vel_refused": self.cmd_refused,
                "cmd_vel_clipped": self.cmd_clipped,
                "last_cmd_vel_problem": self.last_cmd_problem,
                "footstep_plans": len(ctl.plans),
                "steps_adjusted": ctl.status.adjusted_steps,
                "recovery_steps": len(ctl.recoveries),
                "crossing_steps": len(ctl.crossings),
                "pattern_failures": ctl.pattern_failures,
            }
        )
        return values

    def _diagnostic_level(self) -> tuple[bytes, str]:
        level, message = super()._diagnostic_level()
        if level == DiagnosticStatus.OK and (self.cmd_refused or self.controller.status.command_clipped):
            problem = "refused" if self.cmd_refused else "clipped"
            return DiagnosticStatus.WARN, f"{message}; /cmd_vel {problem}: {self.last_cmd_problem}"
        return level, message


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack walking_controller``."""
    return run_node(WalkingNode, args, "walking_controller")


if __name__ == "__main__":
    raise SystemExit(main())
