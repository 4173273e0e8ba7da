"""``sensor_msgs/Image`` fields <-> numpy arrays, checked (no rclpy: the node passes the message's fields).

Supported encodings (REP-118 / ``sensor_msgs/image_encodings``):

- colour and mono: ``rgb8``, ``bgr8``, ``rgba8``, ``bgra8``, ``mono8`` (``uint8``; HxWx3, HxWx4 or HxW);
- depth: ``32FC1`` (``float32`` metres) and ``16UC1`` (``uint16`` millimetres, RealSense's native format);
  :func:`depth_in_metres` turns either into ``float32`` metres with 0 (and NaN) meaning no measurement.

Anything else (an unknown encoding, a buffer that does not hold ``step * height`` bytes, a ``step`` shorter
than a row, a zero-sized image, a big-endian multi-byte image) raises
:class:`~humanoid_perception.errors.ImageFormatError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from humanoid_perception.errors import ImageFormatError

# encoding -> (numpy dtype, channels)
ENCODINGS: dict[str, tuple[np.dtype, int]] = {
    "rgb8": (np.dtype(np.uint8), 3),
    "bgr8": (np.dtype(np.uint8), 3),
    "rgba8": (np.dtype(np.uint8), 4),
    "bgra8": (np.dtype(np.uint8), 4),
    "mono8": (np.dtype(np.uint8), 1),
    "32FC1": (np.dtype(np.float32), 1),
    "16UC1": (np.dtype(np.uint16), 1),
}
COLOUR_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8", "mono8")
DEPTH_ENCODINGS = ("32FC1", "16UC1")
MAX_SIDE = 8192


def decode_image(
    encoding: str,
    width: int,
    height: int,
    step: int,
    data: Any,
    is_bigendian: bool = False,
) -> np.ndarray:
    """A ``sensor_msgs/Image``'s pixels as an array (a copy): HxW, HxWx3 or HxWx4 of the encoding's dtype."""
    if encoding not in ENCODINGS:
        raise ImageFormatError(
            f"image: unsupported encoding '{encoding}' (supported: {', '.join(ENCODINGS)})"
        )
    dtype, channels = ENCODINGS[encoding]
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        raise ImageFormatError(f"image: size {width}x{height} outside 1..{MAX_SIDE}")
    row = width * channels * dtype.itemsize
    if step < row:
        raise ImageFormatError(
            f"image: step {step} shorter than a row of {width} {encoding} pixels ({row} bytes)"
        )
    if is_bigendian and dtype.itemsize > 1:
        raise ImageFormatError(f"image: big-endian {encoding} is not supported")
    try:  # bytes, bytearray, array.array('B') (rclpy's uint8[]), memoryview, uint8 numpy arrays
        buf = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    except (TypeError, ValueError):
        try:
            buf = np.asarray(data, dtype=np.uint8).reshape(-1)
        except (TypeError, ValueError, OverflowError):
            raise ImageFormatError(
                f"image: data of type {type(data).__name__} is not a byte buffer"
            ) from None
    if buf.size != step * height:
        raise ImageFormatError(
            f"image: {buf.size} bytes of data for {height} rows of step {step} ({step * height} expected): "
            "corrupt or truncated frame"
        )
    rows = buf.reshape(height, step)[:, :row]
    pixels = np.ascontiguousarray(rows).view(dtype).reshape(height, width, channels)
    return pixels[:, :, 0].copy() if channels == 1 else pixels.copy()


def encode_image(image: np.ndarray, encoding: str) -> tuple[int, int, int, bytes]:
    """``(width, height, step, data)`` of a ``sensor_msgs/Image`` holding ``image`` in ``encoding`` (little
    endian); the array must already have the encoding's dtype and channel count."""
    if encoding not in ENCODINGS:
        raise ImageFormatError(f"image: unsupported encoding '{encoding}'")
    dtype, channels = ENCODINGS[encoding]
    if not isinstance(image, np.ndarray) or image.dtype != dtype:
        raise ImageFormatError(
            f"image: {encoding} needs a {dtype} array, got {getattr(image, 'dtype', type(image))}"
        )
    shape_ok = image.ndim == 2 if channels == 1 else image.ndim == 3 and image.shape[2] == channels
    if not shape_ok or image.size == 0:
        raise ImageFormatError(f"image: shape {image.shape} does not fit {encoding}")
    height, width = image.shape[:2]
    data = np.ascontiguousarray(image).astype(dtype.newbyteorder("<"), copy=False).tobytes()
    return width, height, width * channels * dtype.itemsize, data


def depth_in_metres(depth: np.ndarray, encoding: str = "32FC1") -> np.ndarray:
    """``float32`` metres from a decoded depth image (``32FC1`` metres or ``16UC1`` millimetres); invalid
    pixels (0, NaN, +-inf, negative) become 0."""
    if encoding not in DEPTH_ENCODINGS:
        raise ImageFormatError(f"depth: encoding '{encoding}' is not a depth encoding {DEPTH_ENCODINGS}")
    if not isinstance(depth, np.ndarray) or depth.ndim != 2 or depth.size == 0:
        raise ImageFormatError(
            f"depth: expected a non-empty HxW array, got {getattr(depth, 'shape', type(depth))}"
        )
    if encoding == "16UC1":
        if depth.dtype != np.uint16:
            raise ImageFormatError(f"depth: 16UC1 needs uint16 millimetres, got {depth.dtype}")
        return depth.astype(np.float32) * np.float32(0.001)
    if depth.dtype not in (np.float32, np.float64):
        raise ImageFormatError(f"depth: 32FC1 needs float metres, got {depth.dtype}")
    out = depth.astype(np.float32, copy=True)
    out[~np.isfinite(out) | (out < 0)] = 0.0
    return out
