"""The suite's DDS transport: loopback UDP, no Fast DDS shared memory (launched_graph.use_loopback_udp).

A process killed with SIGKILL can leave a Fast DDS shared-memory port inconsistent, and Fast DDS 3.2 crashes
(SIGSEGV) a later process that opens it (eProsima/Fast-DDS#6501): the suite kills nodes on purpose, so its
graphs must not map any shared-memory segment, in this process or in a node process it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECK = (
    "import rclpy\n"
    "from std_msgs.msg import String\n"
    "rclpy.init()\n"
    "node = rclpy.create_node('transport_check')\n"
    "node.create_publisher(String, '/transport_check', 10)\n"
    "maps = open('/proc/self/maps').read()\n"
    "print(sorted({l.split()[-1] for l in maps.splitlines() if '/dev/shm/fastdds' in l}))\n"
    "node.destroy_node()\n"
    "rclpy.shutdown()\n"
)


def test_the_suite_uses_loopback_udp_without_shared_memory() -> None:
    profile = Path(os.environ["FASTDDS_DEFAULT_PROFILES_FILE"])
    assert profile.is_file() and profile.name == "loopback_udp.xml"
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_without_the_profile_fast_dds_maps_shared_memory() -> None:
    """The check above can fail: the rmw's own localhost setting maps shared-memory ports."""
    env = {k: v for k, v in os.environ.items() if k != "FASTDDS_DEFAULT_PROFILES_FILE"}
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "fastdds_port" in out.stdout, out.stdout
