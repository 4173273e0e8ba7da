"""Exceptions of the perception cores: what a node turns into a diagnostics error (and a dropped frame).

All derive from :class:`PerceptionInputError` (a ``ValueError``), so a node can catch one type::

    try:
        observations = detector.detect(image, intrinsics)
    except PerceptionInputError as exc:   # bad frame or calibration: report, drop the frame, keep running
        diagnostics.error(str(exc))
"""

from __future__ import annotations


class PerceptionInputError(ValueError):
    """An input to a perception core is unusable (the frame is dropped; the node keeps running)."""


class ImageFormatError(PerceptionInputError):
    """An image of the wrong size, dtype, channel count or encoding, or a buffer that does not match its
    declared size (a corrupt or truncated frame)."""


class IntrinsicsError(PerceptionInputError):
    """Camera intrinsics missing or invalid (non-finite or non-positive focal lengths, a principal point
    outside the image, a malformed distortion vector, a size that does not match the image)."""


class CameraConfigError(ValueError):
    """The robot configuration's ``camera`` section is malformed (unknown keys, out-of-range values)."""
