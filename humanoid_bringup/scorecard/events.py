"""Mid-run events of the scorecard's walking trials: a payload attached or released, a ball thrown, a fault,
and the runtime part of a randomized robot (gains, torque limits, latency, sensor biases).

Each event is installed on the in-process runner before the trial (:meth:`Event.install`) and started at the
trial's event time (:meth:`Event.start`: mid single support after ``event_after_s`` of walking); a timed one
ends itself (:meth:`Event.tick`). Sensor faults and biases rewrite what the backend's ``read`` returns, so the
state estimator and the controller both see them (as on a robot); actuator changes act on the backend's
torque law; a command gap stops the controller's commands from reaching the driver core.

Units: s, kg, m, m/s, rad, N m; world frame for the ball (z up), heading frame for its direction.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import mujoco
import numpy as np

from humanoid_bringup.scorecard.scenarios import Family, Level, robot_body
from humanoid_bringup.scorecard.worlds import BALL_BODY, EMPTY_MASS_KG, PAYLOAD_BODY, World
from humanoid_control.controllers.inprocess import InProcessRunner
from humanoid_control.hardware.types import RobotState

GRAVITY = 9.81


class Event:
    """Base class: nothing to install, start or end."""

    duration: float = 0.0

    def install(self, runner: InProcessRunner) -> None:
        """Before the trial's first tick."""

    def start(self, runner: InProcessRunner, t: float) -> None:
        """At the event time ``t`` (s), between the controller's command and the physics."""

    def tick(self, runner: InProcessRunner, t: float) -> None:
        """Every tick after :meth:`start` (between command and physics)."""


class SensorPipe:
    """Rewrites of the backend's sensor readings, in order (installed once per backend)."""

    def __init__(self, runner: InProcessRunner) -> None:
        backend = runner.backend
        self._read = backend.read
        self.filters: list[Any] = []
        backend.read = self.read  # the runner (and so the estimator) reads through here

    def read(self) -> RobotState:
        s = self._read()
        for f in self.filters:
            s = f(s)
        return s

    @staticmethod
    def of(runner: InProcessRunner) -> SensorPipe:
        """The runner's pipe (made by the first call)."""
        pipe = getattr(runner, "_scorecard_pipe", None)
        if pipe is None:
            pipe = SensorPipe(runner)
            runner._scorecard_pipe = pipe  # type: ignore[attr-defined]
        return pipe


class PayloadEvent(Event):
    """``attach``: the payload body gets its mass (a rigid load appears at its offset); ``release``: it
    loses it (the carried mass is let go)."""

    def __init__(self, mode: str, mass: float) -> None:
        self.mode, self.mass = mode, mass

    def start(self, runner: InProcessRunner, t: float) -> None:
        model = runner.backend.model
        b = model.body(PAYLOAD_BODY).id
        m = self.mass if self.mode == "attach" else EMPTY_MASS_KG
        scale = m / float(model.body_mass[b])
        model.body_mass[b] = m
        model.body_inertia[b] *= scale


def ball_launch_state(
    data: Any, model: Any, family: Family, level: Level, world: World, robot: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Where the ball starts and its velocity (world frame, m and m/s): ``launch_distance_m`` from the
    target body's origin (``height_m`` above it) in the drawn direction (heading frame azimuth), aimed at
    it at ``speed_mps`` with the drop over the flight compensated."""
    s, p = family.settings, level.params
    target = np.array(data.xpos[model.body(robot_body(str(s["target_body"]), robot)).id])
    target[2] += float(p.get("height_m", 0.0))
    base_q = data.qpos[model.joint(robot.base_joint).qposadr[0] + 3 :][:4]
    w, x, y, z = base_q
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    az = math.radians(float(world.drawn["azimuth_deg"])) + yaw
    u = np.array([math.cos(az), math.sin(az), 0.0])  # from the target towards the ball
    dist, speed = float(s["launch_distance_m"]), float(p["speed_mps"])
    pos = target + dist * u
    flight = dist / speed
    vel = -speed * u + np.array([0.0, 0.0, 0.5 * GRAVITY * flight])
    return pos, vel


class BallEvent(Event):
    """The ball is thrown at the target body from its launch point (:func:`ball_launch_state`)."""

    def __init__(self, family: Family, level: Level, world: World, robot: Any) -> None:
        self.family, self.level, self.world, self.robot = family, level, world, robot

    def start(self, runner: InProcessRunner, t: float) -> None:
        b = runner.backend
        model, data = b.model, b.data
        pos, vel = ball_launch_state(data, model, self.family, self.level, self.world, self.robot)
        j = model.joint(BALL_BODY + "_joint")
        qa, va = int(j.qposadr[0]), int(j.dofadr[0])
        data.qpos[qa : qa + 7] = [*pos, 1.0, 0.0, 0.0, 0.0]
        data.qvel[va : va + 6] = [*vel, 0.0, 0.0, 0.0]
        mujoco.mj_forward(model, data)


class FaultEvent(Event):
    """A fault for ``duration`` s from the event time: ``imu_frozen`` (the IMU repeats its last sample),
    ``encoder_stuck`` (the named joints' encoders repeat their last reading, velocity 0), ``joint_weak`` (the
    named joints' torque limit times ``torque_scale``), ``command_gap`` (no controller command reaches the
    driver)."""

    def __init__(self, kind: str, duration: float, joints: list[int], torque_scale: float = 1.0) -> None:
        self.kind, self.duration, self.joints, self.scale = kind, duration, joints, torque_scale
        self.t0: float | None = None
        self.on = False
        self._last: RobotState | None = None
        self._frozen: RobotState | None = None
        self._effort = np.zeros(0)

    def install(self, runner: InProcessRunner) -> None:
        if self.kind in ("imu_frozen", "encoder_stuck"):
            SensorPipe.of(runner).filters.append(self._filter)

    def _filter(self, s: RobotState) -> RobotState:
        if not self.on:
            self._last = s
            return s
        if self._frozen is None:
            self._frozen = self._last or s
        f = self._frozen
        if self.kind == "imu_frozen":
            return dataclasses.replace(
                s, imu_quat=f.imu_quat.copy(), gyro=f.gyro.copy(), accel=f.accel.copy()
            )
        q, dq = s.q.copy(), s.dq.copy()
        q[self.joints] = f.q[self.joints]
        dq[self.joints] = 0.0
        return dataclasses.replace(s, q=q, dq=dq)

    def start(self, runner: InProcessRunner, t: float) -> None:
        self.t0, self.on = t, True
        if self.kind == "joint_weak":
            self._effort = runner.backend.effort[self.joints].copy()
            runner.backend.effort[self.joints] *= self.scale
        elif self.kind == "command_gap":
            runner.driver.submit = lambda _command: False  # type: ignore[method-assign]

    def tick(self, runner: InProcessRunner, t: float) -> None:
        if not self.on or self.t0 is None or t < self.t0 + self.duration - 1e-9:
            return
        self.on = False
        if self.kind == "joint_weak":
            runner.backend.effort[self.joints] = self._effort
        elif self.kind == "command_gap":
            del runner.driver.submit  # the class's method again


class RandomizedRobot(Event):
    """The runtime part of a randomized robot, installed before the first tick (no event time): realized
    joint gains (kp, kd of every command times a per-joint factor), torque limits (times a factor), IMU
    gyro bias and mount tilt (roll, pitch), encoder biases. (Latency is the runner's ``delay_ticks``.)"""

    def __init__(self, drawn: dict[str, Any]) -> None:
        self.d = drawn
        roll, pitch = drawn["imu_tilt_rad"]
        cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
        # mount rotation IMU(true) -> IMU(as mounted): Ry(pitch) Rx(roll)
        self.rot = np.array([[cp, sp * sr, sp * cr], [0.0, cr, -sr], [-sp, cp * sr, cp * cr]])
        q = np.zeros(4)
        mujoco.mju_mat2Quat(q, self.rot.reshape(9))
        self.quat = q

    def install(self, runner: InProcessRunner) -> None:
        b = runner.backend
        kp, kd = np.array(self.d["kp_scale"]), np.array(self.d["kd_scale"])
        bias = np.array(self.d["encoder_bias_rad"])
        write = b.write

        def scaled(command: Any) -> None:
            # the joint law runs on the biased encoders too: kp (q* - (q + bias)) = kp ((q* - bias) - q)
            write(dataclasses.replace(command, q=command.q - bias, kp=command.kp * kp, kd=command.kd * kd))

        b.write = scaled
        scale = np.array(self.d["torque_limit_scale"])
        b.effort = b.effort * scale
        b.model.actuator_ctrlrange[b.mj.actuator_ids] = np.stack([-b.effort, b.effort], axis=1)
        SensorPipe.of(runner).filters.append(self._bias)

    def _bias(self, s: RobotState) -> RobotState:
        quat = np.zeros(4)
        mujoco.mju_mulQuat(quat, np.asarray(s.imu_quat, dtype=float), self.quat)
        gyro = self.rot.T @ s.gyro + np.array(self.d["gyro_bias_rps"])
        accel = self.rot.T @ s.accel
        q = s.q + np.array(self.d["encoder_bias_rad"])
        return dataclasses.replace(s, imu_quat=quat, gyro=gyro, accel=accel, q=q)


def events_for(family: Family, level: Level, world: World, robot: Any) -> list[Event]:
    """The events of a walking trial of ``family`` (none for terrain, trip, floor)."""
    p = level.params
    if family.name == "payload":
        return [PayloadEvent(p["mode"], float(p["mass_kg"]))]
    if family.name == "impact":
        return [BallEvent(family, level, world, robot)]
    if family.name == "faults":
        names = list(robot.joint_names)
        joints = [names.index(j) for j in p.get("joints", [])]
        return [FaultEvent(p["kind"], float(p["duration_s"]), joints, float(p.get("torque_scale", 1.0)))]
    if family.name == "randomized":
        return [RandomizedRobot(world.drawn)]
    return []
