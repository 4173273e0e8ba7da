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

About 800 lines for one concept, the manifest contract: the loaders share its validation (``_vector``,
``_terms``, ``onnx_problems``, ``robot_problems``), so they stay with it; the IO-descriptor loader, which
collects every problem of a file rather than raising the first, has its own module.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from humanoid_control.model.robot_config import ConfigError, RobotConfig, resolve_sources


class ManifestError(ValueError):
    """A policy manifest is malformed or does not fit the ONNX model or the robot; the message says how."""


# Observation term kinds the builder knows, with their size (``None`` = one value per policy joint).
TERM_KINDS: dict[str, int | None] = {
    "base_ang_vel": 3,  # IMU angular velocity in the base frame (rad/s)
    "projected_gravity": 3,  # unit gravity vector in the base frame
    "command_lin_vel": 2,  # (vx, vy) command (m/s)
    "command_ang_vel": 1,  # (wz) command (rad/s)
    "velocity_command": 3,  # (vx, vy, wz)
    "dof_pos": None,  # q - default pose (rad)
    "dof_vel": None,  # dq (rad/s)
    "actions": None,  # last raw policy output
    "sin_phase": 2,  # sin of the gait phase of each leg
    "cos_phase": 2,
}
# Names other frameworks use for the same quantities.
TERM_ALIASES = {
    "ang_vel": "base_ang_vel",
    "gravity_vec": "projected_gravity",
    "velocity_commands": "velocity_command",
    "commands": "velocity_command",
    "joint_pos_rel": "dof_pos",
    "joint_pos": "dof_pos",
    "joint_vel_rel": "dof_vel",
    "joint_vel": "dof_vel",
    "last_action": "actions",
}
COMMAND_AXES = ("lin_vel_x", "lin_vel_y", "ang_vel_z")


@dataclass(frozen=True)
class ObsTerm:
    """One observation term.

    Attributes:
        name: the term's name in the source convention (sorting key for ``order: alphabetical``).
        kind: one of :data:`TERM_KINDS`.
        dim: values per sample.
        scale: multiplier, scalar or one per value.
        clip: symmetric clip applied after scaling (``None``: none).
        history: samples kept, oldest first in the vector (per term, as Isaac Lab and holosoma do).
        joints: joint names of a per-joint term (``dof_pos``, ``dof_vel``) when they are not the policy's
            action joints (empty: the manifest's ``joint_names``).
        offset: subtracted from a per-joint term's raw value, per joint (rad, rad/s); ``None``: ``dof_pos``
            uses the manifest's ``default_pose``, ``dof_vel`` zero.
        clip_range: ``(lo, hi)`` clip of the raw value (after the offset) *before* scaling, Isaac Lab's order
            (``None``: none).
    """

    name: str
    kind: str
    dim: int
    scale: np.ndarray
    clip: float | None = None
    history: int = 1
    joints: tuple[str, ...] = ()
    offset: np.ndarray | None = None
    clip_range: tuple[float, float] | None = None

    @property
    def size(self) -> int:
        """Entries this term occupies in the observation vector."""
        return self.dim * self.history


@dataclass(frozen=True)
class PhaseClock:
    """Gait clock: one phase per leg (rad, wrapped to [-pi, pi)), advanced once per policy step.

    Attributes:
        period_s: gait period (s); the phase advances ``2 pi / (rate_hz period_s)`` per step.
        start: phases when walking starts (left, right).
        standing: phases held while the command is (near) zero.
        zero_threshold: a command whose linear and angular norms are both below this counts as zero.
    """

    period_s: float = 1.0
    start: tuple[float, float] = (0.0, math.pi)
    standing: tuple[float, float] = (math.pi, math.pi)
    zero_threshold: float = 0.01


@dataclass(frozen=True)
class RecurrentState:
    """A recurrent network's state tensor: fed as ``input``, read back from ``output`` after each step.

    Isaac Lab's LSTM exporter writes ``h_in`` / ``c_in`` -> ``h_out`` / ``c_out`` of shape
    ``(num_layers, 1, hidden)``; the state starts at zero and is zeroed again on every policy reset.
    """

    input: str
    output: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class PolicyManifest:
    """The full contract of one policy (all per-joint arrays in the *policy's* joint order).

    Attributes:
        name: display name. source: where the manifest came from (file path).
        onnx_path: the network. input_name / output_name: its tensors.
        joint_names: the policy's joint order (names as in the robot configuration).
        default_pose: action offset and ``dof_pos`` reference (rad).
        action_scale: target = default_pose + action_scale * action (rad per unit action).
        action_clip: symmetric clip of the raw action before use and feedback (``None``: none).
        kp, kd: PD gains the joints must run with (N m/rad, N m s/rad).
        rate_hz: policy steps per second.
        command_ranges: ``{lin_vel_x|lin_vel_y|ang_vel_z: (lo, hi)}``; commands are clipped to them.
        terms: observation terms in vector order.
        history_fill: ``zeros`` or ``first`` (repeat the first sample).
        phase: gait clock, if the policy observes one.
        action_offset: target offset when it is not ``default_pose`` (Isaac Lab's ``JointPositionAction``
            ``offset``; ``None``: ``default_pose``).
        target_clip: per-joint ``(lo, hi)`` clip of the targets (rad) after scale and offset, shape (n, 2)
            (Isaac Lab's ``JointAction`` ``clip``; ``None``: none).
        recurrent: state tensors of a recurrent network (empty: feed-forward).
    """

    name: str
    source: str
    onnx_path: Path
    input_name: str
    output_name: str
    joint_names: tuple[str, ...]
    default_pose: np.ndarray
    action_scale: np.ndarray
    action_clip: float | None
    kp: np.ndarray
    kd: np.ndarray
    rate_hz: float
    command_ranges: dict[str, tuple[float, float]]
    terms: tuple[ObsTerm, ...]
    history_fill: str = "zeros"
    phase: PhaseClock | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    action_offset: np.ndarray | None = None
    target_clip: np.ndarray | None = None
    recurrent: tuple[RecurrentState, ...] = ()

    @property
    def target_offset(self) -> np.ndarray:
        """Joint target for a zero action (rad, policy order)."""
        return self.default_pose if self.action_offset is None else self.action_offset

    @property
    def num_joints(self) -> int:
        """Joints the policy commands."""
        return len(self.joint_names)

    @property
    def obs_size(self) -> int:
        """Length of the observation vector."""
        return sum(t.size for t in self.terms)

    def term_slices(self) -> dict[str, slice]:
        """Where each term sits in the observation vector."""
        out: dict[str, slice] = {}
        start = 0
        for t in self.terms:
            out[t.name] = slice(start, start + t.size)
            start += t.size
        return out

    def robot_indices(self, robot: RobotConfig) -> np.ndarray:
        """Index in the robot's joint order of each policy joint (raises if the robot lacks one)."""
        index = {n: i for i, n in enumerate(robot.joint_names)}
        missing = [n for n in self.joint_names if n not in index]
        if missing:
            raise ManifestError(
                f"policy '{self.name}' commands joints that robot '{robot.name}' does not have: {missing}"
            )
        return np.array([index[n] for n in self.joint_names], dtype=int)

    def robot_problems(self, robot: RobotConfig) -> list[str]:
        """Every way the policy does not fit ``robot``, one message each (empty: it fits).

        Joints are matched by name: a policy or observation joint the robot lacks; the default pose outside
        the joint limits; gains above the robot's ``gain_limits``.
        """
        known = set(robot.joint_names)
        problems = []
        missing = [n for n in self.joint_names if n not in known]
        if missing:
            problems.append(f"unknown joints: robot '{robot.name}' has no {missing}")
        for term in self.terms:
            absent = [n for n in term.joints if n not in known]
            if absent:
                problems.append(f"observation term '{term.name}' reads unknown joints {absent}")
        index = {n: i for i, n in enumerate(robot.joint_names)}
        rows = [(i, index[n]) for i, n in enumerate(self.joint_names) if n in index]
        lower, upper = robot.array("lower"), robot.array("upper")
        outside = [
            f"{self.joint_names[i]} {self.default_pose[i]:+.4f} not in [{lower[r]:+.4f}, {upper[r]:+.4f}]"
            for i, r in rows
            if not lower[r] <= self.default_pose[i] <= upper[r]
        ]
        if outside:
            problems.append(f"default pose outside the joint limits: {'; '.join(outside)}")
        kp, kd = np.zeros(robot.num_joints), np.zeros(robot.num_joints)
        for i, r in rows:
            kp[r], kd[r] = self.kp[i], self.kd[i]
        beyond = robot.gain_limit_violations(kp, kd)
        if beyond:
            problems.append(f"gains beyond the robot's limits: {'; '.join(beyond)}")
        return problems

    def check_robot(self, robot: RobotConfig) -> np.ndarray:
        """Check the policy fits ``robot`` (:meth:`robot_problems`, all of them in one error); the robot
        indices of the policy's joints."""
        problems = self.robot_problems(robot)
        if problems:
            fit = f"policy '{self.name}' does not fit robot '{robot.name}'"
            raise ManifestError(f"{fit}: " + " | ".join(problems))
        return self.robot_indices(robot)


# ---------------------------------------------------------------------------------------------- helpers
def _fail(where: str, message: str) -> ManifestError:
    return ManifestError(f"{where}: {message}")


def _vector(value: Any, n: int, what: str, where: str, names: tuple[str, ...] | None = None) -> np.ndarray:
    """A float vector of length n from a scalar, a list, or a ``{joint name or regex: value}`` table."""
    if value is None:
        raise _fail(where, f"{what} is missing")
    if isinstance(value, dict):
        if names is None:
            raise _fail(where, f"{what}: a name table needs joint names")
        out = np.full(n, np.nan)
        for i, name in enumerate(names):
            for pattern, v in value.items():
                if re.fullmatch(str(pattern), name):
                    out[i] = float(v)
                    break
        missing = [names[i] for i in np.flatnonzero(np.isnan(out))]
        if missing:
            raise _fail(where, f"{what}: no value for joints {missing}")
        return out
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise _fail(where, f"{what} is not numeric: {value!r}") from exc
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise _fail(where, f"{what} has {arr.size} values, expected {n}")
    if not np.all(np.isfinite(arr)):
        raise _fail(where, f"{what} has non-finite values")
    return arr


@dataclass(frozen=True)
class OnnxSignature:
    """Tensors of an ONNX model: name -> shape (``None`` for a symbolic dimension), in graph order, and its
    custom metadata (JSON-decoded where possible)."""

    path: Path
    inputs: dict[str, tuple[int | None, ...]]
    outputs: dict[str, tuple[int | None, ...]]
    metadata: dict[str, Any]

    def last_dim(self, shapes: dict[str, tuple[int | None, ...]], name: str) -> int | None:
        """The last dimension of tensor ``name`` in ``shapes`` (None if unknown)."""
        shape = shapes.get(name, ())
        return shape[-1] if shape else None

    def recurrent_state(self, obs_input: str) -> tuple[list[RecurrentState], list[str]]:
        """State tensors besides ``obs_input``: each ``<x>_in`` input paired with its ``<x>_out`` output
        (Isaac Lab's exporter: ``h_in``/``c_in`` -> ``h_out``/``c_out``); the problems found."""
        states, problems = [], []
        for name, shape in self.inputs.items():
            if name == obs_input:
                continue
            out = name[: -len("_in")] + "_out" if name.endswith("_in") else None
            if out is None or out not in self.outputs:
                problems.append(
                    f"ONNX {self.path.name} has an input '{name}' besides the observation '{obs_input}' and "
                    f"no matching state output (a recurrent state '<x>_in' needs an output '<x>_out')"
                )
            elif any(d is None for d in shape) or self.outputs[out] != shape:
                problems.append(
                    f"recurrent state '{name}' -> '{out}' needs one fixed shape, got {list(shape)} and "
                    f"{list(self.outputs[out])}"
                )
            else:
                states.append(RecurrentState(name, out, tuple(int(d) for d in shape)))  # type: ignore[arg-type]
        return states, problems


def read_onnx_signature(path: Path, where: str) -> OnnxSignature:
    """Load ``path`` with onnxruntime (CPU) and describe its tensors; ManifestError if it cannot."""
    import onnxruntime as ort

    if not path.is_file():
        raise _fail(where, f"ONNX file not found: {path}")
    try:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise _fail(where, f"cannot load ONNX file {path}: {exc}") from exc

    def shapes(tensors: Any) -> dict[str, tuple[int | None, ...]]:
        return {t.name: tuple(d if isinstance(d, int) else None for d in (t.shape or ())) for t in tensors}

    meta: dict[str, Any] = {}
    for key, raw in session.get_modelmeta().custom_metadata_map.items():
        try:
            meta[key] = json.loads(raw)
        except (ValueError, TypeError):
            meta[key] = raw
    return OnnxSignature(path, shapes(session.get_inputs()), shapes(session.get_outputs()), meta)


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


def onnx_problems(m: PolicyManifest, onnx: OnnxSignature) -> tuple[list[RecurrentState], list[str]]:
    """The manifest against its network: tensor names, observation and action sizes (both named when they
    differ), recurrent state pairs, gains, rate, phase clock. The recurrent states and every problem."""
    problems = []
    name = onnx.path.name
    if m.input_name not in onnx.inputs:
        problems.append(f"ONNX {name} has no input '{m.input_name}' (inputs: {list(onnx.inputs)})")
    if m.output_name not in onnx.outputs:
        problems.append(f"ONNX {name} has no output '{m.output_name}' (outputs: {list(onnx.outputs)})")
    size = onnx.last_dim(onnx.inputs, m.input_name)
    if size is not None and size != m.obs_size:
        problems.append(
            f"observation size mismatch: the manifest's terms make {m.obs_size} values but ONNX input "
            f"'{m.input_name}' of {name} takes {size}"
        )
    out = onnx.last_dim(onnx.outputs, m.output_name)
    if out is not None and out != m.num_joints:
        problems.append(
            f"action size mismatch: the manifest names {m.num_joints} joints but ONNX output "
            f"'{m.output_name}' has {out} values"
        )
    states, state_problems = onnx.recurrent_state(m.input_name)
    problems += state_problems
    if np.any(m.kp < 0) or np.any(m.kd < 0):
        problems.append("gains must be non-negative")
    if not (0.0 < m.rate_hz <= 1000.0):
        problems.append(f"rate_hz {m.rate_hz} out of range (0, 1000]")
    if m.history_fill not in ("zeros", "first"):
        problems.append(f"history_fill must be 'zeros' or 'first', not '{m.history_fill}'")
    phase_terms = [t.name for t in m.terms if t.kind in ("sin_phase", "cos_phase")]
    if phase_terms and m.phase is None:
        problems.append(f"terms {phase_terms} need a phase clock (phase: {{period_s: ...}})")
    return states, problems


def _check_against_onnx(m: PolicyManifest, onnx: OnnxSignature) -> PolicyManifest:
    """:func:`onnx_problems`, raised as one ManifestError; the manifest with its recurrent states."""
    states, problems = onnx_problems(m, onnx)
    if problems:
        raise _fail(m.source, " | ".join(problems))
    return replace(m, recurrent=tuple(states))


# ---------------------------------------------------------------------------------------------- loaders
def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping; ManifestError naming ``what`` otherwise."""
    where = str(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise _fail(where, f"cannot read {what}: {exc}") from exc
    if not isinstance(doc, dict):
        raise _fail(where, f"a {what} is a YAML mapping")
    return doc


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
        from humanoid_policy.isaaclab_io import load_isaaclab_io_descriptors

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
