"""The URDF served on ``/robot_description``: the robot's URDF with limits and mesh paths made consistent.

The configuration is the single source of truth for limits, so position, velocity and effort limits of every
configured joint are written from it (the G1 URDF of example-robot-data lists 35 N m for the ankles where the
MuJoCo model and the driver use 50 N m). ``package://`` mesh URIs are kept (``mesh_uris="package"``, for a
full ROS 2 install where the package is in the ament index) or rewritten to ``file://`` absolute paths
(``mesh_uris="file"``, which rviz2 on the same machine reads without the package being registered).

The tree's root is REP-105/120's ``base_link``: where the URDF's root link is another (the G1's ``pelvis``,
the configured base body), a link ``base_link`` without inertia is added with a fixed identity joint to it,
so that the state estimator's ``odom -> base_link`` joins the links' transforms (robot_state_publisher's KDL
wants a root link without inertia too). The URDF's root link must be the configured base body.

A robot without a URDF (``model.urdf: [{generate: mjcf}]``) gets one generated from its MJCF
(:mod:`humanoid_control.model.mjcf_to_urdf`); its mesh URIs are ``file://`` paths, or ``package://<name>/...``
where ``model.urdf_packages`` names a folder holding the mesh (``mesh_uris="package"``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from humanoid_control.model.mjcf_to_urdf import mjcf_to_urdf
from humanoid_control.model.robot_config import ConfigError, RobotConfig

MESH_URI_MODES = ("file", "package")
BASE_LINK = "base_link"  # REP-105 / REP-120: the root of the served tree, the child of odom


def robot_description_xml(config: RobotConfig, mesh_uris: str = "file") -> str:
    """URDF text for ``/robot_description`` (see module docstring)."""
    if mesh_uris not in MESH_URI_MODES:
        raise ConfigError(f"mesh_uris must be one of {MESH_URI_MODES}, not '{mesh_uris}'")
    if config.urdf_from_mjcf:
        path = config.resolve_mjcf()
        root = ET.fromstring(mjcf_to_urdf(path, _package_uri(config) if mesh_uris == "package" else None))
    else:
        path = config.resolve_urdf()
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise ConfigError(f"malformed URDF {path}: {exc}") from None
    joints = {j.name: j for j in config.joints}
    seen = set()
    for joint in root.iter("joint"):
        spec = joints.get(joint.get("name", ""))
        if spec is None:
            continue
        seen.add(spec.name)
        limit = joint.find("limit")
        if limit is None:
            limit = ET.SubElement(joint, "limit")
        limit.set("lower", f"{spec.lower:.9g}")
        limit.set("upper", f"{spec.upper:.9g}")
        limit.set("velocity", f"{spec.velocity:.9g}")
        limit.set("effort", f"{spec.effort:.9g}")
    missing = [n for n in config.joint_names if n not in seen]
    if missing:
        raise ConfigError(f"URDF {path} lacks configured joints {missing}")
    _add_base_link(root, config.base_body, path)
    if mesh_uris == "file":
        for mesh in root.iter("mesh"):
            uri = mesh.get("filename", "")
            if uri.startswith("package://"):
                package, _, rel = uri[len("package://") :].partition("/")
                mesh.set("filename", (config.resolve_urdf_package(package) / rel).resolve().as_uri())
    return ET.tostring(root, encoding="unicode")


def _package_uri(config: RobotConfig) -> Callable[[Path], str]:
    """Mesh path -> ``package://<name>/<rel>`` for the first ``urdf_packages`` folder holding it (else file://)."""
    folders = []
    for package in config.urdf_packages:
        try:
            folders.append((package, config.resolve_urdf_package(package).resolve()))
        except ConfigError:
            continue

    def uri(mesh: Path) -> str:
        for package, folder in folders:
            if mesh.is_relative_to(folder):
                return f"package://{package}/{mesh.relative_to(folder).as_posix()}"
        return mesh.as_uri()

    return uri


def _add_base_link(root: ET.Element, base_body: str, path: object) -> None:
    """Make ``base_link`` the root link (module docstring): added above ``base_body``, the URDF's root."""
    children = {c.get("link") for c in root.findall("joint/child")}
    roots = [link.get("name") for link in root.findall("link") if link.get("name") not in children]
    if roots == [BASE_LINK]:
        return
    if roots != [base_body]:
        raise ConfigError(
            f"URDF {path}: root links {roots}, where one, the base body '{base_body}', is expected"
        )
    joint = ET.Element("joint", name=f"{BASE_LINK}_joint", type="fixed")
    ET.SubElement(joint, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(joint, "parent", link=BASE_LINK)
    ET.SubElement(joint, "child", link=base_body)
    link = ET.Element("link", name=BASE_LINK)
    link.tail = joint.tail = "\n  "
    root.insert(0, joint)
    root.insert(0, link)
