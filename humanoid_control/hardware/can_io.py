"""MIT-mode actuators over python-can: the host's side of one bus and an emulated bus's side.

python-can is optional (``pip install python-can``, or the ``hardware`` extra of this package): SocketCAN
(``interface="socketcan"``, channel ``can0``) on a robot, its in-process ``virtual`` interface in tests and
emulation. Importing this module works without it; opening a bus raises :class:`ImportError` saying what to
install.

- :class:`MitHostBus`: sends each actuator's command frame (or special frame) and collects the replies,
  decoded with the model ranges of each joint (:class:`~humanoid_control.hardware.hardware_config.CanJoint`).
- :class:`EmulatedBusNode`: serves a :class:`~humanoid_control.hardware.mit_emulator.MitBusEmulator` on a bus:
  every frame received is handed to the addressed actuator and its reply is sent back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from humanoid_control.hardware.hardware_config import CanJoint
from humanoid_control.hardware.mit_can import (
    MitCodecError,
    MitCommand,
    MitReply,
    decode_reply,
    encode_command,
)
from humanoid_control.hardware.mit_emulator import MitBusEmulator

try:  # optional dependency
    import can
except ImportError:  # pragma: no cover - exercised where python-can is absent
    can = None

HAVE_PYTHON_CAN = can is not None
INSTALL_HINT = "python-can is not installed: pip install python-can (or this package's 'hardware' extra)"


def open_bus(channel: str, interface: str = "socketcan", **kwargs: Any) -> Any:
    """A python-can bus on ``channel`` (``can0`` with SocketCAN; any name with ``interface="virtual"``)."""
    if can is None:
        raise ImportError(INSTALL_HINT)
    return can.Bus(channel=channel, interface=interface, **kwargs)


class MitHostBus:
    """The host's end of one CAN bus carrying the actuators of ``joints`` (all on this bus)."""

    def __init__(self, bus: Any, joints: list[CanJoint]) -> None:
        self.bus = bus
        self.joints = {j.can_id: j for j in joints}
        if len(self.joints) != len(joints):
            raise ValueError("two joints share a CAN id on one bus")
        self.clamped: dict[str, tuple[str, ...]] = {}  # joint -> fields clamped in the last send
        self.errors: list[str] = []  # transport errors since the last send

    def send_commands(self, commands: dict[int, MitCommand]) -> None:
        """Send one command frame per CAN id in ``commands``; clamped fields land in :attr:`clamped`,
        transport errors in :attr:`errors` (never raised: the caller's watchdog acts on them)."""
        self.clamped = {}
        self.errors = []
        for can_id, command in commands.items():
            joint = self.joints[can_id]
            encoded = encode_command(command, joint.ranges)
            if encoded.clamped:
                self.clamped[joint.joint] = encoded.clamped
            self._send(can_id, encoded.data)

    def send_special(self, frame: bytes, can_ids: list[int] | None = None) -> None:
        """Send a special frame (enter / exit / zero) to ``can_ids`` (all actuators of the bus by default)."""
        self.errors = []
        for can_id in self.joints if can_ids is None else can_ids:
            self._send(can_id, frame)

    def collect(self, timeout: float, expected: int | None = None) -> dict[int, MitReply]:
        """Replies received within ``timeout`` seconds, by CAN id (the last one of each), stopping early
        once ``expected`` distinct actuators answered (default: all). Frames that do not decode are
        counted as errors."""
        want = len(self.joints) if expected is None else expected
        replies: dict[int, MitReply] = {}
        deadline = time.monotonic() + timeout
        while len(replies) < want:
            left = deadline - time.monotonic()
            try:
                message = self.bus.recv(timeout=max(left, 0.0))
            except can.CanError as exc:  # the interface is down: the caller's watchdog acts on it
                self.errors.append(f"receive failed: {exc}")
                break
            if message is None:
                break
            data = bytes(message.data)
            joint = self.joints.get(data[0]) if data else None
            if joint is None:
                continue
            try:
                replies[joint.can_id] = decode_reply(data, joint.ranges)
            except MitCodecError as exc:
                self.errors.append(f"bad reply from id {joint.can_id}: {exc}")
        return replies

    def _send(self, can_id: int, data: bytes) -> None:
        try:
            self.bus.send(can.Message(arbitration_id=can_id, data=data, is_extended_id=False))
        except can.CanError as exc:
            self.errors.append(f"send to id {can_id} failed: {exc}")


class EmulatedBusNode:
    """Serves ``emulator`` on ``bus``: :meth:`poll` answers every pending frame. ``clock`` gives the time
    (s) handed to the actuators (monotonic by default; a simulator passes its own)."""

    def __init__(
        self, bus: Any, emulator: MitBusEmulator, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.bus = bus
        self.emulator = emulator
        self.clock = clock

    def poll(self, timeout: float = 0.0) -> int:
        """Handle the frames already received (waiting up to ``timeout`` s for the first); how many."""
        handled = 0
        message = self.bus.recv(timeout=timeout)
        while message is not None:
            if not message.is_extended_id and len(message.data) > 0:
                for arbitration_id, data in self.emulator.handle(
                    message.arbitration_id, bytes(message.data), self.clock()
                ):
                    self.bus.send(can.Message(arbitration_id=arbitration_id, data=data, is_extended_id=False))
                handled += 1
            message = self.bus.recv(timeout=0.0)
        return handled


__all__ = ["HAVE_PYTHON_CAN", "INSTALL_HINT", "EmulatedBusNode", "MitHostBus", "open_bus"]
