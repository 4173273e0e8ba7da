"""Record the states a policy sees while walking, for the parity test with holosoma-inference.

Runs the in-process loop (MuJoCo + driver core + policy runner) on a short command script and writes, per
policy step, the inputs the policy used: ``q``, ``dq`` (policy joint order, rad, rad/s), ``quat_wxyz`` (IMU
orientation), ``gyro`` (rad/s, IMU frame) and ``cmd`` (vx, vy, wz).

    .venv/bin/python scripts/record_policy_states.py --policy ppo --out test/data/holosoma_states_ppo.npz

Then ``scripts/holosoma_reference.py`` (in its own venv, see its docstring) runs holosoma-inference's own
policy code on the same states and writes the reference vectors the test compares against.
"""

from __future__ import annotations

import argparse

import numpy as np

from humanoid_control.model.robot_config import load_robot_config
from humanoid_policy.inprocess import run_in_process
from humanoid_policy.manifest import load_policy

SCRIPT = [
    ("stand", 0.5, (0.0, 0.0, 0.0)),
    ("forward", 1.0, (0.5, 0.0, 0.0)),
    ("turn", 0.5, (0.0, 0.2, 0.5)),
    ("stop", 0.3, (0.0, 0.0, 0.0)),
    ("backward", 0.7, (-0.3, 0.1, -0.2)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=["ppo", "fastsac"], required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    robot = load_robot_config("g1")
    manifest = load_policy(f"holosoma/g1_{args.policy}", robot)
    log = run_in_process(manifest, robot, SCRIPT)
    if log.fell:
        raise SystemExit("the robot fell while recording")
    idx = manifest.robot_indices(robot)
    n = round(sum(d for _, d, _ in SCRIPT) * manifest.rate_hz)  # policy steps of the script
    log.step_q, log.step_dq, log.step_quat = log.step_q[:n], log.step_dq[:n], log.step_quat[:n]
    log.step_gyro, log.step_cmd, log.step_obs = log.step_gyro[:n], log.step_cmd[:n], log.step_obs[:n]
    log.step_action, log.step_target, log.step_t = log.step_action[:n], log.step_target[:n], log.step_t[:n]
    np.savez_compressed(
        args.out,
        policy=np.array(args.policy),
        joint_names=np.array(manifest.joint_names),
        q=np.array(log.step_q)[:, idx],
        dq=np.array(log.step_dq)[:, idx],
        quat_wxyz=np.array(log.step_quat),
        gyro=np.array(log.step_gyro),
        cmd=np.array(log.step_cmd),
    )
    print(f"{len(log.step_t)} policy steps -> {args.out}")


if __name__ == "__main__":
    main()
