#!/usr/bin/env python3
"""Reference observations/actions from holosoma-inference's own locomotion policy code.

What it is
----------
A parity-test oracle. It replays recorded robot states through holosoma-inference's
``LocomotionPolicy`` (Unitree G1 29-DoF, the ONNX policies shipped inside the
``holosoma_inference`` package) and writes out what holosoma's code computes each
50 Hz tick: the ``actor_obs`` vector actually fed to ONNX, the clipped raw action
and the joint targets it sends. Nothing of the policy math is re-implemented here:

* the config is holosoma's own (``robot.g1_29dof``, ``observation.loco_g1_29dof``,
  ``task.locomotion`` with the chosen ONNX as ``model_path``);
* only the hardware is replaced: ``create_interface`` (as imported by
  ``holosoma_inference.policies.base``) is patched to return a replay interface
  whose ``get_low_state`` returns the current recorded row in holosoma's
  ``robot_state_data`` layout and whose ``send_low_command`` stores the command;
* inputs use holosoma's ``"injected"`` input source: a replay provider returns the
  recorded velocity command each tick (``poll_velocity``) and a START command
  (plus WALK for ``--walk-mode walk``) on the first tick (``poll_commands``);
* each tick is one iteration of holosoma's own ``BasePolicy.run`` loop (poll velocity
  -> ``_apply_velocity`` -> dispatch commands -> ``update_phase_time`` ->
  ``policy_action``); only ``rate.sleep`` is made a no-op. The loop ends when the
  provider runs out of rows.

Capture points: a thin wrapper around ``policy.policy`` (the ONNX callable) records
the fed ``actor_obs`` and the phase it was built from; the ``_on_command_sent``
telemetry hook records ``last_policy_action`` and the gated commands; the replay
interface records ``cmd_q`` exactly as sent.

Venv setup (separate from the stack's .venv; holosoma's deps are heavy)
-----------------------------------------------------------------------
    python3.11 -m venv /work/holo-ref-venv
    /work/holo-ref-venv/bin/python -m pip install --upgrade pip
    /work/holo-ref-venv/bin/python -m pip install holosoma-inference==0.1.3

(The full dependency set installs from PyPI without building problems; pinocchio,
wandb, zmq, ... are pulled in because ``holosoma_inference.policies`` imports the
WBT policy too.)

How to run
----------
    /work/holo-ref-venv/bin/python scripts/holosoma_reference.py \\
        --states states.npz --out reference.npz [--policy ppo|fastsac]

    # a synthetic development states file (standing 10 ticks, then vx = 0.5):
    /work/holo-ref-venv/bin/python scripts/holosoma_reference.py \\
        --write-synthetic /tmp/holo_states_dev.npz --policy ppo

Input npz (rows are consecutive 50 Hz policy ticks, holosoma ``dof_names`` order):
``q`` [N,29], ``dq`` [N,29], ``quat_wxyz`` [N,4] (body->world, w first), ``gyro``
[N,3] (body frame), ``cmd`` [N,3] (vx, vy, wz as received), ``policy`` (0-d str).

Output npz: ``obs`` [N,100] float32, ``action`` [N,29] (raw, clipped to +-100),
``q_target`` [N,29] float64 (``cmd_q`` as sent), ``phase`` [N,2], ``dof_names``,
``default_dof_angles``, ``kp``, ``kd`` (as holosoma resolves them, i.e. from ONNX
metadata), ``holosoma_version`` plus diagnostics (gated commands, obs layout, ...).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np

try:
    import holosoma_inference
    import holosoma_inference.policies.base as holo_base
    import onnx
    from holosoma_inference.config.config_types.inference import InferenceConfig
    from holosoma_inference.config.config_types.robot import RobotConfig
    from holosoma_inference.config.config_values import observation as holo_observation
    from holosoma_inference.config.config_values import robot as holo_robot
    from holosoma_inference.config.config_values import task as holo_task
    from holosoma_inference.inputs.api.base import InputProvider
    from holosoma_inference.inputs.api.commands import StateCommand, VelCmd
    from holosoma_inference.inputs.impl.ros2 import Ros2Input
    from holosoma_inference.policies.locomotion import LocomotionPolicy
    from holosoma_inference.sdk.base.base_interface import BaseInterface
    from loguru import logger
except ImportError as exc:  # pragma: no cover - environment guard
    raise SystemExit(
        f"holosoma_reference: cannot import holosoma-inference ({exc}); run this script with the "
        "interpreter of the venv described in its docstring (/work/holo-ref-venv/bin/python)."
    ) from exc

POLICIES = ("ppo", "fastsac")
WALK_MODES = ("auto", "walk", "stand")
CMD_SOURCES = ("raw", "ros2")
NUM_DOFS = 29


class EndOfRecording(Exception):
    """Raised by the replay provider when all rows were consumed; ends ``BasePolicy.run``."""


@dataclass(frozen=True)
class RecordedStates:
    """Recorded per-tick robot states (see the module docstring for the format)."""

    q: np.ndarray
    dq: np.ndarray
    quat_wxyz: np.ndarray
    gyro: np.ndarray
    cmd: np.ndarray
    policy: str

    @classmethod
    def load(cls, path: Path) -> RecordedStates:
        with np.load(path, allow_pickle=False) as data:
            states = cls(
                q=np.asarray(data["q"], dtype=np.float64),
                dq=np.asarray(data["dq"], dtype=np.float64),
                quat_wxyz=np.asarray(data["quat_wxyz"], dtype=np.float64),
                gyro=np.asarray(data["gyro"], dtype=np.float64),
                cmd=np.asarray(data["cmd"], dtype=np.float64),
                policy=str(data["policy"][()]) if "policy" in data else "",
            )
        states.validate()
        return states

    def __len__(self) -> int:
        return int(self.q.shape[0])

    def validate(self) -> None:
        n = len(self)
        expected = {
            "q": (n, NUM_DOFS),
            "dq": (n, NUM_DOFS),
            "quat_wxyz": (n, 4),
            "gyro": (n, 3),
            "cmd": (n, 3),
        }
        for name, shape in expected.items():
            actual = getattr(self, name).shape
            if actual != shape:
                raise ValueError(f"states: '{name}' has shape {actual}, expected {shape}")
        if n == 0:
            raise ValueError("states: no rows")

    def robot_state_data(self, row: int) -> np.ndarray:
        """One row in the layout of holosoma's ``BaseInterface.get_low_state``.

        ``[base_pos(3), quat_wxyz(4), dof_pos(29), base_lin_vel(3), base_ang_vel(3), dof_vel(29)]``
        as a (1, 71) float64 array. Base position and linear velocity are zeros, like
        ``UnitreeInterface.get_low_state`` on the real robot; the loco observation does
        not read them.
        """
        return np.concatenate(
            [
                np.zeros(3),
                self.quat_wxyz[row],
                self.q[row],
                np.zeros(3),
                self.gyro[row],
                self.dq[row],
            ]
        ).reshape(1, -1)


class Cursor:
    """The recorded row the current tick works on (shared by interface and provider)."""

    def __init__(self) -> None:
        self.row = -1


class ReplayInterface(BaseInterface):
    """Stand-in for holosoma's SDK interface: serves recorded states, stores sent commands."""

    def __init__(self, robot_config: RobotConfig, states: RecordedStates, cursor: Cursor) -> None:
        super().__init__(robot_config, domain_id=0, interface_str=None, use_joystick=False)
        self._states = states
        self._cursor = cursor
        self._kp_level = 1.0
        self._kd_level = 1.0
        self.sent_q: list[np.ndarray] = []
        self.sent_rows: list[int] = []

    def get_low_state(self) -> np.ndarray:
        return self._states.robot_state_data(self._cursor.row)

    def send_low_command(
        self,
        cmd_q: np.ndarray,
        cmd_dq: np.ndarray,
        cmd_tau: np.ndarray,
        dof_pos_latest: np.ndarray | None = None,
        kp_override: np.ndarray | None = None,
        kd_override: np.ndarray | None = None,
    ) -> None:
        if kp_override is not None or kd_override is not None:
            raise RuntimeError("unexpected gain override (the policy is not in its policy-action state)")
        self.sent_q.append(np.array(cmd_q, dtype=np.float64, copy=True))
        self.sent_rows.append(self._cursor.row)

    def update_config(self, robot_config: RobotConfig) -> None:
        self.robot_config = robot_config

    def get_joystick_msg(self) -> None:
        return None

    def get_joystick_key(self, wc_msg: Any = None) -> None:
        return None

    @property
    def kp_level(self) -> float:
        return self._kp_level

    @kp_level.setter
    def kp_level(self, value: float) -> None:
        self._kp_level = value

    @property
    def kd_level(self) -> float:
        return self._kd_level

    @kd_level.setter
    def kd_level(self, value: float) -> None:
        self._kd_level = value


class ReplayInput(InputProvider):
    """Injected velocity + state-command provider that replays the recorded commands.

    ``cmd_source="raw"`` returns ``VelCmd`` straight from the recorded row.
    ``cmd_source="ros2"`` feeds each row through holosoma's own ``Ros2Input`` callbacks
    (as if a TwistStamped/String arrived every tick; rclpy is never started), so the
    ROS2 provider's clamp to [-1, 1] applies. Its wall-clock velocity timeout is disabled
    to keep the replay deterministic (at 50 Hz with a message per tick it never fires).
    """

    def __init__(
        self,
        states: RecordedStates,
        cursor: Cursor,
        first_tick_commands: list[str],
        cmd_source: str,
    ) -> None:
        self._states = states
        self._cursor = cursor
        self._first_tick_commands = first_tick_commands
        self._ros2 = (
            Ros2Input("cmd_vel", "holosoma/state_input", vel_timeout=0.0) if cmd_source == "ros2" else None
        )

    def start(self) -> None:
        pass

    def poll_velocity(self) -> VelCmd:
        self._cursor.row += 1
        row = self._cursor.row
        if row >= len(self._states):
            raise EndOfRecording
        vx, vy, wz = (float(v) for v in self._states.cmd[row])
        if self._ros2 is None:
            return VelCmd((vx, vy), wz)
        twist = SimpleNamespace(
            linear=SimpleNamespace(x=vx, y=vy, z=0.0), angular=SimpleNamespace(x=0.0, y=0.0, z=wz)
        )
        self._ros2._vel_callback(SimpleNamespace(twist=twist))
        return self._ros2.poll_velocity()

    def poll_commands(self) -> list[StateCommand]:
        names = self._first_tick_commands if self._cursor.row == 0 else []
        if self._ros2 is None:
            return [StateCommand[name.upper()] for name in names]
        for name in names:
            self._ros2._cmd_callback(SimpleNamespace(data=name))
        return self._ros2.poll_commands()

    def zero(self) -> None:
        if self._ros2 is not None:
            self._ros2.zero()


class Recorder:
    """Per-tick capture of what holosoma computed."""

    def __init__(self, policy: LocomotionPolicy) -> None:
        self._policy = policy
        self.obs: list[np.ndarray] = []
        self.phase: list[np.ndarray] = []
        self.action: list[np.ndarray] = []
        self.scaled_action: list[np.ndarray] = []
        self.lin_vel_command: list[np.ndarray] = []
        self.ang_vel_command: list[float] = []
        self.stand_command: list[float] = []
        self.use_policy_action: list[bool] = []
        self._onnx_callable = policy.policy
        policy.policy = self._policy_callable
        policy._on_command_sent = self._on_command_sent

    def _policy_callable(self, obs_dict: dict[str, np.ndarray]) -> np.ndarray:
        self.obs.append(np.array(obs_dict["actor_obs"], copy=True))
        self.phase.append(np.array(self._policy.phase, dtype=np.float64, copy=True).reshape(-1))
        return self._onnx_callable(obs_dict)

    def _on_command_sent(self, cmd_q: np.ndarray, robot_state_data: np.ndarray) -> None:
        p = self._policy
        self.action.append(np.array(p.last_policy_action, copy=True).reshape(-1))
        self.scaled_action.append(np.array(p.scaled_policy_action, copy=True).reshape(-1))
        self.lin_vel_command.append(np.array(p.lin_vel_command, dtype=np.float64, copy=True).reshape(-1))
        self.ang_vel_command.append(float(p.ang_vel_command[0, 0]))
        self.stand_command.append(float(p.stand_command[0, 0]))
        self.use_policy_action.append(bool(p.use_policy_action and not p.get_ready_state))


class _NoSleep:
    """Replaces the policy's RateLimiter: the replay runs as fast as it can."""

    def sleep(self) -> float:
        return 0.0


def onnx_path(policy_name: str) -> Path:
    models = Path(holosoma_inference.__file__).parent / "models" / "loco" / "g1_29dof"
    path = models / f"{policy_name}_g1_29dof.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"holosoma ONNX not found: {path}")
    return path


def build_config(model_path: Path, walk_mode: str) -> InferenceConfig:
    """holosoma's G1 29-DoF locomotion config with the chosen ONNX and replay inputs."""
    task_config = replace(
        holo_task.locomotion,
        model_path=str(model_path),
        velocity_input="injected",
        state_input="injected",
        auto_walk_on_vel_cmd=walk_mode == "auto",
    )
    return InferenceConfig(
        robot=holo_robot.g1_29dof,
        observation=holo_observation.loco_g1_29dof,
        task=task_config,
        secondary=None,
    )


def build_policy(
    config: InferenceConfig, states: RecordedStates, cursor: Cursor, provider: ReplayInput
) -> tuple[LocomotionPolicy, ReplayInterface]:
    """Construct holosoma's LocomotionPolicy with the SDK interface replaced by a replay one."""
    created: list[ReplayInterface] = []

    def fake_create_interface(
        robot_config: RobotConfig,
        domain_id: int = 0,
        interface_str: str | None = None,
        use_joystick: bool = True,
    ) -> ReplayInterface:
        interface = ReplayInterface(robot_config, states, cursor)
        created.append(interface)
        return interface

    policy = LocomotionPolicy.__new__(LocomotionPolicy)
    # holosoma's "injected" input source: the owner attaches the providers before __init__.
    policy._injected_velocity_input = provider
    policy._injected_command_provider = provider
    with mock.patch.object(holo_base, "create_interface", fake_create_interface):
        LocomotionPolicy.__init__(policy, config)
    if len(created) != 1 or policy.interface is not created[0]:
        raise RuntimeError("holosoma did not use the replay interface")
    policy.rate = _NoSleep()
    return policy, created[0]


def obs_layout(policy: LocomotionPolicy) -> tuple[list[str], list[int], list[int], list[float]]:
    """(term names, start columns, dims, scales) of actor_obs, as holosoma orders them."""
    history = policy.history_length_dict.get("actor_obs", 1)
    names: list[str] = []
    starts: list[int] = []
    dims: list[int] = []
    scales: list[float] = []
    col = 0
    for term in policy.obs_terms_sorted["actor_obs"]:
        dim = int(policy.obs_dims[term]) * history
        names.append(term)
        starts.append(col)
        dims.append(dim)
        scales.append(float(policy.obs_scales[term]))
        col += dim
    return names, starts, dims, scales


def run_reference(
    states: RecordedStates, policy_name: str, walk_mode: str, cmd_source: str
) -> dict[str, np.ndarray]:
    model_path = onnx_path(policy_name)
    config = build_config(model_path, walk_mode)
    cursor = Cursor()
    first_tick = ["start", "walk"] if walk_mode == "walk" else ["start"]
    provider = ReplayInput(states, cursor, first_tick, cmd_source)
    policy, interface = build_policy(config, states, cursor, provider)
    recorder = Recorder(policy)

    # One iteration of holosoma's own run loop per recorded row; its status prints go to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            policy.run()
        except EndOfRecording:
            pass
        else:
            raise RuntimeError("holosoma's run loop returned before the recording ended")

    n = len(states)
    counts = {
        "obs": len(recorder.obs),
        "action": len(recorder.action),
        "sent": len(interface.sent_q),
    }
    if any(c != n for c in counts.values()) or interface.sent_rows != list(range(n)):
        raise RuntimeError(f"expected one policy tick per row ({n}), got {counts}")
    if not all(recorder.use_policy_action):
        raise RuntimeError("some ticks were not policy-action ticks")

    metadata = {p.key: json.loads(p.value) for p in onnx.load(str(model_path)).metadata_props}
    names, starts, dims, scales = obs_layout(policy)
    robot_config = policy.robot_config
    return {
        "obs": np.concatenate(recorder.obs, axis=0).astype(np.float32, copy=False),
        "action": np.stack(recorder.action),
        "scaled_action": np.stack(recorder.scaled_action),
        "q_target": np.stack(interface.sent_q).astype(np.float64, copy=False),
        "phase": np.stack(recorder.phase),
        "lin_vel_command": np.stack(recorder.lin_vel_command),
        "ang_vel_command": np.asarray(recorder.ang_vel_command, dtype=np.float64),
        "stand_command": np.asarray(recorder.stand_command, dtype=np.float64),
        "robot_state_data": np.concatenate([states.robot_state_data(i) for i in range(n)], axis=0),
        "dof_names": np.asarray(policy.dof_names, dtype=str),
        "default_dof_angles": np.asarray(policy.default_dof_angles, dtype=np.float64),
        "joint_offsets": np.asarray(policy.joint_offsets, dtype=np.float64),
        "kp": np.asarray(robot_config.motor_kp, dtype=np.float64),
        "kd": np.asarray(robot_config.motor_kd, dtype=np.float64),
        "policy_action_scale": np.asarray(float(policy.policy_action_scale)),
        "phase_dt": np.asarray(float(policy.phase_dt)),
        "obs_terms": np.asarray(names, dtype=str),
        "obs_term_start": np.asarray(starts, dtype=np.int64),
        "obs_term_dim": np.asarray(dims, dtype=np.int64),
        "obs_term_scale": np.asarray(scales, dtype=np.float64),
        "command_ranges": np.asarray(json.dumps(metadata.get("command_ranges"))),
        "holosoma_version": np.asarray(importlib.metadata.version("holosoma-inference")),
        "policy": np.asarray(policy_name),
        "onnx_file": np.asarray(model_path.name),
        "onnx_sha256": np.asarray(hashlib.sha256(model_path.read_bytes()).hexdigest()),
        "walk_mode": np.asarray(walk_mode),
        "cmd_source": np.asarray(cmd_source),
    }


def write_synthetic_states(path: Path, policy_name: str, steps: int, seed: int) -> None:
    """Development states: 10 standing ticks with zero command, then vx = 0.5 m/s."""
    rng = np.random.default_rng(seed)
    default = np.asarray(holo_robot.g1_29dof.default_dof_angles, dtype=np.float64)
    q = default + rng.normal(0.0, 0.05, size=(steps, NUM_DOFS))
    dq = rng.normal(0.0, 0.3, size=(steps, NUM_DOFS))
    gyro = rng.normal(0.0, 0.1, size=(steps, 3))
    # near-upright body->world orientation: small tilt axis-angle, arbitrary yaw
    tilt = rng.normal(0.0, 0.05, size=(steps, 3))
    tilt[:, 2] = 0.0
    yaw = rng.uniform(-np.pi, np.pi) + np.cumsum(rng.normal(0.0, 0.01, size=steps))
    angle = np.linalg.norm(tilt, axis=1, keepdims=True)
    axis = np.divide(tilt, angle, out=np.zeros_like(tilt), where=angle > 0)
    q_tilt = np.concatenate([np.cos(angle / 2), axis * np.sin(angle / 2)], axis=1)
    q_yaw = np.stack([np.cos(yaw / 2), np.zeros(steps), np.zeros(steps), np.sin(yaw / 2)], axis=1)
    quat = _quat_mul_wxyz(q_yaw, q_tilt)
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    cmd = np.zeros((steps, 3))
    cmd[10:, 0] = 0.5
    np.savez(path, q=q, dq=dq, quat_wxyz=quat, gyro=gyro, cmd=cmd, policy=np.asarray(policy_name))


def _quat_mul_wxyz(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=1,
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=Path, help="input states npz")
    parser.add_argument("--out", type=Path, help="output reference npz")
    parser.add_argument("--policy", choices=POLICIES, help="default: the states file's 'policy'")
    parser.add_argument(
        "--walk-mode",
        choices=WALK_MODES,
        default="auto",
        help=(
            "how holosoma's stand/walk gate is opened: 'auto' = task.auto_walk_on_vel_cmd=True (the first "
            "non-zero command switches to walking); 'walk' = a WALK state command on the first tick; "
            "'stand' = neither (holosoma's default config: velocity commands stay gated to zero)"
        ),
    )
    parser.add_argument(
        "--cmd-source",
        choices=CMD_SOURCES,
        default="raw",
        help="'raw': VelCmd from the recorded cmd; 'ros2': through holosoma's Ros2Input (clamps to [-1, 1])",
    )
    parser.add_argument(
        "--write-synthetic", type=Path, metavar="PATH", help="write a dev states file and exit"
    )
    parser.add_argument("--steps", type=int, default=100, help="rows of the synthetic states file")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic states file")
    parser.add_argument("--verbose", action="store_true", help="show holosoma's INFO logs")
    args = parser.parse_args(argv)
    if args.write_synthetic is None and (args.states is None or args.out is None):
        parser.error("--states and --out are required (or --write-synthetic)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logger.remove()
    logger.add(sys.stderr, level="INFO" if args.verbose else "WARNING")

    if args.write_synthetic is not None:
        write_synthetic_states(args.write_synthetic, args.policy or "ppo", args.steps, args.seed)
        print(f"wrote {args.write_synthetic}")
        return 0

    states = RecordedStates.load(args.states)
    policy_name = args.policy or states.policy
    if policy_name not in POLICIES:
        raise SystemExit(f"policy must be one of {POLICIES} (got {policy_name!r}); pass --policy")
    result = run_reference(states, policy_name, args.walk_mode, args.cmd_source)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **result)
    print(
        f"wrote {args.out}: {len(states)} ticks, policy {policy_name}, holosoma {result['holosoma_version']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
