"""Settings and per-tick output of the whole-body QP (:class:`~humanoid_control.wbc.qp.WholeBodyQP`).

:class:`WbcSettings`: task weights (dimensionless), gains (1/s^2, 1/s), regularization, contact force bounds
(N), joint-limit horizons (s), the acceleration clip (rad/s^2) and the problem reductions (limit screening,
contact reduction, limit relaxing). :class:`WbcOutput`: one tick's result, the solution
``x = [qdd (nv), f (3 k per foot)]`` (generalized accelerations: base twist rate in the base frame, joint
accelerations, m/s^2 and rad/s^2; corner forces in the world frame, N), the joint torques in velocity order
(N m) and the solver's iterations and times (s).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from humanoid_control.wbc.solver import QpStatus


@dataclass
class WbcSettings:
    """Weights, gains and limits of the whole-body QP (robot facts come from the robot configuration).

    Attributes:
        w_com, w_angular_momentum, w_base, w_torso, w_foot, w_posture: task weights (dimensionless).
        kp_base / kd_base, kp_torso / kd_torso: orientation gains (1/s^2, 1/s).
        kp_foot / kd_foot: swing-foot pose gains. kp_posture / kd_posture: posture gains.
        kd_angular_momentum: angular momentum damping (1/s).
        kd_contact: sole velocity bleed in the contact constraint (1/s).
        reg_qdd, reg_force: regularization weights on ``qdd`` and on the point forces.
        f_min, f_max: bounds of each corner's normal force in contact (N).
        horizon_position, horizon_velocity: joint-limit horizons (s); qdd_max: acceleration clip (rad/s^2).
        friction: overrides the configuration's ``wbc.friction`` when not None.
        limit_screening: solve first without the torque-limit and joint-limit rows (a smaller problem: the
            torque rows carry the mass matrix and the contact Jacobians) and solve the full problem only when
            that solution breaks a limit, or while the last full solution had a torque beyond
            ``screening_margin`` of its limit or a joint acceleration at its bound. Exact: an optimum of the
            smaller problem that satisfies the dropped rows is an optimum of the full one.
        screening_margin: fraction of a torque limit under which the full problem may be left again.
        contact_reduction: leave a foot out of contact out of the problem: its force variables (its friction
            rows hold them at 0) and its contact rows (free) with them. Exact, and a smaller problem in single
            support (the G1: 47 variables and 32 screened rows instead of 59 and 58). One problem (and solver)
            per set of feet in contact, all set up at construction; a solver that cannot ``spawn`` keeps one.
        relax_limits: when the problem with every row fails (infeasible, or out of iterations: a joint
            running into its position limit faster than its torque can stop it, as in a crossed stance
            after a hard side push), the tick is solved again without the joint-limit rows, and if that
            fails too without the torque-limit rows (the screened problem), and that answer is used
            (``WbcOutput.limits_relaxed``, counted in ``WholeBodyQP.relaxed_ticks``): a joint meets its
            mechanical stop or an actuator saturates instead of the controller failing. False: the tick
            fails. Read every tick; the relaxed problems are built at construction only when True.
    """

    w_com: float = 1000.0
    w_angular_momentum: float = 5.0
    w_base: float = 200.0
    w_torso: float = 100.0
    w_foot: float = 100.0
    w_posture: float = 1.0
    kp_base: float = 200.0
    kd_base: float = 30.0
    kp_torso: float = 200.0
    kd_torso: float = 30.0
    kp_foot: float = 400.0
    kd_foot: float = 40.0
    kp_posture: float = 50.0
    kd_posture: float = 12.0
    kd_angular_momentum: float = 10.0
    kd_contact: float = 20.0
    reg_qdd: float = 1e-4
    reg_force: float = 1e-5
    f_min: float = 0.0
    f_max: float = 2000.0
    horizon_position: float = 0.1
    horizon_velocity: float = 0.05
    qdd_max: float = 1000.0
    friction: float | None = None
    limit_screening: bool = True
    screening_margin: float = 0.9
    contact_reduction: bool = True
    relax_limits: bool = True


@dataclass
class WbcOutput:
    """Result of one tick.

    Attributes:
        status: QP outcome; ``ok`` False means ``qdd``/``forces``/``tau`` are not to be used (NaN).
        x (n,): the solution ``[qdd, f]`` (a copy). ``qdd`` (nv,): generalized accelerations (a view of it);
            ``forces``: per side (k, 3) corner forces, world frame (N), built on access.
        force_cols: each side's columns of ``x``.
        tau (nv - 6,): joint torques in velocity order (N m), from the dynamics.
        iterations: solver iterations. solve_time_s: solver alone; tick_time_s: assembly and solve (s), the
            rigid-body update before it excluded. Both summed over the tick's solves.
        full_problem: the tick solved the problem with the limit rows (see ``limit_screening``).
        limits_relaxed: that problem failed and the answer is one without the joint-limit rows, or without
            any limit rows (see ``WbcSettings.relax_limits``).
    """

    status: QpStatus
    x: np.ndarray
    nv: int
    force_cols: dict[str, slice]
    tau: np.ndarray
    iterations: int
    solve_time_s: float
    tick_time_s: float
    full_problem: bool = True
    limits_relaxed: bool = False

    @property
    def qdd(self) -> np.ndarray:
        return self.x[: self.nv]

    @property
    def forces(self) -> dict[str, np.ndarray]:
        return {side: self.x[c].reshape(-1, 3) for side, c in self.force_cols.items()}

    @property
    def ok(self) -> bool:
        return self.status.ok
