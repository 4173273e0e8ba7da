"""Sim-to-sim sensitivity of a learned policy: what makes it fall in MuJoCo, measured one change at a time.

Runs the in-process loop (the same driver and policy cores as the ROS nodes) on stand 1 s / forward 0.5 m/s
4 s / turn 0.5 rad/s 3 s, once faithful and once per deviation (model armature and friction, PD gains, action
delay, observation conventions, start pose), and prints one JSON object per line plus a summary table.

    .venv/bin/python scripts/sim2sim_sensitivity.py --policy holosoma/g1_ppo
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import quat_wxyz_to_matrix
from humanoid_policy.inprocess import run_in_process
from humanoid_policy.manifest import load_policy
from humanoid_policy.runner import ImuSample

SCRIPT = [("stand", 1.0, (0.0, 0.0, 0.0)), ("forward", 4.0, (0.5, 0.0, 0.0)), ("turn", 3.0, (0.0, 0.0, 0.5))]


def _set_dofs(attr: str, value: float):
    def hook(model: Any) -> None:
        getattr(model, attr)[6:] = value

    return hook


def _xyzw(sample: ImuSample, _backend: Any) -> ImuSample:
    q = sample.quat_wxyz
    return ImuSample(sample.t, np.array([q[1], q[2], q[3], q[0]]), sample.gyro)  # xyzw read as wxyz


def _world_gyro(sample: ImuSample, _backend: Any) -> ImuSample:
    return ImuSample(sample.t, sample.quat_wxyz, quat_wxyz_to_matrix(sample.quat_wxyz) @ sample.gyro)


VARIANTS: dict[str, dict[str, Any]] = {
    "faithful": {},
    "start_from_soft_hold": {"hold_before_run_s": 1.0},
    "armature_0": {"model_hook": _set_dofs("dof_armature", 0.0)},
    "frictionloss_0": {"model_hook": _set_dofs("dof_frictionloss", 0.0)},
    "joint_damping_1": {"model_hook": _set_dofs("dof_damping", 1.0)},
    "gains_x0.5": {"gain_scale": 0.5},
    "gains_x2": {"gain_scale": 2.0},
    "delay_1_tick": {"delay_ticks": 1},
    "delay_1_policy_step": {"delay_ticks": 10},
    "delay_2_policy_steps": {"delay_ticks": 20},
    "quaternion_xyzw": {"imu_hook": _xyzw},
    "gyro_world_frame": {"imu_hook": _world_gyro},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="holosoma/g1_ppo")
    parser.add_argument("--only", nargs="*", help="variant names")
    args = parser.parse_args()
    robot = load_robot_config("g1")
    manifest = load_policy(args.policy, robot)
    rows = []
    for name, kwargs in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        log = run_in_process(manifest, robot, SCRIPT, **kwargs)
        t = np.array(log.t) - (log.step_t[0] if log.step_t else 0.0)
        v, w = np.array(log.lin_vel_body), np.array(log.ang_vel_body)
        fwd, turn = (t > 2.0) & (t < 5.0), (t > 6.0) & (t < 8.0)
        row = {
            "policy": args.policy,
            "variant": name,
            "fell": log.fell,
            "survived_s": round(float(t[-1]), 2) if len(t) else 0.0,
            "forward_vx": round(float(v[fwd, 0].mean()), 3) if fwd.any() else None,
            "turn_wz": round(float(w[turn, 2].mean()), 3) if turn.any() else None,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| variant | fell | survived (s) | forward vx (m/s) | turn wz (rad/s) |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['fell']} | {r['survived_s']} | {r['forward_vx']} | {r['turn_wz']} |")


if __name__ == "__main__":
    main()
