"""The head camera: its configuration, its pinhole intrinsics, and offscreen RGB / depth rendering in MuJoCo.

Frames (REP-103 / REP-105; all transforms map child-frame vectors into the parent frame):

- ``head_camera_link`` (:attr:`CameraSpec.link_frame`): the camera body, x forward along the optical axis,
  y left, z up; fixed on ``parent_body`` at ``position`` (m) and ``rpy`` (rad). For the G1 this is the D435i
  of Unitree's ``g1_description`` (``d435_link`` on ``torso_link`` at (0.0576, 0.0175, 0.4299) m, pitched
  0.8308 rad down).
- ``head_camera_optical_frame`` (:attr:`CameraSpec.optical_frame`): z forward along the optical axis, x right,
  y down in the image (REP-103 ``_optical`` suffix); ``R_link_optical`` = :data:`R_LINK_OPTICAL`. Marker
  poses, depth points and :class:`CameraIntrinsics` are in this frame.
- MuJoCo's camera looks along its -z with y up; :func:`attach_camera` adds it rotated accordingly, plus two
  sites (group 5, invisible) at the link and optical frames, so ``optical_pose`` reads the simulator directly.

Pixels follow OpenCV: pixel (u, v) is column u, row v, row 0 at the top, integer coordinates at pixel
centres. MuJoCo renders a symmetric frustum of vertical field of view ``fovy`` with square pixels, so
``fy = fx = (height / 2) / tan(fovy / 2)``, ``cx = width / 2 - 0.5``, ``cy = height / 2 - 0.5``, no
distortion.

Depth images are ``float32`` metres of z-depth (along the optical axis, not along the ray), 0 where there is
no measurement (outside ``depth_range``), like a RealSense ``aligned_depth_to_color`` stream (depth rendered
from the colour camera's viewpoint). An optional stereo noise model (:class:`DepthNoiseSpec`) adds the
D435's depth-squared error growth.

Rendering takes tens of milliseconds per frame on a CPU (software OpenGL; shadows, reflections and skybox
off; ``humanoid-bench perception`` measures it): run it in its own process, never in the control loop's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from humanoid_control.hardware.scene import SceneSpec, matrix_to_quat_wxyz, rpy_to_matrix
from humanoid_control.model.robot_config import RobotConfig
from humanoid_perception.errors import CameraConfigError, ImageFormatError, IntrinsicsError

# optical frame axes (columns) in the link frame: x_opt = -y_link, y_opt = -z_link, z_opt = x_link
R_LINK_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
# MuJoCo camera axes in the optical frame: x right (same), y up (= -y_opt), z backwards (= -z_opt)
R_OPTICAL_MJCAM = np.diag([1.0, -1.0, -1.0])
MAX_IMAGE_SIDE = 4096


@dataclass(frozen=True)
class DepthNoiseSpec:
    """Stereo depth error: ``sigma(z) = z^2 * subpixel_rms / (focal_px * baseline_m)`` (m), white per pixel.

    Defaults are the D435's (50 mm baseline, about 0.08 px subpixel RMS, 425 px focal length at 848x480):
    1.5 cm at 2 m. ``subpixel_rms = 0`` turns it off.
    """

    baseline_m: float = 0.05
    subpixel_rms: float = 0.08
    focal_px: float = 425.0

    def sigma(self, z: np.ndarray) -> np.ndarray:
        """Standard deviation (m) of the depth error at z-depth ``z`` (m)."""
        return np.square(z) * (self.subpixel_rms / (self.focal_px * self.baseline_m))


@dataclass(frozen=True)
class CameraSpec:
    """A robot's camera (the ``camera:`` section of ``config/robots/<robot>.yaml``).

    Attributes:
        name: MuJoCo camera name. parent_body: body it is fixed to.
        position: link frame origin in the parent body frame (m). rpy: link frame -> parent rotation (rad).
        link_frame, optical_frame: frame names (sites in MuJoCo; ``frame_id`` of the images: the optical one).
        width, height: default image size (px). fovy_deg: vertical field of view (deg), kept at every size.
        depth_min_m, depth_max_m: depth measurement range (m); outside it depth pixels are 0.
        rate_hz: default publishing rate of the simulated camera (Hz).
        depth_noise: stereo noise model used when a random generator is passed to ``render_depth``.
    """

    name: str = "head_camera"
    parent_body: str = "torso_link"
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    link_frame: str = "head_camera_link"
    optical_frame: str = "head_camera_optical_frame"
    width: int = 640
    height: int = 480
    fovy_deg: float = 42.0
    depth_min_m: float = 0.2
    depth_max_m: float = 10.0
    rate_hz: float = 15.0
    depth_noise: DepthNoiseSpec = field(default_factory=DepthNoiseSpec)

    def __post_init__(self) -> None:
        problems = []
        for key in ("name", "parent_body", "link_frame", "optical_frame"):
            if not getattr(self, key):
                problems.append(f"{key} must not be empty")
        if len({self.name, self.link_frame, self.optical_frame}) != 3:
            problems.append("name, link_frame and optical_frame must differ")
        for key in ("width", "height"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or not 16 <= v <= MAX_IMAGE_SIDE:
                problems.append(f"{key} must be an integer in [16, {MAX_IMAGE_SIDE}]: {v!r}")
        vectors = (*self.position, *self.rpy)
        if len(self.position) != 3 or len(self.rpy) != 3 or not all(math.isfinite(v) for v in vectors):
            problems.append("position and rpy must be 3 finite numbers each")
        if not (math.isfinite(self.fovy_deg) and 1.0 <= self.fovy_deg <= 170.0):
            problems.append(f"fovy_deg must be in [1, 170]: {self.fovy_deg}")
        if not (0.0 < self.depth_min_m < self.depth_max_m <= 100.0):
            problems.append(
                f"need 0 < depth_min_m < depth_max_m <= 100: {self.depth_min_m}, {self.depth_max_m}"
            )
        if not (math.isfinite(self.rate_hz) and 0.0 < self.rate_hz <= 120.0):
            problems.append(f"rate_hz must be in (0, 120]: {self.rate_hz}")
        n = self.depth_noise
        if not (n.baseline_m > 0 and n.focal_px > 0 and 0 <= n.subpixel_rms <= 5.0):
            problems.append(f"depth_noise needs baseline_m > 0, focal_px > 0, subpixel_rms in [0, 5]: {n}")
        if problems:
            raise CameraConfigError("camera: " + "; ".join(problems))

    @property
    def rotation_parent_link(self) -> np.ndarray:
        """Link frame -> parent body rotation."""
        return rpy_to_matrix(self.rpy)

    @property
    def rotation_parent_optical(self) -> np.ndarray:
        """Optical frame -> parent body rotation."""
        return self.rotation_parent_link @ R_LINK_OPTICAL

    def intrinsics(self, width: int | None = None, height: int | None = None) -> CameraIntrinsics:
        """Pinhole intrinsics of the rendered image at ``width`` x ``height`` (default: the configured
        size)."""
        return pinhole_intrinsics(width or self.width, height or self.height, self.fovy_deg)


def camera_spec_from_dict(table: Any, where: str = "camera") -> CameraSpec:
    """Validate a ``camera:`` table (unknown keys refused;
    :class:`~humanoid_perception.errors.CameraConfigError`)."""
    if not isinstance(table, dict):
        raise CameraConfigError(f"{where}: expected a mapping, got {table!r}")
    allowed = {
        "name",
        "parent_body",
        "position",
        "rpy",
        "link_frame",
        "optical_frame",
        "width",
        "height",
        "fovy_deg",
        "depth_range",
        "rate_hz",
        "depth_noise",
    }
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise CameraConfigError(f"{where}: unknown keys {unknown} (allowed: {sorted(allowed)})")
    missing = sorted({"parent_body", "position", "rpy"} - set(table))
    if missing:
        raise CameraConfigError(f"{where}: missing keys {missing}")
    kwargs: dict[str, Any] = {}
    try:
        for key in ("name", "parent_body", "link_frame", "optical_frame"):
            if key in table:
                kwargs[key] = str(table[key])
        for key in ("position", "rpy"):
            kwargs[key] = tuple(float(v) for v in table[key])
        for key in ("width", "height"):
            if key in table:
                kwargs[key] = table[key]
        for key in ("fovy_deg", "rate_hz"):
            if key in table:
                kwargs[key] = float(table[key])
        if "depth_range" in table:
            lo, hi = (float(v) for v in table["depth_range"])
            kwargs["depth_min_m"], kwargs["depth_max_m"] = lo, hi
        if "depth_noise" in table:
            noise = table["depth_noise"]
            if not isinstance(noise, dict) or set(noise) - {"baseline_m", "subpixel_rms", "focal_px"}:
                raise CameraConfigError(f"{where}.depth_noise: expected baseline_m, subpixel_rms, focal_px")
            kwargs["depth_noise"] = DepthNoiseSpec(**{k: float(v) for k, v in noise.items()})
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CameraConfigError):
            raise
        raise CameraConfigError(f"{where}: malformed ({exc})") from None
    try:
        return CameraSpec(**kwargs)
    except CameraConfigError as exc:
        raise CameraConfigError(f"{where}: {exc}") from None


def load_camera_spec(robot_config: RobotConfig) -> CameraSpec:
    """The ``camera:`` section of the robot's configuration file (:class:`CameraConfigError` if absent or
    bad)."""
    path = robot_config.config_path
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or data.get("camera") is None:
        raise CameraConfigError(f"{path}: robot '{robot_config.name}' has no camera section")
    return camera_spec_from_dict(data["camera"], f"{path}: camera")


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole camera model of an image (OpenCV convention, optical frame).

    Attributes:
        width, height: image size (px).
        K: 3x3 camera matrix ``[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]`` (px).
        D: distortion coefficients (OpenCV order ``k1 k2 p1 p2 [k3 ...]``; empty or zeros for none).
    """

    width: int
    height: int
    K: np.ndarray
    D: np.ndarray = field(default_factory=lambda: np.zeros(5))

    def __post_init__(self) -> None:
        K = np.asarray(self.K, dtype=float)
        D = np.asarray(self.D, dtype=float).reshape(-1)
        object.__setattr__(self, "K", K)
        object.__setattr__(self, "D", D)
        for key in ("width", "height"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= MAX_IMAGE_SIDE:
                raise IntrinsicsError(f"intrinsics: {key} must be an integer in [1, {MAX_IMAGE_SIDE}]: {v!r}")
        if K.shape != (3, 3) or not np.all(np.isfinite(K)):
            raise IntrinsicsError(f"intrinsics: K must be a finite 3x3 matrix, got {K.tolist()}")
        if not (K[0, 0] > 0 and K[1, 1] > 0) or K[2, 2] != 1.0 or np.any(K[2, :2] != 0) or K[1, 0] != 0:
            raise IntrinsicsError(
                f"intrinsics: K is not a camera matrix (fx, fy > 0, last row 0 0 1): {K.tolist()}"
            )
        if not (-0.5 <= K[0, 2] <= self.width - 0.5 and -0.5 <= K[1, 2] <= self.height - 0.5):
            raise IntrinsicsError(f"intrinsics: principal point ({K[0, 2]}, {K[1, 2]}) outside the image")
        if D.size not in (0, 4, 5, 8, 12, 14) or not np.all(np.isfinite(D)):
            raise IntrinsicsError(
                f"intrinsics: D must hold 0, 4, 5, 8, 12 or 14 finite values, got {D.tolist()}"
            )

    @property
    def fx(self) -> float:
        return float(self.K[0, 0])

    @property
    def fy(self) -> float:
        return float(self.K[1, 1])

    @property
    def cx(self) -> float:
        return float(self.K[0, 2])

    @property
    def cy(self) -> float:
        return float(self.K[1, 2])

    @property
    def distorted(self) -> bool:
        """Whether any distortion coefficient is non-zero."""
        return bool(np.any(self.D != 0))

    @staticmethod
    def from_camera_info(width: int, height: int, k: Any, d: Any = ()) -> CameraIntrinsics:
        """From the fields of a ``sensor_msgs/CameraInfo`` (``k``: 9 values, row-major; ``d``: distortion,
        ``plumb_bob`` order). An all-zero ``k`` (an uncalibrated camera) is an :class:`IntrinsicsError`."""
        k = np.asarray(k, dtype=float).reshape(-1)
        if k.size != 9:
            raise IntrinsicsError(f"camera info: k must hold 9 values, got {k.size}")
        if not np.any(k):
            raise IntrinsicsError("camera info: k is all zeros (camera not calibrated)")
        return CameraIntrinsics(int(width), int(height), k.reshape(3, 3), np.asarray(d, dtype=float))

    def camera_info_fields(self) -> dict[str, Any]:
        """The fields of a ``sensor_msgs/CameraInfo`` for these intrinsics: ``width``, ``height``,
        ``distortion_model`` (``plumb_bob``, or ``rational_polynomial`` for 8 coefficients), ``d``, ``k`` (9,
        row-major), ``r`` (identity: not a stereo pair), ``p`` (3x4, ``[K | 0]``)."""
        d = [float(v) for v in self.D] or [0.0] * 5
        p = np.zeros((3, 4))
        p[:, :3] = self.K
        return {
            "width": int(self.width),
            "height": int(self.height),
            "distortion_model": "rational_polynomial" if len(d) == 8 else "plumb_bob",
            "d": d,
            "k": [float(v) for v in self.K.reshape(9)],
            "r": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
            "p": [float(v) for v in p.reshape(12)],
        }

    def check_image(self, image: np.ndarray, what: str = "image") -> None:
        """:class:`ImageFormatError` unless ``image`` is an array ``height`` x ``width`` (x channels)."""
        if not isinstance(image, np.ndarray) or image.ndim not in (2, 3):
            raise ImageFormatError(f"{what}: expected a 2D or 3D array, got {type(image).__name__}")
        if image.shape[:2] != (self.height, self.width):
            raise ImageFormatError(
                f"{what}: size {image.shape[1]}x{image.shape[0]} does not match the camera info "
                f"{self.width}x{self.height}"
            )


def pinhole_intrinsics(width: int, height: int, fovy_deg: float) -> CameraIntrinsics:
    """Intrinsics of a MuJoCo camera (symmetric frustum, square pixels) rendering ``width`` x ``height``."""
    f = 0.5 * height / math.tan(math.radians(fovy_deg) / 2.0)
    K = np.array([[f, 0.0, width / 2.0 - 0.5], [0.0, f, height / 2.0 - 0.5], [0.0, 0.0, 1.0]])
    return CameraIntrinsics(int(width), int(height), K, np.zeros(5))


def attach_camera(spec: Any, cam: CameraSpec) -> None:
    """Add the camera to a ``mujoco.MjSpec`` before it is compiled.

    Adds, on ``cam.parent_body``: the MuJoCo camera ``cam.name`` (fovy ``cam.fovy_deg``), and sites
    ``cam.link_frame`` and ``cam.optical_frame`` (group 5, not drawn) at the link and optical frames. The
    offscreen buffer is enlarged to hold at least 1280x720 and the configured size. No mass, no collision.
    """
    parent = spec.body(cam.parent_body)
    if parent is None:
        raise CameraConfigError(f"camera: parent body '{cam.parent_body}' is not in the model")
    pos = [float(v) for v in cam.position]
    r_link = cam.rotation_parent_link
    r_opt = cam.rotation_parent_optical
    parent.add_site(
        name=cam.link_frame, pos=pos, quat=list(matrix_to_quat_wxyz(r_link)), size=[0.01] * 3, group=5
    )
    parent.add_site(
        name=cam.optical_frame, pos=pos, quat=list(matrix_to_quat_wxyz(r_opt)), size=[0.01] * 3, group=5
    )
    parent.add_camera(
        name=cam.name, pos=pos, quat=list(matrix_to_quat_wxyz(r_opt @ R_OPTICAL_MJCAM)), fovy=cam.fovy_deg
    )
    g = spec.visual.global_
    g.offwidth = max(int(g.offwidth), cam.width, 1280)
    g.offheight = max(int(g.offheight), cam.height, 720)


def load_camera_model(
    robot_config: RobotConfig, scene: SceneSpec | None = None, cam: CameraSpec | None = None
) -> tuple[Any, CameraSpec]:
    """The robot's MuJoCo model (robot scene file + ``scene``) with its camera attached.

    Returns ``(MujocoRobotModel, CameraSpec)``; the camera spec is the robot's own unless given.
    """
    from humanoid_control.model.robot_model import load_mujoco_model

    cam = cam or load_camera_spec(robot_config)
    mj = load_mujoco_model(
        robot_config,
        scene=True,
        torque_actuators=False,
        scene_spec=scene,
        edit=lambda s: attach_camera(s, cam),
    )
    return mj, cam


class SimCamera:
    """Offscreen RGB and depth rendering of a camera added by :func:`attach_camera`.

    One OpenGL context per instance (``MUJOCO_GL=egl`` headless, else ``osmesa``); not thread-safe. Shadows,
    reflections and the skybox are off (they cost 3-4x the time on a software renderer and carry nothing a
    marker detector or a depth map needs).

    Args:
        model: compiled ``mujoco.MjModel`` holding the camera. data: default ``MjData`` to render (or None:
        pass
            one to every call). cam: the camera spec. width, height: image size (default: the spec's).
    """

    def __init__(
        self, model: Any, data: Any, cam: CameraSpec, width: int | None = None, height: int | None = None
    ):
        os.environ.setdefault("MUJOCO_GL", "egl")
        import mujoco

        self._mujoco = mujoco
        self.model = model
        self.cam = cam
        self.width = int(width or cam.width)
        self.height = int(height or cam.height)
        if not (16 <= self.width <= MAX_IMAGE_SIDE and 16 <= self.height <= MAX_IMAGE_SIDE):
            raise CameraConfigError(f"camera: image size {self.width}x{self.height} out of range")
        self.camera_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, cam.name)
        self.optical_site_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, cam.optical_frame)
        if self.camera_id < 0 or self.optical_site_id < 0:
            raise CameraConfigError(
                f"camera '{cam.name}' is not in the model (attach_camera adds it at load)"
            )
        self._data = data
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), self.width)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), self.height)
        # clip planes relative to the model extent: 2 cm near plane, far plane beyond the depth range
        extent = float(model.stat.extent)
        model.vis.map.znear = 0.02 / extent
        model.vis.map.zfar = max(2.0 * cam.depth_max_m, 50.0) / extent
        self._renderer = mujoco.Renderer(model, height=self.height, width=self.width)
        flags = self._renderer.scene.flags
        for flag in (
            mujoco.mjtRndFlag.mjRND_SHADOW,
            mujoco.mjtRndFlag.mjRND_REFLECTION,
            mujoco.mjtRndFlag.mjRND_SKYBOX,
        ):
            flags[flag] = 0
        self._intrinsics = pinhole_intrinsics(self.width, self.height, float(model.cam_fovy[self.camera_id]))

    def _pick(self, data: Any) -> Any:
        data = data if data is not None else self._data
        if data is None:
            raise ValueError("SimCamera: no MjData given")
        return data

    def intrinsics(self) -> CameraIntrinsics:
        """Pinhole intrinsics of the rendered images (no distortion)."""
        return self._intrinsics

    def optical_pose(self, data: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """``(p_world (3,), R_world_optical (3, 3))``: the optical frame in the world frame (needs
        ``mj_forward`` or ``mj_kinematics`` on ``data`` first)."""
        data = self._pick(data)
        return (
            np.array(data.site_xpos[self.optical_site_id], dtype=float),
            np.array(data.site_xmat[self.optical_site_id], dtype=float).reshape(3, 3),
        )

    def render_rgb(self, data: Any = None) -> np.ndarray:
        """RGB image (``uint8``, height x width x 3, row 0 at the top) of the scene at ``data``."""
        data = self._pick(data)
        self._renderer.disable_depth_rendering()
        self._renderer.update_scene(data, camera=self.camera_id)
        return np.array(self._renderer.render(), dtype=np.uint8, copy=True)

    def render_depth(self, data: Any = None, rng: np.random.Generator | None = None) -> np.ndarray:
        """Depth image (``float32`` m of z-depth, height x width), 0 outside ``[depth_min_m, depth_max_m]``.

        With ``rng``, the stereo noise of :attr:`CameraSpec.depth_noise` is added (before the range check).
        """
        data = self._pick(data)
        self._renderer.enable_depth_rendering()
        self._renderer.update_scene(data, camera=self.camera_id)
        depth = np.array(self._renderer.render(), dtype=np.float64, copy=True)
        self._renderer.disable_depth_rendering()
        if rng is not None and self.cam.depth_noise.subpixel_rms > 0:
            depth = depth + rng.standard_normal(depth.shape) * self.cam.depth_noise.sigma(depth)
        depth[~((depth >= self.cam.depth_min_m) & (depth <= self.cam.depth_max_m))] = 0.0
        return depth.astype(np.float32)

    def close(self) -> None:
        """Release the OpenGL context."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None  # type: ignore[assignment]

    def __enter__(self) -> SimCamera:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
