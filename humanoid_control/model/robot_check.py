"""``humanoid-robot check CONFIG``: a robot configuration checked against its own model files (no rclpy).

The loader (:func:`humanoid_control.model.robot_config.load_robot_config`) stops at the first malformed entry;
this check reads the YAML itself and compiles the MJCF it names, so that it can list *every* problem:

- model files: the MJCF and the scene resolve and compile; the base joint is a free joint of the base body;
- joints: each configured joint exists in the MJCF as a hinge with an actuator, in the MJCF's order (the
  order of ``/joint_states``), and every actuated MJCF joint is configured; position limits (rad) within the
  MJCF's range, effort (N m) within its ``actuatorfrcrange`` where it has one; default pose and
  ``initial_pose`` inside the configured limits;
- feet: the foot bodies exist, the sole frames do not clash with an MJCF site, the sole polygons have at least
  three corners and are counter-clockwise (positive area);
- IMU site and sensors, the WBC torso frame and the camera's parent body exist;
- masses: every body carrying an inertial has a positive mass; the total (kg) is printed; pinocchio's
  model of the same MJCF (and the URDF served on ``/robot_description``, generated or given) have the same
  total mass within 1 % and the configured joints;
- gains: every profile and the gain limits cover every joint (first regular-expression match), every profile
  within the gain limits;
- the walking parameters are consistent, and the hardware backends name configured joints only;
- finally the loader itself must accept the file.

Exit status of :func:`main`: 0 when no problem was found, 1 otherwise (every problem printed).
Units: rad, N m, kg, N m/rad, N m s/rad.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from humanoid_control.model.robot_config import (
    ConfigError,
    _sources,
    find_robot_config,
    load_robot_config,
    resolve_sources,
)

LIMIT_TOLERANCE = 1e-4  # rad / N m: configured limits may round the model's by this much
MASS_TOLERANCE = 0.01  # relative: pinocchio / URDF total mass against MuJoCo's


@dataclass
class RobotCheckReport:
    """Outcome of :func:`check_robot_config`: the printed lines and the problems found (also the base of
    ``humanoid-policy check``'s report)."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def text(self) -> str:
        """The report as printed."""
        tail = ["", f"PROBLEMS ({len(self.problems)}):", *(f"  - {p}" for p in self.problems)]
        return "\n".join([*self.lines, *(tail if self.problems else ["", "OK: no problems found"])])


def _regex_values(table: Any, names: list[str], what: str, problems: list[str]) -> np.ndarray | None:
    """Per-joint values of a ``{regex: value}`` table (fullmatch, first match wins); problems appended."""
    if not isinstance(table, dict):
        problems.append(f"{what}: expected a mapping of joint-name patterns to values")
        return None
    compiled = []
    for pattern, value in table.items():
        try:
            compiled.append((re.compile(str(pattern)), float(value)))
        except (re.error, TypeError, ValueError) as exc:
            problems.append(f"{what}: bad entry {pattern!r}: {value!r} ({exc})")
    values = np.full(len(names), np.nan)
    for i, name in enumerate(names):
        for regex, value in compiled:
            if regex.fullmatch(name):
                values[i] = value
                break
        else:
            problems.append(f"{what}: no entry matches joint '{name}'")
    bad = [names[i] for i in np.flatnonzero(np.isfinite(values) & (values < 0))]
    if bad:
        problems.append(f"{what}: negative gains for {bad}")
    return values


def _polygon_area(polygon: list[list[float]]) -> float:
    """Signed area (m^2) of a polygon given as ``[x, y]`` corners (positive: counter-clockwise)."""
    pts = np.asarray(polygon, dtype=float)
    x, y = pts[:, 0], pts[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


class _Checker:
    """One pass over a configuration file; see the module docstring for what is checked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.report = RobotCheckReport()
        self.problems = self.report.problems
        self.lines = self.report.lines
        self.model: Any = None
        self.names: list[str] = []

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def run(self) -> RobotCheckReport:
        try:
            data = yaml.safe_load(self.path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            self.problem(f"cannot read {self.path}: {exc}")
            return self.report
        if not isinstance(data, dict):
            self.problem(f"{self.path}: expected a mapping at top level")
            return self.report
        self.lines.append(f"robot '{data.get('name', '?')}': {self.path}")
        self._model(data.get("model"))
        self._joints(data.get("joints"), data.get("initial_pose"))
        if self.model is not None:
            self._frames(data)
            self._masses(data)
        self._gains(data)
        self._walking_and_hardware(data)
        if not self.problems:  # the loader is the backstop for everything not checked above
            try:
                load_robot_config(str(self.path))
            except ConfigError as exc:
                self.problem(f"the loader refuses the file: {exc}")
        return self.report

    # -- model files --------------------------------------------------------------------------------------
    def _model(self, model: Any) -> None:
        import mujoco

        if not isinstance(model, dict):
            self.problem("model: missing or not a mapping")
            return
        for key in ("mjcf", "scene", "urdf", "base_joint", "base_body"):
            if key not in model:
                self.problem(f"model.{key}: missing")
        for key in ("mjcf", "scene"):
            if key not in model:
                continue
            try:
                path = resolve_sources(_sources(model[key], f"model.{key}"), self.path, key)
                compiled = mujoco.MjModel.from_xml_path(str(path))
            except (ConfigError, ValueError) as exc:
                self.problem(f"model.{key}: {exc}")
                continue
            self.lines.append(f"  {key}: {path}")
            if key == "mjcf":
                self.model = compiled
        if self.model is None:
            return
        m = self.model
        base_name, body_name = str(model.get("base_joint", "")), str(model.get("base_body", ""))
        base = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, base_name)
        body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body_name)
        unnamed = [
            j
            for j in range(m.njnt)
            if m.jnt_bodyid[j] == body and not mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        ]
        if base < 0 and body >= 0 and unnamed:
            if base_name != f"{body_name}_free":  # the loaders name it; pinocchio's name is <body>_free
                self.problem(
                    f"model.base_joint '{base_name}': the MJCF's free joint has no name; pinocchio calls it "
                    f"'{body_name}_free', which base_joint must then be"
                )
                return
            base = unnamed[0]
        if body < 0:
            self.problem(f"model.base_body '{model.get('base_body')}' is not a body of the MJCF")
        if base < 0 or m.jnt_type[base] != mujoco.mjtJoint.mjJNT_FREE:
            self.problem(f"model.base_joint '{model.get('base_joint')}' is not a free joint of the MJCF")
        elif body >= 0 and m.jnt_bodyid[base] != body:
            self.problem(f"model.base_joint '{model.get('base_joint')}' does not move base_body")

    # -- joints -------------------------------------------------------------------------------------------
    def _joints(self, joints: Any, initial_pose: Any) -> None:
        import mujoco

        if not isinstance(joints, list) or not joints:
            self.problem("joints: missing or empty")
            return
        m = self.model
        specs: dict[str, dict[str, float]] = {}
        mjcf_index: list[int] = []
        in_model: list[str] = []
        for i, entry in enumerate(joints):
            try:
                name = str(entry["name"])
                spec = {k: float(entry[k]) for k in ("default", "lower", "upper", "velocity", "effort")}
            except (KeyError, TypeError, ValueError) as exc:
                self.problem(f"joints[{i}] is malformed ({exc!r})")
                continue
            if name in specs:
                self.problem(f"joint '{name}' listed twice")
                continue
            specs[name] = spec
            self.names.append(name)
            lo, hi = spec["lower"], spec["upper"]
            if not lo < hi:
                self.problem(f"joint '{name}': lower {lo:g} is not below upper {hi:g}")
            elif not lo <= spec["default"] <= hi:
                self.problem(
                    f"joint '{name}': default {spec['default']:g} rad outside its limits [{lo:g}, {hi:g}]"
                )
            for key in ("velocity", "effort"):
                if not spec[key] > 0.0:
                    self.problem(f"joint '{name}': {key} limit {spec[key]:g} must be > 0")
            if m is None:
                continue
            jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                self.problem(f"joint '{name}' is not in the MJCF")
                continue
            if m.jnt_type[jid] != mujoco.mjtJoint.mjJNT_HINGE:
                self.problem(f"joint '{name}' is not a hinge joint in the MJCF")
            mjcf_index.append(jid)
            in_model.append(name)
            if m.jnt_limited[jid]:
                mlo, mhi = (float(v) for v in m.jnt_range[jid])
                if lo < mlo - LIMIT_TOLERANCE or hi > mhi + LIMIT_TOLERANCE:
                    self.problem(
                        f"joint '{name}': limits [{lo:g}, {hi:g}] rad beyond the MJCF's [{mlo:g}, {mhi:g}]"
                    )
            if m.jnt_actfrclimited[jid]:
                fmax = float(np.max(np.abs(m.jnt_actfrcrange[jid])))
                if spec["effort"] > fmax + LIMIT_TOLERANCE:
                    self.problem(f"joint '{name}': effort {spec['effort']:g} N m beyond the MJCF's {fmax:g}")
        if m is not None:
            if mjcf_index != sorted(mjcf_index):
                order = [n for _, n in sorted(zip(mjcf_index, in_model, strict=True))]
                self.problem(f"joints are not in the MJCF's order; the MJCF order is {order}")
            actuated = {int(m.actuator_trnid[a, 0]) for a in range(m.nu)}
            for jid in mjcf_index:
                if jid not in actuated:
                    self.problem(
                        f"joint '{mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, jid)}' has no actuator"
                    )
            unconfigured = [
                mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in sorted(actuated - set(mjcf_index))
            ]
            if unconfigured:
                self.problem(f"actuated MJCF joints missing from the configuration: {unconfigured}")
        self.lines.append(f"  joints: {len(self.names)} configured")
        if initial_pose is not None and not isinstance(initial_pose, dict):
            self.problem("initial_pose must be a mapping of joint name to angle")
            return
        for name, value in (initial_pose or {}).items():
            spec = specs.get(str(name))
            if spec is None:
                self.problem(f"initial_pose names unknown joint '{name}'")
            elif not spec["lower"] <= float(value) <= spec["upper"]:
                self.problem(f"initial_pose of '{name}' ({float(value):g} rad) outside its limits")

    # -- frames: feet, IMU, torso, camera -----------------------------------------------------------------
    def _frames(self, data: dict[str, Any]) -> None:
        import mujoco

        m = self.model

        def exists(kind: Any, name: Any) -> bool:
            return mujoco.mj_name2id(m, kind, str(name)) >= 0

        feet = data.get("feet")
        if not isinstance(feet, dict) or set(feet) != {"left", "right"}:
            self.problem("feet must be exactly 'left' and 'right'")
            feet = feet if isinstance(feet, dict) else {}
        for side, foot in feet.items():
            if not isinstance(foot, dict):
                self.problem(f"feet.{side} is not a mapping")
                continue
            body = foot.get("body")
            if not exists(mujoco.mjtObj.mjOBJ_BODY, body):
                self.problem(f"feet.{side}: foot body '{body}' is not in the MJCF")
            if exists(mujoco.mjtObj.mjOBJ_SITE, foot.get("sole_frame")):
                self.problem(f"feet.{side}: sole_frame '{foot.get('sole_frame')}' clashes with an MJCF site")
            if not isinstance(foot.get("sole_frame"), str) or not foot.get("sole_frame"):
                self.problem(f"feet.{side}: sole_frame missing")
            offset = foot.get("sole_offset")
            if not (isinstance(offset, list) and len(offset) == 3):
                self.problem(f"feet.{side}: sole_offset must be [x, y, z] (m)")
            polygon = foot.get("polygon")
            try:
                area = _polygon_area(polygon) if isinstance(polygon, list) and len(polygon) >= 3 else None
            except (TypeError, ValueError, IndexError):
                area = None
            if area is None:
                self.problem(f"feet.{side}: polygon needs >= 3 [x, y] corners")
            elif area <= 0.0:
                self.problem(f"feet.{side}: polygon is not counter-clockwise (signed area {area:.4g} m^2)")
        sides = [f for f in feet.values() if isinstance(f, dict)]
        if len({f.get("sole_frame") for f in sides}) != len(sides):
            self.problem("feet: the two sole frames have the same name")
        imu = data.get("imu") or {}
        if not exists(mujoco.mjtObj.mjOBJ_SITE, imu.get("site")):
            self.problem(f"imu.site '{imu.get('site')}' is not a site of the MJCF")
        for key in ("gyro_sensor", "accel_sensor"):
            if not exists(mujoco.mjtObj.mjOBJ_SENSOR, imu.get(key)):
                self.problem(f"imu.{key} '{imu.get(key)}' is not a sensor of the MJCF")
        torso = (data.get("wbc") or {}).get("torso_frame", "")
        if torso and not exists(mujoco.mjtObj.mjOBJ_BODY, torso):
            self.problem(f"wbc.torso_frame '{torso}' is not a body of the MJCF")
        camera = data.get("camera")
        if isinstance(camera, dict) and not exists(mujoco.mjtObj.mjOBJ_BODY, camera.get("parent_body")):
            self.problem(f"camera.parent_body '{camera.get('parent_body')}' is not a body of the MJCF")

    # -- masses -------------------------------------------------------------------------------------------
    def _masses(self, data: dict[str, Any]) -> None:
        m = self.model
        total = float(np.sum(m.body_mass))
        self.lines.append(f"  mass: {total:.3f} kg in {m.nbody - 1} bodies (MuJoCo)")
        if not total > 0.0:
            self.problem("the MJCF has no mass")
            return
        try:
            import pinocchio as pin
        except ImportError:
            self.lines.append("  pinocchio not installed: pinocchio and URDF mass checks skipped")
            return
        try:
            config = load_robot_config(str(self.path))
        except ConfigError as exc:
            self.lines.append(f"  pinocchio and URDF checks skipped: the loader refuses the file ({exc})")
            return
        pmodel = pin.buildModelFromMJCF(str(config.resolve_mjcf()))
        self._compare_model("pinocchio (MJCF)", pmodel, total)
        try:
            from humanoid_control.model.urdf import robot_description_xml

            xml = robot_description_xml(config, "file")
            umodel = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
        except (ConfigError, ValueError, RuntimeError) as exc:
            self.problem(f"the URDF for /robot_description does not load: {exc}")
            return
        self._compare_model("URDF", umodel, total)

    def _compare_model(self, label: str, pmodel: Any, total: float) -> None:
        import pinocchio as pin

        mass = float(pin.computeTotalMass(pmodel))
        self.lines.append(f"  mass: {mass:.3f} kg ({label})")
        if abs(mass - total) > MASS_TOLERANCE * total:
            self.problem(
                f"{label} total mass {mass:.3f} kg differs from MuJoCo's {total:.3f} kg by more than 1 %"
            )
        missing = [n for n in self.names if not pmodel.existJointName(n)]
        if missing:
            self.problem(f"{label} lacks configured joints {missing}")

    # -- gains --------------------------------------------------------------------------------------------
    def _gains(self, data: dict[str, Any]) -> None:
        if not self.names:
            return
        limits = data.get("gain_limits")
        kp_max = kd_max = None
        if limits is not None:
            kp_max = _regex_values((limits or {}).get("kp"), self.names, "gain_limits.kp", self.problems)
            kd_max = _regex_values((limits or {}).get("kd"), self.names, "gain_limits.kd", self.problems)
        profiles = data.get("gain_profiles")
        if not isinstance(profiles, dict) or "stand" not in profiles:
            self.problem("gain_profiles: a 'stand' profile is required")
            profiles = profiles if isinstance(profiles, dict) else {}
        for pname, table in profiles.items():
            table = table if isinstance(table, dict) else {}
            for label, bound in (("kp", kp_max), ("kd", kd_max)):
                values = _regex_values(table.get(label), self.names, f"{pname}.{label}", self.problems)
                if values is None or bound is None:
                    continue
                for i in np.flatnonzero(values > bound):
                    self.problem(
                        f"gain profile '{pname}': {label} {values[i]:g} of {self.names[i]} exceeds its "
                        f"limit {bound[i]:g}"
                    )
        self.lines.append(f"  gain profiles: {', '.join(map(str, profiles)) or 'none'}")

    # -- walking and hardware -----------------------------------------------------------------------------
    def _walking_and_hardware(self, data: dict[str, Any]) -> None:
        from humanoid_control.model.robot_config import _walking_spec

        try:
            spec = _walking_spec(data.get("walking"), "walking")
        except ConfigError as exc:
            self.problem(str(exc))
        else:
            from humanoid_control.walking.controller_types import WalkingSettings, tuned_settings

            try:  # the walking controller's tuning names its settings, with values of their kind
                tuned_settings(WalkingSettings(), spec.controller)
            except ValueError as exc:
                self.problem(str(exc))
        known = set(self.names)
        for backend, table in (data.get("hardware") or {}).items():
            entries = (table or {}).get("motors") or (table or {}).get("joints") or []
            named = [e.get("joint") for e in entries if isinstance(e, dict)]
            unknown = sorted({str(n) for n in named} - known)
            if unknown:
                self.problem(f"hardware.{backend} names unknown joints {unknown}")
            missing = [n for n in self.names if n not in named]
            if named and missing:
                self.problem(f"hardware.{backend} does not map joints {missing}")


def check_robot_config(robot: str) -> RobotCheckReport:
    """Check the configuration ``robot`` (a name such as ``g1`` or a YAML path); see the module docstring."""
    try:
        path = find_robot_config(robot)
    except ConfigError as exc:
        report = RobotCheckReport()
        report.problems.append(str(exc))
        return report
    return _Checker(path).run()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-robot``: ``check CONFIG`` prints every problem, exits 1 on any."""
    parser = argparse.ArgumentParser(prog="humanoid-robot", description="robot configuration tools")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="validate a robot configuration against its model files")
    check.add_argument("config", help="robot configuration name (g1) or YAML path")
    args = parser.parse_args(argv)
    report = check_robot_config(args.config)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
