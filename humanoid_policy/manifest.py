"""Policy manifest: the whole contract of a learned policy, declared once and checked at load time.

A :class:`PolicyManifest` says which ONNX file to run, its input and output tensors, the observation terms in
the order the network expects them (with scale, clip and history length), the mapping between the policy's
joint order and the robot's, the action scale and offset (the policy's default pose), the PD gains the joints
must use, the control rate, the command ranges and the gait-phase clock.

Four loaders build one (all return the same dataclass; see ``docs/policy.md``):

- :func:`load_manifest_yaml` - this project's manifest YAML (``format: humanoid_policy/v1``), by hand,
  or with ``from_onnx_metadata`` naming fields to read from the ONNX metadata (how
  ``config/policies/holosoma`` describes the holosoma-inference policies);
- :func:`load_holosoma_onnx` - a bare holosoma-inference locomotion ONNX file: joint names, kp, kd and command
  ranges from its metadata, the observation convention of its G1 29-DoF locomotion policies;
- :func:`load_isaaclab_deploy` - an Isaac Lab ``deploy.yaml`` (unitree_rl_lab style: ``joint_ids_map``,
  ``step_dt``, ``stiffness``, ``damping``, ``default_joint_pos``, ``commands``, ``actions``,
  ``observations``);
- :func:`humanoid_policy.isaaclab_io.load_isaaclab_io_descriptors` - Isaac Lab's exported
  ``IO_descriptors.yaml`` (its own module).

:func:`load_policy` resolves a policy argument (``holosoma/g1_ppo``, a ``.yaml`` or an ``.onnx`` path).
Every mismatch - a joint the robot lacks, an observation size differing from the ONNX input, missing gains,
wrong lengths - raises :class:`ManifestError` here, never while the robot moves.

Units: rad, rad/s, m/s, N m/rad (kp), N m s/rad (kd), Hz. Frames: angular velocity and projected gravity in
the base (IMU) frame; commands in the heading frame (x forward, y left, z up).

This module holds the loaders and the lookup; the contract itself (the dataclasses, :class:`ManifestError`,
the shared validation ``_vector`` and ``_read_mapping``) is in :mod:`humanoid_policy.manifest_types`, the
check against the ONNX network (:func:`read_onnx_signature`, :func:`onnx_problems`) in
:mod:`humanoid_policy.manifest_onnx`; both are re-exported here. The IO-descriptor loader, which collects
every problem of a file rather than raising the first, has its own module and builds on those two, not on
this one.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_control.model.robot_config import ConfigError, RobotConfig, resolve_sources
from humanoid_policy.isaaclab_io import load_isaaclab_io_descriptors
from humanoid_policy.manifest_onnx import (
    OnnxSignature,
    _check_against_onnx,
    onnx_problems,
    read_onnx_signature,
)
from humanoid_policy.manifest_types import (
    COMMAND_AXES,
    TERM_ALIASES,
    TERM_KINDS,
    ManifestError,
    ObsTerm,
    PhaseClock,
    PolicyManifest,
    RecurrentState,
    _fail,
    _read_mapping,
    _vector,
)


def _command_ranges(value: Any, where: str) -> dict[str, tuple[float, float]]:
    aliases = {"ang_vel_yaw": "ang_vel_z"}
    out: dict[str, tuple[float, float]] = {}
    if not isinstance(value, dict):
        raise _fail(where, "command_ranges must map lin_vel_x / lin_vel_y / ang_vel_z to [lo, hi]")
    for key, rng in value.items():
        key = aliases.get(key, key)
        if key not in COMMAND_AXES:
            continue  # e.g. heading: not a velocity command
        if not (isinstance(rng, (list, tuple)) and len(rng) == 2):
            raise _fail(where, f"command range {key} must be [lo, hi], got {rng!r}")
        lo, hi = float(rng[0]), float(rng[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise _fail(where, f"command range {key} = [{lo}, {hi}] is not an interval")
        out[key] = (lo, hi)
    for key in COMMAND_AXES:
        out.setdefault(key, (0.0, 0.0))
    return out


def _terms(spec: Any, n_joints: int, where: str) -> list[ObsTerm]:
    if not isinstance(spec, list) or not spec:
        raise _fail(where, "observation.terms must be a non-empty list")
    terms = []
    for i, item in enumerate(spec):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or "name" not in item:
            raise _fail(where, f"observation term {i} needs a name: {item!r}")
        name = str(item["name"])
        kind = str(item.get("kind", TERM_ALIASES.get(name, name)))
        if kind not in TERM_KINDS:
            raise _fail(
                where,
                f"observation term '{name}': unknown kind '{kind}' (known: {', '.join(sorted(TERM_KINDS))})",
            )
        dim = TERM_KINDS[kind] or n_joints
        history = int(item.get("history", item.get("history_length", 1)) or 1)
        if history < 1:
            raise _fail(where, f"observation term '{name}': history must be >= 1")
        clip = item.get("clip")
        terms.append(
            ObsTerm(
                name=name,
                kind=kind,
                dim=dim,
                scale=_vector(item.get("scale", 1.0), dim, f"scale of term '{name}'", where),
                clip=None if clip is None else abs(float(clip)),
                history=history,
            )
        )
    return terms


# ---------------------------------------------------------------------------------------------- loaders
def load_manifest_yaml(path: str | Path) -> PolicyManifest:
    """Build a manifest from this project's manifest YAML (see ``docs/policy.md`` for every key)."""
    path = Path(path)
    where = str(path)
    doc = _read_mapping(path, "manifest")
    fmt = doc.get("format", "humanoid_policy/v1")
    if fmt == "isaaclab_deploy":
        return load_isaaclab_deploy(path)
    if fmt != "humanoid_policy/v1":
        raise _fail(where, f"unknown manifest format '{fmt}' (known: humanoid_policy/v1, isaaclab_deploy)")
    onnx = doc.get("onnx")
    if onnx is None:
        raise _fail(where, "onnx (the network file) is missing")
    sources = tuple(onnx) if isinstance(onnx, list) else (onnx if isinstance(onnx, dict) else {"file": onnx},)
    try:
        onnx_path = resolve_sources(sources, path, "policy ONNX")
    except ConfigError as exc:
        raise _fail(where, str(exc)) from exc
    onnx = read_onnx_signature(onnx_path, where)
    inputs, outputs, meta = list(onnx.inputs), list(onnx.outputs), onnx.metadata

    from_meta = doc.get("from_onnx_metadata", {}) or {}
    if not isinstance(from_meta, dict):
        raise _fail(where, "from_onnx_metadata maps manifest fields to ONNX metadata keys")

    def field_value(key: str) -> Any:
        if key in doc:
            return doc[key]
        if key in from_meta:
            meta_key = from_meta[key]
            if meta_key not in meta:
                raise _fail(where, f"{key}: ONNX metadata of {onnx_path.name} has no key '{meta_key}'")
            return meta[meta_key]
        return None

    names = field_value("joint_names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise _fail(where, "joint_names must be a non-empty list of joint names")
    if len(set(names)) != len(names):
        raise _fail(where, "joint_names has duplicates")
    joints = tuple(names)
    n = len(joints)
    virtual = doc.get("virtual_joints") or []
    if not isinstance(virtual, list) or not all(isinstance(v, str) and v in joints for v in virtual):
        raise _fail(where, f"virtual_joints must list joints of joint_names: {virtual!r}")
    gains = doc.get("gains", {}) or {}
    kp = gains.get("kp") if "kp" in gains else field_value("kp")
    kd = gains.get("kd") if "kd" in gains else field_value("kd")
    if kp is None or kd is None:
        raise _fail(
            where, "PD gains missing: give gains.kp and gains.kd, or read them from the ONNX metadata"
        )
    obs = doc.get("observation") or {}
    terms = _terms(obs.get("terms"), n, where)
    order = obs.get("order", "as_listed")
    if order == "alphabetical":
        terms = sorted(terms, key=lambda t: t.name)
    elif order != "as_listed":
        raise _fail(where, f"observation.order must be 'as_listed' or 'alphabetical', not '{order}'")
    action = doc.get("action") or {}
    phase = doc.get("phase")
    clip = action.get("clip")
    manifest = PolicyManifest(
        name=str(doc.get("name", path.stem)),
        source=where,
        onnx_path=onnx_path,
        input_name=str(doc.get("input", next(iter(inputs)))),
        output_name=str(doc.get("output", outputs[0])),
        joint_names=joints,
        default_pose=_vector(doc.get("default_pose"), n, "default_pose", where, joints),
        action_scale=_vector(action.get("scale", 1.0), n, "action.scale", where, joints),
        action_clip=None if clip is None else abs(float(clip)),
        kp=_vector(kp, n, "kp", where, joints),
        kd=_vector(kd, n, "kd", where, joints),
        rate_hz=float(doc.get("rate_hz", 0.0)),
        command_ranges=_command_ranges(field_value("command_ranges") or {}, where),
        terms=tuple(terms),
        history_fill=str(obs.get("history_fill", "zeros")),
        phase=_phase(phase, where),
        metadata={"onnx_metadata_keys": sorted(meta), "format": "humanoid_policy/v1"},
        virtual_joints=tuple(virtual),
    )
    return _check_against_onnx(manifest, onnx)


def _phase(spec: Any, where: str) -> PhaseClock | None:
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise _fail(where, "phase must be a mapping (period_s, start, standing, zero_threshold)")
    period = float(spec.get("period_s", 1.0))
    if not period > 0:
        raise _fail(where, "phase.period_s must be > 0")

    def pair(key: str, default: tuple[float, float]) -> tuple[float, float]:
        value = spec.get(key, default)
        vals = [_angle(v, where) for v in value] if isinstance(value, list) else None
        if vals is None or len(vals) != 2:
            raise _fail(where, f"phase.{key} must be two angles (rad, or strings like 'pi')")
        return vals[0], vals[1]

    return PhaseClock(
        period_s=period,
        start=pair("start", (0.0, math.pi)),
        standing=pair("standing", (math.pi, math.pi)),
        zero_threshold=float(spec.get("zero_threshold", 0.01)),
    )


def _angle(value: Any, where: str) -> float:
    if isinstance(value, str):
        text = value.replace(" ", "")
        m = re.fullmatch(r"(-?)(\d*\.?\d*)\*?pi", text)
        if m:
            factor = float(m.group(2)) if m.group(2) else 1.0
            return (-1.0 if m.group(1) else 1.0) * factor * math.pi
        raise _fail(where, f"cannot read angle {value!r}")
    return float(value)


def holosoma_convention_path() -> Path:
    """The manifest template describing holosoma-inference's G1 29-DoF locomotion convention."""
    return find_policy_file("holosoma/g1_ppo")


def load_holosoma_onnx(onnx_path: str | Path) -> PolicyManifest:
    """A manifest for a holosoma-inference G1 29-DoF locomotion ONNX file given by path.

    Joint names, kp, kd and command ranges come from the file's metadata; the observation convention (terms in
    alphabetical order, scales, phase clock, action scale 0.25, 50 Hz) from ``config/policies/holosoma``.
    """
    template = load_manifest_yaml(holosoma_convention_path())
    onnx_path = Path(onnx_path).resolve()
    where = str(onnx_path)
    onnx = read_onnx_signature(onnx_path, where)
    meta = onnx.metadata
    missing = [k for k in ("dof_names", "kp", "kd") if k not in meta]
    if missing:
        raise _fail(where, f"not a holosoma policy: ONNX metadata lacks {missing}")
    joints = tuple(meta["dof_names"])
    n = len(joints)
    if n != template.num_joints:
        raise _fail(where, f"holosoma G1 locomotion convention expects 29 joints, metadata names {n}")
    default = dict(zip(template.joint_names, template.default_pose, strict=True))
    manifest = replace(
        template,
        name=onnx_path.stem,
        source=where,
        onnx_path=onnx_path,
        joint_names=joints,
        default_pose=np.array([default[j] for j in joints]) if set(joints) == set(default) else np.zeros(n),
        kp=_vector(meta["kp"], n, "kp", where),
        kd=_vector(meta["kd"], n, "kd", where),
        command_ranges=_command_ranges(meta.get("command_ranges", {}), where),
        input_name=next(iter(onnx.inputs)),
        output_name=next(iter(onnx.outputs)),
        metadata={"format": "holosoma ONNX"},
    )
    return _check_against_onnx(manifest, onnx)


def load_isaaclab_deploy(
    deploy_yaml: str | Path, onnx_path: str | Path | None = None, robot: RobotConfig | None = None
) -> PolicyManifest:
    """A manifest from an Isaac Lab deploy YAML (unitree_rl_lab ``params/deploy.yaml`` layout).

     Per-joint arrays are in the policy's order; ``joint_ids_map[i]`` is the robot (SDK) index of policy joint
     ``i``. Joint names come from a ``joint_names`` key if present, else from ``robot``'s joint order, which
    must
     then be the SDK order. Observations are concatenated in the YAML's order, each term's history oldest
     first, filled with the first sample (Isaac Lab's circular buffer). The ONNX defaults to
     ``../exported/policy.onnx`` next to ``params/``, or an ``onnx`` key relative to the YAML.
    """
    path = Path(deploy_yaml)
    where = str(path)
    doc = _read_mapping(path, "deploy YAML")
    for key in ("step_dt", "stiffness", "damping", "default_joint_pos", "actions", "observations"):
        if key not in doc:
            raise _fail(where, f"deploy YAML lacks '{key}'")
    if onnx_path is None:
        onnx_path = (
            path.parent / doc["onnx"] if "onnx" in doc else path.parent.parent / "exported" / "policy.onnx"
        )
    onnx_path = Path(onnx_path)
    onnx = read_onnx_signature(onnx_path, where)
    n = len(doc["default_joint_pos"])
    if "joint_names" in doc:
        joints = tuple(doc["joint_names"])
    else:
        if robot is None:
            raise _fail(
                where, "no joint_names in the deploy YAML: pass the robot whose joint order is the SDK's"
            )
        ids = doc.get("joint_ids_map", list(range(n)))
        if len(ids) != n or any(not 0 <= int(i) < robot.num_joints for i in ids):
            raise _fail(
                where, f"joint_ids_map {ids} does not index the {robot.num_joints} joints of {robot.name}"
            )
        joints = tuple(robot.joint_names[int(i)] for i in ids)
    if len(joints) != n:
        raise _fail(where, f"{len(joints)} joint names for {n} default_joint_pos values")
    action_cfg = doc["actions"]
    if not isinstance(action_cfg, dict) or not action_cfg:
        raise _fail(where, "actions must hold one action term (e.g. JointPositionAction)")
    act = next(iter(action_cfg.values()))
    clip = act.get("clip")
    if isinstance(clip, (list, dict)):
        raise _fail(where, "per-joint action clip ranges are not supported; use a symmetric scalar")
    obs_cfg = doc["observations"]
    if not isinstance(obs_cfg, dict):
        raise _fail(where, "observations must map term names to {scale, clip, history_length}")
    terms = _terms(
        [
            {
                "name": k,
                "scale": (v or {}).get("scale", 1.0),
                "clip": (v or {}).get("clip"),
                "history": (v or {}).get("history_length", 1) or 1,
            }
            for k, v in obs_cfg.items()
        ],
        n,
        where,
    )
    ranges = ((doc.get("commands") or {}).get("base_velocity") or {}).get("ranges") or {}
    step_dt = float(doc["step_dt"])
    if not step_dt > 0:
        raise _fail(where, "step_dt must be > 0")
    offset = act.get("offset", doc["default_joint_pos"])
    manifest = PolicyManifest(
        name=path.parent.parent.name if path.parent.name == "params" else path.stem,
        source=where,
        onnx_path=onnx_path,
        input_name=next(iter(onnx.inputs)),
        output_name=next(iter(onnx.outputs)),
        joint_names=joints,
        default_pose=_vector(offset, n, "actions offset", where),
        action_scale=_vector(act.get("scale", 1.0), n, "actions scale", where),
        action_clip=None if clip is None else abs(float(clip)),
        kp=_vector(doc["stiffness"], n, "stiffness", where),
        kd=_vector(doc["damping"], n, "damping", where),
        rate_hz=1.0 / step_dt,
        command_ranges=_command_ranges(ranges, where),
        terms=tuple(terms),
        history_fill="first",
        phase=None,
        metadata={"format": "Isaac Lab deploy.yaml"},
    )
    return _check_against_onnx(manifest, onnx)


# ---------------------------------------------------------------------------------------------- lookup
def _policy_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent.parent
    dirs = [here / "config" / "policies"]
    try:
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory("humanoid_stack")) / "config" / "policies")
    except Exception:
        pass
    dirs.append(Path(sys.prefix) / "share" / "humanoid_stack" / "config" / "policies")
    return dirs


def known_policies() -> list[str]:
    """Names accepted by :func:`load_policy` (``config/policies/<group>/<name>.yaml``)."""
    names = set()
    for d in _policy_dirs():
        for p in d.glob("*/*.yaml"):
            names.add(f"{p.parent.name}/{p.stem}")
    return sorted(names)


def find_policy_file(policy: str) -> Path:
    """Path of a policy given by name (``holosoma/g1_ppo``) or by path (``.yaml`` / ``.onnx``)."""
    candidate = Path(policy).expanduser()
    if policy.endswith((".yaml", ".yml", ".onnx")):
        if not candidate.is_file():
            raise ManifestError(f"policy file not found: {candidate}")
        return candidate
    if not re.fullmatch(r"[A-Za-z0-9_\-]+(/[A-Za-z0-9_\-]+)?", policy):
        raise ManifestError(f"invalid policy name '{policy}'")
    for d in _policy_dirs():
        path = d / f"{policy}.yaml"
        if path.is_file():
            return path
    raise ManifestError(f"unknown policy '{policy}' (known: {', '.join(known_policies()) or 'none'})")


POLICY_FORMATS = ("manifest", "holosoma_onnx", "isaaclab_deploy", "isaaclab_io_descriptors")


def policy_format(path: Path) -> str:
    """Which loader reads ``path``: one of :data:`POLICY_FORMATS` (sniffed from its top-level keys)."""
    if path.suffix == ".onnx":
        return "holosoma_onnx"
    text = path.read_text(errors="replace")
    if re.search(r"^format:", text, re.M):
        return "manifest"
    if re.search(r"^joint_ids_map:|^step_dt:", text, re.M):
        return "isaaclab_deploy"
    if re.search(r"^articulations:|^scene:", text, re.M) and re.search(r"^observations:", text, re.M):
        return "isaaclab_io_descriptors"
    return "manifest"


def load_policy_file(
    path: Path, robot: RobotConfig | None = None, onnx: str | Path | None = None
) -> PolicyManifest:
    """Load a policy file with the loader of its :func:`policy_format` (no robot fit check).

    ``onnx`` names the network of an Isaac Lab IO-descriptor or deploy YAML when it does not lie where the
    loader looks by default (the other formats name their network themselves: refused there). ``robot``
    gives a deploy YAML without ``joint_names`` its joint order.
    """
    fmt = policy_format(path)
    if onnx is not None and fmt not in ("isaaclab_io_descriptors", "isaaclab_deploy"):
        raise ManifestError(f"{path}: an ONNX path goes only with Isaac Lab IO descriptors or deploy.yaml")
    if fmt == "holosoma_onnx":
        return load_holosoma_onnx(path)
    if fmt == "isaaclab_deploy":
        return load_isaaclab_deploy(path, onnx_path=onnx, robot=robot)
    if fmt == "isaaclab_io_descriptors":
        return load_isaaclab_io_descriptors(path, onnx_path=onnx)
    return load_manifest_yaml(path)


def load_policy(
    policy: str, robot: RobotConfig | None = None, onnx: str | Path | None = None
) -> PolicyManifest:
    """Load and check a policy by name or path (:func:`load_policy_file`); with ``robot``, also check it
    fits that robot."""
    manifest = load_policy_file(find_policy_file(policy), robot, onnx)
    if robot is not None:
        manifest.check_robot(robot)
    return manifest


__all__ = [
    "COMMAND_AXES",
    "POLICY_FORMATS",
    "TERM_ALIASES",
    "TERM_KINDS",
    "ManifestError",
    "ObsTerm",
    "OnnxSignature",
    "PhaseClock",
    "PolicyManifest",
    "RecurrentState",
    "find_policy_file",
    "holosoma_convention_path",
    "known_policies",
    "load_holosoma_onnx",
    "load_isaaclab_deploy",
    "load_isaaclab_io_descriptors",
    "load_manifest_yaml",
    "load_policy",
    "load_policy_file",
    "onnx_problems",
    "policy_format",
    "read_onnx_signature",
]
