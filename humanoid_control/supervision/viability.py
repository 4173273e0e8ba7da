"""The viability monitor: is the robot, under a learned policy, still in the states that policy can handle?

Every tick it reads the state estimator's base state (pose in the odom frame, twist in the base frame, the
feet's contacts) and the joint state, and measures (odom frame, m, s, rad):

- the capture point ``cp = c + cdot / omega`` of the CoM ``c`` (``omega = sqrt(g / (c_z - ground))``, the
  ground the height of the lowest sole in contact) and how far it lies outside the region the next step can
  reach (in single support, the stance sole grown by ``step_reach``; in double support or with no contact,
  the convex hull of both soles grown by it: either foot may step), as in IHMC's walking controller (a fall
  is declared when the capture point is a few cm outside the support polygon including the next footstep);
- its speed, the base tilt (angle between the base's z axis and the vertical) and tilt rate (the base's
  angular velocity about horizontal axes);
- contact consistency: how long no foot has been in contact;
- the policy's action saturation: the share of joints whose target is at a joint limit.

A tick is **not viable** when any value crosses its trigger threshold (:class:`ViabilitySettings`); the
reason names the first that did. It is **viable with margin** when every value is inside its (tighter)
hand-back threshold and both feet are down: the supervisor hands the policy back only after that has held
for a set time (hysteresis: the trigger and hand-back thresholds differ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pinocchio as pin

from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import PinocchioRobotModel, load_pinocchio_model
from humanoid_control.walking.geometry import outside_vertices
from humanoid_control.wbc.balance import _hull

SIDES = ("left", "right")


@dataclass(frozen=True)
class Threshold:
    """A threshold's range (inclusive) and meaning: the supervisor refuses a value outside it."""

    low: float
    high: float
    description: str


#: every threshold of :class:`ViabilitySettings`: its range and meaning (the supervised controller declares
#: each as a parameter with this range)
THRESHOLDS: dict[str, Threshold] = {
    "cp_max_m": Threshold(0.0, 1.0, "trigger: capture point this far outside the reachable support (m)"),
    "step_reach_m": Threshold(0.0, 1.0, "how far the next step reaches from the soles in contact (m)"),
    "tilt_max_rad": Threshold(0.05, 1.2, "trigger: base tilt from the vertical (rad)"),
    "tilt_rate_max": Threshold(0.2, 20.0, "trigger: base angular speed about horizontal axes (rad/s)"),
    "flight_max_s": Threshold(0.01, 1.0, "trigger: no foot in contact for this long (s)"),
    "saturation_max": Threshold(0.05, 1.0, "trigger: share of joints whose target is at a limit"),
    "saturation_s": Threshold(0.0, 2.0, "... for this long (s)"),
    "handback_cp_m": Threshold(-0.2, 0.5, "hand back: capture point at most this far outside the feet (m)"),
    "handback_tilt_rad": Threshold(0.01, 1.0, "hand back: tilt below (rad)"),
    "handback_tilt_rate": Threshold(0.05, 10.0, "hand back: tilt rate below (rad/s)"),
    "handback_speed": Threshold(0.01, 2.0, "hand back: CoM speed below (m/s)"),
}


@dataclass(frozen=True)
class ViabilitySettings:
    """Thresholds of the monitor (module docstring); ranges in :data:`THRESHOLDS`.

    Attributes:
        cp_max_m: the capture point this far (m) outside the reachable support triggers.
        step_reach_m: the reachable support is the soles in contact (both, with none) grown by this (m).
        tilt_max_rad: base tilt (rad) that triggers. tilt_rate_max: tilt rate (rad/s) that triggers.
        flight_max_s: no foot in contact this long (s) triggers.
        saturation_max, saturation_s: this share of joints at a limit for this long (s) triggers.
        handback_cp_m, handback_tilt_rad, handback_tilt_rate, handback_speed: viable with margin below these
            (capture point outside both feet's support, m; rad; rad/s; CoM speed m/s), both feet down.
    """

    cp_max_m: float = 0.8
    step_reach_m: float = 0.45
    tilt_max_rad: float = 0.45
    tilt_rate_max: float = 5.0
    flight_max_s: float = 0.15
    saturation_max: float = 0.5
    saturation_s: float = 0.2
    handback_cp_m: float = -0.01
    handback_tilt_rad: float = 0.12
    handback_tilt_rate: float = 0.3
    handback_speed: float = 0.1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            spec = THRESHOLDS[f.name]
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise ValueError(f"{f.name}: {value!r} is not a finite number")
            if not spec.low <= value <= spec.high:
                raise ValueError(f"{f.name}: {value!r} is outside [{spec.low:g}, {spec.high:g}]")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ViabilitySettings:
        """The settings from a parameter mapping (the keys of :data:`THRESHOLDS`; others ignored)."""
        return cls(**{k: float(params[k]) for k in THRESHOLDS if k in params})


@dataclass
class Viability:
    """One tick's verdict and the values behind it (odom frame, m, m/s, rad, rad/s, s).

    Attributes:
        viable: no trigger crossed. margin: viable with margin (hand-back thresholds), both feet down.
        reason: the trigger that was crossed (``cp``, ``tilt``, ``tilt_rate``, ``flight``, ``saturation``),
            or ''. values: the measured values, by name.
    """

    viable: bool
    margin: bool
    reason: str
    values: dict[str, float]


class SupportGeometry:
    """Capture point, soles and the support polygon from an estimated state, by pinocchio's kinematics."""

    def __init__(self, robot: RobotConfig, pmodel: PinocchioRobotModel | None = None) -> None:
        self.pmodel = pmodel or load_pinocchio_model(robot)
        self.model = self.pmodel.model
        self.data = self.model.createData()
        self.gravity = float(np.linalg.norm(self.model.gravity.linear))
        self.soles = {side: np.asarray(robot.feet[side].polygon, dtype=float) for side in SIDES}
        self._q = pin.neutral(self.model)
        self._v = np.zeros(self.model.nv)

    def measure(
        self,
        position: np.ndarray,
        rotation: np.ndarray,
        linear_velocity: np.ndarray,
        angular_velocity: np.ndarray,
        q_joints: np.ndarray,
        dq_joints: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """CoM (3,) and its velocity (3,) in the odom frame, and per side the sole's corners (k, 2) and
        height (the last corner row: ``[z, 0]``), from the base pose (odom frame; ``rotation`` base ->
        odom), the base twist (base frame) and the joints (configuration order)."""
        pm = self.pmodel
        q, v = self._q, self._v
        q[0:3] = position
        q[3:7] = pin.Quaternion(np.asarray(rotation, dtype=float)).coeffs()
        q[pm.joint_q_idx] = q_joints
        v[0:3] = linear_velocity
        v[3:6] = angular_velocity
        v[pm.joint_v_idx] = dq_joints
        d = self.data
        pin.centerOfMass(self.model, d, q, v)
        pin.updateFramePlacements(self.model, d)
        feet = {}
        for side in SIDES:
            m = d.oMf[pm.sole_frame_ids[side]]
            r, t = m.rotation, m.translation
            corners = self.soles[side] @ r[:2, :2].T + t[:2]
            feet[side] = np.vstack([corners, [t[2], 0.0]])
        return np.array(d.com[0]), np.array(d.vcom[0]), feet


class ViabilityMonitor:
    """The monitor (module docstring). Call :meth:`check` once per tick."""

    def __init__(self, robot: RobotConfig, settings: ViabilitySettings | None = None) -> None:
        self.settings = settings or ViabilitySettings()
        self.geometry = SupportGeometry(robot)
        self._airborne_since: float | None = None
        self._saturated_since: float | None = None

    def reset(self) -> None:
        """Forget the timers (flight, saturation)."""
        self._airborne_since = None
        self._saturated_since = None

    def check(
        self,
        t: float,
        estimate: Any,
        q: np.ndarray,
        dq: np.ndarray,
        saturation: float = 0.0,
        cmd_speed: float = 0.0,
    ) -> Viability:
        """The verdict at ``t`` (s) from the base estimate (``BaseEstimate``: position, rotation base ->
        odom, twist in the base frame, ``contact`` per foot in ``left, right`` order), the joint state (rad,
        rad/s; configuration order) and the policy's action saturation (share of joints at a limit).
        ``cmd_speed``: the commanded planar speed (m/s); walking, the margin's CoM speed is the difference
        to it and the capture point may lead the feet by ``cmd_speed / omega``."""
        s = self.settings
        rot = np.asarray(estimate.rotation, dtype=float)
        com, vcom, feet = self.geometry.measure(
            estimate.position, rot, estimate.linear_velocity, estimate.angular_velocity, q, dq
        )
        contact = {side: bool(c) for side, c in zip(SIDES, estimate.contact, strict=False)}
        down = [side for side in SIDES if contact.get(side, False)]
        z = {side: float(feet[side][-1, 0]) for side in SIDES}
        ground = min(z[side] for side in (down or SIDES))
        height = max(float(com[2]) - ground, 0.05)
        omega = math.sqrt(self.geometry.gravity / height)
        cp = com[:2] + vcom[:2] / omega
        cpx, cpy = float(cp[0]), float(cp[1])
        corners = {side: feet[side][:-1].tolist() for side in SIDES}
        cp_both = outside_vertices(cpx, cpy, _hull(corners["left"] + corners["right"]))
        if len(down) == 1:
            cp_out = outside_vertices(cpx, cpy, _hull(corners[down[0]])) - s.step_reach_m
        else:  # double support, or no contact (a flight phase, a lost contact estimate): either foot may step
            cp_out = cp_both - s.step_reach_m
        tilt = math.acos(min(1.0, max(-1.0, float(rot[2, 2]))))
        w_world = rot @ np.asarray(estimate.angular_velocity, dtype=float)
        tilt_rate = float(math.hypot(w_world[0], w_world[1]))
        speed = float(math.hypot(vcom[0], vcom[1]))
        if down:
            self._airborne_since = None
            flight = 0.0
        else:
            if self._airborne_since is None:
                self._airborne_since = t
            flight = t - self._airborne_since
        if saturation >= s.saturation_max:
            if self._saturated_since is None:
                self._saturated_since = t
            saturated_for = t - self._saturated_since
        else:
            self._saturated_since = None
            saturated_for = 0.0
        values = {
            "cp_x": float(cp[0]),
            "cp_y": float(cp[1]),
            "cp_outside_m": float(cp_out),
            "cp_outside_feet_m": float(cp_both),
            "com_speed": speed,
            "com_height_m": height,
            "tilt_rad": tilt,
            "tilt_rate": tilt_rate,
            "flight_s": flight,
            "saturation": float(saturation),
            "contacts": float(len(down)),
        }
        reason = ""
        if cp_out > s.cp_max_m:
            reason = "cp"
        elif tilt > s.tilt_max_rad:
            reason = "tilt"
        elif tilt_rate > s.tilt_rate_max:
            reason = "tilt_rate"
        elif flight > s.flight_max_s:
            reason = "flight"
        elif saturated_for > s.saturation_s or (s.saturation_s == 0.0 and saturation >= s.saturation_max):
            reason = "saturation"
        margin = (
            not reason
            and len(down) == 2
            and cp_both <= s.handback_cp_m + cmd_speed / omega
            and tilt <= s.handback_tilt_rad
            and tilt_rate <= s.handback_tilt_rate
            and abs(speed - cmd_speed) <= s.handback_speed
        )
        return Viability(not reason, margin, reason, values)
