"""TF publisher node: the links' transforms on ``/tf`` and ``/tf_static`` from the description and the joint
states (what upstream ``robot_state_publisher`` does, for installs without it: the launch starts this node
unless ``state_publisher:=true``).

- subscribes ``/robot_description`` (std_msgs/String, transient-local: the ``robot_description`` node's
  latched URDF) and ``/joint_states`` (sensor_msgs/JointState, best-effort keep-last 1: it only observes and
  never slows the driver; it is no lockstep peer);
- publishes ``/tf_static`` (tf2_msgs/TFMessage, reliable, transient-local, depth 1, like upstream): every
  fixed joint of the URDF in one message (``base_link -> pelvis`` among them, see
  :mod:`humanoid_control.model.urdf`), again whenever a new description comes;
- publishes ``/tf`` (tf2_msgs/TFMessage, reliable, depth 100): every revolute, continuous and prismatic
  joint's ``T_parent_child`` (:mod:`humanoid_bringup.description.kinematic_tree`) for the newest joint state,
  stamped with its stamp, ``publish_rate_hz`` times per second of wall time (steady clock) at most, and only
  for a joint state not published before.

Cost: the joint states come at the driver's rate (500 Hz). A callback per message cost this process about
15 % of a core (measured); so ``/joint_states`` is read by a helper node of this process, ``<name>_states``,
that no executor spins: each timer tick takes the newest sample its reader kept (keep-last 1) and leaves the
rest to DDS. The messages are serialized by :mod:`humanoid_bringup.description.tf_cdr` (rclpy message
objects of 29 transforms cost about 1.5 ms each). The node needs no ``use_sim_time``: the transforms carry
the joint states' stamps (simulated time in simulation); ``/tf_static`` carries the node clock's (tf2
ignores it).

Frames are the URDF's link names (REP-120 where the URDF follows it). ``odom -> base_link`` comes from the
state estimator. Where ``tf2_msgs`` is not installed (its build at setup failed) the node logs that once and
publishes nothing.

Bad input: a URDF that is not one kinematic tree is refused with an error in the log (a previous good one is
kept); a joint state with mismatched lengths or non-finite positions is dropped and counted.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from humanoid_bringup.description.kinematic_tree import KinematicTree, UrdfError, parse_urdf
from humanoid_bringup.description.tf_cdr import TfMessageWriter
from humanoid_control.ros.node_utils import (
    QuietNode,
    declare,
    helper_node,
    quiet_subscription_events,
    run_node,
)

__all__ = ["LatestSample", "TfPublisherNode", "main"]


class LatestSample:
    """The newest message of a topic, taken on demand: a subscription (keep-last 1, :meth:`put` its callback)
    made on :attr:`node`, a helper node of its own that no executor spins, so messages arriving between two
    :meth:`take` calls wake no Python code.

    The helper node is named ``name`` through a node-local remap (a process-wide ``-r __node:=X`` would
    rename it too) and runs on wall time (no ``/clock`` subscription)."""

    def __init__(self, context: Any, name: str) -> None:
        self.node = helper_node(context, name)
        self._msg: Any = None
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)

    def put(self, msg: Any) -> None:
        """The subscription's callback."""
        self._msg = msg

    def take(self) -> Any:
        """The message that arrived since the last call (the newest), or None. Taken from the reader the way
        rclpy's executors take it (``handle.take_message``, about 30 us); where that is missing, through a
        zero-timeout ``spin_once`` of the helper node (a wait set built each call, about 250 us)."""
        self._msg = None
        for sub in list(self.node.subscriptions):
            take = getattr(sub.handle, "take_message", None)
            if take is None:  # an rclpy without it
                self.executor.spin_once(timeout_sec=0.0)
                return self._msg
            with sub.handle:
                taken = take(sub.msg_type, sub.raw)
            if taken is not None:
                self.put(taken[0])
        return self._msg

    def close(self) -> None:
        """Destroy the helper node (idempotent)."""
        with contextlib.suppress(Exception):
            self.executor.shutdown(timeout_sec=1.0)
        with contextlib.suppress(Exception):
            self.node.destroy_node()


class TfPublisherNode(QuietNode):
    """ROS 2 adapter of :class:`~humanoid_bringup.description.kinematic_tree.KinematicTree` (module
    docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("tf_publisher", **kwargs)
        rate = declare(
            self,
            "publish_rate_hz",
            50.0,
            "most /tf messages per second of wall time, each with the newest joint state (Hz)",
            1.0,
            1000.0,
            read_only=True,
        )
        self.tree: KinematicTree | None = None
        self.published = 0  # /tf messages
        self.dropped = 0  # joint states with bad values
        self.states: LatestSample | None = None
        self.pub_tf: Any = None
        self.pub_static: Any = None
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:
            self.get_logger().warning(
                "tf2_msgs is not installed (its build at setup failed; see make setup's output): no /tf and "
                "/tf_static from this node"
            )
            return
        self.writer = TfMessageWriter()
        self.pub_tf = self.create_publisher(TFMessage, "/tf", 100)
        latched = QoSProfile(
            depth=1,
            history=HistoryPolicy.KEEP_LAST,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.pub_static = self.create_publisher(TFMessage, "/tf_static", latched)
        self.create_subscription(String, "/robot_description", self._on_description, latched)
        newest = QoSProfile(
            depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT
        )
        self.states = LatestSample(self.context, f"{self.get_name()}_states")
        self.states.node.create_subscription(
            JointState, "/joint_states", self.states.put, newest, event_callbacks=quiet_subscription_events()
        )
        self.create_timer(1.0 / rate, self._on_timer, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _on_description(self, msg: String) -> None:
        try:
            tree = parse_urdf(msg.data)
        except UrdfError as exc:
            kept = "keeping the previous one" if self.tree is not None else "no /tf until a valid one comes"
            self.get_logger().error(f"/robot_description refused: {exc}; {kept}")
            return
        self.tree = tree
        fixed = tree.fixed_transforms()
        now = self.get_clock().now().to_msg()
        self.pub_static.publish(self.writer.serialize(fixed, now.sec, now.nanosec))
        moving = tree.moving_joint_names
        self.get_logger().info(
            f"/robot_description '{tree.name}': root link '{tree.root}', {len(tree.links)} links, "
            f"{len(fixed)} fixed transforms on /tf_static, {len(moving)} joints on /tf"
        )

    def _on_timer(self) -> None:
        if self.states is None:
            return
        msg = self.states.take()
        if msg is None or self.tree is None:
            return
        positions = self.positions(msg)
        if positions is None:
            self.dropped += 1
            self.get_logger().warning(
                "dropped a /joint_states message with mismatched lengths or non-finite positions "
                f"({self.dropped} so far)",
                throttle_duration_sec=5.0,
            )
            return
        transforms = self.tree.moving_transforms(positions)
        if transforms:
            stamp = msg.header.stamp
            self.pub_tf.publish(self.writer.serialize(transforms, stamp.sec, stamp.nanosec))
            self.published += 1

    @staticmethod
    def positions(msg: Any) -> Mapping[str, float] | None:
        """Joint name -> position (rad or m) of a joint state; None when it is malformed."""
        if len(msg.position) != len(msg.name):
            return None
        positions = dict(zip(msg.name, (float(p) for p in msg.position), strict=True))
        if not all(math.isfinite(p) for p in positions.values()):
            return None
        return positions

    def close(self) -> None:
        """Destroy the joint-state helper node."""
        if self.states is not None:
            self.states.close()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack tf_publisher``."""
    return run_node(TfPublisherNode, args, "tf_publisher")


if __name__ == "__main__":
    raise SystemExit(main())
