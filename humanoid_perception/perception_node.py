"""Perception node (``perception_node``): fiducial markers and a height map from the head camera.

Inputs (remappable; any camera driver's topics work):

- ``/camera/color/image_raw`` (sensor_msgs/Image: ``rgb8``, ``bgr8``, ``mono8``, ``rgba8``, ``bgra8``) and
  ``/camera/color/camera_info`` (sensor_msgs/CameraInfo, the latest one is used);
- ``/camera/depth/image_raw`` (``32FC1`` m or ``16UC1`` mm) and ``/camera/depth/camera_info``, for the height
  map (``heightmap: true``);
- ``/odom`` (nav_msgs/Odometry, the estimator's ``odom`` -> base) and ``/joint_states``: the camera's pose
  in ``odom`` is ``/odom`` times the forward kinematics of the camera mount (``camera_mount.CameraMount``) at
  the image's stamp. Never ``/sim/*``.

Outputs, stamped with the image's stamp:

- ``/perception/marker_poses`` (geometry_msgs/PoseArray) in the camera's optical frame (the image's frame id,
  REP-103: z forward, x right, y down) and ``/perception/marker_poses_odom`` (PoseArray, frame ``odom``):
  the marker frames (OpenCV's: x right, y up, z out of the printed face; origin at the marker centre);
- ``/perception/marker_ids`` (std_msgs/Int32MultiArray): the marker ids, in the order of both PoseArrays
  (published just before them, for every frame, also an empty one);
- ``/perception/detections`` (std_msgs/String, JSON): the same in one message for consumers that need them
  together (the autonomy node): ``stamp`` (s), ``frame_id``, ``status`` (``ok`` or ``error``), ``error``,
  ``base_pose_odom`` ([x, y, yaw] of the base at the stamp, or null), ``markers``: ``[{id, position_odom,
  quat_odom_xyzw, position_camera, quat_camera_xyzw, reprojection_error_px}]``;
- ``/perception/markers`` (visualization_msgs/MarkerArray) for rviz2: a flat cube and the id per marker;
- ``/perception/height_map`` (sensor_msgs/PointCloud2, ``odom``, float32 x, y, z: one point per 2 cm cell
  holding the terrain height), every ``heightmap_every`` depth frames;
- ``/diagnostics``: frame rate, detection latency (wall ms from receipt to publication), dropped frames
  (gaps in the stamps of the ``rate_hz`` stream), and errors. A frame of the wrong size or encoding, a
  corrupt one, a missing or invalid CameraInfo or a missing robot state is an error (diagnostics level
  ERROR, ``status: error`` on ``/perception/detections``), the frame is dropped, the node keeps running.

Lockstep (``lockstep: true``, with the simulated camera): the node is a lockstep peer; after it has
published the results of the frame due at tick t (and processed the depth frame of t when the height map is
on) it acknowledges every tick up to the next due frame (frames are due on the camera's ``rate_hz`` grid).

The pure helpers (error kinds, the state buffer, the detector, camera mount and height map cores) are in
:mod:`humanoid_perception.perception_core`, the message builders in
:mod:`humanoid_perception.perception_messages`.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from typing import Any

import numpy as np

from humanoid_control.ros.node_utils import (
    QuietNode,
    declare,
    declare_double_array,
    from_time_msg,
    run_node,
    to_time_msg,
)
from humanoid_perception.camera import CameraIntrinsics
from humanoid_perception.camera_mount import matrix_to_quat_xyzw, quat_xyzw_to_matrix
from humanoid_perception.camera_node import ACK_MARGIN_S, frame_period_ms, next_due
from humanoid_perception.errors import ImageFormatError, PerceptionInputError
from humanoid_perception.images import COLOUR_ENCODINGS, DEPTH_ENCODINGS, decode_image, depth_in_metres
from humanoid_perception.perception_core import (
    ERROR_KINDS,
    HeightMapAdapter,
    StateBuffer,
    error_kind,
    make_camera_mount,
    make_detector,
    make_heightmap,
    yaw_of,
)
from humanoid_perception.perception_messages import (
    marker_array,
    pointcloud_message,
    pose_message,
)


class PerceptionNode(QuietNode):
    """ROS adapter of the marker detector and the height map (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("perception_node")
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseArray
        from nav_msgs.msg import Odometry
        from rclpy.clock import Clock, ClockType
        from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2
        from std_msgs.msg import Int32MultiArray, String

        from humanoid_control.model.joint_order import JointOrder
        from humanoid_control.model.robot_config import load_robot_config
        from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos

        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        self.config = load_robot_config(robot)
        scene = declare(
            self, "scene", "", "scene file whose markers set dictionary and size; empty: the parameters", True
        )
        dictionary = declare(self, "dictionary", "DICT_APRILTAG_36h11", "marker dictionary (cv2.aruco)", True)
        length = declare(
            self, "marker_length_m", 0.25, "side of the markers' black square (m)", 0.005, 5.0, True
        )
        rate = declare(
            self,
            "rate_hz",
            5.0,
            "the camera's frame rate (dropped-frame count, lockstep grid)",
            0.1,
            100.0,
            True,
        )
        self.lockstep = declare(self, "lockstep", False, "lockstep peer of the driver", read_only=True)
        self.heightmap_on = declare(
            self, "heightmap", True, "build the height map from depth", read_only=True
        )
        self.heightmap_every = declare(self, "heightmap_every", 1, "depth frames per height map", 1, 1000)
        self.state_tolerance = declare(
            self,
            "state_tolerance_s",
            0.05,
            "realtime: largest stamp gap image <-> /odom, /joint_states (s)",
            0.0,
            1.0,
        )
        self.state_wait = declare(
            self,
            "state_wait_s",
            3.0,
            "wall time a frame waits for the robot state of its stamp (s; a loaded machine's estimator can "
            "run a second behind)",
            0.0,
            30.0,
        )
        self.odom_frame = declare(self, "odom_frame", "odom", "frame of /odom", read_only=True)
        video = declare(
            self,
            "video_device",
            "",
            "optional OpenCV capture source instead of the image topic: a device index ('0') or a video "
            "file / stream URL; empty: none (the image topic)",
            read_only=True,
        )
        camera_k = declare_double_array(
            self, "camera_k", "video_device: camera matrix K (9 values, row-major, px); else CameraInfo"
        )
        camera_d = declare_double_array(self, "camera_d", "video_device: distortion (plumb_bob)")
        self.period_ms = frame_period_ms(rate)
        self.period = self.period_ms / 1000.0

        lengths: dict[int, float] = {}
        if scene:
            from humanoid_control.hardware.scene import load_scene

            markers = load_scene(scene).markers
            if markers:
                dictionary = markers[0].dictionary
                lengths = {int(m.id): float(m.size) for m in markers if m.dictionary == dictionary}
        self.detector = make_detector(dictionary, float(length), lengths)
        self.marker_length = float(length)
        self.mount = make_camera_mount(self.config)
        self.joint_order = JointOrder(self.config.joint_names)
        self.heightmap: HeightMapAdapter | None = make_heightmap() if self.heightmap_on else None

        self.odom = StateBuffer()
        self.joints = StateBuffer()
        self.color_info: CameraIntrinsics | None = None
        self.depth_info: CameraIntrinsics | None = None
        self.info_error = ""
        self.pending: list[tuple[str, Any, float]] = []  # (kind, msg, wall time received)
        self.frames = 0
        self.depth_frames = 0
        self.dropped = 0
        self.errors = dict.fromkeys(ERROR_KINDS, 0)
        self.last_error = ""
        self.last_error_wall = -math.inf
        self.latency_ms: deque[float] = deque(maxlen=200)
        self.frame_walls: deque[float] = deque(maxlen=50)
        self._last_color_t = -math.inf
        self._done_color_t = -math.inf
        self._done_depth_t = -math.inf
        self._acked_due = -math.inf

        self.pub_ids = self.create_publisher(Int32MultiArray, "/perception/marker_ids", 10)
        self.pub_cam = self.create_publisher(PoseArray, "/perception/marker_poses", 10)
        self.pub_odom = self.create_publisher(PoseArray, "/perception/marker_poses_odom", 10)
        self.pub_det = self.create_publisher(String, "/perception/detections", 10)
        self.pub_viz = self._make_marker_publisher()
        self.pub_map = self.create_publisher(PointCloud2, "/perception/height_map", 2)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # realtime: 2 s of the 500 Hz streams queued, so a frame's detection (tens of ms, more on a loaded
        # machine) cannot make the middleware drop the states around the next frame's stamp
        state_qos = tick_stream_qos(50, latched=True) if self.lockstep else 1000
        self.create_subscription(Odometry, "/odom", self._on_odom, state_qos)
        self.create_subscription(JointState, "/joint_states", self._on_joints, state_qos)
        image_qos = 10 if self.lockstep else 1  # realtime: the latest frame only (older ones are dropped)
        self.create_subscription(CameraInfo, "/camera/color/camera_info", self._on_color_info, 10)
        self.create_subscription(Image, "/camera/color/image_raw", self._on_color, image_qos)
        if self.heightmap_on:
            self.create_subscription(CameraInfo, "/camera/depth/camera_info", self._on_depth_info, 10)
            self.create_subscription(Image, "/camera/depth/image_raw", self._on_depth, image_qos)
        self.peer = LockstepPeer(self, self.lockstep)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.capture: Any = None
        if video:
            self._open_capture(video, camera_k, camera_d)
            self.create_timer(1.0 / rate, self._on_capture_timer, clock=steady)
        self.create_timer(0.05, self._retry_pending, clock=steady)
        self.create_timer(1.0, self._publish_diagnostics, clock=steady)

    # ------------------------------------------------------------------ state
    def _on_odom(self, msg: Any) -> None:
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        self.odom.add(
            from_time_msg(msg.header.stamp), (np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w]))
        )
        self._retry_if_due()

    def _on_joints(self, msg: Any) -> None:
        r = self.joint_order(msg.name, msg.position)
        if isinstance(r, str):
            return
        self.joints.add(from_time_msg(msg.header.stamp), r[0])
        self._retry_if_due()

    def _retry_if_due(self) -> None:
        """Retry the waiting frames only once both state streams have reached the oldest one's stamp: at
        1000 state messages per second a retry per message costs the time a loaded machine lacks."""
        if not self.pending:
            return
        t = from_time_msg(self.pending[0][1].header.stamp)
        if not self._state_may_come(t):
            self._retry_pending()

    def _state_at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        tol = 1e-6 if self.lockstep else self.state_tolerance
        odom, joints = self.odom.at(t, tol), self.joints.at(t, tol)
        if odom is None or joints is None:
            return None
        return odom[0], odom[1], joints

    def _state_may_come(self, t: float) -> bool:
        """A state stamped t may still arrive (the streams have not passed t yet)."""
        return self.odom.latest_t < t - 1e-6 or self.joints.latest_t < t - 1e-6

    # ------------------------------------------------------------------ camera info
    def _on_color_info(self, msg: Any) -> None:
        try:
            self.color_info = CameraIntrinsics.from_camera_info(msg.width, msg.height, msg.k, msg.d)
            self.info_error = ""
        except PerceptionInputError as exc:
            self.color_info = None
            self.info_error = str(exc)

    def _on_depth_info(self, msg: Any) -> None:
        try:
            self.depth_info = CameraIntrinsics.from_camera_info(msg.width, msg.height, msg.k, msg.d)
        except PerceptionInputError:
            self.depth_info = None

    # ------------------------------------------------------------------ OpenCV capture source
    def _open_capture(self, video: str, k: list[float], d: list[float]) -> None:
        """Frames from ``cv2.VideoCapture`` (a device index or a file/URL) instead of the image topic; the
        intrinsics from ``camera_k``/``camera_d`` (else the CameraInfo topic)."""
        import cv2

        if self.lockstep:
            raise ValueError("parameter video_device: a capture device has no simulated time (lockstep)")
        source: int | str = int(video) if video.isdigit() else video
        self.capture = cv2.VideoCapture(source)
        if not self.capture.isOpened():
            raise ValueError(f"parameter video_device: cannot open '{video}' with OpenCV")
        if k:
            w = int(self.capture.get(cv2.CAP_PROP_FRAME_WIDTH))
            h = int(self.capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
            self.color_info = CameraIntrinsics.from_camera_info(w, h, k, d)
        self.capture_frame_id = "camera_optical_frame"
        self.get_logger().info(f"frames from OpenCV capture '{video}'")

    def _on_capture_timer(self) -> None:
        from humanoid_perception.camera_node import image_message

        ok, frame = self.capture.read()
        if not ok or frame is None:
            self._note_error("corrupt", "OpenCV capture: no frame (device unplugged or end of file)")
            return
        stamp = self.get_clock().now().to_msg()
        self._on_color(image_message(np.ascontiguousarray(frame), "bgr8", stamp, self.capture_frame_id))

    # ------------------------------------------------------------------ frames
    def _on_color(self, msg: Any) -> None:
        self.pending.append(("color", msg, time.perf_counter()))
        self._retry_pending()

    def _on_depth(self, msg: Any) -> None:
        self.pending.append(("depth", msg, time.perf_counter()))
        self._retry_pending()

    def _retry_pending(self) -> None:
        """Process waiting frames in arrival order once the state of their stamp is in (or given up)."""
        while self.pending:
            kind, msg, wall = self.pending[0]
            t = from_time_msg(msg.header.stamp)
            state = self._state_at(t)
            waited = time.perf_counter() - wall
            if state is None and self._state_may_come(t) and waited < self.state_wait:
                return
            self.pending.pop(0)
            try:
                if kind == "color":
                    self._process_color(msg, t, state, wall)
                else:
                    self._process_depth(msg, t, state)
            except Exception as exc:  # never crash on a frame: report it
                self._error("internal", f"{type(exc).__name__}: {exc}", msg, t, state)
            if kind == "color":
                self._done_color_t = max(self._done_color_t, t)
            else:
                self._done_depth_t = max(self._done_depth_t, t)
            self._maybe_ack()

    def _maybe_ack(self) -> None:
        if not self.lockstep:
            return
        done = self._done_color_t
        if self.heightmap_on:
            done = min(done, self._done_depth_t)
        if done > self._acked_due:
            self._acked_due = done
            self.peer.ack(to_time_msg(next_due(done, self.period_ms) - ACK_MARGIN_S))

    def _count_gap(self, t: float) -> None:
        if math.isfinite(self._last_color_t) and t > self._last_color_t:
            self.dropped += max(0, round((t - self._last_color_t) / self.period) - 1)
        self._last_color_t = max(self._last_color_t, t)

    def _process_color(self, msg: Any, t: float, state: Any, wall: float) -> None:
        self._count_gap(t)
        self.frames += 1
        self.frame_walls.append(time.monotonic())
        if self.color_info is None:
            why = self.info_error or "no CameraInfo on /camera/color/camera_info yet"
            self._error("camera_info", f"missing CameraInfo: {why}", msg, t, state)
            return
        try:
            image = self._decode(msg, COLOUR_ENCODINGS, self.color_info)
            observations = self.detector.detect(image, self.color_info)
        except PerceptionInputError as exc:  # a bad frame (or one the detector refuses)
            self._error(error_kind(exc), str(exc), msg, t, state)
            return
        if state is None:  # the camera-frame results still go out; the odom ones cannot
            text = (
                f"no /odom and /joint_states at the frame's stamp {t:.3f} s "
                f"(within {self.state_tolerance} s; "
                f"latest /odom {self.odom.latest_t:.3f} s, /joint_states {self.joints.latest_t:.3f} s)"
            )
            self._note_error("state", text)
            self._publish(msg, t, None, observations, f"state: {text}", wall)
            return
        self._publish(msg, t, state, observations, "", wall)

    @staticmethod
    def _decode(msg: Any, encodings: tuple[str, ...], intrinsics: CameraIntrinsics) -> np.ndarray:
        """The message's pixels (``images.decode_image``), checked against the expected encodings and the
        CameraInfo's size; ImageFormatError otherwise."""
        if msg.encoding not in encodings:
            raise ImageFormatError(
                f"image: unsupported encoding '{msg.encoding}' here (expected one of {', '.join(encodings)})"
            )
        image = decode_image(
            msg.encoding, msg.width, msg.height, msg.step, bytes(msg.data), bool(msg.is_bigendian)
        )
        intrinsics.check_image(image)
        return image

    def _process_depth(self, msg: Any, t: float, state: Any) -> None:
        if self.heightmap is None:
            return
        self.depth_frames += 1
        if (self.depth_frames - 1) % self.heightmap_every:
            return
        if self.depth_info is None:
            self._note_error("camera_info", "missing depth CameraInfo")
            return
        try:
            raw = self._decode(msg, DEPTH_ENCODINGS, self.depth_info)
            depth = depth_in_metres(raw, msg.encoding)
        except PerceptionInputError as exc:
            self._note_error(error_kind(exc), f"depth: {exc}")
            return
        if state is None:
            self._note_error("state", f"depth: no robot state at {t:.3f} s")
            return
        t_odom_optical = self.mount.odom_to_optical(*state)
        cloud = self.heightmap.update(depth, self.depth_info, t_odom_optical, state[0])
        if cloud is not None:
            self.pub_map.publish(pointcloud_message(cloud, msg.header.stamp, self.odom_frame))

    # ------------------------------------------------------------------ outputs
    def _publish(
        self, msg: Any, t: float, state: Any, observations: list[Any], error: str, wall: float
    ) -> None:
        from geometry_msgs.msg import Pose, PoseArray
        from std_msgs.msg import Int32MultiArray, String

        t_odom_optical = self.mount.odom_to_optical(*state) if state is not None else None
        cam = PoseArray()
        cam.header = msg.header
        odom = PoseArray()
        odom.header.stamp = msg.header.stamp
        odom.header.frame_id = self.odom_frame
        markers = []
        for ob in observations:
            t_om = np.asarray(ob.T_optical_marker, dtype=float)
            cam.poses.append(pose_message(Pose, t_om))
            entry: dict[str, Any] = {
                "id": int(ob.id),
                "position_camera": [round(float(v), 5) for v in t_om[:3, 3]],
                "quat_camera_xyzw": [round(float(v), 6) for v in matrix_to_quat_xyzw(t_om[:3, :3])],
                "reprojection_error_px": round(float(ob.reprojection_error_px), 3),
            }
            if t_odom_optical is not None:
                t_wm = t_odom_optical @ t_om
                odom.poses.append(pose_message(Pose, t_wm))
                entry["position_odom"] = [round(float(v), 5) for v in t_wm[:3, 3]]
                entry["quat_odom_xyzw"] = [round(float(v), 6) for v in matrix_to_quat_xyzw(t_wm[:3, :3])]
            markers.append(entry)
        ids = Int32MultiArray()
        ids.data = [int(ob.id) for ob in observations]
        self.pub_ids.publish(ids)
        self.pub_cam.publish(cam)
        if t_odom_optical is not None:
            self.pub_odom.publish(odom)
        base = None
        if state is not None:
            rot = quat_xyzw_to_matrix(state[1])
            base = [round(float(state[0][0]), 5), round(float(state[0][1]), 5), round(yaw_of(rot), 6)]
        det = {
            "stamp": round(t, 6),
            "frame_id": msg.header.frame_id,
            "status": "error" if error else "ok",
            "error": error,
            "base_pose_odom": base,
            "markers": markers,
        }
        self.pub_det.publish(String(data=json.dumps(det)))
        if self.pub_viz is not None:
            self.pub_viz.publish(
                marker_array(observations, odom if t_odom_optical is not None else cam, self.marker_length)
            )
        self.latency_ms.append(1000.0 * (time.perf_counter() - wall))

    def _note_error(self, kind: str, text: str) -> None:
        self.errors[kind] += 1
        self.last_error = text
        new = time.monotonic() - self.last_error_wall > 2.0
        self.last_error_wall = time.monotonic()
        self.get_logger().error(f"dropped a frame: {text}", throttle_duration_sec=2.0)
        if new:
            self._publish_diagnostics()

    def _error(self, kind: str, text: str, msg: Any, t: float, state: Any) -> None:
        """Report a bad frame: diagnostics error, ``status: error`` on the detections (no markers)."""
        from std_msgs.msg import String

        self._note_error(kind, text)
        base = None
        if state is not None:
            rot = quat_xyzw_to_matrix(state[1])
            base = [round(float(state[0][0]), 5), round(float(state[0][1]), 5), round(yaw_of(rot), 6)]
        det = {
            "stamp": round(t, 6),
            "frame_id": str(getattr(msg.header, "frame_id", "")),
            "status": "error",
            "error": f"{kind}: {text}",
            "base_pose_odom": base,
            "markers": [],
        }
        self.pub_det.publish(String(data=json.dumps(det)))

    def _publish_diagnostics(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

        status = DiagnosticStatus(name="perception_node", hardware_id=self.config.name)
        recent_error = time.monotonic() - self.last_error_wall < 2.0
        if recent_error:
            status.level, status.message = DiagnosticStatus.ERROR, self.last_error
        elif self.frames == 0:
            status.level, status.message = DiagnosticStatus.WARN, "no camera frame yet"
        else:
            status.level, status.message = DiagnosticStatus.OK, "running"
        walls = list(self.frame_walls)
        fps = (len(walls) - 1) / (walls[-1] - walls[0]) if len(walls) > 1 and walls[-1] > walls[0] else 0.0
        lat = np.array(self.latency_ms) if self.latency_ms else np.zeros(1)
        values: dict[str, Any] = {
            "frames": self.frames,
            "frame_rate_hz": round(fps, 3),
            "detection_latency_ms_median": round(float(np.median(lat)), 2),
            "detection_latency_ms_max": round(float(lat.max()), 2),
            "dropped_frames": self.dropped,
            "depth_frames": self.depth_frames,
            "last_error": self.last_error,
        }
        values.update({f"errors_{k}": v for k, v in self.errors.items()})
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        out = DiagnosticArray()
        out.header.stamp = self.get_clock().now().to_msg()
        out.status = [status]
        self.pub_diag.publish(out)

    def close(self) -> None:
        """Leave the lockstep, release a capture device."""
        self.peer.leave()
        if self.capture is not None:
            self.capture.release()

    def _make_marker_publisher(self) -> Any:
        """The MarkerArray publisher, or None where visualization_msgs is not installed."""
        try:
            from visualization_msgs.msg import MarkerArray
        except ImportError:
            return None
        return self.create_publisher(MarkerArray, "/perception/markers", 10)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``perception_node``."""
    return run_node(PerceptionNode, args, program="perception_node")


if __name__ == "__main__":
    raise SystemExit(main())
