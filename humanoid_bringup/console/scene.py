"""The console's viser page: the 3D scene (robot, ground-truth ghost, walking plan, markers) and the operator
panel (status, mode buttons, hold-to-drive, pushes). No rclpy here: the node adapter
(:mod:`humanoid_bringup.console.console_node`) feeds it plain values and message-like objects.

Frames: the scene's world frame is the estimator's ``odom`` frame (x forward, y left, z up, metres); the
robot's ``base_link`` is placed at the ``/odom`` pose, its links by forward kinematics of ``/joint_states``
(yourdfpy through ``viser.extras.ViserUrdf``). The ground-truth ghost is placed at ``/sim/ground_truth``
(the simulator's world frame, which is the odom frame at start in simulation). Markers are drawn in their
frame as if it were ``odom`` (the stack's markers are stamped in ``odom``).
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from humanoid_bringup.console.drive import DriveLimits

__all__ = ["PUSH_DIRECTIONS", "SERVICE_BUTTONS", "ConsoleActions", "ConsoleScene"]

#: (label, mode manager request) of the operating buttons, in panel order
SERVICE_BUTTONS: tuple[tuple[str, str], ...] = (
    ("stand", "stand"),
    ("walk", "walk"),
    ("run policy", "run_policy"),
    ("damp", "damp"),
    ("e-stop", "estop"),
    ("reset", "reset"),
    ("autonomy on", "autonomy_on"),
    ("autonomy off", "autonomy_off"),
)
#: push directions (unit vector in the world frame, x forward, y left)
PUSH_DIRECTIONS: dict[str, tuple[float, float]] = {
    "forward": (1.0, 0.0),
    "backward": (-1.0, 0.0),
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
}


class ConsoleActions(Protocol):
    """What the page's controls call (from viser's threads), each with the page's client id."""

    def request(self, name: str, client: int) -> None: ...

    def hold(self, client: int, speed: float, turn: float) -> None: ...

    def release(self, client: int) -> None: ...

    def push(self, client: int, direction: str, impulse: float) -> None: ...


@dataclass(frozen=True)
class Pose:
    """A pose: position (m) and orientation quaternion (w, x, y, z)."""

    position: tuple[float, float, float]
    wxyz: tuple[float, float, float, float]


def _file_handler(fname: str) -> str:
    """yourdfpy's mesh path handler: ``file://`` URIs to paths (the description's default mesh URIs)."""
    return fname[len("file://") :] if fname.startswith("file://") else fname


class ConsoleScene:
    """Builds the page on ``server`` (a ``viser.ViserServer``) and updates it (thread-safe)."""

    def __init__(self, server: Any, actions: ConsoleActions, limits: DriveLimits, hold_hz: float, push: bool):
        self.server = server
        self.actions = actions
        self._lock = threading.Lock()
        self.robot: Any = None  # ViserUrdf
        self.ghost: Any = None
        self.joint_names: list[str] = []
        self.updates = 0  # scene updates sent (robot pose + joints)
        self._markers: dict[str, list[Any]] = {}
        self._plan: Any = None
        self._urdf_xml = ""
        self._fast: _FastJoints | None = None
        server.scene.set_up_direction("+z")
        server.initial_camera.position = (1.4, -1.7, 1.2)
        server.initial_camera.look_at = (0.0, 0.0, 0.6)
        server.scene.add_grid("/grid", width=20.0, height=20.0, cell_size=0.5, plane="xy")
        self.base = server.scene.add_frame("/odom/base_link", show_axes=False)
        self.ghost_base = server.scene.add_frame("/world/ghost", show_axes=False, visible=False)
        gui = server.gui
        with gui.add_folder("Status"):
            self.status = gui.add_markdown("starting")
        with gui.add_folder("Operate"):
            self.buttons: dict[str, Any] = {}
            for label, name in SERVICE_BUTTONS:
                button = gui.add_button(label, color="red" if name == "estop" else None)
                button.on_click(lambda ev, n=name: self.actions.request(n, ev.client_id))
                self.buttons[name] = button
            self.answer = gui.add_markdown("")
        with gui.add_folder("Drive"):
            self.speed = gui.add_slider(
                "speed (m/s)", limits.vx_min, limits.vx_max, 0.01, min(0.4, limits.vx_max)
            )
            self.turn = gui.add_slider("turn (rad/s)", -limits.wz_max, limits.wz_max, 0.01, 0.0)
            self.drive = gui.add_button("hold to drive")
            self.drive.on_hold(self._on_hold, callback_hz=hold_hz)
            self.drive.on_click(lambda ev: self.actions.release(ev.client_id))  # the click comes on release
        self.push_buttons: list[Any] = []
        if push:
            with gui.add_folder("Push (simulation)"):
                self.push_dir = gui.add_dropdown("direction", tuple(PUSH_DIRECTIONS), initial_value="forward")
                self.push_impulse = gui.add_slider("impulse (N s)", 1.0, 30.0, 0.5, 5.0)
                button = gui.add_button("push")
                button.on_click(
                    lambda ev: self.actions.push(
                        ev.client_id, self.push_dir.value, float(self.push_impulse.value)
                    )
                )
                self.push_buttons.append(button)
        with gui.add_folder("Head camera", expand_by_default=False):
            self.camera_note = gui.add_markdown("no image yet (perception:=true starts the head camera)")
            self.camera = gui.add_image(np.zeros((48, 64, 3), np.uint8), format="jpeg", jpeg_quality=70)
        self._height_map: Any = None
        with gui.add_folder("View"):
            self.show_robot = gui.add_checkbox("show robot", True)
            self.show_robot.on_update(lambda _ev: self._set_robot_visible(bool(self.show_robot.value)))
            self.show_ghost = gui.add_checkbox("ground-truth ghost", False)
            self.show_ghost.on_update(lambda _ev: self._set_ghost_visible(bool(self.show_ghost.value)))

    # ------------------------------------------------------------------ controls
    def _on_hold(self, ev: Any) -> None:
        # the slider values as the server has them (a page may send anything: validated by DriveControl)
        self.actions.hold(ev.client_id, self.speed.value, self.turn.value)

    def set_operable(self, operable: bool) -> None:
        """Enable or disable the operating controls (disabled without the mode manager)."""
        for button in (*self.buttons.values(), self.drive, *self.push_buttons):
            if button.disabled == operable:
                button.disabled = not operable

    def set_limits(self, limits: DriveLimits) -> None:
        """The sliders' ranges from the mode manager's limits."""
        self.speed.min, self.speed.max = limits.vx_min, limits.vx_max
        self.turn.min, self.turn.max = -limits.wz_max, limits.wz_max

    def set_status(self, markdown: str) -> None:
        if self.status.content != markdown:
            self.status.content = markdown

    def set_answer(self, text: str) -> None:
        self.answer.content = text

    def notify(self, client: int, title: str, body: str, error: bool) -> None:
        """A notification on one page (e.g. a refused hold)."""
        handle = self.server.get_clients().get(client)
        if handle is not None:
            handle.add_notification(title, body, color="red" if error else "blue", auto_close_seconds=4.0)

    # ------------------------------------------------------------------ robot
    def set_robot(self, urdf_xml: str) -> str:
        """Build the robot (and its ghost) from a URDF with ``file://`` or absolute mesh paths; a summary."""
        import yourdfpy
        from viser.extras import ViserUrdf

        urdf = yourdfpy.URDF.load(io.StringIO(urdf_xml), filename_handler=_file_handler, load_meshes=True)
        with self._lock:
            for old in (self.robot, self.ghost):
                if old is not None:
                    old.remove()
            self.ghost = None  # built when first shown (it costs the page as much as the robot)
            self._urdf_xml = urdf_xml
            self.robot = ViserUrdf(self.server, urdf, root_node_name="/odom/base_link")
            self.joint_names = list(self.robot.get_actuated_joint_names())
            # every frame posed once (the fixed joints' and the joint origins: the fast path below moves
            # only the joints' rotations and slides)
            self.robot.update_cfg(np.zeros(len(self.joint_names)))
            self._fast = _FastJoints.build(self.robot, self.joint_names)
        if self.show_ghost.value:
            self._set_ghost_visible(True)
        return f"{urdf.robot.name} ({len(self.joint_names)} joints)"

    def _set_robot_visible(self, visible: bool) -> None:
        with self._lock:
            self.base.visible = visible

    def _set_ghost_visible(self, visible: bool) -> None:
        import yourdfpy
        from viser.extras import ViserUrdf

        with self._lock:
            if visible and self.ghost is None and self._urdf_xml:
                urdf = yourdfpy.URDF.load(
                    io.StringIO(self._urdf_xml), filename_handler=_file_handler, load_meshes=True
                )
                self.ghost = ViserUrdf(
                    self.server,
                    urdf,
                    root_node_name="/world/ghost",
                    mesh_color_override=(0.3, 0.6, 1.0, 0.35),
                )
            self.ghost_base.visible = visible

    def _cfg(self, joints: Mapping[str, float]) -> np.ndarray:
        return np.array([joints.get(n, 0.0) for n in self.joint_names], dtype=np.float64)

    def update_robot(self, base: Pose | None, joints: Mapping[str, float] | None, ghost: Pose | None) -> None:
        """One scene update: the estimated base pose, the joints (rad) and the ghost (when shown)."""
        with self._lock, self.server.atomic():
            if self.robot is None:
                return
            if base is not None:
                self.base.position, self.base.wxyz = base.position, base.wxyz
            if joints is not None:
                cfg = self._cfg(joints)
                if self._fast is not None:
                    self._fast.update(cfg)
                else:
                    self.robot.update_cfg(cfg)
                if ghost is not None and self.ghost is not None and self.ghost_base.visible:
                    self.ghost.update_cfg(cfg)
            if ghost is not None and self.ghost_base.visible:
                self.ghost_base.position, self.ghost_base.wxyz = ghost.position, ghost.wxyz
            self.updates += 1
        self.server.flush()  # one update, one message window to the pages (not merged with the next)

    # ------------------------------------------------------------------ camera and height map
    def set_camera_image(self, rgb: np.ndarray, note: str) -> None:
        """The head camera's newest frame (H x W x 3 uint8 RGB) under the panel, with a caption."""
        self.camera.image = rgb
        if self.camera_note.content != note:
            self.camera_note.content = note

    def set_height_map(self, vertices: np.ndarray, faces: np.ndarray) -> None:
        """The terrain height map (odom frame, m) as a mesh, replacing the previous one."""
        with self._lock:
            if self._height_map is not None:
                self._height_map.remove()
                self._height_map = None
            if len(faces) == 0:
                return
            self._height_map = self.server.scene.add_mesh_simple(
                "/odom/height_map",
                vertices,
                faces,
                color=(200, 140, 60),
                opacity=0.7,
                side="double",
                cast_shadow=False,
            )

    # ------------------------------------------------------------------ plan and markers
    def set_plan(self, points: np.ndarray) -> None:
        """The walking plan (``/walking/plan`` poses, N x 3, odom frame) as a line."""
        with self._lock:
            if self._plan is not None:
                self._plan.remove()
                self._plan = None
            if len(points) < 2:
                return
            segments = np.stack([points[:-1], points[1:]], axis=1).astype(np.float32)
            self._plan = self.server.scene.add_line_segments(
                "/odom/plan", segments, colors=(0.1, 0.5, 0.1), line_width=3.0
            )

    def set_markers(self, topic: str, markers: Sequence[Any]) -> None:
        """A visualization_msgs/MarkerArray (message-like objects): CUBE, SPHERE, CYLINDER as solids,
        LINE_STRIP, LINE_LIST as lines, POINTS and SPHERE_LIST as points; the topic's earlier ones are
        removed first."""
        with self._lock:
            for handle in self._markers.pop(topic, []):
                handle.remove()
            handles: list[Any] = []
            base = "/odom/markers" + topic.replace("/", "_")
            for i, mk in enumerate(markers):
                handle = _draw_marker(self.server.scene, f"{base}/{mk.ns or 'm'}_{mk.id}_{i}", mk)
                if handle is not None:
                    handles.append(handle)
            self._markers[topic] = handles


class _FastJoints:
    """Joint frames of a ``ViserUrdf`` posed directly: ``T_parent_child = origin * motion(axis, q)`` for the
    revolute, continuous and prismatic joints only (vectorized quaternions; fixed joints never change), and a
    pose sent only where it changed. ``ViserUrdf.update_cfg`` re-evaluates every frame through yourdfpy's
    scene graph: this takes about a quarter of its time (9 ms against 35 ms with every G1 joint moving, on a
    loaded 2-core machine). Built from ViserUrdf's frame list (not
    public API): where that is missing or a joint mimics another, :meth:`build` gives None and the scene uses
    ``update_cfg``."""

    def __init__(
        self,
        frames: list[Any],
        index: np.ndarray,
        origin_q: np.ndarray,
        origin_t: np.ndarray,
        axis: np.ndarray,
        prismatic: np.ndarray,
    ) -> None:
        self.frames, self.index = frames, index
        self.origin_q, self.origin_t, self.axis, self.prismatic = origin_q, origin_t, axis, prismatic
        self.origin_r = np.array([_quat_matrix(q) for q in origin_q])
        self.sent = np.full((len(frames), 7), np.nan)  # the last pose sent per frame (wxyz, position)

    @staticmethod
    def build(robot: Any, names: list[str]) -> _FastJoints | None:
        joints = getattr(robot, "_joint_map_values", None)
        frames = getattr(robot, "_joint_frames", None)
        if joints is None or frames is None or len(joints) != len(frames):
            return None
        sel, index, oq, ot, axes, prism = [], [], [], [], [], []
        position = {n: i for i, n in enumerate(names)}
        for joint, frame in zip(joints, frames, strict=True):
            if getattr(joint, "mimic", None) is not None:
                return None
            if joint.type == "fixed":
                continue
            if joint.type not in ("revolute", "continuous", "prismatic") or joint.name not in position:
                return None
            origin = np.eye(4) if joint.origin is None else np.asarray(joint.origin, dtype=np.float64)
            axis = np.asarray(joint.axis if joint.axis is not None else (1.0, 0.0, 0.0), dtype=np.float64)
            sel.append(frame)
            index.append(position[joint.name])
            oq.append(_matrix_quat(origin[:3, :3]))
            ot.append(origin[:3, 3])
            axes.append(axis / max(np.linalg.norm(axis), 1e-12))
            prism.append(joint.type == "prismatic")
        return _FastJoints(sel, np.array(index), np.array(oq), np.array(ot), np.array(axes), np.array(prism))

    def update(self, cfg: np.ndarray) -> None:
        """Pose the joint frames for joint positions ``cfg`` (rad or m, in the actuated joints' order)."""
        q = cfg[self.index]
        angle = np.where(self.prismatic, 0.0, q)
        half = 0.5 * angle
        motion = np.concatenate([np.cos(half)[:, None], self.axis * np.sin(half)[:, None]], axis=1)
        wxyz = _quat_mul(self.origin_q, motion)
        slide = np.where(self.prismatic, q, 0.0)[:, None] * self.axis
        pos = self.origin_t + np.einsum("nij,nj->ni", self.origin_r, slide)
        # only frames that moved visibly (2e-4 in quaternion components: about 0.02 degrees, or 0.2 mm)
        still = np.abs(np.concatenate([wxyz, pos], axis=1) - self.sent).max(axis=1) <= 2e-4
        for i in np.flatnonzero(~still):  # NaN (never sent) is not still
            frame = self.frames[i]
            frame.wxyz = wxyz[i]
            if self.prismatic[i]:
                frame.position = pos[i]
            self.sent[i, :4], self.sent[i, 4:] = wxyz[i], pos[i]


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Hamilton product of (w, x, y, z) quaternions."""
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=1,
    )


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _matrix_quat(r: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix (Shepperd's method)."""
    t = np.trace(r)
    if t > 0:
        s = 2.0 * math.sqrt(t + 1.0)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2])
        q = [(r[2, 1] - r[1, 2]) / s, 0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s]
    elif r[1, 1] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2])
        q = [(r[0, 2] - r[2, 0]) / s, (r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1])
        q = [(r[1, 0] - r[0, 1]) / s, (r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s]
    v = np.array(q)
    return v / np.linalg.norm(v)


def _color(mk: Any) -> tuple[float, float, float]:
    c = mk.color
    if c.a == 0.0 and c.r == 0.0 and c.g == 0.0 and c.b == 0.0:
        return (0.5, 0.5, 0.5)
    return (float(c.r), float(c.g), float(c.b))


def _draw_marker(scene: Any, name: str, mk: Any) -> Any:
    """Draw one marker; None for DELETE / DELETEALL and unsupported types."""
    if int(mk.action) != 0:  # ADD/MODIFY = 0; DELETE = 2, DELETEALL = 3
        return None
    p, o = mk.pose.position, mk.pose.orientation
    position = (float(p.x), float(p.y), float(p.z))
    norm = math.sqrt(o.w * o.w + o.x * o.x + o.y * o.y + o.z * o.z)
    wxyz = (1.0, 0.0, 0.0, 0.0) if norm < 1e-9 else (o.w / norm, o.x / norm, o.y / norm, o.z / norm)
    s = mk.scale
    kind = int(mk.type)
    color = _color(mk)
    if kind == 1:  # CUBE
        dims = (max(float(s.x), 1e-3), max(float(s.y), 1e-3), max(float(s.z), 1e-3))
        return scene.add_box(name, dimensions=dims, color=color, position=position, wxyz=wxyz)
    if kind in (2, 3):  # SPHERE, CYLINDER (drawn as a sphere of the mean radius)
        radius = max(1e-3, (float(s.x) + float(s.y)) / 4.0)
        return scene.add_icosphere(name, radius=radius, color=color, position=position, wxyz=wxyz)
    pts = np.array([[q.x, q.y, q.z] for q in mk.points], dtype=np.float32)
    if len(pts) == 0:
        return None
    if kind in (4, 5):  # LINE_STRIP, LINE_LIST
        segs = (
            np.stack([pts[:-1], pts[1:]], axis=1) if kind == 4 else pts[: len(pts) // 2 * 2].reshape(-1, 2, 3)
        )
        if len(segs) == 0:
            return None
        return scene.add_line_segments(name, segs, colors=color, line_width=2.0, position=position, wxyz=wxyz)
    if kind in (7, 8):  # SPHERE_LIST, POINTS
        size = max(float(s.x), 0.01)
        return scene.add_point_cloud(name, pts, colors=color, point_size=size, position=position, wxyz=wxyz)
    return None


def poses_from_path(poses: Sequence[Any]) -> np.ndarray:
    """N x 3 positions (m) of a nav_msgs/Path's poses."""
    return np.array(
        [[q.pose.position.x, q.pose.position.y, q.pose.position.z] for q in poses], dtype=np.float64
    )


def make_pose(position: Sequence[float], wxyz: Sequence[float]) -> Pose | None:
    """A :class:`Pose`, or None when not finite."""
    values = [float(v) for v in (*position, *wxyz)]
    if not all(math.isfinite(v) for v in values):
        return None
    return Pose((values[0], values[1], values[2]), (values[3], values[4], values[5], values[6]))
