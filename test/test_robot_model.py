"""MuJoCo, pinocchio and the served URDF describe the same robot."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import (
    initial_qpos,
    load_mujoco_model,
    load_pinocchio_model,
    mujoco_qpos_to_pinocchio,
    mujoco_qvel_to_pinocchio,
    standing_base_height,
)
from humanoid_control.model.urdf import robot_description_xml


@pytest.fixture(scope="module")
def models():  # type: ignore[no-untyped-def]
    c = load_robot_config("g1")
    return c, load_mujoco_model(c, scene=False), load_pinocchio_model(c)


def test_joint_names_and_order_agree(models) -> None:  # type: ignore[no-untyped-def]
    c, mj, pm = models
    m = mj.model
    mj_names = [m.joint(i).name for i in range(m.njnt) if m.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE]
    pin_names = [pm.model.names[i] for i in range(2, pm.model.njoints)]
    assert mj_names == c.joint_names == pin_names
    # same q layout: joint i of the configuration sits at the same q index (after the 7 base entries)
    assert np.array_equal(mj.qpos_adr, pm.joint_q_idx)
    assert np.array_equal(mj.qvel_adr, pm.joint_v_idx)


def test_mass_com_and_soles_agree_at_random_configurations(models) -> None:  # type: ignore[no-untyped-def]
    c, mj, pm = models
    m = mj.model
    d = mujoco.MjData(m)
    pdata = pm.model.createData()
    assert pin.computeTotalMass(pm.model) == pytest.approx(m.body_subtreemass[mj.base_body_id], abs=1e-9)
    rng = np.random.default_rng(42)
    for _ in range(20):
        qpos = initial_qpos(c, mj, pm, rng.uniform(c.array("lower"), c.array("upper")))
        qpos[0:3] = rng.normal(size=3)
        quat = rng.normal(size=4)
        qpos[3:7] = quat / np.linalg.norm(quat)
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        q = mujoco_qpos_to_pinocchio(qpos)
        com = pin.centerOfMass(pm.model, pdata, q)
        pin.framesForwardKinematics(pm.model, pdata, q)
        assert np.abs(d.subtree_com[mj.base_body_id] - com).max() < 1e-6
        for side in ("left", "right"):
            mj_sole = d.site_xpos[mj.sole_site_ids[side]]
            pin_sole = pdata.oMf[pm.sole_frame_ids[side]]
            assert np.abs(mj_sole - pin_sole.translation).max() < 1e-6
            assert np.abs(d.site_xmat[mj.sole_site_ids[side]].reshape(3, 3) - pin_sole.rotation).max() < 1e-9
        imu = pdata.oMf[pm.imu_frame_id].translation
        assert np.abs(d.site_xpos[mj.imu_site_id] - imu).max() < 1e-6


def test_velocity_convention_matches_dynamics(models) -> None:  # type: ignore[no-untyped-def]
    """Kinetic energy from MuJoCo's mass matrix equals pinocchio's with the converted velocity."""
    c, mj, pm = models
    m = mj.model
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    qpos = initial_qpos(c, mj, pm, c.array("default"))
    quat = rng.normal(size=4)
    qpos[3:7] = quat / np.linalg.norm(quat)
    d.qpos[:] = qpos
    d.qvel[:] = rng.normal(size=m.nv)
    mujoco.mj_forward(m, d)
    mass = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, mass)  # MuJoCo >= 4 signature
    ke_mj = 0.5 * d.qvel @ mass @ d.qvel
    q = mujoco_qpos_to_pinocchio(qpos)
    v = mujoco_qvel_to_pinocchio(qpos, d.qvel)
    ke_pin = pin.computeKineticEnergy(pm.model, pm.model.createData(), q, v)
    # both add the joint armature (0.01 kg m^2) of the MJCF to the diagonal
    assert np.allclose(pm.model.armature, m.dof_armature)
    assert ke_mj == pytest.approx(ke_pin, rel=1e-9)


def test_standing_height_puts_soles_on_floor(models) -> None:  # type: ignore[no-untyped-def]
    c, _, pm = models
    h = standing_base_height(c, pm, c.array("default"))
    assert 0.70 < h < 0.80
    assert standing_base_height(c, pm, np.zeros(29)) > h  # straight legs stand taller


def test_served_urdf_matches_mujoco(models) -> None:  # type: ignore[no-untyped-def]
    c, mj, _ = models
    m = mj.model
    urdf = robot_description_xml(c, mesh_uris="file")
    root = ET.fromstring(urdf)
    movable = {j.get("name"): j for j in root.iter("joint") if j.get("type") in ("revolute", "continuous")}
    assert set(movable) == set(c.joint_names)
    for name, joint in movable.items():
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
        limit = joint.find("limit")
        assert limit is not None
        assert float(limit.get("lower")) == pytest.approx(m.jnt_range[jid][0], abs=1e-6), name
        assert float(limit.get("upper")) == pytest.approx(m.jnt_range[jid][1], abs=1e-6), name
        assert float(limit.get("effort")) == pytest.approx(m.jnt_actfrcrange[jid][1], abs=1e-6), name
    # link masses: pinocchio merges fixed links into their moving parent, as MuJoCo's bodies do
    purdf = pin.buildModelFromXML(urdf, pin.JointModelFreeFlyer())
    for jid in range(1, purdf.njoints):
        name = purdf.names[jid]
        body = (
            mj.base_body_id
            if jid == 1
            else int(m.jnt_bodyid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)])
        )
        assert purdf.inertias[jid].mass == pytest.approx(m.body_mass[body], rel=0.01), name
    for mesh in root.iter("mesh"):
        assert mesh.get("filename", "").startswith("file://")
