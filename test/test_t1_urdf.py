"""The URDF generated from an MJCF (robots without a URDF, e.g. the T1) against MuJoCo itself."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from humanoid_control.model.mjcf_to_urdf import matrix_to_rpy, mjcf_to_urdf
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.urdf import robot_description_xml

pin = pytest.importorskip("pinocchio")
mujoco = pytest.importorskip("mujoco")


def _mujoco_frame(m, d, name: str) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, name)
    if sid >= 0:
        return d.site_xpos[sid], d.site_xmat[sid].reshape(3, 3)
    bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
    assert bid >= 0, name
    return d.xpos[bid], d.xmat[bid].reshape(3, 3)


@pytest.mark.parametrize("robot", ["t1", "g1"])
def test_generated_urdf_matches_mujoco(robot: str) -> None:
    config = load_robot_config(robot)
    mjcf = config.resolve_mjcf()
    urdf = pin.buildModelFromXML(mjcf_to_urdf(mjcf), pin.JointModelFreeFlyer())
    m = mujoco.MjModel.from_xml_path(str(mjcf))
    d = mujoco.MjData(m)
    mj_joints = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(1, m.njnt)]
    assert list(urdf.names)[2:] == mj_joints  # universe, root free flyer, then the MJCF's joints in order
    assert set(config.joint_names) <= set(mj_joints)
    mass = float(np.sum(m.body_mass))
    assert abs(pin.computeTotalMass(urdf) - mass) <= 0.01 * mass
    data = urdf.createData()
    rng = np.random.default_rng(7)
    frames = [f.body for f in config.feet.values()] + [config.imu.site]
    for _ in range(4):
        qpos = m.qpos0.copy()
        qpos[:3] = rng.normal(size=3)
        quat = rng.normal(size=4)
        qpos[3:7] = quat / np.linalg.norm(quat)
        lo, hi = m.jnt_range[1:, 0], m.jnt_range[1:, 1]
        qpos[7:] = rng.uniform(lo, hi)
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        q = qpos.copy()
        q[3:7] = [qpos[4], qpos[5], qpos[6], qpos[3]]  # wxyz -> xyzw
        pin.framesForwardKinematics(urdf, data, q)
        for name in frames:
            pos, rot = _mujoco_frame(m, d, name)
            placement = data.oMf[urdf.getFrameId(name)]
            np.testing.assert_allclose(placement.translation, pos, atol=1e-9)
            np.testing.assert_allclose(placement.rotation, rot, atol=1e-9)


def test_t1_robot_description() -> None:
    config = load_robot_config("t1")
    assert config.urdf_from_mjcf
    root = ET.fromstring(robot_description_xml(config, "file"))
    links = {link.get("name") for link in root.findall("link")}
    assert {"base_link", "Trunk", "left_foot_link", "right_foot_link", "imu"} <= links
    joints = {j.get("name"): j for j in root.findall("joint")}
    for spec in config.joints:  # the configured limits are written over the MJCF's
        limit = joints[spec.name].find("limit")
        assert limit is not None
        assert float(limit.get("velocity", "nan")) == spec.velocity
        assert float(limit.get("effort", "nan")) == spec.effort
    meshes = [mesh.get("filename", "") for mesh in root.iter("mesh")]
    assert meshes and all(uri.startswith("file://") for uri in meshes)
    packaged = ET.fromstring(robot_description_xml(config, "package"))
    uris = [mesh.get("filename", "") for mesh in packaged.iter("mesh")]
    assert uris and all(uri.startswith("package://booster_t1/assets/") for uri in uris)
    folder = config.resolve_urdf_package("booster_t1")
    assert all((folder / uri[len("package://booster_t1/") :]).is_file() for uri in uris)


def test_tf_tree_of_the_generated_description() -> None:
    from humanoid_bringup.description.kinematic_tree import parse_urdf

    tree = parse_urdf(robot_description_xml(load_robot_config("t1")))
    assert tree.root == "base_link"
    assert {"left_foot_link", "right_foot_link", "imu"} <= set(tree.links)


def test_rpy_round_trip() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        rpy = rng.uniform(-3.0, 3.0, size=3) * np.array([1.0, 0.5, 1.0])
        r = pin.rpy.rpyToMatrix(*rpy)
        np.testing.assert_allclose(pin.rpy.rpyToMatrix(*matrix_to_rpy(r)), r, atol=1e-12)
