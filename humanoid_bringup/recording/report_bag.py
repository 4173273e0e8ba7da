"""``humanoid-report``'s reading of a bag (pure, no rclpy): the topics it plots, as time series.

A bag is a rosbag2 folder (``humanoid-record``; MCAP or SQLite storage) read with ``rosbags``' ``AnyReader``;
messages are deserialized with the message definitions the bag carries, else with rosbags' typestore of
ROS 2 Kilted. A killed recording (no ``metadata.yaml``) is refused with the hint to run ``humanoid-record
--recover`` first; a path that is no bag raises :class:`BagError` (the command's exit code 2).

Times are seconds on the run's clock: simulated time for a bag recorded in simulation (the recorder's
``time_base`` ``sim``; its ``/clock`` starts at 0), else seconds since the bag's first message. A message
with a header is placed at its ``header.stamp``, a JSON state carrying ``t`` (the mode manager's, the
driver's ``~/down`` and ``~/switch``) at that time, anything else at its log time (when the recorder took
it). The per-tick streams (joint states, ground truth, odometry, contact wrenches) are thinned to at most
``max_rate_hz`` samples per second of log time before they are deserialized (plots, not estimation).

Frames: velocities are ``(vx, vy, wz)`` (m/s, m/s, rad/s): ``/cmd_vel`` and its sources in the heading
frame, ``/odom`` and ``/sim/ground_truth`` twists in the base frame; ground-truth poses world -> base
(position m, quaternion w, x, y, z); contact forces (N) in each wrench's own frame (the sole frames for
``/sim/contacts/*``, ``odom`` for the estimator's ``/contacts/*``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BagError", "DiagEntry", "RunData", "Series", "TopicNames", "read_run"]

#: a log-time origin below this (ns) is simulated time (the epoch is decades later)
SIM_TIME_LIMIT_NS = 10**9 * 86400 * 365


class BagError(Exception):
    """The path is not a readable bag (the message says why and what to do)."""


@dataclass(frozen=True)
class TopicNames:
    """The topics the report reads (the launch file's names)."""

    driver: str = "/robot_driver"
    mode_manager: str = "/mode_manager"
    cmd_vel: str = "/cmd_vel"
    cmd_sources: tuple[str, ...] = ("/teleop/cmd_vel", "/autonomy/cmd_vel")
    odom: str = "/odom"
    truth: str = "/sim/ground_truth"
    joints: str = "/joint_states"
    contacts: tuple[str, ...] = ("/sim/contacts", "/contacts")
    walking_status: str = "/walking/status"
    push: str = "/sim/push"
    diagnostics: str = "/diagnostics"
    clock: str = "/clock"


@dataclass
class Series:
    """Samples ``v[i]`` (one row each) at times ``t[i]`` (s, the run's clock)."""

    t: np.ndarray
    v: np.ndarray

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class DiagEntry:
    """One ``diagnostic_msgs/DiagnosticStatus``: time (s), name, level (0 OK, 1 WARN, 2 ERROR, 3 STALE)."""

    t: float
    name: str
    level: int
    message: str


@dataclass
class RunData:
    """What a bag holds for the report (module docstring for times and frames)."""

    path: Path
    topics: dict[str, tuple[str, int]]  # name -> (type, message count)
    start_s: float
    end_s: float
    origin_ns: int
    time_base: str  # "sim" or "system"
    custom: dict[str, str] = field(default_factory=dict)
    cmd_vel: dict[str, Series] = field(default_factory=dict)  # topic -> (vx, vy, wz)
    odom: Series | None = None  # (vx, vy, wz), base frame
    truth: Series | None = None  # (x, y, z, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz): pose world, twist base
    joint_names: list[str] = field(default_factory=list)
    joints: Series | None = None  # (q..., dq...) in joint_names order
    contacts: dict[str, dict[str, Series]] = field(default_factory=dict)  # prefix -> side -> (fx, fy, fz)
    walking_status: Series | None = None
    walking_labels: list[str] = field(default_factory=list)
    mm_states: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    mm_reports: list[dict[str, Any]] = field(default_factory=list)
    driver_modes: list[tuple[float, str]] = field(default_factory=list)
    switches: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    downs: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    pushes: list[tuple[float, np.ndarray]] = field(default_factory=list)  # start/end, force (N, world)
    loop: list[tuple[float, dict[str, str]]] = field(default_factory=list)  # the driver loop's diagnostics
    diagnostics: list[DiagEntry] = field(default_factory=list)
    last_clock_s: float | None = None
    names: TopicNames = field(default_factory=TopicNames)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    @property
    def simulated(self) -> bool:
        return self.time_base == "sim"


def _stamp(msg: Any) -> float:
    s = msg.header.stamp
    return float(s.sec) + 1e-9 * float(s.nanosec)


def _open(path: Path) -> Any:
    from rosbags.highlevel import AnyReader, AnyReaderError

    from humanoid_bringup.recording.bag_writer import typestore_for

    if not path.exists():
        raise BagError(f"{path} does not exist")
    if path.is_file() and (path.name == "metadata.yaml" or path.suffix in (".mcap", ".db3")):
        path = path.parent
    if not path.is_dir():
        raise BagError(f"{path} is not a bag: a rosbag2 folder (metadata.yaml and a .mcap file) is expected")
    if not (path / "metadata.yaml").is_file():
        if any(p.suffix == ".mcap" for p in path.iterdir()):
            raise BagError(
                f"{path} has no metadata.yaml (a killed recording?): run humanoid-record --recover {path} "
                "first"
            )
        raise BagError(f"{path} is not a bag: no metadata.yaml")
    try:
        reader = AnyReader([path], default_typestore=typestore_for("kilted"))
        reader.open()
    except (AnyReaderError, OSError, ValueError, KeyError) as exc:
        raise BagError(f"cannot read the bag {path}: {exc}") from None
    except Exception as exc:  # rosbags raises several types for a broken file
        raise BagError(f"cannot read the bag {path}: {type(exc).__name__}: {exc}") from None
    return reader


def _custom_data(path: Path) -> dict[str, str]:
    import yaml

    try:
        meta = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        return {str(k): str(v) for k, v in (meta.get("custom_data") or {}).items()}
    except Exception:
        return {}


def _json(data: str) -> dict[str, Any] | None:
    try:
        out = json.loads(data)
    except ValueError:
        return None
    return out if isinstance(out, dict) else None


class _Collector:
    """Accumulates rows per stream while the bag is read."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[list[float], list[Any]]] = {}

    def add(self, key: str, t: float, row: Any) -> None:
        ts, vs = self.rows.setdefault(key, ([], []))
        ts.append(t)
        vs.append(row)

    def series(self, key: str) -> Series | None:
        if key not in self.rows or not self.rows[key][0]:
            return None
        ts, vs = self.rows[key]
        order = np.argsort(np.asarray(ts), kind="stable")
        return Series(np.asarray(ts)[order], np.asarray(vs, dtype=float)[order])


def read_run(path: str | Path, names: TopicNames | None = None, max_rate_hz: float = 100.0) -> RunData:
    """Read the bag at ``path`` (module docstring). ``BagError`` if it is not a readable bag."""
    names = names or TopicNames()
    path = Path(path)
    reader = _open(path)
    bag_path = Path(reader.paths[0])
    try:
        custom = _custom_data(bag_path)
        start_ns, end_ns = int(reader.start_time), int(reader.end_time)
        if reader.message_count == 0:
            start_ns = end_ns = 0
        sim = custom.get("time_base") == "sim" or (
            custom.get("time_base") != "system" and start_ns < SIM_TIME_LIMIT_NS
        )
        origin = 0 if sim else start_ns
        topics = {c.topic: (c.msgtype, 0) for c in reader.connections}
        for c in reader.connections:
            topics[c.topic] = (c.msgtype, topics[c.topic][1] + int(c.msgcount))
        run = RunData(
            path=bag_path,
            topics=topics,
            start_s=(start_ns - origin) * 1e-9,
            end_s=(end_ns - origin) * 1e-9,
            origin_ns=origin,
            time_base="sim" if sim else "system",
            custom=custom,
            names=names,
        )
        off = origin * 1e-9
        d = names.driver
        contact_topics = {
            c.topic: (prefix, c.topic[len(prefix) + 1 :])
            for c in reader.connections
            for prefix in names.contacts
            if c.topic.startswith(prefix + "/") and c.msgtype == "geometry_msgs/msg/WrenchStamped"
        }
        thinned = {names.joints, names.truth, names.odom, *contact_topics}
        wanted = {
            names.cmd_vel,
            *names.cmd_sources,
            names.odom,
            names.truth,
            names.joints,
            *contact_topics,
            names.walking_status,
            names.push,
            names.diagnostics,
            f"{names.mode_manager}/state",
            f"{names.mode_manager}/report",
            f"{d}/mode",
            f"{d}/switch",
            f"{d}/down",
        }
        conns = [c for c in reader.connections if c.topic in wanted]
        clock = [c for c in reader.connections if c.topic == names.clock]
        if clock:  # the last simulated time of the run: the end of the operation record's accounting
            last_raw = None
            for _c, _t, raw in reader.messages(connections=clock, start=max(0, end_ns - 2 * 10**9)):
                last_raw = raw
            if last_raw is not None:
                msg = reader.deserialize(last_raw, clock[0].msgtype)
                run.last_clock_s = float(msg.clock.sec) + 1e-9 * float(msg.clock.nanosec) - off
        period_ns = int(1e9 / max_rate_hz) if max_rate_hz > 0 else 0
        last_kept: dict[str, int] = {}
        rows = _Collector()
        for conn, t_ns, raw in reader.messages(connections=conns):
            topic = conn.topic
            if topic in thinned and period_ns:
                if t_ns - last_kept.get(topic, -(2**62)) < period_ns - period_ns // 20:
                    continue
                last_kept[topic] = t_ns
            t_log = (t_ns - origin) * 1e-9
            msg = reader.deserialize(raw, conn.msgtype)
            if topic == names.cmd_vel or topic in names.cmd_sources:
                rows.add(topic, t_log, (msg.linear.x, msg.linear.y, msg.angular.z))
            elif topic == names.odom:
                tw = msg.twist.twist
                rows.add(topic, _stamp(msg) - off, (tw.linear.x, tw.linear.y, tw.angular.z))
            elif topic == names.truth:
                p, o, tw = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
                row = (p.x, p.y, p.z, o.w, o.x, o.y, o.z, tw.linear.x, tw.linear.y, tw.linear.z)
                rows.add(topic, _stamp(msg) - off, (*row, tw.angular.x, tw.angular.y, tw.angular.z))
            elif topic == names.joints:
                if not run.joint_names:
                    run.joint_names = list(msg.name)
                if list(msg.name) != run.joint_names or len(msg.position) != len(msg.name):
                    continue
                dq = msg.velocity if len(msg.velocity) == len(msg.name) else np.zeros(len(msg.name))
                rows.add(topic, _stamp(msg) - off, np.concatenate([msg.position, dq]))
            elif topic in contact_topics:
                f = msg.wrench.force
                rows.add(topic, _stamp(msg) - off, (f.x, f.y, f.z))
            elif topic == names.walking_status:
                if not run.walking_labels and msg.layout.dim:
                    run.walking_labels = str(msg.layout.dim[0].label).split(",")
                data = np.asarray(msg.data, dtype=float)
                if len(data) and (not run.walking_labels or len(data) == len(run.walking_labels)):
                    t = float(data[0]) - off if run.walking_labels[:1] == ["t"] else t_log
                    rows.add(topic, t, data)
            elif topic == names.push:
                f = msg.wrench.force
                run.pushes.append((_stamp(msg) - off, np.array([f.x, f.y, f.z])))
            elif topic == names.diagnostics:
                t = _stamp(msg) - off
                for st in msg.status:
                    level = (
                        int.from_bytes(st.level, "little") if isinstance(st.level, bytes) else int(st.level)
                    )
                    run.diagnostics.append(DiagEntry(t, str(st.name), level, str(st.message)))
                    if st.name == "robot_driver: loop":
                        run.loop.append((t, {kv.key: kv.value for kv in st.values}))
            elif conn.msgtype == "std_msgs/msg/String":
                _string(run, topic, t_log, off, msg.data)
        run.cmd_vel = {k: s for k in (names.cmd_vel, *names.cmd_sources) if (s := rows.series(k)) is not None}
        run.odom = rows.series(names.odom)
        run.truth = rows.series(names.truth)
        run.joints = rows.series(names.joints)
        run.walking_status = rows.series(names.walking_status)
        for topic, (prefix, side) in sorted(contact_topics.items()):
            s = rows.series(topic)
            if s is not None:
                run.contacts.setdefault(prefix, {})[side] = s
        run.mm_states.sort(key=lambda x: x[0])
        run.driver_modes.sort(key=lambda x: x[0])
        run.pushes.sort(key=lambda x: x[0])
        return run
    finally:
        reader.close()


def _string(run: RunData, topic: str, t_log: float, off: float, data: str) -> None:
    """The JSON and plain string topics: the mode manager's state and report, the driver's mode, switches and
    down reports."""
    names = run.names
    if topic == f"{names.driver}/mode":
        run.driver_modes.append((t_log, str(data)))
        return
    doc = _json(data)
    if doc is None:
        return
    t = doc.get("t")
    t = float(t) - off if isinstance(t, int | float) and math.isfinite(t) else t_log
    if topic == f"{names.mode_manager}/state":
        run.mm_states.append((t, doc))
    elif topic == f"{names.mode_manager}/report":
        run.mm_reports.append(doc)
    elif topic == f"{names.driver}/switch":
        run.switches.append((t, doc))
    elif topic == f"{names.driver}/down":
        run.downs.append((t, doc))
