"""Test session setup: an isolated ROS graph (a domain id no other process here has claimed, localhost only,
logs in a temp folder)."""

from __future__ import annotations

import os
import tempfile

# Before anything imports rclpy or mujoco.
os.environ.setdefault("MUJOCO_GL", "egl")
from humanoid_bringup.evaluation.launched_graph import claim_ros_domain  # after MUJOCO_GL

os.environ["ROS_DOMAIN_ID"] = str(claim_ros_domain())
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_LOG_DIR"] = tempfile.mkdtemp(prefix="humanoid_test_roslog_")
os.environ["PYTHONUNBUFFERED"] = "1"
