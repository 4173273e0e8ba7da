"""The scorecard's scenario families: ``config/scenarios/<family>.yaml``, each with named levels and a seed.

A family file::

    family: push_standing          # must equal the file name
    description: ...
    seed: 41                       # a trial's world is drawn from (this seed, trial seed, level key)
    seeded: false                  # true: the trial seed changes the world (false: seeds repeat a trial)
    standing_only: true            # a standing controller (wbc_stand) can take this family
    quick_level: front             # the level of ``humanoid-eval scorecard --quick``
    sources: ["...", ...]          # where the ranges come from (docs/scorecard.md "Scenarios")
    settings: {...}                # the family's trial settings (durations s, speeds m/s, bisection)
    levels:                        # ordered: level key -> its values
      front: {direction_deg: 0}

Every value is checked against the family's schema (:data:`SCHEMAS`: kinds and physically sensible ranges;
no robot-specific number lives here): an unknown family or key, a missing key or a value out of range is a
``ValueError`` naming the file, the level and the key. Units: m, kg, s, deg (angles in files), N s, m/s.
Directions are in the world frame at spawn (the robot faces +x): 0 deg = front (+x), 90 deg = left (+y).
"""

from __future__ import annotations

import math
import re
import sys
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

#: controllers that only stand (planned on ``standing_only`` families alone)
STANDING_CONTROLLERS = frozenset({"wbc_stand", "joint_hold"})


@dataclass(frozen=True)
class Level:
    """One level of a family: its key and checked values (``params``; units as in the module docstring)."""

    key: str
    params: dict[str, Any]
    description: str = ""


@dataclass(frozen=True)
class Family:
    """A checked scenario family (module docstring)."""

    name: str
    description: str
    seed: int
    seeded: bool
    standing_only: bool
    quick_level: str
    sources: tuple[str, ...]
    settings: dict[str, Any]
    levels: OrderedDict[str, Level] = field(default_factory=OrderedDict)
    path: Path | None = None

    @property
    def citation(self) -> str:
        """The sources of the family's ranges, one string (``; ``-separated)."""
        return "; ".join(self.sources)

    def level(self, key: str) -> Level:
        """The level ``key`` (``ValueError`` naming the family and its levels if unknown)."""
        if key not in self.levels:
            raise ValueError(
                f"unknown level {key!r} of scenario family {self.name!r} (levels: {', '.join(self.levels)})"
            )
        return self.levels[key]

    def rng(self, seed: int, level: str) -> np.random.Generator:
        """The random generator of a trial's world: from (file seed, trial seed unless not ``seeded``, level
        key); the same arguments give the same draws in every process."""
        trial_seed = int(seed) if self.seeded else 0
        return np.random.default_rng([self.seed, trial_seed, zlib.crc32(level.encode())])


# ---------------------------------------------------------------------------------------------- the schemas
# A field: (kind, lo, hi, required). kinds: "num", "int", "bool", "str:<a|b|...>", "vec<n>" (each in
# [lo, hi]), "range" (two numbers lo <= a <= b <= hi; one number: both), "joints" (joints of the robot:
# each an exact joint name, or words separated by spaces, e.g. "left knee", naming the one joint whose name
# has all those words, case-insensitive: a family file then fits every robot whose joints are named so),
# "name" (a body name of the model, checked when the world is built; "torso": the robot's torso body, see
# :func:`robot_body`).
Field = tuple[str, float, float, bool]

_WALK = {
    "speed_mps": ("num", 0.0, 1.0, True),
    "stand_s": ("num", 0.0, 5.0, True),
    "walk_s": ("num", 0.5, 30.0, True),
    "event_after_s": ("num", 0.0, 30.0, False),
    "fall_tilt_deg": ("num", 10.0, 90.0, True),
}
_PUSH_SETTINGS = {
    "push_duration_s": ("num", 0.1, 1.0, True),  # >= push_eval.PUSH_DURATION_S (its judge)
    "iterations": ("int", 1, 8, True),
    "top_Ns": ("num", 1.0, 200.0, True),
    "survive_Ns": ("num", 0.0, 200.0, True),
    "settle_s": ("num", 0.0, 5.0, True),
    "observe_s": ("num", 0.2, 10.0, True),
    "observe_no_step_s": ("num", 0.2, 10.0, False),  # standing-only controllers (push_eval.OBSERVE_S)
    "fall_tilt_deg": ("num", 10.0, 90.0, True),
}
SCHEMAS: dict[str, tuple[dict[str, Field], dict[str, Field]]] = {
    # family: (settings schema, level schema)
    "push_standing": (
        _PUSH_SETTINGS,
        {"direction_deg": ("num", -360.0, 360.0, True), "target_Ns": ("num", 0.0, 200.0, False)},
    ),
    "push_walking": (
        {
            **_PUSH_SETTINGS,
            "speed_mps": ("num", 0.05, 1.0, True),
            "walk_s": ("num", 0.5, 10.0, True),
            "phase_search_s": ("num", 0.2, 5.0, True),
            "contact_force_n": ("num", 1.0, 500.0, True),
        },
        {"direction_deg": ("num", -360.0, 360.0, True), "target_Ns": ("num", 0.0, 200.0, False)},
    ),
    "terrain": (
        {**_WALK, "start_x_m": ("num", 0.2, 3.0, True), "jitter_m": ("num", 0.0, 1.0, True)},
        {
            "kind": ("str:rough|slope|step", 0, 0, True),
            "height_m": ("range", -0.15, 0.15, False),
            "slope_deg": ("num", -20.0, 20.0, False),
            "feature_m": ("num", 0.05, 2.0, False),
            "length_m": ("num", 0.2, 10.0, False),
        },
    ),
    "payload": (
        {**_WALK, "contact_force_n": ("num", 1.0, 500.0, True), "attach_body": ("name", 0, 0, True)},
        {
            "mode": ("str:attach|release", 0, 0, True),
            "mass_kg": ("num", 0.1, 30.0, True),
            "offset_m": ("vec3", -0.5, 0.5, True),
            "offset_jitter_m": ("num", 0.0, 0.2, False),
        },
    ),
    "trip": (
        {**_WALK, "jitter_m": ("num", 0.0, 1.0, True)},
        {
            "height_m": ("num", 0.01, 0.2, True),
            "distance_m": ("num", 0.2, 5.0, True),
            "depth_m": ("num", 0.01, 0.3, True),
        },
    ),
    "impact": (
        {
            **_WALK,
            "launch_distance_m": ("num", 0.1, 2.0, True),
            "radius_m": ("num", 0.03, 0.3, True),
            "target_body": ("name", 0, 0, True),
        },
        {
            "mass_kg": ("num", 0.5, 30.0, True),
            "speed_mps": ("num", 0.5, 15.0, True),
            "azimuth_deg": ("range", -180.0, 180.0, True),
            "height_m": ("num", -0.3, 0.5, False),
        },
    ),
    "floor": (
        _WALK,
        {
            "friction": ("num", 0.05, 2.0, True),
            "solref": ("vec2", 0.0, 2.0, False),
            "solimp": ("vec5", 0.0, 6.0, False),
        },
    ),
    "randomized": (
        _WALK,
        {
            "kp_scale": ("range", 0.3, 3.0, True),
            "kd_scale": ("range", 0.3, 3.0, True),
            "torque_limit_scale": ("range", 0.3, 2.0, True),
            "joint_friction_scale": ("range", 0.0, 5.0, True),
            "armature_scale": ("range", 0.1, 5.0, True),
            "link_mass_scale": ("range", 0.5, 2.0, True),
            "base_mass_add_kg": ("range", -5.0, 10.0, True),
            "com_offset_m": ("range", -0.15, 0.15, True),
            "latency_s": ("range", 0.0, 0.05, True),
            "gyro_bias_rps": ("range", -0.2, 0.2, True),
            "imu_tilt_rad": ("range", -0.1, 0.1, True),
            "encoder_bias_rad": ("range", -0.1, 0.1, True),
        },
    ),
    "faults": (
        _WALK,
        {
            "kind": ("str:imu_frozen|joint_weak|encoder_stuck|command_gap", 0, 0, True),
            "duration_s": ("num", 0.001, 5.0, True),
            "joints": ("joints", 0, 0, False),
            "torque_scale": ("num", 0.0, 1.0, False),
        },
    ),
}
_TOP = {"family", "description", "seed", "seeded", "standing_only", "quick_level", "sources", "settings"}


def scenario_dirs() -> list[Path]:
    """Where family files are looked for: the source tree's ``config/scenarios``, then installed copies."""
    here = Path(__file__).resolve().parents[2]
    dirs = [here / "config" / "scenarios"]
    try:  # full ROS 2 install / colcon workspace
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory("humanoid_stack")) / "config" / "scenarios")
    except Exception:
        pass
    dirs.append(Path(sys.prefix) / "share" / "humanoid_stack" / "config" / "scenarios")
    return dirs


def family_names() -> list[str]:
    """The families with a file (``config/scenarios/*.yaml``) and a schema, in :data:`SCHEMAS` order."""
    found = {p.stem for d in scenario_dirs() if d.is_dir() for p in d.glob("*.yaml")}
    return [n for n in SCHEMAS if n in found]


def family_path(name: str) -> Path:
    """The file of family ``name`` (``ValueError`` naming it if unknown)."""
    if not re.fullmatch(r"[a-z0-9_]+", str(name)) or name not in SCHEMAS:
        raise ValueError(f"unknown scenario family {name!r} (known: {', '.join(family_names())})")
    for d in scenario_dirs():
        p = d / f"{name}.yaml"
        if p.is_file():
            return p
    raise ValueError(
        f"scenario family {name!r}: no file {name}.yaml in {', '.join(map(str, scenario_dirs()))}"
    )


def _check(value: Any, kind: str, lo: float, hi: float, where: str, joints: list[str]) -> Any:
    def number(v: Any, w: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise ValueError(f"{w}: expected a finite number, got {v!r}")
        if not lo <= float(v) <= hi:
            raise ValueError(f"{w}: {v!r} is out of range [{lo:g}, {hi:g}]")
        return float(v)

    if kind == "num":
        return number(value, where)
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        number(value, where)
        return int(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind == "name":
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", value):
            raise ValueError(f"{where}: expected a model name (letters, digits, '_', '-'), got {value!r}")
        return value
    if kind.startswith("str:"):
        allowed = kind[4:].split("|")
        if value not in allowed:
            raise ValueError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
        return str(value)
    if kind.startswith("vec"):
        n = int(kind[3:])
        if not isinstance(value, (list, tuple)) or len(value) != n:
            raise ValueError(f"{where}: expected {n} numbers, got {value!r}")
        return [number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind == "range":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value, value]
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError(f"{where}: expected [low, high], got {value!r}")
        a, b = number(value[0], f"{where}[0]"), number(value[1], f"{where}[1]")
        if a > b:
            raise ValueError(f"{where}: low {a:g} above high {b:g}")
        return [a, b]
    if kind == "joints":
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names:
            raise ValueError(f"{where}: expected joint names, got {value!r}")
        return [resolve_joint(n, joints, where) for n in names]
    raise AssertionError(kind)


def resolve_joint(ref: Any, joints: list[str], where: str) -> str:
    """The robot joint ``ref`` names: an exact name of ``joints``, or space-separated words ("left knee") that
    exactly one joint name contains as words (split at non-alphanumerics, case-insensitive)."""
    if not isinstance(ref, str) or not ref.strip():
        raise ValueError(f"{where}: expected a joint name, got {ref!r}")
    if ref in joints:
        return ref
    words = ref.lower().split()
    if len(words) < 2:
        raise ValueError(f"{where}: {ref!r} names a joint the robot does not have")
    found = [j for j in joints if set(words) <= set(re.split(r"[^a-z0-9]+", j.lower()))]
    if len(found) != 1:
        raise ValueError(
            f"{where}: {ref!r} matches {len(found)} of the robot's joints ({', '.join(found) or 'none'}); "
            "name one joint"
        )
    return found[0]


def robot_body(name: str, robot: Any) -> str:
    """The model body a family's ``name`` field means for ``robot`` (its configuration): ``torso`` is the
    robot's torso (``wbc.torso_frame``, or its base body where it has no separate torso); any other name is
    taken as it is."""
    if name == "torso":
        return str(robot.wbc.torso_frame or robot.base_body)
    return name


def _check_table(table: Any, schema: dict[str, Field], where: str, joints: list[str]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ValueError(f"{where}: expected a mapping, got {table!r}")
    unknown = sorted(set(table) - set(schema))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (allowed: {sorted(schema)})")
    out: dict[str, Any] = {}
    for key, (kind, lo, hi, required) in schema.items():
        if key not in table:
            if required:
                raise ValueError(f"{where}: missing key {key!r}")
            continue
        out[key] = _check(table[key], kind, lo, hi, f"{where}.{key}", joints)
    return out


def family_from_dict(data: Any, name: str, joints: list[str], path: Path | None = None) -> Family:
    """Check a parsed family file (module docstring); ``joints``: the robot's joint names."""
    where = str(path or name)
    if not isinstance(data, dict):
        raise ValueError(f"scenario file {where}: expected a mapping")
    unknown = sorted(set(data) - _TOP - {"levels"})
    if unknown:
        raise ValueError(f"scenario file {where}: unknown keys {unknown}")
    missing = sorted((_TOP | {"levels"}) - {"description"} - set(data))
    if missing:
        raise ValueError(f"scenario file {where}: missing keys {missing}")
    if data["family"] != name:
        raise ValueError(f"scenario file {where}: family {data['family']!r} is not its file name {name!r}")
    seed = data["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"scenario file {where}: seed must be an integer >= 0, got {seed!r}")
    for key in ("seeded", "standing_only"):
        if not isinstance(data[key], bool):
            raise ValueError(f"scenario file {where}: {key} must be true or false, got {data[key]!r}")
    sources = data["sources"]
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s for s in sources):
        raise ValueError(f"scenario file {where}: sources must be a non-empty list of citations")
    settings_schema, level_schema = SCHEMAS[name]
    settings = _check_table(data["settings"], settings_schema, f"{where}: settings", joints)
    levels_in = data["levels"]
    if not isinstance(levels_in, dict) or not levels_in:
        raise ValueError(f"scenario file {where}: levels must be a non-empty mapping")
    levels: OrderedDict[str, Level] = OrderedDict()
    for key, table in levels_in.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", key):
            raise ValueError(f"scenario file {where}: level key {key!r} must be letters, digits, '_', '-'")
        table = dict(table) if isinstance(table, dict) else table
        desc = str(table.pop("description", "")) if isinstance(table, dict) else ""
        params = _check_table(table, level_schema, f"{where}: level {key}", joints)
        _check_level(name, key, params, where)
        levels[key] = Level(key, params, desc)
    quick = data["quick_level"]
    if quick not in levels:
        raise ValueError(f"scenario file {where}: quick_level {quick!r} is not one of its levels")
    return Family(
        name=name,
        description=str(data.get("description", "")),
        seed=seed,
        seeded=data["seeded"],
        standing_only=data["standing_only"],
        quick_level=quick,
        sources=tuple(sources),
        settings=settings,
        levels=levels,
        path=path,
    )


def _check_level(family: str, key: str, p: dict[str, Any], where: str) -> None:
    """Cross-field checks of one level (which keys a kind needs)."""
    need: dict[str, tuple[str, ...]] = {
        "rough": ("height_m", "feature_m", "length_m"),
        "slope": ("slope_deg", "length_m"),
        "step": ("height_m",),
        "joint_weak": ("joints", "torque_scale"),
        "encoder_stuck": ("joints",),
    }
    kind = p.get("kind")
    if family in ("terrain", "faults") and kind in need:
        missing = [k for k in need[kind] if k not in p]
        if missing:
            raise ValueError(f"scenario file {where}: level {key} ({kind}) needs {missing}")
    if family == "terrain" and kind == "rough" and p["height_m"][0] <= 0:
        raise ValueError(f"scenario file {where}: level {key}: rough height_m must be > 0")


@lru_cache(maxsize=8)
def _joint_names(robot: str) -> tuple[str, ...]:
    from humanoid_control.model.robot_config import load_robot_config

    return tuple(load_robot_config(robot).joint_names)


def load_family(name: str, robot: str = "g1") -> Family:
    """Read and check ``config/scenarios/<name>.yaml`` (``ValueError`` naming what is wrong)."""
    path = family_path(name)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"scenario file {path}: not valid YAML ({exc})") from None
    return family_from_dict(data, name, list(_joint_names(robot)), path)


def parse_controller(name: str) -> tuple[str, dict[str, Any]]:
    """A scorecard controller name -> (registered controller, its parameters): ``policy:<name or path>`` is
    the ``policy`` controller with that ``policy`` parameter, ``supervised:<name or path>`` the supervised
    controller with that policy inside (``supervised`` alone: its default, holosoma/g1_ppo); anything else is
    a registered name."""
    name = str(name).strip()
    for base in ("policy", "supervised"):
        if name.startswith(f"{base}:"):
            return base, {"policy": name.split(":", 1)[1]}
    return name, {}


def validate_controller(name: str, robot: str = "g1") -> None:
    """``ValueError`` naming an unknown controller or a missing / unreadable policy file."""
    from humanoid_control.controllers.registry import registered_controllers, resolve_name

    base, params = parse_controller(name)
    if not base:
        raise ValueError("empty controller name")
    known = registered_controllers()
    if resolve_name(base) not in known:
        raise ValueError(
            f"unknown controller {name!r} (registered: {', '.join(known)}; or policy:<name|path>)"
        )
    if base in ("policy", "supervised"):
        from humanoid_policy.manifest import find_policy_file

        policy = params.get("policy", "holosoma/g1_ppo")
        if not policy:
            raise ValueError(f"controller {name!r}: no policy named after 'policy:'")
        try:
            find_policy_file(policy)
        except Exception as exc:
            raise ValueError(f"controller {name!r}: {exc}") from None


def can_run(controller: str, family: Family) -> bool:
    """Whether ``controller`` is planned on ``family`` (a standing controller only on standing families)."""
    base, _ = parse_controller(controller)
    return family.standing_only or base not in STANDING_CONTROLLERS
