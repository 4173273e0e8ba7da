"""MIT-mode CAN frames for all the actuators of a bus at once: the codec of :mod:`mit_can` vectorised with
numpy (bytes identical to the per-frame codec, clamping and the special-frame guard included), and
:class:`BatchHostBus`, the host's end of one bus sending and receiving a whole period's frames.

Codec (per actuator ``i``, actuator frame, units as in :mod:`mit_can`): each field's code is
``rint((clip(x, lo, hi) - lo) * (2^bits - 1) / (hi - lo))`` with round-half-to-even as Python's ``round``, the
same float64 operations in the same order as :func:`mit_can.float_to_uint`, so the frames are byte for byte
those of :func:`mit_can.encode_command` (``test/test_link_codec.py`` checks it on random and boundary values);
replies decode as :func:`mit_can.decode_reply` does (``lo + code * (hi - lo) / (2^bits - 1)``). NaN is refused
(:class:`mit_can.MitCodecError`) before anything is sent.

Transport: on python-can's ``virtual`` interface (emulation, tests) :class:`BatchHostBus` puts its frames
straight into the receive queues of the other ends of the channel and takes replies from its own queue, which
is what ``VirtualBus.send`` / ``recv`` do minus a ``deepcopy`` of every message (each frame here is a fresh
``can.Message``), a period's frames appended under the queue's lock with one wake-up of the receiver instead
of one per frame; a closed bus is reported as an error, as ``VirtualBus`` raises. On any other interface
(SocketCAN) it calls ``bus.send`` / ``bus.recv`` per frame.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from humanoid_control.hardware.hardware_config import CanJoint
from humanoid_control.hardware.mit_can import (
    KD_BITS,
    KP_BITS,
    P_BITS,
    REPLY_LENGTH,
    REPLY_LENGTH_EXTENDED,
    T_BITS,
    V_BITS,
    MitCodecError,
)

#: columns of the clamped-flags matrix returned by :meth:`MitBatchCodec.encode`
CLAMP_FIELDS = ("position", "velocity", "kp", "kd", "torque", "velocity(special-frame)")


_BITS = np.array([[P_BITS], [V_BITS], [KP_BITS], [KD_BITS], [T_BITS]])
_TOP = (1 << _BITS) - 1  # (5, 1): the largest code of each field
# a command frame is one big-endian 64-bit word: p[63:48] v[47:36] kp[35:24] kd[23:12] t[11:0]
_SHIFT = np.array([[48], [36], [24], [12], [0]], dtype=np.uint64)
_SPECIAL_MIN = np.uint64(0xFFFFFFFFFFFFFFFC)  # ...FC, FD, FE are enter / exit / zero; ...FF is a command
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
# a reply's bytes 1..5 hold p (16 bits), v (12), t (12): shifts in the big-endian word of bytes 0..7
_REPLY_SHIFT = np.array([[40], [28], [16]], dtype=np.uint64)
_REPLY_MASK = np.array([[0xFFFF], [0xFFF], [0xFFF]], dtype=np.uint64)
_REPLY_ROWS = [0, 1, 4]  # p, v, t among the five fields


def _pad8(frames: np.ndarray) -> np.ndarray:
    """Rows of 6 (or 7) bytes padded with zeros to 8."""
    out = np.zeros((len(frames), 8), dtype=np.uint8)
    out[:, : frames.shape[1]] = frames
    return out


class MitBatchCodec:
    """The codec of the actuators ``joints`` (in that order): ranges, directions and offsets as arrays."""

    def __init__(self, joints: Sequence[CanJoint]) -> None:
        self.joints = tuple(joints)
        self.can_ids = np.array([j.can_id for j in joints], dtype=np.int64)
        self.direction = np.array([float(j.direction) for j in joints])
        self.offset = np.array([float(j.offset) for j in joints])
        fields = ("p", "v", "kp", "kd", "t")
        self.lo = np.array([[getattr(j.ranges, f"{f}_min") for j in joints] for f in fields])  # (5, n)
        self.hi = np.array([[getattr(j.ranges, f"{f}_max") for j in joints] for f in fields])
        self._span = self.hi - self.lo
        self._out = np.empty((5, len(self.joints)))

    def encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Command frames (n x 8 uint8) of actuator-frame values (5 x n: position rad, velocity rad/s, kp
        N m/rad, kd N m s/rad, torque N m) and the clamped flags (n x 6 bool, columns :data:`CLAMP_FIELDS`).

        Raises:
            MitCodecError: a NaN anywhere (nothing is encoded)."""
        x = np.asarray(values, dtype=np.float64)
        if np.isnan(x).any():
            raise MitCodecError("cannot encode NaN")
        lo, hi = self.lo, self.hi
        clamped = (x < lo) | (x > hi)
        codes = np.rint((np.minimum(np.maximum(x, lo), hi) - lo) * _TOP / self._span).astype(np.uint64)
        word = np.bitwise_or.reduce(codes << _SHIFT, axis=0)
        special = (word >= _SPECIAL_MIN) & (word != _ALL_ONES)
        if special.any():  # a frame equal to enter / exit / zero: velocity one code lower (encode_command)
            word[special] -= np.uint64(1 << 36)
        frames = word.astype(">u8").view(np.uint8).reshape(-1, 8)
        flags = np.empty((len(self.joints), len(CLAMP_FIELDS)), dtype=bool)
        flags[:, :5] = clamped.T
        flags[:, 5] = special
        return frames, flags

    def encode_joint(
        self, q: np.ndarray, dq: np.ndarray, kp: np.ndarray, kd: np.ndarray, tau: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode` of joint-space values (``CanJoint.to_motor`` applied to each)."""
        s, x = self.direction, self._out
        x[0] = s * np.asarray(q, float) + self.offset
        x[1] = s * np.asarray(dq, float)
        x[2] = kp
        x[3] = kd
        x[4] = s * np.asarray(tau, float)
        return self.encode(x)

    def decode_replies(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Actuator-frame position, velocity, torque (rad, rad/s, N m) of reply frames (n x >= 6 uint8, row
        ``i`` from actuator ``i``; :func:`mit_can.decode_reply`)."""
        rows = np.ascontiguousarray(frames[:, :8] if frames.shape[1] >= 8 else _pad8(frames), dtype=np.uint8)
        word = rows.view(">u8").reshape(1, -1).astype(np.uint64)
        codes = (word >> _REPLY_SHIFT) & _REPLY_MASK
        r = _REPLY_ROWS
        values = self.lo[r] + codes.astype(np.float64) * self._span[r] / _TOP[r]
        return values[0], values[1], values[2]

    def decode_joint(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint ``(q, dq, tau)`` of reply frames (``CanJoint.from_motor`` applied to each)."""
        p, v, t = self.decode_replies(frames)
        s = self.direction
        return s * (p - self.offset), s * v, s * t


def _virtual_bus(bus: Any) -> bool:
    """``bus`` is python-can's VirtualBus without filters or own-message reception (the fast path applies)."""
    try:
        from can.interfaces.virtual import VirtualBus
    except ImportError:  # pragma: no cover - python-can absent
        return False
    return (
        type(bus) is VirtualBus
        and not bus.receive_own_messages
        and getattr(bus, "_filters", None) is None
        and not bus.preserve_timestamps
    )


def clamped_fields(flags: np.ndarray, joints: Sequence[CanJoint]) -> dict[str, tuple[str, ...]]:
    """Joint name -> clamped fields (:data:`CLAMP_FIELDS`) of the frames whose flags row has any set."""
    if not flags.any():
        return {}
    return {
        joints[i].joint: tuple(name for name, on in zip(CLAMP_FIELDS, flags[i], strict=True) if on)
        for i in np.flatnonzero(flags.any(axis=1))
    }


def send_frames(bus: Any, ids: list[int], data: list[bytes], fast: bool | None = None) -> list[str]:
    """Send standard frames ``data[k]`` with arbitration ids ``ids[k]`` on ``bus``; the transport errors
    (never raised). ``fast``: python-can's ``virtual`` bus handled directly (default: detected), see the
    module docstring."""
    import can

    Message = can.Message
    errors: list[str] = []
    if fast is None:
        fast = _virtual_bus(bus)
    if not fast:
        for can_id, payload in zip(ids, data, strict=True):
            try:
                bus.send(Message(arbitration_id=can_id, data=payload, is_extended_id=False))
            except can.CanError as exc:
                errors.append(f"send to id {can_id} failed: {exc}")
        return errors
    if not bus._open:
        return [f"send to id {can_id} failed: the bus is closed" for can_id in ids]
    now = time.time()
    channel = bus.channel_id
    own = bus.queue
    for rx in list(bus.channel):
        if rx is own:
            continue
        msgs = [
            Message(timestamp=now, arbitration_id=can_id, data=payload, is_extended_id=False, is_rx=True,
                    channel=channel)
            for can_id, payload in zip(ids, data, strict=True)
        ]  # fmt: skip
        if rx.maxsize > 0:  # a bounded queue: one by one, as VirtualBus.send
            for can_id, msg in zip(ids, msgs, strict=True):
                try:
                    rx.put_nowait(msg)
                except queue.Full:
                    errors.append(f"send to id {can_id} failed: a receive queue is full")
            continue
        with rx.not_full:  # the frames of the period at once: what n put() calls do, one wake-up
            rx.queue.extend(msgs)
            rx.unfinished_tasks += len(msgs)
            rx.not_empty.notify(len(msgs))
    return errors


class BatchHostBus:
    """The host's end of one CAN bus carrying ``joints``: a period's frames sent and received in one go.

    Attributes:
        errors: transport errors and bad replies since the last send (never raised: the caller's watchdog
            acts on them).
    """

    def __init__(self, bus: Any, joints: Sequence[CanJoint]) -> None:
        import can

        self._can = can
        self.bus = bus
        self.joints = list(joints)
        self.can_ids = [j.can_id for j in self.joints]
        self._slot = {j.can_id: i for i, j in enumerate(self.joints)}
        if len(self._slot) != len(self.joints):
            raise ValueError("two joints share a CAN id on one bus")
        self.errors: list[str] = []
        self._fast = _virtual_bus(bus)
        self._buf = bytearray(len(self.joints) * REPLY_LENGTH_EXTENDED)  # reply rows, 8 bytes each
        self._replies = np.frombuffer(self._buf, dtype=np.uint8).reshape(
            len(self.joints), REPLY_LENGTH_EXTENDED
        )

    # ------------------------------------------------------------------ send
    def send_frames(self, frames: np.ndarray) -> None:
        """One command frame per joint (rows of ``frames``, n x 8 uint8, in :attr:`joints` order)."""
        self.errors = []
        raw = np.ascontiguousarray(frames, dtype=np.uint8).tobytes()
        self._send(self.can_ids, [raw[8 * k : 8 * k + 8] for k in range(len(self.can_ids))])

    def send_special(self, frame: bytes, can_ids: list[int] | None = None) -> None:
        """A special frame (enter / exit / zero) to ``can_ids`` (default: every actuator of the bus)."""
        self.errors = []
        ids = [j.can_id for j in self.joints] if can_ids is None else list(can_ids)
        self._send(ids, [bytes(frame)] * len(ids))

    def _send(self, ids: list[int], data: list[bytes]) -> None:
        self.errors.extend(send_frames(self.bus, ids, data, fast=self._fast))

    # ------------------------------------------------------------------ receive
    def receive_frames(
        self, timeout: float = 0.0, expected: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Replies received within ``timeout`` s, stopping once ``expected`` distinct actuators answered
        (default all): ``heard`` (bool per joint) and the reply rows (n x 8 uint8, :attr:`joints` order; the
        last reply of each actuator; rows not heard hold older bytes). Frames that do not decode are counted
        in :attr:`errors`."""
        n = len(self.joints)
        want = n if expected is None else expected
        heard = [False] * n
        count = 0
        buf, slots = self._buf, self._slot
        deadline = time.monotonic() + timeout
        while count < want:
            batch = self._recv(deadline)
            if not batch:
                break
            for message in batch:
                data = message.data
                slot = slots.get(data[0]) if len(data) else None
                if slot is None:
                    continue
                if len(data) not in (REPLY_LENGTH, REPLY_LENGTH_EXTENDED):
                    self.errors.append(
                        f"bad reply from id {data[0]}: reply frame must be 6 or 8 bytes, got {len(data)}"
                    )
                    continue
                buf[8 * slot : 8 * slot + len(data)] = data
                if not heard[slot]:
                    heard[slot] = True
                    count += 1
        return np.array(heard, dtype=bool), self._replies

    def _recv(self, deadline: float) -> list[Any]:
        """The frames waiting (the virtual fast path takes all of them at once), else the first to arrive
        before ``deadline``; empty at the deadline or on a receive error."""
        if not self._fast:
            try:
                message = self.bus.recv(timeout=max(deadline - time.monotonic(), 0.0))
            except self._can.CanError as exc:
                self.errors.append(f"receive failed: {exc}")
                return []
            return [] if message is None else [message]
        if not self.bus._open:
            self.errors.append("receive failed: the bus is closed")
            return []
        rx = self.bus.queue
        with rx.mutex:  # what repeated get_nowait() does, under one lock
            waiting = list(rx.queue)
            rx.queue.clear()
            if waiting:
                rx.not_full.notify(len(waiting))
        if waiting:
            return waiting
        left = deadline - time.monotonic()
        if left <= 0:
            return []
        try:
            return [rx.get(timeout=left)]
        except queue.Empty:
            return []


__all__ = ["CLAMP_FIELDS", "BatchHostBus", "MitBatchCodec", "clamped_fields", "send_frames"]
