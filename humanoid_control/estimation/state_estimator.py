"""Contact-aided extended Kalman filter for the floating base: IMU propagation, leg-kinematics updates.

The pure core (numpy, pinocchio; no rclpy): :class:`ContactEKF` (the filter), :class:`LegKinematics` (sole
kinematics and foot forces from joint torques), :class:`ContactDetector` and :class:`StateEstimator` (one
call per tick). ``state_estimator_node`` wraps it in ROS 2; ``estimator_eval.replay`` runs it offline.

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

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.linalg import lapack

GRAVITY = np.array([0.0, 0.0, -9.81])
N_FEET = 2
DIM = 21
TH, V, P, F0, BG, BA = 0, 3, 6, 9, 15, 18
_EYE_DIM = np.eye(DIM)


_I3 = np.eye(3)


def skew(w: np.ndarray) -> np.ndarray:
    """Cross-product matrix: ``skew(a) @ b == a x b``."""
    x, y, z = float(w[0]), float(w[1]), float(w[2])
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a x b`` of two 3-vectors (numpy's general ``cross`` costs ~10x more per call)."""
    a0, a1, a2 = float(a[0]), float(a[1]), float(a[2])
    b0, b1, b2 = float(b[0]), float(b[1]), float(b[2])
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


def so3_exp(w: np.ndarray) -> np.ndarray:
    """Rotation matrix of the rotation vector ``w`` (rad): Rodrigues, in floats (one array made)."""
    x, y, z = float(w[0]), float(w[1]), float(w[2])
    t2 = x * x + y * y + z * z
    if t2 < 1e-20:
        return np.array([[1.0, -z, y], [z, 1.0, -x], [-y, x, 1.0]])
    t = math.sqrt(t2)
    a = math.sin(t) / t
    b = (1.0 - math.cos(t)) / t2
    bxy, bxz, byz = b * x * y, b * x * z, b * y * z
    return np.array(
        [
            [1.0 - b * (y * y + z * z), bxy - a * z, bxz + a * y],
            [bxy + a * z, 1.0 - b * (x * x + z * z), byz - a * x],
            [bxz - a * y, byz + a * x, 1.0 - b * (x * x + y * y)],
        ]
    )


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^-1 b`` for a small square ``a``; least squares if ``a`` is singular.

    LAPACK ``gesv`` directly: a few us, where ``numpy.linalg.solve`` costs 10 or more on these sizes.
    """
    _, _, x, info = lapack.dgesv(a, b)
    if info != 0:
        return np.linalg.lstsq(a, b, rcond=None)[0]
    return x


def solve_spd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^-1 b`` for a small symmetric positive definite ``a`` (LAPACK ``posv``); else as :func:`solve`."""
    _, x, info = lapack.dposv(a, b)
    if info != 0:
        return solve(a, b)
    return x


def so3_log(r: np.ndarray) -> np.ndarray:
    """Rotation vector (rad) of a rotation matrix."""
    cos = np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.arccos(cos))
    vee = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if angle < 1e-8:
        return 0.5 * vee
    return angle / (2.0 * np.sin(angle)) * vee


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
            cached = self._h_cache[key] = (h0, variances, _as_slice(np.array(rows)), flat)
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


def _as_slice(idx: np.ndarray) -> Any:
    """A slice for a contiguous increasing index array (a view, no copy when indexing), else the array."""
    idx = np.asarray(idx)
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx


class LegKinematics:
    """Forward kinematics and static foot-force estimation on pinocchio (robot configuration order).

    All positions are of the sole frames, expressed in the IMU frame; forces are ground reaction forces on the
    feet in the world-aligned frame (N), from the joint torques of each leg: at quasi-static balance
    ``tau_leg = g_leg(q) - J_leg^T F``, so ``F = J_leg^-T (g_leg - tau_leg)``.

    The pinocchio base stays at the origin with identity orientation; the base orientation enters through the
    gravity vector, expressed in the base frame (``g_base = R^T g``), so kinematics are base-relative and the
    forces are rotated to the world-aligned frame at the end.
    """

    def __init__(self, config: object) -> None:
        import pinocchio as pin

        from humanoid_control.model.robot_config import ConfigError
        from humanoid_control.model.robot_model import load_pinocchio_model

        self.pin = pin
        self.config = config
        self.pm = load_pinocchio_model(config)  # type: ignore[arg-type]
        full = self.pm.model
        self.mass = float(pin.computeTotalMass(full))
        self.sides = list(self.pm.sole_frame_ids)
        # Only the joints between the base and the soles / the IMU matter here: the sole poses, their
        # Jacobians and the leg joints' gravity torques (each leg joint carries the bodies below it only).
        # The other joints (arms, waist, ...) are locked, their bodies merged into their parents: the
        # kinematic tree pinocchio walks each tick is about half as long for the G1.
        keep: set[int] = set()
        for fid in [*self.pm.sole_frame_ids.values(), self.pm.imu_frame_id]:
            joint = full.frames[fid].parentJoint
            while joint > 0:
                keep.add(joint)
                joint = full.parents[joint]
        locked = [j for j in range(2, full.njoints) if j not in keep]
        model = pin.buildReducedModel(full, locked, pin.neutral(full)) if locked else full
        self.model = model
        self.data = self.model.createData()
        sole_ids = {
            side: model.getFrameId(full.frames[fid].name) for side, fid in self.pm.sole_frame_ids.items()
        }
        self._imu_frame_id = model.getFrameId(full.frames[self.pm.imu_frame_id].name)
        # the kept joints: their places in the configuration order of the inputs, and in the model's q / v
        names = list(config.joint_names)  # type: ignore[attr-defined]
        inputs, q_idx, v_idx = [], [], []
        for k, name in enumerate(names):
            if model.existJointName(name):
                jid = model.getJointId(name)
                inputs.append(k)
                q_idx.append(model.joints[jid].idx_q)
                v_idx.append(model.joints[jid].idx_v)
        self._inputs = _as_slice(np.array(inputs))
        # leg joints: the joints on the path from the base to each sole (indices into v)
        self.leg_v: dict[str, np.ndarray] = {}
        for side, fid in sole_ids.items():
            joint = model.frames[fid].parentJoint
            idx = []
            while joint > 1:  # stop at the free flyer
                idx.append(model.joints[joint].idx_v)
                joint = model.parents[joint]
            self.leg_v[side] = np.array(sorted(idx))
        self.q = pin.neutral(self.model)
        self.v = np.zeros(self.model.nv)
        self.rotation = _I3  # base orientation in the world (set_state)
        self.model.gravity = pin.Motion.Zero()  # gravity enters as a base acceleration (foot_forces)
        self._acc = np.zeros(self.model.nv)
        self._zero_v = np.zeros(self.model.nv)
        self._tau = np.zeros(self.model.nv)
        # the sole origin and its polygon's corners, [x; y] columns in the sole frame (m): a rolling foot
        # keeps one of them still
        self._corners_xy = [
            np.hstack([np.zeros((2, 1)), np.array(config.feet[side].polygon, dtype=float).T])  # type: ignore[attr-defined]
            for side in self.pm.sole_frame_ids
        ]
        self._jac: list[np.ndarray] = []
        self.base_frame_id = self.model.getFrameId(config.base_body)  # type: ignore[attr-defined]
        self._leg_cols = [_as_slice(self.leg_v[side]) for side in self.pm.sole_frame_ids]
        # foot_forces' block-diagonal system: the rows / columns of each leg, and the legs' joints in v
        sizes = [self.leg_v[side].size for side in self.pm.sole_frame_ids]
        if any(size != 6 for size in sizes):
            raise ConfigError(
                f"state estimator: each leg needs 6 joints from the base to its sole, got {sizes}"
            )
        self._leg_rows = [slice(6 * k, 6 * k + 6) for k in range(len(sizes))]
        self._legs_v = _as_slice(np.concatenate([self.leg_v[side] for side in self.pm.sole_frame_ids]))
        self._legs_jt = np.zeros((6 * len(sizes), 6 * len(sizes)))
        self._sole_ids = list(sole_ids.values())
        self._q_idx, self._v_idx = _as_slice(np.array(q_idx)), _as_slice(np.array(v_idx))
        # the IMU is usually on the base body: then the base pose in the IMU frame is a constant
        imu_joint = self.model.frames[self._imu_frame_id].parentJoint
        self._base_fixed_to_imu = imu_joint == self.model.frames[self.base_frame_id].parentJoint
        self._base_in_imu: tuple[np.ndarray, np.ndarray] | None = None
        self.base_aligned_with_imu = False  # base axes = IMU axes (set by base_in_imu)
        self._imu: tuple[np.ndarray, np.ndarray] | None = None  # (R_iw, p_wi) of the IMU in the base frame
        self._sole_h: list[np.ndarray] = []
        self._feet: list[np.ndarray] | None = None  # feet_in_imu of the current state

    def set_state(
        self, joint_q: np.ndarray, base_rotation: np.ndarray | None = None, joint_dq: np.ndarray | None = None
    ) -> None:
        """Joint positions (configuration order, rad), the base orientation (force estimation) and rates."""
        pin = self.pin
        self.q[self._q_idx] = joint_q[self._inputs]  # base: origin, identity orientation (class docstring)
        self.rotation = _I3 if base_rotation is None else base_rotation
        if joint_dq is not None:
            self.v[self._v_idx] = joint_dq[self._inputs]
        else:
            self.v[:] = 0.0
        self._feet = None
        model, data = self.model, self.data
        pin.computeJointJacobians(model, data, self.q)  # also the joint placements
        frame = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        self._jac = [pin.getFrameJacobian(model, data, fid, frame) for fid in self._sole_ids]
        # the frames used, only (the model has tens): base frame, 4 x 4
        self._sole_h = [pin.updateFramePlacement(model, data, fid).homogeneous for fid in self._sole_ids]
        if self._imu is None or not self._base_fixed_to_imu:  # constant when the IMU is on the base body
            imu = pin.updateFramePlacement(model, data, self._imu_frame_id).homogeneous
            self._imu = (imu[:3, :3].T.copy(), imu[:3, 3].copy())

    def feet_in_imu(self) -> list[np.ndarray]:
        """Sole origins in the IMU frame (m), in :attr:`sides` order (after :meth:`set_state`)."""
        if self._feet is None:  # once per set_state
            r_iw, p_wi = self._imu  # type: ignore[misc]
            self._feet = [r_iw @ (h[:3, 3] - p_wi) for h in self._sole_h]
        return self._feet

    def sole_motion_in_imu(self, foot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Sole ``foot`` relative to the IMU frame, in the IMU frame: origin position (m), rotation (sole ->
        IMU), linear velocity of the origin (m/s) and angular velocity (rad/s), from the joint rates given to
        :meth:`set_state`."""
        r_iw, p_wi = self._imu
        h = self._sole_h[foot]
        twist = (self._jac[foot] @ self.v).reshape(2, 3) @ r_iw.T  # rows: linear, angular (IMU frame)
        return r_iw @ (h[:3, 3] - p_wi), r_iw @ h[:3, :3], twist[0], twist[1]

    def sole_speeds(
        self,
        foot: int,
        v_imu: np.ndarray,
        w_imu: np.ndarray,
        r_wi: np.ndarray,
        below: float | None = None,
    ) -> np.ndarray:
        """Horizontal speed in the world (m/s) of the sole origin and of each polygon corner of ``foot``.

        Given the IMU frame's velocity in the world ``v_imu`` (m/s), its angular velocity ``w_imu`` (rad/s,
        IMU frame) and orientation ``r_wi``: ``v_k = v_imu + R (w x p + v_sole + W x R_is c_k)``,
        ``W = w + w_sole``. With ``below``: just the origin's, if that is below ``below`` (the minimum is).
        """
        r_iw, _ = self._imu  # type: ignore[misc]
        h = self._sole_h[foot]
        p = self.feet_in_imu()[foot]
        jv = self._jac[foot] @ self.v  # sole twist relative to the base, base axes: linear, angular
        v_sole = r_iw @ jv[:3]
        v0 = v_imu + r_wi @ (cross(w_imu, p) + v_sole)
        vx, vy = float(v0[0]), float(v0[1])
        if below is not None and vx * vx + vy * vy < below * below:
            return np.array([math.hypot(vx, vy)])  # the origin is slower than ``below``: enough
        w_sole = r_iw @ jv[3:]
        r_is = r_iw @ h[:3, :3]
        a = (r_wi @ skew(w_imu + w_sole) @ r_is)[:2, :2]  # corners lie in the sole plane (z = 0)
        v = v0[:2, None] + a @ self._corners_xy[foot]  # 2 x (1 + corners)
        return np.sqrt((v * v).sum(axis=0))

    def slowest_sole_speed(
        self, foot: int, v_imu: np.ndarray, w_imu: np.ndarray, r_wi: np.ndarray, below: float
    ) -> float:
        """The smallest of :meth:`sole_speeds` (m/s), as a float: the origin's alone if under ``below``."""
        speeds = self.sole_speeds(foot, v_imu, w_imu, r_wi, below)
        return float(speeds[0]) if speeds.size == 1 else float(speeds.min())

    def base_in_imu(self) -> tuple[np.ndarray, np.ndarray]:
        """(rotation, translation) of the base frame in the IMU frame."""
        if self._base_in_imu is not None:
            return self._base_in_imu
        imu = self.pin.updateFramePlacement(self.model, self.data, self._imu_frame_id)
        base = self.pin.updateFramePlacement(self.model, self.data, self.base_frame_id)
        rel = imu.actInv(base)
        out = (rel.rotation.copy(), rel.translation.copy())
        self.base_aligned_with_imu = bool(np.allclose(out[0], _I3, atol=1e-12))
        if self._base_fixed_to_imu:
            self._base_in_imu = out
        return out

    def foot_forces(self, joint_tau: np.ndarray) -> list[np.ndarray]:
        """Ground reaction force on each foot, world-aligned axes (N), from measured joint torques (N m)."""
        # gravity torques as the torques that accelerate the base upwards at g (model gravity is zero): one
        # RNEA with the base acceleration -R^T g (base frame), nothing else moving
        self._acc[:3] = -(self.rotation.T @ GRAVITY)
        g = self.pin.rnea(self.model, self.data, self.q, self._zero_v, self._acc)
        self._tau[self._v_idx] = joint_tau[self._inputs]
        # both legs as one block-diagonal system [J_l^T 0; 0 J_r^T] [w_l; w_r] = g_legs - tau_legs (one
        # solve; least squares if a leg is singular, knee straight, which keeps the blocks apart)
        a = self._legs_jt
        for k, (jac, cols) in enumerate(zip(self._jac, self._leg_cols, strict=True)):
            a[self._leg_rows[k], self._leg_rows[k]] = jac[:, cols].T
        wrenches = solve(a, g[self._legs_v] - self._tau[self._legs_v])
        # the forces (the first 3 of each wrench), base frame -> world-aligned: rows F_i^T R^T
        forces = wrenches.reshape(N_FEET, -1)[:, :3] @ self.rotation.T
        return list(forces)


class ContactDetector:
    """Per-foot contact from the estimated normal force, with hysteresis (fractions of body weight)."""

    def __init__(self, weight_n: float, on_fraction: float = 0.25, off_fraction: float = 0.15) -> None:
        self.on = on_fraction * weight_n
        self.off = off_fraction * weight_n
        self.state = np.zeros(N_FEET, dtype=bool)

    def update(self, normal_forces: np.ndarray | list[float]) -> np.ndarray:
        """New contact flags from the feet's normal forces (N)."""
        for i, f in enumerate(normal_forces):
            self.state[i] = f > self.off if self.state[i] else f > self.on
        return self.state.copy()


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
