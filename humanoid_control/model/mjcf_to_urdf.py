"""A URDF generated from an MJCF, for robots that ship only a MuJoCo model (pure: MuJoCo, numpy, no rclpy).

``/robot_description``, the ``tf_publisher`` and rviz2 need a URDF; pinocchio and MuJoCo load the MJCF itself.
The URDF is built from the *compiled* MuJoCo model, so defaults, ``childclass`` and orientation shorthands are
already resolved:

- one ``<link>`` per MJCF body below the world, named like the body; the root link is the body carrying the
  free joint (the base), whose free joint is left out (the state estimator places the base);
- one ``<joint>`` per body: ``revolute`` for a limited hinge, ``continuous`` for an unlimited one,
  ``prismatic`` for a slide, ``fixed`` for a body welded to its parent; ``<origin>`` is the body's pose in
  its parent (m, rad, roll-pitch-yaw about fixed x, y, z), ``<axis>`` the joint axis in the body frame,
  ``<limit>`` the MJCF range (rad or m) and ``actuatorfrcrange`` (N m or N; velocity 0: an MJCF has no
  velocity limit, and :func:`humanoid_control.model.urdf.robot_description_xml` writes the configured limits
  over these);
- ``<inertial>``: mass (kg), centre of mass and principal axes (``<origin>``) and the principal moments
  (kg m^2, diagonal);
- ``<visual>``: every mesh geom of the body, in the original mesh file's frame (MuJoCo re-centres meshes on
  their own inertia frame at compile time; ``mesh_pos`` / ``mesh_quat`` undo that), scaled, coloured with the
  geom's or its material's RGBA;
- each MJCF site becomes a massless link fixed to its body (the IMU site is then a frame of the URDF, as a
  URDF's IMU link is).

Unsupported (a :class:`ConfigError` names it): a body with more than one joint, a joint whose anchor is not
the body origin, ball joints, a free joint below the root.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np

from humanoid_control.model.robot_config import ConfigError


def _quat_to_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_rpy(r: np.ndarray) -> tuple[float, float, float]:
    """Roll, pitch, yaw (rad) with ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (URDF's convention)."""
    pitch = math.atan2(-r[2, 0], math.hypot(r[0, 0], r[1, 0]))
    if abs(math.cos(pitch)) < 1e-9:  # gimbal lock: put everything in yaw
        return 0.0, pitch, math.atan2(-r[0, 1], r[1, 1])
    return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])


def _fmt(values: object) -> str:
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    return " ".join(f"{float(v):.9g}" for v in np.where(np.abs(arr) < 1e-12, 0.0, arr))


def _origin(parent: ET.Element, pos: np.ndarray, rot: np.ndarray) -> None:
    ET.SubElement(parent, "origin", xyz=_fmt(pos), rpy=_fmt(matrix_to_rpy(rot)))


def mjcf_to_urdf(
    mjcf: str | Path,
    mesh_uri: Callable[[Path], str] | None = None,
    name: str | None = None,
) -> str:
    """URDF text of the robot in the MJCF file ``mjcf`` (see the module docstring).

    Args:
        mjcf: the robot's MJCF (the bare robot, not a scene with a floor).
        mesh_uri: maps a mesh file's absolute path to the URI written in ``<mesh filename>``; default
            ``file://`` URIs.
        name: the ``<robot name>``; default the MJCF's model name.
    """
    import mujoco

    path = Path(mjcf).resolve()
    try:
        spec = mujoco.MjSpec.from_file(str(path))
        m = spec.compile()
    except ValueError as exc:
        raise ConfigError(f"cannot compile the MJCF {path}: {exc}") from None
    to_uri = mesh_uri or (lambda p: p.as_uri())
    meshdir = path.parent / (spec.meshdir or "")
    mesh_files = [(meshdir / mesh.file).resolve() for mesh in spec.meshes]

    def obj_name(kind: object, idx: int) -> str:
        return mujoco.mj_id2name(m, kind, idx) or ""

    robot = ET.Element("robot", name=name or spec.modelname or path.stem)
    materials: dict[tuple[float, ...], str] = {}
    link_names: set[str] = set()
    root = -1
    for b in range(1, m.nbody):
        bname = obj_name(mujoco.mjtObj.mjOBJ_BODY, b)
        if not bname:
            raise ConfigError(f"{path}: body {b} has no name; every body needs one for the URDF")
        joints = [j for j in range(m.njnt) if m.jnt_bodyid[j] == b]
        free = [j for j in joints if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        if free:
            if m.body_parentid[b] != 0 or root >= 0:
                raise ConfigError(f"{path}: free joint on body '{bname}' below the root")
            root = b
        elif m.body_parentid[b] == 0:
            if root >= 0:
                raise ConfigError(f"{path}: more than one body below the world ('{bname}')")
            root = b
        link_names.add(bname)
        link = ET.SubElement(robot, "link", name=bname)
        _inertial(link, m, b)
        _visuals(link, m, b, mesh_files, to_uri, materials, robot)
        if b == root:
            continue
        _joint(robot, m, b, joints, bname, obj_name(mujoco.mjtObj.mjOBJ_BODY, int(m.body_parentid[b])), path)
    for s in range(m.nsite):
        sname = obj_name(mujoco.mjtObj.mjOBJ_SITE, s)
        if not sname or sname in link_names:
            continue
        link_names.add(sname)
        ET.SubElement(robot, "link", name=sname)
        joint = ET.SubElement(robot, "joint", name=f"{sname}_fixed", type="fixed")
        _origin(joint, m.site_pos[s], _quat_to_matrix(m.site_quat[s]))
        ET.SubElement(joint, "parent", link=obj_name(mujoco.mjtObj.mjOBJ_BODY, int(m.site_bodyid[s])))
        ET.SubElement(joint, "child", link=sname)
    if root < 0:
        raise ConfigError(f"{path}: no body below the world")
    ET.indent(robot)
    return ET.tostring(robot, encoding="unicode")


def _inertial(link: ET.Element, m: object, b: int) -> None:
    mass = float(m.body_mass[b])  # type: ignore[attr-defined]
    if mass <= 0.0:
        return
    inertial = ET.SubElement(link, "inertial")
    _origin(inertial, m.body_ipos[b], _quat_to_matrix(m.body_iquat[b]))  # type: ignore[attr-defined]
    ET.SubElement(inertial, "mass", value=f"{mass:.9g}")
    ixx, iyy, izz = (float(v) for v in m.body_inertia[b])  # type: ignore[attr-defined]
    ET.SubElement(
        inertial, "inertia", ixx=f"{ixx:.9g}", iyy=f"{iyy:.9g}", izz=f"{izz:.9g}", ixy="0", ixz="0", iyz="0"
    )


def _visuals(
    link: ET.Element,
    m: object,
    b: int,
    mesh_files: list[Path],
    to_uri: Callable[[Path], str],
    materials: dict[tuple[float, ...], str],
    robot: ET.Element,
) -> None:
    import mujoco

    for g in range(m.ngeom):  # type: ignore[attr-defined]
        if m.geom_bodyid[g] != b or m.geom_type[g] != mujoco.mjtGeom.mjGEOM_MESH:  # type: ignore[attr-defined]
            continue
        if m.geom_contype[g] or m.geom_conaffinity[g]:  # type: ignore[attr-defined]
            continue  # a collision mesh: the visual one is drawn
        mesh = int(m.geom_dataid[g])  # type: ignore[attr-defined]
        # compiled geom pose = original geom pose * mesh offset; the URDF draws the original mesh file
        r_geom = _quat_to_matrix(m.geom_quat[g])  # type: ignore[attr-defined]
        r_mesh = _quat_to_matrix(m.mesh_quat[mesh])  # type: ignore[attr-defined]
        rot = r_geom @ r_mesh.T
        pos = m.geom_pos[g] - rot @ m.mesh_pos[mesh]  # type: ignore[attr-defined]
        visual = ET.SubElement(link, "visual")
        _origin(visual, pos, rot)
        geometry = ET.SubElement(visual, "geometry")
        ET.SubElement(
            geometry,
            "mesh",
            filename=to_uri(mesh_files[mesh]),
            scale=_fmt(m.mesh_scale[mesh]),  # type: ignore[attr-defined]
        )
        mat = int(m.geom_matid[g])  # type: ignore[attr-defined]
        rgba = tuple(float(v) for v in (m.mat_rgba[mat] if mat >= 0 else m.geom_rgba[g]))  # type: ignore[attr-defined]
        if rgba not in materials:
            materials[rgba] = f"rgba_{len(materials)}"
            material = ET.Element("material", name=materials[rgba])
            ET.SubElement(material, "color", rgba=_fmt(rgba))
            robot.insert(len(materials) - 1, material)
        ET.SubElement(visual, "material", name=materials[rgba])


def _joint(
    robot: ET.Element, m: object, b: int, joints: list[int], child: str, parent: str, path: Path
) -> None:
    import mujoco

    if len(joints) > 1:
        raise ConfigError(f"{path}: body '{child}' has {len(joints)} joints; a URDF link has one")
    pos = m.body_pos[b]  # type: ignore[attr-defined]
    rot = _quat_to_matrix(m.body_quat[b])  # type: ignore[attr-defined]
    if not joints:
        joint = ET.SubElement(robot, "joint", name=f"{child}_fixed", type="fixed")
        _origin(joint, pos, rot)
        ET.SubElement(joint, "parent", link=parent)
        ET.SubElement(joint, "child", link=child)
        return
    j = joints[0]
    jname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"{child}_joint"
    jtype = m.jnt_type[j]  # type: ignore[attr-defined]
    if np.linalg.norm(m.jnt_pos[j]) > 1e-9:  # type: ignore[attr-defined]
        raise ConfigError(f"{path}: joint '{jname}' is not at its body's origin (unsupported)")
    limited = bool(m.jnt_limited[j])  # type: ignore[attr-defined]
    if jtype == mujoco.mjtJoint.mjJNT_HINGE:
        kind = "revolute" if limited else "continuous"
    elif jtype == mujoco.mjtJoint.mjJNT_SLIDE:
        kind = "prismatic"
    else:
        raise ConfigError(f"{path}: joint '{jname}' is a ball or free joint below the root (unsupported)")
    joint = ET.SubElement(robot, "joint", name=jname, type=kind)
    _origin(joint, pos, rot)
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=child)
    ET.SubElement(joint, "axis", xyz=_fmt(m.jnt_axis[j]))  # type: ignore[attr-defined]
    effort = float(np.max(np.abs(m.jnt_actfrcrange[j]))) if m.jnt_actfrclimited[j] else 0.0  # type: ignore[attr-defined]
    limit = ET.SubElement(joint, "limit", effort=f"{effort:.9g}", velocity="0")
    if limited or kind == "prismatic":
        lo, hi = (float(v) for v in m.jnt_range[j])  # type: ignore[attr-defined]
        limit.set("lower", f"{lo:.9g}")
        limit.set("upper", f"{hi:.9g}")
    damping, friction = float(m.dof_damping[m.jnt_dofadr[j]]), float(m.dof_frictionloss[m.jnt_dofadr[j]])  # type: ignore[attr-defined]
    if damping or friction:
        ET.SubElement(joint, "dynamics", damping=f"{damping:.9g}", friction=f"{friction:.9g}")
