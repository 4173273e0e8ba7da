"""Browser console node (``console``; ``humanoid-console``; launch argument ``console:=true``): a viser page
that shows the robot live and operates it through the mode manager.

Serves ``http://<host>:<port>/`` (parameters ``host``, default 127.0.0.1, and ``port``, 8080). A host that is
not a loopback address needs a ``token`` (parameter, or the environment variable ``HUMANOID_CONSOLE_TOKEN``
so that it does not show in the process list): the node refuses to start without one, and pages must be
opened as ``http://HOST:PORT/?token=TOKEN`` (:mod:`humanoid_bringup.console.access`,
:mod:`humanoid_bringup.console.gate`).

Reads (all observers: best-effort keep-last 1 for the 500 Hz streams, taken by a timer from a helper node
``console_streams`` that no executor spins, so they wake no Python code; never a lockstep peer):

- ``/robot_description`` (std_msgs/String, latched): the robot model with its meshes;
- ``/joint_states`` (sensor_msgs/JointState, rad), ``/odom`` (nav_msgs/Odometry, the estimator's ``odom ->
  base_link``; where no estimator runs the base is placed at ground truth and the status says so),
  ``/sim/ground_truth`` (nav_msgs/Odometry, the ghost);
- ``/walking/plan`` (nav_msgs/Path), ``/walking/footsteps``, ``/wbc/markers`` and ``/perception/markers``
  (visualization_msgs/MarkerArray), redrawn at most ``markers_rate_hz`` times a second;
- ``/perception/height_map`` (sensor_msgs/PointCloud2, odom, one point per cell) drawn as a mesh at most
  ``height_map_rate_hz`` times a second, ``/camera/color/image_raw`` (sensor_msgs/Image) shown at
  ``camera_rate_hz``;
- ``/diagnostics``, ``/robot_driver/mode`` and ``/mode_manager/state`` (the status panel).

Operates (only when the mode manager's services are reachable; otherwise the controls are disabled and the
status says why): the mode manager's Trigger services ``/mode_manager/{stand, walk, run_policy, damp, estop,
reset}`` and ``/mode_manager/set_autonomy`` (std_srvs/SetBool), each answer shown on the page;
``/teleop/cmd_vel`` (geometry_msgs/Twist: ``linear.x`` m/s, ``angular.z`` rad/s) while "hold to drive" is
held (:mod:`humanoid_bringup.console.drive`: fixed rate, zero on release / disconnect / deadman, one page
drives at a time, slider values validated and clamped to the mode manager's ``vx_max``, ``vx_min``,
``wz_max``); in simulation pushes through ``/robot_driver/push`` (its ``push_force`` and ``push_duration_s``
parameters set first; impulse N s in the world frame).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry, Path
from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, JointState, PointCloud2
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger

from humanoid_bringup.console.access import check_binding
from humanoid_bringup.console.convert import cloud_xyz, height_map_mesh, image_rgb
from humanoid_bringup.console.drive import DriveControl, DriveLimits, DriveSettings
from humanoid_bringup.console.scene import PUSH_DIRECTIONS, ConsoleScene, make_pose, poses_from_path
from humanoid_bringup.console.status import ConsoleStatus
from humanoid_control.ros.node_utils import QuietNode, declare, helper_node, run_node

__all__ = ["ConsoleNode", "main"]

LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
NEWEST = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT)
TOKEN_ENV = "HUMANOID_CONSOLE_TOKEN"
CALL_TIMEOUT_S = 15.0
#: a pose source older than this (s, wall) is not used
STALE_S = 1.0


class Streams:
    """The newest message of each high-rate topic, taken on demand from a helper node no executor spins
    (as :class:`humanoid_bringup.description.tf_publisher_node.LatestSample`, for several topics)."""

    def __init__(self, context: Any, name: str) -> None:
        from rclpy.executors import SingleThreadedExecutor

        self.node = helper_node(context, name)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.subs: dict[str, Any] = {}
        self.latest: dict[str, tuple[float, Any]] = {}  # topic -> (wall t received, message)

    def callback(self, topic: str) -> Any:
        """The subscription callback for ``topic`` (the subscription itself is made by the node's code on
        :attr:`node`, then given to :meth:`add`)."""
        return lambda msg: self._put(topic, msg)

    def add(self, topic: str, subscription: Any) -> None:
        self.subs[topic] = subscription

    def _put(self, topic: str, msg: Any) -> None:
        self.latest[topic] = (time.monotonic(), msg)

    def take(self) -> None:
        """Take whatever arrived since the last call (the newest per topic)."""
        for topic, sub in self.subs.items():
            take = getattr(sub.handle, "take_message", None)
            if take is None:  # an rclpy without it
                self.executor.spin_once(timeout_sec=0.0)
                continue
            with sub.handle:
                taken = take(sub.msg_type, sub.raw)
            if taken is not None:
                self._put(topic, taken[0])

    def fresh(self, topic: str, now: float) -> Any:
        """The newest message of ``topic`` if received within :data:`STALE_S`, else None."""
        entry = self.latest.get(topic)
        return entry[1] if entry is not None and now - entry[0] <= STALE_S else None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.executor.shutdown(timeout_sec=1.0)
        with contextlib.suppress(Exception):
            self.node.destroy_node()


def _pose_of(msg: Any) -> Any:
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    return make_pose((p.x, p.y, p.z), (o.w, o.x, o.y, o.z))


class ConsoleNode(QuietNode):
    """ROS 2 adapter of the console (module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("console", **kwargs)
        host = declare(
            self, "host", "127.0.0.1", "address the page is served on (loopback by default)", read_only=True
        )
        port = declare(self, "port", 8080, "TCP port of the page (0: any free port, logged)", 0, 65535, True)
        token = declare(
            self,
            "token",
            "none",
            f"access token for a non-loopback host (none: ${TOKEN_ENV} or no token)",
            read_only=True,
        )
        if token in ("", "none"):
            token = os.environ.get(TOKEN_ENV, "")
        gated = check_binding(host, token)
        scene_rate = declare(
            self, "scene_rate_hz", 40.0, "scene updates per second (Hz, wall time)", 1.0, 60.0, True
        )
        self.markers_period = 1.0 / declare(
            self, "markers_rate_hz", 5.0, "most marker redraws per second (Hz, wall time)", 0.2, 30.0, True
        )
        self.camera_period = 1.0 / declare(
            self,
            "camera_rate_hz",
            2.0,
            "head camera frames shown per second (Hz, wall time)",
            0.2,
            30.0,
            True,
        )
        self.height_map_period = 1.0 / declare(
            self, "height_map_rate_hz", 1.0, "most height map redraws per second (Hz, wall)", 0.1, 10.0, True
        )
        settings = DriveSettings(
            rate_hz=declare(
                self, "drive_rate_hz", 20.0, "/teleop/cmd_vel rate while driving (Hz)", 1.0, 200.0, True
            ),
            hold_hz=declare(
                self, "hold_hz", 20.0, "hold ticks per second the page sends (Hz)", 1.0, 100.0, True
            ),
            deadman_s=declare(
                self,
                "deadman_s",
                0.3,
                "stop driving after this long without a hold tick (s)",
                0.02,
                5.0,
                True,
            ),
        )
        self.mode_manager = declare(
            self, "mode_manager", "/mode_manager", "the mode manager's node", read_only=True
        )
        self.driver = declare(self, "driver", "/robot_driver", "the robot driver's node", read_only=True)
        self.drive = DriveControl(settings)
        self.status = ConsoleStatus()
        self.lock = threading.Lock()
        self.manager_up = False
        self.push_up = False
        self.limits_read = False
        self.pose_source = "none yet"
        self._last_markers = 0.0
        self._pending_markers: dict[str, Any] = {}
        self._plan: Any = None
        self._height_map: Any = None
        self._last_camera = 0.0
        self._last_height_map = 0.0
        self._camera_error = ""
        self.camera_frames = 0  # head camera frames shown
        self.height_map_faces = 0  # triangles of the height map drawn last
        self._status_due = 0.0

        import viser

        self.gate: Any = None
        self.server = viser.ViserServer(
            host="127.0.0.1" if gated else host, port=0 if gated else port, verbose=False
        )
        if not gated and port != 0 and self.server.get_port() != port:
            bound = self.server.get_port()
            self.server.stop()
            raise ValueError(
                f"console port {port} is in use (viser would have moved to {bound}); choose another"
            )
        if gated:
            from humanoid_bringup.console.gate import TokenGate

            try:
                self.gate = TokenGate(host, port, self.server.get_port(), token).start()
            except OSError as exc:
                self.server.stop()
                raise ValueError(str(exc)) from None
        self.scene = ConsoleScene(self.server, self, self.drive.limits, settings.hold_hz, push=True)
        self.scene.set_operable(False)
        self.server.on_client_disconnect(self._on_disconnect)

        self.pub_cmd = self.create_publisher(Twist, "/teleop/cmd_vel", 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_mark = (time.monotonic(), 0)
        self.create_subscription(String, "/robot_description", self._on_description, LATCHED)
        self.create_subscription(
            String, f"{self.driver}/mode", lambda m: self.status.on_driver_mode(m.data), LATCHED
        )
        self.create_subscription(
            String, f"{self.mode_manager}/state", lambda m: self.status.on_manager_state(m.data), LATCHED
        )
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 20)
        self.create_subscription(Path, "/walking/plan", self._on_plan, LATCHED)
        from visualization_msgs.msg import MarkerArray

        self.create_subscription(
            MarkerArray, "/walking/footsteps", self._markers_to("/walking/footsteps"), LATCHED
        )
        self.create_subscription(MarkerArray, "/wbc/markers", self._markers_to("/wbc/markers"), 10)
        self.create_subscription(
            MarkerArray, "/perception/markers", self._markers_to("/perception/markers"), 10
        )
        self.create_subscription(PointCloud2, "/perception/height_map", self._on_height_map, 1)
        self.streams = Streams(self.context, f"{self.get_name()}_streams")
        helper = self.streams.node
        for topic, sub in (
            (
                "/joint_states",
                helper.create_subscription(
                    JointState, "/joint_states", self.streams.callback("/joint_states"), NEWEST
                ),
            ),
            ("/odom", helper.create_subscription(Odometry, "/odom", self.streams.callback("/odom"), NEWEST)),
            (
                "/sim/ground_truth",
                helper.create_subscription(
                    Odometry, "/sim/ground_truth", self.streams.callback("/sim/ground_truth"), NEWEST
                ),
            ),
            (
                "/camera/color/image_raw",
                helper.create_subscription(
                    Image, "/camera/color/image_raw", self.streams.callback("/camera/color/image_raw"), NEWEST
                ),
            ),
        ):
            self.streams.add(topic, sub)

        self.triggers = {
            name: self.create_client(Trigger, f"{self.mode_manager}/{name}")
            for name in ("stand", "walk", "run_policy", "damp", "estop", "reset")
        }
        self.autonomy = self.create_client(SetBool, f"{self.mode_manager}/set_autonomy")
        self.push_client = self.create_client(Trigger, f"{self.driver}/push")
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(1.0 / scene_rate, self._on_scene_timer, clock=steady)
        self.create_timer(1.0 / settings.rate_hz, self._on_drive_timer, clock=steady)
        url = f"http://{host}:{self.gate.port if gated else self.server.get_port()}/"
        self.url = url
        self.get_logger().info(f"console on {url}{'?token=...' if gated else ''}")

    # ------------------------------------------------------------------ inputs
    def _on_description(self, msg: String) -> None:
        try:
            summary = self.scene.set_robot(msg.data)
        except Exception as exc:  # a URDF yourdfpy cannot load (meshes missing, malformed XML)
            self.get_logger().error(f"/robot_description not drawn: {type(exc).__name__}: {exc}")
            self.status.robot = f"not drawn ({type(exc).__name__}: {exc})"
            return
        self.status.robot = summary
        self.get_logger().info(f"robot {summary} drawn")

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        entries = [(s.name, s.level, s.message, {kv.key: kv.value for kv in s.values}) for s in msg.status]
        self.status.on_diagnostics(entries, time.monotonic())

    def _on_plan(self, msg: Path) -> None:
        self._plan = poses_from_path(msg.poses)

    def _on_height_map(self, msg: PointCloud2) -> None:
        self._height_map = msg

    def _draw_camera_and_height_map(self, now: float) -> None:
        """The head camera's newest frame (at most ``camera_rate_hz``) and the height map (at most
        ``height_map_rate_hz``); a malformed message is logged once and skipped."""
        image = self.streams.fresh("/camera/color/image_raw", now)
        if image is not None and now - self._last_camera >= self.camera_period:
            self._last_camera = now
            try:
                rgb = image_rgb(image)
            except ValueError as exc:
                if str(exc) != self._camera_error:
                    self._camera_error = str(exc)
                    self.get_logger().warning(f"/camera/color/image_raw not shown: {exc}")
            else:
                stamp = image.header.stamp.sec + 1e-9 * image.header.stamp.nanosec
                self.camera_frames += 1
                self.scene.set_camera_image(
                    rgb, f"/camera/color/image_raw {rgb.shape[1]}x{rgb.shape[0]}, t {stamp:.2f} s"
                )
        if self._height_map is not None and now - self._last_height_map >= self.height_map_period:
            msg, self._height_map = self._height_map, None
            self._last_height_map = now
            try:
                vertices, faces = height_map_mesh(cloud_xyz(msg))
            except ValueError as exc:
                self.get_logger().warning(
                    f"/perception/height_map not drawn: {exc}", throttle_duration_sec=10.0
                )
                return
            self.scene.set_height_map(vertices, faces)
            self.height_map_faces = len(faces)

    def _markers_to(self, topic: str) -> Any:
        """A MarkerArray callback: keep the newest of ``topic`` for the next redraw."""

        def on_markers(msg: Any) -> None:
            self._pending_markers[topic] = msg.markers

        return on_markers

    # ------------------------------------------------------------------ timers
    def _on_scene_timer(self) -> None:
        now = time.monotonic()
        self.streams.take()
        joints_msg = self.streams.fresh("/joint_states", now)
        odom = self.streams.fresh("/odom", now)
        truth = self.streams.fresh("/sim/ground_truth", now)
        joints = None
        if joints_msg is not None and len(joints_msg.name) == len(joints_msg.position):
            joints = {n: float(p) for n, p in zip(joints_msg.name, joints_msg.position, strict=True)}
            if not all(math.isfinite(v) for v in joints.values()):
                joints = None
        base = _pose_of(odom) if odom is not None else (_pose_of(truth) if truth is not None else None)
        if odom is not None or truth is not None:
            self.pose_source = "/odom" if odom is not None else "/sim/ground_truth (no /odom)"
        ghost = _pose_of(truth) if truth is not None else None
        self.scene.update_robot(base, joints, ghost)
        if self._plan is not None:
            plan, self._plan = self._plan, None
            self.scene.set_plan(plan)
        if self._pending_markers and now - self._last_markers >= self.markers_period:
            pending, self._pending_markers = self._pending_markers, {}
            for topic, markers in pending.items():
                self.scene.set_markers(topic, markers)
            self._last_markers = now
        self._draw_camera_and_height_map(now)
        if now >= self._status_due:
            self._status_due = now + 0.5
            self._refresh_status()
            if now - self._diag_mark[0] >= 1.0:
                self._publish_diagnostics(now)

    def _refresh_status(self) -> None:
        up = all(c.service_is_ready() for c in self.triggers.values())
        if up != self.manager_up:
            self.manager_up = up
            self.scene.set_operable(up)
        self.push_up = self.push_client.service_is_ready()
        if up and not self.limits_read:
            self.limits_read = True
            self._read_limits()
        driver = self.drive.driver
        driving = "idle" if driver is None else f"client {driver} driving"
        self.status.notes = [f"**base pose from** {self.pose_source}"]
        self.scene.set_status(self.status.markdown(self.manager_up, driving))

    def _publish_diagnostics(self, now: float) -> None:
        """``console`` on ``/diagnostics`` once a second: scene updates per second (wall), pages, driving."""
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

        t0, n0 = self._diag_mark
        n = self.scene.updates
        self._diag_mark = (now, n)
        rate = (n - n0) / (now - t0)
        values = {
            "scene_updates_per_s": f"{rate:.1f}",
            "pages": str(len(self.server.get_clients())),
            "driver_client": str(self.drive.driver),
            "holds_refused": str(self.drive.refused),
            "stops": ", ".join(f"{k} {v}" for k, v in self.drive.stops.items()),
            "gate_refused": str(self.gate.refused if self.gate is not None else 0),
            "camera_frames_shown": str(self.camera_frames),
            "height_map_faces": str(self.height_map_faces),
        }
        status = DiagnosticStatus(name="console", message=self.url, hardware_id="browser console")
        status.level = DiagnosticStatus.OK
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(msg)

    def _read_limits(self) -> None:
        from rcl_interfaces.srv import GetParameters

        client = self.create_client(GetParameters, f"{self.mode_manager}/get_parameters")
        names = ["vx_max", "vx_min", "wz_max"]
        future = client.call_async(GetParameters.Request(names=names))

        def done(fut: Any) -> None:
            try:
                values = [v.double_value for v in fut.result().values]
                limits = DriveLimits(vx_max=values[0], vx_min=values[1], wz_max=values[2])
            except Exception as exc:  # unreachable or refused: keep the defaults, say so
                self.get_logger().warning(f"mode manager limits not read ({exc}); using {self.drive.limits}")
                return
            self.drive.set_limits(limits)
            self.scene.set_limits(limits)
            self.get_logger().info(f"drive limits from the mode manager: {limits}")

        future.add_done_callback(done)

    def _on_drive_timer(self) -> None:
        command = self.drive.tick(time.monotonic())
        if command is not None:
            self._publish(*command)

    def _publish(self, vx: float, wz: float) -> None:
        msg = Twist()
        msg.linear.x, msg.angular.z = float(vx), float(wz)
        self.pub_cmd.publish(msg)

    # ------------------------------------------------------------------ page actions (viser threads)
    def request(self, name: str, client: int) -> None:
        """A mode button: call the service, show its answer."""
        if not self.manager_up:
            self._answer(client, name, False, "the mode manager is not running (launch mode_manager:=true)")
            return
        if name in ("autonomy_on", "autonomy_off"):
            ok, message = self._call(self.autonomy, SetBool.Request(data=name == "autonomy_on"))
        else:
            ok, message = self._call(self.triggers[name], Trigger.Request())
        self._answer(client, name, ok, message)

    def _answer(self, client: int, name: str, ok: bool, message: str) -> None:
        text = f"{name}: {'ok' if ok else 'refused'}{f' ({message})' if message else ''}"
        self.status.add_answer(text)
        self.scene.set_answer(text)
        self.scene.notify(client, name, text, error=not ok)
        self.get_logger().info(f"console client {client}: {text}")

    def _call(self, client: Any, request: Any) -> tuple[bool, str]:
        if not client.service_is_ready():
            return False, f"{client.srv_name} is not available"
        event = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: event.set())
        if not event.wait(CALL_TIMEOUT_S):
            future.cancel()
            return False, f"{client.srv_name}: no answer within {CALL_TIMEOUT_S:g} s"
        result = future.result()
        return bool(result.success), str(result.message)

    def hold(self, client: int, speed: float, turn: float) -> None:
        if not self.manager_up:
            return
        refused = self.drive.hold(client, time.monotonic(), speed, turn)
        if refused is not None:
            self.scene.notify(client, "not driving", refused, error=True)

    def release(self, client: int) -> None:
        if self.drive.release(client):
            self._publish(0.0, 0.0)

    def _on_disconnect(self, handle: Any) -> None:
        if self.drive.disconnect(handle.client_id):
            self._publish(0.0, 0.0)
            self.get_logger().info(f"console client {handle.client_id} disconnected while driving: zero sent")

    def push(self, client: int, direction: str, impulse: float) -> None:
        """Push the simulated robot: ``impulse`` (N s) along ``direction`` over the driver's push duration."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        unit = PUSH_DIRECTIONS.get(direction)
        if unit is None or not (math.isfinite(impulse) and 0.0 < impulse <= 30.0):
            self._answer(client, "push", False, f"bad push: direction {direction!r}, impulse {impulse}")
            return
        if not self.push_up:
            self._answer(client, "push", False, "the driver has no ~/push (only simulators offer it)")
            return
        duration = 0.1
        force = [unit[0] * impulse / duration, unit[1] * impulse / duration, 0.0]
        setter = self.create_client(SetParameters, f"{self.driver}/set_parameters")
        try:
            params = [
                Parameter("push_force", Parameter.Type.DOUBLE_ARRAY, force).to_parameter_msg(),
                Parameter("push_duration_s", Parameter.Type.DOUBLE, duration).to_parameter_msg(),
            ]
            event = threading.Event()
            future = setter.call_async(SetParameters.Request(parameters=params))
            future.add_done_callback(lambda _f: event.set())
            if not event.wait(CALL_TIMEOUT_S) or not all(r.successful for r in future.result().results):
                self._answer(client, "push", False, "the driver refused the push parameters")
                return
        finally:
            self.destroy_client(setter)
        ok, message = self._call(self.push_client, Trigger.Request())
        self._answer(client, f"push {direction} {impulse:g} N s", ok, message)

    def close(self) -> None:
        """Zero the command if a page drives, stop the web server."""
        if self.drive.driver is not None:
            self.drive.disconnect(self.drive.driver)
            with contextlib.suppress(Exception):
                self._publish(0.0, 0.0)
        with contextlib.suppress(Exception):
            self.server.stop()
        if self.gate is not None:
            self.gate.close()
        self.streams.close()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack console``, ``humanoid-console``."""
    return run_node(ConsoleNode, args, "console")


if __name__ == "__main__":
    raise SystemExit(main())
