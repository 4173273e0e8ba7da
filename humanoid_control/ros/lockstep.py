"""Lockstep peers: nodes the driver waits for at every simulated tick, so a lockstep run is a function of
its inputs.

The contract (docs/architecture.md, "Lockstep contract"):

- the driver publishes the state of tick k (``/joint_states``, ``/imu/data``, ``/clock``, ``/sim/*``, all
  stamped t_k) and does not advance the simulation until every *peer* has acknowledged tick k on
  ``/lockstep/ack`` (std_msgs/Header: ``frame_id`` = the peer's node name, ``stamp`` = t_k) and the streaming
  controller has answered it on ``/joint_commands``;
- a peer acknowledges tick k only after it has published everything it computes from tick k (a command, an
  ``/odom``, a ``/cmd_vel`` of an evaluation script), so those messages are on the wire before tick k+1
  exists;
- a peer joins with ``frame_id = "join <name>"`` once it is ready (a controller once the driver took its
  gains) and leaves with ``"leave <name>"``; the driver publishes its peer set on ``/robot_driver/lockstep``;
- a peer that does not acknowledge within the driver's ``lockstep_peer_timeout_s`` is dropped (logged,
  counted), so a dead process cannot hang the simulation;
- the peers a launch starts are declared to the driver (``lockstep_peers``): simulated time stays at 0 until
  each has joined, and each gets ``lockstep_startup_timeout_s`` for its first acknowledgement (a first camera
  render or inference on a loaded machine); a declared peer that does not come stops the run with an error
  naming it, never a silent drop.

:class:`PeerTable` is the driver's pure bookkeeping; :class:`LockstepPeer` is the small rclpy helper a node
uses to join and acknowledge (it does nothing when the ``lockstep`` parameter is false, e.g. in realtime).
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

ACK_TOPIC = "/lockstep/ack"
STATUS_TOPIC = "/robot_driver/lockstep"
JOIN = "join "
LEAVE = "leave "


def tick_stream_qos(depth: int = 10, latched: bool = True) -> Any:
    """QoS of a per-tick stream (``/joint_states``, ``/imu/data``, ``/sim/*``, ``/odom``, ``/contacts/*``):
    reliable, keep-last ``depth``; transient-local when ``latched``.

    Publishers of per-tick streams are always transient-local (compatible with every reader). Lockstep peers
    read them transient-local too: discovery is asymmetric (a reader can be matched to its writer before the
    writer is matched to it), so the first sample after an unpause could otherwise be lost to a reader that
    looked ready, and a peer that never sees tick 0 is dropped after ``lockstep_peer_timeout_s`` (measured:
    one start in six under CPU load). A transient-local reader gets the writer's kept samples when the match
    completes. Readers outside lockstep stay volatile: they work with any publisher."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


def ack_qos(latched: bool = True) -> Any:
    """QoS of ``/lockstep/ack``: reliable, keep-last 100; the peers publish it transient-local, so that an
    evaluator whose reader the peers' writers matched late still gets their acknowledgement of tick 0 (its
    :meth:`GraphProbe.run_until` waits for every peer's). The driver reads it volatile (``latched=False``):
    a peer joins only once its writer has matched the driver, and old acks are of no use to it."""
    return tick_stream_qos(100, latched=latched)


class PeerTable:
    """The driver's record of lockstep peers: the last tick stamp (s) each one acknowledged."""

    def __init__(self) -> None:
        self.acked: dict[str, float] = {}
        self.dropped: list[str] = []
        self.timeouts = 0

    def handle(self, frame_id: str, stamp: float) -> str | None:
        """Apply one ``/lockstep/ack`` message; ``'join'``/``'leave'`` when the peer set changed, else
        None."""
        if frame_id.startswith(JOIN):
            name = frame_id[len(JOIN) :].strip()
            if not name or name in self.acked:
                return None
            self.acked[name] = -math.inf
            if name in self.dropped:
                self.dropped.remove(name)
            return "join"
        if frame_id.startswith(LEAVE):
            name = frame_id[len(LEAVE) :].strip()
            if self.acked.pop(name, None) is None:
                return None
            return "leave"
        if frame_id in self.acked and stamp > self.acked[frame_id]:
            self.acked[frame_id] = stamp
        return None

    def missing(self, stamp: float) -> list[str]:
        """Peers that have not acknowledged the tick stamped ``stamp`` (s) yet."""
        return [n for n, t in self.acked.items() if t < stamp - 1e-7]

    def drop(self, names: list[str]) -> None:
        """Forget peers that did not answer in time (they may join again)."""
        for n in names:
            if self.acked.pop(n, None) is not None:
                self.dropped.append(n)
                self.timeouts += 1

    def first_ack_pending(self, names: list[str]) -> list[str]:
        """Those of ``names`` that have joined and not acknowledged any tick yet."""
        return [n for n in names if self.acked.get(n, 0.0) == -math.inf]

    @property
    def names(self) -> list[str]:
        """Current peers, sorted."""
        return sorted(self.acked)


class LockstepPeer:
    """A node's side of the contract: join once ready, acknowledge each tick it has fully processed.

    Args:
        node: the rclpy node.
        enabled: False (realtime, or a node outside the lockstep chain) makes every call a no-op.
        ready: called on a 20 ms steady timer until it returns True; the peer joins then (default: at once,
            as soon as the driver's ``/lockstep/ack`` reader is matched).
    """

    def __init__(self, node: Any, enabled: bool, ready: Any = None) -> None:
        self.node = node
        self.enabled = enabled
        self.name = node.get_name()
        self.joined = False  # a join was sent
        self.confirmed = False  # the driver lists this node among its peers
        self._last_join = -1.0
        self._ready = ready
        self._pub = None
        self._header_type: Any = None
        self._timer = None
        if not enabled:
            return
        from rclpy.clock import Clock, ClockType
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Header, String

        self._header_type = Header
        self._pub = node.create_publisher(Header, ACK_TOPIC, ack_qos())
        # the join is repeated until the driver lists this node: a join sent while only another reader of
        # /lockstep/ack (an evaluator) was matched never reached the driver
        node.create_subscription(
            String,
            STATUS_TOPIC,
            self._on_status,
            QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        self._clock = Clock(clock_type=ClockType.STEADY_TIME)
        self._timer = node.create_timer(0.02, self._try_join, clock=self._clock)

    def _on_status(self, msg: Any) -> None:
        try:
            peers = json.loads(msg.data).get("peers", [])
        except (ValueError, AttributeError):
            return
        self.confirmed = self.joined and self.name in peers
        if self.confirmed and self._timer is not None:
            self._timer.cancel()

    def _try_join(self) -> None:
        if self.confirmed or self._pub is None:
            return
        if self._pub.get_subscription_count() < 1:
            return
        if self._ready is not None and not self._ready():
            return
        now = self._clock.now().nanoseconds * 1e-9
        if now - self._last_join < 0.1:
            return
        self._last_join = now
        self._pub.publish(self._header_type(frame_id=JOIN + self.name))
        self.joined = True

    def ack(self, stamp: Any) -> None:
        """Tick ``stamp`` (builtin_interfaces/Time) is fully processed and its outputs are published."""
        if self.joined and self._pub is not None:
            self._pub.publish(self._header_type(stamp=stamp, frame_id=self.name))

    def leave(self) -> None:
        """Stop taking part (the driver stops waiting for this node)."""
        if self.joined and self._pub is not None:
            self.joined = self.confirmed = False
            if self._timer is not None:
                self._timer.cancel()
            if not self.node.context.ok():
                return  # shutting down without a context: nothing can be published any more
            with contextlib.suppress(Exception):
                self._pub.publish(self._header_type(frame_id=LEAVE + self.name))
