"""sensor_msgs/Image fields <-> arrays: round trips and the refusal of corrupt frames."""

from __future__ import annotations

import numpy as np
import pytest

from humanoid_perception.errors import ImageFormatError
from humanoid_perception.images import decode_image, depth_in_metres, encode_image


@pytest.mark.parametrize(
    ("encoding", "shape", "dtype"),
    [
        ("rgb8", (4, 5, 3), np.uint8),
        ("mono8", (4, 5), np.uint8),
        ("32FC1", (4, 5), np.float32),
        ("16UC1", (4, 5), np.uint16),
        ("bgra8", (3, 2, 4), np.uint8),
    ],
)
def test_encode_decode_round_trip(encoding: str, shape: tuple, dtype: type) -> None:
    image = (np.arange(np.prod(shape)) % 200).reshape(shape).astype(dtype)
    width, height, step, data = encode_image(image, encoding)
    assert (width, height) == (shape[1], shape[0]) and len(data) == step * height
    np.testing.assert_array_equal(decode_image(encoding, width, height, step, data), image)


def test_rclpy_style_buffers_decode() -> None:
    import array

    image = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    for data in (array.array("B", image.tobytes()), list(image.tobytes()), memoryview(image.tobytes())):
        np.testing.assert_array_equal(decode_image("rgb8", 4, 2, 12, data), image)
    with pytest.raises(ImageFormatError, match="byte buffer"):
        decode_image("rgb8", 4, 2, 12, ["x"] * 24)


def test_padded_rows_are_skipped() -> None:
    image = np.arange(12, dtype=np.uint8).reshape(3, 4)
    padded = np.zeros((3, 8), np.uint8)
    padded[:, :4] = image
    np.testing.assert_array_equal(decode_image("mono8", 4, 3, 8, padded.tobytes()), image)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("yuv422", 4, 3, 8, bytes(24)), "unsupported encoding"),
        (("rgb8", 4, 3, 12, bytes(35)), "corrupt or truncated"),
        (("rgb8", 4, 3, 12, bytes(37)), "corrupt or truncated"),
        (("rgb8", 4, 3, 11, bytes(33)), "step 11 shorter"),
        (("mono8", 0, 3, 0, b""), "size"),
        (("32FC1", 2, 2, 8, bytes(16), True), "big-endian"),
    ],
)
def test_corrupt_frames_raise_image_format_error(args: tuple, message: str) -> None:
    with pytest.raises(ImageFormatError, match=message):
        decode_image(*args)


def test_encode_refuses_a_mismatched_array() -> None:
    with pytest.raises(ImageFormatError):
        encode_image(np.zeros((4, 5), np.float64), "32FC1")
    with pytest.raises(ImageFormatError):
        encode_image(np.zeros((4, 5, 3), np.uint8), "mono8")


def test_depth_in_metres_marks_invalid_pixels_zero() -> None:
    mm = np.array([[0, 1500], [65535, 20]], np.uint16)
    np.testing.assert_allclose(depth_in_metres(mm, "16UC1"), [[0.0, 1.5], [65.535, 0.02]], rtol=1e-6)
    m = np.array([[np.nan, 1.5], [np.inf, -2.0]], np.float32)
    np.testing.assert_array_equal(depth_in_metres(m), [[0.0, 1.5], [0.0, 0.0]])
    with pytest.raises(ImageFormatError):
        depth_in_metres(m, "rgb8")
    with pytest.raises(ImageFormatError):
        depth_in_metres(mm, "32FC1")
