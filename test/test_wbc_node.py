"""Fast tests of the WBC node's pure parts and of the simulated push: push validation, the backend's push and
respawn, the driver core's respawn, the WBC runner's states and refusals, markers (no ROS graph)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from humanoid_control.driver.driver_core import DriverCore, DriverMode, DriverSettings, JointCommand
from humanoid_control.hardware.mujoco_sim import MujocoBackend
from humanoid_control.hardware.push import PushError, PushLimits, push_force, validate_push
from humanoid_control.model.joint_order import reorder
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height
from humanoid_control.wbc.command import CommandMode
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.markers import marker_set
from humanoid_control.wbc.runner import OdomSample, WbcRunner, WbcRunnerSettings, WbcState

CONFIG = load_robot_config("g1")
PMODEL = load_pinocchio_model(CONFIG)


# ---------------------------------------------------------------------------------------------- pushes
def test_validate_push_accepts_a_whole_number_of_steps() -> None:
    req = validate_push([10.0, -20.0, 0.0], 0.1)
    assert req.force == (10.0, -20.0, 0.0)
    assert req.steps == 50
    assert req.impulse == pytest.approx(math.hypot(10.0, 20.0) * 0.1)
    assert validate_push((0, 0, 5), 0.002).steps == 1


@pytest.mark.parametrize(
    ("force", "duration", "words"),
    [
        ([1.0, 2.0], 0.1, "3 components"),
        ([1.0, float("nan"), 0.0], 0.1, "non-finite"),
        ([0.0, 0.0, 0.0], float("inf"), "non-finite"),
        ([3000.0, 0.0, 0.0], 0.1, "exceeds"),
        ([1.0, 0.0, 0.0], 0.0, "not in"),
        ([1.0, 0.0, 0.0], -0.1, "not in"),
        ([1.0, 0.0, 0.0], 6.0, "not in"),
        ([1.0, 0.0, 0.0], 0.003, "whole number"),
        (["a", 0.0, 0.0], 0.1, "not numbers"),
    ],
)
def test_validate_push_refuses(force: object, duration: float, words: str) -> None:
    with pytest.raises(PushError, match=words):
        validate_push(force, duration, PushLimits(max_force=2000.0, max_duration=5.0, timestep=0.002))


def test_push_force_directions() -> None:
    assert push_force("front", 2.0, 0.1) == pytest.approx((20.0, 0.0, 0.0))
    assert push_force("right", 2.0, 0.1) == pytest.approx((0.0, -20.0, 0.0))
    with pytest.raises(PushError, match="unknown direction"):
        push_force("up", 1.0, 0.1)


def test_backend_push_lasts_exactly_its_steps_and_respawn_keeps_time() -> None:
    import mujoco

    backend = MujocoBackend(CONFIG, initial_joint_positions=CONFIG.array("default"))
    m, d = backend.model, backend.data
    # free flight without gravity: the total linear momentum changes by the push's impulse only
    m.opt.gravity[:] = 0.0
    d.qpos[backend.mj.base_qpos_adr + 2] += 1.0
    mujoco.mj_forward(m, d)
    mass = float(m.body_subtreemass[backend.mj.base_body_id])
    backend.push(validate_push([30.0, 0.0, -12.0], 0.01))  # 5 physics steps
    backend.advance(0.01)
    assert not backend.push_active
    assert d.xfrc_applied[backend.mj.base_body_id, :3].tolist() == [0.0, 0.0, 0.0]

    def momentum() -> np.ndarray:
        mujoco.mj_subtreeVel(m, d)
        return mass * d.subtree_linvel[backend.mj.base_body_id]

    # 5 steps exactly: a step more or less would be 20 % off (the integrator's implicit joint damping: 1e-5)
    np.testing.assert_allclose(momentum(), [0.3, 0.0, -0.12], rtol=1e-4, atol=1e-6)
    backend.advance(0.01)  # nothing more
    np.testing.assert_allclose(momentum(), [0.3, 0.0, -0.12], rtol=1e-4, atol=1e-6)
    t = backend.time
    backend.push(validate_push([30.0, 0.0, 0.0], 0.1))
    backend.respawn(CONFIG.array("default"))
    assert backend.time == pytest.approx(t)
    assert not backend.push_active
    assert backend.ground_truth().position[0] == 0.0


def test_driver_core_respawn_ramps_in_place_then_holds() -> None:
    core = DriverCore(CONFIG, DriverSettings(rate_hz=500.0))
    core.estop()
    assert core.mode == DriverMode.DAMPING
    core.respawned(settle_s=0.01)  # 5 ticks (+ the tick that completes it, as every ramp)
    assert core.mode == DriverMode.RAMP
    default = CONFIG.array("default")
    n = CONFIG.num_joints
    assert not core.submit(JointCommand(default, np.zeros(n), np.zeros(n)))  # ignored while settling
    for _ in range(6):
        cmd = core.update(default, np.zeros(n))
        np.testing.assert_allclose(cmd.q, default)
    assert core.mode == DriverMode.HOLD
    # a later ordinary reset ramps for ramp_duration again
    core.reset(default)
    core.update(default, np.zeros(n))
    assert core._ramp_ticks is None and core.mode == DriverMode.RAMP


# ---------------------------------------------------------------------------------------------- runner
def _standing_odom(t: float) -> OdomSample:
    joints = CONFIG.array("default")
    z = standing_base_height(CONFIG, PMODEL, joints)
    return OdomSample(t, np.array([0.0, 0.0, z]), np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3), np.zeros(3))


@pytest.fixture(scope="module")
def controller() -> StandingController:
    return StandingController(CONFIG, PMODEL)


def _runner(controller: StandingController, **kw: float) -> WbcRunner:
    controller.commands.reset()
    runner = WbcRunner(controller, WbcRunnerSettings(**kw))  # type: ignore[arg-type]
    runner.gains_ready = True
    return runner


def test_runner_commands_once_gains_mode_and_odom_are_there(controller: StandingController) -> None:
    q, dq = CONFIG.array("default"), np.zeros(CONFIG.num_joints)
    runner = WbcRunner(controller)
    assert runner.update(0.0, q, dq, "hold") is None and runner.state == WbcState.WAIT  # no gains yet
    runner.gains_ready = True
    assert runner.update(0.0, q, dq, None) is None  # driver mode unknown
    assert runner.update(0.0, q, dq, "hold") is None and "odom" in runner.reason
    assert runner.set_odom(_standing_odom(0.0))
    cmd = runner.update(0.0, q, dq, "hold")
    assert cmd is not None and cmd.mode == CommandMode.TRACK and runner.state == WbcState.RUN
    assert np.all(np.isfinite(cmd.tau_ff)) and np.abs(cmd.tau_ff).max() > 1.0  # gravity compensation
    assert runner.update(0.002, q, dq, "damping") is None and runner.state == WbcState.WAIT


def test_runner_refuses_bad_input_then_faults_and_recovers_on_driver_ramp(
    controller: StandingController,
) -> None:
    q, dq = CONFIG.array("default"), np.zeros(CONFIG.num_joints)
    runner = _runner(controller, max_odom_age_s=0.01, max_bad_ticks=3)
    runner.set_odom(_standing_odom(0.0))
    assert runner.update(0.0, q, dq, "active") is not None
    bad = q.copy()
    bad[3] = np.nan
    assert runner.update(0.002, bad, dq, "active") is None
    assert runner.counters.states_refused == 1 and runner.state == WbcState.RUN
    assert runner.update(0.05, q, dq, "active") is None  # /odom 50 ms old
    assert runner.counters.odom_stale == 1 and "older" in runner.counters.last_refusal
    assert runner.update(0.052, q, dq, "active") is None
    assert not runner.estop_requested
    assert runner.update(0.054, q, dq, "active") is None  # 4th bad tick in a row > 3
    assert runner.state == WbcState.FAULT and runner.estop_requested and runner.counters.faults == 1
    runner.set_odom(_standing_odom(0.06))
    assert runner.update(0.06, q, dq, "damping") is None  # latched
    assert runner.update(0.06, q, dq, "active") is None  # still latched: the driver has not been reset
    assert runner.update(0.06, q, dq, "ramp") is not None  # driver reset/respawn: runs again (ignored)
    assert runner.state == WbcState.RUN


def test_runner_refuses_unusable_odom(controller: StandingController) -> None:
    runner = _runner(controller)
    o = _standing_odom(0.0)
    o.quat_xyzw = np.array([0.0, 0.0, 0.0, 2.0])
    assert not runner.set_odom(o) and runner.counters.odom_refused == 1
    o = _standing_odom(0.0)
    o.linear_velocity[0] = np.inf
    assert not runner.set_odom(o) and runner.counters.last_refusal == "non-finite /odom"
    assert runner.odom is None


def test_runner_qp_failure_faults_only_when_the_driver_uses_the_commands(
    controller: StandingController,
) -> None:
    q, dq = CONFIG.array("default"), np.zeros(CONFIG.num_joints)
    runner = _runner(controller)
    runner.set_odom(_standing_odom(0.0))
    assert runner.update(0.0, q, dq, "active") is not None
    qp = controller.qp
    qp.torque_limits.scale = 0.0
    for f in qp.friction.values():
        f.f_max = 0.0
    qp.settings.relax_limits = False  # the failure path is under test, not its fallback (test_wbc.py)
    try:
        for _ in range(3):  # driver ramping: failures are not acted on, commands keep pacing lockstep
            cmd = runner.update(0.0, q, dq, "ramp")
            assert cmd is not None
        assert runner.state == WbcState.RUN and not runner.estop_requested
        hold = controller.commands.settings.max_hold_ticks
        for _ in range(hold):
            cmd = runner.update(0.0, q, dq, "active")
            # no safe command since the ramp reset the generator: damping requested at once -> fault
            if cmd is None:
                break
        assert runner.state == WbcState.FAULT and runner.estop_requested
        assert "QP failed" in runner.reason
    finally:
        qp.torque_limits.scale = 1.0
        qp.settings.relax_limits = True
        for f in qp.friction.values():
            f.f_max = 2000.0
        controller.commands.reset()


def test_reorder_joint_messages() -> None:
    names = ["a", "b", "c"]
    q, dq = reorder(names, ["c", "a", "b"], [3.0, 1.0, 2.0], [30.0, 10.0, 20.0])  # type: ignore[misc]
    np.testing.assert_array_equal(q, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(dq, [10.0, 20.0, 30.0])
    assert "without joints ['b']" in str(reorder(names, ["c", "a"], [3.0, 1.0], [0.0, 0.0]))
    assert reorder(names, ["c", "a", "b"], [3.0, 1.0], [0.0, 0.0, 0.0]) == "joint state with wrong lengths"


def test_markers_of_a_standing_tick(controller: StandingController) -> None:
    runner = _runner(controller)
    runner.set_odom(_standing_odom(0.0))
    runner.update(0.0, CONFIG.array("default"), np.zeros(CONFIG.num_joints), "active")
    bal, out, dyn = controller.balance.state, controller.last_output, controller.qp.dyn
    assert bal is not None and out is not None
    ms = marker_set(
        bal, {s: dyn.contact_points_world(s) for s in dyn.sides}, out.forces, dyn.mass * dyn.gravity
    )
    kinds = [m.ns for m in ms.markers]
    for ns in ("com", "capture_point", "capture_point_ref", "cop", "cmp", "support_polygon"):
        assert ns in kinds
    arrows = [m for m in ms.markers if m.kind == "arrow"]
    assert len(arrows) == sum(len(f) for f in out.forces.values())
    # the arrows' lengths add up to about the weight's length (0.5 m) when standing still
    total = sum(np.linalg.norm(a.points[1] - a.points[0]) for a in arrows)
    assert total == pytest.approx(0.5, rel=0.05)
    poly = next(m for m in ms.markers if m.ns == "support_polygon").points
    np.testing.assert_allclose(poly[0], poly[-1])  # closed
