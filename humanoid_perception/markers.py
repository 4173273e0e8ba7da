"""Fiducial marker detection (ArUco and AprilTag dictionaries of ``cv2.aruco``) and 6-DoF marker pose.

Per frame: ``cv2.aruco.ArucoDetector`` finds the markers' four corners (OpenCV's sub-pixel corner search,
then by default lines fitted to the square's four edges and intersected: :func:`refine_corners_by_edges`),
then each marker's pose comes from ``cv2.solvePnPGeneric`` with ``SOLVEPNP_IPPE_SQUARE`` (the exact
planar-square solution, both of its ambiguous solutions kept and the one with the lower reprojection error
taken), polished by Levenberg-Marquardt (``solvePnPRefineLM``) on the four corners.

Frames: the pose is ``T_optical_marker`` (4x4, marker frame -> camera optical frame; metres), the marker frame
being OpenCV's (origin at the centre of the black square, x right, y up in the marker image, z out of the
printed face; see :mod:`humanoid_control.hardware.scene`). Corners are pixels (u right, v down), in ArUco's
order: top-left, top-right, bottom-right, bottom-left of the marker image.

Bad input raises :class:`~humanoid_perception.errors.ImageFormatError` (wrong size, dtype or channel count)
or :class:`~humanoid_perception.errors.IntrinsicsError`, never a crash deep inside OpenCV.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from humanoid_control.hardware.scene import SceneError, aruco_dictionary
from humanoid_perception.camera import CameraIntrinsics
from humanoid_perception.errors import ImageFormatError, IntrinsicsError

CORNER_REFINEMENT = ("none", "subpix", "edges", "contour", "apriltag")


@dataclass(frozen=True)
class MarkerDetectorConfig:
    """Marker detector settings.

    Attributes:
        dictionary: ``cv2.aruco`` dictionary name (``DICT_APRILTAG_36h11``, ``DICT_4X4_50``, ...).
        marker_length_m: side of the black square (m) of every marker, unless ``marker_lengths`` names its id.
        marker_lengths: per-id side lengths (m).
        corner_refinement: ``edges`` (default: OpenCV's sub-pixel corner search, then lines fitted to the
            square's edges, :func:`refine_corners_by_edges`), ``subpix`` (the corner search alone),
            ``contour``, ``apriltag`` or ``none``.
        subpix_window_px: half size of the sub-pixel search window (px).
        refine_pose: polish the IPPE pose by Levenberg-Marquardt on the reprojection error.
        max_reprojection_error_px: observations whose RMS corner reprojection error is above are dropped.
        min_perimeter_px: smallest marker perimeter searched (px; smaller means farther markers, more cost).
    """

    dictionary: str = "DICT_APRILTAG_36h11"
    marker_length_m: float = 0.25
    marker_lengths: dict[int, float] = field(default_factory=dict)
    corner_refinement: str = "edges"
    subpix_window_px: int = 3
    refine_pose: bool = True
    max_reprojection_error_px: float = 2.0
    min_perimeter_px: float = 40.0

    def __post_init__(self) -> None:
        try:
            aruco_dictionary(self.dictionary)
        except SceneError as exc:
            raise ValueError(f"marker detector: {exc}") from None
        lengths = [self.marker_length_m, *self.marker_lengths.values()]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and 0.005 <= v <= 10.0 for v in lengths):
            raise ValueError(f"marker detector: marker lengths must be in [0.005, 10] m: {lengths}")
        if self.corner_refinement not in CORNER_REFINEMENT:
            raise ValueError(f"marker detector: corner_refinement must be one of {CORNER_REFINEMENT}")
        if not 1 <= self.subpix_window_px <= 20:
            raise ValueError("marker detector: subpix_window_px must be in [1, 20]")
        if not (self.max_reprojection_error_px > 0 and self.min_perimeter_px >= 8):
            raise ValueError("marker detector: max_reprojection_error_px must be > 0, min_perimeter_px >= 8")

    def length_of(self, marker_id: int) -> float:
        """Side of the black square (m) of marker ``marker_id``."""
        return float(self.marker_lengths.get(marker_id, self.marker_length_m))


@dataclass(frozen=True)
class MarkerObservation:
    """One detected marker.

    Attributes:
        id: marker id in the detector's dictionary.
        T_optical_marker: 4x4 pose of the marker frame in the camera optical frame (m).
        corners: (4, 2) pixel corners (top-left, top-right, bottom-right, bottom-left of the marker image).
        reprojection_error_px: RMS distance between the corners and the reprojected pose (px).
        ambiguity: reprojection error of IPPE's chosen solution over that of the other one (0..1; near 1 the
            orientation is ambiguous, typical of small, fronto-parallel markers).
        length_m: side of the black square used for the pose (m).
    """

    id: int
    T_optical_marker: np.ndarray
    corners: np.ndarray
    reprojection_error_px: float
    ambiguity: float = 0.0
    length_m: float = 0.0

    @property
    def position(self) -> np.ndarray:
        """Marker centre in the optical frame (m)."""
        return self.T_optical_marker[:3, 3]

    @property
    def distance(self) -> float:
        """Distance from the camera to the marker centre (m)."""
        return float(np.linalg.norm(self.position))


def to_gray(image: np.ndarray, intrinsics: CameraIntrinsics | None = None) -> np.ndarray:
    """8-bit grayscale of an 8-bit mono, RGB/BGR or RGBA/BGRA image (the channel order does not matter for
    black-and-white markers). :class:`ImageFormatError` for anything else or a size that does not match
    ``intrinsics``."""
    import cv2

    if not isinstance(image, np.ndarray):
        raise ImageFormatError(f"image: expected a numpy array, got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise ImageFormatError(f"image: expected 8-bit pixels (mono8, rgb8, bgr8), got dtype {image.dtype}")
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    if image.ndim == 2:
        gray = image
    elif image.ndim == 3 and image.shape[2] == 3:
        gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    elif image.ndim == 3 and image.shape[2] == 4:
        gray = cv2.cvtColor(image, cv2.COLOR_RGBA2GRAY)
    else:
        raise ImageFormatError(f"image: expected HxW, HxWx3 or HxWx4 pixels, got shape {image.shape}")
    if gray.shape[0] < 8 or gray.shape[1] < 8:
        raise ImageFormatError(f"image: {gray.shape[1]}x{gray.shape[0]} is too small")
    if intrinsics is not None:
        intrinsics.check_image(gray)
    return np.ascontiguousarray(gray)


def refine_corners_by_edges(gray: np.ndarray, quad: np.ndarray, cells: int) -> np.ndarray | None:
    """Corners as the intersections of lines fitted to the four outer edges of the black square.

    Along each edge (its middle 70 %), the intensity profile across the edge is sampled (bilinear) from
    inside to outside, over at most 0.7 cell (the black border is one cell wide, so no inner bit is crossed);
    the edge point is where the profile crosses half-way between its inside and outside levels. A line is
    fitted to each edge's points and adjacent lines are intersected. Unlike a corner search, this has no bias
    from the rounded tip of a blurred corner (which pulls corners inwards and makes a marker look farther
    away). Returns None (keep the input) when an edge has fewer than 4 clean crossings or a corner would move
    by more than 2 px.
    """
    import cv2

    centre = quad.mean(axis=0)
    lines = []
    for k in range(4):
        a, b = quad[k], quad[(k + 1) % 4]
        along = b - a
        length = float(np.linalg.norm(along))
        if length < 8.0:
            return None
        along /= length
        normal = np.array([along[1], -along[0]])
        if normal @ (0.5 * (a + b) - centre) < 0:
            normal = -normal  # outwards
        # cell size across this edge: distance to the centre spans cells / 2
        across = abs(float(normal @ (0.5 * (a + b) - centre))) * 2.0 / cells
        half = float(np.clip(0.7 * across, 1.0, 4.0))
        steps = np.linspace(-half, half, max(9, int(8 * half) + 1))
        ts = np.linspace(0.15, 0.85, max(6, int(length / 2)))
        base = a[None, :] + (ts * length)[:, None] * along[None, :]
        pts = base[:, None, :] + steps[None, :, None] * normal[None, None, :]
        prof = cv2.remap(
            gray, pts[..., 0].astype(np.float32), pts[..., 1].astype(np.float32), cv2.INTER_LINEAR
        ).astype(np.float64)
        lo, hi = prof[:, 0], prof[:, -1]
        level = 0.5 * (lo + hi)
        above = prof >= level[:, None]
        j = np.argmax(above, axis=1)  # first sample past half-way, from the inside
        ok = (hi - lo >= 30.0) & above.any(axis=1) & (j > 0)
        if np.count_nonzero(ok) < 4:
            return None
        rows, j = np.nonzero(ok)[0], j[ok]
        before, after = prof[rows, j - 1], prof[rows, j]
        f = (level[rows] - before) / np.maximum(after - before, 1e-9)
        offset = steps[j - 1] + f * (steps[j] - steps[j - 1])
        edge_points = base[rows] + offset[:, None] * normal[None, :]
        vx, vy, x0, y0 = cv2.fitLine(edge_points.astype(np.float32), cv2.DIST_HUBER, 0, 0.01, 0.01).ravel()
        lines.append((np.array([x0, y0], float), np.array([vx, vy], float)))
    out = np.empty((4, 2))
    for k in range(4):
        (p1, d1), (p2, d2) = lines[k - 1], lines[k]
        m = np.column_stack([d1, -d2])
        if abs(np.linalg.det(m)) < 1e-6:
            return None
        t = np.linalg.solve(m, p2 - p1)
        out[k] = p1 + t[0] * d1
    if np.max(np.linalg.norm(out - quad, axis=1)) > 2.0:
        return None
    return out


def marker_object_points(length: float) -> np.ndarray:
    """(4, 3) corners of a square marker of side ``length`` (m) in its own frame, in ArUco's corner order (the
    order ``SOLVEPNP_IPPE_SQUARE`` requires)."""
    h = 0.5 * length
    return np.array([[-h, h, 0.0], [h, h, 0.0], [h, -h, 0.0], [-h, -h, 0.0]])


class MarkerDetector:
    """Detect markers of one dictionary and estimate their 6-DoF poses (see the module docstring)."""

    def __init__(self, config: MarkerDetectorConfig | None = None) -> None:
        import cv2

        self.config = config or MarkerDetectorConfig()
        params = cv2.aruco.DetectorParameters()
        params.cornerRefinementMethod = {
            "none": cv2.aruco.CORNER_REFINE_NONE,
            "subpix": cv2.aruco.CORNER_REFINE_SUBPIX,
            "edges": cv2.aruco.CORNER_REFINE_SUBPIX,
            "contour": cv2.aruco.CORNER_REFINE_CONTOUR,
            "apriltag": cv2.aruco.CORNER_REFINE_APRILTAG,
        }[self.config.corner_refinement]
        params.cornerRefinementWinSize = int(self.config.subpix_window_px)
        params.cornerRefinementMaxIterations = 50
        params.cornerRefinementMinAccuracy = 0.01
        self._params = params
        self._dictionary = aruco_dictionary(self.config.dictionary)
        self._detector = cv2.aruco.ArucoDetector(self._dictionary, params)
        self._sized_for: tuple[int, int] | None = None

    def _size_parameters(self, shape: tuple[int, int]) -> None:
        """minMarkerPerimeterRate is relative to the image's larger side: keep the configured pixel size."""
        import cv2

        if self._sized_for == shape:
            return
        self._params.minMarkerPerimeterRate = self.config.min_perimeter_px / max(shape)
        self._detector = cv2.aruco.ArucoDetector(self._dictionary, self._params)
        self._sized_for = shape

    def detect(self, image: np.ndarray, intrinsics: CameraIntrinsics) -> list[MarkerObservation]:
        """Markers in ``image`` (8-bit mono, RGB or BGR; its size must match ``intrinsics``), sorted by id.

        Markers whose pose does not reproject within ``max_reprojection_error_px`` are left out.
        """
        import cv2

        if not isinstance(intrinsics, CameraIntrinsics):
            raise IntrinsicsError(f"detect: intrinsics missing or of type {type(intrinsics).__name__}")
        gray = to_gray(image, intrinsics)
        self._size_parameters(gray.shape)
        corners, ids, _rejected = self._detector.detectMarkers(gray)
        if ids is None or len(ids) == 0:
            return []
        out = []
        cells = self._dictionary.markerSize + 2
        for quad, marker_id in zip(corners, ids.reshape(-1), strict=True):
            quad = np.asarray(quad, dtype=np.float64).reshape(4, 2)
            if self.config.corner_refinement == "edges":
                refined = refine_corners_by_edges(gray, quad, cells)
                quad = quad if refined is None else refined
            obs = self._pose(quad, int(marker_id), intrinsics, cv2)
            if obs is not None and obs.reprojection_error_px <= self.config.max_reprojection_error_px:
                out.append(obs)
        return sorted(out, key=lambda o: o.id)

    def _pose(
        self, quad: np.ndarray, marker_id: int, intrinsics: CameraIntrinsics, cv2: object
    ) -> MarkerObservation | None:
        obj = marker_object_points(self.config.length_of(marker_id))
        K, D = intrinsics.K, intrinsics.D
        try:
            n, rvecs, tvecs, errors = cv2.solvePnPGeneric(  # type: ignore[attr-defined]
                obj,
                quad,
                K,
                D,
                flags=cv2.SOLVEPNP_IPPE_SQUARE,  # type: ignore[attr-defined]
            )
        except cv2.error:  # type: ignore[attr-defined]
            return None  # a degenerate quad: no pose
        if n == 0:
            return None
        errors = np.asarray(errors, dtype=float).reshape(-1)
        best = int(np.argmin(errors))
        ambiguity = float(errors[best] / errors[1 - best]) if n > 1 and errors[1 - best] > 0 else 0.0
        rvec, tvec = np.array(rvecs[best], dtype=float), np.array(tvecs[best], dtype=float)
        if self.config.refine_pose:
            rvec, tvec = cv2.solvePnPRefineLM(obj, quad, K, D, rvec, tvec)  # type: ignore[attr-defined]
        if tvec.reshape(-1)[2] <= 0:
            return None  # behind the camera: not a physical solution
        projected, _ = cv2.projectPoints(obj, rvec, tvec, K, D)  # type: ignore[attr-defined]
        rms = float(np.sqrt(np.mean(np.sum((projected.reshape(4, 2) - quad) ** 2, axis=1))))
        T = np.eye(4)
        T[:3, :3] = cv2.Rodrigues(rvec)[0]  # type: ignore[attr-defined]
        T[:3, 3] = tvec.reshape(-1)
        return MarkerObservation(marker_id, T, quad, rms, ambiguity, self.config.length_of(marker_id))


def draw_observations(
    image_rgb: np.ndarray, observations: list[MarkerObservation], intrinsics: CameraIntrinsics
) -> np.ndarray:
    """A copy of an RGB (or mono) image with each marker's outline, id, distance and pose axes drawn (x red,
    y green, z blue; half the marker side long)."""
    import cv2

    bgr = np.ascontiguousarray(image_rgb)
    bgr = cv2.cvtColor(bgr, cv2.COLOR_GRAY2BGR) if bgr.ndim == 2 else cv2.cvtColor(bgr, cv2.COLOR_RGB2BGR)
    for obs in observations:
        quad = obs.corners.reshape(-1, 1, 2).round().astype(np.int32)
        cv2.polylines(bgr, [quad], True, (0, 200, 255), 1, cv2.LINE_AA)
        rvec = cv2.Rodrigues(obs.T_optical_marker[:3, :3])[0]
        tvec = obs.T_optical_marker[:3, 3]
        cv2.drawFrameAxes(bgr, intrinsics.K, intrinsics.D, rvec, tvec, 0.5 * (obs.length_m or 0.1), 2)
        u, v = obs.corners.min(axis=0)
        label = f"id {obs.id}  {obs.distance:.2f} m"
        cv2.putText(
            bgr, label, (int(u), max(int(v) - 8, 12)), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 255, 255), 1
        )
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
