"""Simulated head camera node (``camera_node``): the robot's camera rendered offscreen in its own process.

The node keeps its own MuJoCo model (the robot, the scene of the ``scene`` parameter and the head camera of
the robot configuration, ``humanoid_perception.camera``), sets the robot's state from what the simulator
publishes and renders RGB and depth outside the driver's loop:

- subscribes ``/joint_states`` (joint angles, rad) and ``/sim/ground_truth`` (nav_msgs/Odometry, ``world`` ->
  base body). The simulator's ground truth is what a simulated sensor sees: the camera is part of the
  simulator. No controller, estimator, perception or autonomy node reads ``/sim/*``.
- publishes ``/camera/color/image_raw`` (sensor_msgs/Image, ``rgb8``), ``/camera/depth/image_raw``
  (``32FC1``, metres along the optical axis, 0 where there is no measurement: outside the depth range) and
  the two ``camera_info`` topics beside them (sensor_msgs/CameraInfo, ``plumb_bob``), frame
  ``head_camera_optical_frame`` (REP-103: z forward, x right, y down), stamped with the simulated time of the
  rendered state (its message's stamp, copied); ``/diagnostics`` (frames, dropped frames, render time).
- ``rate_hz`` frames per second of simulated time. Frames are due at the ticks on that grid (stamps that are
  whole multiples of the period, in ms).

Clocks. ``lockstep`` (a lockstep peer, ``humanoid_control/ros/lockstep.py``): the driver does not advance past
a due tick until this node has rendered and published that tick's frame; it acknowledges, in one message,
the due tick and every tick before the next due one (as ``GraphProbe(ack_period=...)``), so the simulation
waits for the camera only once per frame and every frame shows the state of its stamp. ``realtime``: a
wall-clock timer renders the latest state at ``rate_hz``; when rendering falls behind, frames are dropped
(counted), never the driver's loop (another process).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from humanoid_control.ros.node_utils import QuietNode, declare, from_time_msg, run_node, to_time_msg

#: an acknowledgement covers the ticks up to this much before the next due frame (s; ticks are >= 0.5 ms)
ACK_MARGIN_S = 1e-4


def frame_period_ms(rate_hz: float) -> int:
    """The frame period in whole milliseconds of simulated time; ValueError unless 1000 / rate_hz is one."""
    if not (math.isfinite(rate_hz) and rate_hz > 0.0):
        raise ValueError(f"camera rate must be > 0 Hz, got {rate_hz}")
    period = 1000.0 / rate_hz
    if abs(period - round(period)) > 1e-6:
        raise ValueError(f"camera rate {rate_hz} Hz: the period must be a whole number of milliseconds")
    return round(period)


def frame_due(stamp_s: float, period_ms: int) -> bool:
    """A frame is due at a tick stamped on the grid of whole periods."""
    return round(stamp_s * 1000.0) % period_ms == 0


def next_due(stamp_s: float, period_ms: int) -> float:
    """The stamp (s) of the first due frame after ``stamp_s``."""
    return (math.floor(round(stamp_s * 1000.0) / period_ms) + 1) * period_ms / 1000.0


def image_message(array: np.ndarray, encoding: str, stamp: Any, frame_id: str) -> Any:
    """sensor_msgs/Image from an HxW(xC) array: ``rgb8`` (uint8 HxWx3) or ``32FC1`` (float32 HxW)."""
    from sensor_msgs.msg import Image

    msg = Image()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(array.shape[0]), int(array.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    data = np.ascontiguousarray(array.astype("<f4") if encoding == "32FC1" else array)
    msg.step = int(data.strides[0])
    msg.data = data.tobytes()
    return msg


def camera_info_message(intrinsics: Any, stamp: Any, frame_id: str) -> Any:
    """sensor_msgs/CameraInfo from ``CameraIntrinsics`` (K, D, R = I, P = [K | 0])."""
    from sensor_msgs.msg import CameraInfo

    msg = CameraInfo()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    for key, value in intrinsics.camera_info_fields().items():
        setattr(msg, key, value)
    return msg


class CameraNode(QuietNode):
    """ROS adapter of ``SimCamera`` (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("camera_node")
        from diagnostic_msgs.msg import DiagnosticArray
        from nav_msgs.msg import Odometry
        from rclpy.clock import Clock, ClockType
        from sensor_msgs.msg import CameraInfo, Image, JointState

        from humanoid_control.model.robot_config import load_robot_config
        from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
        from humanoid_perception.camera import load_camera_spec

        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        self.scene_name = declare(
            self, "scene", "", "scene (config/scenes/<name>.yaml); empty: the plain floor", read_only=True
        )
        self.config = load_robot_config(robot)
        spec = load_camera_spec(self.config)
        rate = declare(
            self, "rate_hz", float(spec.rate_hz), "frames per second (of simulated time)", 0.1, 100.0, True
        )
        width = declare(self, "width", 0, "image width (px); 0: the configured one", 0, 4096, True)
        height = declare(self, "height", 0, "image height (px); 0: the configured one", 0, 4096, True)
        self.depth_on = declare(self, "depth", True, "also render and publish depth", read_only=True)
        self.lockstep = declare(self, "lockstep", False, "lockstep peer of the driver", read_only=True)
        self.frame_id = declare(
            self, "frame_id", spec.optical_frame, "optical frame id (REP-103)", read_only=True
        )
        self.period_ms = frame_period_ms(rate)
        self.period = self.period_ms / 1000.0

        self.renderer = build_sim_camera(self.config, self.scene_name, spec, width or None, height or None)
        self.intrinsics = self.renderer.camera.intrinsics()
        self._joint_index: dict[str, int] | None = None
        self._joints: tuple[float, Any] | None = None  # (stamp, msg)
        self._truth: tuple[float, Any] | None = None
        self._rendered_t = -math.inf
        self._next_t = 0.0  # lockstep: stamp of the next due frame
        self.frames = 0
        self.dropped = 0
        self.render_ms: list[float] = []
        self.errors = 0
        self.last_error = ""

        self.pub_rgb = self.create_publisher(Image, "/camera/color/image_raw", 2)
        self.pub_rgb_info = self.create_publisher(CameraInfo, "/camera/color/camera_info", 2)
        self.pub_depth = self.create_publisher(Image, "/camera/depth/image_raw", 2) if self.depth_on else None
        self.pub_depth_info = (
            self.create_publisher(CameraInfo, "/camera/depth/camera_info", 2) if self.depth_on else None
        )
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # lockstep: every tick in order (transient-local, as every peer); realtime: the latest only
        qos = tick_stream_qos(50, latched=True) if self.lockstep else 1
        self.create_subscription(Odometry, "/sim/ground_truth", self._on_truth, qos)
        self.create_subscription(JointState, "/joint_states", self._on_joints, qos)
        self.peer = LockstepPeer(self, self.lockstep)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        if not self.lockstep:
            self.create_timer(1.0 / rate, self._on_timer, clock=steady)
        self.create_timer(1.0, self._publish_diagnostics, clock=steady)
        self._timer_busy_since: float | None = None
        self.get_logger().info(
            f"head camera {self.intrinsics.width}x{self.intrinsics.height} at {rate:g} Hz "
            f"({'lockstep' if self.lockstep else 'realtime'}), scene '{self.scene_name or 'floor'}'"
        )

    # ------------------------------------------------------------------ inputs
    def _on_joints(self, msg: Any) -> None:
        self._joints = (from_time_msg(msg.header.stamp), msg)
        self._maybe_render_lockstep()

    def _on_truth(self, msg: Any) -> None:
        self._truth = (from_time_msg(msg.header.stamp), msg)
        self._maybe_render_lockstep()

    def _maybe_render_lockstep(self) -> None:
        if not self.lockstep or self._joints is None or self._truth is None:
            return
        t = self._joints[0]
        if abs(self._truth[0] - t) > 1e-7 or t < self._next_t - ACK_MARGIN_S:
            return  # the other stream of this tick is still on its way, or no frame is due
        if not frame_due(t, self.period_ms):
            # a due tick went by unseen (joined late): render now, counted as dropped
            self.dropped += 1
        self._render_and_publish(t, self._joints[1].header.stamp)
        self._next_t = next_due(t, self.period_ms)
        self.peer.ack(to_time_msg(self._next_t - ACK_MARGIN_S))

    def _on_timer(self) -> None:
        if self._joints is None or self._truth is None:
            return
        t = self._truth[0]
        if t <= self._rendered_t:
            return  # no new state (simulation paused)
        self._render_and_publish(t, self._truth[1].header.stamp)

    # ------------------------------------------------------------------ render
    def _render_and_publish(self, t: float, stamp: Any) -> None:
        """Render the state of ``t`` (s, simulated time) and publish it stamped ``stamp``: that state's own
        ``builtin_interfaces/Time``, copied (integer seconds and nanoseconds, never rebuilt from ``t``)."""
        assert self._joints is not None and self._truth is not None
        w0 = time.perf_counter()
        try:
            self.renderer.set_state(self._truth[1], self._joints[1])
            rgb = self.renderer.camera.render_rgb(self.renderer.data)
            depth = self.renderer.camera.render_depth(self.renderer.data) if self.depth_on else None
        except (ValueError, RuntimeError) as exc:
            self.errors += 1
            self.last_error = str(exc)
            self.get_logger().error(f"frame at t = {t:.3f} s not rendered: {exc}", throttle_duration_sec=2.0)
            return
        if self.frames and not self.lockstep:
            missed = round((t - self._rendered_t) / self.period) - 1
            self.dropped += max(0, missed)
        # CameraInfo first: a reader that keeps the latest one has it when the image comes
        self.pub_rgb_info.publish(camera_info_message(self.intrinsics, stamp, self.frame_id))
        self.pub_rgb.publish(image_message(rgb, "rgb8", stamp, self.frame_id))
        if depth is not None and self.pub_depth is not None and self.pub_depth_info is not None:
            self.pub_depth_info.publish(camera_info_message(self.intrinsics, stamp, self.frame_id))
            self.pub_depth.publish(image_message(depth, "32FC1", stamp, self.frame_id))
        self._rendered_t = t
        self.frames += 1
        self.render_ms.append(1000.0 * (time.perf_counter() - w0))
        del self.render_ms[:-200]

    def _publish_diagnostics(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

        status = DiagnosticStatus(name="camera_node", hardware_id=self.config.name)
        status.level, status.message = DiagnosticStatus.OK, "rendering"
        if self.errors:
            status.level, status.message = DiagnosticStatus.ERROR, f"render errors: {self.last_error}"
        elif self.frames == 0:
            status.level, status.message = DiagnosticStatus.WARN, "no frame yet (no simulator state)"
        ms = np.array(self.render_ms) if self.render_ms else np.zeros(1)
        values = {
            "frames": self.frames,
            "dropped_frames": self.dropped,
            "render_ms_median": round(float(np.median(ms)), 2),
            "render_ms_max": round(float(ms.max()), 2),
            "rate_hz": round(1000.0 / self.period_ms, 3),
            "width": self.intrinsics.width,
            "height": self.intrinsics.height,
            "lockstep": self.lockstep,
            "errors": self.errors,
        }
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [status]
        self.pub_diag.publish(msg)

    def close(self) -> None:
        """Leave the lockstep and free the renderer."""
        self.peer.leave()
        self.renderer.close()


class SimCameraState:
    """The camera's own MuJoCo model and data, and the robot state copied into it from ROS messages.

    Attributes:
        model, data: ``mujoco.MjModel`` / ``MjData`` of robot + scene + camera.
        camera: the ``SimCamera`` renderer.
    """

    def __init__(self, config: Any, mj: Any, camera: Any) -> None:
        import mujoco

        self.config = config
        self.mj = mj
        self.model = mj.model
        self.data = mujoco.MjData(self.model)
        self.camera = camera
        self._index: dict[tuple[str, ...], np.ndarray] = {}

    def set_state(self, truth: Any, joints: Any) -> None:
        """Base pose from a ``world`` -> base Odometry, joint angles by name from a JointState; then the
        kinematics and the camera poses (no dynamics) so that the renderer sees the posed robot from the
        moved camera. ValueError for bad input."""
        import mujoco

        names = tuple(joints.name)
        idx = self._index.get(names)
        if idx is None:
            order = {n: i for i, n in enumerate(names)}
            missing = [n for n in self.config.joint_names if n not in order]
            if missing:
                raise ValueError(f"joint state without {missing}")
            idx = np.array([order[n] for n in self.config.joint_names])
            self._index[names] = idx
        q = np.asarray(joints.position, dtype=float)
        if q.shape[0] != len(names) or not np.all(np.isfinite(q)):
            raise ValueError("joint state with wrong length or non-finite positions")
        p, o = truth.pose.pose.position, truth.pose.pose.orientation
        base = np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z], dtype=float)
        if not np.all(np.isfinite(base)):
            raise ValueError("non-finite base pose")
        b = self.mj.base_qpos_adr
        self.data.qpos[b : b + 7] = base
        self.data.qpos[self.mj.qpos_adr] = q[idx]
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)  # camera poses are not part of mj_kinematics

    def close(self) -> None:
        """Free the rendering context."""
        close = getattr(self.camera, "close", None)
        if close is not None:
            close()


def build_sim_camera(
    config: Any, scene: str, spec: Any, width: int | None = None, height: int | None = None
) -> SimCameraState:
    """The camera's model (robot + scene + head camera: the driver's world plus the camera) and its
    renderer at ``width`` x ``height`` (None: the configured size)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from humanoid_control.hardware.scene import load_scene
    from humanoid_perception.camera import SimCamera, load_camera_model

    mj, cam = load_camera_model(config, load_scene(scene), spec)
    camera = SimCamera(mj.model, None, cam, width=width, height=height)
    return SimCameraState(config, mj, camera)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``camera_node``."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    return run_node(CameraNode, args, program="camera_node")


if __name__ == "__main__":
    raise SystemExit(main())
