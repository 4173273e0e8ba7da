"""Where a robot's configuration and its model files are found (no rclpy).

A robot is named (``g1``: ``config/robots/g1.yaml`` in the source tree or an installed share folder) or
given as a YAML path. Model files are never given as machine paths: each is a list of candidate *sources*,
tried in order:

- ``{python_package: P, path: R}``: ``R`` relative to the directory of the importable Python package ``P``;
- ``{site_packages: D, path: R}``: ``D/R`` under any ``site-packages`` directory on ``sys.path``;
- ``{ament_package: P, path: R}``: ``R`` under the ament share directory of ``P`` (full ROS 2 installs);
- ``{file: R}``: ``R`` relative to the configuration file's folder;
- ``{generate: mjcf}`` (``model.urdf`` only): no URDF file, one is generated from the MJCF
  (:mod:`humanoid_control.model.mjcf_to_urdf`) for robots that ship only a MuJoCo model.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

__all__ = ["ConfigError", "config_dir_candidates", "find_robot_config", "resolve_sources"]


class ConfigError(ValueError):
    """A robot configuration file is malformed or refers to something that cannot be found."""


def config_dir_candidates() -> list[Path]:
    """Folders that may hold ``robots/<name>.yaml``: the source tree, then installed share folders."""
    here = Path(__file__).resolve().parents[2]
    candidates = [here / "config"]
    try:  # full ROS 2 install / colcon workspace
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("humanoid_stack")) / "config")
    except Exception:
        pass
    candidates.append(Path(sys.prefix) / "share" / "humanoid_stack" / "config")
    return candidates


def find_robot_config(robot: str) -> Path:
    """Locate the configuration of ``robot`` (a name such as ``g1``, or a path to a YAML file)."""
    if robot.endswith((".yaml", ".yml")) or os.sep in robot:
        path = Path(robot).expanduser()
        if not path.is_file():
            raise ConfigError(f"robot configuration file not found: {path}")
        return path
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", robot):
        raise ConfigError(f"invalid robot name '{robot}'")
    for folder in config_dir_candidates():
        path = folder / "robots" / f"{robot}.yaml"
        if path.is_file():
            return path
    known = sorted({p.stem for d in config_dir_candidates() for p in (d / "robots").glob("*.yaml")})
    raise ConfigError(f"unknown robot '{robot}' (known: {', '.join(known) or 'none'})")


def resolve_sources(sources: tuple[dict[str, str], ...], config_path: Path, what: str) -> Path:
    """First existing path among ``sources`` (see module docstring).

    Raises :class:`ConfigError` listing all tried.
    """
    tried: list[str] = []
    for src in sources:
        paths = _candidate_paths(src, config_path)
        for path in paths:
            if path.exists():
                return path
            tried.append(str(path))
        if not paths:
            tried.append(f"{src} (package not installed)")
    raise ConfigError(f"cannot find the {what} file; tried: {'; '.join(tried)}")


def _candidate_paths(src: dict[str, str], config_path: Path) -> list[Path]:
    rel = src.get("path", "")
    if "python_package" in src:
        spec = importlib.util.find_spec(src["python_package"])
        if spec is None or not spec.submodule_search_locations:
            return []
        return [Path(loc) / rel for loc in spec.submodule_search_locations]
    if "site_packages" in src:
        roots = [Path(p) for p in sys.path if p.endswith("site-packages") or p.endswith("dist-packages")]
        return [root / src["site_packages"] / rel for root in roots]
    if "ament_package" in src:
        try:
            from ament_index_python.packages import get_package_share_directory

            return [Path(get_package_share_directory(src["ament_package"])) / rel]
        except Exception:
            return []
    if "file" in src:
        return [config_path.parent / src["file"]]
    if src.get("generate") == "mjcf":
        return []  # generated, not a file (RobotConfig.urdf_from_mjcf)
    raise ConfigError(f"model source {src} has none of python_package, site_packages, ament_package, file")
