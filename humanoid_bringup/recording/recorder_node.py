"""``humanoid-record``: record the graph's topics to a rosbag2 folder with MCAP storage (docs/recording.md).

The node (``recorder``; launch argument ``record:=<dir>``) polls the graph every ``discovery_period_s`` and
subscribes to each wanted topic as soon as it has a publisher, raw (rclpy hands the serialized CDR bytes,
nothing is deserialized), with the QoS its publishers offer (:func:`~.bag_writer.subscription_qos`:
transient-local where every publisher is, so latched values are recorded; reliable where every publisher
is) and a deep queue. Those offered profiles go to the bag's metadata.

The subscriptions live on a second node, ``<name>_reader``, that no executor spins: every ``drain_period_s``
(10 ms of wall time) a timer takes everything queued on every subscription (``take_message``, in C), orders
the batch by receive time and writes it. One wake-up per period instead of one per message: at the 500 Hz
streams' several thousand messages a second, the executor's per-message wake-up was most of the recorder's
CPU. A topic whose type cannot be written
(no message definition or no Python class here) is reported once in the log and in the status, and
skipped; the rest is recorded.

Time base (each message's log time, ns): ``time_base`` ``sim`` (the launch's choice in simulation): the
latest ``/clock`` message the recorder has taken from its own ``/clock`` subscription (simulated time; 0
before the first, in receive order), so the bag's clock and its recorded ``/clock`` agree; ``system``: the
middleware's receive time of the message (wall clock, ns since the epoch); ``auto``: ``sim`` if the node's
``use_sim_time`` is true. It is the *receive* time, as with ``ros2 bag record``: under load a message may be
taken a few ticks after it was published (its header stamp is unchanged). The recorder is no lockstep peer:
it never slows the simulation, and its deep queues let it catch up; in lockstep every message published is
recorded.

The writer flushes at least once a second (:mod:`.bag_writer`): a recorder killed with SIGKILL loses at most
about a second, and ``humanoid-record --recover <dir>`` completes its bag (:mod:`.recovery`). On SIGINT /
SIGTERM it takes what is still queued or still coming (the other nodes' last messages as the launch stops
them; until the graph has been quiet for 0.5 s, at most 3 s), then writes the summary and ``metadata.yaml``.
A failed write (disk full) stops the recording with an error (exit code 1) and keeps what was written.

Status: ``~/status`` (std_msgs/String, JSON, transient-local; once a second and on a change): the path, each
recorded topic's count and matched publishers, the skipped topics with the reason, bytes on disk,
``recorder_cpu_pct`` (the process's CPU time over the wall time since the bag was opened, %, 100 = one core)
and the error if any;
``recorder_cpu_pct`` is also logged at the end and written to ``metadata.yaml``'s ``custom_data``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import struct
import sys
import time
from datetime import datetime
from typing import Any

from humanoid_bringup.recording.bag_writer import (
    BagTopic,
    BagWriteError,
    BagWriter,
    TopicFilter,
    TopicTypeError,
    compatible,
    subscription_qos,
    typestore_for,
)
from humanoid_bringup.recording.ros_types import import_message, qos_from_rclpy, qos_to_rclpy
from humanoid_control.ros.node_utils import QuietNode, declare, helper_node, run_node

__all__ = ["RecorderNode", "cdr_time_ns", "main"]

CLOCK_TOPIC = "/clock"


def cdr_time_ns(raw: bytes) -> int | None:
    """The time (ns) at the start of a serialized message whose first field is a ``builtin_interfaces/Time``
    (``rosgraph_msgs/Clock``, or a ``std_msgs/Header``): 4 bytes of CDR encapsulation, ``int32 sec``,
    ``uint32 nanosec``. None if too short or not plain CDR."""
    if len(raw) < 12 or raw[0] != 0 or raw[1] not in (0, 1):
        return None
    sec, nanosec = struct.unpack_from("<iI" if raw[1] == 1 else ">iI", raw, 4)
    return sec * 1_000_000_000 + nanosec


class RecorderNode(QuietNode):
    """ROS 2 adapter of :class:`~humanoid_bringup.recording.bag_writer.BagWriter` (module docstring)."""

    def __init__(self, parameter_overrides: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__("recorder", parameter_overrides=parameter_overrides or [], **kwargs)
        from rclpy.clock import Clock, ClockType
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        path = declare(
            self,
            "path",
            "",
            "bag folder (created; refused if it exists and is not empty, unless overwrite); empty: "
            "rosbag2_<date>-<time> in the working folder",
            read_only=True,
        )
        topics = declare(
            self, "topics", "all", "topics to record: all, or names / patterns (/sim/*)", read_only=True
        )
        exclude = declare(self, "exclude", "", "topics not to record: names or patterns", read_only=True)
        overwrite = declare(self, "overwrite", False, "replace an existing bag at path", read_only=True)
        self.time_base = declare(
            self, "time_base", "auto", "log times: sim (/clock), system (wall clock) or auto", read_only=True
        )
        distro = declare(
            self,
            "distro",
            "",
            "message definitions of this ROS 2 distribution (empty: ROS_DISTRO, else kilted)",
        )
        self.depth = declare(self, "queue_depth", 2000, "subscription queue depth per topic", 1, 1000000)
        discovery = declare(self, "discovery_period_s", 0.2, "graph poll period (s, wall)", 0.02, 10.0)
        flush = declare(self, "flush_period_s", 1.0, "flush at least this often (s, wall)", 0.05, 1.0)
        drain = declare(
            self, "drain_period_s", 0.01, "take the queued messages this often (s, wall)", 0.001, 0.5
        )
        if self.time_base == "auto":
            self.time_base = "sim" if self.get_parameter("use_sim_time").value else "system"
        if self.time_base not in ("sim", "system"):
            raise ValueError(f"time_base must be sim, system or auto, got {self.time_base!r}")
        self.filter = TopicFilter.parse(topics, exclude)
        if not path:
            path = datetime.now().strftime("rosbag2_%Y_%m_%d-%H_%M_%S")
        typestore = typestore_for(distro or None)
        self.exit_code = 0
        self.skipped: dict[str, str] = {}
        self._rec_subs: dict[str, Any] = {}  # topic -> subscription (on the reader node)
        self._rec_topics: dict[str, BagTopic | None] = {}  # topic -> where it is written (None: not recorded)
        self._rec_qos: dict[str, Any] = {}  # topic -> the subscription's rosbags Qos
        self._pub_counts: dict[str, int] = {}  # topic -> publisher count when (re)subscribed
        self._clock_ns = 0
        self._changed = True
        self.status_topic = f"{self.get_fully_qualified_name()}/status"
        self._status_pub = self.create_publisher(
            String,
            "~/status",
            QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        self._string = String
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        # the recorded subscriptions' node: never spun, its queues are taken by the drain timer
        self.reader = helper_node(self.context, f"{self.get_name()}_reader")
        self.create_timer(discovery, self._discover, clock=steady)
        self.create_timer(drain, self.drain_once, clock=steady)
        self.create_timer(min(0.25, flush / 4.0), self._flush_tick, clock=steady)
        self.create_timer(1.0, self._publish_status, clock=steady)
        # last: a refused parameter leaves no bag folder behind
        self.bag = BagWriter(path, typestore=typestore, overwrite=overwrite, flush_period_s=flush)
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self.get_logger().info(
            f"recording to {self.bag.path} (time base {self.time_base}; topics {topics or 'all'}"
            + (f", excluding {exclude}" if exclude else "")
            + ")"
        )
        self._discover()

    # ------------------------------------------------------------------ graph
    def _discover(self) -> None:
        """Subscribe to new wanted topics; re-subscribe where a new publisher's QoS does not match."""
        for name, types in self.get_topic_names_and_types():
            record = self.filter.wanted(name) and name != self.status_topic
            clock = name == CLOCK_TOPIC and self.time_base == "sim"
            if name in self.skipped or not (record or clock):
                continue
            count = self.count_publishers(name)
            if count == 0 or self._pub_counts.get(name) == count:
                continue
            if len(types) != 1:
                self._skip(name, f"several types on the topic: {types}")
                continue
            offered = [qos_from_rclpy(i.qos_profile) for i in self.get_publishers_info_by_topic(name)]
            if not offered:
                continue
            self._pub_counts[name] = count
            current = self._rec_qos.get(name)
            if current is not None and all(compatible(current, q) for q in offered):
                continue  # one more (or one less) publisher, still matched
            self._subscribe(name, types[0], offered, record)
        if self._changed:
            self._publish_status()

    def _subscribe(self, name: str, msgtype: str, offered: list[Any], record: bool) -> None:
        try:
            cls = import_message(msgtype)
            topic = self.bag.add_topic(name, msgtype, offered) if record else None
        except TopicTypeError as exc:
            self._skip(name, str(exc))
            return
        except BagWriteError as exc:
            self._failed(str(exc))
            return
        qos = subscription_qos(offered, self.depth)
        old = self._rec_subs.pop(name, None)
        if old is not None:
            self.drain_once()  # what the old subscription holds first
            self.reader.destroy_subscription(old)
            self.get_logger().warning(
                f"{name}: a publisher with another QoS joined; subscribed again as "
                f"{qos.reliability.name.lower()} / {qos.durability.name.lower()}"
            )
        self._rec_subs[name] = self.reader.create_subscription(
            cls, name, _never_called, qos_to_rclpy(qos), raw=True
        )
        self._rec_topics[name] = topic
        self._rec_qos[name] = qos
        self._changed = True

    def _skip(self, name: str, reason: str) -> None:
        self.skipped[name] = reason
        self._changed = True
        self.get_logger().error(f"not recording {name}: {reason}")

    # ------------------------------------------------------------------ messages
    def drain_once(self) -> int:
        """Take every queued message of every subscription, write them in receive order; the count."""
        batch: list[tuple[int, int, str, bytes]] = []
        for name, sub in self._rec_subs.items():
            with sub.handle:
                while True:
                    got = sub.handle.take_message(sub.msg_type, True)
                    if got is None:
                        break
                    data, info = got
                    received = info.get("received_timestamp", 0) if isinstance(info, dict) else 0
                    batch.append((int(received) or time.time_ns(), len(batch), name, data))
        batch.sort()
        sim = self.time_base == "sim"
        for received, _, name, data in batch:
            if name == CLOCK_TOPIC and sim:
                t = cdr_time_ns(data)
                if t is not None:
                    self._clock_ns = t
            topic = self._rec_topics.get(name)
            if topic is not None:
                try:
                    self.bag.write(topic, self._clock_ns if sim else received, data)
                except BagWriteError as exc:
                    self._failed(str(exc))
        return len(batch)

    def _flush_tick(self) -> None:
        if self.bag.flush_due():
            try:
                self.bag.flush()
            except BagWriteError as exc:
                self._failed(str(exc))

    def _failed(self, error: str) -> None:
        """A write failed: report, and stop the process (exit code 1); the file keeps what was written."""
        self.get_logger().error(f"recording stopped: {error}")
        self.exit_code = 1
        self._publish_status(final=True)
        raise SystemExit(1)

    # ------------------------------------------------------------------ status
    def cpu_pct(self) -> float:
        """The process's CPU time over the wall time since the bag was opened (%; 100 = one core)."""
        wall = time.monotonic() - self._wall0
        return 100.0 * (time.process_time() - self._cpu0) / wall if wall > 0 else 0.0

    def status(self) -> dict[str, Any]:
        """What the status topic carries (module docstring)."""
        state = "failed" if self.bag.error else ("closed" if self.bag.closed else "recording")
        return {
            "state": state,
            "path": str(self.bag.path),
            "time_base": self.time_base,
            "topics": {n: t.count for n, t in self.bag.topics.items()},
            "publishers": {n: self._matched(n) for n in self.bag.topics},
            "messages": self.bag.message_count,
            "skipped": dict(self.skipped),
            "bytes": self.bag.bytes_on_disk(),
            "recorder_cpu_pct": round(self.cpu_pct(), 2),
            "error": self.bag.error,
        }

    def _matched(self, name: str) -> int:
        """Publishers matched to the recorder's subscription of ``name`` (0 if none)."""
        sub = self._rec_subs.get(name)
        if sub is None:
            return 0
        count = getattr(sub, "get_publisher_count", None)  # rclpy >= Iron
        return int(count()) if count is not None else self.count_publishers(name)

    def _publish_status(self, final: bool = False) -> None:
        """Publish the status; ``final`` (the process ends next): wait up to 1 s until every reader has it, as
        a reliable sample still in flight when its writer is destroyed can be lost for some of them."""
        self._changed = False
        if self.context.ok():
            self._status_pub.publish(self._string(data=json.dumps(self.status())))
            wait = getattr(self._status_pub, "wait_for_all_acked", None)  # rclpy >= Galactic
            if final and wait is not None:
                from rclpy.duration import Duration

                with contextlib.suppress(Exception):
                    wait(Duration(seconds=1.0))

    # ------------------------------------------------------------------ shutdown
    def _drain(self, quiet_s: float = 0.5, max_s: float = 3.0) -> None:
        """Take what is still queued or still arriving (other nodes' last messages at shutdown)."""
        if not self.context.ok() or self.bag.error is not None:
            return
        try:
            end = time.monotonic() + max_s
            quiet_since = time.monotonic()
            while time.monotonic() < end and time.monotonic() - quiet_since < quiet_s:
                if self.drain_once():
                    quiet_since = time.monotonic()
                else:
                    time.sleep(0.02)  # the other nodes' last messages are on their way
        except (SystemExit, Exception) as exc:  # a failed write ends the drain (already reported)
            if not isinstance(exc, SystemExit):
                self.get_logger().warning(f"draining the queues stopped: {exc!r}")

    def close(self) -> None:
        """Drain, then write the summary and ``metadata.yaml``; log the counts and ``recorder_cpu_pct``."""
        if self.bag.closed:
            return
        self._drain()
        cpu = self.cpu_pct()
        try:
            self.bag.close(
                custom_data={
                    "recorder_cpu_pct": f"{cpu:.2f}",
                    "time_base": self.time_base,
                    "skipped_topics": json.dumps(self.skipped),
                }
            )
        except BagWriteError as exc:
            self.get_logger().error(f"recording stopped: {exc}")
            self.exit_code = 1
        if self.bag.error is None:
            self.get_logger().info(
                f"wrote {self.bag.path}: {self.bag.message_count} messages on {len(self.bag.topics)} topics"
                + (f", skipped {sorted(self.skipped)}" if self.skipped else "")
                + f"; recorder_cpu_pct {cpu:.1f}"
            )
        self._publish_status(final=True)
        self._rec_subs.clear()
        self.reader.destroy_node()


def _never_called(_data: bytes) -> None:
    """The reader node's subscriptions' callback: no executor spins that node (:meth:`drain_once`)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="humanoid-record",
        description="Record the ROS graph's topics to a rosbag2 folder with MCAP storage "
        "(docs/recording.md). ROS arguments (--ros-args -p name:=value) set the same parameters.",
    )
    parser.add_argument("-o", "--output", help="bag folder (default: rosbag2_<date>-<time>)")
    parser.add_argument("--topics", nargs="+", help="topics or patterns to record (default: all)")
    parser.add_argument("--exclude", nargs="+", help="topics or patterns not to record")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing bag at the path")
    parser.add_argument("--time-base", choices=["auto", "sim", "system"], help="log times (default: auto)")
    parser.add_argument(
        "--recover",
        metavar="DIR",
        help="complete the bag a killed recording left in DIR (summary and metadata.yaml), then exit",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-record`` (also the launch's ``recorder`` node)."""
    from rclpy.utilities import remove_ros_args

    argv = list(sys.argv if argv is None else argv)
    args = _parser().parse_args(remove_ros_args(argv)[1:])
    if args.recover:
        from humanoid_bringup.recording.recovery import RecoveryError, recover_bag

        try:
            report = recover_bag(args.recover)
        except (RecoveryError, BagWriteError, ValueError) as exc:
            print(f"humanoid-record: error: {exc}", file=sys.stderr)
            return 2
        print(report.describe())
        return 0
    from rclpy.parameter import Parameter

    overrides = []
    if args.output:
        overrides.append(Parameter("path", Parameter.Type.STRING, args.output))
    if args.topics:
        overrides.append(Parameter("topics", Parameter.Type.STRING, " ".join(args.topics)))
    if args.exclude:
        overrides.append(Parameter("exclude", Parameter.Type.STRING, " ".join(args.exclude)))
    if args.overwrite:
        overrides.append(Parameter("overwrite", Parameter.Type.BOOL, True))
    if args.time_base:
        overrides.append(Parameter("time_base", Parameter.Type.STRING, args.time_base))
    return run_node(lambda: RecorderNode(overrides), args=argv, program="humanoid-record")


if __name__ == "__main__":
    raise SystemExit(main())
