"""``humanoid-policy check FILE``: a policy's contract against the robot, before anything moves (no rclpy).

Takes any policy the runner takes (Isaac Lab ``IO_descriptors.yaml``, Isaac Lab ``deploy.yaml``, a
holosoma-inference ONNX, a manifest YAML or a manifest name like ``holosoma/g1_ppo``) and prints:

- the resolved manifest (format, ONNX tensors, recurrent state, rate, history fill, command ranges);
- the joint map: policy index -> robot joint (matched by name) with default pose (rad), kp (N m/rad),
  kd (N m s/rad), the joint's limits (rad) and the robot's gain limits; the policy's *virtual* joints
  (declared ``virtual_joints`` the robot lacks: observed at their default, actions dropped) and the robot
  joints the policy does not command (held at the robot's default);
- the observation layout: offset and size of every term, its kind, scale, clip and history;
- the action scaling: ``q* = offset + scale * action`` per joint, and the clips;
- one dry policy step from the robot's default state (standing upright, at rest, zero command): the action
  and targets it gives.

It exits 1 listing *every* problem found (unknown joint or term, size mismatch, gains beyond the robot's
limits, default pose outside the joint limits, ...), 0 when there is none.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from humanoid_control.model.robot_check import RobotCheckReport
from humanoid_control.model.robot_config import ConfigError, RobotConfig, load_robot_config
from humanoid_policy.isaaclab_io import parse_isaaclab_io_descriptors
from humanoid_policy.manifest import (
    ManifestError,
    PolicyManifest,
    find_policy_file,
    load_policy_file,
    policy_format,
)


@dataclass
class CheckReport(RobotCheckReport):
    """Outcome of :func:`check_policy`: the printed lines, the problems, and the manifest (if one built)."""

    manifest: PolicyManifest | None = None


def _fmt(values: np.ndarray | tuple[float, ...] | float | None) -> str:
    if values is None:
        return "-"
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.size and np.all(arr == arr[0]):
        return f"{arr[0]:g}"
    return "[" + " ".join(f"{v:g}" for v in arr) + "]"


def _describe(m: PolicyManifest, robot: RobotConfig) -> list[str]:
    lines = [
        f"policy {m.name} ({m.metadata.get('format', 'manifest')}): {m.source}",
        f"  onnx: {m.onnx_path}  input '{m.input_name}' ({m.obs_size} values) -> output '{m.output_name}' "
        f"({m.num_joints} values)",
        "  recurrent state: "
        + (", ".join(f"{s.input} -> {s.output} {list(s.shape)}" for s in m.recurrent) or "none"),
        f"  rate {m.rate_hz:g} Hz; history filled with {m.history_fill}; phase clock "
        + ("none" if m.phase is None else f"period {m.phase.period_s:g} s"),
        "  command ranges: "
        + ", ".join(f"{k} [{lo:g}, {hi:g}]" for k, (lo, hi) in m.command_ranges.items())
        + (
            "  (none in the file: commands pass unclipped)"
            if np.isinf(m.command_ranges["lin_vel_x"][1])
            else ""
        ),
    ]
    if m.metadata.get("scene"):
        lines.append(f"  scene: {m.metadata['scene']}")
    index = {n: i for i, n in enumerate(robot.joint_names)}
    lower, upper = robot.array("lower"), robot.array("upper")
    limits = robot.gain_limits
    lines += [
        "",
        f"joint map (policy index -> {robot.name} joint, by name):",
        f"  {'idx':>3}  {'policy joint':<28} {'robot':>5}  {'default':>8} {'kp':>8} {'kd':>7}  "
        f"{'lower':>8} {'upper':>8}  {'kp max':>7} {'kd max':>6}",
    ]
    virtual = set(m.robot_virtual_joints(robot))
    for i, name in enumerate(m.joint_names):
        r = index.get(name)
        label = ("VIRT" if name in virtual else "NONE") if r is None else r
        row = f"  {i:>3}  {name:<28} {label:>5}  {m.default_pose[i]:>+8.4f} "
        row += f"{m.kp[i]:>8.3f} {m.kd[i]:>7.3f}"
        if r is not None:
            row += f"  {lower[r]:>+8.4f} {upper[r]:>+8.4f}"
            row += f"  {limits.kp[r]:>7g} {limits.kd[r]:>6g}" if limits is not None else ""
        lines.append(row)
    if virtual:
        lines.append(
            f"  virtual joints ({len(virtual)}, robot '{robot.name}' lacks them): observed at their default "
            f"with zero velocity, their actions dropped: {[n for n in m.joint_names if n in virtual]}"
        )
    held = [n for n in robot.joint_names if n not in set(m.joint_names)]
    if held:
        lines.append(f"  robot joints the policy does not command (held at the robot's default): {held}")
    lines += [
        "",
        f"observation layout ({m.obs_size} values):",
        f"  {'offset':>6} {'size':>5}  {'term':<20} {'kind':<18} {'dim x hist':>10}  scale / clip",
    ]
    start = 0
    for t in m.terms:
        clip = f"clip [{t.clip_range[0]:g}, {t.clip_range[1]:g}] then scale" if t.clip_range else ""
        clip += f" then clip +-{t.clip:g}" if t.clip is not None else ""
        joints = f"; joints: {len(t.joints)} of their own" if t.joints else ""
        lines.append(
            f"  {start:>6} {t.size:>5}  {t.name:<20} {t.kind:<18} {f'{t.dim} x {t.history}':>10}  "
            f"scale {_fmt(t.scale)} {clip}{joints}".rstrip()
        )
        start += t.size
    lines += [
        "",
        "action: q* = offset + scale * action (rad, per policy joint)",
        f"  scale {_fmt(m.action_scale)}; offset {_fmt(m.target_offset)}",
        f"  raw action clip: {'none' if m.action_clip is None else f'+-{m.action_clip:g}'}; target clip: "
        + (
            "none"
            if m.target_clip is None
            else f"per joint, e.g. {m.joint_names[0]} {list(m.target_clip[0])}"
        ),
    ]
    return lines


def _dry_step(m: PolicyManifest, robot: RobotConfig, report: CheckReport) -> None:
    from humanoid_policy.policy_core import PolicyCore

    core = PolicyCore(m, robot)
    n = robot.num_joints
    step = core.step(robot.array("default"), np.zeros(n), np.zeros(3), np.array([1.0, 0, 0, 0]), np.zeros(3))
    report.lines += ["", "dry step from the robot's default state (upright, at rest, zero command):"]
    if not step.finite:
        report.problems.append(
            f"the dry step gives a non-finite action ({int(np.sum(~np.isfinite(step.action)))} values)"
        )
        return
    delta = step.q_target - robot.array("default")
    worst = int(np.argmax(np.abs(delta)))
    lo, hi = robot.array("lower"), robot.array("upper")
    outside = [robot.joint_names[i] for i in np.flatnonzero((step.q_target < lo) | (step.q_target > hi))]
    report.lines += [
        f"  obs |max| {np.max(np.abs(step.obs)):.4g}; action |max| {np.max(np.abs(step.action)):.4g}",
        f"  targets: largest change from the robot's default pose {delta[worst]:+.4f} rad "
        f"({robot.joint_names[worst]})"
        + (f"; beyond the joint limits (the driver clamps them): {outside}" if outside else ""),
    ]


def check_policy(policy: str, robot: str = "g1", onnx: str | None = None) -> CheckReport:
    """Resolve ``policy`` (name or path) against ``robot`` and collect the report (see module docstring)."""
    report = CheckReport()
    try:
        config = load_robot_config(robot)
        path = find_policy_file(policy)
    except (ConfigError, ManifestError) as exc:
        report.problems.append(str(exc))
        return report
    onnx_path = Path(onnx) if onnx else None
    if policy_format(path) == "isaaclab_io_descriptors":
        manifest, problems = parse_isaaclab_io_descriptors(path, onnx_path)
        report.problems += problems
    else:
        try:
            manifest = load_policy_file(path, config, onnx_path)
        except ManifestError as exc:
            manifest = None
            report.problems.append(str(exc))
    if manifest is None:
        return report
    report.manifest = manifest
    report.problems += manifest.robot_problems(config)
    report.lines += _describe(manifest, config)
    if report.ok:
        _dry_step(manifest, config, report)
    else:
        report.lines += ["", "dry step skipped: the policy has problems"]
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-policy``."""
    parser = argparse.ArgumentParser(prog="humanoid-policy", description="learned-policy tools")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser(
        "check",
        help="check a policy against the robot: joint map, observation layout, action scaling, a dry step",
    )
    check.add_argument(
        "policy", help="IO_descriptors.yaml, deploy.yaml, holosoma ONNX, manifest YAML or name"
    )
    check.add_argument("--robot", default="g1", help="robot configuration name or YAML path (default g1)")
    check.add_argument("--onnx", default=None, help="the network of an Isaac Lab IO-descriptor / deploy YAML")
    args = parser.parse_args(argv)
    report = check_policy(args.policy, args.robot, args.onnx)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
