"""``tf2_msgs/msg/TFMessage`` serialized directly (pure: the standard library's ``struct``, no rclpy).

Building a TFMessage of 29 ``TransformStamped`` as rclpy message objects and converting it for publishing
costs about 1.5 ms of Python per message; packing the same bytes with one precompiled ``struct`` costs tens of
microseconds, and rclpy publishes bytes as a serialized message (``Publisher.publish(bytes)``).
``test/test_tf.py`` checks the bytes against ``rclpy.serialization.serialize_message`` of the same message.

Layout (CDR, little-endian, plain XCDR1 as rmw_fastrtps writes ROS 2 messages): the encapsulation header
``00 01 00 00``, then, aligned from the byte after it: ``uint32`` sequence length; per transform
``int32 sec``, ``uint32 nanosec``, the strings ``frame_id`` and ``child_frame_id`` (``uint32`` length
counting the NUL, the bytes, NUL; 4-aligned), the translation and the rotation (7 ``float64``, 8-aligned).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from humanoid_bringup.description.kinematic_tree import LinkTransform

__all__ = ["TfMessageWriter"]

ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR_LE, no options


class TfMessageWriter:
    """Serializes TFMessages whose transforms have the frame pairs of the first call, and any others (one
    precompiled layout per distinct list of ``(parent, child)`` frame pairs, kept)."""

    def __init__(self) -> None:
        self._layouts: dict[tuple[tuple[str, str], ...], tuple[struct.Struct, list[bytes]]] = {}

    @staticmethod
    def _layout(frames: Sequence[tuple[str, str]]) -> tuple[struct.Struct, list[bytes]]:
        fmt = ["<I"]
        offset = 4
        names: list[bytes] = []

        def align(n: int) -> None:
            nonlocal offset
            pad = -offset % n
            if pad:
                fmt.append(f"{pad}x")
                offset += pad

        for parent, child in frames:
            align(4)
            fmt.append("iI")
            offset += 8
            for name in (parent, child):
                raw = name.encode() + b"\x00"
                align(4)
                fmt.append(f"I{len(raw)}s")
                offset += 4 + len(raw)
                names.append(raw)
            align(8)
            fmt.append("7d")
            offset += 56
        return struct.Struct("".join(fmt)), names

    def serialize(self, transforms: Sequence[LinkTransform], sec: int, nanosec: int) -> bytes:
        """The serialized TFMessage of ``transforms``, each stamped ``sec``, ``nanosec``."""
        key = tuple((t.parent, t.child) for t in transforms)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = self._layout(key)
        packer, names = layout
        args: list[object] = [len(transforms)]
        for i, t in enumerate(transforms):
            parent, child = names[2 * i], names[2 * i + 1]
            args += (sec, nanosec, len(parent), parent, len(child), child, *t.translation, *t.rotation)
        return ENCAPSULATION + packer.pack(*args)
