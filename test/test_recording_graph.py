"""Recording through the ROS graph (issue 44): a lockstep run recorded with `record:=`, a recorder killed
and recovered, replay to a subscriber, `--record` on the evaluations. Unit tests of the recorder's cores
are in test_recording.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_recording import limit_file_size

from humanoid_bringup.recording.bag_writer import (
    typestore_for,
)
from humanoid_bringup.recording.recorder_node import cdr_time_ns
from humanoid_bringup.recording.recovery import is_complete, recover_bag

REPO = Path(__file__).resolve().parent.parent


GRID = 0.02  # the probe's /teleop/cmd_vel grid (s of simulated time)
KILL_AT = 6.0  # recorder B is killed once the probe has seen this much simulated time (s)
END_AT = 10.0  # the run's end: the probe holds simulated time there (s)
FULL_AT = 1_500_000  # recorder C's file size limit (B): the disk that fills
# not compared with the probe: messages from before the probe subscribed (node start-up parameter events,
# transient-local log history with a 10 s lifespan), the recorder's own last log line (after its bag is
# closed), and the latched status of the test's recorders B and C
NOT_COMPARED = {"/rosout", "/parameter_events", "/recorder_b/status", "/recorder_c/status"}


def start_recorder(
    bag: Path, name: str, log: Any, env: dict[str, str], extra: tuple[str, ...] = (), limit: int | None = None
) -> subprocess.Popen[bytes]:
    """``humanoid-record`` as a process of the test (node ``name``, time base sim); ``limit``: the largest
    file it may write (B), as a full disk would refuse to grow it."""
    cmd = [
        *_record_command(),
        "-o",
        str(bag),
        "--time-base",
        "sim",
        *extra,
        "--ros-args",
        "-r",
        f"__node:={name}",
    ]
    return subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=None if limit is None else (lambda: limit_file_size(limit)),
    )


def _record_command() -> list[str]:
    script = Path(sys.executable).parent / "humanoid-record"
    return (
        [str(script)]
        if script.exists()
        else [sys.executable, "-m", "humanoid_bringup.recording.recorder_node"]
    )


def _replay_command() -> list[str]:
    script = Path(sys.executable).parent / "humanoid-replay"
    return (
        [str(script)] if script.exists() else [sys.executable, "-m", "humanoid_bringup.recording.replay_node"]
    )


class TopicCounter:
    """Raw subscriptions that count (or keep) every message of the given topics, on ``node``: reliable where
    every publisher is, transient-local where every publisher is (a latched value is then received, as the
    recorder receives it), deep keep-last queues."""

    def __init__(self, node: Any, topics: dict[str, str], keep: bool = False) -> None:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        from humanoid_bringup.recording.ros_types import import_message

        self.lock = threading.Lock()
        self.messages: dict[str, list[bytes]] = {t: [] for t in topics}
        self.counts: dict[str, int] = dict.fromkeys(topics, 0)
        self.keep = keep
        self.subs = []
        for topic, msgtype in topics.items():
            infos = node.get_publishers_info_by_topic(topic)
            reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
            latched = bool(infos) and all(
                i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos
            )
            qos = QoSProfile(
                history=HistoryPolicy.KEEP_LAST,
                depth=100000,
                reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
            )
            cls = import_message(msgtype)
            self.subs.append(
                node.create_subscription(cls, topic, lambda d, t=topic: self._on(t, d), qos, raw=True)
            )

    def _on(self, topic: str, data: bytes) -> None:
        with self.lock:
            self.counts[topic] += 1
            if self.keep:
                self.messages[topic].append(bytes(data))

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counts)

    def matched(self) -> bool:
        return all(s.get_publisher_count() > 0 for s in self.subs)


def wait_until(what: Any, condition: Any, timeout: float, alive: Any = None) -> None:
    """Wait (wall time) for ``condition()``; ``what`` (a string, or a callable giving one) names it."""
    end = time.monotonic() + timeout
    while not condition():
        text = what() if callable(what) else what
        assert alive is None or alive(), f"stopped while waiting for {text}"
        assert time.monotonic() < end, f"timed out waiting for {text}"
        time.sleep(0.05)


def wait_stable(counter: TopicCounter, settle: float = 1.0, timeout: float = 60.0) -> dict[str, int]:
    """The counts once nothing has arrived for ``settle`` s of wall time (messages in flight delivered)."""
    end = time.monotonic() + timeout
    last, since = counter.snapshot(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.1)
        now = counter.snapshot()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle:
            break
    return last


def read_bag(path: Path) -> dict[str, list[tuple[int, bytes]]]:
    """(log time, data) per topic, with rosbags."""
    from rosbags.rosbag2 import Reader

    out: dict[str, list[tuple[int, bytes]]] = {}
    with Reader(path) as reader:
        for conn in reader.connections:
            out.setdefault(conn.topic, [])
        for conn, t, data in reader.messages():
            out[conn.topic].append((t, bytes(data)))
    return out


@pytest.mark.slow
def test_record_a_lockstep_run_kill_a_recorder_recover_and_replay(tmp_path: Path) -> None:
    """10 s of lockstep simulation (the policy walking at 0.3 m/s from 3 s under the mode manager, with the
    estimator), recorded through the launch (record:=): every topic's count in the bag equals the probe's;
    the bag reads back with rosbags and with the mcap reader (profile ros2); metadata.yaml lists each topic
    with its type and count. Recorder B (the test's own process) is killed with SIGKILL at about 6 s:
    humanoid-record --recover gives a bag ending less than 1.5 s of simulated time before the kill, and
    humanoid-replay of it delivers the same messages in the same order to a subscriber. Recorder C's file
    cannot grow past 1.5 MB: it stops with an error (exit code 1) and keeps what it wrote."""
    import yaml
    from geometry_msgs.msg import Twist
    from std_msgs.msg import String

    from humanoid_bringup.evaluation.graph_probe import GraphProbe
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    env = {**os.environ, **isolated_ros_env(tmp_path / "ros_logs")}
    bag_a, bag_b, bag_c = tmp_path / "run_bag", tmp_path / "killed_bag", tmp_path / "full_bag"
    pubs: dict[str, Any] = {}
    statuses: dict[str, dict[str, Any]] = {}  # the recorders' latest status
    status_at: dict[str, float] = {}  # when it came (s, monotonic)

    def setup(node: Any) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        pubs["teleop"] = node.create_publisher(Twist, "/teleop/cmd_vel", 10)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )

        def on_status(msg: Any, name: str) -> None:
            statuses[name] = json.loads(msg.data)
            status_at[name] = time.monotonic()

        for name in ("recorder", "recorder_b", "recorder_c"):
            node.create_subscription(String, f"/{name}/status", lambda m, n=name: on_status(m, n), latched)

    def on_tick(msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if t >= 3.0 and round(t * 1000.0) % round(GRID * 1000.0) == 0:
            cmd = Twist()
            cmd.linear.x = 0.3
            pubs["teleop"].publish(cmd)

    probe = GraphProbe(
        subscribe_description=False,
        name="record_probe",
        contacts=False,
        lockstep_peer=True,
        on_tick=on_tick,
        setup=setup,
        ack_period=GRID,
        hold_timeout=120.0,  # the hold at 10 s lasts while the recorder catches up and closes its bag
    )
    graph = LaunchedGraph(
        {
            "controller": "policy",
            "mode_manager": "true",
            "estimator": "true",
            "clock": "lockstep",
            "start_paused": "true",
            "sim_duration_s": "60.0",  # the probe holds the simulation at 10 s
            "record": str(bag_a),
        },
        tmp_path / "graph.log",
    ).start()
    logs = {n: (tmp_path / f"{n}.log").open("wb") for n in ("b", "c")}
    exclude = ("--exclude", "/rosout", "/parameter_events")
    rec_b = start_recorder(bag_b, "recorder_b", logs["b"], env, exclude)
    rec_c = start_recorder(bag_c, "recorder_c", logs["c"], env, limit=FULL_AT)
    try:
        node = probe.node
        own = {f"/{n}/status" for n in ("recorder", "recorder_b", "recorder_c")}

        def published() -> dict[str, str]:
            """The graph's public topics with a publisher (not those with only subscribers)."""
            return {
                name: types[0]
                for name, types in node.get_topic_names_and_types()
                if not any(p.startswith("_") for p in name.split("/"))
                and name not in NOT_COMPARED | own
                and node.count_publishers(name) > 0
            }

        essential = (
            "/joint_states",
            "/clock",
            "/odom",
            "/cmd_vel",
            "/mode_manager/state",
            "/policy_runner/state",
        )
        wait_until(
            lambda: (
                f"the graph's publishers ({sorted(published())}) and the mode manager reading /teleop/cmd_vel"
            ),
            lambda: pubs["teleop"].get_subscription_count() >= 1 and set(essential) <= set(published()),
            180.0,
            graph.running,
        )
        seen = [published(), time.monotonic()]

        def settled() -> bool:  # no new topic for 2 s: every node has created its publishers
            now = published()
            if now != seen[0]:
                seen[:] = [now, time.monotonic()]
            return time.monotonic() - seen[1] >= 2.0

        wait_until("the graph's topics settled", settled, 60.0, graph.running)
        topics = dict(seen[0])
        counter = TopicCounter(node, topics, keep=True)

        def not_ready() -> list[str]:
            """(recorder, topic) pairs with fewer matched publishers than the graph has."""
            out = [f"probe: {s.topic_name}" for s in counter.subs if s.get_publisher_count() < 1]
            for name in ("recorder", "recorder_b", "recorder_c"):
                matched = statuses.get(name, {}).get("publishers", {})
                out += [f"{name}: {t}" for t in topics if matched.get(t, 0) < node.count_publishers(t)]
            return out

        wait_until(
            lambda: f"the recorders subscribed: {not_ready()}", lambda: not not_ready(), 120.0, graph.running
        )
        # every peer joined, time still at 0: the counts before the run differ by when each subscribed (a
        # transient-local topic's late subscriber gets only its publisher's last few messages); the run's
        # messages are counted from here on. Then simulated time runs to 10 s and is held there (hold_at)
        peers = ("policy_runner", "mode_manager", "state_estimator")
        probe.start_graph(peers=peers, running=graph.running, hold_at=END_AT, unpause=False)
        probe_base = wait_stable(counter, settle=1.5)
        settled_at = time.monotonic()
        wait_until(
            "a status of the recorder after that",
            lambda: status_at.get("recorder", 0.0) > settled_at + 1.0,
            30.0,
        )
        recorder_base = dict(statuses["recorder"]["topics"])
        assert counter.snapshot() == probe_base
        ok, why = probe.call_set_pause(False)
        assert ok, why
        wait_until(f"simulated time {KILL_AT} s", lambda: probe.sim_time() >= KILL_AT, 300.0, graph.running)
        t_kill = probe.sim_time()
        rec_b.send_signal(signal.SIGKILL)
        assert rec_b.wait(10) == -signal.SIGKILL
        assert rec_c.wait(300) == 1
        # the end of the run: simulated time held at 10 s (nothing more is published), the launch's recorder
        # caught up with the probe, then stopped on its own (SIGINT by its PID): its bag is closed while every
        # publisher is alive (a node that exits may not deliver its last message to every reader)
        assert probe.run_until(END_AT, timeout=600.0) == pytest.approx(END_AT)

        def behind() -> dict[str, tuple[int | None, int]]:
            """Topics whose count in the launch's recorder's status differs from the probe's."""
            recorded = statuses.get("recorder", {}).get("topics", {})
            run = {t: n - recorder_base.get(t, 0) for t, n in recorded.items()}
            return {
                t: (run.get(t), n - probe_base[t])
                for t, n in counter.snapshot().items()
                if run.get(t) != n - probe_base[t]
            }

        wait_until(
            lambda: f"the recorder catching up: {behind()}", lambda: not behind(), 120.0, graph.running
        )
        pid = int(graph.log().split("process started: recorder [pid ")[1].split("]")[0])
        os.kill(pid, signal.SIGINT)
        wait_until(
            "the recorder's exit", lambda: f"recorder [pid {pid}] finished cleanly" in graph.log(), 60.0
        )
        final = wait_stable(counter)
        with probe.lock:
            walked = probe.data.truth_pos[-1][0] - probe.data.truth_pos[0][0]
        probe.release()
    finally:
        probe.close()
        graph.stop()
        for proc in (rec_b, rec_c):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for f in logs.values():
            f.close()
    assert walked > 0.5, f"the robot walked {walked:.2f} m"

    # A: every topic's count in the bag equals the probe's; metadata.yaml lists type and count
    meta = yaml.safe_load((bag_a / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    listed = {e["topic_metadata"]["name"]: e for e in meta["topics_with_message_count"]}
    in_bag = {
        n: e["message_count"] - recorder_base.get(n, 0) for n, e in listed.items() if n not in NOT_COMPARED
    }
    counted = {t: n - probe_base[t] for t, n in final.items()}
    assert in_bag == counted, {
        t: (in_bag.get(t), counted.get(t))
        for t in set(in_bag) | set(counted)
        if in_bag.get(t) != counted.get(t)
    }
    assert counted["/joint_states"] == counted["/clock"] >= 5000  # 10 s at 500 Hz, every tick
    print(f"run: {counted}; before it: probe {probe_base}, recorder {recorder_base}")
    for name, msgtype in topics.items():
        assert listed[name]["topic_metadata"]["type"] == msgtype
    assert float(meta["custom_data"]["recorder_cpu_pct"]) > 0.0
    messages = read_bag(bag_a)  # rosbags
    assert {t: len(m) for t, m in messages.items()} == {n: e["message_count"] for n, e in listed.items()}
    from mcap.reader import make_reader

    with (bag_a / "run_bag.mcap").open("rb") as f:
        reader = make_reader(f)
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
        assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}
        per_channel: dict[str, int] = {}
        for _schema, channel, _message in reader.iter_messages():
            per_channel[channel.topic] = per_channel.get(channel.topic, 0) + 1
    assert per_channel == {n: e["message_count"] for n, e in listed.items() if e["message_count"] > 0}

    # /tf and /tf_static (tf_publisher, the estimator; where tf2_msgs is built): the robot from the bag alone
    import importlib.util

    if importlib.util.find_spec("tf2_msgs") is not None:
        store = typestore_for("kilted")
        edges = {
            (tf.header.frame_id, tf.child_frame_id)
            for topic in ("/tf", "/tf_static")
            for _, data in messages[topic]
            for tf in store.deserialize_cdr(data, "tf2_msgs/msg/TFMessage").transforms
        }
        reached, frontier = {"odom"}, ["odom"]
        while frontier:
            parent = frontier.pop()
            for child in {c for p, c in edges if p == parent} - reached:
                reached.add(child)
                frontier.append(child)
        assert {"base_link", "pelvis", "left_ankle_roll_link", "right_wrist_roll_link"} <= reached, sorted(
            reached
        )

    # C: stopped by the file size limit with an error, what it wrote kept and recoverable
    log_c = (tmp_path / "c.log").read_text(errors="replace")
    assert "recording stopped" in log_c and "File too large" in log_c, log_c[-2000:]
    assert (bag_c / "full_bag.mcap").stat().st_size <= FULL_AT and not (bag_c / "metadata.yaml").exists()
    assert recover_bag(bag_c).messages > 500

    # B: killed at t_kill; recovered, its messages end less than 1.5 s of simulated time before the kill
    assert not (bag_b / "metadata.yaml").exists()
    proc = subprocess.run(
        [*_record_command(), "--recover", str(bag_b)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and "recovered" in proc.stdout, proc
    killed = read_bag(bag_b)
    last_log = max(m[-1][0] for m in killed.values() if m) * 1e-9
    last_stamp = (cdr_time_ns(killed["/joint_states"][-1][1]) or 0) * 1e-9
    # (the log time is the last /clock B took: a state's stamp may be a tick ahead of it)
    assert t_kill - 1.5 < min(last_stamp, last_log) and max(last_stamp, last_log) <= t_kill + 0.1, (
        t_kill,
        last_stamp,
        last_log,
    )
    # of the run (log time > 0: not the latched history each got when it subscribed), B kept nothing A did
    # not record (A does not record its own status; several publishers of one topic interleave differently
    # for each reader, hence multisets)
    for topic in set(killed) & set(messages):
        extra = Counter(d for t, d in killed[topic] if t > 0) - Counter(d for _, d in messages[topic])
        assert not extra, topic

    # replay B to a subscriber: the same messages in the same order (bytes, hence stamps, unchanged)
    meta_b = yaml.safe_load((bag_b / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    types = {
        e["topic_metadata"]["name"]: e["topic_metadata"]["type"] for e in meta_b["topics_with_message_count"]
    }
    expected = {t: [d for _, d in m] for t, m in killed.items()}
    assert replay_to_a_subscriber(bag_b, types, expected, env, tmp_path / "replay.log") == expected


def replay_to_a_subscriber(
    bag: Path, types: dict[str, str], expected: dict[str, list[bytes]], env: dict[str, str], log: Path
) -> dict[str, list[bytes]]:
    """``humanoid-replay <bag> --paused``; a subscriber (this process) to every topic of the bag, matched,
    then the replay unpaused: what it received per topic, once as many as ``expected`` (or 120 s passed)."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from std_srvs.srv import SetBool

    with log.open("wb") as out:
        replay = subprocess.Popen(
            [*_replay_command(), str(bag), "--paused"], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    context = rclpy.Context()
    rclpy.init(context=context)
    listener = rclpy.create_node("replay_listener", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(listener)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException):
            executor.spin()

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:

        def running() -> bool:
            return replay.poll() is None

        wait_until(
            "the replay's publishers", lambda: all(listener.count_publishers(t) for t in types), 60.0, running
        )
        got = TopicCounter(listener, types, keep=True)
        client = listener.create_client(SetBool, "/replay/set_pause")
        wait_until(
            "the replay subscribed", lambda: got.matched() and client.service_is_ready(), 60.0, running
        )
        future = client.call_async(SetBool.Request(data=False))
        wait_until("the unpause", future.done, 30.0)
        assert replay.wait(300) == 0, log.read_text()[-2000:]
        counts = {t: len(m) for t, m in expected.items()}
        with contextlib.suppress(AssertionError):  # the comparison then shows what is missing
            wait_until("every replayed message", lambda: got.snapshot() == counts, 120.0)
        with got.lock:
            return {t: list(m) for t, m in got.messages.items()}
    finally:
        context.try_shutdown()
        spinner.join(5)
        if replay.poll() is None:
            replay.kill()
            replay.wait(10)


def test_record_runs_gives_each_launched_graph_its_bag_beside_its_log(tmp_path: Path) -> None:
    """``humanoid-eval ... --record``: every graph launched afterwards gets ``record:=`` (a bag beside its
    log, replaced on a rerun), unless its arguments name one."""
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, record_runs

    launch = tmp_path / "empty.launch.yaml"
    launch.write_text(
        "launch:\n"
        + "".join(
            f'- arg:\n    name: {n}\n    default: ""\n' for n in ("clock", "record", "record_overwrite")
        )
    )
    record_runs()
    try:
        run = LaunchedGraph({"clock": "lockstep"}, tmp_path / "run_1" / "graph.log", launch)
        (tmp_path / "run_1").mkdir()
        run.start()
        assert run.wait(60) == 0
        run.stop()
        assert run.arguments["record"] == str(tmp_path / "run_1" / "bag")
        assert run.arguments["record_overwrite"] == "true"
        own = LaunchedGraph({"record": "elsewhere"}, tmp_path / "launch_policy.log", launch)
        assert own.bag_path == tmp_path / "launch_policy_bag"
        own.start()
        own.wait(60)
        own.stop()
        assert own.arguments["record"] == "elsewhere"
    finally:
        record_runs(False)
    plain = LaunchedGraph({}, tmp_path / "graph.log", launch).start()
    plain.wait(60)
    plain.stop()
    assert "record" not in plain.arguments


@pytest.mark.slow
def test_humanoid_eval_locomotion_record_writes_the_run_bag_beside_its_json(tmp_path: Path) -> None:
    """``humanoid-eval locomotion --short --record``: the run's bag (complete, simulated time) beside the
    JSON, its /joint_states every tick of the run."""
    from humanoid_bringup.evaluation.launched_graph import isolated_ros_env

    env = {**os.environ, **isolated_ros_env(tmp_path / "ros_logs")}
    script = Path(sys.executable).parent / "humanoid-eval"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "humanoid_bringup.evaluation.evaluate"]
    proc = subprocess.run(
        [*cmd, "locomotion", "--short", "--record", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith("locomotion_")]
    assert (folder / "locomotion_holosoma_g1_ppo.json").exists() and is_complete(folder / "bag")
    import yaml

    meta = yaml.safe_load((folder / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    counts = {e["topic_metadata"]["name"]: e["message_count"] for e in meta["topics_with_message_count"]}
    assert meta["custom_data"]["time_base"] == "sim"
    assert counts["/joint_states"] >= 500 * result["time_survived_s"] and counts["/cmd_vel"] > 0
    assert meta["duration"]["nanoseconds"] * 1e-9 >= result["time_survived_s"]


def test_the_recorder_reports_and_skips_a_topic_it_cannot_record_and_records_the_rest(tmp_path: Path) -> None:
    """A message package missing where the recorder runs (here ``diagnostic_msgs``, shadowed by a package that
    fails to import): ``/diagnostics`` is reported (log, status, metadata) and skipped; ``/chatter`` is
    recorded, every message; SIGINT closes the bag."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from humanoid_bringup.evaluation.launched_graph import isolated_ros_env

    env = {**os.environ, **isolated_ros_env(tmp_path / "logs")}
    stub = tmp_path / "stub" / "diagnostic_msgs"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ImportError('diagnostic_msgs is not installed here (test stub)')\n"
    )
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "stub"), env.get("PYTHONPATH", "")])
    bag = tmp_path / "bag"
    status: dict[str, Any] = {}
    with (tmp_path / "recorder.log").open("wb") as log:
        recorder = start_recorder(bag, "recorder", log, env)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("talker", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException):
            executor.spin()

    spinner = threading.Thread(target=spin, daemon=True)
    try:
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        diagnostics = node.create_publisher(DiagnosticArray, "/diagnostics", reliable)
        chatter = node.create_publisher(String, "/chatter", reliable)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(
            String, "/recorder/status", lambda m: status.update(json.loads(m.data)), latched
        )
        spinner.start()

        def alive() -> bool:
            return recorder.poll() is None

        def ready() -> bool:
            return (
                "/diagnostics" in status.get("skipped", {})
                and status.get("publishers", {}).get("/chatter") == 1
            )

        wait_until(lambda: f"the recorder's status {status}", ready, 60.0, alive)
        for k in range(20):
            chatter.publish(String(data=f"hello {k}"))
            diagnostics.publish(DiagnosticArray())
        wait_until(
            lambda: f"20 on /chatter: {status}", lambda: status["topics"].get("/chatter") == 20, 30.0, alive
        )
        recorder.send_signal(signal.SIGINT)
        assert recorder.wait(30) == 0
    finally:
        context.try_shutdown()
        spinner.join(5)
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait(10)
    assert "no Python message class installed here" in status["skipped"]["/diagnostics"]
    text = (tmp_path / "recorder.log").read_text()
    assert "not recording /diagnostics" in text and "test stub" in text
    import yaml

    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    counts = {e["topic_metadata"]["name"]: e["message_count"] for e in meta["topics_with_message_count"]}
    assert counts.get("/chatter") == 20 and "/diagnostics" not in counts
    assert "/diagnostics" in json.loads(meta["custom_data"]["skipped_topics"])
    from rclpy.serialization import deserialize_message

    recorded = [deserialize_message(d, String).data for _, d in read_bag(bag)["/chatter"]]
    assert recorded == [f"hello {k}" for k in range(20)]


# ---------------------------------------------------------------------------------------------- the graph
