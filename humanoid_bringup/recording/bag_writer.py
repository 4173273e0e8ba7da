"""The recorder's pure core: which topics to record, with which QoS, and the rosbag2 (MCAP) writer (no rclpy).

A bag is a rosbag2 folder (format version 9, MCAP storage, profile ``ros2``, schemas ``ros2msg``, channels
``cdr``) written by ``rosbags`` from the serialized bytes rclpy hands a raw subscription: messages are never
deserialized. The message definitions and type hashes (RIHS01) come from rosbags' typestore of the running
ROS 2 distribution (``ROS_DISTRO``, Kilted by default), or from the ``.msg`` file of a package installed
under an ament prefix; a type found in neither is refused (:class:`TopicTypeError`) and the node skips its
topic, reporting it.

Durability: rosbags keeps the current MCAP chunk in memory (up to 1 MiB) and writes ``metadata.yaml`` and the
MCAP summary only at :meth:`BagWriter.close`. :meth:`BagWriter.flush` closes the pending chunk and hands it
to the operating system; the writer flushes at least every ``flush_period_s`` (1 s) of wall time, so a
recorder killed with SIGKILL loses at most that much: the file then ends in whole chunks (and perhaps a cut
record), which :mod:`humanoid_bringup.recording.recovery` reads back and completes.

Errors: a bag path that exists and is not empty is refused unless ``overwrite`` (which only replaces a folder
holding bag files: ``metadata.yaml``, ``*.mcap``); a failed write (disk full, a file size limit) stops the
writer for good (:class:`BagWriteError`), and what reached the file stays there, recoverable.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosbags.interfaces import (
    Nodetype,
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

__all__ = [
    "BagPathError",
    "BagTopic",
    "BagWriteError",
    "BagWriter",
    "RecordingError",
    "TopicFilter",
    "TopicTypeError",
    "compatible",
    "message_definition",
    "prepare_bag_path",
    "subscription_qos",
    "typestore_for",
]

DEFAULT_DISTRO = "kilted"
FOREVER = QosTime(0x7FFFFFFF, 0xFFFFFFFF)  # rmw's "infinite" duration as rosbag2 writes it
ZERO = QosTime(0, 0)


class RecordingError(Exception):
    """Base of the recording errors; the message says what is wrong and what to do."""


class BagPathError(RecordingError, ValueError):
    """The bag path cannot be used (exists and is not empty, not a folder, not writable)."""


class TopicTypeError(RecordingError):
    """A topic's type has no message definition here: it cannot be written to the bag."""


class BagWriteError(RecordingError):
    """Writing the bag failed (disk full, file size limit, I/O error): the recording stopped."""


def typestore_for(distro: str | None = None) -> Any:
    """rosbags' typestore (message definitions and hashes) of ROS 2 ``distro`` (default: ``ROS_DISTRO``, else
    Kilted). ``ValueError`` for a distribution rosbags does not know."""
    name = (distro or os.environ.get("ROS_DISTRO") or DEFAULT_DISTRO).strip().lower()
    try:
        store = Stores[f"ROS2_{name.upper()}"]
    except KeyError:
        known = sorted(s.name[5:].lower() for s in Stores if s.name.startswith("ROS2_"))
        raise ValueError(f"no message definitions for ROS 2 distribution {name!r} (known: {known})") from None
    return get_typestore(store)


def _ament_prefixes() -> list[Path]:
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return [*prefixes, Path(sys.prefix)]


def _referenced_types(desc: Any) -> list[str]:
    """Message type names a rosbags field description refers to (nested in arrays and sequences)."""
    kind, arg = desc
    if kind == Nodetype.NAME:
        return [arg]
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return _referenced_types(arg[0])
    return []


def _register_from_share(typestore: Any, msgtype: str, prefixes: Sequence[Path], depth: int = 0) -> None:
    """Register ``msgtype`` (``pkg/msg/Name``) and the types it uses from ``<prefix>/share/<pkg>/msg/*.msg``
    into ``typestore``; ``KeyError`` if a definition is found nowhere."""
    if msgtype in typestore.fielddefs:
        return
    parts = msgtype.split("/")
    if len(parts) != 3 or parts[1] != "msg" or depth > 32:
        raise KeyError(msgtype)
    for prefix in prefixes:
        file = prefix / "share" / parts[0] / "msg" / f"{parts[2]}.msg"
        if file.is_file():
            break
    else:
        raise KeyError(msgtype)
    types = get_types_from_msg(file.read_text(encoding="utf-8"), msgtype)
    for _name, desc in types[msgtype][1]:
        for dep in _referenced_types(desc):
            _register_from_share(typestore, dep, prefixes, depth + 1)
    typestore.register(types)


def message_definition(
    typestore: Any, msgtype: str, prefixes: Sequence[Path] | None = None
) -> tuple[str, str]:
    """``(msgdef, rihs01)`` of ``msgtype`` (``pkg/msg/Name``): the concatenated ``ros2msg`` definition that
    MCAP schemas carry, and the RIHS01 type hash. Unknown types are looked up as ``.msg`` files under the
    ament prefixes (``AMENT_PREFIX_PATH`` and this Python's prefix) and registered. ``TopicTypeError`` if
    none."""
    try:
        _register_from_share(typestore, msgtype, _ament_prefixes() if prefixes is None else prefixes)
        msgdef, _ = typestore.generate_msgdef(msgtype, ros_version=2)
        return msgdef, typestore.hash_rihs01(msgtype)
    except Exception as exc:  # KeyError, a parse error of a .msg file, a typestore conflict
        raise TopicTypeError(
            f"type {msgtype} has no message definition here (not among the ROS 2 definitions rosbags "
            f"knows, no share/<package>/msg/*.msg under the ament prefixes): {exc!r}"
        ) from None


def split_names(text: str) -> tuple[str, ...]:
    """Topic names or patterns from a space- or comma-separated string."""
    return tuple(t for t in text.replace(",", " ").split() if t)


def is_hidden(name: str) -> bool:
    """A hidden topic (a name component starting with ``_``, e.g. action internals), as ``ros2 topic
    list`` has them."""
    return any(part.startswith("_") for part in name.split("/"))


@dataclass(frozen=True)
class TopicFilter:
    """Which topics to record: ``topics`` (names or ``fnmatch`` patterns such as ``/sim/*``; empty: every
    topic that is not hidden) minus ``exclude`` (names or patterns)."""

    topics: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def parse(cls, topics: str, exclude: str) -> TopicFilter:
        """From the node's string parameters: ``topics`` "all" (or empty) or a list, ``exclude`` a list."""
        names = split_names(topics)
        if names in ((), ("all",)):
            names = ()
        bad = [n for n in (*names, *split_names(exclude)) if not n.startswith(("/", "*"))]
        if bad:
            raise ValueError(f"topic names must be absolute (start with /) or patterns: {bad}")
        return cls(names, split_names(exclude))

    def wanted(self, name: str) -> bool:
        """Whether topic ``name`` is to be recorded."""
        if any(fnmatch.fnmatchcase(name, p) for p in self.exclude):
            return False
        if not self.topics:
            return not is_hidden(name)
        return any(fnmatch.fnmatchcase(name, p) for p in self.topics)


def subscription_qos(offered: Sequence[Qos], depth: int) -> Qos:
    """The recorder's subscription QoS for a topic whose publishers offer ``offered`` (as ``ros2 bag
    record``): reliable if every publisher is reliable, else best-effort; transient-local if every publisher
    is (so the latched value of a ``/robot_description`` or ``/tf_static`` is recorded), else volatile;
    keep-last ``depth`` (deep: the recorder is no lockstep peer and may fall behind for a while)."""
    reliable = bool(offered) and all(q.reliability == QosReliability.RELIABLE for q in offered)
    latched = bool(offered) and all(q.durability == QosDurability.TRANSIENT_LOCAL for q in offered)
    return Qos(
        QosHistory.KEEP_LAST,
        depth,
        QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
        QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
        ZERO,
        ZERO,
        QosLiveliness.AUTOMATIC,
        ZERO,
        False,
    )


def compatible(subscription: Qos, offered: Qos) -> bool:
    """Whether a publisher offering ``offered`` matches ``subscription`` (reliability and durability)."""
    if subscription.reliability == QosReliability.RELIABLE and offered.reliability != QosReliability.RELIABLE:
        return False
    return not (
        subscription.durability == QosDurability.TRANSIENT_LOCAL
        and offered.durability != QosDurability.TRANSIENT_LOCAL
    )


def _is_bag_file(path: Path) -> bool:
    return path.is_file() and (path.name == "metadata.yaml" or ".mcap" in path.name or ".db3" in path.name)


def prepare_bag_path(path: Path, overwrite: bool) -> Path:
    """Check ``path`` for a new bag and make room: a missing path is fine; an empty folder is removed (the
    writer creates it); a folder with content is refused unless ``overwrite``, and then removed only if it
    holds nothing but bag files (``metadata.yaml``, ``*.mcap``, ``*.db3``). ``BagPathError`` otherwise."""
    path = Path(path)
    if not path.exists():
        return path
    if not path.is_dir():
        raise BagPathError(f"bag path {path} exists and is not a folder")
    entries = list(path.iterdir())
    if entries and not overwrite:
        raise BagPathError(
            f"bag path {path} exists and is not empty: not overwriting it (--overwrite / overwrite:=true "
            "replaces a bag)"
        )
    others = [e.name for e in entries if not _is_bag_file(e)]
    if others:
        raise BagPathError(
            f"bag path {path} holds more than a bag ({sorted(others)[:5]}): --overwrite replaces only a bag "
            "folder (metadata.yaml, *.mcap)"
        )
    shutil.rmtree(path)
    return path


@dataclass
class BagTopic:
    """One recorded topic: its name, type and connection in the writer, and the messages written."""

    name: str
    msgtype: str
    connection: Any
    count: int = 0


class BagWriter:
    """A rosbag2 folder with MCAP storage being written (module docstring).

    Args:
        path: the bag folder (created; its file is ``<path>/<folder name>.mcap``).
        typestore: the message definitions (default :func:`typestore_for`).
        overwrite: replace an existing bag at ``path`` (:func:`prepare_bag_path`).
        flush_period_s: flush at least this often (s of wall time, measured by ``clock``).
        clock: a monotonic clock in seconds (tests pass their own).

    ``BagPathError`` if the folder cannot be created.
    """

    def __init__(
        self,
        path: str | Path,
        typestore: Any = None,
        overwrite: bool = False,
        flush_period_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not flush_period_s > 0.0:
            raise ValueError(f"flush_period_s must be > 0 s, got {flush_period_s}")
        self.path = prepare_bag_path(Path(path), overwrite)
        self.typestore = typestore if typestore is not None else typestore_for()
        self.flush_period_s = flush_period_s
        self._clock = clock
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        try:
            self._writer.open()
        except (OSError, WriterError) as exc:
            raise BagPathError(f"cannot create the bag {self.path}: {exc}") from None
        self.topics: dict[str, BagTopic] = {}
        self.error: str | None = None
        self.closed = False
        self.flushes = 0
        self._last_flush = clock()
        self._can_flush = hasattr(self._writer.storage, "close_chunk") and hasattr(
            self._writer.storage, "bio"
        )

    @property
    def file(self) -> Path:
        """The MCAP file."""
        return self.path / f"{self.path.name}.mcap"

    @property
    def message_count(self) -> int:
        """Messages written so far (all topics)."""
        return sum(t.count for t in self.topics.values())

    def bytes_on_disk(self) -> int:
        """Size of the MCAP file handed to the operating system so far (B)."""
        with contextlib.suppress(OSError, AttributeError):
            return int(self._writer.storage.bio.tell())  # type: ignore[union-attr]
        return 0

    def add_topic(self, name: str, msgtype: str, offered_qos: Sequence[Qos] = ()) -> BagTopic:
        """Register topic ``name`` of type ``msgtype`` (``pkg/msg/Name``) with its publishers' QoS profiles
        (written to the bag's metadata). ``TopicTypeError`` if the type has no definition here or the topic
        is already recorded with another type; ``BagWriteError`` after a failed write."""
        self._check_writable()
        known = self.topics.get(name)
        if known is not None:
            if known.msgtype != msgtype:
                raise TopicTypeError(f"{name}: recorded as {known.msgtype}, now offered as {msgtype}")
            return known
        msgdef, rihs01 = message_definition(self.typestore, msgtype)
        try:
            connection = self._writer.add_connection(
                name, msgtype, msgdef=msgdef, rihs01=rihs01, offered_qos_profiles=list(offered_qos)
            )
        except OSError as exc:
            self._fail(exc)
        topic = BagTopic(name, msgtype, connection)
        self.topics[name] = topic
        return topic

    def write(self, topic: BagTopic, t_ns: int, data: bytes | memoryview) -> None:
        """Append one serialized message (CDR bytes) received at ``t_ns`` (ns of the bag's time base);
        flushes when the last flush is ``flush_period_s`` old. ``BagWriteError`` if writing fails."""
        self._check_writable()
        try:
            self._writer.write(topic.connection, max(0, int(t_ns)), data)
        except OSError as exc:
            self._fail(exc)
        topic.count += 1
        if self._clock() - self._last_flush >= self.flush_period_s:
            self.flush()

    def flush_due(self) -> bool:
        """The last flush is at least ``flush_period_s`` old (a timer calls :meth:`flush` then)."""
        return self._clock() - self._last_flush >= self.flush_period_s

    def flush(self) -> None:
        """Write the pending chunk (if it holds messages) and hand the file's buffer to the operating system.

        rosbags' MCAP writer closes a chunk by itself only at 1 MiB; closing it here is its ``close_chunk``
        (a rosbags internal; without it the chunks close by size only and a kill loses up to 1 MiB)."""
        if self.error is not None or self.closed:
            return
        self._last_flush = self._clock()
        if not self._can_flush:
            return
        storage: Any = self._writer.storage
        try:
            if storage.chunk.msgs:
                storage.close_chunk()
            storage.bio.flush()
        except OSError as exc:
            self._fail(exc)
        self.flushes += 1

    def close(self, custom_data: dict[str, str] | None = None) -> dict[str, int]:
        """Write the MCAP summary and ``metadata.yaml`` (with ``custom_data``); the per-topic counts.
        After a write error the file is left as it is (:mod:`.recovery` completes it) and nothing is
        written; ``BagWriteError`` if closing fails now."""
        counts = {name: t.count for name, t in self.topics.items()}
        if self.closed or self.error is not None:
            self.closed = True
            return counts
        for key, value in (custom_data or {}).items():
            self._writer.set_custom_data(key, str(value))
        try:
            self._writer.close()
        except OSError as exc:
            self._fail(exc)
        finally:
            self.closed = True
        return counts

    def abort(self) -> None:
        """Close the file without summary and metadata (a kill's state; recoverable)."""
        self.closed = True
        with contextlib.suppress(Exception):
            self._writer.abort()

    def _check_writable(self) -> None:
        if self.error is not None:
            raise BagWriteError(self.error)
        if self.closed:
            raise BagWriteError(f"the bag {self.path} is closed")

    def _fail(self, exc: OSError) -> Any:
        """Stop for good after a failed write: the file keeps what reached it."""
        self.error = (
            f"writing {self.file} failed ({exc.strerror or exc}): recording stopped after "
            f"{self.message_count} messages; what reached the file is kept (humanoid-record --recover "
            f"{self.path} completes it once there is room)"
        )
        self.abort()
        raise BagWriteError(self.error) from exc
