"""Weighted tasks of the whole-body QP: each is ``J qdd ~= b`` with per-row weights ``w``.

Cost contribution: ``1/2 sum_i w_i (J_i qdd - b_i)^2``, where ``b = a_desired - drift`` (``drift = Jdot v``,
the task acceleration at ``qdd = 0``, see :mod:`humanoid_control.wbc.dynamics`). All task quantities are in
the world frame (LOCAL_WORLD_ALIGNED for frames); ``qdd`` = ``[base linear (base frame, m/s^2), base angular
(base frame, rad/s^2), joints (rad/s^2)]``.

A task writes its rows into views handed over by the QP (``fill``), so nothing is allocated per tick.
A weight of 0 disables a task without changing the QP's sparsity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import pinocchio as pin

from humanoid_control.wbc.dynamics import RobotDynamics


class Task(ABC):
    """Base class: ``dim`` rows over ``qdd``; per-row ``weights`` (dimensionless scale of the cost)."""

    dim: int = 0

    def __init__(self, name: str, weight: float) -> None:
        self.name = name
        self.weights = np.full(self.dim, float(weight))

    def set_weight(self, weight: float) -> None:
        """Same weight on every row (0 disables the task)."""
        self.weights[:] = weight

    @abstractmethod
    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        """Write the task Jacobian ``J`` (dim, nv) and target ``b`` (dim,) for this tick."""


class ComTask(Task):
    """Centre-of-mass acceleration.

    ``cddot = (1/m) A_G[0:3] qdd + (1/m) Adot_G[0:3] v`` (world frame, m/s^2), target ``cddot_des``
    (``desired_acceleration``, set by the balance controller, or by :meth:`track` as PD on a position).
    """

    dim = 3

    def __init__(self, weight: float = 1000.0) -> None:
        super().__init__("com", weight)
        self.desired_acceleration = np.zeros(3)

    def track(
        self,
        dyn: RobotDynamics,
        position: np.ndarray,
        kp: float,
        kd: float,
        velocity: np.ndarray | None = None,
    ) -> None:
        """``cddot_des = kp (c_ref - c) + kd (cdot_ref - cdot)`` (1/s^2, 1/s)."""
        vref = np.zeros(3) if velocity is None else velocity
        self.desired_acceleration[:] = kp * (position - dyn.com) + kd * (vref - dyn.com_velocity)

    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        inv_m = 1.0 / dyn.mass
        np.multiply(dyn.Ag[0:3], inv_m, out=J)
        np.subtract(self.desired_acceleration, dyn.hg_drift[0:3] * inv_m, out=b)


class AngularMomentumTask(Task):
    """Centroidal angular momentum rate (about the CoM, world axes, N m).

    ``Ldot = A_G[3:6] qdd + Adot_G[3:6] v``; target ``Ldot_des = Ldot_ref - kd L`` (``kd`` 1/s damps the
    momentum; ``Ldot_ref`` N m is the hip-strategy moment set by the balance controller).
    """

    dim = 3

    def __init__(self, weight: float = 1.0, kd: float = 10.0) -> None:
        super().__init__("angular_momentum", weight)
        self.kd = kd
        self.reference_rate = np.zeros(3)

    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        J[:] = dyn.Ag[3:6]
        np.subtract(self.reference_rate - self.kd * dyn.hg[3:6], dyn.hg_drift[3:6], out=b)


class OrientationTask(Task):
    """Orientation of a frame (base or torso), world axes.

    Error ``e = log3(R_ref R^T)`` (rad, world frame); ``wdot_des = kp e - kd w`` (1/s^2, 1/s);
    ``wdot = J_ang qdd + drift_ang``. ``mask`` (3,) scales rows per world axis (e.g. leave yaw free).
    """

    dim = 3

    def __init__(self, frame: str, weight: float = 100.0, kp: float = 200.0, kd: float = 30.0) -> None:
        super().__init__(f"orientation_{frame}", weight)
        self.frame = frame
        self.kp = kp
        self.kd = kd
        self.reference = np.eye(3)

    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        fs = dyn.frames[self.frame]
        J[:] = fs.jacobian[3:6]
        np.multiply(pin.log3(self.reference @ fs.rotation.T), self.kp, out=b)
        b -= self.kd * fs.velocity[3:6]
        b -= fs.drift[3:6]


class FootPoseTask(Task):
    """SE(3) pose of a foot's sole frame, used while the foot is not in contact (weight 0 otherwise).

    Errors in the world frame: position ``p_ref - p`` (m), orientation ``log3(R_ref R^T)`` (rad);
    ``a_des = kp e - kd v`` row-wise on ``[linear; angular]``; ``a = J qdd + drift`` (classical acceleration).
    """

    dim = 6

    def __init__(self, side: str, weight: float = 0.0, kp: float = 400.0, kd: float = 40.0) -> None:
        super().__init__(f"foot_{side}", weight)
        self.side = side
        self.kp = kp
        self.kd = kd
        self.reference = pin.SE3.Identity()

    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        fs = dyn.frames[self.side]
        J[:] = fs.jacobian
        b[0:3] = self.kp * (self.reference.translation - fs.position)
        b[3:6] = self.kp * pin.log3(self.reference.rotation @ fs.rotation.T)
        b -= self.kd * fs.velocity + fs.drift


class PostureTask:
    """Joint posture: ``qdd_j = kp (q_ref - q) - kd dq`` for every actuated joint (rad/s^2).

    Its Jacobian is the selection of the joint rows of ``qdd``, so it enters the QP as a diagonal term
    (``weights`` per joint) instead of dense rows.
    """

    def __init__(self, q_ref: np.ndarray, weight: float = 1.0, kp: float = 30.0, kd: float = 10.0) -> None:
        self.name = "posture"
        self.q_ref = np.array(q_ref, dtype=float)
        self.weights = np.full(self.q_ref.size, float(weight))
        self.kp = kp
        self.kd = kd

    def target(self, q_joints: np.ndarray, dq_joints: np.ndarray, out: np.ndarray) -> None:
        """Write the desired joint accelerations (rad/s^2) into ``out``."""
        np.subtract(self.q_ref, q_joints, out=out)
        out *= self.kp
        out -= self.kd * dq_joints
