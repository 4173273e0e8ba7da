"""TF on every install: the kinematic tree of the served URDF against pinocchio, the ``tf_publisher`` node in
its own process, the built ``tf2_msgs`` type hash against upstream's, and the simulation graph's ``/tf`` and
``/tf_static`` (odom -> base_link -> every link) seen by a subscriber of another process."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
import pytest

from humanoid_bringup.description.kinematic_tree import (
    KinematicTree,
    LinkTransform,
    UrdfError,
    parse_urdf,
    quat_to_matrix,
)
from humanoid_bringup.description.tf_cdr import TfMessageWriter
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.urdf import BASE_LINK, robot_description_xml

CONFIG = load_robot_config("g1")


def _tf2_msgs() -> Any:
    """``tf2_msgs.msg``, or skip: make setup builds it; without it the stack runs without /tf."""
    try:
        import tf2_msgs.msg
    except ImportError:
        pytest.skip("tf2_msgs is not installed (make setup builds it; its build failed here): no /tf")
    return tf2_msgs.msg


@pytest.fixture(scope="module")
def served() -> tuple[str, KinematicTree]:
    urdf = robot_description_xml(CONFIG, mesh_uris="package")
    return urdf, parse_urdf(urdf)


def _pin_link_poses(urdf: str, positions: dict[str, float]) -> dict[str, pin.SE3]:
    """Every link's pose in the root link frame by pinocchio's forward kinematics (fixed root)."""
    model = pin.buildModelFromXML(urdf)
    data = model.createData()
    q = pin.neutral(model)
    for name, value in positions.items():
        joint = model.joints[model.getJointId(name)]
        if joint.nq == 2:  # a continuous joint: (cos, sin)
            q[joint.idx_q : joint.idx_q + 2] = math.cos(value), math.sin(value)
        else:
            q[joint.idx_q] = value
    pin.framesForwardKinematics(model, data, q)
    return {
        model.frames[i].name: data.oMf[i]
        for i in range(model.nframes)
        if model.frames[i].type == pin.FrameType.BODY
    }


def _chain(transforms: Iterable[LinkTransform], root: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Link poses ``(R, p)`` in ``root``'s frame from a set of parent -> child transforms, as a tf2 listener
    composes them."""
    by_child = {t.child: t for t in transforms}
    poses: dict[str, tuple[np.ndarray, np.ndarray]] = {root: (np.eye(3), np.zeros(3))}

    def pose(link: str) -> tuple[np.ndarray, np.ndarray]:
        if link not in poses:
            t = by_child[link]
            r, p = pose(t.parent)
            poses[link] = (r @ quat_to_matrix(t.rotation), r @ np.asarray(t.translation) + p)
        return poses[link]

    for child in by_child:
        pose(child)
    return poses


def _random_positions(seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    lo, hi = CONFIG.array("lower"), CONFIG.array("upper")
    return dict(zip(CONFIG.joint_names, rng.uniform(lo, hi).tolist(), strict=True))


# ------------------------------------------------------------------ the pure core


def test_served_description_is_one_tree_rooted_at_base_link(served: tuple[str, KinematicTree]) -> None:
    _, tree = served
    assert tree.root == BASE_LINK
    assert set(tree.moving_joint_names) == set(CONFIG.joint_names)
    static = {t.child: t for t in tree.fixed_transforms()}
    base = static[CONFIG.base_body]  # base_link -> pelvis: identity (the estimator's odom -> base_link)
    assert base.parent == BASE_LINK and base.translation == (0.0, 0.0, 0.0) and base.rotation == (0, 0, 0, 1)
    # every link but the root is the child of exactly one published transform
    moving = tree.moving_transforms(dict.fromkeys(CONFIG.joint_names, 0.0))
    children = [t.child for t in [*moving, *static.values()]]
    assert sorted(children) == sorted(set(tree.links) - {BASE_LINK})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chained_transforms_equal_pinocchio_forward_kinematics(
    served: tuple[str, KinematicTree], seed: int
) -> None:
    urdf, tree = served
    positions = _random_positions(seed)
    expected = _pin_link_poses(urdf, positions)
    chained = _chain([*tree.fixed_transforms(), *tree.moving_transforms(positions)], tree.root)
    direct = tree.link_poses(positions)
    assert set(chained) == set(tree.links) == set(direct)
    for link in tree.links:
        ref = expected[link]
        for r, p in (chained[link], direct[link]):
            assert np.abs(r - ref.rotation).max() < 1e-9, link
            assert np.abs(p - ref.translation).max() < 1e-9, link
    # rotations are unit quaternions
    for t in tree.moving_transforms(positions):
        assert math.isclose(sum(c * c for c in t.rotation), 1.0, abs_tol=1e-12)


SMALL = """<robot name="small">
  <link name="a"/><link name="b"/><link name="c"/><link name="d"/><link name="e"/>
  <joint name="slide" type="prismatic"><parent link="a"/><child link="b"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.5"/><axis xyz="0 2 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="spin" type="continuous"><parent link="b"/><child link="c"/>
    <origin xyz="0 0 0.5" rpy="1.0 0.2 -0.4"/><axis xyz="1 1 0"/></joint>
  <joint name="copy" type="revolute"><parent link="c"/><child link="d"/>
    <origin xyz="0.2 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
    <mimic joint="spin" multiplier="-2.0" offset="0.1"/></joint>
  <joint name="free" type="floating"><parent link="a"/><child link="e"/></joint>
</robot>"""


def test_prismatic_continuous_mimic_and_floating_joints() -> None:
    tree = parse_urdf(SMALL)
    assert tree.root == "a" and tree.moving_joint_names == ("slide", "spin")
    positions = {"slide": 0.4, "spin": 0.7}
    by_child = {t.child: t for t in tree.moving_transforms(positions)}
    assert set(by_child) == {"b", "c", "d"}  # the floating joint has no position: nothing for "e"
    mimic = KinematicTree.joint_transform(tree.joints[[j.name for j in tree.joints].index("copy")], -1.3)
    assert by_child["d"].rotation == pytest.approx(mimic.rotation, abs=1e-15)
    assert by_child["d"].translation == mimic.translation
    # prismatic and continuous against pinocchio (the mimic joint at its value as a free joint)
    ref = _pin_link_poses(SMALL, {"slide": 0.4, "spin": 0.7, "copy": -2.0 * 0.7 + 0.1})
    poses = tree.link_poses(positions)
    for link in ("b", "c", "d"):
        assert np.abs(poses[link][0] - ref[link].rotation).max() < 1e-12, link
        assert np.abs(poses[link][1] - ref[link].translation).max() < 1e-12, link
    # a joint without a position is left out; the others still come
    assert [t.child for t in tree.moving_transforms({"slide": 0.0})] == ["b"]


def _robot(body: str) -> str:
    return f'<robot name="bad">{body}</robot>'


J = '<joint name="{n}" type="{t}"><parent link="{p}"/><child link="{c}"/>{x}</joint>'


@pytest.mark.parametrize(
    ("urdf", "match"),
    [
        ("<robot><link name='a'>", "malformed URDF"),
        ("<model/>", "not <robot>"),
        (_robot(""), "no links"),
        (_robot('<link name="a"/><link name="a"/>'), "defined twice"),
        (_robot('<link name="a"/><link name="b"/>'), "one root link, this one has 2"),
        (_robot('<link name="a"/>' + J.format(n="j", t="fixed", p="a", c="z", x="")), "does not define"),
        (
            _robot(
                '<link name="a"/><link name="b"/><link name="c"/>'
                + J.format(n="j1", t="fixed", p="a", c="c", x="")
                + J.format(n="j2", t="fixed", p="b", c="c", x="")
            ),
            "two parent joints",
        ),
        (
            _robot(
                '<link name="r"/><link name="a"/><link name="b"/>'
                + J.format(n="j1", t="fixed", p="a", c="b", x="")
                + J.format(n="j2", t="fixed", p="b", c="a", x="")
            ),
            "not reachable",
        ),
        (
            _robot(
                '<link name="a"/><link name="b"/>'
                + J.format(n="j", t="revolute", p="a", c="b", x='<axis xyz="0 0 0"/>')
            ),
            "zero axis",
        ),
        (
            _robot(
                '<link name="a"/><link name="b"/>'
                + J.format(n="j", t="fixed", p="a", c="b", x='<origin xyz="0 nan 0"/>')
            ),
            "finite",
        ),
        (
            _robot('<link name="a"/><link name="b"/>' + J.format(n="j", t="ball", p="a", c="b", x="")),
            "type 'ball'",
        ),
        (
            _robot(
                '<link name="a"/><link name="b"/>'
                + J.format(n="j", t="revolute", p="a", c="b", x='<mimic joint="nope"/>')
            ),
            "mimics unknown joint",
        ),
    ],
)
def test_bad_descriptions_are_refused_with_the_reason(urdf: str, match: str) -> None:
    with pytest.raises(UrdfError, match=match):
        parse_urdf(urdf)


@pytest.mark.parametrize("seed", [3, 4])
def test_serialized_tf_message_equals_rclpys(served: tuple[str, KinematicTree], seed: int) -> None:
    """:class:`TfMessageWriter`'s bytes deserialize (rclpy) to the message rclpy would build, and have its
    length (padding bytes aside, which rclpy leaves uninitialized)."""
    msgs = _tf2_msgs()
    from geometry_msgs.msg import TransformStamped
    from rclpy.serialization import deserialize_message, serialize_message

    _, tree = served
    writer = TfMessageWriter()
    odd = LinkTransform("a", "bcd", (1.0, -2.0, 3.5), (0.1, 0.2, 0.3, 0.927))  # odd string lengths
    for transforms in (
        tree.moving_transforms(_random_positions(seed)),
        tree.fixed_transforms(),
        [odd, *tree.fixed_transforms()[:2], odd],
        [],
    ):
        expected = msgs.TFMessage()
        for t in transforms:
            ts = TransformStamped(child_frame_id=t.child)
            ts.header.frame_id = t.parent
            ts.header.stamp.sec, ts.header.stamp.nanosec = 1234, 567_890_123
            tr, rot = ts.transform.translation, ts.transform.rotation
            tr.x, tr.y, tr.z = t.translation
            rot.x, rot.y, rot.z, rot.w = t.rotation
            expected.transforms.append(ts)
        raw = writer.serialize(transforms, 1234, 567_890_123)
        assert deserialize_message(raw, msgs.TFMessage) == expected
        assert len(raw) == len(serialize_message(expected))


def test_built_tf2_msgs_hash_equals_upstream() -> None:
    """The type hash a TFMessage publisher announces is upstream tf2_msgs/msg/TFMessage's (Kilted typestore of
    rosbags, computed from the upstream definition), so tf2 tools and rviz2 of a full install match it."""
    msgs = _tf2_msgs()
    rosbags_typesys = pytest.importorskip("rosbags.typesys")
    import rclpy

    upstream = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_KILTED).hash_rihs01(
        "tf2_msgs/msg/TFMessage"
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("tf_hash_probe", context=context)
        node.create_publisher(msgs.TFMessage, "/tf_hash_probe", 1)
        info = node.get_publishers_info_by_topic("/tf_hash_probe")
        assert [i.topic_type for i in info] == ["tf2_msgs/msg/TFMessage"]
        if not hasattr(info[0], "topic_type_hash"):
            pytest.skip("this rclpy has no topic_type_hash (type hashes came with Iron)")
        assert str(info[0].topic_type_hash) == upstream
        node.destroy_node()
    finally:
        context.try_shutdown()


def test_launch_starts_tf_publisher_not_as_a_lockstep_peer() -> None:
    from humanoid_bringup.evaluation.launched_graph import default_launch_file
    from humanoid_bringup.launcher.interpreter import load_launch_description

    plan = load_launch_description(default_launch_file(), {"estimator": "true"})
    try:
        names = [p.name for p in plan.processes]
        assert "tf_publisher" in names and "robot_state_publisher" not in names
        peers = plan.processes[names.index("robot_driver")].params["lockstep_peers"].split()
        assert "state_estimator" in peers and "tf_publisher" not in peers
        # no use_sim_time: it works on the joint states' stamps
        assert plan.processes[names.index("tf_publisher")].params == {}
    finally:
        plan.cleanup()


def test_state_publisher_true_starts_robot_state_publisher_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    from humanoid_bringup.evaluation.launched_graph import default_launch_file
    from humanoid_bringup.launcher.interpreter import load_launch_description
    from humanoid_bringup.launcher.plan import LaunchError

    # its robot_description comes from `python3 -m ...urdf_tool`: this environment's python3
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    try:
        plan = load_launch_description(default_launch_file(), {"state_publisher": "true"})
    except LaunchError as exc:  # a pip-only install: named, not started
        assert "'robot_state_publisher' not found" in str(exc)
        return
    try:
        names = [p.name for p in plan.processes]
        assert "robot_state_publisher" in names and "tf_publisher" not in names
    finally:
        plan.cleanup()


# ------------------------------------------------------------------ the node in its own process


class Listener:
    """An rclpy node in its own context and spin thread, recording ``/tf`` and ``/tf_static``."""

    def __init__(self, name: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        self.msgs = _tf2_msgs()
        self.lock = threading.Lock()
        self.tf: list[Any] = []
        self.static: list[Any] = []
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"{name}_{os.getpid()}", context=self.context)
        self.latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.node.create_subscription(self.msgs.TFMessage, "/tf", self._on_tf, 100)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        with contextlib.suppress(Exception):  # the context shut down
            self.executor.spin()

    def _on_tf(self, msg: Any) -> None:
        with self.lock:
            self.tf.append(msg)

    def _on_static(self, msg: Any) -> None:
        with self.lock:
            self.static.append(msg)

    def subscribe_static(self) -> None:
        """Subscribe ``/tf_static`` (transient-local: the latched message of a publisher started before)."""
        self.node.create_subscription(self.msgs.TFMessage, "/tf_static", self._on_static, self.latched)

    def transforms(self, static: bool = False) -> list[Any]:
        with self.lock:
            return [t for m in (self.static if static else self.tf) for t in m.transforms]

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def _until(what: str, cond: Callable[[], bool], timeout: float, log: Callable[[], str]) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            pytest.fail(f"no {what} within {timeout} s\n{log()[-3000:]}")
        time.sleep(0.02)


def _stamp(t: Any) -> float:
    return t.header.stamp.sec + 1e-9 * t.header.stamp.nanosec


def test_tf_publisher_process_refuses_a_bad_description_and_publishes_the_newest_joint_state(
    tmp_path: Path, served: tuple[str, KinematicTree]
) -> None:
    """The ``tf_publisher`` executable alone: a bad description is refused (logged), the good one that
    follows gives the fixed joints on ``/tf_static`` (latched for a late subscriber); a burst of joint states
    gives the joints on ``/tf`` with the core's values, stamped with joint states' stamps, the newest among
    them, each once and not one message per joint state; a malformed joint state is dropped and counted."""
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from humanoid_control.ros.node_utils import to_time_msg

    urdf, tree = served
    listener = Listener("tf_listener")
    out_path = tmp_path / "tf_publisher.log"
    out = out_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "humanoid_bringup.description.tf_publisher_node"],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        node = listener.node
        description = node.create_publisher(String, "/robot_description", listener.latched)
        states = node.create_publisher(JointState, "/joint_states", QoSProfile(depth=100))
        log = out_path.read_text
        _until(
            "tf_publisher subscriptions",
            lambda: description.get_subscription_count() > 0 and states.get_subscription_count() > 0,
            60.0,
            log,
        )
        _until("its /tf publisher", lambda: node.count_publishers("/tf") > 0, 30.0, log)
        description.publish(String(data="<robot name='broken'><link name='a'/>"))
        _until("the refusal", lambda: "/robot_description refused: malformed URDF" in log(), 30.0, log)
        description.publish(String(data=urdf))
        _until("the description's summary", lambda: f"{len(tree.links)} links" in log(), 30.0, log)
        listener.subscribe_static()  # late: the latched message comes
        _until("/tf_static", lambda: bool(listener.transforms(static=True)), 30.0, log)
        static = {t.child_frame_id: t for t in listener.transforms(static=True)}
        assert set(static) == {t.child for t in tree.fixed_transforms()}
        assert static[CONFIG.base_body].header.frame_id == BASE_LINK

        positions = _random_positions(7)
        sent = [k * 0.002 for k in range(1, 101)]  # 0.2 s of 500 Hz joint states, as fast as they go out
        for t in sent:
            msg = JointState(name=list(positions), position=list(positions.values()))
            msg.header.stamp = to_time_msg(t)
            states.publish(msg)
        newest = lambda: any(abs(_stamp(t) - sent[-1]) < 1e-9 for t in listener.transforms())  # noqa: E731
        _until("/tf of the newest joint state", newest, 30.0, log)
        bad = JointState(name=list(CONFIG.joint_names), position=[0.0])  # lengths differ
        bad.header.stamp = to_time_msg(0.5)
        states.publish(bad)
        _until("the dropped joint state's warning", lambda: "dropped a /joint_states" in log(), 30.0, log)
        with listener.lock:
            messages = list(listener.tf)
        received = listener.transforms()
        stamps = [_stamp(m.transforms[0]) for m in messages]
        assert all(any(abs(s - t) < 1e-9 for t in sent) for s in stamps), stamps  # the joint states' stamps
        assert stamps == sorted(set(stamps)), stamps  # each joint state once, in order
        assert len(messages) < len(sent), "one /tf per joint state: the rate limit did not act"
        assert all({_stamp(t) for t in m.transforms} == {_stamp(m.transforms[0])} for m in messages)
        expected = {t.child: t for t in tree.moving_transforms(positions)}
        first = [t for t in received if abs(_stamp(t) - stamps[0]) < 1e-9]
        assert {t.child_frame_id for t in first} == set(expected)
        for t in first:
            e = expected[t.child_frame_id]
            tr, rot = t.transform.translation, t.transform.rotation
            assert t.header.frame_id == e.parent
            assert np.allclose([tr.x, tr.y, tr.z], e.translation, atol=1e-12)
            assert np.allclose([rot.x, rot.y, rot.z, rot.w], e.rotation, atol=1e-12)
    finally:
        listener.close()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
        out.close()
    text = out_path.read_text()
    assert code == 0 and "Traceback" not in text, text


# ------------------------------------------------------------------ the simulation graph


@pytest.mark.slow
def test_sim_graph_tf_tree_from_odom_to_every_link(tmp_path: Path, served: tuple[str, KinematicTree]) -> None:
    """``humanoid-launch`` with the estimator (pip-only install): a subscriber in another process sees
    ``odom -> base_link`` (estimator) and every joint (tf_publisher) on ``/tf``, the fixed joints on the
    latched ``/tf_static``; every non-root link of the description is a child there; the chained transforms at
    a joint-state stamp equal pinocchio's forward kinematics of that joint state; the publishers announce
    upstream's TFMessage type hash."""
    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    msgs = _tf2_msgs()
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    urdf, tree = served
    isolated_ros_env(tmp_path / "ros_logs")
    tf_msgs: list[Any] = []
    lock = threading.Lock()

    def on_tf(msg: Any) -> None:
        with lock:
            tf_msgs.append(msg)

    def tf_seen() -> list[Any]:
        with lock:
            return [t for m in tf_msgs for t in m.transforms]

    probe = GraphProbe(subscribe_description=False, contacts=False)
    probe.subscribe(
        msgs.TFMessage, "/tf", on_tf, QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    )
    graph = LaunchedGraph(
        {"estimator": "true", "clock": "lockstep", "start_paused": "true"}, tmp_path / "graph.log"
    )
    try:
        graph.start()
        probe.start_graph(peers=("state_estimator",), running=graph.running)
        joints = set(tree.moving_joint_names)
        moving_children = {j.child for j in tree.joints if j.name in joints}

        def complete() -> bool:
            seen = tf_seen()
            pairs = {(t.header.frame_id, t.child_frame_id) for t in seen}
            odom = sum(t.header.frame_id == "odom" for t in seen)
            knee = sum(t.child_frame_id == "left_knee_link" for t in seen)
            return moving_children <= {c for _, c in pairs} and odom >= 5 and knee >= 5

        _until("odom -> base_link and every joint on /tf", complete, 120.0, graph.log)
        static: list[Any] = []
        probe.node.create_subscription(
            msgs.TFMessage,
            "/tf_static",
            lambda m: static.extend(m.transforms),
            QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        _until("the latched /tf_static", lambda: bool(static), 30.0, graph.log)
        infos = probe.node.get_publishers_info_by_topic("/tf")
        hashes = {str(getattr(i, "topic_type_hash", "")) for i in infos}
        with probe.lock:
            joint_t = list(probe.data.joint_t)
            joint_q = [list(q) for q in probe.data.joint_q]
            names = list(probe.data.joint_names)
    finally:
        close_graph(probe, graph)

    transforms = tf_seen()
    children = {t.child_frame_id for t in [*transforms, *static]}
    assert children >= set(tree.links) - {BASE_LINK}
    assert BASE_LINK not in {t.child_frame_id for t in static}
    assert {t.child_frame_id for t in static} == {t.child for t in tree.fixed_transforms()}
    odom = [t for t in transforms if t.header.frame_id == "odom"]
    assert odom and {t.child_frame_id for t in odom} == {BASE_LINK}
    assert 0.6 < odom[-1].transform.translation.z < 0.9  # the pelvis above the floor, standing
    # the estimator's odom -> base_link at least 20 ms of simulated time apart (tf_rate_hz 50); the joints
    # (tf_publisher: the newest joint state, 50 times a second of wall time) once per joint state at most
    odom_stamps = [_stamp(t) for t in odom]
    assert len(odom_stamps) >= 2 and min(np.diff(odom_stamps)) > 0.02 - 1e-6, odom_stamps[:10]
    knee = [_stamp(t) for t in transforms if t.child_frame_id == "left_knee_link"]
    assert knee == sorted(set(knee)), knee[:10]

    # the tree at one joint-state stamp, chained as a tf2 listener does, against pinocchio
    by_stamp: dict[float, list[Any]] = {}
    for t in transforms:
        if t.header.frame_id != "odom":
            by_stamp.setdefault(round(_stamp(t), 6), []).append(t)
    stamp, at = max(by_stamp.items())
    index = min(range(len(joint_t)), key=lambda i: abs(joint_t[i] - stamp))
    assert abs(joint_t[index] - stamp) < 1e-6, "the /tf stamp is a joint state's stamp"
    positions = dict(zip(names, joint_q[index], strict=True))

    def link_transform(t: Any) -> LinkTransform:
        tr, r = t.transform.translation, t.transform.rotation
        return LinkTransform(t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z), (r.x, r.y, r.z, r.w))

    chained = _chain([link_transform(t) for t in [*at, *static]], BASE_LINK)
    expected = _pin_link_poses(urdf, positions)
    for link in tree.links:
        assert np.abs(chained[link][1] - expected[link].translation).max() < 1e-9, link
        assert np.abs(chained[link][0] - expected[link].rotation).max() < 1e-9, link

    if "" in hashes:
        pytest.skip("this rclpy has no topic_type_hash (type hashes came with Iron)")
    rosbags_typesys = pytest.importorskip("rosbags.typesys")
    upstream = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_KILTED).hash_rihs01(
        "tf2_msgs/msg/TFMessage"
    )
    assert hashes == {upstream}
