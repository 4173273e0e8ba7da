"""MuJoCo backend: the robot in MuJoCo physics with torque-level actuation.

The model's actuators are converted into torque motors; at every physics step (``simulation.timestep`` of the
robot configuration, <= 2 ms) the backend evaluates ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff`` from the
current command, clamps it to the effort limits and steps. Joint armature and friction loss of the model are
kept. The IMU reads the model's gyro and accelerometer at the configured site, plus optional white noise and
bias (off by default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from humanoid_control.hardware.base import RobotBackend
from humanoid_control.hardware.beside_thread import BesideThread
from humanoid_control.hardware.push import PushRequest
from humanoid_control.hardware.scene import SceneSpec
from humanoid_control.hardware.types import GroundTruth, LowLevelCommand, RobotState, Wrench
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import (
    FrictionPatch,
    initial_qpos,
    load_mujoco_model,
    load_pinocchio_model,
    quat_wxyz_to_matrix,
)


@dataclass
class ImuNoise:
    """IMU error model (all off by default).

    Attributes:
        gyro_noise_std: white noise per sample (rad/s). gyro_bias_std: std of the constant bias drawn at start
            (rad/s). gyro_bias_walk: bias random walk (rad/s per sqrt(s)).
        accel_noise_std, accel_bias_std (m/s^2), accel_bias_walk (m/s^2 per sqrt(s)): same for the
            accelerometer.
        seed: random seed (deterministic noise).
    """

    gyro_noise_std: float = 0.0
    gyro_bias_std: float = 0.0
    gyro_bias_walk: float = 0.0
    accel_noise_std: float = 0.0
    accel_bias_std: float = 0.0
    accel_bias_walk: float = 0.0
    seed: int = 0


class MujocoBackend(RobotBackend):
    """The robot simulated in MuJoCo; time is simulated time (s since start)."""

    simulated = True

    def __init__(
        self,
        config: RobotConfig,
        imu_noise: ImuNoise | None = None,
        initial_joint_positions: np.ndarray | None = None,
        friction_patch: FrictionPatch | None = None,
        scene: SceneSpec | None = None,
        initial_pose: tuple[float, float, float] = (0.0, 0.0, 0.0),
        edit: Callable[[object], None] | None = None,
    ) -> None:
        """``edit``: called with the ``mujoco.MjSpec`` before it is compiled (world changes: terrain,
        obstacles, model parameters; see :func:`~humanoid_control.model.robot_model.load_mujoco_model`)."""
        self.config = config
        x0, y0, yaw0 = (float(v) for v in initial_pose)
        if not all(np.isfinite([x0, y0, yaw0])):
            raise ValueError(f"initial_pose must be finite (x m, y m, yaw rad), got {initial_pose}")
        self.initial_pose = (x0, y0, yaw0)
        self.friction_patch = friction_patch
        self.scene = scene
        self.mj = load_mujoco_model(
            config,
            scene=True,
            torque_actuators=True,
            friction_patch=friction_patch,
            scene_spec=scene,
            edit=edit,
        )
        self.model = self.mj.model
        self.data = mujoco.MjData(self.model)
        self.effort = config.array("effort")
        self.noise = imu_noise or ImuNoise()
        self._rng = np.random.default_rng(self.noise.seed)
        self._gyro_bias = (
            self._rng.normal(0.0, self.noise.gyro_bias_std, 3) if self.noise.gyro_bias_std else np.zeros(3)
        )
        self._accel_bias = (
            self._rng.normal(0.0, self.noise.accel_bias_std, 3) if self.noise.accel_bias_std else np.zeros(3)
        )
        self._pin = load_pinocchio_model(config)
        self._initial_joints = initial_joint_positions
        self._command: LowLevelCommand | None = None
        self._tau = np.zeros(config.num_joints)
        bodies = self.model.geom_bodyid
        self._geom_on_foot = {side: (bodies == b).astype(float) for side, b in self.mj.foot_body_ids.items()}
        self._f6 = np.zeros(6)  # mj_contactForce's output
        self._push_body = int(self.mj.base_body_id)
        self._push_force = np.zeros(3)
        self._push_steps_left = 0
        # the state of the last full forward pass (``_forward``): a step from that state redoes only the
        # acceleration stage (``_step_from_forward``)
        self._fwd_qpos = np.empty(self.model.nq)
        self._fwd_qvel = np.empty(self.model.nv)
        self._fwd_time = float("nan")
        # the physics thread (start_advance): made by the first call; a step in flight until joined
        self._physics = BesideThread("mujoco_physics")
        self._time_after = 0.0
        self.reset()

    # ------------------------------------------------------------------ control
    def reset(self, joint_positions: np.ndarray | None = None) -> None:
        """Respawn upright at the start pose (``initial_pose``: x, y in m and yaw in rad in the world frame;
        the origin by default), soles on the floor, at rest (time 0)."""
        self._join()
        mujoco.mj_resetData(self.model, self.data)
        joints = self._initial_joints if joint_positions is None else joint_positions
        qpos = initial_qpos(self.config, self.mj, self._pin, joints)
        x0, y0, yaw0 = self.initial_pose
        b = self.mj.base_qpos_adr
        qpos[b : b + 2] = [x0, y0]
        qpos[b + 3 : b + 7] = [np.cos(0.5 * yaw0), 0.0, 0.0, np.sin(0.5 * yaw0)]
        self.data.qpos[:] = qpos
        self.data.qvel[:] = 0.0
        self._command = None
        self._push_steps_left = 0
        self.data.xfrc_applied[:] = 0.0
        self._forward()

    def respawn(self, joint_positions: np.ndarray | None = None) -> None:
        """As :meth:`reset` (upright at the start pose, at rest, any push cancelled) but the clock keeps
        running: simulated time stays monotonic for everything stamped with it."""
        self._join()
        now = float(self.data.time)
        self.reset(joint_positions)
        self.data.time = now
        self._forward()

    def push(self, request: PushRequest) -> None:
        """Apply ``request.force`` (N, world frame) at the base body's centre of mass for the next
        ``request.steps`` physics steps (exactly ``request.duration`` s of simulated time), through
        ``xfrc_applied``; replaces a push still in progress."""
        self._join()
        self._push_force[:] = request.force
        self._push_steps_left = int(request.steps)

    @property
    def push_active(self) -> bool:
        """A push has physics steps left."""
        self._join()
        return self._push_steps_left > 0

    def write(self, command: LowLevelCommand) -> None:
        """Hold ``command`` until the next write (arrays in configuration joint order)."""
        self._join()
        self._command = command

    def advance(self, dt: float) -> None:
        """Integrate ``dt`` seconds (a whole number of physics steps), evaluating the joint law every step."""
        self._join()
        self._advance(dt)

    def start_advance(self, dt: float) -> None:
        """:meth:`advance` by ``dt`` on the backend's physics thread, returning at once: the simulated robot
        moves while the caller goes on with the rest of its tick, as a real robot's dynamics run beside its
        controller (MuJoCo releases the GIL while it steps). The result is :meth:`advance`'s, bit for bit.
        Every other method waits for the step to end first, except :attr:`time`, the time at its end at
        once. The thread is made by the first call and inherits its caller's scheduling (a real-time loop
        thread's SCHED_FIFO priority and CPUs); a step's exception is raised by the next method called."""
        self._join()
        ts = self.model.opt.timestep
        t = float(self.data.time)
        for _ in range(max(1, round(dt / ts))):
            t += ts  # as mj_step advances the time, so equal to it after the step
        self._time_after = t
        self._physics.start(lambda: self._advance(dt))

    def _join(self) -> None:
        """Wait for a step started by :meth:`start_advance` (and raise its exception)."""
        try:
            self._physics.join()
        except RuntimeError as exc:
            raise RuntimeError(f"MuJoCo physics step failed: {exc.__cause__!r}") from exc.__cause__

    def close(self) -> None:
        """Stop the physics thread (after the step in flight)."""
        self._physics.close()

    def _advance(self, dt: float) -> None:
        n = max(1, round(dt / self.model.opt.timestep))
        m, d = self.model, self.data
        qa, va, act = self.mj.qpos_adr, self.mj.qvel_adr, self.mj.actuator_ids
        first = True
        for _ in range(n):
            if self._command is None:
                self._tau[:] = 0.0
            else:
                self._tau = self._command.torque(d.qpos[qa], d.qvel[va], self.effort)
            d.ctrl[act] = self._tau
            pushing = self._push_steps_left > 0
            if pushing:
                d.xfrc_applied[self._push_body, 0:3] = self._push_force
                self._push_steps_left -= 1
            if first and self._forward_current():
                self._step_from_forward()
            else:
                mujoco.mj_step(m, d)
            first = False
            if pushing and self._push_steps_left == 0:  # the last step of the push: off before anything reads
                d.xfrc_applied[self._push_body, 0:3] = 0.0
        # recompute positions, sensors and contact forces for the new state so that everything read is
        # coherent
        self._forward()
        if self.noise.gyro_bias_walk:
            self._gyro_bias += self._rng.normal(
                0.0, self.noise.gyro_bias_walk * np.sqrt(n * m.opt.timestep), 3
            )
        if self.noise.accel_bias_walk:
            self._accel_bias += self._rng.normal(
                0.0, self.noise.accel_bias_walk * np.sqrt(n * m.opt.timestep), 3
            )

    def _forward(self) -> None:
        """``mj_forward`` on the current state, which is remembered (:meth:`_forward_current`)."""
        d = self.data
        mujoco.mj_forward(self.model, d)
        self._fwd_qpos[:] = d.qpos
        self._fwd_qvel[:] = d.qvel
        self._fwd_time = float(d.time)

    def _forward_current(self) -> bool:
        """The last forward pass was on the current state (nothing wrote ``qpos``, ``qvel`` or the time
        since) and the model's integrator is one :meth:`_step_from_forward` reproduces."""
        d = self.data
        return (
            int(self.model.opt.integrator) in _INTEGRATORS
            and d.time == self._fwd_time
            and np.array_equal(d.qpos, self._fwd_qpos)
            and np.array_equal(d.qvel, self._fwd_qvel)
        )

    def _step_from_forward(self) -> None:
        """``mj_step`` from a state whose position and velocity stages the last forward pass computed: only
        the stages that read the controls and applied forces (actuation, acceleration, constraints,
        acceleration sensors) run again, then the integrator. Bit for bit ``mj_step``'s result (the position
        and velocity stages are functions of ``qpos`` and ``qvel`` alone; test_mujoco_backend.py), for about
        half its cost (the G1: about 50 instead of 100 us per physics step)."""
        m, d = self.model, self.data
        mujoco.mj_checkPos(m, d)
        mujoco.mj_checkVel(m, d)
        mujoco.mj_forwardSkip(m, d, mujoco.mjtStage.mjSTAGE_VEL, 0)
        mujoco.mj_checkAcc(m, d)
        _INTEGRATORS[int(m.opt.integrator)](m, d)

    # ------------------------------------------------------------------ sensing
    @property
    def time(self) -> float:
        """Simulated time (s); while a step started by :meth:`start_advance` runs, the time at its end."""
        if self._physics.busy:
            return self._time_after
        return float(self.data.time)

    def read(self) -> RobotState:
        """Joint encoders, applied torques and the IMU (orientation from the site, gyro and accelerometer)."""
        self._join()
        d = self.data
        gyro = np.array(d.sensordata[self.mj.gyro_adr : self.mj.gyro_adr + 3])
        accel = np.array(d.sensordata[self.mj.accel_adr : self.mj.accel_adr + 3])
        if self.noise.gyro_noise_std:
            gyro += self._rng.normal(0.0, self.noise.gyro_noise_std, 3)
        if self.noise.accel_noise_std:
            accel += self._rng.normal(0.0, self.noise.accel_noise_std, 3)
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, d.site_xmat[self.mj.imu_site_id])
        return RobotState(
            stamp=float(d.time),
            q=np.array(d.qpos[self.mj.qpos_adr]),
            dq=np.array(d.qvel[self.mj.qvel_adr]),
            tau=self._tau.copy(),
            imu_quat=quat,
            gyro=gyro + self._gyro_bias,
            accel=accel + self._accel_bias,
        )

    def ground_truth(self) -> GroundTruth:
        """Base pose and twist (base frame) and the ground reaction wrench on each foot in its sole frame."""
        self._join()
        d = self.data
        b, v = self.mj.base_qpos_adr, self.mj.base_qvel_adr
        quat = np.array(d.qpos[b + 3 : b + 7])
        rot = quat_wxyz_to_matrix(quat)
        return GroundTruth(
            position=np.array(d.qpos[b : b + 3]),
            quat=quat,
            linear_velocity_body=rot.T @ d.qvel[v : v + 3],
            angular_velocity_body=np.array(d.qvel[v + 3 : v + 6]),
            contacts=self.contact_wrenches(),
        )

    def contact_wrenches(self) -> dict[str, Wrench]:
        """Sum of contact forces on each foot body, as a wrench in its sole frame about the sole origin."""
        self._join()
        m, d = self.model, self.data
        n = d.ncon
        con = d.contact
        g1, g2 = con.geom1[:n], con.geom2[:n]
        # every contact's force in the world, exerted by geom1 on geom2 (mj_contactForce: in the contact
        # frame, normal geom1 -> geom2; the frame's rows are its axes); the loops stay on small arrays
        local = np.zeros((n, 3))
        f6 = self._f6
        for i in range(n):
            mujoco.mj_contactForce(m, d, i, f6)
            local[i] = f6[:3]
        f = np.einsum("kij,ki->kj", con.frame[:n].reshape(-1, 3, 3), local)
        p = con.pos[:n]
        # p x f per contact, written out (np.cross costs tens of microseconds on arrays this small)
        pxf = np.column_stack(
            (
                p[:, 1] * f[:, 2] - p[:, 2] * f[:, 1],
                p[:, 2] * f[:, 0] - p[:, 0] * f[:, 2],
                p[:, 0] * f[:, 1] - p[:, 1] * f[:, 0],
            )
        )
        out = {}
        for side, sid in self.mj.sole_site_ids.items():
            on_foot = self._geom_on_foot[side]  # per geom: 1.0 where it belongs to this foot
            sign = on_foot[g2] - on_foot[g1]  # +1: the force acts on the foot, -1: the foot exerts it
            force = sign @ f
            o = d.site_xpos[sid]
            # about the sole origin: sum (p - o) x f = sum p x f - o x sum f
            torque = sign @ pxf - np.array(
                [
                    o[1] * force[2] - o[2] * force[1],
                    o[2] * force[0] - o[0] * force[2],
                    o[0] * force[1] - o[1] * force[0],
                ]
            )
            rot = d.site_xmat[sid].reshape(3, 3)
            out[side] = Wrench(self.config.feet[side].sole_frame, rot.T @ force, rot.T @ torque)
        return out

    def base_height(self) -> float:
        """Height of the base origin above the floor (m)."""
        self._join()
        return float(self.data.qpos[self.mj.base_qpos_adr + 2])


#: mj_step's integrators (mjtIntegrator value -> the function it calls after the forward pass); RK4 reads the
#: forward pass's stages in its own way and keeps mj_step
_INTEGRATORS = {
    int(mujoco.mjtIntegrator.mjINT_EULER): mujoco.mj_Euler,
    int(mujoco.mjtIntegrator.mjINT_IMPLICIT): mujoco.mj_implicit,
    int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST): mujoco.mj_implicit,
}


def tilt_from_quat(quat_wxyz: np.ndarray) -> float:
    """Angle (rad) between a frame's z axis and the world z axis, from its orientation (w, x, y, z)."""
    _w, x, y, _z = quat_wxyz / np.linalg.norm(quat_wxyz)
    zz = 1.0 - 2.0 * (x * x + y * y)
    return float(np.arccos(np.clip(zz, -1.0, 1.0)))
