"""MuJoCo backend physics in-process: the driver core holds the G1 up; sensors and contacts are physical."""

from __future__ import annotations

import numpy as np
import pytest

from humanoid_control.driver.driver_core import DriverCore, DriverMode, DriverSettings
from humanoid_control.hardware.mujoco_sim import ImuNoise, MujocoBackend, tilt_from_quat
from humanoid_control.hardware.registry import create_backend
from humanoid_control.hardware.types import LowLevelCommand
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height

CONFIG = load_robot_config("g1")
DT = 0.002


def _run(backend: MujocoBackend, core: DriverCore, seconds: float) -> list[float]:
    heights = []
    for _ in range(round(seconds / DT)):
        s = backend.read()
        backend.write(core.update(s.q, s.dq, tilt_from_quat(s.imu_quat)))
        backend.advance(DT)
        heights.append(backend.base_height())
    return heights


def test_boot_ramp_and_hold_keeps_base_height_within_2cm() -> None:
    backend = MujocoBackend(CONFIG)
    core = DriverCore(CONFIG, DriverSettings())
    _run(backend, core, 2.5)
    assert core.mode == DriverMode.HOLD
    heights = np.array(_run(backend, core, 10.0))
    nominal = standing_base_height(CONFIG, load_pinocchio_model(CONFIG), CONFIG.array("default"))
    assert np.abs(heights - nominal).max() < 0.02
    # at rest: soles carry the weight, the accelerometer reads +g along z, the gyro ~0
    truth = backend.ground_truth()
    weight = backend.model.body_subtreemass[backend.mj.base_body_id] * 9.81
    fz = truth.contacts["left"].force[2] + truth.contacts["right"].force[2]
    assert fz == pytest.approx(weight, rel=0.02)
    assert abs(truth.contacts["left"].force[2] - truth.contacts["right"].force[2]) < 0.1 * weight
    state = backend.read()
    assert np.linalg.norm(state.accel) == pytest.approx(9.81, abs=0.05)
    assert np.abs(state.gyro).max() < 1e-2
    assert np.abs(truth.linear_velocity_body).max() < 1e-2


def test_damping_lets_the_robot_sink() -> None:
    backend = MujocoBackend(CONFIG)
    core = DriverCore(CONFIG, DriverSettings())
    _run(backend, core, 2.5)
    core.estop()
    heights = _run(backend, core, 2.0)
    assert heights[-1] < heights[0] - 0.1  # no stiffness: the robot does not stand by itself


def test_torque_clamped_to_effort_limits() -> None:
    backend = MujocoBackend(CONFIG)
    n = CONFIG.num_joints
    huge = LowLevelCommand(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.full(n, 1e4))
    backend.write(huge)
    backend.advance(DT)
    np.testing.assert_allclose(backend.read().tau, CONFIG.array("effort"))


def test_imu_noise_is_seeded_and_off_by_default() -> None:
    quiet = MujocoBackend(CONFIG)
    a = MujocoBackend(CONFIG, imu_noise=ImuNoise(gyro_noise_std=0.01, gyro_bias_std=0.02, seed=3))
    b = MujocoBackend(CONFIG, imu_noise=ImuNoise(gyro_noise_std=0.01, gyro_bias_std=0.02, seed=3))
    for backend in (quiet, a, b):
        backend.advance(DT)
    assert np.array_equal(a.read().gyro, b.read().gyro)
    assert np.abs(a.read().gyro - quiet.read().gyro).max() > 1e-4


def test_unknown_backend_names_allowed_values() -> None:
    with pytest.raises(
        ValueError, match="unknown hardware 'gazebo' \\(allowed: can_mit, mujoco, unitree_g1\\)"
    ):
        create_backend("gazebo", config=CONFIG)


def test_initial_pose_places_the_robot_and_respawn_returns_there() -> None:
    import math

    backend = MujocoBackend(CONFIG, initial_pose=(1.0, -2.0, 0.5))
    core = DriverCore(CONFIG, DriverSettings())
    truth = backend.ground_truth()
    assert truth.position[:2] == pytest.approx([1.0, -2.0])
    w, _x, _y, z = truth.quat
    assert 2.0 * math.atan2(z, w) == pytest.approx(0.5)
    _run(backend, core, 0.5)  # stands there on the floor
    assert backend.ground_truth().position[:2] == pytest.approx([1.0, -2.0], abs=0.02)
    backend.data.qpos[0:2] = [5.0, 5.0]
    backend.respawn()
    assert backend.ground_truth().position[:2] == pytest.approx([1.0, -2.0])
    with pytest.raises(ValueError, match="finite"):
        MujocoBackend(CONFIG, initial_pose=(math.nan, 0.0, 0.0))
