"""Contact-aided EKF core: Jacobians against finite differences, bias convergence, a synthetic trajectory."""

from __future__ import annotations

import numpy as np
import pytest

from humanoid_control.estimation.ekf import (
    DIM,
    GRAVITY,
    ContactEKF,
    EstimatorNoise,
    FilterState,
    kinematic_jacobian,
    kinematic_prediction,
    propagate_mean,
    transition_matrix,
)
from humanoid_control.estimation.so3 import so3_exp, so3_log

RNG = np.random.default_rng(5)
FEET_BODY = [np.array([0.0, 0.1, -0.7]), np.array([0.0, -0.1, -0.7])]


def random_state() -> FilterState:
    x = FilterState()
    x.R = so3_exp(RNG.normal(0, 0.3, 3))
    x.v = RNG.normal(0, 0.5, 3)
    x.p = RNG.normal(0, 1.0, 3)
    x.feet = RNG.normal(0, 1.0, (2, 3))
    x.bg = RNG.normal(0, 0.01, 3)
    x.ba = RNG.normal(0, 0.05, 3)
    return x


def test_so3_exp_log_roundtrip() -> None:
    for _ in range(20):
        w = RNG.normal(0, 1.0, 3)
        np.testing.assert_allclose(so3_log(so3_exp(w)), w, atol=1e-9)
    np.testing.assert_allclose(so3_exp(np.zeros(3)), np.eye(3))


def test_transition_matrix_matches_finite_differences() -> None:
    dt = 0.002
    for _ in range(5):
        x = random_state()
        gyro, accel = RNG.normal(0, 1.0, 3), RNG.normal(0, 3.0, 3) + np.array([0, 0, 9.81])
        f = transition_matrix(x, gyro, accel, dt)
        base = propagate_mean(x, gyro, accel, dt)
        eps = 1e-6
        numeric = np.zeros((DIM, DIM))
        for j in range(DIM):
            dx = np.zeros(DIM)
            dx[j] = eps
            numeric[:, j] = propagate_mean(x.boxplus(dx), gyro, accel, dt).boxminus(base) / eps
        # first-order discretisation: agreement to O(dt^2) terms
        np.testing.assert_allclose(numeric, f, atol=2e-5)


def test_filter_propagation_is_the_documented_transition() -> None:
    """ContactEKF.propagate (inline for speed) = propagate_mean, and F P F^T + Q with transition_matrix."""
    x = random_state()
    x.P = np.cov(RNG.normal(size=(DIM, 200)))
    gyro, accel, dt = RNG.normal(0, 0.5, 3), RNG.normal(0, 1.0, 3) - GRAVITY, 0.002
    ekf = ContactEKF(EstimatorNoise(), x.copy())
    ekf.contact[:] = [True, False]
    f = transition_matrix(x, gyro, accel, dt)
    mean = propagate_mean(x, gyro, accel, dt)
    for _ in range(2):  # the second time through the reused matrix
        ekf.x = x.copy()
        ekf.propagate(gyro, accel, dt)
        assert np.allclose(ekf.x.R, mean.R, atol=1e-14) and np.allclose(ekf.x.p, mean.p, atol=1e-14)
        assert np.allclose(ekf.x.v, mean.v, atol=1e-14)
        n = ekf.noise
        q = np.r_[
            [n.gyro**2] * 3, [n.accel**2] * 3, [0.0] * 3, [n.foot_contact**2] * 3, [n.foot_swing**2] * 3
        ]
        q = np.r_[q, [n.gyro_bias_walk**2] * 3, [n.accel_bias_walk**2] * 3]
        assert np.allclose(ekf.x.P, f @ x.P @ f.T + np.diag(q * dt), atol=1e-12)


def test_kinematic_jacobian_matches_finite_differences() -> None:
    for _ in range(5):
        x = random_state()
        for foot in range(2):
            h = kinematic_jacobian(x, foot)
            y0 = kinematic_prediction(x, foot)
            eps = 1e-7
            numeric = np.zeros((3, DIM))
            for j in range(DIM):
                dx = np.zeros(DIM)
                dx[j] = eps
                numeric[:, j] = (kinematic_prediction(x.boxplus(dx), foot) - y0) / eps
            np.testing.assert_allclose(numeric, h, atol=1e-5)


def _run_stationary(seconds: float, bg: np.ndarray, ba: np.ndarray, noise: EstimatorNoise) -> ContactEKF:
    rate = 500.0
    dt = 1.0 / rate
    ekf = ContactEKF(noise)
    ekf.x.p = np.array([0.0, 0.0, 0.7])
    ekf.x.P = np.eye(DIM) * 1e-6
    ekf.x.P[15:18, 15:18] = np.eye(3) * 0.02**2  # gyro bias unknown
    ekf.x.P[18:21, 18:21] = np.eye(3) * 0.1**2
    ekf.set_contact(np.array([True, True]), FEET_BODY)
    for _ in range(int(seconds * rate)):
        gyro = bg + RNG.normal(0, noise.gyro * np.sqrt(rate), 3)
        accel = -GRAVITY + ba + RNG.normal(0, noise.accel * np.sqrt(rate), 3)
        ekf.propagate(gyro, accel, dt)
        ekf.update([f + RNG.normal(0, noise.kinematics, 3) for f in FEET_BODY])
    return ekf


def test_stationary_imu_converges_its_gyro_bias() -> None:
    bg = np.array([0.01, -0.02, 0.015])
    ba = np.array([0.0, 0.0, 0.05])
    ekf = _run_stationary(20.0, bg, ba, EstimatorNoise())
    np.testing.assert_allclose(ekf.x.bg, bg, atol=1.5e-3)
    assert abs(ekf.x.ba[2] - ba[2]) < 0.01  # the vertical accelerometer bias is observable at rest
    assert np.linalg.norm(ekf.x.p - np.array([0.0, 0.0, 0.7])) < 0.01
    assert np.linalg.norm(ekf.x.v) < 0.02  # per-sample accelerometer noise is 0.45 m/s^2 at 500 Hz


def test_synthetic_trajectory_is_reconstructed() -> None:
    """Base swaying and turning over fixed feet: the filter follows pose and velocity (IMU + kinematics)."""
    rate, seconds = 500.0, 10.0
    dt = 1.0 / rate
    noise = EstimatorNoise()
    feet_world = np.array([[0.0, 0.1, 0.0], [0.0, -0.1, 0.0]])

    def truth(t: float) -> tuple[np.ndarray, ...]:
        p = np.array([0.05 * np.sin(2.0 * t), 0.04 * np.sin(3.0 * t), 0.7 + 0.02 * np.sin(4.0 * t)])
        v = np.array([0.1 * np.cos(2.0 * t), 0.12 * np.cos(3.0 * t), 0.08 * np.cos(4.0 * t)])
        a = np.array([-0.2 * np.sin(2.0 * t), -0.36 * np.sin(3.0 * t), -0.32 * np.sin(4.0 * t)])
        rv = np.array([0.1 * np.sin(1.5 * t), 0.08 * np.sin(2.5 * t), 0.3 * np.sin(0.5 * t)])
        return p, v, a, rv

    ekf = ContactEKF(noise)
    p0, v0, _, rv0 = truth(0.0)
    ekf.x.p, ekf.x.v, ekf.x.R = p0.copy(), v0.copy(), so3_exp(rv0)
    ekf.x.P = np.eye(DIM) * 1e-6
    r0 = so3_exp(rv0)
    ekf.set_contact(np.array([True, True]), [r0.T @ (f - p0) for f in feet_world])
    errs_p, errs_v, errs_th = [], [], []
    for k in range(int(seconds * rate)):
        t = k * dt
        _p, _v, a, rv = truth(t)
        r = so3_exp(rv)
        r_next = so3_exp(truth(t + dt)[3])
        w_body = so3_log(r.T @ r_next) / dt
        gyro = w_body + RNG.normal(0, noise.gyro * np.sqrt(rate), 3)
        accel = r.T @ (a - GRAVITY) + RNG.normal(0, noise.accel * np.sqrt(rate), 3)
        ekf.propagate(gyro, accel, dt)
        p1, v1, _, rv1 = truth(t + dt)
        r1 = so3_exp(rv1)
        ekf.update([r1.T @ (f - p1) + RNG.normal(0, noise.kinematics, 3) for f in feet_world])
        errs_p.append(np.linalg.norm(ekf.x.p - p1))
        errs_v.append(np.linalg.norm(ekf.x.v - v1))
        errs_th.append(np.linalg.norm(so3_log(r1.T @ ekf.x.R)))
    assert np.sqrt(np.mean(np.square(errs_v))) < 0.02
    assert np.max(errs_p) < 0.01
    assert np.degrees(np.sqrt(np.mean(np.square(errs_th)))) < 0.3


@pytest.mark.parametrize("foot", [0, 1])
def test_touchdown_resets_the_foot_from_kinematics(foot: int) -> None:
    ekf = ContactEKF()
    ekf.x.p = np.array([1.0, 2.0, 0.7])
    contact = np.array([False, False])
    contact[foot] = True
    ekf.set_contact(contact, FEET_BODY)
    np.testing.assert_allclose(ekf.x.feet[foot], ekf.x.p + FEET_BODY[foot])
    ekf.update(FEET_BODY)
    innovation = ekf.last_innovation
    np.testing.assert_allclose(innovation, 0.0, atol=1e-12)


def test_foot_forces_from_joint_torques_match_the_simulator() -> None:
    """Standing in MuJoCo: the static force estimate from joint torques matches the simulated contacts."""
    from humanoid_control.driver.driver_core import DriverCore, DriverSettings
    from humanoid_control.estimation.leg_kinematics import LegKinematics
    from humanoid_control.hardware.mujoco_sim import MujocoBackend
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.model.robot_model import quat_wxyz_to_matrix

    config = load_robot_config("g1")
    kin = LegKinematics(config)
    backend, driver = MujocoBackend(config), DriverCore(config, DriverSettings())
    for _ in range(1500):  # boot ramp and a second of standing
        s = backend.read()
        backend.write(driver.update(s.q, s.dq))
        backend.advance(0.002)
    s = backend.read()
    truth = backend.ground_truth().contacts
    kin.set_state(s.q, quat_wxyz_to_matrix(s.imu_quat))
    forces = kin.foot_forces(s.tau)
    weight = kin.mass * 9.81
    for side, f in zip(("left", "right"), forces, strict=True):
        assert abs(f[2] - truth[side].force[2]) < 0.02 * weight
    assert abs(sum(f[2] for f in forces) - weight) < 0.03 * weight
    feet = kin.feet_in_imu()
    assert feet[0][1] > 0.1 and feet[1][1] < -0.1  # left foot on the left, in the IMU frame


@pytest.mark.slow
def test_replay_of_a_walking_run() -> None:
    """The estimator core replayed over 8 s of policy walking with a noisy IMU (offline; the node's core)."""
    from humanoid_bringup.evaluation.estimator_eval import estimator_metrics, replay
    from humanoid_control.hardware.mujoco_sim import ImuNoise
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_policy.inprocess import run_in_process
    from humanoid_policy.manifest import load_policy

    config = load_robot_config("g1")
    script = [
        ("stand", 1.0, (0.0, 0.0, 0.0)),
        ("forward", 4.0, (0.5, 0.0, 0.0)),
        ("turn", 3.0, (0.0, 0.0, 0.5)),
    ]
    noise = ImuNoise(
        gyro_noise_std=0.003, gyro_bias_std=0.005, accel_noise_std=0.03, accel_bias_std=0.05, seed=1
    )
    log = run_in_process(
        load_policy("holosoma/g1_fastsac", config), config, script, imu_noise=noise, record_sensors=True
    )
    assert not log.fell
    m = estimator_metrics(log, replay(log, config), 33.34 * 9.81)
    # guards of the current figures (measured 0.38 deg, 0.013 m/s, 95.7 %, 3.1 %); not the targets
    assert m["roll_pitch_rmse_deg"] < 0.6
    assert m["lin_vel_rmse_mps"] < 0.03
    assert min(m["contact_agreement"].values()) > 0.93
    assert m["xy_drift_pct"] < 5.0
    # with the optional flat-ground prior the height, unobservable otherwise, stops drifting
    from humanoid_control.estimation.ekf import EstimatorNoise

    flat = estimator_metrics(log, replay(log, config, EstimatorNoise(ground_height=0.01)), 33.34 * 9.81)
    assert flat["height_rmse_m"] < 0.005 < m["height_rmse_m"]


def test_imu_outage_restarts_propagation_and_grows_the_covariance() -> None:
    from humanoid_control.estimation.estimator import StateEstimator
    from humanoid_control.model.robot_config import load_robot_config

    config = load_robot_config("g1")
    est = StateEstimator(config)
    q = config.array("default")
    est.initialize(0.0, np.array([1.0, 0.0, 0.0, 0.0]), q)
    accel = -GRAVITY
    assert est.predict(0.002, np.zeros(3), accel)
    p_before = est.ekf.x.P[6, 6]
    assert not est.predict(0.5, np.zeros(3), accel)  # a 0.5 s gap: not integrated
    assert est.gaps == 1 and est.ekf.x.P[6, 6] > p_before
    assert est.predict(0.502, np.zeros(3), accel)  # and the next sample propagates again
