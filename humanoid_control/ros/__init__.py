"""ROS 2 plumbing shared by every node of the stack: lockstep protocol, node helpers (rclpy only here)."""
