"""Publishes the robot's URDF on ``/robot_description``.

(std_msgs/String, transient_local: late joiners get it.)
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.urdf import robot_description_xml
from humanoid_control.ros.node_utils import QuietNode, declare, run_node


class RobotDescriptionNode(QuietNode):
    """Latched ``/robot_description`` with the same joint names as ``/joint_states``."""

    def __init__(self) -> None:
        super().__init__("robot_description")
        robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
        mesh_uris = declare(
            self, "mesh_uris", "file", "file (absolute file:// paths) | package (package://)", read_only=True
        )
        self.config = load_robot_config(robot)
        self.urdf = robot_description_xml(self.config, mesh_uris)
        qos = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.publisher = self.create_publisher(String, "/robot_description", qos)
        self.publisher.publish(String(data=self.urdf))
        self.get_logger().info(f"/robot_description: {self.config.name}, {len(self.urdf)} characters")


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack robot_description``."""

    return run_node(RobotDescriptionNode, args, "robot_description")


if __name__ == "__main__":
    raise SystemExit(main())
