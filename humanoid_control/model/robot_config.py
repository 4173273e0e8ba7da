"""Robot configuration: everything robot-specific, loaded from ``config/robots/<name>.yaml``.

The configuration is a tree of frozen dataclasses. Units: rad, rad/s, N m, m, kg, s. Frames follow REP-103
(x forward, y left, z up) and REP-120 (sole frames).

Model files are never given as machine paths: each is a list of candidate *sources*
(:mod:`humanoid_control.model.config_sources`, where the configuration file itself is found too).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from humanoid_control.model.config_sources import (
    ConfigError,
    find_robot_config,
    resolve_sources,
)

__all__ = [
    "ConfigError",
    "RobotConfig",
    "expand_patterns",
    "find_robot_config",
    "load_robot_config",
    "resolve_sources",
]


@dataclass(frozen=True)
class JointSpec:
    """One actuated joint: standing pose and the limits the driver enforces.

    Attributes:
        name: joint name, identical in the MJCF, the URDF and on ``/joint_states``.
        default: standing-pose angle (rad).
        lower, upper: position limits (rad).
        velocity: velocity limit (rad/s), symmetric.
        effort: torque limit (N m), symmetric.
    """

    name: str
    default: float
    lower: float
    upper: float
    velocity: float
    effort: float


@dataclass(frozen=True)
class FootSpec:
    """A foot: the body that touches the ground and its sole frame.

    Attributes:
        body: MJCF body / URDF link of the foot.
        sole_frame: name of the sole frame (added as a MuJoCo site and a pinocchio frame).
        sole_offset: sole frame origin in the foot body frame (m); axes are the body's.
        polygon: sole contact area, ``(N, 2)`` corners ``[x, y]`` in the sole frame (m), counter-clockwise.
    """

    body: str
    sole_frame: str
    sole_offset: tuple[float, float, float]
    polygon: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class ImuSpec:
    """IMU mounting: MJCF site (and URDF link) and the MuJoCo sensors that read it."""

    site: str
    gyro_sensor: str
    accel_sensor: str


@dataclass(frozen=True)
class GainProfile:
    """Joint gains for ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff``.

    Attributes:
        name: profile name (``stand``, ``low``, a policy's name, ...).
        kp: stiffness per joint in configuration order (N m / rad).
        kd: damping per joint in configuration order (N m s / rad).
    """

    name: str
    kp: np.ndarray
    kd: np.ndarray


@dataclass(frozen=True)
class SimulationSpec:
    """Simulator settings: physics ``timestep`` (s), the base height counted as a fall (m), and the MuJoCo
    ``noslip_iterations`` (0: MuJoCo's default soft contacts, which let a standing robot creep: the G1 turned
    in place at about 1 deg/s under a holosoma policy's standing torques; see docs/estimator.md)."""

    timestep: float = 0.002
    fall_height: float = 0.45
    noslip_iterations: int = 0


@dataclass(frozen=True)
class WbcSpec:
    """Robot facts the whole-body controller needs beyond the feet and joint limits.

    Attributes:
        torso_frame: body / frame whose orientation the torso task regulates (the base is always regulated);
            empty string: no torso task.
        friction: Coulomb friction coefficient the controller assumes between the soles and the ground
            (dimensionless, inner pyramid); keep it below the real one.
        contact_points: where point contact forces act: ``polygon`` uses the corners of each sole polygon.
    """

    torso_frame: str = ""
    friction: float = 0.5
    contact_points: str = "polygon"


@dataclass(frozen=True)
class WalkingSpec:
    """Robot facts of model-based walking (:mod:`humanoid_control.walking`). Units: m, s, rad, m/s, rad/s.

    Step limits are on the swing sole origin expressed in the stance sole frame (x forward, y towards the
    swing side, yaw about z); widths are lateral distances between the two sole origins.

    Attributes:
        com_height: LIPM height of the CoM above the soles while walking (m).
        foot_spacing: nominal lateral distance between the sole origins when standing and walking (m).
        single_support, double_support: durations of one swing and of one weight transfer (s).
        lateral_single_support: swing duration at the full lateral command ``max_lateral`` (s); between
            zero and full, the swing's duration is interpolated linearly in ``|vy|`` (a shorter step period
            lets the sideways steps, which alternate between a narrow and a wide stance, fit within the
            width limits).
        start_double_support: weight transfer before the first step (CoM to the first stance foot) (s).
        swing_height: highest lift of the sole above the line from lift-off to touchdown (m).
        step_forward, step_backward: most forward / backward reach of a step (m, both > 0).
        step_width_min, step_width_max: narrowest / widest stance (m); the minimum keeps the feet uncrossed.
        step_turn: most relative yaw between the feet after a step (rad).
        foot_clearance: smallest gap between the two sole polygons (m), checked on every step.
        max_forward, max_backward, max_lateral, max_turn: command limits (m/s, m/s, m/s, rad/s); commands
            beyond them are clipped.
        zmp_margin: ZMP kept this far inside the support polygon (m).
        controller: the walking controller's tuning for this robot (the ``walking.controller`` table):
            ``(name, value)`` pairs that replace defaults of
            :class:`~humanoid_control.walking.controller_types.WalkingSettings` (numbers or lists of
            numbers, in its units); empty: its defaults.
    """

    com_height: float = 0.66
    foot_spacing: float = 0.24
    single_support: float = 0.4
    lateral_single_support: float = 0.4
    double_support: float = 0.1
    start_double_support: float = 0.4
    swing_height: float = 0.06
    step_forward: float = 0.3
    step_backward: float = 0.15
    step_width_min: float = 0.18
    step_width_max: float = 0.4
    step_turn: float = 0.35
    foot_clearance: float = 0.02
    max_forward: float = 0.6
    max_backward: float = 0.3
    max_lateral: float = 0.15
    max_turn: float = 0.6
    zmp_margin: float = 0.015
    controller: tuple[tuple[str, Any], ...] = ()

    def validate(self) -> list[str]:
        """Inconsistencies, one message each (empty when the values are usable)."""
        out = []
        for name, value in vars(self).items():
            if name == "controller":
                continue
            if not (isinstance(value, float) and math.isfinite(value) and value > 0.0):
                out.append(f"{name} must be a finite number > 0: {value!r}")
        if out:
            return out
        if not self.step_width_min < self.foot_spacing < self.step_width_max:
            out.append("need step_width_min < foot_spacing < step_width_max")
        period = self.single_support + self.double_support
        if self.max_forward * period > self.step_forward:
            out.append("max_forward x step period exceeds step_forward")
        if self.max_backward * period > self.step_backward:
            out.append("max_backward x step period exceeds step_backward")
        if self.lateral_single_support > self.single_support:
            out.append("lateral_single_support must not exceed single_support")
        lateral_period = self.lateral_single_support + self.double_support
        narrow, wide = self.lateral_widths(self.max_lateral)
        if wide > self.step_width_max + 1e-9:
            out.append(
                f"sideways at max_lateral the stances alternate between {narrow:.3f} and {wide:.3f} m "
                f"(step period {lateral_period:.2f} s): wider than step_width_max"
            )
        if self.max_turn * period > self.step_turn:
            out.append("max_turn x step period exceeds step_turn")
        return out

    def single_support_for(self, vy: float) -> float:
        """Swing duration (s) for the lateral command ``vy`` (m/s): ``single_support`` at 0,
        ``lateral_single_support`` at ``max_lateral``, linear in between."""
        a = min(abs(vy) / self.max_lateral, 1.0) if self.max_lateral > 0.0 else 0.0
        return self.single_support + a * (self.lateral_single_support - self.single_support)

    def lateral_widths(self, vy: float) -> tuple[float, float]:
        """Narrow and wide stance widths (m) of a sideways walk at ``vy`` (m/s): the feet move
        ``2 |vy| T`` per two steps (``T`` the step period at ``vy``), the stance alternating between
        ``foot_spacing -/+ |vy| T``, the narrow one at least ``step_width_min``."""
        shift = abs(vy) * (self.single_support_for(vy) + self.double_support)
        narrow = max(self.foot_spacing - shift, self.step_width_min)
        return narrow, narrow + 2.0 * shift


@dataclass(frozen=True)
class RobotConfig:
    """Everything robot-specific. Build it with :func:`load_robot_config`.

    ``gain_limits`` (``kp``, ``kd`` in configuration order; N m/rad, N m s/rad): the most stiffness and
    damping the driver accepts from a controller; ``None`` when the configuration declares none.
    ``default_policy``: the learned policy (a name under config/policies) that tools use for this robot when
    none is given (``humanoid-demo``'s walk); ``""``: none. ``policies``: the learned policies made for this
    robot (the scorecard's default columns; default: ``default_policy``).
    """

    name: str
    description: str
    config_path: Path
    mjcf_sources: tuple[dict[str, str], ...]
    scene_sources: tuple[dict[str, str], ...]
    urdf_sources: tuple[dict[str, str], ...]
    urdf_packages: dict[str, tuple[dict[str, str], ...]]
    base_joint: str
    base_body: str
    imu: ImuSpec
    feet: dict[str, FootSpec]
    joints: tuple[JointSpec, ...]
    initial_pose: dict[str, float]
    gain_profiles: dict[str, GainProfile]
    simulation: SimulationSpec = field(default_factory=SimulationSpec)
    wbc: WbcSpec = field(default_factory=WbcSpec)
    walking: WalkingSpec = field(default_factory=WalkingSpec)
    gain_limits: GainProfile | None = None
    default_policy: str = ""
    policies: tuple[str, ...] = ()

    @property
    def joint_names(self) -> list[str]:
        """Actuated joint names in configuration order (the order of ``/joint_states``)."""
        return [j.name for j in self.joints]

    @property
    def num_joints(self) -> int:
        """Number of actuated joints."""
        return len(self.joints)

    def array(self, attribute: str) -> np.ndarray:
        """Per-joint attribute (``default``, ``lower``, ``upper``, ``velocity``, ``effort``) as an array."""
        return np.array([getattr(j, attribute) for j in self.joints], dtype=float)

    def initial_joint_positions(self) -> np.ndarray:
        """Joint angles the simulator spawns with (rad); joints absent from ``initial_pose`` are 0."""
        return np.array([self.initial_pose.get(n, 0.0) for n in self.joint_names], dtype=float)

    def gain_limit_violations(self, kp: np.ndarray, kd: np.ndarray) -> list[str]:
        """Joints whose gains (configuration order; N m/rad, N m s/rad) exceed :attr:`gain_limits`, one
        message each (empty when within the limits or when the robot declares none)."""
        if self.gain_limits is None:
            return []
        out = []
        for label, values, limits in (("kp", kp, self.gain_limits.kp), ("kd", kd, self.gain_limits.kd)):
            for i in np.flatnonzero(np.asarray(values, dtype=float) > limits):
                name = self.joint_names[i]
                out.append(f"{label} {float(values[i]):g} of {name} exceeds its limit {limits[i]:g}")
        return out

    def gain_profile(self, name: str) -> GainProfile:
        """The gain profile called ``name``; :class:`ConfigError` listing the known ones otherwise."""
        try:
            return self.gain_profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.gain_profiles))
            raise ConfigError(
                f"unknown gain profile '{name}' for robot '{self.name}' (known: {known})"
            ) from None

    def resolve_mjcf(self) -> Path:
        """Path of the robot MJCF (the file MuJoCo and pinocchio both load)."""
        return resolve_sources(self.mjcf_sources, self.config_path, "mjcf")

    def resolve_scene(self) -> Path:
        """Path of the simulator scene (robot + floor + lights)."""
        return resolve_sources(self.scene_sources, self.config_path, "scene")

    @property
    def urdf_from_mjcf(self) -> bool:
        """True when the URDF is generated from the MJCF (``model.urdf: [{generate: mjcf}]``)."""
        return any(src.get("generate") == "mjcf" for src in self.urdf_sources)

    def resolve_urdf(self) -> Path:
        """Path of the URDF served on ``/robot_description``."""
        return resolve_sources(self.urdf_sources, self.config_path, "urdf")

    def resolve_urdf_package(self, package: str) -> Path:
        """Directory a ``package://<package>/`` URI of the URDF points to."""
        if package not in self.urdf_packages:
            raise ConfigError(f"URDF refers to package '{package}' which robot '{self.name}' does not locate")
        return resolve_sources(self.urdf_packages[package], self.config_path, f"urdf package {package}")


def expand_patterns(table: dict[str, float], joint_names: list[str], what: str) -> np.ndarray:
    """Per-joint values from ``{regex: value}`` (fullmatch, first match wins); every joint must match."""
    values = np.empty(len(joint_names))
    compiled = []
    for pattern, value in table.items():
        try:
            compiled.append((re.compile(pattern), float(value)))
        except (re.error, TypeError, ValueError) as exc:
            raise ConfigError(f"{what}: bad entry {pattern!r}: {value!r} ({exc})") from None
    for i, name in enumerate(joint_names):
        for regex, value in compiled:
            if regex.fullmatch(name):
                values[i] = value
                break
        else:
            raise ConfigError(f"{what}: no entry matches joint '{name}'")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ConfigError(f"{what}: gains must be finite and >= 0")
    return values


def _require(d: dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise ConfigError(f"{where}: missing key '{key}'")
    return d[key]


def _sources(value: Any, where: str) -> tuple[dict[str, str], ...]:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value) or not value:
        raise ConfigError(f"{where}: expected a list of sources")
    return tuple({str(k): str(v) for k, v in s.items()} for s in value)


def load_robot_config(robot: str = "g1") -> RobotConfig:
    """Load and validate a robot configuration by name (``g1``) or YAML path."""
    path = find_robot_config(robot)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at top level")
    where = str(path)
    model = _require(data, "model", where)

    joints = []
    seen: set[str] = set()
    for i, j in enumerate(_require(data, "joints", where)):
        try:
            spec = JointSpec(
                name=str(j["name"]),
                default=float(j["default"]),
                lower=float(j["lower"]),
                upper=float(j["upper"]),
                velocity=float(j["velocity"]),
                effort=float(j["effort"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: joints[{i}] is malformed ({exc!r})") from None
        if spec.name in seen:
            raise ConfigError(f"{where}: joint '{spec.name}' listed twice")
        if not spec.lower < spec.upper or spec.velocity <= 0 or spec.effort <= 0:
            raise ConfigError(f"{where}: joint '{spec.name}' has inconsistent limits")
        if not spec.lower <= spec.default <= spec.upper:
            raise ConfigError(f"{where}: default of joint '{spec.name}' is outside its limits")
        seen.add(spec.name)
        joints.append(spec)
    names = [j.name for j in joints]

    profiles = {}
    for pname, table in (_require(data, "gain_profiles", where) or {}).items():
        kp = expand_patterns(_require(table, "kp", f"{where}: gain_profiles.{pname}"), names, f"{pname}.kp")
        kd = expand_patterns(_require(table, "kd", f"{where}: gain_profiles.{pname}"), names, f"{pname}.kd")
        profiles[str(pname)] = GainProfile(str(pname), kp, kd)
    if "stand" not in profiles:
        raise ConfigError(f"{where}: a 'stand' gain profile is required")
    limits_table = data.get("gain_limits")
    gain_limits = None
    if limits_table is not None:
        gain_limits = GainProfile(
            "limits",
            expand_patterns(_require(limits_table, "kp", f"{where}: gain_limits"), names, "gain_limits.kp"),
            expand_patterns(_require(limits_table, "kd", f"{where}: gain_limits"), names, "gain_limits.kd"),
        )

    feet = {}
    for side, f in _require(data, "feet", where).items():
        try:
            polygon = tuple((float(x), float(y)) for x, y in f["polygon"])
            offset = tuple(float(v) for v in f["sole_offset"])
            feet[str(side)] = FootSpec(str(f["body"]), str(f["sole_frame"]), offset, polygon)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: feet.{side} is malformed ({exc!r})") from None
        if len(offset) != 3 or len(polygon) < 3:
            raise ConfigError(f"{where}: feet.{side} needs a 3D sole_offset and a polygon of >= 3 corners")
    if set(feet) != {"left", "right"}:
        raise ConfigError(f"{where}: feet must be exactly 'left' and 'right'")

    imu = _require(data, "imu", where)
    initial = {str(k): float(v) for k, v in (data.get("initial_pose") or {}).items()}
    unknown = set(initial) - set(names)
    if unknown:
        raise ConfigError(f"{where}: initial_pose names unknown joints {sorted(unknown)}")
    sim = data.get("simulation") or {}
    wbc = data.get("wbc") or {}
    try:
        wbc_spec = WbcSpec(
            torso_frame=str(wbc.get("torso_frame", "")),
            friction=float(wbc.get("friction", 0.5)),
            contact_points=str(wbc.get("contact_points", "polygon")),
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{where}: wbc is malformed ({exc!r})") from None
    if not wbc_spec.friction > 0.0 or wbc_spec.contact_points != "polygon":
        raise ConfigError(f"{where}: wbc.friction must be > 0 and wbc.contact_points 'polygon'")
    walking = _walking_spec(data.get("walking"), where)
    config = RobotConfig(
        name=str(_require(data, "name", where)),
        description=str(data.get("description", "")),
        config_path=path.resolve(),
        mjcf_sources=_sources(_require(model, "mjcf", where), f"{where}: model.mjcf"),
        scene_sources=_sources(_require(model, "scene", where), f"{where}: model.scene"),
        urdf_sources=_sources(_require(model, "urdf", where), f"{where}: model.urdf"),
        urdf_packages={
            str(k): _sources(v, f"{where}: model.urdf_packages.{k}")
            for k, v in (model.get("urdf_packages") or {}).items()
        },
        base_joint=str(_require(model, "base_joint", where)),
        base_body=str(_require(model, "base_body", where)),
        imu=ImuSpec(
            site=str(_require(imu, "site", where)),
            gyro_sensor=str(_require(imu, "gyro_sensor", where)),
            accel_sensor=str(_require(imu, "accel_sensor", where)),
        ),
        feet=feet,
        joints=tuple(joints),
        initial_pose=initial,
        gain_profiles=profiles,
        simulation=SimulationSpec(
            timestep=float(sim.get("timestep", 0.002)),
            fall_height=float(sim.get("fall_height", 0.45)),
            noslip_iterations=_noslip(sim.get("noslip_iterations", 0), path),
        ),
        wbc=wbc_spec,
        walking=walking,
        gain_limits=gain_limits,
        default_policy=str(data.get("default_policy") or ""),
        policies=tuple(str(p) for p in data.get("policies") or [data.get("default_policy")] if p),
    )
    for profile in profiles.values():
        beyond = config.gain_limit_violations(profile.kp, profile.kd)
        if beyond:
            raise ConfigError(f"{where}: gain profile '{profile.name}' beyond gain_limits: {beyond}")
    return config


def _walking_spec(table: Any, where: str) -> WalkingSpec:
    """:class:`WalkingSpec` from the ``walking`` section (nested ``timing``, ``step_limits`` and
    ``velocity_limits`` tables; absent keys keep their defaults, unknown ones are an error)."""
    if table is None:
        return WalkingSpec()
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: walking must be a mapping")
    flat: dict[str, Any] = {}
    controller = _walking_controller(table.get("controller"), where)
    for key, value in table.items():
        if key == "controller":
            continue
        if key in ("timing", "step_limits", "velocity_limits"):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: walking.{key} must be a mapping")
            prefix = {"timing": "", "step_limits": "step_", "velocity_limits": "max_"}[key]
            for k, v in value.items():
                flat["foot_clearance" if k == "foot_clearance" else prefix + str(k)] = v
        else:
            flat[str(key)] = value
    known = set(WalkingSpec.__dataclass_fields__)
    unknown = sorted(set(flat) - known)
    if unknown:
        raise ConfigError(f"{where}: walking has unknown keys {unknown}")
    try:
        spec = WalkingSpec(**{k: float(v) for k, v in flat.items()}, controller=controller)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: walking is malformed ({exc!r})") from None
    problems = spec.validate()
    if problems:
        raise ConfigError(f"{where}: walking: {'; '.join(problems)}")
    return spec


def _walking_controller(table: Any, where: str) -> tuple[tuple[str, Any], ...]:
    """The ``walking.controller`` table as sorted ``(name, value)`` pairs: each value a boolean, a finite
    number or a list of numbers (names and types are checked against the controller's settings when it is
    built: :func:`humanoid_control.walking.controller_types.tuned_settings`)."""
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: walking.controller must be a mapping")
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        if isinstance(value, bool):
            out.append((str(key), value))
            continue
        items = value if isinstance(value, list) else [value]
        if not items or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in items
        ):
            raise ConfigError(
                f"{where}: walking.controller.{key} must be a boolean, a number or a list of numbers"
            )
        out.append((str(key), tuple(float(v) for v in items) if isinstance(value, list) else value))
    return tuple(sorted(out))


def _noslip(value: Any, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
        raise ConfigError(f"{path}: simulation.noslip_iterations must be an integer in [0, 1000]: {value!r}")
    return value
