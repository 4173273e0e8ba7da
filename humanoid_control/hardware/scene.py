"""World scenes: fiducial markers, boxes and a seeded heightfield added to the MuJoCo model at load.

A scene file is ``config/scenes/<name>.yaml`` (or any YAML path)::

    name: markers
    description: ...
    markers:   # printed fiducials: a visual quad (no collision), texture made with cv2.aruco at load
      - {dictionary: DICT_APRILTAG_36h11, id: 0, size: 0.25, position: [2.0, 0.0, 0.0], rpy: [0, 0, 0]}
    boxes:     # static boxes with collisions (physics) and a colour
      - {name: crate, size: [0.5, 0.5, 0.5], position: [3.0, 1.0, 0.25], rgba: [0.6, 0.4, 0.2, 1]}
    heightfield:   # optional seeded terrain patch (physics and rendering)
      {center: [1.5, 0.0], size: [1.2, 1.2], max_height: 0.08, resolution: 0.01, feature: 0.25,
       edge: 0.1, seed: 7}

Unknown keys are refused (:class:`SceneError`). The name ``flat`` (and ``""``/``none``) is the robot's own
scene file, unchanged. Both the robot driver's MuJoCo backend (physics: boxes, heightfield) and the camera
renderer apply the same file, so they simulate the same world.

Frames and units (m, rad; world = REP-103, z up, floor at z = 0; ``rpy`` = URDF convention, the rotation
``Rz(yaw) Ry(pitch) Rx(roll)`` from the object frame to the world frame):

- **marker frame** (OpenCV's ArUco convention, what ``cv2.solvePnP`` with ``SOLVEPNP_IPPE_SQUARE`` returns):
  origin at the centre of the black square, x towards the right edge of the marker image, y towards its top
  row, z out of the printed face. ``size`` is the side of the black square (ArUco's ``markerLength``); a white
  quiet zone of ``border`` cells (default 2: with one, a marker seen at a grazing angle merges with a dark
  floor and is lost) surrounds it. A marker with ``rpy: [0, 0, 0]`` lies face up on the floor with its top row
  towards +y (world); ``rpy: [0, 0, -pi/2]`` has its top row towards +x (away from a robot facing +x).
  ``position`` is the marker centre; give floor markers z = 0 (the quad is drawn 1 mm above its plane).
- **box**: ``size`` full edge lengths, ``position`` the centre.
- **heightfield**: a ``size[0]`` x ``size[1]`` rectangle centred at ``center`` (x, y), surface height in
  ``[0, max_height]`` above the floor: smooth random bumps (seeded, length scale ``feature``) sampled on a
  grid of ``resolution`` and brought down to 0 over ``edge`` at the border (no step onto it). MuJoCo draws
  and collides the grid as two triangles per cell; :meth:`HeightfieldSpec.heights` is that grid.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

# Geom groups the scene uses: 0 is what a ground-truth ray should hit (floor, boxes, terrain), 1 the marker
# quads.
TERRAIN_GROUP = 0
MARKER_GROUP = 1
MARKER_LIFT = 0.001  # m: the marker quad is drawn this far in front of its plane (no z-fighting)


class SceneError(ValueError):
    """A scene file is malformed or names something that does not exist."""


def rpy_to_matrix(rpy: tuple[float, float, float] | np.ndarray) -> np.ndarray:
    """Rotation matrix ``Rz(yaw) Ry(pitch) Rx(roll)`` (URDF ``rpy``, rad): object frame -> parent frame."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_to_quat_wxyz(rot: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z; MuJoCo's order) of a rotation matrix."""
    import mujoco

    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rot, dtype=float).reshape(9))
    return quat


def aruco_dictionary(name: str) -> Any:
    """The ``cv2.aruco`` predefined dictionary called ``name`` (``DICT_4X4_50``, ``DICT_APRILTAG_36h11``,
    ...)."""
    import cv2

    code = getattr(cv2.aruco, name, None) if name.startswith("DICT_") else None
    if not isinstance(code, int):
        known = sorted(n for n in dir(cv2.aruco) if n.startswith("DICT_"))
        raise SceneError(f"unknown marker dictionary '{name}' (known: {', '.join(known)})")
    return cv2.aruco.getPredefinedDictionary(code)


def marker_image(
    dictionary: str, marker_id: int, pixels_per_cell: int = 16, border_cells: float = 2.0
) -> np.ndarray:
    """Printed marker as a grayscale image (uint8, 255 = white): the black square of ``bits + 2`` cells and a
    white quiet zone of ``border_cells`` cells around it. Row 0 is the marker's top (its +y edge)."""
    import cv2

    d = aruco_dictionary(dictionary)
    if not 0 <= marker_id < d.bytesList.shape[0]:
        raise SceneError(f"marker id {marker_id} outside {dictionary} (0..{d.bytesList.shape[0] - 1})")
    cells = d.markerSize + 2
    inner = cv2.aruco.generateImageMarker(d, marker_id, cells * pixels_per_cell, borderBits=1)
    pad = round(border_cells * pixels_per_cell)
    return cv2.copyMakeBorder(inner, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=255)


def _vector(value: Any, n: int, where: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise SceneError(f"{where}: expected {n} numbers, got {value!r}") from None
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise SceneError(f"{where}: expected {n} finite numbers, got {value!r}")
    return out


def _check_keys(table: Any, allowed: set[str], required: set[str], where: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise SceneError(f"{where}: expected a mapping, got {table!r}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SceneError(f"{where}: unknown keys {unknown} (allowed: {sorted(allowed)})")
    missing = sorted(required - set(table))
    if missing:
        raise SceneError(f"{where}: missing keys {missing}")
    return table


@dataclass(frozen=True)
class MarkerSpec:
    """A printed fiducial marker (see the module docstring for its frame).

    Attributes:
        dictionary: ``cv2.aruco`` dictionary name. id: marker id in it.
        size: side of the black square (m). position: its centre (m, world). rpy: marker frame -> world (rad).
        border: white quiet zone around the black square, in marker cells.
    """

    dictionary: str
    id: int
    size: float
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    border: float = 2.0

    @property
    def body_name(self) -> str:
        """Name of the MuJoCo body that carries the marker quad."""
        return marker_body_name(self.dictionary, self.id)

    @property
    def rotation(self) -> np.ndarray:
        """Marker frame -> world rotation matrix."""
        return rpy_to_matrix(self.rpy)

    def pose(self) -> np.ndarray:
        """4x4 transform marker frame -> world."""
        t = np.eye(4)
        t[:3, :3], t[:3, 3] = self.rotation, self.position
        return t


def marker_body_name(dictionary: str, marker_id: int) -> str:
    """MuJoCo body name of a scene marker: ``marker_<dictionary without DICT_, lower case>_<id>``."""
    return f"marker_{dictionary.removeprefix('DICT_').lower()}_{marker_id}"


@dataclass(frozen=True)
class BoxSpec:
    """A static box with collisions: full edge lengths ``size`` (m), centre ``position`` (m, world), ``rpy``
    (rad), colour ``rgba``."""

    name: str
    size: tuple[float, float, float]
    position: tuple[float, float, float]
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rgba: tuple[float, float, float, float] = (0.6, 0.45, 0.3, 1.0)


@dataclass(frozen=True)
class HeightfieldSpec:
    """A seeded terrain patch (see the module docstring). Units: m.

    Attributes:
        center: (x, y) of the patch centre (world). size: (x, y) extent. max_height: highest point.
        resolution: grid spacing of the elevation samples. feature: length scale of the bumps.
        edge: width of the border over which the surface comes down to the floor. seed: random seed.
    """

    center: tuple[float, float]
    size: tuple[float, float]
    max_height: float = 0.08
    resolution: float = 0.01
    feature: float = 0.25
    edge: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.size) <= 0 or self.max_height <= 0 or self.resolution <= 0 or self.feature <= 0:
            raise SceneError(f"heightfield: size, max_height, resolution and feature must be > 0: {self}")
        if self.edge < 0 or 2 * self.edge >= min(self.size):
            raise SceneError(f"heightfield: edge must be >= 0 and less than half the size: {self}")
        if self.grid_shape[0] * self.grid_shape[1] > 4_000_000:
            raise SceneError(f"heightfield: {self.grid_shape} samples is too many (resolution too fine)")

    @property
    def grid_shape(self) -> tuple[int, int]:
        """(rows along y, columns along x) of the elevation grid."""
        return (
            round(self.size[1] / self.resolution) + 1,
            round(self.size[0] / self.resolution) + 1,
        )

    def heights(self) -> np.ndarray:
        """Elevation grid (m above the floor), shape :attr:`grid_shape`; row r at
        ``y = center_y - size_y / 2 + r * size_y / (rows - 1)``, column c likewise along x (MuJoCo's
        layout)."""
        import cv2

        rows, cols = self.grid_shape
        rng = np.random.default_rng(self.seed)
        # white noise on a coarse grid (one sample per feature length), smoothed by bicubic upsampling
        coarse_r = max(2, math.ceil(self.size[1] / self.feature) + 1)
        coarse_c = max(2, math.ceil(self.size[0] / self.feature) + 1)
        coarse = rng.uniform(0.0, 1.0, (coarse_r, coarse_c)).astype(np.float32)
        fine = cv2.resize(coarse, (cols, rows), interpolation=cv2.INTER_CUBIC).astype(float)
        fine -= fine.min()
        fine /= max(float(fine.max()), 1e-9)
        y = np.linspace(0.0, self.size[1], rows)[:, None]
        x = np.linspace(0.0, self.size[0], cols)[None, :]
        if self.edge > 0:
            dist = np.minimum(np.minimum(x, self.size[0] - x), np.minimum(y, self.size[1] - y))
            ramp = np.clip(dist / self.edge, 0.0, 1.0)
            fine *= 0.5 - 0.5 * np.cos(np.pi * ramp)  # smooth ramp from 0 at the border to 1 inside
        # MuJoCo rescales elevation data to [0, 1]: give it exactly that range
        return self.max_height * fine / max(float(fine.max()), 1e-9)

    def height_at(self, x: np.ndarray | float, y: np.ndarray | float) -> np.ndarray:
        """Surface height (m) at world (x, y) as MuJoCo draws it (two triangles per grid cell, split along the
        diagonal from (c, r) to (c+1, r+1)); 0 outside the patch."""
        h = self.heights()
        rows, cols = h.shape
        u = (np.asarray(x, dtype=float) - self.center[0] + 0.5 * self.size[0]) / self.size[0] * (cols - 1)
        v = (np.asarray(y, dtype=float) - self.center[1] + 0.5 * self.size[1]) / self.size[1] * (rows - 1)
        inside = (u >= 0) & (u <= cols - 1) & (v >= 0) & (v <= rows - 1)
        c = np.clip(np.floor(u).astype(int), 0, cols - 2)
        r = np.clip(np.floor(v).astype(int), 0, rows - 2)
        fu, fv = np.clip(u - c, 0, 1), np.clip(v - r, 0, 1)
        h00, h01, h10, h11 = h[r, c], h[r, c + 1], h[r + 1, c], h[r + 1, c + 1]
        lower = fu >= fv  # triangle (00, 01, 11) below the diagonal, else (00, 10, 11)
        z = np.where(
            lower, h00 + fu * (h01 - h00) + fv * (h11 - h01), h00 + fv * (h10 - h00) + fu * (h11 - h10)
        )
        return np.where(inside, z, 0.0)


@dataclass(frozen=True)
class SceneSpec:
    """Everything a scene file adds to the robot's own scene. ``name`` ``flat`` with nothing in it is the
    robot's scene unchanged."""

    name: str = "flat"
    description: str = ""
    markers: tuple[MarkerSpec, ...] = ()
    boxes: tuple[BoxSpec, ...] = ()
    heightfield: HeightfieldSpec | None = None
    source: Path | None = field(default=None, compare=False)

    @property
    def empty(self) -> bool:
        """Adds nothing to the model."""
        return not self.markers and not self.boxes and self.heightfield is None

    def marker(self, dictionary: str, marker_id: int) -> MarkerSpec:
        """The scene's marker with this dictionary and id (:class:`SceneError` if there is none)."""
        for m in self.markers:
            if m.dictionary == dictionary and m.id == marker_id:
                return m
        raise SceneError(f"scene '{self.name}' has no marker {dictionary} id {marker_id}")


def scene_from_dict(data: Any, where: str = "scene") -> SceneSpec:
    """Validate a parsed scene file (see the module docstring); unknown keys are an error."""
    if data is None:
        data = {}
    data = _check_keys(data, {"name", "description", "markers", "boxes", "heightfield"}, set(), where)
    markers = []
    seen: set[tuple[str, int]] = set()
    for i, m in enumerate(data.get("markers") or []):
        w = f"{where}: markers[{i}]"
        m = _check_keys(
            m, {"dictionary", "id", "size", "position", "rpy", "border"}, {"dictionary", "id", "size"}, w
        )
        if isinstance(m["id"], bool) or not isinstance(m["id"], int):
            raise SceneError(f"{w}: id must be an integer, got {m['id']!r}")
        try:
            size, border = float(m["size"]), float(m.get("border", 2.0))
        except (TypeError, ValueError):
            raise SceneError(f"{w}: size and border must be numbers") from None
        if not (math.isfinite(size) and 0.01 <= size <= 5.0) or not (
            math.isfinite(border) and 0.5 <= border <= 4
        ):
            raise SceneError(f"{w}: size must be in [0.01, 5] m and border in [0.5, 4] cells")
        spec = MarkerSpec(
            dictionary=str(m["dictionary"]),
            id=m["id"],
            size=size,
            position=_vector(m.get("position", (0, 0, 0)), 3, f"{w}.position"),  # type: ignore[arg-type]
            rpy=_vector(m.get("rpy", (0, 0, 0)), 3, f"{w}.rpy"),  # type: ignore[arg-type]
            border=border,
        )
        marker_image(spec.dictionary, spec.id, pixels_per_cell=1)  # validates dictionary and id
        if (spec.dictionary, spec.id) in seen:
            raise SceneError(f"{w}: marker {spec.dictionary} id {spec.id} listed twice")
        seen.add((spec.dictionary, spec.id))
        markers.append(spec)
    boxes = []
    names: set[str] = set()
    for i, b in enumerate(data.get("boxes") or []):
        w = f"{where}: boxes[{i}]"
        b = _check_keys(b, {"name", "size", "position", "rpy", "rgba"}, {"name", "size", "position"}, w)
        box = BoxSpec(
            name=str(b["name"]),
            size=_vector(b["size"], 3, f"{w}.size"),  # type: ignore[arg-type]
            position=_vector(b["position"], 3, f"{w}.position"),  # type: ignore[arg-type]
            rpy=_vector(b.get("rpy", (0, 0, 0)), 3, f"{w}.rpy"),  # type: ignore[arg-type]
            rgba=_vector(b.get("rgba", (0.6, 0.45, 0.3, 1.0)), 4, f"{w}.rgba"),  # type: ignore[arg-type]
        )
        if min(box.size) <= 0 or not re.fullmatch(r"[A-Za-z0-9_]+", box.name) or box.name in names:
            raise SceneError(f"{w}: needs a unique name of letters, digits, '_' and a size > 0")
        names.add(box.name)
        boxes.append(box)
    hfield = None
    if data.get("heightfield") is not None:
        w = f"{where}: heightfield"
        h = _check_keys(
            data["heightfield"],
            {"center", "size", "max_height", "resolution", "feature", "edge", "seed"},
            {"center", "size"},
            w,
        )
        seed = h.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise SceneError(f"{w}: seed must be an integer >= 0")
        try:
            hfield = HeightfieldSpec(
                center=_vector(h["center"], 2, f"{w}.center"),  # type: ignore[arg-type]
                size=_vector(h["size"], 2, f"{w}.size"),  # type: ignore[arg-type]
                max_height=float(h.get("max_height", 0.08)),
                resolution=float(h.get("resolution", 0.01)),
                feature=float(h.get("feature", 0.25)),
                edge=float(h.get("edge", 0.1)),
                seed=seed,
            )
        except (TypeError, ValueError) as exc:
            if isinstance(exc, SceneError):
                raise
            raise SceneError(f"{w}: malformed ({exc})") from None
    return SceneSpec(
        name=str(data.get("name", "unnamed")),
        description=str(data.get("description", "")),
        markers=tuple(markers),
        boxes=tuple(boxes),
        heightfield=hfield,
    )


def _scene_dirs() -> list[Path]:
    here = Path(__file__).resolve().parents[2]
    dirs = [here / "config" / "scenes"]
    try:  # full ROS 2 install / colcon workspace
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory("humanoid_stack")) / "config" / "scenes")
    except Exception:
        pass
    dirs.append(Path(sys.prefix) / "share" / "humanoid_stack" / "config" / "scenes")
    return dirs


def known_scenes() -> list[str]:
    """Names of the scene files found (``config/scenes/*.yaml``)."""
    return sorted({p.stem for d in _scene_dirs() if d.is_dir() for p in d.glob("*.yaml")})


def load_scene(name: str) -> SceneSpec:
    """Load a scene by name (``markers``, ``terrain``, ...; ``flat``/``none``/``""``: the robot's own
    scene) or by YAML path."""
    if name.strip().lower() in ("", "none", "flat"):
        return SceneSpec()
    if name.endswith((".yaml", ".yml")) or "/" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise SceneError(f"scene file not found: {path}")
    else:
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
            raise SceneError(f"invalid scene name '{name}'")
        found = [d / f"{name}.yaml" for d in _scene_dirs() if (d / f"{name}.yaml").is_file()]
        if not found:
            raise SceneError(f"unknown scene '{name}' (known: flat, {', '.join(known_scenes())})")
        path = found[0]
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SceneError(f"{path}: invalid YAML: {exc}") from None
    scene = scene_from_dict(data, str(path))
    return SceneSpec(scene.name, scene.description, scene.markers, scene.boxes, scene.heightfield, path)


def apply_scene(spec: Any, scene: SceneSpec, pixels_per_cell: int = 16) -> None:
    """Add ``scene``'s markers, boxes and heightfield to a ``mujoco.MjSpec`` before it is compiled.

    Markers: a static body ``marker_<dict>_<id>`` at the marker pose holding a textured plane quad (group
    :data:`MARKER_GROUP`, no collisions) :data:`MARKER_LIFT` in front of the marker plane; the texture is
    generated with ``cv2.aruco`` in memory (nothing written to disk). Boxes and the heightfield are
    collision geoms of group :data:`TERRAIN_GROUP` with the floor's contact parameters.
    """
    import mujoco

    floor = next((g for g in spec.worldbody.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE), None)
    contact: dict[str, Any] = {}
    if floor is not None:
        contact = {
            "friction": list(floor.friction),
            "solref": list(floor.solref),
            "solimp": list(floor.solimp),
        }
    for m in scene.markers:
        image = marker_image(m.dictionary, m.id, pixels_per_cell, m.border)
        rgb = np.ascontiguousarray(np.repeat(image[:, :, None], 3, axis=2))
        tex_name = f"{m.body_name}_texture"
        texture = spec.add_texture(
            name=tex_name,
            type=mujoco.mjtTexture.mjTEXTURE_2D,
            width=rgb.shape[1],
            height=rgb.shape[0],
            nchannel=3,
        )
        texture.data = rgb.tobytes()
        material = spec.add_material(name=f"{m.body_name}_material", texuniform=False, texrepeat=[1, 1])
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex_name
        material.specular, material.shininess, material.reflectance = 0.0, 0.0, 0.0
        cells = aruco_dictionary(m.dictionary).markerSize + 2
        half = 0.5 * m.size * (cells + 2 * m.border) / cells
        body = spec.worldbody.add_body(
            name=m.body_name, pos=list(m.position), quat=list(matrix_to_quat_wxyz(m.rotation))
        )
        body.add_geom(
            name=f"{m.body_name}_quad",
            type=mujoco.mjtGeom.mjGEOM_PLANE,
            size=[half, half, 0.01],
            pos=[0.0, 0.0, MARKER_LIFT],
            material=f"{m.body_name}_material",
            contype=0,
            conaffinity=0,
            group=MARKER_GROUP,
        )
    for b in scene.boxes:
        spec.worldbody.add_geom(
            name=f"box_{b.name}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.5 * v for v in b.size],
            pos=list(b.position),
            quat=list(matrix_to_quat_wxyz(rpy_to_matrix(b.rpy))),
            rgba=list(b.rgba),
            group=TERRAIN_GROUP,
            **contact,
        )
    if scene.heightfield is not None:
        h = scene.heightfield
        grid = h.heights()
        spec.add_hfield(
            name="terrain",
            size=[0.5 * h.size[0], 0.5 * h.size[1], h.max_height, 0.05],
            nrow=grid.shape[0],
            ncol=grid.shape[1],
            userdata=list((grid / h.max_height).astype(np.float32).ravel()),
        )
        spec.add_material(name="terrain_material", rgba=[0.55, 0.5, 0.42, 1.0], specular=0.1, shininess=0.1)
        spec.worldbody.add_geom(
            name="terrain",
            type=mujoco.mjtGeom.mjGEOM_HFIELD,
            hfieldname="terrain",
            pos=[h.center[0], h.center[1], 0.0],
            material="terrain_material",
            group=TERRAIN_GROUP,
            **contact,
        )
