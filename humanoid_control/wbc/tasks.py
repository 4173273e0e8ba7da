"""Weighted tasks of the whole-body QP: each is ``J qdd ~= b`` with per-row weights ``w``.

Cost contribution: ``1/2 sum_i w_i (J_i qdd - b_i)^2``, where ``b = a_desired - drift`` (``drift = Jdot v``,
the task acceleration at ``qdd = 0``, see :mod:`humanoid_control.wbc.dynamics`). The centroidal tasks (CoM,
angular momentum) are written on the contact forces instead, ``J f ~= b``: an equivalent form under the
floating-base dynamics (see :class:`ComTask`). All task quantities are in
the world frame (LOCAL_WORLD_ALIGNED for frames); ``qdd`` = ``[base linear (base frame, m/s^2), base angular
(base frame, rad/s^2), joints (rad/s^2)]``.

A task writes its rows into views handed over by the QP (``fill``), so nothing is allocated per tick.
A weight of 0 disables a task without changing the QP's sparsity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import pinocchio as pin

from humanoid_control.wbc.constraints import ContactForceMap
from humanoid_control.wbc.dynamics import RobotDynamics


class Task(ABC):
    """Base class: ``dim`` rows; per-row ``weights`` (dimensionless scale of the cost).

    ``space`` says which variables the rows act on: ``"qdd"`` (J is (dim, nv)) or ``"force"`` (J is
    (dim, 3K) over the stacked corner forces of all feet).
    """

    dim: int = 0
    space: str = "qdd"

    def __init__(self, name: str, weight: float) -> None:
        self.name = name
        self.weights = np.full(self.dim, float(weight))
        self.enabled = weight != 0.0  # False: every row has weight 0 and the task is not evaluated

    def set_weight(self, weight: float) -> None:
        """Same weight on every row (0 disables the task). Per-row weights: write ``weights`` and call
        :meth:`weights_changed`."""
        self.weights[:] = weight
        self.weights_changed()

    def weights_changed(self) -> None:
        """Refresh :attr:`enabled` after ``weights`` was written directly."""
        self.enabled = bool(self.weights.any())

    @abstractmethod
    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        """Write the task Jacobian ``J`` and target ``b`` (dim,) for this tick."""

    def support(self, dyn: RobotDynamics, nx: int) -> np.ndarray:
        """(nx,) bool: the variables that can have non-zero Jacobian entries (the QP's fixed sparsity)."""
        return np.ones(nx, dtype=bool)


class ComTask(Task):
    """Centre-of-mass acceleration, written on the contact forces.

    ``cddot = (1/m) A_G[0:3] qdd + (1/m) Adot_G[0:3] v`` (world frame, m/s^2); target ``cddot_des``
    (``desired_acceleration``, set by the balance controller, or by :meth:`track` as PD on a position).
    The floating-base rows of the dynamics, an equality of the QP, make that equal to Newton's law on the
    contact forces: ``cddot = (1/m) sum_i f_i + g``. The task is written so, ``J = (1/m) [I .. I]`` over the
    forces and ``b = cddot_des - g``: the same optimum, but its Hessian is a block on the forces instead of a
    dense block on every acceleration, which keeps the QP's KKT matrix sparser (faster to factor and solve).
    """

    dim = 3
    space = "force"

    def __init__(self, forces: ContactForceMap, weight: float = 1000.0) -> None:
        super().__init__("com", weight)
        self.forces = forces
        self.desired_acceleration = np.zeros(3)
        self._J_written: np.ndarray | None = None  # the buffer J was last written to

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
        if self._J_written is not J:  # constant: the force sum, scaled
            np.multiply(self.forces.centroidal[0:3], 1.0 / dyn.mass, out=J)
            self._J_written = J
        np.subtract(self.desired_acceleration, dyn.gravity_vector, out=b)


class AngularMomentumTask(Task):
    """Centroidal angular momentum rate (about the CoM, world axes, N m), written on the contact forces.

    ``Ldot = A_G[3:6] qdd + Adot_G[3:6] v``, which the floating-base dynamics make equal to the moment of the
    contact forces about the CoM, ``sum_i (p_i - c) x f_i`` (see :class:`ComTask` for why the forces).
    Target ``Ldot_des = Ldot_ref - kd L`` (``kd`` 1/s damps the momentum; ``Ldot_ref`` N m is the
    hip-strategy moment set by the balance controller).
    """

    dim = 3
    space = "force"

    def __init__(self, forces: ContactForceMap, weight: float = 1.0, kd: float = 10.0) -> None:
        super().__init__("angular_momentum", weight)
        self.forces = forces
        self.kd = kd
        self.reference_rate = np.zeros(3)

    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        J[:] = self.forces.centroidal[3:6]
        np.multiply(dyn.hg[3:6], -self.kd, out=b)
        b += self.reference_rate


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

    def support(self, dyn: RobotDynamics, nx: int) -> np.ndarray:
        return dyn.frame_support_mask(dyn.frames[self.frame].frame_id)

    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        fs = dyn.frames[self.frame]
        J[:] = fs.jacobian[3:6]
        np.multiply(pin.log3(self.reference @ fs.rotation.T), self.kp, out=b)
        b -= self.kd * fs.velocity[3:6]
        b -= fs.drift[3:6]


class FootPoseTask(Task):
    """SE(3) pose of a foot's sole frame, used while the foot is not in contact (weight 0 otherwise).

    Errors in the world frame: position ``p_ref - p`` (m), orientation ``log3(R_ref R^T)`` (rad);
    ``a_des = a_ref + kp e + kd (v_ref - v)`` row-wise on ``[linear; angular]`` (``reference_velocity`` and
    ``reference_acceleration`` (6,), world frame, zero unless a swing trajectory sets them);
    ``a = J qdd + drift`` (classical acceleration).
    """

    dim = 6

    def __init__(self, side: str, weight: float = 0.0, kp: float = 400.0, kd: float = 40.0) -> None:
        super().__init__(f"foot_{side}", weight)
        self.side = side
        self.kp = kp
        self.kd = kd
        self.reference = pin.SE3.Identity()
        self.reference_velocity = np.zeros(6)
        self.reference_acceleration = np.zeros(6)

    def support(self, dyn: RobotDynamics, nx: int) -> np.ndarray:
        return dyn.frame_support_mask(dyn.frames[self.side].frame_id)

    def fill(self, dyn: RobotDynamics, J: np.ndarray, b: np.ndarray) -> None:
        fs = dyn.frames[self.side]
        J[:] = fs.jacobian
        b[0:3] = self.kp * (self.reference.translation - fs.position)
        b[3:6] = self.kp * pin.log3(self.reference.rotation @ fs.rotation.T)
        b += self.reference_acceleration
        b += self.kd * (self.reference_velocity - fs.velocity)
        b -= fs.drift


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
