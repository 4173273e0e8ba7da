"""Package and executable lookup: ``$(find-pkg-share)``, ``$(find-pkg-prefix)``, launch files, executables."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

from humanoid_bringup.launcher.plan import LaunchError

__all__ = ["find_launch_file", "find_package_prefix", "find_package_share", "resolve_node_executable"]

OWN_PACKAGE = "humanoid_stack"


def _source_tree_root() -> Path | None:
    """The ``humanoid_stack`` source tree (the folder holding package.xml), if this module lives in one."""
    root = Path(__file__).resolve().parents[2]
    package_xml = root / "package.xml"
    try:
        content = package_xml.read_text(encoding="utf-8")
    except OSError:
        return None
    if f"<name>{OWN_PACKAGE}</name>" not in content:
        return None
    return root


def _ament_share(package: str) -> Path | None:
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        share = Path(get_package_share_directory(package))
    except (LookupError, OSError, ValueError):  # PackageNotFoundError; OSError if AMENT_PREFIX_PATH unset
        return None
    return share if share.is_dir() else None


def _ament_prefix(package: str) -> Path | None:
    try:
        from ament_index_python.packages import get_package_prefix
    except ImportError:
        return None
    try:
        return Path(get_package_prefix(package))
    except (LookupError, OSError, ValueError):  # not found, or AMENT_PREFIX_PATH unset
        return None


def find_package_share(package: str) -> Path:
    """Share directory of ``package`` (what ``$(find-pkg-share PKG)`` returns).

    Order: ament index; for ``humanoid_stack`` the source tree (if it has a ``launch/`` folder);
    ``<sys.prefix>/share/<package>``.  Raises :class:`LaunchError` when none exists.
    """
    share = _ament_share(package)
    if share is not None:
        return share
    if package == OWN_PACKAGE:
        root = _source_tree_root()
        if root is not None and (root / "launch").is_dir():
            return root
    candidate = Path(sys.prefix) / "share" / package
    if candidate.is_dir():
        return candidate
    raise LaunchError(
        f"package '{package}' not found: not in the ament index (AMENT_PREFIX_PATH="
        f"{os.environ.get('AMENT_PREFIX_PATH', '') or '<unset>'}) and no {candidate}"
    )


def find_package_prefix(package: str) -> Path:
    """Install prefix of ``package`` (what ``$(find-pkg-prefix PKG)`` returns)."""
    prefix = _ament_prefix(package)
    if prefix is not None:
        return prefix
    if (Path(sys.prefix) / "share" / package).is_dir():
        return Path(sys.prefix)
    if package == OWN_PACKAGE:
        root = _source_tree_root()
        if root is not None:
            return root
    raise LaunchError(f"package '{package}' not found (cannot resolve $(find-pkg-prefix {package}))")


def find_launch_file(package: str, launch_file: str) -> Path:
    """Find ``launch_file`` of ``package`` like ``ros2 launch PACKAGE LAUNCH_FILE`` does."""
    share = find_package_share(package)
    direct = share / "launch" / launch_file
    if direct.is_file():
        return direct
    for root, dirs, files in os.walk(share):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if launch_file in files:
            return Path(root) / launch_file
    raise LaunchError(f"launch file '{launch_file}' not found in package '{package}' ({share}/launch/)")


def _ament_prefixes() -> list[Path]:
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if Path(sys.prefix) not in prefixes:
        prefixes.append(Path(sys.prefix))
    return prefixes


def _entry_point_command(executable: str) -> list[str] | None:
    """``[python, -c, ...]`` running console script ``executable`` of the installed humanoid_stack."""
    try:
        dist = importlib.metadata.distribution(OWN_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.entry_points:
        if entry.group != "console_scripts" or entry.name != executable or not entry.attr:
            continue
        head = entry.attr.split(".")[0]
        code = (
            f"import sys; from {entry.module} import {head}; "
            f"sys.argv[0] = {executable!r}; sys.exit({entry.attr}())"
        )
        return [sys.executable, "-c", code]
    return None


def resolve_node_executable(package: str | None, executable: str, where: str) -> list[str]:
    if package is None:
        return [executable]
    if package == OWN_PACKAGE:
        command = _entry_point_command(executable)
        if command is not None:
            return command
    searched = []
    for prefix in _ament_prefixes():
        candidate = prefix / "lib" / package / executable
        searched.append(str(candidate))
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    hint = (
        f"console script '{executable}' of the installed '{OWN_PACKAGE}' distribution and "
        if (package == OWN_PACKAGE)
        else ""
    )
    raise LaunchError(
        f"{where}: executable '{executable}' of package '{package}' not found (looked for the {hint}"
        f"{', '.join(searched)}). The package is probably not installed here: a pip-only ROS 2 has no "
        f"launch_ros and few ROS packages; install '{package}' or drop this node for this machine"
    )
