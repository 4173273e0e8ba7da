"""Joint hold controller: answers every ``/joint_states`` with a ``/joint_commands`` holding the default pose.

The simplest controller of the stack and the reference for the lockstep contract: each command carries the
``header.stamp`` of the state it answers. Targets: q* = default standing pose (rad), dq* = 0, tau_ff = 0; the
driver applies its ``gain_profile``.
"""

from __future__ import annotations

from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.ros.lockstep import LockstepPeer, tick_stream_qos
from humanoid_control.ros.node_utils import QuietNode, declare, run_node


class JointHoldNode(QuietNode):
    """Streams default-pose commands, one per received joint state."""

    def __init__(self) -> None:
        super().__init__("joint_hold_controller")
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        self.config = load_robot_config(robot)
        lockstep = declare(
            self, "lockstep", False, "lockstep peer of the driver (/lockstep/ack)", read_only=True
        )
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.pub = self.create_publisher(JointState, "/joint_commands", qos)
        self.command = JointState(
            name=self.config.joint_names, position=self.config.array("default").tolist()
        )
        self.create_subscription(
            JointState, "/joint_states", self._on_state, tick_stream_qos(latched=lockstep)
        )
        self.peer = LockstepPeer(self, lockstep)

    def _on_state(self, msg: JointState) -> None:
        self.command.header.stamp = msg.header.stamp
        self.pub.publish(self.command)
        self.peer.ack(msg.header.stamp)

    def close(self) -> None:
        """Leave the driver's lockstep."""
        self.peer.leave()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack joint_hold_controller``."""

    return run_node(JointHoldNode, args, "joint_hold_controller")


if __name__ == "__main__":
    raise SystemExit(main())
