"""Joint hold controller: answers every ``/joint_states`` with a ``/joint_commands`` holding the default pose.

The simplest controller of the stack and the reference for the lockstep contract: each command carries the
``header.stamp`` of the state it answers. Targets: q* = default standing pose (rad), dq* = 0, tau_ff = 0; the
driver applies its ``gain_profile``.

In the driver's loop (driver parameter ``in_loop_controller: joint_hold``) the same law
(:class:`~humanoid_control.driver.in_loop.JointHoldCore`) is called from the driver's loop; this node is
then created in the driver's process without the ``/joint_states`` subscription, and mirrors the commands
on ``~/joint_commands`` for tooling.
"""

from __future__ import annotations

from typing import Any

from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from humanoid_control.driver.driver_core import JointCommand
from humanoid_control.driver.in_loop import InLoopState, JointHoldCore
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, declare, run_node, to_time_msg


class JointHoldNode(QuietNode):
    """Streams default-pose commands, one per received joint state (or per loop tick, in the loop)."""

    def __init__(self, in_loop: bool = False, **kwargs: Any) -> None:
        super().__init__("joint_hold_controller", **kwargs)
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        self.config = load_robot_config(robot)
        lockstep = declare(
            self, "lockstep", False, "lockstep peer of the driver (/lockstep/ack)", read_only=True
        )
        self.in_loop = in_loop
        self.core = JointHoldCore(self.config.array("default"))
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.command = JointState(
            name=self.config.joint_names, position=self.config.array("default").tolist()
        )
        if in_loop:  # called by the driver's loop: no lockstep peer, commands mirrored for tooling
            self.pub = self.create_publisher(JointState, "~/joint_commands", qos)
            self.peer = LockstepPeer(self, False)
            self._last_stamp: float | None = None
            return
        self.pub = self.create_publisher(JointState, "/joint_commands", qos)
        self.create_subscription(
            JointState, "/joint_states", self._on_state, tick_stream_qos(latched=lockstep)
        )
        self.peer = LockstepPeer(self, lockstep)

    def _on_state(self, msg: JointState) -> None:
        self.command.header.stamp = msg.header.stamp
        self.pub.publish(self.command)
        self.peer.ack(msg.header.stamp)

    def in_loop_step(self, state: InLoopState) -> JointCommand | None:
        """Driver's loop thread: the default pose, stamped with the tick."""
        self._last_stamp = state.stamp
        return self.core.command(state.stamp)

    def in_loop_mirror(self) -> None:
        """Driver's loop thread, off the critical path: the latest command on ``~/joint_commands``."""
        if self._last_stamp is not None:
            self.command.header.stamp = to_time_msg(self._last_stamp)
            self.pub.publish(self.command)

    def close(self) -> None:
        """Leave the driver's lockstep."""
        self.peer.leave()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack joint_hold_controller``."""

    return run_node(JointHoldNode, args, "joint_hold_controller")


if __name__ == "__main__":
    raise SystemExit(main())
