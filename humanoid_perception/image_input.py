"""Checking and decoding camera frames as they come in ``sensor_msgs/Image`` fields (pure: no rclpy).

Every defect is an :class:`ImageError` with a reason the perception node reports on ``/diagnostics``; nothing
here raises anything else for bad input.
"""

from __future__ import annotations

import math

import numpy as np

#: encodings the detector takes (channels, dtype)
COLOR_ENCODINGS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}
DEPTH_ENCODINGS = {"32FC1": 4, "16UC1": 2}


class ImageError(ValueError):
    """A frame that cannot be used; ``kind`` names the defect for diagnostics (``encoding``, ``size``,
    ``corrupt``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _check_layout(
    encoding: str, width: int, height: int, step: int, data: bytes, bytes_per_pixel: int
) -> None:
    if width <= 0 or height <= 0:
        raise ImageError("size", f"{encoding} image of size {width}x{height}")
    if step < width * bytes_per_pixel:
        raise ImageError("corrupt", f"row step {step} < width {width} x {bytes_per_pixel} bytes")
    if len(data) != step * height:
        raise ImageError(
            "corrupt", f"{len(data)} data bytes for {height} rows of {step} bytes ({step * height} expected)"
        )


def decode_color(
    encoding: str,
    width: int,
    height: int,
    step: int,
    data: bytes,
    expected: tuple[int, int] | None = None,
) -> np.ndarray:
    """An 8-bit image as uint8 BGR (HxWx3) or gray (HxW) for OpenCV.

    Args:
        expected: (width, height) of the CameraInfo; a different image size is an error.
    """
    if encoding not in COLOR_ENCODINGS:
        raise ImageError(
            "encoding", f"unsupported encoding '{encoding}' (supported: {', '.join(COLOR_ENCODINGS)})"
        )
    channels = COLOR_ENCODINGS[encoding]
    _check_layout(encoding, width, height, step, data, channels)
    if expected is not None and (width, height) != tuple(expected):
        raise ImageError("size", f"image {width}x{height} but CameraInfo says {expected[0]}x{expected[1]}")
    rows = np.frombuffer(data, dtype=np.uint8).reshape(height, step)
    img = rows[:, : width * channels].reshape(height, width, channels)
    if encoding == "rgb8":
        return np.ascontiguousarray(img[:, :, ::-1])
    if encoding == "rgba8":
        return np.ascontiguousarray(img[:, :, 2::-1])
    if encoding == "bgra8":
        return np.ascontiguousarray(img[:, :, :3])
    if encoding == "mono8":
        return np.ascontiguousarray(img[:, :, 0])
    return np.ascontiguousarray(img)


def decode_depth(
    encoding: str,
    width: int,
    height: int,
    step: int,
    data: bytes,
    is_bigendian: bool = False,
    expected: tuple[int, int] | None = None,
) -> np.ndarray:
    """A depth image as float32 metres (HxW; NaN where invalid): ``32FC1`` (m) or ``16UC1`` (mm, 0 = none)."""
    if encoding not in DEPTH_ENCODINGS:
        raise ImageError(
            "encoding", f"unsupported depth encoding '{encoding}' (supported: {', '.join(DEPTH_ENCODINGS)})"
        )
    size = DEPTH_ENCODINGS[encoding]
    _check_layout(encoding, width, height, step, data, size)
    if step % size:
        raise ImageError("corrupt", f"depth row step {step} is not a multiple of {size}")
    if expected is not None and (width, height) != tuple(expected):
        raise ImageError("size", f"depth {width}x{height} but CameraInfo says {expected[0]}x{expected[1]}")
    order = ">" if is_bigendian else "<"
    if encoding == "32FC1":
        rows = np.frombuffer(data, dtype=f"{order}f4").reshape(height, step // 4)
        depth = rows[:, :width].astype(np.float32)
        depth[~np.isfinite(depth) | (depth <= 0.0)] = math.nan
        return depth
    rows16 = np.frombuffer(data, dtype=f"{order}u2").reshape(height, step // 2)
    depth = rows16[:, :width].astype(np.float32) * 1e-3
    depth[depth <= 0.0] = math.nan
    return depth
