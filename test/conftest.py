"""Test session setup: an isolated ROS graph (a domain id no other process here has claimed, loopback UDP
only, logs in a temp folder)."""

from __future__ import annotations

import os
import tempfile

# Before anything imports rclpy or mujoco.
os.environ.setdefault("MUJOCO_GL", "egl")
from humanoid_bringup.evaluation.launched_graph import claim_ros_domain, use_loopback_udp  # after MUJOCO_GL

os.environ["ROS_DOMAIN_ID"] = str(claim_ros_domain())
# DDS over loopback UDP, no shared memory: tests kill nodes on purpose, and Fast DDS 3.2 can crash a later
# process opening a shared-memory port such a kill left inconsistent (launched_graph.use_loopback_udp)
use_loopback_udp()
os.environ["ROS_LOG_DIR"] = tempfile.mkdtemp(prefix="humanoid_test_roslog_")
os.environ["PYTHONUNBUFFERED"] = "1"
