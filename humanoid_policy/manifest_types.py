"""Policy manifest contract: the :class:`PolicyManifest` dataclass, its parts and the checks they share.

A :class:`PolicyManifest` says which ONNX file to run, its input and output tensors, the observation terms in
the order the network expects them (:class:`ObsTerm`, with scale, clip and history length), the mapping
between the policy's joint order and the robot's, the action scale and offset (the policy's default pose), the
PD gains the joints must use, the control rate, the command ranges, the gait-phase clock (:class:`PhaseClock`)
and the state tensors of a recurrent network (:class:`RecurrentState`). :meth:`PolicyManifest.robot_problems`
checks it against a robot configuration.

Also here, shared by every loader (:mod:`humanoid_policy.manifest`, :mod:`humanoid_policy.isaaclab_io`): the
term kinds the observation builder knows (:data:`TERM_KINDS`, :data:`TERM_ALIASES`), the command axes, the
error every malformed manifest raises (:class:`ManifestError`) and the validation helpers ``_vector`` (a
per-joint vector from a scalar, a list or a ``{regex: value}`` table) and ``_read_mapping`` (a YAML mapping).
This module imports no other module of the package.

Units: rad, rad/s, m/s, N m/rad (kp), N m s/rad (kd), Hz. Frames: angular velocity and projected gravity in
the base (IMU) frame; commands in the heading frame (x forward, y left, z up).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from humanoid_control.model.robot_config import RobotConfig


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
        virtual_joints: policy joints a robot may lack (a trained-on robot's joints, by name): on a robot
            without them they are observed at their default pose with zero velocity and their actions are
            dropped; any other joint the robot lacks is refused.
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
    virtual_joints: tuple[str, ...] = ()

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

    def absent_joints(self, robot: RobotConfig) -> list[str]:
        """Policy joints (commanded or observed) that ``robot`` lacks, in policy order."""
        known = set(robot.joint_names)
        named = list(self.joint_names) + [
            n for t in self.terms for n in t.joints if n not in self.joint_names
        ]
        return [n for n in dict.fromkeys(named) if n not in known]

    def robot_virtual_joints(self, robot: RobotConfig) -> list[str]:
        """The :attr:`virtual_joints` that ``robot`` lacks: observed at their default, actions dropped."""
        return [n for n in self.absent_joints(robot) if n in self.virtual_joints]

    def robot_indices(self, robot: RobotConfig) -> np.ndarray:
        """Index in the robot's joint order of each policy joint the robot has, in policy order (raises if
        the robot lacks a joint that is not virtual); :meth:`robot_present` says which ones these are."""
        index = {n: i for i, n in enumerate(robot.joint_names)}
        missing = [n for n in self.joint_names if n not in index and n not in self.virtual_joints]
        if missing:
            raise ManifestError(
                f"policy '{self.name}' commands joints that robot '{robot.name}' does not have: {missing}"
            )
        return np.array([index[n] for n in self.joint_names if n in index], dtype=int)

    def robot_present(self, robot: RobotConfig) -> np.ndarray:
        """Boolean mask over the policy's joints: True where ``robot`` has the joint."""
        known = set(robot.joint_names)
        return np.array([n in known for n in self.joint_names], dtype=bool)

    def robot_problems(self, robot: RobotConfig) -> list[str]:
        """Every way the policy does not fit ``robot``, one message each (empty: it fits).

        Joints are matched by name: a policy or observation joint the robot lacks; the default pose outside
        the joint limits; gains above the robot's ``gain_limits``.
        """
        known = set(robot.joint_names)
        problems = []
        missing = [n for n in self.joint_names if n not in known and n not in self.virtual_joints]
        if missing:
            problems.append(f"unknown joints: robot '{robot.name}' has no {missing}")
        for term in self.terms:
            absent = [n for n in term.joints if n not in known and n not in self.virtual_joints]
            if absent:
                problems.append(f"observation term '{term.name}' reads unknown joints {absent}")
        from humanoid_control.model.robot_model import leg_joint_names

        try:
            legs = leg_joint_names(robot)
        except Exception as exc:  # a model that does not load is reported, not raised
            legs = []
            problems.append(f"cannot find the leg joints of robot '{robot.name}': {exc}")
        uncommanded = [n for n in legs if n not in self.joint_names]
        if uncommanded:
            problems.append(f"the policy does not command the leg joints {uncommanded}: refused")
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
