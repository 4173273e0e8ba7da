"""Recording, recovery and replay (issue 44, docs/recording.md).

Fast tests: the writer core (topic choice, QoS, the bag path refused, flush once a period, a type without a
definition refused while the rest is recorded, a file size limit stopping the writer and keeping what was
written, recovery), the replay pacing, and ``humanoid-record`` refusing an existing bag.

The graph tests (a recorded lockstep run, a killed recorder recovered, replay, ``--record``) are in
test_recording_graph.py.
"""

from __future__ import annotations

import os
import resource
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from rosbags.interfaces import QosDurability, QosReliability

from humanoid_bringup.recording.bag_writer import (
    BagPathError,
    BagWriter,
    TopicFilter,
    TopicTypeError,
    compatible,
    message_definition,
    subscription_qos,
    typestore_for,
)
from humanoid_bringup.recording.recorder_node import cdr_time_ns
from humanoid_bringup.recording.recovery import is_complete, recover_bag
from humanoid_bringup.recording.replay import ReplayClock, ReplayOptions, clock_due

REPO = Path(__file__).resolve().parent.parent


def joint_state_bytes(t: float, n: int = 29) -> bytes:
    """A serialized sensor_msgs/JointState stamped ``t`` (s)."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    from humanoid_control.ros.node_utils import to_time_msg

    msg = JointState(
        name=[f"j{i}" for i in range(n)], position=[0.1] * n, velocity=[0.0] * n, effort=[1.0] * n
    )
    msg.header.stamp = to_time_msg(t)
    return bytes(serialize_message(msg))


def offered(reliable: bool = True, latched: bool = False) -> Any:
    """A rosbags Qos as a publisher would offer it."""
    return subscription_qos([], 1)._replace(
        reliability=QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
    )


def stream_messages(file: Path) -> list[tuple[str, int, bytes]]:
    """(topic, log time, data) of every message that reached ``file`` (mcap's stream reader)."""
    from mcap.exceptions import McapError
    from mcap.records import Channel, Message
    from mcap.stream_reader import StreamReader

    channels: dict[int, str] = {}
    out = []
    with file.open("rb") as f:
        try:
            for record in StreamReader(f).records:
                if isinstance(record, Channel):
                    channels[record.id] = record.topic
                elif isinstance(record, Message):
                    out.append((channels[record.channel_id], record.log_time, bytes(record.data)))
        except (McapError, struct.error):  # the cut last record
            pass
    return out


# ---------------------------------------------------------------------------------------------- fast tests
def test_topic_filter_all_but_hidden_patterns_and_exclusions() -> None:
    every = TopicFilter.parse("all", "/rosout /sim/*")
    assert every.wanted("/joint_states") and every.wanted("/mode_manager/state")
    assert not every.wanted("/rosout") and not every.wanted("/sim/ground_truth")
    assert not every.wanted("/_action/hidden") and not every.wanted("/a/_private")
    some = TopicFilter.parse("/joint_states, /odom /tf*", "/tf_static")
    assert some.wanted("/odom") and some.wanted("/tf") and not some.wanted("/tf_static")
    assert not some.wanted("/imu/data")
    with pytest.raises(ValueError, match="absolute"):
        TopicFilter.parse("joint_states", "")


def test_subscription_qos_follows_the_publishers() -> None:
    latched = subscription_qos([offered(True, True), offered(True, True)], 50)
    assert (
        latched.reliability == QosReliability.RELIABLE and latched.durability == QosDurability.TRANSIENT_LOCAL
    )
    assert latched.depth == 50
    mixed = subscription_qos([offered(True, True), offered(False, False)], 50)
    assert mixed.reliability == QosReliability.BEST_EFFORT and mixed.durability == QosDurability.VOLATILE
    assert compatible(mixed, offered(False, False)) and compatible(mixed, offered(True, True))
    assert not compatible(latched, offered(True, False)) and not compatible(latched, offered(False, True))


def test_a_bag_path_that_exists_is_refused_unless_overwrite(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(BagPathError, match="not empty"):
        BagWriter(taken)
    with pytest.raises(BagPathError, match="only a bag"):  # --overwrite replaces a bag, never other files
        BagWriter(taken, overwrite=True)
    assert (taken / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    with pytest.raises(BagPathError, match="not a folder"):
        BagWriter(tmp_path / "file")
    bag = tmp_path / "bag"
    writer = BagWriter(bag)
    writer.write(writer.add_topic("/joint_states", "sensor_msgs/msg/JointState"), 1, joint_state_bytes(0.0))
    writer.close()
    with pytest.raises(BagPathError, match="not empty"):
        BagWriter(bag)
    again = BagWriter(bag, overwrite=True)
    assert again.close() == {} and sorted(p.name for p in bag.iterdir()) == ["bag.mcap", "metadata.yaml"]
    (tmp_path / "empty").mkdir()
    BagWriter(tmp_path / "empty").close()  # an empty folder is fine


def test_flush_once_a_period_so_a_killed_file_keeps_all_but_the_last_period(tmp_path: Path) -> None:
    """What reaches the file: every message written before the last flush, none after (the pending chunk
    lives in memory); the file as a kill leaves it is completed by recover_bag, messages and stamps intact."""
    now = [0.0]
    writer = BagWriter(tmp_path / "bag", flush_period_s=1.0, clock=lambda: now[0])
    topic = writer.add_topic("/joint_states", "sensor_msgs/msg/JointState")
    data = [joint_state_bytes(0.002 * k) for k in range(1500)]
    for k in range(1500):
        now[0] = 0.001 * k  # 1.5 s of wall time: one flush at 1.0 s
        writer.write(topic, 2_000_000 * k, data[k])
    assert writer.flushes == 1
    on_disk = stream_messages(writer.file)
    assert [d for _, _, d in on_disk] == data[:1001]  # written up to the flush at 1.0 s, and none after
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "killed.mcap").write_bytes(writer.file.read_bytes())  # the file as SIGKILL would leave it
    assert not is_complete(killed)
    report = recover_bag(killed)
    assert report.topics == {"/joint_states": 1001} and report.end_ns == 2_000_000 * 1000
    assert is_complete(killed)
    from rosbags.rosbag2 import Reader

    with Reader(killed) as reader:
        assert [bytes(d) for _, _, d in reader.messages()] == data[:1001]
    assert recover_bag(killed).already_complete
    writer.close()
    # a kill can cut the file anywhere: recovery keeps every whole chunk before the cut
    whole = writer.file.read_bytes()
    for k, cut in enumerate(range(100, len(whole), 7919)):
        folder = tmp_path / f"cut{k}"
        folder.mkdir()
        (folder / f"cut{k}.mcap").write_bytes(whole[:cut])
        kept = [d for _, _, d in stream_messages(folder / f"cut{k}.mcap")]
        assert kept == data[: len(kept)]
        assert recover_bag(folder).messages == len(kept)


def test_a_type_without_definition_is_refused_and_the_rest_recorded(tmp_path: Path) -> None:
    writer = BagWriter(tmp_path / "bag")
    with pytest.raises(TopicTypeError, match="no message definition"):
        writer.add_topic("/mystery", "no_such_pkg/msg/Mystery")
    topic = writer.add_topic("/joint_states", "sensor_msgs/msg/JointState", [offered(True, True)])
    writer.write(topic, 5, joint_state_bytes(0.0))
    assert writer.close() == {"/joint_states": 1}
    import yaml

    meta = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    (entry,) = meta["topics_with_message_count"]
    assert entry["topic_metadata"]["name"] == "/joint_states" and entry["message_count"] == 1
    assert entry["topic_metadata"]["offered_qos_profiles"][0]["durability"] == "transient_local"


def test_a_custom_type_is_found_as_a_msg_file_under_an_ament_prefix(tmp_path: Path) -> None:
    msg = tmp_path / "share" / "my_robot_msgs" / "msg"
    msg.mkdir(parents=True)
    (msg / "Gait.msg").write_text("std_msgs/Header header\nfloat64 phase\nstring[] feet\n")
    store = typestore_for("kilted")
    definition, rihs01 = message_definition(store, "my_robot_msgs/msg/Gait", prefixes=[tmp_path])
    assert definition.startswith("std_msgs/Header header") and "MSG: std_msgs/Header" in definition
    assert rihs01.startswith("RIHS01_")
    with pytest.raises(TopicTypeError):
        message_definition(store, "my_robot_msgs/msg/Unknown", prefixes=[tmp_path])


WRITE_UNTIL_FULL = textwrap.dedent(
    """
    import sys
    from humanoid_bringup.recording.bag_writer import BagWriteError, BagWriter
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    msg = JointState(name=["j"] * 29, position=[0.1] * 29, velocity=[0.0] * 29, effort=[1.0] * 29)
    data = serialize_message(msg)
    writer = BagWriter(sys.argv[1], flush_period_s=0.05)
    topic = writer.add_topic("/joint_states", "sensor_msgs/msg/JointState")
    n = 0
    try:
        while n < 100000:
            writer.write(topic, 2_000_000 * n, data)
            n += 1
            if n % 200 == 0:
                writer.flush()
    except BagWriteError as exc:
        print("STOPPED", n, exc, flush=True)
        try:
            writer.write(topic, 0, data)
        except BagWriteError:
            print("STAYS STOPPED", flush=True)
        sys.exit(3)
    """
)


def limit_file_size(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_full_disk_stops_the_writer_with_an_error_and_keeps_what_was_written(tmp_path: Path) -> None:
    """The operating system refuses to grow the file past 1 MB (RLIMIT_FSIZE, as a full disk would refuse):
    the writer stops for good with an error naming the cause, and the file keeps whole chunks that
    recover_bag completes (done here without the limit, as after freeing room)."""
    limit = 1_000_000
    bag = tmp_path / "bag"
    proc = subprocess.run(
        [sys.executable, "-c", WRITE_UNTIL_FULL, str(bag)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: limit_file_size(limit),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "STOPPED" in proc.stdout and "STAYS STOPPED" in proc.stdout, proc.stdout
    assert "File too large" in proc.stdout and "--recover" in proc.stdout, proc.stdout
    written = int(proc.stdout.split("STOPPED ")[1].split()[0])
    file = bag / "bag.mcap"
    assert 0 < file.stat().st_size <= limit
    kept = stream_messages(file)
    assert 0.5 * limit / 1000 < len(kept) <= written  # about 1 kB per message
    report = recover_bag(bag)
    assert report.messages == len(kept) and report.cut_record


def test_replay_clock_rate_start_and_pause() -> None:
    now = [100.0]
    clock = ReplayClock(t_start_ns=5_000_000_000, rate=2.0, clock=lambda: now[0])
    assert clock.due(7_000_000_000) == pytest.approx(101.0)  # 2 s of bag time at rate 2
    now[0] = 100.5
    assert clock.bag_time_ns() == 6_000_000_000
    assert clock.set_paused(True) and not clock.set_paused(True)
    now[0] = 110.0  # paused 9.5 s: nothing becomes due
    assert clock.bag_time_ns() == 6_000_000_000
    clock.set_paused(False)
    assert clock.due(7_000_000_000) == pytest.approx(110.5)
    slept: list[float] = []

    def sleep(dt: float) -> None:
        slept.append(dt)
        now[0] += dt

    assert clock.wait_until(7_000_000_000, sleep=sleep) and now[0] >= 110.5 and sum(slept) > 0.4
    clock.stop()
    assert not clock.wait_until(9_000_000_000, sleep=sleep)
    assert (
        clock_due(0, None, 100.0) and not clock_due(9_000_000, 0, 100.0) and clock_due(10_000_000, 0, 100.0)
    )
    with pytest.raises(ValueError, match="rate"):
        ReplayOptions(rate=0.0).check()
    with pytest.raises(ValueError, match="start"):
        ReplayOptions(start_s=-1.0).check()


def test_cdr_time_of_a_clock_message() -> None:
    from rclpy.serialization import serialize_message
    from rosgraph_msgs.msg import Clock

    from humanoid_control.ros.node_utils import to_time_msg

    assert cdr_time_ns(bytes(serialize_message(Clock(clock=to_time_msg(12.5))))) == 12_500_000_000
    assert cdr_time_ns(b"\x00\x01") is None


def test_humanoid_record_refuses_an_existing_bag_and_replay_a_killed_one(tmp_path: Path) -> None:
    from humanoid_bringup.evaluation.launched_graph import isolated_ros_env

    env = {**os.environ, **isolated_ros_env(tmp_path / "logs")}
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "taken.mcap").write_bytes(b"\x89MCAP0\r\n")
    record = [sys.executable, "-m", "humanoid_bringup.recording.recorder_node"]
    proc = subprocess.run([*record, "-o", str(taken)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "exists and is not empty" in proc.stdout + proc.stderr, proc
    replay = [sys.executable, "-m", "humanoid_bringup.recording.replay_node", str(taken)]
    proc = subprocess.run(replay, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "--recover" in proc.stdout + proc.stderr, proc
