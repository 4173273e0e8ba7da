"""Observe and drive a launched ROS graph from Python: :class:`GraphProbe` and :func:`close_graph`.

Used by the demo, the benchmarks and the integration tests. :class:`GraphProbe` is an rclpy node in its own
context, spun in a background thread, that records the driver's topics (:class:`Recorded`; stamps in s of the
driver's clock) and can act as a controller or as a lockstep peer. Launching the graph itself
(:class:`LaunchedGraph`, :func:`isolated_ros_env`) is :mod:`humanoid_bringup.evaluation.launched_graph`; those
two names are re-exported here for the modules that import them together with the probe.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.launched_graph import LaunchedGraph
from humanoid_control.ros.lockstep import ACK_TOPIC, JOIN, LEAVE, STATUS_TOPIC, ack_qos, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, to_time_msg


def close_graph(probe: GraphProbe, graph: LaunchedGraph) -> None:
    """Close ``probe``, then stop ``graph``: the probe's participant is gone before the graph's processes
    leave, so it never processes their departure (see :meth:`GraphProbe.close`)."""
    try:
        probe.close()
    finally:
        graph.stop()


@dataclass
class Recorded:
    """Time series recorded by :class:`GraphProbe` (stamps in seconds of the driver clock)."""

    truth_t: list[float] = field(default_factory=list)
    truth_pos: list[list[float]] = field(default_factory=list)
    truth_quat_wxyz: list[list[float]] = field(default_factory=list)
    truth_twist: list[list[float]] = field(default_factory=list)
    joint_t: list[float] = field(default_factory=list)
    joint_q: list[list[float]] = field(default_factory=list)
    joint_effort: list[list[float]] = field(default_factory=list)
    joint_names: list[str] = field(default_factory=list)
    contact_fz: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    modes: list[str] = field(default_factory=list)
    diagnostics: list[dict[str, str]] = field(default_factory=list)
    diagnostics_t: list[float] = field(default_factory=list)  # their stamps (s, the driver's clock)
    robot_description: str | None = None


class GraphProbe:
    """An rclpy node (own context, background spin thread) that records the driver topics and can command it.

    Args:
        controller: if given, called with each ``JointState`` on ``/joint_states``; a returned ``JointState``
            is published on ``/joint_commands`` (set ``header.stamp`` to the state's for lockstep).
        subscribe_description: also subscribe ``/robot_description`` (transient_local).
        contacts: also record ``/sim/contacts/{left,right}``.
        reliable_streams: read the 500 Hz streams reliably (lockstep); ``False`` reads them best-effort, so a
            pause of this observer (say a garbage collection) cannot hold back the publisher (realtime).
        lockstep_peer: take part in the driver's lockstep (``/lockstep/ack``): the driver does not advance
            past a tick until every per-tick subscription of this probe has seen it and :attr:`on_tick` ran,
            and :meth:`run_until` holds the simulation at a chosen tick (for service calls at exact ticks).
        on_tick: called with each ``/joint_states`` message before the tick is acknowledged (e.g. to publish
            the ``/cmd_vel`` of a command script for that tick).
        hold_timeout: (s of wall time, lockstep peer) set as the driver's ``lockstep_peer_timeout_s`` by
            :meth:`start_graph`: a tick held by :meth:`run_until` while services are called (each call may
            wait 10 s on a loaded machine) must not get this probe dropped (the driver's default, 5 s, is
            for a peer that died). A probe dropped anyway makes :meth:`run_until` raise.
        ack_period: (s, lockstep peer) the probe's outputs (``on_tick``'s and ``controller``'s messages) come
            only at ticks stamped on this grid of simulated time (multiples of it); between two grid ticks it
            sends nothing the graph reads. The probe then acknowledges a grid tick together with the ticks
            before the next one (one ``/lockstep/ack`` stamped just short of the next grid point), so the
            driver waits for it once per period instead of every tick. Its recordings are unchanged (it
            reads every tick from its queues) and so is the run: an output is still published before the
            acknowledgement of its tick. 0 (default): every tick. An attribute that may change at any time
            (e.g. from ``on_tick`` once a script's start is known). The probe lags the graph by up to a
            period, so what ``on_tick`` decides must depend on stamps only, not on which other messages it
            has seen.
        setup: called with the node before the probe subscribes to anything: subscriptions made there are
            served first when several messages wait (e.g. a node's latched state published before the next
            tick's ``/joint_states``, so ``on_tick`` sees it at the same tick in every run).

    Readiness: :meth:`start_graph` checks that every subscription is matched to its publisher and that the
    expected lockstep peers have joined, then unpauses a driver launched with ``start_paused:=true``.
    """

    def __init__(
        self,
        controller: Callable[[Any], Any] | None = None,
        subscribe_description: bool = True,
        name: str = "graph_probe",
        contacts: bool = True,
        reliable_streams: bool = True,
        lockstep_peer: bool = False,
        on_tick: Callable[[Any], None] | None = None,
        setup: Callable[[Any], None] | None = None,
        ack_period: float = 0.0,
        hold_timeout: float = 60.0,
    ) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        # no default QoS-event handlers (node_utils.QuietNode): start_graph checks every subscription's match
        self.node = QuietNode(f"{name}_{os.getpid()}", context=self.context)
        self.data = Recorded()
        self.lock = threading.Lock()
        self.controller = controller
        self.on_tick = on_tick
        self.lockstep_peer = lockstep_peer
        if not (math.isfinite(ack_period) and ack_period >= 0.0):
            raise ValueError(f"ack_period must be >= 0 s, got {ack_period}")
        self.ack_period = ack_period
        if not (math.isfinite(hold_timeout) and 0.01 <= hold_timeout <= 120.0):
            raise ValueError(f"hold_timeout must be in 0.01-120 s, got {hold_timeout}")
        self.hold_timeout = hold_timeout
        self.name = self.node.get_name()
        self._tick_cond = threading.Condition(self.lock)
        self._per_tick: dict[str, float] = {}  # per-tick subscription -> latest stamp seen (s)
        self._acked_t = -math.inf
        # ticks stamped before this are acknowledged at once; the first at/after it is held
        self._grant_t = math.inf
        self._held: Any = None  # stamp message of the held tick
        self._held_t = -math.inf
        self.peer_acks: dict[str, float] = {}
        self.lockstep_status: dict[str, Any] = {}
        self._ack_pub: Any = None
        # a lockstep peer reads the per-tick streams transient-local (see lockstep.tick_stream_qos): a tick it
        # never received would hold the simulation until the driver drops it
        reliable = (
            tick_stream_qos(2000, latched=lockstep_peer)
            if reliable_streams
            else QoSProfile(depth=2000, reliability=ReliabilityPolicy.BEST_EFFORT)
        )
        self.latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        if setup is not None:
            setup(self.node)
        self.cmd_pub = self.node.create_publisher(
            JointState, "/joint_commands", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.reliable = reliable  # the per-tick streams' QoS (transient-local for a lockstep peer)
        # in the driver's publish order: the mode and diagnostics of tick k-1 are served before the state of
        # tick k (rclpy serves ready subscriptions in creation order), so a tick held by run_until has them
        self.node.create_subscription(
            String,
            "/robot_driver/mode",
            self._on_mode,
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100)
        self.subscribe(JointState, "/joint_states", self._on_joints, reliable, per_tick=True)
        self.subscribe(Odometry, "/sim/ground_truth", self._on_truth, reliable, per_tick=True)
        for side in ("left", "right") if contacts else ():
            self.data.contact_fz[side] = []
            self.subscribe(
                WrenchStamped,
                f"/sim/contacts/{side}",
                lambda m, s=side: self._on_contact(s, m),
                reliable,
                per_tick=True,
            )
        if subscribe_description:
            self.subscribe_description()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def subscribe_description(self) -> None:
        """Subscribe ``/robot_description`` (may be called late, to test latching)."""
        from std_msgs.msg import String

        self.node.create_subscription(String, "/robot_description", self._on_description, self.latched)

    # ------------------------------------------------------------------ lockstep
    def subscribe(
        self, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: Any, per_tick: bool = False
    ) -> Any:
        """Create a subscription on the probe's node. ``per_tick``: the topic carries one message per driver
        tick (stamped with it); as a lockstep peer the probe acknowledges a tick only once every per-tick
        subscription has seen it."""
        if not per_tick:
            return self.node.create_subscription(msg_type, topic, callback, qos)
        self._per_tick[topic] = -math.inf

        def wrapped(msg: Any, topic: str = topic) -> None:
            callback(msg)
            self._tick_seen(topic, msg.header.stamp)

        return self.node.create_subscription(msg_type, topic, wrapped, qos)

    def _tick_seen(self, topic: str, stamp: Any) -> None:
        if not self.lockstep_peer:
            return
        t = stamp.sec + 1e-9 * stamp.nanosec
        with self._tick_cond:
            self._per_tick[topic] = max(self._per_tick[topic], t)
            done = min(self._per_tick.values())
            if done <= self._acked_t + 1e-7 or self._held is not None or self._ack_pub is None:
                return
            if done >= self._grant_t - 1e-7:
                self._held, self._held_t = stamp, done
                self._tick_cond.notify_all()
                return
            ack_t = self._ack_horizon(done)
            self._acked_t = ack_t
        self._ack(stamp if ack_t == done else to_time_msg(ack_t))

    def _ack_horizon(self, done: float) -> float:
        """The stamp (s) to acknowledge once tick ``done`` is processed: ``done`` itself, or with an
        :attr:`ack_period` the last instant before the next grid point (and before a granted hold)."""
        if self.ack_period <= 0.0:
            return done
        next_grid = (math.floor(done / self.ack_period + 1e-6) + 1) * self.ack_period
        return max(done, min(next_grid, self._grant_t) - 1e-6)

    def _ack(self, stamp: Any) -> None:
        from std_msgs.msg import Header

        self._ack_pub.publish(Header(stamp=stamp, frame_id=self.name))

    def _on_peer_ack(self, msg: Any) -> None:
        t = msg.stamp.sec + 1e-9 * msg.stamp.nanosec
        with self._tick_cond:
            if not msg.frame_id.startswith((JOIN, LEAVE)):
                self.peer_acks[msg.frame_id] = max(self.peer_acks.get(msg.frame_id, -math.inf), t)
            self._tick_cond.notify_all()

    def _on_lockstep_status(self, msg: Any) -> None:
        with self._tick_cond:
            self.lockstep_status = json.loads(msg.data)
            self._tick_cond.notify_all()

    def start_graph(
        self,
        peers: tuple[str, ...] = (),
        timeout: float = 120.0,
        running: Callable[[], bool] | None = None,
        hold_at: float | None = None,
        unpause: bool = True,
    ) -> None:
        """Readiness, then go: every subscription of the probe matched to a publisher, the driver paused with
        the expected lockstep ``peers`` (node names; this probe too when it is a peer) joined, then
        ``/robot_driver/set_pause`` false. For graphs launched with ``start_paused:=true``.

        ``hold_at`` (lockstep peer only): hold the first tick stamped at or after it (s), as
        :meth:`run_until` does, set *before* the unpause: a :meth:`run_until` called after this returns could
        find the ticks before it already acknowledged (the first held tick then depended on thread timing).

        ``unpause=False``: for a graph launched unpaused, with this probe among the driver's declared peers
        (launch argument ``lockstep_observers``): the driver starts once every declared peer joined, so
        ``hold_at`` is set before this probe joins, and nothing is unpaused."""
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Header, String

        # created last: a peer's ack is taken after the outputs it published before it (callback order)
        self.node.create_subscription(
            String,
            STATUS_TOPIC,
            self._on_lockstep_status,
            QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        self.node.create_subscription(
            Header,
            ACK_TOPIC,
            self._on_peer_ack,
            tick_stream_qos(1000),  # transient-local: acks sent before the peers' writers matched us arrive
        )
        end = time.monotonic() + timeout
        alive = running or (lambda: True)

        def wait(what: Callable[[], str], cond: Callable[[], bool]) -> None:
            while not cond():
                if time.monotonic() > end or not alive():
                    raise TimeoutError(f"graph not ready: {what()}")
                time.sleep(0.01)

        def unmatched() -> list[str]:
            out = []
            for sub in list(self.node.subscriptions):
                count = getattr(sub, "get_publisher_count", None)
                n = count() if count is not None else self.node.count_publishers(sub.topic_name)
                if n < 1 and sub.topic_name != ACK_TOPIC:
                    out.append(sub.topic_name)
            return out

        wait(lambda: f"subscriptions without a publisher: {unmatched()}", lambda: not unmatched())
        if self.lockstep_peer:
            self._ack_pub = self.node.create_publisher(Header, ACK_TOPIC, ack_qos())
            wait(
                lambda: "the driver's /lockstep/ack reader",
                lambda: self._ack_pub.get_subscription_count() > 0,
            )
        if hold_at is not None:
            assert self.lockstep_peer, "hold_at needs lockstep_peer=True"
            with self._tick_cond:
                self._grant_t = hold_at
        expected = set(peers) | ({self.name} if self.lockstep_peer else set())
        last_join = [-1.0]

        def joined() -> bool:
            with self.lock:
                st = self.lockstep_status
            listed = set(st.get("peers", [])) if st else set()
            if self.lockstep_peer and self.name not in listed and time.monotonic() - last_join[0] > 0.1:
                last_join[0] = time.monotonic()  # repeated: a join is lost if sent before the driver matched
                self._ack_pub.publish(Header(frame_id=JOIN + self.name))
            return bool(st) and expected <= listed

        wait(lambda: f"lockstep peers {sorted(expected)} (driver: {self.lockstep_status})", joined)
        if self.lockstep_peer:
            from rclpy.parameter import Parameter

            self.set_driver_parameters(
                [Parameter("lockstep_peer_timeout_s", Parameter.Type.DOUBLE, self.hold_timeout)]
            )
        if not unpause:
            return
        ok, msg = self.call_set_pause(False)
        if not ok:
            raise RuntimeError(f"unpause refused: {msg}")

    def set_driver_parameters(self, params: list[Any], timeout: float = 10.0) -> None:
        """Set driver parameters (``rclpy.parameter.Parameter``) in one atomic call. ``TimeoutError`` if the
        service is missing or does not answer within ``timeout`` wall seconds, ``RuntimeError`` if refused."""
        from rcl_interfaces.srv import SetParametersAtomically

        client = self.node.create_client(SetParametersAtomically, "/robot_driver/set_parameters_atomically")
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise TimeoutError("driver parameters service unavailable")
            req = SetParametersAtomically.Request()
            req.parameters = [p.to_parameter_msg() for p in params]
            future = client.call_async(req)
            end = time.monotonic() + timeout
            while not future.done() and time.monotonic() < end:
                time.sleep(0.002)
            if not future.done():
                raise TimeoutError(f"driver parameters: no answer within {timeout:g} s")
            if not future.result().result.successful:
                raise RuntimeError(f"driver refused the parameters: {future.result()}")
        finally:
            self.node.destroy_client(client)

    def call_set_pause(self, paused: bool, timeout: float = 10.0) -> tuple[bool, str]:
        """``/robot_driver/set_pause``; (success, message)."""
        from std_srvs.srv import SetBool

        return self._call(SetBool, "/robot_driver/set_pause", SetBool.Request(data=paused), timeout)

    def run_until(self, t: float, timeout: float = 120.0) -> float:
        """Lockstep peer: let simulated time run to the first tick stamped >= ``t`` (s) and hold it there
        (not acknowledged) once every other peer has acknowledged it; returns its stamp. Service calls made
        while held take effect from the next tick, the same tick in every run."""
        assert self.lockstep_peer, "run_until needs lockstep_peer=True"
        with self._tick_cond:
            self._grant_t = t
            held = self._held
            if held is not None and self._held_t < t - 1e-7:
                self._held = None
                self._acked_t = self._held_t
            else:
                held = None
        if held is not None:
            self._ack(held)
        end = time.monotonic() + timeout
        with self._tick_cond:
            while True:
                if self.name in self.lockstep_status.get("dropped", []):
                    raise RuntimeError(
                        f"the driver dropped lockstep peer {self.name} (a tick held over its "
                        f"lockstep_peer_timeout_s): time ran on without it, the run is not reproducible"
                    )
                if self._held is not None:
                    others = [p for p in self.lockstep_status.get("peers", []) if p != self.name]
                    if all(self.peer_acks.get(p, -math.inf) >= self._held_t - 1e-7 for p in others):
                        return self._held_t
                if time.monotonic() > end:
                    raise TimeoutError(f"simulated time did not reach {t:.3f} s (at {self._acked_t:.3f} s)")
                self._tick_cond.wait(0.05)

    def release(self) -> None:
        """Stop holding: acknowledge the held tick and every later one at once."""
        with self._tick_cond:
            self._grant_t = math.inf
            held, self._held = self._held, None
            if held is not None:
                self._acked_t = self._held_t
        if held is not None:
            self._ack(held)

    def _spin(self) -> None:
        with contextlib.suppress(Exception):
            self.executor.spin()

    # ------------------------------------------------------------------ callbacks
    def _on_truth(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        tw = msg.twist.twist
        with self.lock:
            self.data.truth_t.append(t)
            self.data.truth_pos.append([p.x, p.y, p.z])
            self.data.truth_quat_wxyz.append([o.w, o.x, o.y, o.z])
            self.data.truth_twist.append(
                [tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y, tw.angular.z]
            )

    def _on_joints(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self.lock:
            self.data.joint_t.append(t)
            self.data.joint_q.append(list(msg.position))
            self.data.joint_effort.append(list(msg.effort))
            if not self.data.joint_names:
                self.data.joint_names = list(msg.name)
        if self.controller is not None:
            cmd = self.controller(msg)
            if cmd is not None:
                self.cmd_pub.publish(cmd)
        if self.on_tick is not None:
            self.on_tick(msg)

    def _on_contact(self, side: str, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self.lock:
            self.data.contact_fz[side].append((t, msg.wrench.force.z))

    def _on_diag(self, msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        for status in msg.status:
            if status.name.startswith("robot_driver"):
                with self.lock:
                    self.data.diagnostics.append({kv.key: kv.value for kv in status.values})
                    self.data.diagnostics_t.append(t)

    def _on_mode(self, msg: Any) -> None:
        with self.lock:
            self.data.modes.append(msg.data)

    def _on_description(self, msg: Any) -> None:
        with self.lock:
            self.data.robot_description = msg.data

    # ------------------------------------------------------------------ queries
    def wait_for(self, predicate: Callable[[Recorded], bool], timeout: float, poll: float = 0.02) -> bool:
        """Wait until ``predicate(recorded data)`` holds (True) or ``timeout`` wall seconds pass (False)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if predicate(self.data):
                    return True
            time.sleep(poll)
        with self.lock:
            return predicate(self.data)

    def sim_time(self) -> float:
        """Latest driver stamp seen (s)."""
        with self.lock:
            return self.data.joint_t[-1] if self.data.joint_t else -1.0

    def last_diagnostics(self) -> dict[str, str]:
        """Key-values of the latest driver diagnostics."""
        with self.lock:
            return dict(self.data.diagnostics[-1]) if self.data.diagnostics else {}

    def diagnostics_at(self, t: float, timeout: float = 10.0) -> dict[str, str]:
        """Key-values of the first driver diagnostics stamped at or after ``t`` (s, simulated time), waited
        for up to ``timeout`` wall seconds. In lockstep the driver publishes them on every whole second of
        simulated time (and on a mode change), before the state of that tick: a peer held at a tick stamped
        >= ``t`` gets the same diagnostics in every run."""
        found: dict[str, str] = {}

        def seen(d: Recorded) -> bool:
            for stamp, values in zip(d.diagnostics_t, d.diagnostics, strict=True):
                if stamp >= t - 1e-7:
                    found.update(values)
                    return True
            return False

        if not self.wait_for(seen, timeout):
            raise TimeoutError(f"no driver diagnostics stamped >= {t:.3f} s within {timeout:g} s")
        return dict(found)

    def base_heights(self) -> tuple[np.ndarray, np.ndarray]:
        """(t, z) of the base from ``/sim/ground_truth``."""
        with self.lock:
            return np.array(self.data.truth_t), np.array([p[2] for p in self.data.truth_pos])

    def call_trigger(self, service: str, timeout: float = 10.0) -> tuple[bool, str]:
        """Call a ``std_srvs/Trigger`` service; (success, message)."""
        from std_srvs.srv import Trigger

        return self._call(Trigger, service, Trigger.Request(), timeout)

    def _call(self, srv_type: Any, service: str, request: Any, timeout: float) -> tuple[bool, str]:
        client = self.node.create_client(srv_type, service)
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f"service {service} not available")
        future = client.call_async(request)
        end = time.monotonic() + timeout
        while not future.done() and time.monotonic() < end:
            time.sleep(0.01)
        if not future.done():
            raise TimeoutError(f"service {service} did not answer")
        result = future.result()
        self.node.destroy_client(client)
        return bool(result.success), str(result.message)

    def close(self, timeout: float = 20.0) -> None:
        """Stop spinning and shut the context down; give up (with a warning) after ``timeout`` s.

        Close the probe before the graph's processes stop (:func:`close_graph`): Fast DDS 3.2 (Kilted's) can
        deadlock a participant whose receive thread removes a departing process's writers while its event
        thread checks participant liveliness (eProsima/Fast-DDS#6502: seen once in about ten suite runs, a
        ``close`` that never returned). The bound keeps a test or an evaluation from hanging on it.
        """

        def shutdown() -> None:
            self.context.try_shutdown()
            self._thread.join(timeout=5)
            self.node.destroy_node()

        closer = threading.Thread(target=shutdown, name="probe-close", daemon=True)
        closer.start()
        closer.join(timeout)
        if closer.is_alive():
            print(
                f"GraphProbe.close: the ROS context did not shut down within {timeout:.0f} s "
                "(Fast DDS deadlock, eProsima/Fast-DDS#6502); left behind",
                file=sys.stderr,
            )
