"""Test session setup: an isolated ROS graph (random domain, localhost only, logs in a temp folder)."""

from __future__ import annotations

import os
import random
import tempfile

# Before anything imports rclpy or mujoco.
os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 100))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_LOG_DIR"] = tempfile.mkdtemp(prefix="humanoid_test_roslog_")
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ["PYTHONUNBUFFERED"] = "1"
