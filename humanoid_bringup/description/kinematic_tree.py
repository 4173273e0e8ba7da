"""URDF -> kinematic tree -> the transforms of ``/tf`` and ``/tf_static`` (pure: numpy and the standard
library, no rclpy).

What the project's ``tf_publisher`` node (and upstream ``robot_state_publisher``) publishes from
``/robot_description`` and ``/joint_states``: for every joint of the URDF, the pose of its child link's frame
in its parent link's frame, ``T_parent_child = T_origin * T_motion(q)``:

- ``T_origin``: the joint's ``<origin xyz rpy>`` (m, rad; roll-pitch-yaw about the fixed x, y, z axes,
  ``R = Rz(yaw) Ry(pitch) Rx(roll)``), the joint frame in the parent link frame;
- ``T_motion(q)``: a rotation by ``q`` (rad) about the joint's unit ``<axis>`` (joint frame) for revolute and
  continuous joints, a translation by ``q`` (m) along it for prismatic ones, identity for fixed ones;
  ``<mimic>`` joints follow ``multiplier * q_master + offset``.

Fixed joints go on ``/tf_static`` (:meth:`KinematicTree.fixed_transforms`), the others on ``/tf`` once their
position is known (:meth:`KinematicTree.moving_transforms`). Floating and planar joints have no position in
``/joint_states``: like robot_state_publisher, nothing is published for them (their child's pose comes from
elsewhere, e.g. the state estimator for the root). Frame names are the URDF's link names.

Rotations are quaternions ``(x, y, z, w)`` as in ``geometry_msgs/Quaternion``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["KinematicTree", "LinkTransform", "TreeJoint", "UrdfError", "parse_urdf"]

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
MOVING_TYPES = ("revolute", "continuous", "prismatic")


class UrdfError(ValueError):
    """A URDF that does not describe one kinematic tree (the message says what is wrong)."""


Quaternion = tuple[float, float, float, float]
Vector = tuple[float, float, float]


@dataclass(frozen=True)
class LinkTransform:
    """The pose of frame ``child`` in frame ``parent``: ``translation`` (m) and ``rotation`` (quaternion
    ``(x, y, z, w)``), i.e. ``p_parent = R p_child + translation``."""

    parent: str
    child: str
    translation: Vector
    rotation: Quaternion


@dataclass(frozen=True)
class TreeJoint:
    """One URDF joint: ``origin_xyz`` (m) and ``origin_quat`` (x, y, z, w) place the joint frame in the parent
    link frame; ``axis`` is a unit vector in the joint frame; ``mimic`` is ``(master joint, multiplier,
    offset)`` or None."""

    name: str
    kind: str
    parent: str
    child: str
    origin_xyz: Vector
    origin_quat: Quaternion
    axis: Vector
    mimic: tuple[str, float, float] | None = None


def quat_multiply(a: Quaternion, b: Quaternion) -> Quaternion:
    """Hamilton product ``a * b`` of quaternions ``(x, y, z, w)``."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


def quat_rotate(q: Quaternion, v: Vector) -> Vector:
    """``v`` rotated by the unit quaternion ``q`` ``(x, y, z, w)``."""
    x, y, z, w = q
    # t = 2 q_vec x v; v' = v + w t + q_vec x t
    tx, ty, tz = 2.0 * (y * v[2] - z * v[1]), 2.0 * (z * v[0] - x * v[2]), 2.0 * (x * v[1] - y * v[0])
    return (
        v[0] + w * tx + y * tz - z * ty,
        v[1] + w * ty + z * tx - x * tz,
        v[2] + w * tz + x * ty - y * tx,
    )


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> Quaternion:
    """Quaternion ``(x, y, z, w)`` of URDF roll-pitch-yaw (rad): ``Rz(yaw) Ry(pitch) Rx(roll)``."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    )


def quat_to_matrix(q: Quaternion) -> np.ndarray:
    """3x3 rotation matrix of the unit quaternion ``q`` ``(x, y, z, w)``."""
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _floats(text: str | None, n: int, default: tuple[float, ...], what: str) -> tuple[float, ...]:
    if text is None:
        return default
    try:
        values = tuple(float(v) for v in text.split())
    except ValueError:
        raise UrdfError(f"{what}: '{text}' is not {n} numbers") from None
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise UrdfError(f"{what}: '{text}' is not {n} finite numbers")
    return values


def _joint(element: ET.Element) -> TreeJoint:
    name = element.get("name")
    if not name:
        raise UrdfError("a <joint> without a name")
    kind = element.get("type", "")
    if kind not in JOINT_TYPES:
        raise UrdfError(f"joint '{name}': type '{kind}' is not one of {JOINT_TYPES}")
    links = {}
    for tag in ("parent", "child"):
        sub = element.find(tag)
        link = sub.get("link") if sub is not None else None
        if not link:
            raise UrdfError(f"joint '{name}': no <{tag} link=...>")
        links[tag] = link
    origin = element.find("origin")
    xyz = _floats(
        origin.get("xyz") if origin is not None else None, 3, (0.0, 0.0, 0.0), f"joint '{name}' xyz"
    )
    rpy = _floats(
        origin.get("rpy") if origin is not None else None, 3, (0.0, 0.0, 0.0), f"joint '{name}' rpy"
    )
    axis_el = element.find("axis")
    axis = _floats(
        axis_el.get("xyz") if axis_el is not None else None, 3, (1.0, 0.0, 0.0), f"joint '{name}' axis"
    )
    norm = math.sqrt(sum(a * a for a in axis))
    if kind in MOVING_TYPES and norm < 1e-9:
        raise UrdfError(f"joint '{name}': zero axis")
    if norm > 1e-9:
        axis = tuple(a / norm for a in axis)
    mimic = None
    mimic_el = element.find("mimic")
    if mimic_el is not None and kind in MOVING_TYPES:
        master = mimic_el.get("joint")
        if not master:
            raise UrdfError(f"joint '{name}': <mimic> without a joint")
        (mult,) = _floats(mimic_el.get("multiplier"), 1, (1.0,), f"joint '{name}' mimic multiplier")
        (offset,) = _floats(mimic_el.get("offset"), 1, (0.0,), f"joint '{name}' mimic offset")
        mimic = (master, mult, offset)
    return TreeJoint(
        name=name,
        kind=kind,
        parent=links["parent"],
        child=links["child"],
        origin_xyz=(xyz[0], xyz[1], xyz[2]),
        origin_quat=quat_from_rpy(*rpy),
        axis=(axis[0], axis[1], axis[2]),
        mimic=mimic,
    )


@dataclass(frozen=True)
class KinematicTree:
    """A URDF's links and joints: ``root`` is the one link without a parent joint; ``joints`` are in
    topological order (every joint after the joint of its parent link)."""

    name: str
    root: str
    links: tuple[str, ...]
    joints: tuple[TreeJoint, ...]

    @property
    def moving_joint_names(self) -> tuple[str, ...]:
        """Joints whose position ``/joint_states`` gives (revolute, continuous, prismatic; mimic ones
        excluded: they follow their master)."""
        return tuple(j.name for j in self.joints if j.kind in MOVING_TYPES and j.mimic is None)

    def fixed_transforms(self) -> list[LinkTransform]:
        """The transforms of the fixed joints (``/tf_static``)."""
        return [
            LinkTransform(j.parent, j.child, j.origin_xyz, j.origin_quat)
            for j in self.joints
            if j.kind == "fixed"
        ]

    def moving_transforms(self, positions: Mapping[str, float]) -> list[LinkTransform]:
        """The transforms of the revolute, continuous and prismatic joints whose position is in ``positions``
        (joint name -> rad or m; a mimic joint: its master's), in tree order; the others are left out."""
        out = []
        for j in self.joints:
            if j.kind not in MOVING_TYPES:
                continue
            if j.mimic is None:
                q = positions.get(j.name)
            else:
                master = positions.get(j.mimic[0])
                q = None if master is None else j.mimic[1] * master + j.mimic[2]
            if q is None:
                continue
            out.append(self.joint_transform(j, float(q)))
        return out

    @staticmethod
    def joint_transform(j: TreeJoint, q: float) -> LinkTransform:
        """``T_parent_child`` of joint ``j`` at position ``q`` (rad or m)."""
        if j.kind == "prismatic":
            d = quat_rotate(j.origin_quat, (j.axis[0] * q, j.axis[1] * q, j.axis[2] * q))
            xyz = (j.origin_xyz[0] + d[0], j.origin_xyz[1] + d[1], j.origin_xyz[2] + d[2])
            return LinkTransform(j.parent, j.child, xyz, j.origin_quat)
        if j.kind in ("revolute", "continuous"):
            s = math.sin(q / 2)
            motion = (j.axis[0] * s, j.axis[1] * s, j.axis[2] * s, math.cos(q / 2))
            return LinkTransform(j.parent, j.child, j.origin_xyz, quat_multiply(j.origin_quat, motion))
        return LinkTransform(j.parent, j.child, j.origin_xyz, j.origin_quat)

    def link_poses(self, positions: Mapping[str, float]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every link's pose in the root link frame, ``(R 3x3, p (m))``, by chaining the joints' transforms
        (a joint without a position, floating and planar joints included, at its zero)."""
        moving = {t.child: t for t in self.moving_transforms(positions)}
        poses = {self.root: (np.eye(3), np.zeros(3))}
        for j in self.joints:
            t = moving.get(j.child) or self.joint_transform(j, 0.0)
            r_parent, p_parent = poses[j.parent]
            poses[j.child] = (
                r_parent @ quat_to_matrix(t.rotation),
                r_parent @ np.asarray(t.translation) + p_parent,
            )
        return poses


def parse_urdf(xml: str) -> KinematicTree:
    """The kinematic tree of a URDF document. Raises :class:`UrdfError` for anything that is not one tree:
    malformed XML, no ``<robot>``, duplicate or unnamed links or joints, a joint naming an unknown link, a
    link with two parent joints, no root or several roots (a loop or a forest), a mimic joint of an unknown
    joint, non-numeric or non-finite origins and axes."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise UrdfError(f"malformed URDF: {exc}") from None
    if root.tag != "robot":
        raise UrdfError(f"the document's root element is <{root.tag}>, not <robot>")
    links: list[str] = []
    for link in root.findall("link"):
        name = link.get("name")
        if not name:
            raise UrdfError("a <link> without a name")
        if name in links:
            raise UrdfError(f"link '{name}' defined twice")
        links.append(name)
    if not links:
        raise UrdfError("the URDF has no links")
    joints = [_joint(j) for j in root.findall("joint")]
    names = [j.name for j in joints]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise UrdfError(f"joints defined twice: {dup}")
    known = set(links)
    by_child: dict[str, TreeJoint] = {}
    children: dict[str, list[TreeJoint]] = {}
    for j in joints:
        for link in (j.parent, j.child):
            if link not in known:
                raise UrdfError(f"joint '{j.name}' names link '{link}', which the URDF does not define")
        if j.child in by_child:
            raise UrdfError(
                f"link '{j.child}' has two parent joints: '{by_child[j.child].name}' and '{j.name}'"
            )
        by_child[j.child] = j
        children.setdefault(j.parent, []).append(j)
    roots = [link for link in links if link not in by_child]
    if len(roots) != 1:
        raise UrdfError(f"a URDF tree has one root link, this one has {len(roots)}: {roots[:5]}")
    for j in joints:
        if j.mimic is not None and j.mimic[0] not in names:
            raise UrdfError(f"joint '{j.name}' mimics unknown joint '{j.mimic[0]}'")
    ordered: list[TreeJoint] = []
    reached = [roots[0]]
    for link in reached:  # breadth-first from the root (the list grows while it is walked)
        for j in children.get(link, []):
            ordered.append(j)
            reached.append(j.child)
    if len(ordered) != len(joints):  # a loop detached from the root
        cut = sorted(set(names) - {j.name for j in ordered})
        raise UrdfError(f"joints not reachable from the root link '{roots[0]}' (a loop): {cut[:5]}")
    return KinematicTree(name=root.get("name", ""), root=roots[0], links=tuple(links), joints=tuple(ordered))
