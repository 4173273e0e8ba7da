"""Robot-model loader: MuJoCo and pinocchio load the same MJCF file, with the same added sole frames.

Conventions (the most common source of bugs, so stated once here):

- MuJoCo ``qpos`` = ``[x, y, z, qw, qx, qy, qz, joints...]``; pinocchio ``q`` = ``[x, y, z, qx, qy, qz, qw,
  joints...]``. Positions are of the base frame origin in the world frame (m).
- MuJoCo free-joint ``qvel[0:3]`` is the base linear velocity in the **world** frame, ``qvel[3:6]`` the
  angular velocity in the **base** frame. Pinocchio ``v[0:6]`` is ``[linear, angular]``, both in the
  **base** frame.
- Joint order after the base is the MJCF tree order, which the robot configuration lists explicitly; maps
  are built by name and checked, never assumed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from humanoid_control.model.robot_config import ConfigError, RobotConfig

if TYPE_CHECKING:
    from humanoid_control.hardware.scene import SceneSpec


def quat_wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    """Reorder a quaternion from MuJoCo's (w, x, y, z) to ROS/pinocchio's (x, y, z, w)."""
    return np.array([q[1], q[2], q[3], q[0]])


def quat_xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    """Reorder a quaternion from (x, y, z, w) to MuJoCo's (w, x, y, z)."""
    return np.array([q[3], q[0], q[1], q[2]])


def quat_wxyz_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion (w, x, y, z): maps body-frame vectors to the world frame."""
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def mujoco_qpos_to_pinocchio(qpos: np.ndarray) -> np.ndarray:
    """MuJoCo qpos (base wxyz) to pinocchio q (base xyzw).

    The joint part is unchanged (same order by construction).
    """
    q = np.array(qpos, dtype=float, copy=True)
    q[3:7] = quat_wxyz_to_xyzw(qpos[3:7])
    return q


def mujoco_qvel_to_pinocchio(qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """MuJoCo qvel (world linear, body angular) to pinocchio v (body linear, body angular)."""
    v = np.array(qvel, dtype=float, copy=True)
    rot = quat_wxyz_to_matrix(qpos[3:7])
    v[0:3] = rot.T @ qvel[0:3]
    return v


@dataclass
class MujocoRobotModel:
    """A compiled MuJoCo model of the robot plus the index maps the stack needs.

    Attributes:
        model: the compiled ``mujoco.MjModel`` (scene or bare robot).
        qpos_adr, qvel_adr: per configured joint, its address in ``qpos`` / ``qvel``.
        actuator_ids: per configured joint, the actuator driving it (a torque motor after conversion).
        base_qpos_adr, base_qvel_adr: addresses of the base free joint (7 and 6 entries).
        base_body_id: MuJoCo id of the base body.
        sole_site_ids: per side (``left``/``right``), the id of the added sole site.
        foot_body_ids: per side, the id of the foot body.
        imu_site_id: id of the IMU site; gyro_adr / accel_adr: sensordata addresses (3 values each).
    """

    model: object
    qpos_adr: np.ndarray
    qvel_adr: np.ndarray
    actuator_ids: np.ndarray
    base_qpos_adr: int
    base_qvel_adr: int
    base_body_id: int
    sole_site_ids: dict[str, int]
    foot_body_ids: dict[str, int]
    imu_site_id: int
    gyro_adr: int
    accel_adr: int


@dataclass(frozen=True)
class FrictionPatch:
    """A rectangle of the floor with its own sliding ``friction`` coefficient (world frame, m).

    The floor is then tiled with flush boxes (top at z = 0, no step, no edge to catch a foot): the patch, with
    priority over the feet so its friction applies, and four boxes around it with the floor's own contact
    parameters; the floor plane stays for display only.
    """

    x_min: float
    x_max: float
    y_min: float
    y_max: float
    friction: float

    def __post_init__(self) -> None:
        values = (self.x_min, self.x_max, self.y_min, self.y_max, self.friction)
        if not all(np.isfinite(values)):
            raise ConfigError(f"friction patch: non-finite value in {values}")
        if self.x_max <= self.x_min or self.y_max <= self.y_min:
            raise ConfigError(
                f"friction patch: empty rectangle x [{self.x_min}, {self.x_max}], "
                f"y [{self.y_min}, {self.y_max}]"
            )
        if not 0.0 < self.friction <= 5.0:
            raise ConfigError(f"friction patch: friction {self.friction} outside (0, 5]")

    @staticmethod
    def parse(text: str) -> FrictionPatch | None:
        """``"x_min,x_max,y_min,y_max,friction"`` (m, m, m, m, -); ``""`` or ``"none"`` is no patch."""
        if text.strip().lower() in ("", "none"):
            return None
        try:
            values = [float(v) for v in text.replace(" ", "").split(",")]
        except ValueError as exc:
            raise ConfigError(f"friction patch '{text}': {exc}") from None
        if len(values) != 5:
            raise ConfigError(f"friction patch '{text}': expected x_min,x_max,y_min,y_max,friction")
        return FrictionPatch(*values)

    def contains(self, x: float, y: float) -> bool:
        """Whether the point (m, world) is on the patch."""
        return self.x_min <= x <= self.x_max and self.y_min <= y <= self.y_max


def _tile_floor(spec: object, patch: FrictionPatch, extent: float = 100.0, depth: float = 0.05) -> None:
    """Replace the floor plane's collisions by five flush boxes: ``patch`` and the floor around it."""
    import mujoco

    floor = next(
        (g for g in spec.worldbody.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE),  # type: ignore[attr-defined]
        None,
    )
    if floor is None:
        raise ConfigError("friction patch: the scene has no floor plane to replace")
    friction = list(floor.friction)
    floor.contype, floor.conaffinity = 0, 0
    x0, x1, y0, y1 = patch.x_min, patch.x_max, patch.y_min, patch.y_max
    tiles = [
        ("friction_patch", (x0, x1, y0, y1), [patch.friction, friction[1], friction[2]], 2),
        ("floor_south", (-extent, x0, -extent, extent), friction, 0),
        ("floor_north", (x1, extent, -extent, extent), friction, 0),
        ("floor_west", (x0, x1, -extent, y0), friction, 0),
        ("floor_east", (x0, x1, y1, extent), friction, 0),
    ]
    for name, (a0, a1, b0, b1), mu, priority in tiles:
        spec.worldbody.add_geom(  # type: ignore[attr-defined]
            name=name,
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[0.5 * (a1 - a0), 0.5 * (b1 - b0), 0.5 * depth],
            pos=[0.5 * (a0 + a1), 0.5 * (b0 + b1), -0.5 * depth],
            friction=mu,
            priority=priority,
            solref=list(floor.solref),
            solimp=list(floor.solimp),
            condim=floor.condim,
            rgba=[0.3, 0.5, 0.9, 1.0] if priority else [0.0, 0.0, 0.0, 0.0],
        )


def load_mujoco_model(
    config: RobotConfig,
    scene: bool = True,
    torque_actuators: bool = True,
    friction_patch: FrictionPatch | None = None,
    scene_spec: SceneSpec | None = None,
    edit: Callable[[object], None] | None = None,
) -> MujocoRobotModel:
    """Compile the robot for MuJoCo.

    Args:
        config: robot configuration.
        scene: load the scene file (robot + floor + lights) instead of the bare robot MJCF.
        torque_actuators: convert every actuator into a torque motor (``ctrl`` = joint torque, N m, clamped
            to the configured effort limit), so the driver's own joint law is the only controller.
        friction_patch: a floor rectangle with its own friction (:class:`FrictionPatch`).
        scene_spec: markers, boxes and a heightfield to add (:mod:`humanoid_control.hardware.scene`).
        edit: called with the ``mujoco.MjSpec`` last, before it is compiled (e.g. to attach a camera).
    """
    import mujoco

    path = config.resolve_scene() if scene else config.resolve_mjcf()
    spec = mujoco.MjSpec.from_file(str(path))
    base_body = spec.body(config.base_body)
    for joint in base_body.joints if base_body is not None else []:
        if joint.type == mujoco.mjtJoint.mjJNT_FREE and not joint.name:
            joint.name = config.base_joint  # an unnamed <freejoint/> (pinocchio names it <body>_free)
    for foot in config.feet.values():
        body = spec.body(foot.body)
        if body is None:
            raise ConfigError(f"foot body '{foot.body}' not in {path}")
        body.add_site(name=foot.sole_frame, pos=list(foot.sole_offset), size=[0.01, 0.01, 0.01], group=5)
    if friction_patch is not None:
        _tile_floor(spec, friction_patch)
    if scene_spec is not None and not scene_spec.empty:
        from humanoid_control.hardware.scene import apply_scene

        apply_scene(spec, scene_spec)
    if edit is not None:
        edit(spec)
    spec.option.timestep = config.simulation.timestep
    spec.option.noslip_iterations = config.simulation.noslip_iterations
    model = spec.compile()

    def _id(kind: object, name: str) -> int:
        idx = mujoco.mj_name2id(model, kind, name)
        if idx < 0:
            raise ConfigError(f"'{name}' not found in the MuJoCo model {path}")
        return int(idx)

    joint_ids = [_id(mujoco.mjtObj.mjOBJ_JOINT, n) for n in config.joint_names]
    actuated = {int(model.actuator_trnid[a, 0]): a for a in range(model.nu)}
    missing = [config.joint_names[i] for i, j in enumerate(joint_ids) if j not in actuated]
    if missing:
        raise ConfigError(f"joints without actuator in {path}: {missing}")
    actuator_ids = np.array([actuated[j] for j in joint_ids])
    if torque_actuators:
        effort = config.array("effort")
        for k, a in enumerate(actuator_ids):
            model.actuator_gaintype[a] = mujoco.mjtGain.mjGAIN_FIXED
            model.actuator_gainprm[a, :] = 0.0
            model.actuator_gainprm[a, 0] = 1.0
            model.actuator_biastype[a] = mujoco.mjtBias.mjBIAS_NONE
            model.actuator_biasprm[a, :] = 0.0
            model.actuator_ctrllimited[a] = 1
            model.actuator_ctrlrange[a] = [-effort[k], effort[k]]
    base_joint = _id(mujoco.mjtObj.mjOBJ_JOINT, config.base_joint)
    if model.jnt_type[base_joint] != mujoco.mjtJoint.mjJNT_FREE:
        raise ConfigError(f"base joint '{config.base_joint}' is not a free joint")
    gyro = _id(mujoco.mjtObj.mjOBJ_SENSOR, config.imu.gyro_sensor)
    accel = _id(mujoco.mjtObj.mjOBJ_SENSOR, config.imu.accel_sensor)
    return MujocoRobotModel(
        model=model,
        qpos_adr=np.array([model.jnt_qposadr[j] for j in joint_ids]),
        qvel_adr=np.array([model.jnt_dofadr[j] for j in joint_ids]),
        actuator_ids=actuator_ids,
        base_qpos_adr=int(model.jnt_qposadr[base_joint]),
        base_qvel_adr=int(model.jnt_dofadr[base_joint]),
        base_body_id=_id(mujoco.mjtObj.mjOBJ_BODY, config.base_body),
        sole_site_ids={s: _id(mujoco.mjtObj.mjOBJ_SITE, f.sole_frame) for s, f in config.feet.items()},
        foot_body_ids={s: _id(mujoco.mjtObj.mjOBJ_BODY, f.body) for s, f in config.feet.items()},
        imu_site_id=_id(mujoco.mjtObj.mjOBJ_SITE, config.imu.site),
        gyro_adr=int(model.sensor_adr[gyro]),
        accel_adr=int(model.sensor_adr[accel]),
    )


def leg_joint_names(config: RobotConfig) -> list[str]:
    """Configured joints on the kinematic chains from the base body to the feet (configuration order): the
    joints a locomotion controller must command. Read from the MJCF tree (cached per file and feet)."""
    feet = tuple(f.body for f in config.feet.values())
    chain = _chain_joints(str(config.resolve_mjcf()), config.base_body, feet)
    return [n for n in config.joint_names if n in chain]


@functools.lru_cache(maxsize=8)
def _chain_joints(mjcf: str, base_body: str, feet: tuple[str, ...]) -> frozenset[str]:
    import mujoco

    model = mujoco.MjModel.from_xml_path(mjcf)
    base = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, base_body)
    names: set[str] = set()
    for foot in feet:
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, foot)
        if body < 0:
            raise ConfigError(f"foot body '{foot}' not in {mjcf}")
        while body > 0 and body != base:
            for j in range(model.body_jntnum[body]):
                names.add(
                    mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, model.body_jntadr[body] + j) or ""
                )
            body = model.body_parentid[body]
    return frozenset(names)


@dataclass
class PinocchioRobotModel:
    """The pinocchio model of the same MJCF with a free-flyer base and the sole frames added.

    Attributes:
        model: ``pinocchio.Model``; ``q`` layout ``[x y z qx qy qz qw, joints]``.
        joint_q_idx / joint_v_idx: per configured joint, its index in ``q`` / ``v``.
        sole_frame_ids: per side, the id of the sole frame (``OP_FRAME`` on the foot joint).
        imu_frame_id: id of the IMU frame.
    """

    model: object
    joint_q_idx: np.ndarray
    joint_v_idx: np.ndarray
    sole_frame_ids: dict[str, int]
    imu_frame_id: int

    def neutral_q(self, joint_positions: np.ndarray | None = None, base_height: float = 0.0) -> np.ndarray:
        """Pinocchio q with identity base orientation at ``(0, 0, base_height)``.

        The joints take the given angles.
        """
        import pinocchio as pin

        q = pin.neutral(self.model)
        q[2] = base_height
        if joint_positions is not None:
            q[self.joint_q_idx] = joint_positions
        return q


def load_pinocchio_model(config: RobotConfig) -> PinocchioRobotModel:
    """Build the pinocchio model from the robot MJCF (the file MuJoCo loads) and add the sole frames."""
    import pinocchio as pin

    path = config.resolve_mjcf()
    model = pin.buildModelFromMJCF(str(path))
    if model.names[1] != config.base_joint or model.joints[1].nq != 7:
        raise ConfigError(f"pinocchio: first joint of {path} is not the free joint '{config.base_joint}'")
    # A body named like a joint (a "Waist" body moved by a "Waist" joint) gives two frames of one name, which
    # pinocchio's frame look-ups (buildReducedModel among them) refuse as ambiguous: that body frame becomes
    # "<name>_body".
    joint_names = set(model.names)
    for i, frame in enumerate(model.frames):
        if frame.type == pin.FrameType.BODY and frame.name in joint_names:
            frame.name = f"{frame.name}_body"
            model.frames[i] = frame
    sole_ids = {}
    for side, foot in config.feet.items():
        if not model.existFrame(foot.body):
            raise ConfigError(f"pinocchio: foot body '{foot.body}' not in {path}")
        body_frame = model.frames[model.getFrameId(foot.body)]
        placement = body_frame.placement * pin.SE3(np.eye(3), np.array(foot.sole_offset))
        frame = pin.Frame(
            foot.sole_frame,
            body_frame.parentJoint,
            model.getFrameId(foot.body),
            placement,
            pin.FrameType.OP_FRAME,
        )
        sole_ids[side] = model.addFrame(frame)
    q_idx, v_idx = [], []
    for name in config.joint_names:
        if not model.existJointName(name):
            raise ConfigError(f"pinocchio: joint '{name}' not in {path}")
        jid = model.getJointId(name)
        q_idx.append(model.joints[jid].idx_q)
        v_idx.append(model.joints[jid].idx_v)
    if not model.existFrame(config.imu.site):
        raise ConfigError(f"pinocchio: IMU frame '{config.imu.site}' not in {path}")
    return PinocchioRobotModel(
        model=model,
        joint_q_idx=np.array(q_idx),
        joint_v_idx=np.array(v_idx),
        sole_frame_ids=sole_ids,
        imu_frame_id=model.getFrameId(config.imu.site),
    )


def standing_base_height(
    config: RobotConfig, pmodel: PinocchioRobotModel, joint_positions: np.ndarray
) -> float:
    """Base height (m) that puts the lowest sole-polygon corner on the floor (z = 0), base upright.

    Computed by forward kinematics with the base at the origin and identity orientation; the sole polygon
    corners of both feet (sole frames, ``z = 0`` in the sole frame) are mapped to the world frame.
    """
    import pinocchio as pin

    data = pmodel.model.createData()
    q = pmodel.neutral_q(joint_positions)
    pin.framesForwardKinematics(pmodel.model, data, q)
    lowest = np.inf
    for side, foot in config.feet.items():
        oMs = data.oMf[pmodel.sole_frame_ids[side]]
        for x, y in foot.polygon:
            lowest = min(lowest, float((oMs.act(np.array([x, y, 0.0])))[2]))
    return -lowest


def initial_qpos(
    config: RobotConfig,
    mj: MujocoRobotModel,
    pmodel: PinocchioRobotModel,
    joint_positions: np.ndarray | None = None,
) -> np.ndarray:
    """MuJoCo qpos that spawns the robot upright at the origin with soles on the floor.

    Args:
        joint_positions: joint angles in configuration order (rad); the configured initial pose if None.
    """
    joints = config.initial_joint_positions() if joint_positions is None else np.asarray(joint_positions)
    qpos = np.array(mj.model.qpos0, dtype=float, copy=True)  # type: ignore[attr-defined]
    b = mj.base_qpos_adr
    qpos[b : b + 3] = [0.0, 0.0, standing_base_height(config, pmodel, joints)]
    qpos[b + 3 : b + 7] = [1.0, 0.0, 0.0, 0.0]
    qpos[mj.qpos_adr] = joints
    return qpos
