"""``humanoid-urdf``: print the URDF the stack serves on /robot_description (for xacro-less tools, rviz2)."""

from __future__ import annotations

import argparse
import sys

from humanoid_control.model.robot_config import ConfigError, load_robot_config
from humanoid_control.model.urdf import MESH_URI_MODES, robot_description_xml


def main(argv: list[str] | None = None) -> int:
    """Print the processed URDF of ``--robot`` to stdout."""
    parser = argparse.ArgumentParser(prog="humanoid-urdf", description=__doc__)
    parser.add_argument("--robot", default="g1", help="robot configuration name or YAML path (default g1)")
    parser.add_argument("--mesh-uris", default="file", choices=MESH_URI_MODES)
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(robot_description_xml(load_robot_config(args.robot), args.mesh_uris) + "\n")
    except ConfigError as exc:
        print(f"humanoid-urdf: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
