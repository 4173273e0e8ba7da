"""Step adjustment from the divergent component of motion (DCM): where (and when) to put the next foot down.

During single support the LIPM's DCM ``xi = c + cdot / omega`` (odom frame, m) runs away from the stance
ZMP ``p`` (m): ``xi(T) = p + (xi_0 - p) e^(omega T)`` after ``T`` seconds. After a push the DCM is
somewhere unplanned; the next foot ``u`` (m) must be placed so that the DCM at touchdown ``xi(T)`` sits at a
chosen offset ``b`` from it: ``u + b = xi(T)``. With ``tau = e^(omega T)`` as a variable this is linear
(Khadiv et al., "Walking control based on step timing adaptation", arXiv 1704.01271), a small QP::

    minimize    w_u ||u - u_nom||^2 + w_tau (tau - tau_nom)^2 + w_b ||b - b_nom||^2
    subject to  u + b - (xi_0 - p) tau = p                           (the LIPM, 2 rows)
                -step_backward <= R^T (u - s)_x <= step_forward          (reach, stance sole frame)
                step_width_min <= sign * R^T (u - s)_y <= step_width_max (width; sign +1 for a left swing)
                e^(omega T_min) <= tau <= e^(omega T_max)               (timing)

over ``z = [u_x, u_y, tau, b_x, b_y]``, ``s`` and ``R`` the stance sole's position and heading. ``b_nom``
is the offset the rest of the plan expects: for coming to rest, half-way back towards the stance foot (the
DCM ends between the feet, inside the double-support polygon); for steady walking
:func:`nominal_dcm_offset`. The step found is then projected by the footstep planner (sole clearance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from humanoid_control.walking.footsteps import Footstep, FootstepPlanner, side_sign
from humanoid_control.walking.geometry import Pose2D, inside_polygon, polygon_centroid, support_polygon
from humanoid_control.walking.lipm import Lipm
from humanoid_control.wbc.solver import OsqpSettings, OsqpSolver, QpStatus


@dataclass
class StepAdjustmentSettings:
    """Weights and timing bounds of :class:`DcmStepAdjuster`.

    Attributes:
        w_step: weight of the step position's deviation from the nominal step (1/m^2).
        w_timing: weight of ``tau = e^(omega T)``'s deviation from its nominal (dimensionless).
        w_offset: weight of the DCM offset's deviation from its nominal (1/m^2); the largest: the DCM
            should end where the rest of the plan expects it.
        min_remaining: earliest touchdown after now (s): the swing foot needs time to get there (or the
            planned touchdown, when sooner).
        max_remaining: latest touchdown after now (s).
        adapt_timing: let the touchdown time move within the bounds (else it stays the nominal one).
    """

    w_step: float = 1.0
    w_timing: float = 0.1
    w_offset: float = 100.0
    min_remaining: float = 0.15
    max_remaining: float = 0.6
    adapt_timing: bool = True


@dataclass
class StepAdjustment:
    """The adjusted next step.

    Attributes:
        status: the QP outcome (``ok`` False: keep the nominal step).
        step: where the swing foot lands (odom frame; the nominal step's heading).
        touchdown_in: time from now to touchdown (s).
        dcm_at_touchdown: predicted DCM at touchdown (m, odom frame).
        dcm_offset: ``dcm_at_touchdown - step position`` (m).
        limited: the step or its timing is on a limit (reach, width, timing, clearance): the DCM offset is
            not the one asked for.
        captured: the predicted DCM at touchdown lies in the support polygon of both feet after the step
            (the robot can then come to rest without another step).
    """

    status: QpStatus
    step: Footstep
    touchdown_in: float
    dcm_at_touchdown: np.ndarray
    dcm_offset: np.ndarray
    limited: bool
    captured: bool


def nominal_dcm_offset(step: Pose2D, following: Pose2D, duration: float, omega: float) -> np.ndarray:
    """DCM offset (m, odom frame) at the touchdown of ``step`` of a periodic gait whose next step lands at
    ``following`` after ``duration`` (s) of point-foot single support: in ``step``'s sole frame,
    ``b_x = L / (e^(omega T) - 1)`` for the forward distance ``L`` and ``b_y = W / (e^(omega T) + 1)`` for
    the lateral one ``W`` (lateral offsets alternate in sign from step to step)."""
    rel = step.relative(following)
    e = math.exp(omega * duration)
    local = np.array([rel.x / (e - 1.0), rel.y / (e + 1.0)])
    return step.rotation @ local


class DcmStepAdjuster:
    """Chooses the next footstep (and touchdown time) from the measured DCM (see the module docstring)."""

    def __init__(
        self, planner: FootstepPlanner, lipm: Lipm, settings: StepAdjustmentSettings | None = None
    ) -> None:
        self.planner = planner
        self.lipm = lipm
        self.settings = settings or StepAdjustmentSettings()
        self.solver = OsqpSolver(OsqpSettings(eps_abs=1e-7, eps_rel=1e-7, max_iter=4000, polish=True))
        # pattern: rows [LIPM x, LIPM y, reach, width, tau]; columns [u_x, u_y, tau, b_x, b_y]
        dense = np.array(
            [
                [1.0, 0.0, 1.0, 1.0, 0.0],
                [0.0, 1.0, 1.0, 0.0, 1.0],
                [1.0, 1.0, 0.0, 0.0, 0.0],
                [1.0, 1.0, 0.0, 0.0, 0.0],
                [0.0, 0.0, 1.0, 0.0, 0.0],
            ]
        )
        self._A = sp.csc_matrix(dense)
        self._A.sort_indices()
        self._mask = dense.T != 0.0  # CSC order = column-major order of the non-zeros
        s = self.settings
        self._P = sp.csc_matrix(
            np.diag(2.0 * np.array([s.w_step, s.w_step, s.w_timing, s.w_offset, s.w_offset]))
        )
        self._setup = False

    def adjust(
        self,
        stance: Footstep,
        nominal: Footstep,
        dcm: np.ndarray,
        remaining: float,
        stance_zmp: np.ndarray | None = None,
        offset: np.ndarray | None = None,
    ) -> StepAdjustment:
        """The next step for the swing foot (``nominal.side``) from the DCM ``dcm`` (m, odom frame) now.

        ``stance``: the foot in support; ``nominal``: the planned step; ``remaining``: planned time to its
        touchdown (s); ``stance_zmp``: where the ZMP stays until then (default: the stance sole's centroid);
        ``offset``: desired DCM offset at touchdown (default: half-way back to the stance foot, i.e. come to
        rest between the feet). Non-finite input raises ``ValueError``.
        """
        s = self.settings
        dcm = np.asarray(dcm, dtype=float)
        if stance.side == nominal.side:
            raise ValueError("the nominal step must be the swing foot's")
        if not (np.isfinite(dcm).all() and math.isfinite(remaining)):
            raise ValueError("non-finite DCM or time refused")
        w = self.lipm.omega
        p = np.asarray(stance_zmp if stance_zmp is not None else self._centroid(stance), dtype=float)
        u_nom = nominal.pose.position
        b_nom = 0.5 * (stance.pose.position - u_nom) if offset is None else np.asarray(offset, dtype=float)
        t_nom = min(max(remaining, 0.0), s.max_remaining)
        tau_nom = math.exp(w * t_nom)
        if s.adapt_timing:  # never later than planned because of the minimum: the swing is under way
            tau_lo = math.exp(w * min(s.min_remaining, t_nom))
            tau_hi = math.exp(w * max(s.max_remaining, t_nom))
        else:
            tau_lo = tau_hi = tau_nom
        limits = self.planner.spec
        yaw = stance.pose.yaw
        c, sn = math.cos(yaw), math.sin(yaw)
        sign = side_sign(nominal.side)
        origin = stance.pose.position
        x_mid = c * origin[0] + sn * origin[1]
        y_mid = -sn * origin[0] + c * origin[1]
        if sign > 0:
            y_lo, y_hi = limits.step_width_min, limits.step_width_max
        else:
            y_lo, y_hi = -limits.step_width_max, -limits.step_width_min
        A = np.array(
            [
                [1.0, 0.0, -(dcm[0] - p[0]), 1.0, 0.0],
                [0.0, 1.0, -(dcm[1] - p[1]), 0.0, 1.0],
                [c, sn, 0.0, 0.0, 0.0],
                [-sn, c, 0.0, 0.0, 0.0],
                [0.0, 0.0, 1.0, 0.0, 0.0],
            ]
        )
        lower = np.array([p[0], p[1], x_mid - limits.step_backward, y_mid + y_lo, tau_lo])
        upper = np.array([p[0], p[1], x_mid + limits.step_forward, y_mid + y_hi, tau_hi])
        g = -2.0 * np.array(
            [
                s.w_step * u_nom[0],
                s.w_step * u_nom[1],
                s.w_timing * tau_nom,
                s.w_offset * b_nom[0],
                s.w_offset * b_nom[1],
            ]
        )
        Ax = A.T[self._mask]
        if not self._setup:
            Am = self._A.copy()
            Am.data[:] = Ax
            self.solver.setup(self._P, g, Am, lower, upper)
            self._setup = True
        else:
            self.solver.update(self._P.data, g, Ax, lower, upper)
        result = self.solver.solve()
        if not result.status.ok:
            self._setup = False
            return StepAdjustment(result.status, nominal, t_nom, dcm.copy(), np.zeros(2), True, False)
        z = result.x
        tau = max(float(z[2]), 1.0)
        touchdown_in = math.log(tau) / w
        step, projected = self.planner.project(
            stance, Footstep(nominal.side, Pose2D(z[0], z[1], nominal.pose.yaw))
        )
        xi_t = p + (dcm - p) * math.exp(w * touchdown_in)
        offset_now = xi_t - step.pose.position
        rows = slice(2, 5) if s.adapt_timing else slice(2, 4)  # a fixed timing always sits on its bounds
        value = A[rows] @ z
        on_limit = bool(np.any(np.minimum(np.abs(value - lower[rows]), np.abs(value - upper[rows])) < 1e-6))
        hull = support_polygon(
            [
                stance.pose.apply(self.planner.soles[stance.side]),
                step.pose.apply(self.planner.soles[step.side]),
            ]
        )
        return StepAdjustment(
            result.status,
            step,
            touchdown_in,
            xi_t,
            offset_now,
            on_limit or projected,
            inside_polygon(xi_t, hull),
        )

    def _centroid(self, foot: Footstep) -> np.ndarray:
        return polygon_centroid(foot.pose.apply(self.planner.soles[foot.side]))

    def swing_side_for(self, feet: dict[str, Pose2D], dcm: np.ndarray) -> str:
        """Standing: the foot to step with when the DCM leaves the support polygon, the one on the side the
        DCM has gone to (lateral offset from the feet's midpoint in the walking frame); ``left`` if none."""
        frame = self.planner.walking_frame(feet)
        local = frame.relative(Pose2D(float(dcm[0]), float(dcm[1]), 0.0))
        if abs(local.y) < 1e-9:
            return "left"
        return "left" if local.y > 0.0 else "right"
