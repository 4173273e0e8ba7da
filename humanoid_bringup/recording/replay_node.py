"""``humanoid-replay <bag>``: play a recorded bag back on its topics (docs/recording.md).

Each topic is published with the serialized bytes from the bag (header stamps unchanged) under its recorded
name and type, with the reliability and durability its publishers offered (transient-local where every
recorded publisher was, so latched values reach late subscribers) and keep-last ``--queue-depth``. Messages
go out in log-time order, paced by :class:`~.replay.ReplayClock`: ``--rate`` bag seconds per wall second,
from ``--start`` seconds after the bag's first message.

``/clock``: a bag recorded in simulation carries ``/clock`` (its time base, :mod:`.recorder_node`), replayed
like any topic, so nodes with ``use_sim_time`` follow the recorded run; a bag without it gets ``/clock``
messages made from its log times (``--clock-hz`` per bag second).

Pause: the service ``~/set_pause`` (std_srvs/SetBool; ``/replay/set_pause``), ``--paused`` to start paused
(subscribers connect first, then ``data: false`` starts it). The process exits 0 after the last message.

A topic whose type has no Python message class here is reported and skipped. A bag a killed recording left
(no ``metadata.yaml``) is refused with the hint to run ``humanoid-record --recover`` first.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from humanoid_bringup.recording.bag_writer import TopicTypeError, subscription_qos
from humanoid_bringup.recording.replay import ReplayClock, ReplayOptions, clock_due
from humanoid_bringup.recording.ros_types import import_message, qos_to_rclpy
from humanoid_control.ros.node_utils import QuietNode, run_node

__all__ = ["ReplayNode", "main"]


class ReplayNode(QuietNode):
    """Publishes a bag's messages (module docstring)."""

    def __init__(
        self, bag: str | Path, options: ReplayOptions, queue_depth: int = 1000, **kwargs: Any
    ) -> None:
        from rosbags.rosbag2 import Reader
        from rosbags.rosbag2.errors import ReaderError

        options.check()
        if not 1 <= queue_depth <= 1_000_000:
            raise ValueError(f"--queue-depth must be in 1-1000000, got {queue_depth}")
        path = Path(bag)
        if path.is_dir() and not (path / "metadata.yaml").exists():
            raise ValueError(
                f"{path} has no metadata.yaml (a killed recording?): run humanoid-record --recover {path} "
                "first"
            )
        try:
            self.reader = Reader(path)
            self.reader.open()
        except (ReaderError, OSError) as exc:
            raise ValueError(f"cannot read the bag {path}: {exc}") from None
        super().__init__("replay", **kwargs)
        from rosgraph_msgs.msg import Clock
        from std_srvs.srv import SetBool

        self.options = options
        self.exit_code = 0
        self.published = 0
        self.skipped: dict[str, str] = {}
        self._pubs: dict[int, Any] = {}  # connection id -> publisher
        by_topic: dict[str, Any] = {}
        for conn in self.reader.connections:
            if conn.topic in self.skipped:
                continue
            try:
                cls = import_message(conn.msgtype)
            except TopicTypeError as exc:
                self.skipped[conn.topic] = str(exc)
                self.get_logger().error(f"not replaying {conn.topic}: {exc}")
                continue
            if conn.topic not in by_topic:
                qos = subscription_qos(conn.ext.offered_qos_profiles, queue_depth)
                by_topic[conn.topic] = self.create_publisher(cls, conn.topic, qos_to_rclpy(qos))
            self._pubs[conn.id] = by_topic[conn.topic]
        self.topics = sorted(by_topic)
        self._clock_type = Clock
        self._clock_pub = None if "/clock" in by_topic else self.create_publisher(Clock, "/clock", 10)
        t_start = self.reader.start_time + round(options.start_s * 1e9)
        self.clock = ReplayClock(t_start, options.rate, paused=options.paused)
        self.create_service(SetBool, "~/set_pause", self._on_set_pause)
        self._done = self.create_guard_condition(self._on_done)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="replay", daemon=True)
        self.get_logger().info(
            f"replaying {path} ({len(self.topics)} topics, {self.reader.duration * 1e-9:.3f} s) at rate "
            f"{options.rate:g} from {options.start_s:g} s"
            + (" (paused: ~/set_pause false starts it)" if options.paused else "")
        )
        self._thread.start()

    def _on_set_pause(self, request: Any, response: Any) -> Any:
        changed = self.clock.set_paused(bool(request.data))
        t = self.clock.bag_time_ns() * 1e-9
        response.success = True
        response.message = f"{'paused' if request.data else 'playing'} at bag time {t:.3f} s" + (
            "" if changed else " (no change)"
        )
        return response

    def _run(self) -> None:
        """Replay thread: publish each message when due."""
        try:
            last_clock: int | None = None
            connections = [c for c in self.reader.connections if c.id in self._pubs]
            for conn, t_ns, data in self.reader.messages(
                connections=connections, start=self.clock.t_start_ns
            ):
                if not self.clock.wait_until(t_ns):
                    return
                if self._clock_pub is not None and clock_due(t_ns, last_clock, self.options.clock_hz):
                    last_clock = t_ns
                    msg = self._clock_type()
                    msg.clock.sec, msg.clock.nanosec = divmod(t_ns, 1_000_000_000)
                    self._clock_pub.publish(msg)
                self._pubs[conn.id].publish(bytes(data))
                self.published += 1
        except BaseException as exc:  # reported on the spinning thread
            self._error = exc
        finally:
            if not self.clock.stopped:
                self._done.trigger()

    def _on_done(self) -> None:
        if self._error is not None:
            self.get_logger().error(f"replay failed: {self._error!r}")
            self.exit_code = 1
        else:
            self.get_logger().info(f"replayed {self.published} messages")
        raise SystemExit(self.exit_code)  # on the spinning thread: run_node closes the node and exits

    def close(self) -> None:
        """Stop the replay thread and close the bag."""
        self.clock.stop()
        self._thread.join(timeout=2.0)
        self.reader.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-replay``."""
    from rclpy.utilities import remove_ros_args

    argv = list(sys.argv if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="humanoid-replay", description="Play a recorded rosbag2 (MCAP) folder back on its topics."
    )
    parser.add_argument("bag", help="bag folder (recorded by humanoid-record or ros2 bag record)")
    parser.add_argument("--rate", type=float, default=1.0, help="bag seconds per wall second (default 1)")
    parser.add_argument("--start", type=float, default=0.0, help="skip this many seconds of the bag (s)")
    parser.add_argument("--paused", action="store_true", help="start paused (~/set_pause false starts it)")
    parser.add_argument(
        "--clock-hz",
        type=float,
        default=100.0,
        help="/clock rate made from the log times (bags without /clock)",
    )
    parser.add_argument("--queue-depth", type=int, default=1000, help="publishers' keep-last depth")
    args = parser.parse_args(remove_ros_args(argv)[1:])
    options = ReplayOptions(rate=args.rate, start_s=args.start, clock_hz=args.clock_hz, paused=args.paused)
    return run_node(
        lambda: ReplayNode(args.bag, options, args.queue_depth), args=argv, program="humanoid-replay"
    )


if __name__ == "__main__":
    raise SystemExit(main())
