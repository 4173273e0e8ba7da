"""Pure policy core (no rclpy): observation builder, gait clock, ONNX inference, action -> joint targets.

The same classes run inside the ``policy_runner`` node and inside single-process benchmarks and tests.

Per policy step (``rate_hz`` of the manifest), in this order - the order of holosoma-inference's deploy loop:

1. the command ``(vx, vy, wz)`` (m/s, m/s, rad/s, heading frame) is clipped to the manifest's ranges;
2. the gait clock advances by ``2 pi / (rate_hz period_s)`` and wraps to [-pi, pi); a zero command pins it
   to ``standing``, and the first non-zero command after standing restarts it at ``start``;
3. the observation is built from the measured state (terms in manifest order; per-joint terms read their
   joints by name and subtract their offset; each term is clipped to ``clip_range``, scaled, then clipped to
   ``clip``; history per term oldest first) and cast to float32;
4. the network runs (a recurrent one with its state, which it returns updated); its raw output is clipped to
   ``action_clip`` and kept as the next ``actions`` term;
5. joint targets ``q* = target_offset + action_scale * action`` (rad), clipped per joint to
   ``target_clip``, in the policy's joint order, are scattered into the robot's joint order by name (joints
   the policy does not drive keep the robot's default pose).

A manifest's ``virtual_joints`` the robot lacks are observed at the policy's default pose with zero velocity,
and their targets are dropped.

Frames: ``gyro`` is the angular velocity of the base in the base (IMU) frame (rad/s); ``quat_wxyz`` is the
base orientation (base -> world, w first); ``projected_gravity = R^T (0, 0, -1)``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from humanoid_control.model.robot_config import RobotConfig
from humanoid_policy.manifest import PolicyManifest


def projected_gravity(quat_wxyz: np.ndarray) -> np.ndarray:
    """Unit gravity direction (0, 0, -1) of the world expressed in the body frame of ``quat_wxyz``."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    # third row of R (body->world) is R^T e_z; gravity is -e_z
    return -np.array([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])


class GaitClock:
    """Per-leg gait phase (rad) of a :class:`~humanoid_policy.manifest.PhaseClock`."""

    def __init__(self, spec: object, rate_hz: float) -> None:
        self.spec = spec
        self.dt = 2 * math.pi / (rate_hz * spec.period_s)  # type: ignore[attr-defined]
        self.reset()

    def reset(self) -> None:
        """Back to the start phases, not standing."""
        self.phase = np.array(self.spec.start, dtype=float)  # type: ignore[attr-defined]
        self.standing = False

    def advance(self, command: np.ndarray) -> np.ndarray:
        """Advance one policy step given the (clipped) command ``(vx, vy, wz)``; returns the phases."""
        self.phase = np.fmod(self.phase + self.dt + math.pi, 2 * math.pi) - math.pi
        thr = self.spec.zero_threshold  # type: ignore[attr-defined]
        if np.linalg.norm(command[:2]) < thr and abs(command[2]) < thr:
            self.phase = np.array(self.spec.standing, dtype=float)  # type: ignore[attr-defined]
            self.standing = True
        elif self.standing:
            self.phase = np.array(self.spec.start, dtype=float)  # type: ignore[attr-defined]
            self.standing = False
        return self.phase


class ObservationBuilder:
    """Builds the observation vector of a manifest from joint state (robot order), IMU and command.

    Args:
        manifest: the policy. robot_joints: the robot's joint names in its order (per-joint terms pick their
            joints from it by name).
    """

    def __init__(self, manifest: PolicyManifest, robot_joints: list[str]) -> None:
        self.manifest = manifest
        self.size = manifest.obs_size
        index = {n: i for i, n in enumerate(robot_joints)}
        # virtual joints (the robot lacks them) are read from entries appended after the robot's joints:
        # the policy's default pose (rad) for positions, zero velocity
        default = dict(zip(manifest.joint_names, manifest.default_pose, strict=True))
        virtual = [
            n
            for t in manifest.terms
            if t.kind in ("dof_pos", "dof_vel")
            for n in (t.joints or manifest.joint_names)
            if n not in index
        ]
        for n in dict.fromkeys(virtual):
            index[n] = len(index)
        self._virtual_q = np.array([default.get(n, 0.0) for n in dict.fromkeys(virtual)], dtype=float)
        self._joints: dict[str, np.ndarray] = {}  # term name -> robot index of each of its joints
        self._offset: dict[str, np.ndarray] = {}
        for t in manifest.terms:
            if t.kind in ("dof_pos", "dof_vel"):
                self._joints[t.name] = np.array([index[n] for n in (t.joints or manifest.joint_names)])
                default = manifest.default_pose if t.kind == "dof_pos" else np.zeros(t.dim)
                self._offset[t.name] = default if t.offset is None else t.offset
        self.reset()

    def reset(self) -> None:
        """Forget the history."""
        self._history = {t.name: deque(maxlen=t.history) for t in self.manifest.terms}

    def build(
        self,
        q: np.ndarray,
        dq: np.ndarray,
        gyro: np.ndarray,
        gravity: np.ndarray,
        command: np.ndarray,
        last_action: np.ndarray,
        phase: np.ndarray | None,
    ) -> np.ndarray:
        """The observation (float32, ``obs_size``).

        Args:
            q, dq: joint positions (rad) and velocities (rad/s) in the robot's joint order.
            gyro: base angular velocity in the base frame (rad/s). gravity: projected gravity (unit).
            command: clipped ``(vx, vy, wz)``. last_action: previous raw action. phase: gait phases or None.
        """
        m = self.manifest
        if self._virtual_q.size:
            q = np.concatenate([q, self._virtual_q])
            dq = np.concatenate([dq, np.zeros(self._virtual_q.size)])
        values = {
            "base_ang_vel": gyro,
            "projected_gravity": gravity,
            "command_lin_vel": command[:2],
            "command_ang_vel": command[2:3],
            "velocity_command": command,
            "actions": last_action,
        }
        if phase is not None:
            values["sin_phase"] = np.sin(phase)
            values["cos_phase"] = np.cos(phase)
        out = np.empty(self.size, dtype=np.float32)
        start = 0
        for term in m.terms:
            if term.kind in ("dof_pos", "dof_vel"):
                raw = (q if term.kind == "dof_pos" else dq)[self._joints[term.name]] - self._offset[term.name]
            else:
                raw = np.asarray(values[term.kind], dtype=float)
            if term.clip_range is not None:
                raw = np.clip(raw, term.clip_range[0], term.clip_range[1])
            sample = (raw * term.scale).astype(np.float32)
            if term.clip is not None:
                sample = np.clip(sample, -term.clip, term.clip)
            hist = self._history[term.name]
            if not hist and m.history_fill == "first":
                hist.extend([sample] * (term.history - 1))
            hist.append(sample)
            pad = term.history - len(hist)
            if pad > 0:
                out[start : start + pad * term.dim] = 0.0
            pos = start + max(pad, 0) * term.dim
            for s in hist:
                out[pos : pos + term.dim] = s
                pos += term.dim
            start += term.size
        return out


@dataclass
class PolicyStep:
    """Result of one policy step.

    Attributes:
        obs: the observation fed to the network. action: raw (clipped) network output, policy order.
        q_target: joint targets (rad) in the robot's joint order. finite: False if the action had NaN/Inf.
        command: the clipped command used. phase: gait phases used (or None).
    """

    obs: np.ndarray
    action: np.ndarray
    q_target: np.ndarray
    finite: bool
    command: np.ndarray
    phase: np.ndarray | None


class PolicyCore:
    """A manifest bound to a robot: ONNX session, observation builder, gait clock and last action."""

    def __init__(self, manifest: PolicyManifest, robot: RobotConfig, threads: int = 1) -> None:
        import onnxruntime as ort

        self.manifest = manifest
        self.robot = robot
        self.index = manifest.check_robot(robot)  # robot index of each policy joint the robot has
        self.present = manifest.robot_present(robot)  # policy joints the robot has (others: virtual)
        self.virtual_joints = manifest.robot_virtual_joints(robot)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(manifest.onnx_path), opts, providers=["CPUExecutionProvider"])
        self.state = {s.input: np.zeros(s.shape, dtype=np.float32) for s in manifest.recurrent}
        self.builder = ObservationBuilder(manifest, robot.joint_names)
        self.clock = GaitClock(manifest.phase, manifest.rate_hz) if manifest.phase else None
        lo = [manifest.command_ranges[k][0] for k in ("lin_vel_x", "lin_vel_y", "ang_vel_z")]
        hi = [manifest.command_ranges[k][1] for k in ("lin_vel_x", "lin_vel_y", "ang_vel_z")]
        self.command_low, self.command_high = np.array(lo), np.array(hi)
        # robot-order default targets: the policy's default pose on its joints, the robot's elsewhere
        self.default_target = robot.array("default").copy()
        # the pose the policy starts from
        self.default_target[self.index] = manifest.default_pose[self.present]
        # True when the driver's own hold pose is the policy's start pose (then the driver's hold is the ramp)
        self.default_matches_robot = bool(np.allclose(self.default_target, robot.array("default"), atol=1e-3))
        stand = robot.gain_profile("stand")
        self.kp, self.kd = stand.kp.copy(), stand.kd.copy()
        self.kp[self.index], self.kd[self.index] = manifest.kp[self.present], manifest.kd[self.present]
        self.reset()
        self.warm_up()

    def warm_up(self, steps: int = 12) -> None:
        """Run whole steps on made-up states near the start pose, then :meth:`reset`.

        onnxruntime's first runs allocate and optimise (tens of ms), and the first steps on states that are
        not all zeros still take 3-5 times a later step (a G1 policy's first step 470-590 us against 100 us:
        the network's first non-zero inputs, the observation builder's and numpy's first calls). Done here,
        not in the first real-time steps, where it would stall the command stream (the watchdog) or overrun
        the loop's ticks. Deterministic (no random numbers) and undone by the reset: the first real step is
        the same as without it.
        """
        index = np.arange(self.robot.num_joints, dtype=float)
        wave, rates = np.sin(index), np.cos(index)
        for k in range(steps):
            a = 0.01 * (k + 1) / steps
            self.step(
                self.default_target + a * wave,
                a * rates,
                np.array([a, -a, 0.5 * a]),
                np.array([1.0, 0.0, 0.0, 0.0]),
                np.array([0.1 * k / steps, 0.0, 0.0]),
            )
        self.reset()

    def reset(self) -> None:
        """Zero the last action and the recurrent state, restart the gait clock, forget the history."""
        self.last_action = np.zeros(self.manifest.num_joints)
        for value in self.state.values():
            value.fill(0.0)
        self.builder.reset()
        if self.clock is not None:
            self.clock.reset()

    def clip_command(self, command: np.ndarray) -> np.ndarray:
        """The command clipped to the manifest's ranges (non-finite entries become 0)."""
        c = np.nan_to_num(np.asarray(command, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
        return np.clip(c, self.command_low, self.command_high)

    def infer(self, obs: np.ndarray) -> np.ndarray:
        """Run the network on one observation; the raw output (float64, policy order).

        A recurrent network gets its state too, and :attr:`state` becomes the state it returns.
        """
        m = self.manifest
        if not m.recurrent:
            out = self.session.run([m.output_name], {m.input_name: obs[None, :]})[0]
            return np.asarray(out, dtype=float).reshape(-1)
        feed = {m.input_name: obs[None, :], **self.state}
        results = self.session.run([m.output_name, *(s.output for s in m.recurrent)], feed)
        for s, value in zip(m.recurrent, results[1:], strict=True):
            self.state[s.input] = np.asarray(value, dtype=np.float32).reshape(s.shape)
        return np.asarray(results[0], dtype=float).reshape(-1)

    def step(
        self,
        q: np.ndarray,
        dq: np.ndarray,
        gyro: np.ndarray,
        quat_wxyz: np.ndarray,
        command: np.ndarray,
    ) -> PolicyStep:
        """One policy step from robot-order joint state, IMU and operator command (see module docstring)."""
        m = self.manifest
        cmd = self.clip_command(command)
        phase = self.clock.advance(cmd).copy() if self.clock is not None else None
        obs = self.builder.build(
            np.asarray(q, dtype=float),
            np.asarray(dq, dtype=float),
            np.asarray(gyro, dtype=float),
            projected_gravity(np.asarray(quat_wxyz, dtype=float)),
            cmd,
            self.last_action,
            phase,
        )
        action = self.infer(obs)
        if m.action_clip is not None:
            action = np.clip(action, -m.action_clip, m.action_clip)
        finite = bool(np.all(np.isfinite(action)))
        target = self.default_target.copy()
        if finite:
            self.last_action = action
            policy_target = m.target_offset + m.action_scale * action
            if m.target_clip is not None:
                policy_target = np.clip(policy_target, m.target_clip[:, 0], m.target_clip[:, 1])
            target[self.index] = policy_target[self.present]  # virtual joints' targets dropped
        return PolicyStep(obs=obs, action=action, q_target=target, finite=finite, command=cmd, phase=phase)
