"""``humanoid-bench estimator``: the state estimator's update time per tick (us), in process.

The estimator (IMU propagation, leg kinematics, contacts, slip, estimate) replayed over a recorded walk of the
G1 (holosoma fastsac, MEMS IMU noise, in-process MuJoCo); the walk is the estimator evaluation's command
script (:data:`humanoid_bringup.evaluation.estimator_eval.ESTIMATOR_SCRIPT`) cut to the requested length.
"""

from __future__ import annotations

from typing import Any


def bench_estimator(seconds: float, seed: int, robot: str = "g1", policy: str = "") -> dict[str, Any]:
    """Estimator update time per tick (IMU propagation + leg kinematics, contacts, slip + estimate), in
    process, over a recorded walk of the G1 (holosoma fastsac, MEMS IMU noise, in-process MuJoCo).
    ``robot``: the configuration (``config/robots/<robot>.yaml``); ``policy``: the walking policy, "" for
    holosoma fastsac on the G1, else the robot's ``default_policy``
    (:func:`.policy_bench.bench_policy_name`)."""
    import time

    import numpy as np

    from humanoid_bringup.evaluation.estimator_eval import ESTIMATOR_SCRIPT
    from humanoid_bringup.evaluation.policy_bench import bench_policy_name
    from humanoid_control.estimation.ekf import EstimatorNoise
    from humanoid_control.estimation.estimator import StateEstimator
    from humanoid_control.hardware.mujoco_sim import ImuNoise
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_policy.inprocess import run_in_process
    from humanoid_policy.manifest import load_policy

    config = load_robot_config(robot)
    policy = bench_policy_name(policy, config, "holosoma/g1_fastsac")
    script, left = [], seconds
    for name, duration, cmd in ESTIMATOR_SCRIPT:  # the evaluation's script, cut to ``seconds``
        if left <= 0:
            break
        script.append((name, min(duration, left), cmd))
        left -= duration
    noise = ImuNoise(
        gyro_noise_std=0.004,
        gyro_bias_std=0.005,
        gyro_bias_walk=1e-4,
        accel_noise_std=0.03,
        accel_bias_std=0.05,
        accel_bias_walk=1e-3,
        seed=seed,
    )
    log = run_in_process(load_policy(policy, config), config, script, imu_noise=noise, record_sensors=True)
    est = StateEstimator(config, EstimatorNoise(ground_height=0.01))
    n = len(log.t)
    predict_us, correct_us, tick_us = np.zeros(n), np.zeros(n), np.zeros(n)
    clock = time.perf_counter
    for k in range(n):
        t0 = clock()
        if k == 0:
            est.initialize(log.t[0], log.imu_quat[0], log.joint_q[0])
        else:
            est.predict(log.t[k], log.imu_gyro[k], log.imu_accel[k])
        t1 = clock()
        est.correct(log.joint_q[k], log.joint_tau[k], log.joint_dq[k], log.imu_gyro[k])
        est.estimate(log.t[k], log.imu_gyro[k])
        t2 = clock()
        predict_us[k], correct_us[k], tick_us[k] = (t1 - t0) * 1e6, (t2 - t1) * 1e6, (t2 - t0) * 1e6
    tick_us, predict_us, correct_us = tick_us[1:], predict_us[1:], correct_us[1:]
    return {
        "benchmark": "estimator",
        "robot": robot,
        "policy": policy,
        "ticks": int(tick_us.size),
        "update_us_median": float(np.median(tick_us)),
        "update_us_p99": float(np.percentile(tick_us, 99)),
        "predict_us_median": float(np.median(predict_us)),
        "correct_us_median": float(np.median(correct_us)),
        "goal_update_us_median": 100.0,
    }
