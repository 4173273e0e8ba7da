"""The G1's ``unitree_hg`` messages straight to and from their DDS wire bytes with numpy, and raw DDS channels
that hand those bytes to CycloneDDS without its Python IDL machinery.

Wire format: XCDR1 (classic CDR), little-endian, a 4-byte encapsulation header ``00 01 00 00`` (CDR_LE), then
the fields in declaration order, each primitive aligned to its own size relative to the end of the header,
padding bytes zero, the whole padded to a multiple of 4 (as ``cyclonedds.pub.DataWriter.write`` does). For the
all-fixed-size ``LowCmd_`` / ``LowState_`` this is the C layout of :mod:`unitree_hg` with its padding moved: a
nested struct is not aligned as a whole in CDR, only its first primitive (``LowCmd_``'s first ``MotorCmd_``
starts at payload byte 2, not 4). The payload is 1000 bytes for ``LowCmd_`` and 2088 for ``LowState_``.

:class:`CdrCodec` precomputes, once per message type, which C-layout byte goes to which CDR byte and encodes /
decodes with one numpy gather into preallocated buffers (a few microseconds) instead of building the SDK's
IDL objects (35 ``MotorCmd_`` / ``MotorState_`` dataclasses) and running CycloneDDS's pure-Python serialiser
(0.3-0.5 ms per message here). The C-layout bytes it decodes into have zero padding, so the message CRC
(:func:`unitree_hg.message_crc`) is computed on them directly. ``test/test_link_codec.py`` checks it byte for
byte against the SDK's own ``serialize()`` / ``deserialize()``.

:class:`RawWriter` / :class:`RawReader`: a CycloneDDS topic of the SDK's own IDL class (so type name and type
information match the robot's and discovery is unchanged) with a writer that sends pre-serialised bytes
(``cyclonedds._clayer.ddspy_write``, what ``DataWriter.write`` calls after serialising) and a reader whose
listener takes the raw bytes (``ddspy_take``, what ``DataReader.take`` calls before deserialising). Both
run on the participant of the SDK's channel factory (:func:`unitree_dds.init_channels` first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from humanoid_control.hardware.unitree_hg import (
    LOWCMD_DTYPE,
    LOWSTATE_DTYPE,
    UnitreeMessageError,
    message_crc,
)

CDR_LE_HEADER = b"\x00\x01\x00\x00"


def _leaves(dtype: np.dtype, base: int, out: list[tuple[int, int]]) -> None:
    """``(C byte offset, size)`` of every primitive of ``dtype`` in declaration (= offset) order."""
    if dtype.fields is not None:
        for sub, offset, *_ in sorted(dtype.fields.values(), key=lambda f: f[1]):
            _leaves(sub, base + offset, out)
    elif dtype.subdtype is not None:
        item, shape = dtype.subdtype
        for k in range(int(np.prod(shape))):
            _leaves(item, base + k * item.itemsize, out)
    else:
        out.append((base, dtype.itemsize))


def cdr_byte_map(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, int]:
    """Index arrays ``(c_index, cdr_index)`` of equal length: C-layout byte ``c_index[k]`` of a record of
    ``dtype`` is payload byte ``cdr_index[k]`` of its XCDR1 serialisation (after the header); and the payload
    size. Primitives are aligned to their size (all fields here are 1, 2 or 4 bytes)."""
    leaves: list[tuple[int, int]] = []
    _leaves(dtype, 0, leaves)
    c_idx: list[int] = []
    cdr_idx: list[int] = []
    pos = 0
    for offset, size in leaves:
        pos = (pos + size - 1) // size * size
        c_idx.extend(range(offset, offset + size))
        cdr_idx.extend(range(pos, pos + size))
        pos += size
    return np.asarray(c_idx, dtype=np.intp), np.asarray(cdr_idx, dtype=np.intp), pos


def _raw(record: np.ndarray) -> np.ndarray:
    """The bytes of a structured record as a uint8 array (a view where the record is contiguous)."""
    return np.ascontiguousarray(np.asarray(record).reshape(1)).view(np.uint8)


class CdrCodec:
    """Record (numpy structured scalar of ``dtype``, C layout) <-> serialised sample bytes (header + CDR).

    One codec per thread: it reuses its buffers (the returned ``bytes`` and records are fresh objects)."""

    def __init__(self, dtype: np.dtype, name: str) -> None:
        self.dtype = dtype
        self.name = name
        self._c_idx, cdr_idx, payload = cdr_byte_map(dtype)
        self._wire_idx = cdr_idx + len(CDR_LE_HEADER)
        self.wire_size = len(CDR_LE_HEADER) + (payload + 3) // 4 * 4
        self._wire = np.zeros(self.wire_size, dtype=np.uint8)
        self._wire[: len(CDR_LE_HEADER)] = np.frombuffer(CDR_LE_HEADER, dtype=np.uint8)
        self._c = np.zeros(dtype.itemsize, dtype=np.uint8)  # padding stays zero: only leaf bytes are written
        if payload % 4 or dtype.fields is None or dtype.fields["crc"][1] != dtype.itemsize - 4:
            raise ValueError(f"{name}: a u32 crc must end both the C layout and the CDR payload")

    def c_bytes(self, record: np.ndarray) -> np.ndarray:
        """``record``'s C-layout bytes with zero padding (uint8 array; valid until the next call)."""
        self._c[self._c_idx] = _raw(record)[self._c_idx]
        return self._c

    def encode(self, record: np.ndarray) -> bytes:
        """Serialised sample of ``record`` (its ``crc`` field as it is: seal it first)."""
        self._wire[self._wire_idx] = _raw(record)[self._c_idx]
        return self._wire.tobytes()

    def encode_sealed(self, record: np.ndarray) -> tuple[bytes, int]:
        """Serialised sample of ``record`` with its CRC computed and written (into ``record`` too), and the
        CRC."""
        c = self.c_bytes(record)
        crc = message_crc(c.data)
        record["crc"] = crc
        self._wire[self._wire_idx] = c[self._c_idx]
        self._wire[-4:] = np.frombuffer(int(crc).to_bytes(4, "little"), dtype=np.uint8)  # crc: last field
        return self._wire.tobytes(), crc

    def decode_c(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """C-layout bytes (zero padding; a fresh uint8 array) of the serialised sample ``data``.

        Raises:
            UnitreeMessageError: wrong size or not little-endian XCDR1."""
        wire = np.frombuffer(data, dtype=np.uint8)
        if wire.size < self.wire_size or wire.size > self.wire_size + 3:
            raise UnitreeMessageError(f"{self.name} sample is {self.wire_size} bytes, got {wire.size}")
        if bytes(wire[:2]) != CDR_LE_HEADER[:2]:
            raise UnitreeMessageError(
                f"{self.name} sample is not little-endian XCDR1 (header {bytes(wire[:4]).hex()})"
            )
        c = np.zeros(self.dtype.itemsize, dtype=np.uint8)
        c[self._c_idx] = wire[self._wire_idx]
        return c

    def decode(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Record (writable, owns its bytes) of the serialised sample ``data``."""
        return np.frombuffer(self.decode_c(data), dtype=self.dtype).reshape(())

    def decode_checked(self, data: bytes | bytearray | memoryview) -> tuple[np.ndarray, bool]:
        """Record of ``data`` and whether its ``crc`` field is the CRC of its C layout."""
        c = self.decode_c(data)
        rec = np.frombuffer(c, dtype=self.dtype).reshape(())
        return rec, message_crc(c.data) == int.from_bytes(c[-4:].tobytes(), "little")


def lowcmd_codec() -> CdrCodec:
    """A codec of ``LowCmd_`` (1004-byte samples)."""
    return CdrCodec(LOWCMD_DTYPE, "LowCmd_")


def lowstate_codec() -> CdrCodec:
    """A codec of ``LowState_`` (2092-byte samples)."""
    return CdrCodec(LOWSTATE_DTYPE, "LowState_")


# ------------------------------------------------------------------------------------------- raw channels
def _participant() -> Any:
    """The SDK channel factory's domain participant (:func:`unitree_dds.init_channels` must have run)."""
    from unitree_sdk2py.core import channel  # type: ignore[import-not-found]

    participant = getattr(channel.ChannelFactory, "_ChannelFactory__participant", None)
    if participant is None:
        raise RuntimeError("the Unitree SDK's channels are not initialised (unitree_dds.init_channels)")
    return participant


class RawWriter:
    """DDS writer of pre-serialised samples on ``topic`` (type: the SDK's IDL class ``msg_type``)."""

    def __init__(self, topic: str, msg_type: Any) -> None:
        from cyclonedds._clayer import ddspy_write  # type: ignore[import-not-found]
        from cyclonedds.pub import DataWriter
        from cyclonedds.topic import Topic

        participant = _participant()
        self._topic = Topic(participant, topic, msg_type)
        self._writer: Any = DataWriter(participant, self._topic)
        self._write = ddspy_write
        self._ref = self._writer._ref

    def write(self, data: bytes) -> None:
        """Send one serialised sample (header + CDR, a multiple of 4 bytes)."""
        ret = self._write(self._ref, data)
        if ret < 0:
            from cyclonedds.core import DDSException

            raise DDSException(ret, "Occurred while writing a raw sample")

    def close(self) -> None:
        """Delete the writer (no sample goes out afterwards)."""
        self._writer = None


class RawReader:
    """DDS reader on ``topic`` (type: the SDK's IDL class ``msg_type``) calling ``handler(data)`` with each
    valid sample's serialised bytes, on CycloneDDS's listener thread; without a handler, poll :meth:`take`."""

    def __init__(self, topic: str, msg_type: Any, handler: Callable[[bytes], None] | None = None) -> None:
        from cyclonedds._clayer import ddspy_take  # type: ignore[import-not-found]
        from cyclonedds.core import Listener
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        participant = _participant()
        self._take = ddspy_take
        self._handler = handler
        self._topic = Topic(participant, topic, msg_type)
        listener = Listener(on_data_available=self._on_data) if handler is not None else None
        self._reader: Any = DataReader(participant, self._topic, listener=listener)
        self._ref = self._reader._ref

    def take(self, n: int = 1) -> list[bytes]:
        """Up to ``n`` waiting samples' bytes (non-blocking; invalid samples skipped)."""
        ret = self._take(self._ref, n)
        if isinstance(ret, int):
            from cyclonedds.core import DDSException

            raise DDSException(ret, "Occurred while taking raw samples")
        return [data for data, info in ret if info.valid_data]

    def _on_data(self, _reader: Any) -> None:
        handler = self._handler
        if handler is None:
            return
        try:
            samples = self.take(8)
        except Exception:  # a DDS error on CycloneDDS's thread: the sample is lost, as the SDK's reader does
            return
        for data in samples:
            handler(data)

    def close(self) -> None:
        """Stop calling the handler and delete the reader."""
        self._handler = None
        self._reader = None


__all__ = [
    "CDR_LE_HEADER",
    "CdrCodec",
    "RawReader",
    "RawWriter",
    "cdr_byte_map",
    "lowcmd_codec",
    "lowstate_codec",
]
