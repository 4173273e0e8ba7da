"""The estimator of one tick: contact EKF, leg kinematics and contact detection put together (no rclpy)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from humanoid_control.estimation.contact import ContactDetector
from humanoid_control.estimation.ekf import BA, BG, DIM, N_FEET, TH, ContactEKF, EstimatorNoise, P, V
from humanoid_control.estimation.leg_kinematics import LegKinematics
from humanoid_control.estimation.so3 import cross, so3_exp


@dataclass
class BaseEstimate:
    """Output of :class:`StateEstimator` for one tick (base = the robot's base body, REP-105 base_link).

    Attributes:
        stamp: time (s). position: base origin in the odom frame (m). rotation: base -> odom.
        linear_velocity, angular_velocity: base twist in the base frame (m/s, rad/s).
        contact: per foot. forces: estimated ground reaction force per foot, odom-aligned axes (N).
        covariance: 6 x 6 pose covariance (position, rotation; odom-aligned, m^2, rad^2).
    """

    stamp: float
    position: np.ndarray
    rotation: np.ndarray
    linear_velocity: np.ndarray
    angular_velocity: np.ndarray
    contact: np.ndarray
    forces: list[np.ndarray]
    covariance: np.ndarray


class StateEstimator:
    """IMU, joint encoders and torques -> base state (:class:`ContactEKF`, :class:`LegKinematics`, contacts).

    Call :meth:`step` once per tick with the IMU sample and the joint state of that tick.
    """

    def __init__(
        self, config: object, noise: EstimatorNoise | None = None, base_height: float = 0.757
    ) -> None:
        self.kin = LegKinematics(config)
        self.detector = ContactDetector(self.kin.mass * 9.81)
        self.ekf = ContactEKF(noise)
        self.base_height = base_height
        self.last_stamp: float | None = None
        self.last_dt = 0.0
        self.initialized = False
        self.forces: list[np.ndarray] = [np.zeros(3) for _ in range(N_FEET)]
        self.slipping = np.zeros(N_FEET, dtype=bool)  # per foot, this tick
        self.slips = np.zeros(N_FEET, dtype=int)  # slip onsets per foot
        self.slip_ticks = np.zeros(N_FEET, dtype=int)  # updates with the foot slipping
        self.foot_speed = np.zeros(N_FEET)  # sole speed in the odom plane while in stance (m/s)
        self.v_ref = np.zeros(3)  # slip reference velocity of the IMU, odom frame (m/s)
        self.gaps = 0  # IMU outages (> 0.1 s) restarted from

    def _initialize(self, imu_quat: np.ndarray, joint_q: np.ndarray) -> None:
        from humanoid_control.model.robot_model import quat_wxyz_to_matrix

        r = quat_wxyz_to_matrix(imu_quat)
        yaw = np.arctan2(r[1, 0], r[0, 0])
        r = so3_exp(np.array([0.0, 0.0, -yaw])) @ r  # start at zero yaw: the odom frame's heading
        self.kin.set_state(joint_q, r)
        feet = self.kin.feet_in_imu()
        # height: the lower sole on the ground
        z = -min((r @ f)[2] for f in feet)
        x = self.ekf.x
        x.R, x.p, x.v = r, np.array([0.0, 0.0, z]), np.zeros(3)
        # the origin and heading are defined here (tiny covariance); the velocity is not known: the robot may
        # be moving when the estimator starts (a reset while a controller takes over). A velocity held at 0
        # with a tiny covariance would push the first motion into the accelerometer bias, which then biases
        # the velocity for seconds.
        x.P = np.eye(DIM) * 1e-6
        x.P[V : V + 3, V : V + 3] = np.eye(3) * self.ekf.noise.initial_velocity**2
        x.P[BG : BG + 3, BG : BG + 3] = np.eye(3) * 0.01**2
        x.P[BA : BA + 3, BA : BA + 3] = np.eye(3) * 0.1**2
        for i, f in enumerate(feet):
            x.feet[i] = x.p + r @ f
        self.initialized = True

    def step(
        self,
        stamp: float,
        gyro: np.ndarray,
        accel: np.ndarray,
        joint_q: np.ndarray,
        joint_tau: np.ndarray,
        imu_quat: np.ndarray | None = None,
        joint_dq: np.ndarray | None = None,
    ) -> BaseEstimate:
        """One tick: propagate to ``stamp`` (s), detect contacts, update with the feet of the stance legs."""
        if not self.initialized:
            self._initialize(np.array([1.0, 0, 0, 0]) if imu_quat is None else imu_quat, joint_q)
            self.last_stamp = stamp
        else:
            self.predict(stamp, gyro, accel)
        self.correct(joint_q, joint_tau, joint_dq, gyro)
        return self.estimate(stamp, gyro)

    def predict(self, stamp: float, gyro: np.ndarray, accel: np.ndarray) -> bool:
        """IMU propagation to ``stamp`` (s); False if the sample was not used (not started, bad time step)."""
        if not self.initialized or self.last_stamp is None:
            return False
        dt = stamp - self.last_stamp
        if dt <= 0.0:
            return False  # duplicate or out of order
        if dt > 0.1:
            # an IMU outage: do not integrate across it, but restart from this sample (else every later step
            # would look like an outage too); the covariance grows as for unknown motion over the gap
            self.gaps += 1
            grow = np.zeros(DIM)
            grow[TH : TH + 3] = self.ekf.noise.gyro**2 * dt
            grow[V : V + 3] = 1.0 * dt  # unknown acceleration, about 1 m/s^2 over the gap
            grow[P : P + 3] = 0.25 * dt * dt
            self.ekf.x.P += np.diag(grow)
            self.last_stamp = stamp
            return False
        v_filter = self.ekf.x.v
        self.ekf.propagate(gyro, accel, dt)
        # slip reference: the IMU's own velocity, pulled towards the filter's with time constant slip_tau,
        # so a foot sliding for tens of ms does not drag it along as it drags the filter
        gain = min(1.0, dt / self.ekf.noise.slip_tau)
        self.v_ref = self.v_ref + self.ekf.last_a_world * dt + (v_filter - self.v_ref) * gain
        self.last_stamp = stamp
        self.last_dt = dt
        return True

    def initialize(self, stamp: float, imu_quat: np.ndarray, joint_q: np.ndarray) -> None:
        """Start at the odom origin (heading zero) with the lower sole on the ground."""
        self._initialize(imu_quat, joint_q)
        self.last_stamp = stamp

    def correct(
        self,
        joint_q: np.ndarray,
        joint_tau: np.ndarray,
        joint_dq: np.ndarray | None = None,
        gyro: np.ndarray | None = None,
    ) -> None:
        """Leg kinematics and contact detection at the current filter time; updates the filter.

        With the joint rates (rad/s) and the gyro sample (rad/s) also slip detection: a stance sole moving
        faster than ``slip_speed`` in the odom frame is not used, and is re-anchored once it holds.
        """
        x = self.ekf.x
        self.kin.set_state(joint_q, x.R, joint_dq)
        feet = self.kin.feet_in_imu()
        self.forces = self.kin.foot_forces(joint_tau)
        contact = self.detector.update([float(f[2]) for f in self.forces])
        slipping = np.zeros(N_FEET, dtype=bool)
        speeds = [0.0] * N_FEET
        if joint_dq is not None and gyro is not None:
            w = None
            slip = self.ekf.noise.slip_speed
            for i in range(N_FEET):
                if not (contact[i] and self.ekf.contact[i]):  # in stance since the last tick
                    continue
                if w is None:
                    w = gyro - x.bg
                # a foot rolling on its heel or toes keeps that edge still: the slowest point measures sliding
                speeds[i] = self.kin.slowest_sole_speed(i, self.v_ref, w, x.R, slip)
                if speeds[i] > slip:
                    slipping[i] = True
                    self.slip_ticks[i] += 1
                    if not self.slipping[i]:
                        self.slips[i] += 1
                    contact[i] = False  # not used by the filter (the detector keeps its own state)
        self.foot_speed[:] = speeds
        self.slipping = slipping
        self.ekf.set_contact(contact, feet)
        self.ekf.update(feet)

    def estimate(self, stamp: float, gyro: np.ndarray) -> BaseEstimate:
        """The base state now (after :meth:`predict` / :meth:`correct`); ``gyro`` for the angular velocity."""
        x = self.ekf.x
        r_bi, t_bi = self.kin.base_in_imu()
        w = gyro - x.bg
        # base velocity in the base frame: r_bi^T (R^T v + w x t_bi); x.R is replaced, never changed in place
        v_imu = x.R.T @ x.v + cross(w, t_bi)
        aligned = self.kin.base_aligned_with_imu
        cov = np.zeros((6, 6))
        cov[:3, :3] = x.P[P : P + 3, P : P + 3]
        cov[3:, 3:] = x.R @ x.P[TH : TH + 3, TH : TH + 3] @ x.R.T
        return BaseEstimate(
            stamp=stamp,
            position=x.p + x.R @ t_bi,
            rotation=x.R if aligned else x.R @ r_bi,
            linear_velocity=v_imu if aligned else r_bi.T @ v_imu,
            angular_velocity=w if aligned else r_bi.T @ w,
            contact=self.ekf.contact.copy(),
            forces=self.forces,
            covariance=cov,
        )
