"""MuJoCo backend physics in-process: the driver core holds the G1 up; sensors and contacts are physical."""

from __future__ import annotations

import numpy as np
import pytest

from humanoid_control.driver.driver_core import DriverCore, DriverMode, DriverSettings
from humanoid_control.hardware.mujoco_sim import ImuNoise, MujocoBackend, tilt_from_quat
from humanoid_control.hardware.registry import create_backend
from humanoid_control.hardware.types import LowLevelCommand
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height

CONFIG = load_robot_config("g1")
DT = 0.002


def _run(backend: MujocoBackend, core: DriverCore, seconds: float) -> list[float]:
    heights = []
    for _ in range(round(seconds / DT)):
        s = backend.read()
        backend.write(core.update(s.q, s.dq, tilt_from_quat(s.imu_quat)))
        backend.advance(DT)
        heights.append(backend.base_height())
    return heights


def test_boot_ramp_and_hold_keeps_base_height_within_2cm() -> None:
    backend = MujocoBackend(CONFIG)
    core = DriverCore(CONFIG, DriverSettings())
    _run(backend, core, 2.5)
    assert core.mode == DriverMode.HOLD
    heights = np.array(_run(backend, core, 10.0))
    nominal = standing_base_height(CONFIG, load_pinocchio_model(CONFIG), CONFIG.array("default"))
    assert np.abs(heights - nominal).max() < 0.02
    # at rest: soles carry the weight, the accelerometer reads +g along z, the gyro ~0
    truth = backend.ground_truth()
    weight = backend.model.body_subtreemass[backend.mj.base_body_id] * 9.81
    fz = truth.contacts["left"].force[2] + truth.contacts["right"].force[2]
    assert fz == pytest.approx(weight, rel=0.02)
    assert abs(truth.contacts["left"].force[2] - truth.contacts["right"].force[2]) < 0.1 * weight
    state = backend.read()
    assert np.linalg.norm(state.accel) == pytest.approx(9.81, abs=0.05)
    assert np.abs(state.gyro).max() < 1e-2
    assert np.abs(truth.linear_velocity_body).max() < 1e-2


def test_damping_lets_the_robot_sink() -> None:
    backend = MujocoBackend(CONFIG)
    core = DriverCore(CONFIG, DriverSettings())
    _run(backend, core, 2.5)
    core.estop()
    heights = _run(backend, core, 2.0)
    assert heights[-1] < heights[0] - 0.1  # no stiffness: the robot does not stand by itself


def test_torque_clamped_to_effort_limits() -> None:
    backend = MujocoBackend(CONFIG)
    n = CONFIG.num_joints
    huge = LowLevelCommand(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.full(n, 1e4))
    backend.write(huge)
    backend.advance(DT)
    np.testing.assert_allclose(backend.read().tau, CONFIG.array("effort"))


def test_imu_noise_is_seeded_and_off_by_default() -> None:
    quiet = MujocoBackend(CONFIG)
    a = MujocoBackend(CONFIG, imu_noise=ImuNoise(gyro_noise_std=0.01, gyro_bias_std=0.02, seed=3))
    b = MujocoBackend(CONFIG, imu_noise=ImuNoise(gyro_noise_std=0.01, gyro_bias_std=0.02, seed=3))
    for backend in (quiet, a, b):
        backend.advance(DT)
    assert np.array_equal(a.read().gyro, b.read().gyro)
    assert np.abs(a.read().gyro - quiet.read().gyro).max() > 1e-4


def test_unknown_backend_names_allowed_values() -> None:
    with pytest.raises(
        ValueError, match="unknown hardware 'gazebo' \\(allowed: can_mit, mujoco, unitree_g1\\)"
    ):
        create_backend("gazebo", config=CONFIG)


def test_initial_pose_places_the_robot_and_respawn_returns_there() -> None:
    import math

    backend = MujocoBackend(CONFIG, initial_pose=(1.0, -2.0, 0.5))
    core = DriverCore(CONFIG, DriverSettings())
    truth = backend.ground_truth()
    assert truth.position[:2] == pytest.approx([1.0, -2.0])
    w, _x, _y, z = truth.quat
    assert 2.0 * math.atan2(z, w) == pytest.approx(0.5)
    _run(backend, core, 0.5)  # stands there on the floor
    assert backend.ground_truth().position[:2] == pytest.approx([1.0, -2.0], abs=0.02)
    backend.data.qpos[0:2] = [5.0, 5.0]
    backend.respawn()
    assert backend.ground_truth().position[:2] == pytest.approx([1.0, -2.0])
    with pytest.raises(ValueError, match="finite"):
        MujocoBackend(CONFIG, initial_pose=(math.nan, 0.0, 0.0))


@pytest.mark.parametrize("integrator", ["mjINT_IMPLICITFAST", "mjINT_IMPLICIT", "mjINT_EULER"])
def test_a_step_from_the_last_forward_pass_is_mj_step_bit_for_bit(
    integrator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """advance() redoes only the acceleration stages of the forward pass it made at the end of the last
    advance: the states, sensors and contact forces must be mj_step's exactly, through the ramp, a push, a
    fall in damping with contacts made and broken, and a state written from outside (which forces mj_step)."""
    import mujoco

    from humanoid_control.hardware.push import PushRequest

    skipped = []
    step_from_forward = MujocoBackend._step_from_forward

    def counted(self: MujocoBackend) -> None:
        skipped.append(self.data.time)
        step_from_forward(self)

    monkeypatch.setattr(MujocoBackend, "_step_from_forward", counted)
    backend = MujocoBackend(CONFIG)
    m = backend.model
    m.opt.integrator = getattr(mujoco.mjtIntegrator, integrator)
    backend.reset()
    ref = mujoco.MjData(m)
    ref.qpos[:], ref.qvel[:], ref.time = backend.data.qpos, backend.data.qvel, backend.data.time
    mujoco.mj_forward(m, ref)
    core = DriverCore(CONFIG, DriverSettings())
    base = backend.mj.base_body_id
    contacts_seen = set()
    for k in range(1600):
        if k == 700:
            backend.push(PushRequest((150.0, 40.0, 0.0), 0.05, 25))
        if k == 1000:
            core.estop()
        if k == 1300:  # from outside: the base given a kick in both
            backend.data.qvel[0] += 0.5
            ref.qvel[0] += 0.5
        s = backend.read()
        backend.write(core.update(s.q, s.dq, tilt_from_quat(s.imu_quat)))
        ref.xfrc_applied[base, 0:3] = (150.0, 40.0, 0.0) if backend.push_active else 0.0
        backend.advance(DT)
        ref.ctrl[:] = backend.data.ctrl
        mujoco.mj_step(m, ref)
        ref.xfrc_applied[base] = backend.data.xfrc_applied[base]  # the push off after its last step
        mujoco.mj_forward(m, ref)
        d = backend.data
        assert d.time == ref.time
        for name in ("qpos", "qvel", "qacc", "sensordata", "qacc_warmstart"):
            np.testing.assert_array_equal(getattr(d, name), getattr(ref, name), err_msg=f"{name} at tick {k}")
        assert d.ncon == ref.ncon
        contacts_seen.add(d.ncon)
    assert core.mode == DriverMode.DAMPING and backend.base_height() < 0.5  # it fell: contacts changed
    assert len(contacts_seen) > 3
    assert len(skipped) == 1599  # every step but the one after the state was written from outside


def test_a_step_started_on_the_physics_thread_is_advance_and_readers_wait_for_it() -> None:
    """start_advance returns at once, its time is known at once, every reader waits for the step, and the
    run equals one made with advance, through the ramp, a push and a respawn; a failed step is raised."""
    from humanoid_control.hardware.push import PushRequest

    runs = []
    for threaded in (False, True):
        backend = MujocoBackend(CONFIG)
        core = DriverCore(CONFIG, DriverSettings())
        rows = []
        for k in range(600):
            if k == 300:
                backend.push(PushRequest((120.0, 0.0, 0.0), 0.04, 20))
            if k == 450:
                backend.respawn()
            s = backend.read()
            backend.write(core.update(s.q, s.dq, tilt_from_quat(s.imu_quat)))
            if threaded:
                before = backend.data.time
                backend.start_advance(DT)
                assert backend.time == pytest.approx(before + DT, abs=1e-12)  # at once, while it steps
                if k % 7 == 0:  # the readers in turn wait for it
                    rows.append(("truth", backend.ground_truth().position.copy()))
                elif k % 7 == 1:
                    rows.append(("height", backend.base_height()))
            else:
                backend.advance(DT)
                if k % 7 == 0:
                    rows.append(("truth", backend.ground_truth().position.copy()))
                elif k % 7 == 1:
                    rows.append(("height", backend.base_height()))
            rows.append(("time", backend.time))
        s = backend.read()
        rows.append(("state", np.concatenate([s.q, s.dq, s.gyro, s.accel])))
        backend.close()
        runs.append(rows)
    assert len(runs[0]) == len(runs[1])
    for (name, a), (name_t, b) in zip(*runs, strict=True):
        assert name == name_t
        np.testing.assert_array_equal(a, b, err_msg=name)

    backend = MujocoBackend(CONFIG)
    backend.start_advance(DT)
    backend.read()
    bad = np.zeros(3)  # a broken command (3 joints): the joint law fails in the step
    backend.write(LowLevelCommand(bad, bad, bad, bad, bad))
    backend.start_advance(DT)
    with pytest.raises(RuntimeError, match="physics step failed"):
        backend.read()
    backend.close()
