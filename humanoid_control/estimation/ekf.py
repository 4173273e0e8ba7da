"""Contact-aided extended Kalman filter for the floating base: IMU propagation, leg-kinematics updates.

:class:`ContactEKF` (the filter) and its state, noise and Jacobians (numpy; no rclpy). The estimator core
around it: ``leg_kinematics.LegKinematics`` (sole kinematics and foot forces from joint torques, pinocchio),
``contact.ContactDetector`` and ``estimator.StateEstimator`` (one call per tick); ``state_estimator_node``
wraps that in ROS 2; ``humanoid_bringup.evaluation.estimator_eval.replay`` runs it offline.

State (world frame W, IMU frame B; the filter tracks the IMU frame):

- ``R``: orientation of B in W (rotation matrix, B -> W); ``v``: velocity of B in W (m/s); ``p``: position
  of B in W (m);
- ``feet[i]``: position in W of the sole origin of foot ``i`` (m): a contact point, fixed while in contact;
- ``bg``, ``ba``: gyroscope (rad/s) and accelerometer (m/s^2) biases, in B.

Error state (21): ``[dtheta, dv, dp, df_0, df_1, dbg, dba]`` with ``R = R_hat Exp(dtheta)`` (right,
body-frame perturbation) and additive errors elsewhere.

Measurements:

- IMU (propagation): gyro ``w_m = w + bg + n_g``, accelerometer ``a_m = R^T (a - g) + ba + n_a`` (specific
  force), ``g = (0, 0, -9.81)``;
- kinematics (update, for each foot in contact): ``y_i = R^T (f_i - p) + n_k``, the sole position in B
  from the joint encoders (forward kinematics).

Linearised error dynamics (continuous time) with ``w = w_m - bg``, ``a = a_m - ba``::

    dtheta' = -[w]x dtheta - dbg - n_g
    dv'     = -R [a]x dtheta - R dba - R n_a
    dp'     = dv
    df_i'   = n_f_i            (random walk: small in contact, large in swing)
    dbg'    = n_bg,  dba' = n_ba

and the kinematic measurement Jacobian: ``d y_i = [y_i]x dtheta - R^T dp + R^T df_i``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from humanoid_control.estimation.linalg import as_slice, solve_spd
from humanoid_control.estimation.so3 import skew, so3_exp, so3_log

GRAVITY = np.array([0.0, 0.0, -9.81])
N_FEET = 2
DIM = 21
TH, V, P, F0, BG, BA = 0, 3, 6, 9, 15, 18
_EYE_DIM = np.eye(DIM)


_I3 = np.eye(3)


@dataclass
class EstimatorNoise:
    """Noise densities of the filter (continuous time; white noise per sqrt(Hz), walks per sqrt(s)).

    Attributes:
        gyro: gyro white noise (rad/s/sqrt(Hz)). accel: accelerometer white noise (m/s^2/sqrt(Hz)).
        gyro_bias_walk: (rad/s/sqrt(s)). accel_bias_walk: (m/s^2/sqrt(s)).
        foot_contact: foot position random walk in contact (m/sqrt(s)) - allows for small slips.
        foot_swing: foot position random walk in swing (m/sqrt(s)) - effectively unconstrained.
        kinematics: std of the forward-kinematics foot position (m): encoder noise and model error.
        ground_height: std (m) of an optional flat-ground prior: a foot in contact is at height 0 in the odom
            frame (``None``: off; height is then unobservable and drifts).
        slip_speed: a foot in contact whose sole moves faster than this in the odom frame (m/s) is slipping:
            it is counted, its kinematic update is skipped and it is re-anchored where it stops. The sole's
            velocity is taken against an IMU-integrated reference velocity that follows the filter's with
            time constant ``slip_tau`` (s).
        initial_velocity: std (m/s) of the velocity at start-up (it starts at 0; the robot may be moving).
    """

    gyro: float = 0.002
    accel: float = 0.02
    gyro_bias_walk: float = 1e-4
    accel_bias_walk: float = 1e-3
    foot_contact: float = 0.002
    foot_swing: float = 1.0
    kinematics: float = 0.003
    ground_height: float | None = None
    slip_speed: float = 0.25
    slip_tau: float = 0.2
    initial_velocity: float = 0.1


@dataclass
class FilterState:
    """Estimate and error covariance (see module docstring for the frames)."""

    R: np.ndarray = field(default_factory=lambda: np.eye(3))
    v: np.ndarray = field(default_factory=lambda: np.zeros(3))
    p: np.ndarray = field(default_factory=lambda: np.zeros(3))
    feet: np.ndarray = field(default_factory=lambda: np.zeros((N_FEET, 3)))
    bg: np.ndarray = field(default_factory=lambda: np.zeros(3))
    ba: np.ndarray = field(default_factory=lambda: np.zeros(3))
    P: np.ndarray = field(default_factory=lambda: np.eye(DIM) * 1e-4)

    def copy(self) -> FilterState:
        return FilterState(
            self.R.copy(),
            self.v.copy(),
            self.p.copy(),
            self.feet.copy(),
            self.bg.copy(),
            self.ba.copy(),
            self.P.copy(),
        )

    def boxplus(self, dx: np.ndarray) -> FilterState:
        """The state perturbed by an error-state vector ``dx`` (21)."""
        out = self.copy()
        out.apply(dx)
        return out

    def apply(self, dx: np.ndarray) -> None:
        """Perturb this state in place by ``dx`` (21); the covariance is left as it is."""
        self.R = self.R @ so3_exp(dx[TH : TH + 3])
        self.v = self.v + dx[V : V + 3]
        self.p = self.p + dx[P : P + 3]
        self.feet = self.feet + dx[F0 : F0 + 3 * N_FEET].reshape(N_FEET, 3)
        self.bg = self.bg + dx[BG : BG + 3]
        self.ba = self.ba + dx[BA : BA + 3]

    def boxminus(self, other: FilterState) -> np.ndarray:
        """Error-state vector ``dx`` with ``other.boxplus(dx) == self``."""
        dx = np.zeros(DIM)
        dx[TH : TH + 3] = so3_log(other.R.T @ self.R)
        dx[V : V + 3] = self.v - other.v
        dx[P : P + 3] = self.p - other.p
        dx[F0 : F0 + 3 * N_FEET] = (self.feet - other.feet).reshape(-1)
        dx[BG : BG + 3] = self.bg - other.bg
        dx[BA : BA + 3] = self.ba - other.ba
        return dx


def propagate_mean(
    x: FilterState,
    gyro: np.ndarray,
    accel: np.ndarray,
    dt: float,
    out: FilterState | None = None,
    exp_w_dt: np.ndarray | None = None,
) -> FilterState:
    """Integrate the IMU over ``dt`` (s): the mean only (first order, zero-order hold on the measurements).

    Into ``out`` (may be ``x`` itself), else a copy of ``x``.
    """
    out = x.copy() if out is None else out
    w = gyro - x.bg
    a_world = x.R @ (accel - x.ba) + GRAVITY
    out.p = x.p + x.v * dt + 0.5 * a_world * dt * dt
    out.v = x.v + a_world * dt
    out.R = x.R @ (so3_exp(w * dt) if exp_w_dt is None else exp_w_dt)
    return out


def transition_matrix(
    x: FilterState,
    gyro: np.ndarray,
    accel: np.ndarray,
    dt: float,
    exp_w_dt: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Discrete error-state transition ``F`` (21 x 21) of :func:`propagate_mean` at ``x``.

    ``exp_w_dt``: ``so3_exp((gyro - bg) dt)`` if already computed; ``out``: a matrix from an earlier call to
    fill in (its constant entries are kept).
    """
    w = gyro - x.bg
    a = accel - x.ba
    f = _EYE_DIM.copy() if out is None else out  # only the blocks below change from tick to tick
    r_a = x.R @ skew(a)
    f[TH : TH + 3, TH : TH + 3] = (so3_exp(w * dt) if exp_w_dt is None else exp_w_dt).T  # Exp(-w dt)
    f[TH : TH + 3, BG : BG + 3] = -_I3 * dt
    f[V : V + 3, TH : TH + 3] = -dt * r_a
    f[V : V + 3, BA : BA + 3] = -dt * x.R
    f[P : P + 3, V : V + 3] = _I3 * dt
    f[P : P + 3, TH : TH + 3] = (-0.5 * dt * dt) * r_a
    f[P : P + 3, BA : BA + 3] = (-0.5 * dt * dt) * x.R
    return f


def kinematic_prediction(x: FilterState, foot: int) -> np.ndarray:
    """Predicted sole position of ``foot`` in the IMU frame, ``R^T (f - p)`` (m)."""
    return x.R.T @ (x.feet[foot] - x.p)


def kinematic_jacobian(x: FilterState, foot: int) -> np.ndarray:
    """Jacobian (3 x 21) of :func:`kinematic_prediction` with respect to the error state."""
    y = kinematic_prediction(x, foot)
    h = np.zeros((3, DIM))
    h[:, TH : TH + 3] = skew(y)
    h[:, P : P + 3] = -x.R.T
    h[:, F0 + 3 * foot : F0 + 3 * foot + 3] = x.R.T
    return h


class ContactEKF:
    """The filter: :meth:`propagate` with each IMU sample, :meth:`update` with each leg-kinematics sample."""

    def __init__(self, noise: EstimatorNoise | None = None, state: FilterState | None = None) -> None:
        self.noise = noise or EstimatorNoise()
        self.x = state or FilterState()
        self.contact = np.zeros(N_FEET, dtype=bool)
        self._innovation: tuple[list[int], np.ndarray] = ([], np.zeros(0))  # feet updated, residual
        self.last_a_world = np.zeros(
            3
        )  # acceleration of the IMU in the world at the last propagation (m/s^2)
        self._q_cache: dict[tuple[bool, bool, float], np.ndarray] = {}  # noise * dt, by contacts and dt
        self._ticks = 0
        self._f: np.ndarray | None = None  # transition matrix, reused
        self._f_dt = -1.0  # the time step its constant blocks were written for
        self._f_views: tuple[np.ndarray, np.ndarray] | None = None  # its blocks that change each tick
        self._f_coef = np.zeros((2, 1, 1))
        self._h_cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, Any, bool]] = {}  # by contacts

    def propagate(self, gyro: np.ndarray, accel: np.ndarray, dt: float) -> None:
        """IMU step: gyro (rad/s) and specific force (m/s^2) in the IMU frame, held over ``dt`` (s)."""
        n = self.noise
        x = self.x
        w = gyro - x.bg
        a = accel - x.ba
        exp_w_dt = so3_exp(w * dt)
        # the transition matrix (transition_matrix's blocks, written into one persistent matrix)
        if self._f is None:
            self._f = _EYE_DIM.copy()
        f = self._f
        if dt != self._f_dt:
            self._f_dt = dt
            f[TH : TH + 3, BG : BG + 3] = -_I3 * dt
            f[P : P + 3, V : V + 3] = _I3 * dt
        # blocks written in place: the velocity and position rows of a column block in one numpy call each
        # (views of rows V..P+3 as 2 stacked 3 x 3 blocks, times [-dt, -dt^2 / 2])
        if self._f_views is None or self._f_coef[0, 0, 0] != -dt:
            self._f_views = (
                f[V : P + 3, TH : TH + 3].reshape(2, 3, 3),
                f[V : P + 3, BA : BA + 3].reshape(2, 3, 3),
            )
            self._f_coef = np.array([-dt, -0.5 * dt * dt]).reshape(2, 1, 1)
        f[TH : TH + 3, TH : TH + 3] = exp_w_dt.T
        np.multiply(self._f_coef, x.R @ skew(a), out=self._f_views[0])
        np.multiply(self._f_coef, x.R, out=self._f_views[1])
        key = (bool(self.contact[0]), bool(self.contact[1]), dt)
        q = self._q_cache.get(key)
        if q is None:  # process noise densities, by contact state
            q = np.zeros(DIM)
            q[TH : TH + 3] = n.gyro**2
            q[V : V + 3] = n.accel**2
            for i in range(N_FEET):
                walk = n.foot_contact if key[i] else n.foot_swing
                q[F0 + 3 * i : F0 + 3 * i + 3] = walk**2
            q[BG : BG + 3] = n.gyro_bias_walk**2
            q[BA : BA + 3] = n.accel_bias_walk**2
            q *= dt  # discrete: density^2 dt
            if len(self._q_cache) > 64:  # time steps vary (stamps): keep the cache small
                self._q_cache.clear()
            self._q_cache[key] = q
        # mean (propagate_mean, inline): position, velocity, then orientation
        a_world = self.last_a_world = x.R @ a + GRAVITY
        x.p = x.p + x.v * dt + (0.5 * dt * dt) * a_world
        x.v = x.v + a_world * dt
        x.R = x.R @ exp_w_dt
        # the accelerometer noise enters rotated into the world frame: R (s^2 I) R^T = s^2 I, still diagonal
        p = f @ x.P @ f.T  # a new C-contiguous array: ravel() is a view, its diagonal every DIM + 1
        diag = p.ravel()[:: DIM + 1]
        diag += q
        self._ticks += 1
        if self._ticks % 16 == 0:  # rounding makes P drift from symmetric, slowly: symmetrise now and then
            p += p.T
            p *= 0.5
        x.P = p

    def set_contact(self, contact: np.ndarray, foot_body: list[np.ndarray]) -> None:
        """New contact flags; a foot touching down gets its position reset from kinematics (``foot_body``)."""
        contact = np.asarray(contact, dtype=bool)
        for i in range(N_FEET):
            if contact[i] and not self.contact[i]:
                s = 3 * i + F0
                self.x.feet[i] = self.x.p + self.x.R @ foot_body[i]
                # decorrelate and give it the uncertainty of the base position plus the kinematics
                self.x.P[s : s + 3, :] = 0.0
                self.x.P[:, s : s + 3] = 0.0
                self.x.P[s : s + 3, s : s + 3] = self.x.P[P : P + 3, P : P + 3] + np.eye(3) * (
                    self.noise.kinematics**2
                )
        self.contact = contact

    @property
    def last_innovation(self) -> np.ndarray:
        """Kinematic innovation of the last update (m): 3 per foot, zeros for feet not updated."""
        rows, r = self._innovation
        out = np.zeros(3 * N_FEET)
        for j, i in enumerate(rows):
            out[3 * i : 3 * i + 3] = r[3 * j : 3 * j + 3]
        return out

    def update(self, foot_body: list[np.ndarray]) -> None:
        """Kinematic update with the measured sole positions in the IMU frame (m) of the feet in contact.

        The innovation is then :attr:`last_innovation`.
        """
        rows = [i for i in range(N_FEET) if self.contact[i]]
        if not rows:
            self._innovation = ([], np.zeros(0))
            return
        x = self.x
        key = tuple(rows)
        cached = self._h_cache.get(key)
        if cached is None:  # measurement structure of this contact set: constant entries, noise
            flat = self.noise.ground_height is not None  # flat ground: contact feet at z = 0
            m = 3 * len(rows) + (len(rows) if flat else 0)
            h0 = np.zeros((m, DIM))
            variances = np.full(m, self.noise.kinematics**2)
            if flat:
                for j, i in enumerate(rows):
                    h0[3 * len(rows) + j, F0 + 3 * i + 2] = 1.0
                    variances[3 * len(rows) + j] = self.noise.ground_height**2  # type: ignore[operator]
            cached = self._h_cache[key] = (h0, variances, as_slice(np.array(rows)), flat)
        h0, variances, feet_rows, flat = cached
        h = h0.copy()
        r = np.empty(h.shape[0])
        rt = x.R.T
        neg_rt = -rt
        ys = (x.feet - x.p) @ x.R  # predicted soles in the IMU frame, R^T (f_i - p), one row per foot
        for j, i in enumerate(rows):  # d y_i = [y_i]x dtheta - R^T dp + R^T df_i (module docstring)
            y = ys[i]
            s = 3 * j
            h[s : s + 3, TH : TH + 3] = skew(y)
            h[s : s + 3, P : P + 3] = neg_rt
            h[s : s + 3, F0 + 3 * i : F0 + 3 * i + 3] = rt
            np.subtract(foot_body[i], y, out=r[s : s + 3])
        if flat:
            np.negative(x.feet[feet_rows, 2], out=r[3 * len(rows) :])
        hp = h @ x.P
        s_mat = hp @ h.T  # a new C-contiguous array: its diagonal is every (m + 1)-th element of ravel()
        s_diag = s_mat.ravel()[:: s_mat.shape[0] + 1]
        s_diag += variances
        k = solve_spd(s_mat, hp).T
        dx = k @ r
        p_new = x.P - k @ hp
        x.apply(dx)
        x.P = p_new  # symmetrised at the next propagation
        self._innovation = (rows, r)
