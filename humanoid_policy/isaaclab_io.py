"""Isaac Lab IO descriptors (``IO_descriptors.yaml``) -> :class:`~humanoid_policy.manifest.PolicyManifest`.

Isaac Lab (>= 2.2) writes this file for a manager-based environment when ``env.export_io_descriptors`` is set
(``<log_dir>/io_descriptors/IO_descriptors.yaml``; the docs' examples are named
``<task>_IO_descriptors.yaml``). Top-level keys, as exported:

- ``actions``: action terms in the action manager's order. Supported: one ``JointPositionAction``
  (``full_path`` ``...joint_actions.JointPositionAction``) with ``joint_names`` (the policy's output order),
  ``scale`` and ``offset`` (scalar or one per joint), ``clip`` (``null`` or per joint ``[lo, hi]`` of the
  *target*) and ``shape`` ``[n]``. Target ``q* = offset + scale * action`` (rad), then clipped.
- ``articulations``: per articulation (``robot``): ``joint_names`` and, in that order,
  ``default_joint_pos`` (rad), ``default_joint_stiffness`` (N m/rad), ``default_joint_damping`` (N m s/rad),
  ``default_joint_pos_limits``, ... The policy's PD gains and default pose are read from here by joint name.
- ``observations``: ``{policy: [term, ...]}`` in concatenation order. Each term: ``name`` (the observation
  function, e.g. ``joint_pos_rel``), ``full_path``, ``shape`` ``[d]`` (one sample), ``overloads``
  (``scale``, ``clip`` ``[lo, hi]``, ``history_length``, ``flatten_history_dim``), and for joint terms
  ``joint_names`` with ``joint_pos_offsets`` / ``joint_vel_offsets``.
- ``scene``: ``dt`` (policy period, s), ``decimation``, ``physics_dt`` (s).

Semantics of Isaac Lab's observation manager, reproduced by the observation builder: a term's value (joint
terms minus their offsets) is clipped to ``clip``, *then* scaled; ``history_length`` h > 0 keeps h samples,
oldest first, flattened, all equal to the first sample after a reset (h = 0: the sample alone). The
``last_action`` term is the raw network output of the previous step (zero after a reset).

Frames and units: ``base_ang_vel`` in the base (IMU) frame (rad/s); ``projected_gravity`` the unit gravity
direction in the base frame; ``generated_commands`` the velocity command (vx, vy in m/s, wz in rad/s, heading
frame). The file carries no command ranges: commands pass unclipped.

Joints are matched by name everywhere (Isaac Lab orders them breadth-first over the articulation tree, not in
the robot's SDK order). Every problem of a file is collected (:func:`parse_isaaclab_io_descriptors`), so the
check tool can list them all; :func:`load_isaaclab_io_descriptors` raises them as one error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_policy.manifest_onnx import onnx_problems, read_onnx_signature
from humanoid_policy.manifest_types import ManifestError, ObsTerm, PolicyManifest, _read_mapping, _vector

DESCRIPTOR_SUFFIX = "_IO_descriptors"


@dataclass(frozen=True)
class TermKind:
    """How an Isaac Lab observation function maps onto the builder.

    Attributes:
        kind: builder term kind (``humanoid_policy.manifest.TERM_KINDS``).
        dim: values per sample (``None``: one per joint).
        offsets: key of the per-joint offsets in the descriptor (``None``: no offsets; ``""``: zero).
    """

    kind: str
    dim: int | None
    offsets: str | None = None


# Isaac Lab observation functions (``isaaclab.envs.mdp.observations``) the runner can compute.
IO_TERMS: dict[str, TermKind] = {
    "base_ang_vel": TermKind("base_ang_vel", 3),
    "projected_gravity": TermKind("projected_gravity", 3),
    "generated_commands": TermKind("velocity_command", 3),
    "velocity_commands": TermKind("velocity_command", 3),
    "joint_pos_rel": TermKind("dof_pos", None, "joint_pos_offsets"),
    "joint_pos": TermKind("dof_pos", None, ""),
    "joint_vel_rel": TermKind("dof_vel", None, "joint_vel_offsets"),
    "joint_vel": TermKind("dof_vel", None, ""),
    "last_action": TermKind("actions", None),
}
# Known Isaac Lab terms the runner cannot observe, with the reason.
UNOBSERVABLE_TERMS = {
    "base_lin_vel": "needs the base linear velocity, which the policy runner does not observe",
    "height_scan": "needs a height scanner",
    "base_pos_z": "needs the base height",
    "root_pos_w": "needs the world position of the base",
    "root_lin_vel_w": "needs the base linear velocity",
}


class _Problems:
    """Collects problems of one file instead of stopping at the first."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str) -> None:
        self.items.append(message)

    def vector(self, value: Any, n: int, what: str, fallback: float) -> np.ndarray:
        """:func:`_vector`, a problem (and ``fallback`` values) instead of an exception."""
        try:
            return _vector(value, n, what, "")
        except ManifestError as exc:
            self.add(str(exc).removeprefix(": "))
            return np.full(n, fallback)


def find_descriptor_onnx(path: Path) -> tuple[Path | None, list[Path]]:
    """The ONNX network of an IO-descriptor file and the candidates tried, in order: ``<task>.onnx`` beside
    ``<task>_IO_descriptors.yaml``, ``policy.onnx`` beside it, and ``../exported/policy.onnx`` (Isaac Lab's
    run folder: ``io_descriptors/`` next to ``exported/``)."""
    candidates = []
    if path.stem.endswith(DESCRIPTOR_SUFFIX) and len(path.stem) > len(DESCRIPTOR_SUFFIX):
        candidates.append(path.with_name(path.stem[: -len(DESCRIPTOR_SUFFIX)] + ".onnx"))
    candidates += [path.with_name("policy.onnx"), path.parent.parent / "exported" / "policy.onnx"]
    return next((c for c in candidates if c.is_file()), None), candidates


def _term_key(term: dict[str, Any]) -> str:
    name = str(term.get("name") or "")
    return name or str(term.get("full_path") or "").rsplit(".", 1)[-1]


def _names(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _action(doc: dict[str, Any], p: _Problems) -> dict[str, Any] | None:
    """The single ``JointPositionAction`` term, or None (problems noted)."""
    actions = doc.get("actions")
    if not isinstance(actions, list) or not actions:
        p.add("actions must list the action terms (one JointPositionAction)")
        return None
    found = []
    for i, term in enumerate(actions):
        path = str((term or {}).get("full_path", "")) if isinstance(term, dict) else ""
        if path.rsplit(".", 1)[-1] == "JointPositionAction":
            found.append(term)
        else:
            what = f"'{path}'" if path else repr(term)
            p.add(f"action term {i} {what} is not supported (only JointPositionAction)")
    if len(found) > 1:
        p.add(f"{len(found)} JointPositionAction terms; one is supported")
    return found[0] if found else None


def _articulation(doc: dict[str, Any], p: _Problems) -> dict[str, Any]:
    arts = doc.get("articulations")
    if not isinstance(arts, dict) or not arts:
        p.add("articulations (joint names, default positions, stiffness, damping) are missing")
        return {}
    if len(arts) == 1:
        art = next(iter(arts.values()))
    elif "robot" in arts:
        art = arts["robot"]
    else:
        p.add(f"several articulations {sorted(arts)} and none called 'robot'")
        return {}
    return art if isinstance(art, dict) else {}


def _by_name(art: dict[str, Any], key: str, joints: tuple[str, ...], p: _Problems) -> np.ndarray:
    """Per-joint values of the articulation's ``key`` for ``joints`` (by name); NaN where unknown."""
    names = _names(art.get("joint_names")) or ()
    values = art.get(key)
    if not isinstance(values, list) or len(values) != len(names):
        p.add(f"articulation {key} must list one value per articulation joint ({len(names)})")
        return np.full(len(joints), np.nan)
    table = dict(zip(names, values, strict=True))
    return np.array([float(table[j]) if j in table else np.nan for j in joints])


def _clip_range(value: Any, what: str, p: _Problems) -> tuple[float, float] | None:
    if value is None:
        return None
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        p.add(f"{what}: clip must be [lo, hi], got {value!r}")
        return None
    if not lo <= hi:
        p.add(f"{what}: clip [{lo}, {hi}] is not an interval")
        return None
    return lo, hi


def _terms(doc: dict[str, Any], actions: tuple[str, ...], art: dict[str, Any], p: _Problems) -> list[ObsTerm]:
    obs = doc.get("observations")
    group = obs.get("policy") if isinstance(obs, dict) else None
    if not isinstance(group, list) or not group:
        p.add("observations.policy must list the policy's observation terms")
        return []
    terms = []
    for i, term in enumerate(group):
        if not isinstance(term, dict):
            p.add(f"observation term {i} is not a mapping")
            continue
        key = _term_key(term)
        label = f"observation term '{key}'"
        shape = term.get("shape")
        if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and shape[0] > 0):
            p.add(f"{label}: shape must be [size], got {shape!r}")
            continue
        dim = int(shape[0])
        over = term.get("overloads") or {}
        history = over.get("history_length") or 0
        if not isinstance(history, int) or history < 0:
            p.add(f"{label}: history_length must be an integer >= 0, got {history!r}")
            history = 0
        if history > 0 and over.get("flatten_history_dim", True) is not True:
            p.add(f"{label}: history without flatten_history_dim cannot feed a flat observation")
        modifiers = (term.get("extras") or {}).get("modifiers")
        if modifiers:
            p.add(f"{label}: observation modifiers are not supported ({modifiers!r})")
        spec = IO_TERMS.get(key)
        if spec is None:
            reason = UNOBSERVABLE_TERMS.get(key, "not a term the runner knows")
            p.add(f"unknown term '{key}' ({term.get('full_path', 'no full_path')}): {reason}")
            terms.append(ObsTerm(key, "unsupported", dim, np.ones(dim), history=max(history, 1)))
            continue
        joints: tuple[str, ...] = ()
        offset = None
        if spec.kind == "actions" and dim != len(actions):
            p.add(f"size mismatch: {label} has {dim} values, the action has {len(actions)}")
        elif spec.kind in ("dof_pos", "dof_vel"):
            joints = _names(term.get("joint_names")) or actions
            if len(joints) != dim:
                p.add(f"size mismatch: {label} names {len(joints)} joints for shape [{dim}]")
                continue
            if spec.offsets == "":
                offset = np.zeros(dim)
            elif spec.offsets is not None and term.get(spec.offsets) is not None:
                offset = p.vector(term[spec.offsets], dim, f"{label} {spec.offsets}", 0.0)
            elif spec.kind == "dof_pos":  # Isaac Lab's offsets are the articulation's defaults
                offset = _by_name(art, "default_joint_pos", joints, p)
            else:
                offset = np.zeros(dim)
        elif spec.dim is not None and dim != spec.dim:
            p.add(f"size mismatch: {label} has shape [{dim}], expected [{spec.dim}]")
            continue
        scale = over.get("scale")
        terms.append(
            ObsTerm(
                name=key,
                kind=spec.kind,
                dim=dim,
                scale=p.vector(1.0 if scale is None else scale, dim, f"{label} scale", 1.0),
                history=max(history, 1),
                joints=joints if joints != actions else (),
                offset=offset,
                clip_range=_clip_range(over.get("clip"), label, p),
            )
        )
    return terms


def _target_clip(value: Any, n: int, p: _Problems) -> np.ndarray | None:
    if value is None:
        return None
    arr = np.asarray(value, dtype=float) if isinstance(value, list) else np.empty(0)
    if arr.shape == (2,):
        arr = np.tile(arr, (n, 1))
    if arr.shape != (n, 2) or not np.all(arr[:, 0] <= arr[:, 1]):
        p.add(f"action clip must be [lo, hi] or one [lo, hi] per joint ({n}), got {value!r}")
        return None
    return arr


def _rate(doc: dict[str, Any], p: _Problems) -> float:
    scene = doc.get("scene")
    if not isinstance(scene, dict):
        p.add("scene (dt, decimation, physics_dt) is missing")
        return 0.0
    try:
        dt = float(scene.get("dt"))
    except (TypeError, ValueError):
        dt = float("nan")
    if not (math.isfinite(dt) and dt > 0):
        p.add(f"scene.dt must be > 0 s, got {scene.get('dt')!r}")
        return 0.0
    decimation, physics_dt = scene.get("decimation"), scene.get("physics_dt")
    if (
        decimation is not None
        and physics_dt is not None
        and abs(int(decimation) * float(physics_dt) - dt) > 1e-6
    ):
        p.add(f"scene.dt {dt} is not decimation {decimation} x physics_dt {physics_dt}")
    return 1.0 / dt


def parse_isaaclab_io_descriptors(
    path: str | Path, onnx_path: str | Path | None = None
) -> tuple[PolicyManifest | None, list[str]]:
    """Read an IO-descriptor file and its ONNX network, collecting every problem.

    Returns the manifest (``None`` if the file is too broken to build one; with problems, terms the runner
    cannot compute have kind ``unsupported``: print it, do not run it) and the problems found, each a
    sentence naming the term, joint or size concerned. Robot fit is not checked here
    (:meth:`PolicyManifest.robot_problems`).
    """
    path = Path(path)
    where = str(path)
    doc = _read_mapping(path, "IO-descriptor YAML")
    p = _Problems()
    act = _action(doc, p)
    art = _articulation(doc, p)
    if act is None:
        return None, p.items
    joints = _names(act.get("joint_names"))
    if joints is None:
        p.add("the JointPositionAction has no joint_names")
        return None, p.items
    n = len(joints)
    if len(set(joints)) != n:
        p.add(f"action joint_names has duplicates: {sorted({j for j in joints if joints.count(j) > 1})}")
    shape = act.get("shape")
    if shape is not None and list(shape) != [n]:
        p.add(f"size mismatch: action shape {shape} for {n} joint_names")
    art_names = set(_names(art.get("joint_names")) or ())
    absent = [j for j in joints if j not in art_names]
    if art and absent:
        p.add(f"action joints {absent} are not joints of the articulation")
    default = _by_name(art, "default_joint_pos", joints, p)
    kp = _by_name(art, "default_joint_stiffness", joints, p)
    kd = _by_name(art, "default_joint_damping", joints, p)
    terms = _terms(doc, joints, art, p)
    rate = _rate(doc, p)
    if onnx_path is None:
        found, tried = find_descriptor_onnx(path)
        if found is None:
            p.add(f"no ONNX network found (tried {', '.join(str(c) for c in tried)}; or name one)")
            return None, p.items
        onnx_path = found
    try:
        onnx = read_onnx_signature(Path(onnx_path), where)
    except ManifestError as exc:
        p.add(str(exc).removeprefix(where + ": "))
        return None, p.items
    inputs, outputs = list(onnx.inputs), list(onnx.outputs)
    manifest = PolicyManifest(
        name=path.stem.removesuffix(DESCRIPTOR_SUFFIX) or path.parent.name,
        source=where,
        onnx_path=Path(onnx_path),
        input_name="obs" if "obs" in inputs else inputs[0],
        output_name="actions" if "actions" in outputs else outputs[0],
        joint_names=joints,
        default_pose=np.nan_to_num(default),
        action_scale=p.vector(act.get("scale", 1.0), n, "action scale", 1.0),
        action_clip=None,
        kp=np.nan_to_num(kp),
        kd=np.nan_to_num(kd),
        rate_hz=rate,
        command_ranges={axis: (-math.inf, math.inf) for axis in ("lin_vel_x", "lin_vel_y", "ang_vel_z")},
        terms=tuple(terms),
        history_fill="first",
        metadata={"format": "Isaac Lab IO descriptors", "scene": doc.get("scene")},
        action_offset=p.vector(act.get("offset", 0.0), n, "action offset", 0.0),
        target_clip=_target_clip(act.get("clip"), n, p),
    )
    states, problems = onnx_problems(manifest, onnx)
    for problem in problems:
        p.add(problem)
    return replace(manifest, recurrent=tuple(states)), p.items


def load_isaaclab_io_descriptors(path: str | Path, onnx_path: str | Path | None = None) -> PolicyManifest:
    """A manifest from an Isaac Lab ``IO_descriptors.yaml`` and its ONNX network (by default found by
    :func:`find_descriptor_onnx`); :class:`ManifestError` listing every problem of the file otherwise."""
    manifest, problems = parse_isaaclab_io_descriptors(path, onnx_path)
    if problems or manifest is None:
        raise ManifestError(f"{path}: " + " | ".join(problems or ["cannot build a manifest"]))
    return manifest
