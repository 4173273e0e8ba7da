"""Complete a recording that was killed (``humanoid-record --recover <dir>``): pure, no rclpy.

A recorder killed with SIGKILL (or stopped by a full disk) leaves ``<dir>/<name>.mcap`` without its summary
and footer, and no ``metadata.yaml``: MCAP's indexed reader and rosbags refuse it. Its records up to the last
whole one are intact (the recorder writes whole chunks, :mod:`.bag_writer`), and ``mcap``'s
``StreamReader`` reads them in file order: schemas, channels (with their QoS profiles) and messages.

:func:`recover_bag` streams those records into a new bag written beside the folder
(``.<name>.recovering/<name>``), then moves its MCAP file and ``metadata.yaml`` into the folder in place of
the killed file (one ``os.replace`` each: an interrupted recovery leaves the original file intact and can be
run again). Message definitions come from the typestore, else from the schema text itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from humanoid_bringup.recording.bag_writer import BagWriter, RecordingError, TopicTypeError, typestore_for

__all__ = ["RecoveryError", "RecoveryReport", "find_mcap", "is_complete", "recover_bag"]


class RecoveryError(RecordingError):
    """The folder holds no recoverable recording (the message says why)."""


@dataclass
class RecoveryReport:
    """What :func:`recover_bag` found and wrote: per-topic message counts, the first and last log time (ns
    of the bag's time base), whether the file ended in a cut record, and topics it could not rebuild."""

    path: Path
    already_complete: bool = False
    topics: dict[str, int] = field(default_factory=dict)
    start_ns: int | None = None
    end_ns: int | None = None
    cut_record: bool = False
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        """Messages in the recovered bag."""
        return sum(self.topics.values())

    def describe(self) -> str:
        """One line for the user."""
        if self.already_complete:
            return f"{self.path}: already a complete bag (summary and metadata.yaml present); nothing to do"
        span = (
            f", {self.start_ns * 1e-9:.3f} s to {self.end_ns * 1e-9:.3f} s"
            if self.start_ns is not None and self.end_ns is not None
            else ""
        )
        cut = " (the file ended in a cut record, dropped)" if self.cut_record else ""
        skipped = f"; skipped {self.skipped}" if self.skipped else ""
        counts = f"{self.messages} messages on {len(self.topics)} topics"
        return f"{self.path}: recovered {counts}{span}{cut}{skipped}"


def find_mcap(path: Path) -> Path:
    """The one ``*.mcap`` file of bag folder ``path``; ``RecoveryError`` if there is none or several."""
    if not path.is_dir():
        raise RecoveryError(f"{path} is not a bag folder")
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".mcap")
    if len(files) != 1:
        raise RecoveryError(f"{path}: expected one .mcap file, found {[f.name for f in files]}")
    return files[0]


def is_complete(path: Path) -> bool:
    """``metadata.yaml`` is there and the MCAP file has its summary (the indexed reader opens it)."""
    from mcap.reader import make_reader

    if not (path / "metadata.yaml").is_file():
        return False
    try:
        with find_mcap(path).open("rb") as f:
            return make_reader(f).get_summary() is not None
    except Exception:
        return False


def _definition_from_schema(typestore: Any, name: str, text: str) -> None:
    """Register type ``name`` from an MCAP ``ros2msg`` schema (its concatenated definition)."""
    from rosbags.typesys import get_types_from_msg

    if name not in typestore.fielddefs:
        with contextlib.suppress(Exception):
            typestore.register(get_types_from_msg(text, name))


def _readable_records(records: Iterator[Any], report: RecoveryReport, source: Path) -> Iterator[Any]:
    """The records of ``records`` up to the first that cannot be read: a record cut by the kill ends the
    file (the stream reader then raises ``EndOfFile``, or ``struct.error`` inside a cut record, or another
    parse error); ``report.cut_record`` says so. ``RecoveryError`` if not even the header was readable."""
    count = 0
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except Exception as exc:  # whatever the parser raises on a cut or damaged record
            report.cut_record = True
            if count == 0:
                raise RecoveryError(f"{source}: nothing readable ({exc!r})") from None
            return
        count += 1
        yield record


def recover_bag(path: str | Path, typestore: Any = None) -> RecoveryReport:
    """Rebuild bag folder ``path`` from what a killed recording left (module docstring). A complete bag is
    left alone (``already_complete``). ``RecoveryError`` if no MCAP file or nothing readable is there;
    ``BagWriteError`` if the new file cannot be written (no room: free some and run again)."""
    from mcap.records import Channel, Message, Schema
    from mcap.stream_reader import StreamReader
    from rosbags.rosbag2.metadata import parse_qos

    path = Path(path)
    report = RecoveryReport(path)
    source = find_mcap(path)
    if is_complete(path):
        report.already_complete = True
        return report
    store = typestore if typestore is not None else typestore_for()
    staging = path.parent / f".{path.name}.recovering"
    if staging.exists():
        shutil.rmtree(staging)  # a recovery interrupted before: start again
    staging.mkdir()
    writer = BagWriter(staging / path.name, typestore=store, flush_period_s=3600.0)
    schemas: dict[int, Any] = {}
    topics: dict[int, Any] = {}
    try:
        with source.open("rb") as f:
            for record in _readable_records(StreamReader(f).records, report, source):
                if isinstance(record, Schema):
                    schemas[record.id] = record
                elif isinstance(record, Channel) and record.id not in topics:
                    schema = schemas.get(record.schema_id)
                    if schema is None:
                        report.skipped[record.topic] = f"channel {record.id} without its schema"
                        continue
                    _definition_from_schema(store, schema.name, schema.data.decode("utf-8", "replace"))
                    qos = parse_qos(record.metadata.get("offered_qos_profiles", ""))
                    try:
                        topics[record.id] = writer.add_topic(record.topic, schema.name, qos)
                    except TopicTypeError as exc:
                        report.skipped[record.topic] = str(exc)
                elif isinstance(record, Message) and record.channel_id in topics:
                    writer.write(topics[record.channel_id], record.log_time, record.data)
                    start = report.start_ns
                    report.start_ns = record.log_time if start is None else min(start, record.log_time)
                    report.end_ns = max(report.end_ns or 0, record.log_time)
        report.topics = writer.close(custom_data={"recovered": "true"})
        os.replace(writer.file, path / writer.file.name)
        if source.name != writer.file.name:
            source.unlink()
        os.replace(writer.path / "metadata.yaml", path / "metadata.yaml")
    finally:
        writer.abort()
        shutil.rmtree(staging, ignore_errors=True)
    return report
