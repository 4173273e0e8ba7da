"""Hardware sections of a robot configuration (``hardware.unitree_g1``, ``hardware.can_mit`` in
``config/robots/<robot>.yaml``) and the joint <-> motor conversions they define.

Sign and zero convention, the same for both backends: ``motor = direction * joint + offset`` for positions
(rad), ``motor = direction * joint`` for velocities (rad/s) and torques (N m); gains (kp N m/rad,
kd N m s/rad) are unchanged. Joint quantities are in the robot configuration's joint order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from humanoid_control.hardware.mit_can import MitCommand, MitRanges, MitReply
from humanoid_control.hardware.types import LowLevelCommand
from humanoid_control.hardware.unitree_hg import NUM_MOTOR_SLOTS
from humanoid_control.model.robot_config import ConfigError, RobotConfig


# ---------------------------------------------------------------------------------------------- unitree_g1
@dataclass(frozen=True)
class MotorSlot:
    """A joint's place in a motor array: ``index`` (slot), ``direction`` (+1 or -1), ``offset`` (rad)."""

    joint: str
    index: int
    direction: int = 1
    offset: float = 0.0


@dataclass(frozen=True)
class UnitreeG1Config:
    """``hardware.unitree_g1``: the G1's low-level DDS interface.

    Attributes:
        lowcmd_topic, lowstate_topic: DDS topics. period: LowCmd period (s). mode_pr: ankle mode (0 PR serial,
        1 AB parallel). motor_slots: length of the motor arrays (35). motors: one :class:`MotorSlot` per
        robot joint, in robot joint order.
    """

    lowcmd_topic: str
    lowstate_topic: str
    period: float
    mode_pr: int
    motor_slots: int
    motors: tuple[MotorSlot, ...]

    @property
    def index(self) -> np.ndarray:
        """Motor slot of each robot joint (robot joint order)."""
        return np.array([m.index for m in self.motors], dtype=int)

    @property
    def direction(self) -> np.ndarray:
        """+1 / -1 per robot joint."""
        return np.array([m.direction for m in self.motors], dtype=float)

    @property
    def offset(self) -> np.ndarray:
        """Motor position at joint zero (rad), per robot joint."""
        return np.array([m.offset for m in self.motors], dtype=float)

    def motor_command(self, command: LowLevelCommand) -> dict[str, np.ndarray]:
        """Per-slot arrays ``mode`` (1 for mapped slots, 0 for unused ones), ``q``, ``dq``, ``tau``, ``kp``,
        ``kd`` of length :attr:`motor_slots` for a joint-order command (unused slots all zero)."""
        idx, sign = self.index, self.direction
        out = {k: np.zeros(self.motor_slots) for k in ("q", "dq", "tau", "kp", "kd")}
        out["mode"] = np.zeros(self.motor_slots, dtype=np.uint8)
        out["mode"][idx] = 1
        out["q"][idx] = sign * np.asarray(command.q, dtype=float) + self.offset
        out["dq"][idx] = sign * np.asarray(command.dq, dtype=float)
        out["tau"][idx] = sign * np.asarray(command.tau_ff, dtype=float)
        out["kp"][idx] = command.kp
        out["kd"][idx] = command.kd
        return out

    def joint_state(
        self, motor_q: np.ndarray, motor_dq: np.ndarray, motor_tau: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint-order ``(q, dq, tau)`` from per-slot motor arrays (rad, rad/s, N m)."""
        idx, sign = self.index, self.direction
        q = sign * (np.asarray(motor_q, dtype=float)[idx] - self.offset)
        return (
            q,
            sign * np.asarray(motor_dq, dtype=float)[idx],
            sign * np.asarray(motor_tau, dtype=float)[idx],
        )


# ---------------------------------------------------------------------------------------------- can_mit
@dataclass(frozen=True)
class CanJoint:
    """One joint driven by one MIT-mode actuator.

    Attributes:
        joint: robot joint name. bus: CAN interface (``can0``). can_id: the actuator's id on that bus.
        direction: +1 or -1. offset: actuator position at joint zero (rad). model: actuator model name.
        ranges: that model's value ranges.
    """

    joint: str
    bus: str
    can_id: int
    direction: int
    offset: float
    model: str
    ranges: MitRanges

    def to_motor(self, q: float, dq: float, kp: float, kd: float, tau: float) -> MitCommand:
        """Actuator command for a joint-space target (rad, rad/s, N m/rad, N m s/rad, N m)."""
        s = self.direction
        return MitCommand(position=s * q + self.offset, velocity=s * dq, kp=kp, kd=kd, torque=s * tau)

    def from_motor(self, reply: MitReply) -> tuple[float, float, float]:
        """Joint ``(q, dq, tau)`` (rad, rad/s, N m) from an actuator reply."""
        s = self.direction
        return s * (reply.position - self.offset), s * reply.velocity, s * reply.torque


@dataclass(frozen=True)
class CanMitConfig:
    """``hardware.can_mit``: MIT-mode actuators on CAN buses.

    Attributes:
        period: control period (s). command_timeout: firmware command timeout the host mirrors (s).
        max_missed_replies: periods without a reply before damping. host_id: arbitration id of replies.
        models: actuator model name -> ranges. joints: one :class:`CanJoint` per robot joint, robot order.
    """

    period: float
    command_timeout: float
    max_missed_replies: int
    host_id: int
    models: dict[str, MitRanges]
    joints: tuple[CanJoint, ...]

    @property
    def buses(self) -> list[str]:
        """CAN interfaces in first-use order."""
        return list(dict.fromkeys(j.bus for j in self.joints))

    def motor_commands(self, command: LowLevelCommand) -> list[MitCommand]:
        """Actuator commands for a joint-order command (same order as :attr:`joints`)."""
        return [
            j.to_motor(float(command.q[i]), float(command.dq[i]), float(command.kp[i]), float(command.kd[i]),
                       float(command.tau_ff[i]))
            for i, j in enumerate(self.joints)
        ]  # fmt: skip

    def coverage_problems(self, robot: RobotConfig) -> list[str]:
        """Where an actuator's ranges cannot carry what the robot configuration allows: joint limits outside
        the position range, effort or velocity beyond the torque / velocity range, gain limits beyond
        kp / kd (empty: every value the robot configuration allows fits the frames)."""
        out = []
        for i, (spec, j) in enumerate(zip(robot.joints, self.joints, strict=True)):
            r = j.ranges
            ends = sorted((j.direction * spec.lower + j.offset, j.direction * spec.upper + j.offset))
            if ends[0] < r.p_min or ends[1] > r.p_max:
                out.append(f"{spec.name}: position limits exceed {j.model} [{r.p_min}, {r.p_max}] rad")
            if spec.effort > min(-r.t_min, r.t_max):
                out.append(f"{spec.name}: effort {spec.effort} N m exceeds {j.model} torque range")
            if spec.velocity > min(-r.v_min, r.v_max):
                out.append(f"{spec.name}: velocity {spec.velocity} rad/s exceeds {j.model} velocity range")
            limits = robot.gain_limits
            if limits is not None and limits.kp[i] > r.kp_max:
                out.append(f"{spec.name}: kp limit {limits.kp[i]:g} exceeds {j.model} kp range")
            if limits is not None and limits.kd[i] > r.kd_max:
                out.append(f"{spec.name}: kd limit {limits.kd[i]:g} exceeds {j.model} kd range")
        return out


# ---------------------------------------------------------------------------------------------- loading
def _hardware_section(robot: RobotConfig, name: str) -> dict[str, Any]:
    path = Path(robot.config_path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    section = (data.get("hardware") or {}).get(name)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: robot '{robot.name}' has no hardware.{name} section")
    return section


def _direction(value: Any, where: str) -> int:
    if value not in (1, -1) or isinstance(value, bool):
        raise ConfigError(f"{where}: direction must be 1 or -1, got {value!r}")
    return int(value)


def _check_cover(robot: RobotConfig, joints: list[str], where: str) -> None:
    seen = set()
    for name in joints:
        if name not in robot.joint_names:
            raise ConfigError(f"{where}: unknown joint '{name}'")
        if name in seen:
            raise ConfigError(f"{where}: joint '{name}' mapped twice")
        seen.add(name)
    missing = [n for n in robot.joint_names if n not in seen]
    if missing:
        raise ConfigError(f"{where}: joints without a motor: {missing}")


def load_unitree_g1_config(robot: RobotConfig) -> UnitreeG1Config:
    """``hardware.unitree_g1`` of ``robot``; :class:`ConfigError` when absent or inconsistent."""
    s = _hardware_section(robot, "unitree_g1")
    where = f"{robot.config_path}: hardware.unitree_g1"
    try:
        slots = int(s.get("motor_slots", NUM_MOTOR_SLOTS))
        entries = list(s["motors"])
        by_joint = {}
        for index, m in enumerate(entries):
            slot = MotorSlot(
                joint=str(m["joint"]),
                index=index,
                direction=_direction(m.get("direction", 1), f"{where}.motors[{index}]"),
                offset=float(m.get("offset", 0.0)),
            )
            by_joint[slot.joint] = slot
        config = UnitreeG1Config(
            lowcmd_topic=str(s.get("lowcmd_topic", "rt/lowcmd")),
            lowstate_topic=str(s.get("lowstate_topic", "rt/lowstate")),
            period=float(s.get("period", 0.002)),
            mode_pr=int(s.get("mode_pr", 0)),
            motor_slots=slots,
            motors=tuple(by_joint[n] for n in robot.joint_names if n in by_joint),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where} is malformed ({exc!r})") from None
    _check_cover(robot, [str(m["joint"]) for m in entries], where)
    if len(entries) > slots or slots != NUM_MOTOR_SLOTS:
        raise ConfigError(
            f"{where}: {len(entries)} motors for {slots} slots (unitree_hg has {NUM_MOTOR_SLOTS})"
        )
    if config.mode_pr not in (0, 1) or not config.period > 0:
        raise ConfigError(f"{where}: mode_pr must be 0 or 1 and period > 0")
    return config


def load_can_mit_config(robot: RobotConfig) -> CanMitConfig:
    """``hardware.can_mit`` of ``robot``; :class:`ConfigError` when absent or inconsistent."""
    s = _hardware_section(robot, "can_mit")
    where = f"{robot.config_path}: hardware.can_mit"
    models = {}
    for name, m in (s.get("models") or {}).items():
        try:
            models[str(name)] = MitRanges(*m["position"], *m["velocity"], *m["kp"], *m["kd"], *m["torque"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}.models.{name} is malformed ({exc})") from None
    joints = {}
    used: set[tuple[str, int]] = set()
    entries = list(s.get("joints") or [])
    for i, j in enumerate(entries):
        w = f"{where}.joints[{i}]"
        try:
            model = str(j["model"])
            if model not in models:
                raise ConfigError(f"{w}: unknown model '{model}' (known: {', '.join(sorted(models))})")
            cj = CanJoint(
                joint=str(j["joint"]),
                bus=str(j["bus"]),
                can_id=int(j["id"]),
                direction=_direction(j.get("direction", 1), w),
                offset=float(j.get("offset", 0.0)),
                model=model,
                ranges=models[model],
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"{w} is malformed ({exc!r})") from None
        if not 1 <= cj.can_id <= 0x7F:
            raise ConfigError(f"{w}: CAN id must be in 1..127, got {cj.can_id}")
        if (cj.bus, cj.can_id) in used:
            raise ConfigError(f"{w}: id {cj.can_id} used twice on {cj.bus}")
        used.add((cj.bus, cj.can_id))
        joints[cj.joint] = cj
    _check_cover(robot, [str(j["joint"]) for j in entries], where)
    try:
        config = CanMitConfig(
            period=float(s.get("period", 0.002)),
            command_timeout=float(s.get("command_timeout", 0.025)),
            max_missed_replies=int(s.get("max_missed_replies", 3)),
            host_id=int(s.get("host_id", 0)),
            models=models,
            joints=tuple(joints[n] for n in robot.joint_names),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where} is malformed ({exc!r})") from None
    if not config.period > 0 or not config.command_timeout > 0 or config.max_missed_replies < 1:
        raise ConfigError(f"{where}: period and command_timeout must be > 0, max_missed_replies >= 1")
    return config


__all__ = [
    "CanJoint",
    "CanMitConfig",
    "MotorSlot",
    "UnitreeG1Config",
    "load_can_mit_config",
    "load_unitree_g1_config",
]
