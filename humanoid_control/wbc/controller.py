"""Standing whole-body controller: balance references -> QP -> joint commands, one call per tick (no ROS).

A ROS node wraps :class:`StandingController`: estimated state in (:func:`pinocchio_state` builds ``q, v``),
:class:`~humanoid_control.wbc.command.JointCommand` out, ``last_output`` / ``balance.state`` /
``commands.counters`` for diagnostics and markers.
"""

from __future__ import annotations

import math
import time

import numpy as np

from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import PinocchioRobotModel, load_pinocchio_model
from humanoid_control.wbc.balance import BalanceSettings, StandingBalance
from humanoid_control.wbc.command import CommandGenerator, CommandSettings, JointCommand
from humanoid_control.wbc.qp import WbcOutput, WbcSettings, WholeBodyQP
from humanoid_control.wbc.solver import QpSolver


class StandingController:
    """Both feet in contact; CoM/DCM balance with ankle and hip strategies; QP failure policy."""

    def __init__(
        self,
        config: RobotConfig,
        pmodel: PinocchioRobotModel | None = None,
        wbc: WbcSettings | None = None,
        balance: BalanceSettings | None = None,
        command: CommandSettings | None = None,
        solver: QpSolver | None = None,
    ) -> None:
        self.config = config
        self.pmodel = pmodel or load_pinocchio_model(config)
        self.qp = WholeBodyQP(config, self.pmodel, wbc, solver)
        self.balance = StandingBalance(config, self.pmodel, balance)
        self.commands = CommandGenerator(config, command)
        self.contacts = {side: True for side in self.qp.dyn.sides}
        self.last_output: WbcOutput | None = None
        # the last tick's whole-body QP alone (s): rigid-body terms, assembly, solve, torques; without the
        # balance references and the command integration
        self.qp_tick_s = 0.0

    def step(self, q: np.ndarray, v: np.ndarray) -> JointCommand:
        """One tick from the pinocchio state ``q`` (nq,), ``v`` (nv,) (see :mod:`.dynamics`)."""
        qp = self.qp
        t0 = time.perf_counter()
        qp.update_dynamics(q, v)
        dynamics_s = time.perf_counter() - t0
        bal = self.balance.update(qp.dyn, self.contacts)
        qp.com.desired_acceleration[:] = bal.com_acceleration
        qp.angular_momentum.reference_rate[:] = bal.angular_momentum_rate
        # upright, heading of the feet
        c, s = math.cos(bal.yaw), math.sin(bal.yaw)
        rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        qp.base_orientation.reference[:] = rz
        if qp.torso_orientation is not None:
            qp.torso_orientation.reference[:] = rz
        out = qp.solve()
        self.last_output = out
        self.qp_tick_s = dynamics_s + out.tick_time_s
        joints_q = q[self.pmodel.joint_q_idx]
        joints_v = v[self.pmodel.joint_v_idx]
        qdd = out.qdd[6:][qp.v_idx]
        tau = out.tau[qp.v_idx]
        return self.commands.update(out.ok, joints_q, joints_v, qdd, tau)
