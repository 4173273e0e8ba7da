"""Whole-body controller core (humanoid_control.wbc): QP at equilibrium, dynamics residual, failure policy,
standing and a push in MuJoCo in-process (ground-truth state)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height
from humanoid_control.wbc.balance import (
    clamp_to_polygon,
    convex_hull,
    offset_polygon,
    push_impulse_bounds,
)
from humanoid_control.wbc.command import CommandGenerator, CommandMode, CommandSettings
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.qp import WbcSettings, WholeBodyQP
from humanoid_control.wbc.sim_loop import run_standing, survives_push

CONFIG = load_robot_config("g1")
PMODEL = load_pinocchio_model(CONFIG)


def _standing_state() -> tuple[np.ndarray, np.ndarray]:
    joints = CONFIG.array("default")
    q = PMODEL.neutral_q(joints, standing_base_height(CONFIG, PMODEL, joints))
    return q, np.zeros(PMODEL.model.nv)


def test_static_equilibrium_zero_acceleration_and_weight_on_the_soles() -> None:
    qp = WholeBodyQP(CONFIG, PMODEL)
    q, v = _standing_state()
    qp.update_dynamics(q, v)
    # hold the CoM where it is: zero desired acceleration
    qp.com.desired_acceleration[:] = 0.0
    out = qp.solve()
    assert out.ok
    weight = qp.dyn.mass * qp.dyn.gravity  # 327 N for the G1
    total = sum(f.sum(axis=0) for f in out.forces.values())
    # tolerances: OSQP eps 1e-4 -> accelerations within 1e-3 (m/s^2, rad/s^2), forces within 0.5 N (0.15 %)
    assert np.abs(out.qdd).max() < 1e-3
    assert total[2] == pytest.approx(weight, abs=0.5)
    assert np.abs(total[:2]).max() < 0.5
    for f in out.forces.values():
        assert np.all(f[:, 2] > 0.0)  # every corner pushes
    # the two feet carry about the same load (symmetric pose)
    assert out.forces["left"][:, 2].sum() == pytest.approx(out.forces["right"][:, 2].sum(), rel=0.05)
    assert qp.dynamics_residual(out.qdd, out.forces, out.tau) <= 1e-6


def test_the_problem_of_a_state_does_not_change_with_uptime() -> None:
    # the cost and constraints are a function of the state alone: solving the same state 1000 times must give
    # the same matrices (a regularization added instead of written once made the force penalty grow every
    # tick, so the controller braked a push less and less the longer it ran)
    qp = WholeBodyQP(CONFIG, PMODEL)
    q, v = _standing_state()
    qp.update_dynamics(q, v)
    qp.com.desired_acceleration[:] = 0.0
    first = qp.solve()
    P0, A0, g0 = qp._P.copy(), qp._A.copy(), qp._g.copy()
    for _ in range(1000):
        qp.update_dynamics(q, v)
        qp.solve()
    assert np.array_equal(qp._P, P0) and np.array_equal(qp._A, A0) and np.array_equal(qp._g, g0)
    last = qp.solve()
    assert np.allclose(last.qdd, first.qdd, atol=1e-3)


def test_a_nan_state_fails_that_tick_only() -> None:
    # a non-finite state is refused before the solver; the next good state solves (no NaN warm start kept)
    qp = WholeBodyQP(CONFIG, PMODEL)
    q, v = _standing_state()
    qp.update_dynamics(q, v)
    assert qp.solve().ok
    bad_v, bad_q = v.copy(), q.copy()
    bad_v[0] = np.nan
    bad_q[10] = np.nan
    for state in ((q, bad_v), (bad_q, v)):
        qp.update_dynamics(*state)
        out = qp.solve()
        assert not out.ok and out.status.value == "non_finite_input"
        assert np.all(np.isnan(out.tau))
        qp.update_dynamics(q, v)
        out = qp.solve()
        assert out.ok and np.all(np.isfinite(out.qdd))
    # a non-finite reference (a task target) is refused the same way
    qp.com.desired_acceleration[0] = np.inf
    with np.errstate(invalid="ignore"):  # inf * 0 weights in the gradient
        assert qp.solve().status.value == "non_finite_input"
    qp.com.desired_acceleration[0] = 0.0
    assert qp.solve().ok


def test_dynamics_residual_and_limits_at_perturbed_states() -> None:
    qp = WholeBodyQP(CONFIG, PMODEL)
    q0, _ = _standing_state()
    rng = np.random.default_rng(7)
    effort = qp.torque_limits.tau_max
    mu = qp.friction["left"].mu
    for _ in range(20):
        q = pin.integrate(PMODEL.model, q0, rng.normal(scale=0.02, size=PMODEL.model.nv))
        v = rng.normal(scale=0.1, size=PMODEL.model.nv)
        qp.update_dynamics(q, v)
        qp.com.desired_acceleration[:] = rng.normal(scale=0.3, size=3)
        out = qp.solve()
        assert out.ok
        # ||M qdd + h - S^T tau - J^T f||_inf <= 1e-6 (N, N m)
        assert qp.dynamics_residual(out.qdd, out.forces, out.tau) <= 1e-6
        assert np.all(np.abs(out.tau) <= effort + 1e-2)
        for f in out.forces.values():  # soles are flat: world z is the normal
            assert np.all(f[:, 2] >= -1e-3)
            assert np.all(np.abs(f[:, :2]) <= mu * f[:, 2:3] + 1e-2)


def test_infeasible_qp_holds_last_command_then_requests_damping() -> None:
    # no relaxing of the limit rows: the failure itself is under test (its fallback is tested below)
    ctl = StandingController(
        CONFIG, PMODEL, wbc=WbcSettings(relax_limits=False), command=CommandSettings(max_hold_ticks=3)
    )
    q, v = _standing_state()
    first = ctl.step(q, v)
    assert first.mode == CommandMode.TRACK
    # no joint torque and no ground reaction: the passive robot falls, yet the soles must not accelerate.
    # (Zero torque alone is feasible: the robot may crumple passively with its feet in friction cones.)
    ctl.qp.torque_limits.scale = 0.0
    for friction in ctl.qp.friction.values():
        friction.f_max = 0.0
    modes = []
    for _ in range(5):
        cmd = ctl.step(q, v)
        assert ctl.last_output is not None and not ctl.last_output.ok
        assert ctl.last_output.status.value in ("infeasible", "max_iter")
        modes.append(cmd.mode)
        if cmd.mode == CommandMode.HOLD_LAST:
            np.testing.assert_array_equal(cmd.tau_ff, first.tau_ff)
            np.testing.assert_array_equal(cmd.q, first.q)
    assert modes == [CommandMode.HOLD_LAST] * 3 + [CommandMode.DAMPING] * 2
    counters = ctl.commands.counters
    assert (counters.solved, counters.failed, counters.longest, counters.damping_requests) == (1, 5, 5, 1)
    assert np.all(cmd.tau_ff == 0.0) and np.all(cmd.dq == 0.0)
    # damping latches even when the QP solves again, until reset
    ctl.qp.torque_limits.scale = 1.0
    for friction in ctl.qp.friction.values():
        friction.f_max = 2000.0
    assert ctl.step(q, v).mode == CommandMode.DAMPING
    ctl.commands.reset()
    assert ctl.step(q, v).mode == CommandMode.TRACK


def _running_into_a_limit(joint: str, speed: float) -> tuple[np.ndarray, np.ndarray]:
    """The standing pose with ``joint`` 0.01 rad below its upper limit, moving toward it at ``speed``."""
    joints = CONFIG.array("default")
    j = CONFIG.joint_names.index(joint)
    joints[j] = CONFIG.array("upper")[j] - 0.01
    q = PMODEL.neutral_q(joints, standing_base_height(CONFIG, PMODEL, CONFIG.array("default")))
    v = np.zeros(PMODEL.model.nv)
    v[PMODEL.joint_v_idx[j]] = speed
    return q, v


def test_a_joint_running_into_its_limit_relaxes_the_limit_rows_instead_of_failing() -> None:
    # the left hip pitch of a swing leg 0.01 rad below its upper limit, moving toward it at 30 rad/s: the
    # torque limits cannot stop it within the joint-limit horizon, so the problem with every row is
    # infeasible. The tick is answered without the joint-limit rows (the torque rows kept), not failed
    q, v = _running_into_a_limit("left_hip_pitch_joint", 30.0)
    strict = WholeBodyQP(CONFIG, PMODEL, WbcSettings(relax_limits=False))
    qp = WholeBodyQP(CONFIG, PMODEL)
    outs = []
    for w in (strict, qp):
        w.set_contact("left", False)
        w.update_dynamics(q, v)
        w.com.desired_acceleration[:] = 0.0
        outs.append(w.solve())
    failed, out = outs
    assert failed.status.value == "infeasible" and not failed.limits_relaxed
    assert out.ok and out.limits_relaxed and not out.full_problem and qp.relaxed_ticks == 1
    assert qp.dynamics_residual(out.qdd, out.forces, out.tau) <= 1e-6
    # the torque rows were kept (within the solver's tolerance), the hip's joint-limit row was not
    assert np.all(np.abs(out.tau) <= 1.01 * qp.torque_limits.tau_max)
    k = qp.v_idx[CONFIG.joint_names.index("left_hip_pitch_joint")]
    assert out.qdd[6 + k] > qp.joint_limits.upper[k]
    # back at rest on both feet the next tick is answered with every row again
    q0, v0 = _standing_state()
    qp.set_contact("left", True)
    qp.update_dynamics(q0, v0)
    nxt = qp.solve()
    assert nxt.ok and not nxt.limits_relaxed and qp.relaxed_ticks == 1


def test_when_the_torque_rows_cannot_hold_either_the_answer_keeps_dynamics_and_contacts() -> None:
    # both feet down and the left knee driven into its limit at 30 rad/s: the contact rows' velocity bleed
    # alone needs more torque than the G1 has. The last resort is the answer without any limit rows (the
    # command generator clips its torques to the effort limits); dynamics and contact rows still hold
    q, v = _running_into_a_limit("left_knee_joint", 30.0)
    qp = WholeBodyQP(CONFIG, PMODEL)
    qp.update_dynamics(q, v)
    qp.com.desired_acceleration[:] = 0.0
    out = qp.solve()
    assert out.ok and out.limits_relaxed and qp.relaxed_ticks == 1
    assert np.abs(out.tau).max() > qp.torque_limits.tau_max.max()  # no torque limit held
    assert qp.dynamics_residual(out.qdd, out.forces, out.tau) <= 1e-6
    rows = np.concatenate([qp.contacts[side].A for side in qp.dyn.sides])  # sole accelerations as asked
    lower = np.concatenate([qp.contacts[side].lower for side in qp.dyn.sides])
    np.testing.assert_allclose(rows @ out.x, lower, atol=1e-2)


def test_failure_without_any_safe_command_requests_damping_at_once() -> None:
    gen = CommandGenerator(CONFIG)
    n = CONFIG.num_joints
    cmd = gen.update(False, np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n))
    assert cmd.mode == CommandMode.DAMPING
    # a non-finite solution counts as a failure
    gen.reset()
    gen.update(True, np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n))
    cmd = gen.update(True, np.zeros(n), np.zeros(n), np.full(n, np.nan), np.zeros(n))
    assert cmd.mode == CommandMode.HOLD_LAST and gen.counters.failed == 2


def test_polygon_helpers() -> None:
    square = convex_hull(np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]]))
    assert len(square) == 4
    np.testing.assert_allclose(clamp_to_polygon(np.array([0.5, 0.5]), square), [0.5, 0.5])
    np.testing.assert_allclose(clamp_to_polygon(np.array([2.0, 0.5]), square), [1.0, 0.5])
    np.testing.assert_allclose(clamp_to_polygon(np.array([2.0, 2.0]), square), [1.0, 1.0])
    shrunk = offset_polygon(square, -0.1)
    np.testing.assert_allclose(np.sort(shrunk[:, 0]), [0.1, 0.1, 0.9, 0.9])


def test_push_bound_from_the_model() -> None:
    b = push_impulse_bounds(CONFIG, PMODEL, duration=0.1)
    p = b["params"]
    assert p["k"] == pytest.approx(1.2, abs=0.01)
    for side in ("front", "back", "left", "right"):
        assert b[side]["bound_Ns"] == pytest.approx(p["mass_kg"] * p["omega"] * b[side]["d_m"] * p["k"])
    # the default pose has the CoM ~3 cm ahead of the ankles; the polygon spans 0.17 m front to back
    assert b["front"]["d_m"] + b["back"]["d_m"] == pytest.approx(0.17, abs=1e-3)
    assert b["left"]["bound_Ns"] == pytest.approx(b["right"]["bound_Ns"], rel=0.01)


def test_stands_5s_in_mujoco_with_com_within_1cm() -> None:
    log = run_standing(CONFIG, 5.0)
    assert not log.fell
    assert all(log.qp_ok) and set(log.modes) == {"track"}
    com = np.array(log.com)
    ref = np.array(log.com_ref)
    err = np.linalg.norm(com[:, :2] - ref, axis=1)
    assert err.max() < 0.01
    assert abs(com[-1, 2] - com[0, 2]) < 0.01
    assert abs(log.base_height[-1] - log.base_height[0]) < 0.01


def test_survives_a_lateral_push_of_half_the_bound() -> None:
    bound = push_impulse_bounds(CONFIG, PMODEL)["left"]["bound_Ns"]
    assert survives_push(CONFIG, (0.0, 1.0), 0.5 * bound)


def test_momentum_rate_from_the_base_rows_matches_pinocchio() -> None:
    # hg_drift comes from the nonlinear effects' base rows (no second kinematics pass); it must equal
    # pinocchio's own centroidal momentum rate at qdd = 0, and the contact forces' centroidal map must give
    # the same momentum rate as A_G qdd + drift for a QP solution (the floating-base rows tie them)
    qp = WholeBodyQP(CONFIG, PMODEL)
    q0, _ = _standing_state()
    rng = np.random.default_rng(3)
    data = PMODEL.model.createData()
    for _ in range(5):
        q = pin.integrate(PMODEL.model, q0, rng.normal(scale=0.05, size=PMODEL.model.nv))
        v = rng.normal(scale=0.3, size=PMODEL.model.nv)
        qp.update_dynamics(q, v)
        ref = pin.computeCentroidalMomentumTimeVariation(PMODEL.model, data, q, v, np.zeros(PMODEL.model.nv))
        np.testing.assert_allclose(qp.dyn.hg_drift, ref.vector, atol=1e-9)
        np.testing.assert_allclose(qp.dyn.com, data.com[0], atol=1e-12)
        out = qp.solve()
        assert out.ok
        f = np.concatenate([out.forces[side].ravel() for side in qp.dyn.sides])
        from_forces = qp.force_map.centroidal @ f
        from_forces[0:3] += qp.dyn.mass * qp.dyn.gravity_vector
        from_motion = qp.dyn.Ag @ out.qdd + qp.dyn.hg_drift
        np.testing.assert_allclose(from_forces, from_motion, atol=1e-6)


def test_joint_limit_bounds() -> None:
    # qdd bounds from the position (horizon T_p) and velocity (horizon T_v) limits, clipped to qdd_max; a
    # joint beyond its limit gets equal bounds (the QP stays feasible)
    qp = WholeBodyQP(CONFIG, PMODEL)
    jl = qp.joint_limits
    q, v = _standing_state()
    nj = PMODEL.model.nv - 6
    rng = np.random.default_rng(5)
    q[7:] = rng.uniform(jl.q_min - 0.05, jl.q_max + 0.05)
    v[6:] = rng.normal(scale=3.0, size=nj)
    # a joint far beyond its lower limit: its position bound exceeds the velocity bound (they cross)
    q[7] = jl.q_min[0] - 4.0 * jl.dq_max[0] * jl.tv
    v[6] = 0.0
    qp.update_dynamics(q, v)
    jl.fill()
    qj, dq = q[7:], v[6:]
    c = 2.0 / jl.tp**2
    lo = np.maximum(c * (jl.q_min - qj - dq * jl.tp), (-jl.dq_max - dq) / jl.tv)
    hi = np.minimum(c * (jl.q_max - qj - dq * jl.tp), (jl.dq_max - dq) / jl.tv)
    lo, hi = np.clip(lo, -jl.qdd_max, jl.qdd_max), np.clip(hi, -jl.qdd_max, jl.qdd_max)
    crossed = lo > hi
    assert crossed.any() and (~crossed).any()  # both cases are exercised
    mid = 0.5 * (lo + hi)
    np.testing.assert_allclose(jl.lower, np.where(crossed, mid, lo), atol=1e-9)
    np.testing.assert_allclose(jl.upper, np.where(crossed, mid, hi), atol=1e-9)


@pytest.mark.parametrize("scale", [1.0, 0.25])
def test_limit_screening_gives_the_full_problems_answer(scale: float) -> None:
    # the QP first solves without the torque- and joint-limit rows; its answer must match the full problem's
    # (solved with screening off), whether the limits bind (scale 0.25: torque limits a quarter of the
    # robot's) or not
    q0, _ = _standing_state()
    rng = np.random.default_rng(11)
    nv = PMODEL.model.nv
    states = [
        (pin.integrate(PMODEL.model, q0, rng.normal(scale=0.02, size=nv)), rng.normal(scale=0.2, size=nv))
        for _ in range(30)
    ]
    from humanoid_control.wbc.qp import WbcSettings
    from humanoid_control.wbc.solver import OsqpSettings, OsqpSolver

    precise = OsqpSettings(eps_abs=1e-8, eps_rel=1e-8, max_iter=100000, scaling=10)
    screened = WholeBodyQP(CONFIG, PMODEL, solver=OsqpSolver(precise))
    full = WholeBodyQP(CONFIG, PMODEL, WbcSettings(limit_screening=False), solver=OsqpSolver(precise))
    used_full = 0
    for qp in (screened, full):
        qp.torque_limits.scale = scale
    effort = screened.torque_limits.tau_max * scale
    for q, v in states:
        outs = []
        for qp in (screened, full):
            qp.update_dynamics(q, v)
            qp.com.desired_acceleration[:] = [0.5, -0.3, 0.0]
            outs.append(qp.solve())
        a, b = outs
        assert a.ok and b.ok and b.full_problem
        used_full += int(a.full_problem)
        np.testing.assert_allclose(a.qdd, b.qdd, atol=1e-3)
        assert np.all(np.abs(a.tau) <= effort + 1e-3)
    if scale < 1.0:
        assert used_full > 0  # the limits bound: the full problem was needed
    else:
        assert used_full == 0


def test_bench_wbc_prints_the_issue_keys() -> None:
    # humanoid-bench wbc: the QP tick on perturbed states, on a recorded closed-loop standing trajectory and
    # on a recorded walk (replayed through the walking controller: it must stay on the recorded walk); TSID's
    # keys are numbers where the optional tsid package is installed, else null with the reason
    from humanoid_bringup.evaluation.wbc_bench import bench_wbc

    out = bench_wbc(60, 0, walking_seconds=1.5)
    for key in (
        "wbc_tick_us_median",
        "wbc_tick_us_p99",
        "controller_step_us_median",
        "trajectory_wbc_tick_us_median",
    ):
        assert isinstance(out[key], float) and out[key] > 0.0
    assert out["solved_fraction"] == 1.0 and out["trajectory_states"] == 1500
    assert out["wbc_tick_us_p99"] >= out["wbc_tick_us_median"]
    # 1.5 s of walking: the first transfer (0.4 s), then single supports of 0.4 s between transfers of 0.1 s
    assert out["walking_states"] == 750 and out["walking_solved_fraction"] == 1.0
    assert 300 <= out["walking_single_support_states"] <= 450
    tick = out["walking_single_support_wbc_tick_us_median"]
    assert 0.0 < tick <= out["walking_single_support_wbc_tick_us_p99"]
    assert out["walking_single_support_wbc_tick_cpu_us_median"] > 0.0
    assert out["walking_single_support_vs_standing_tick"] > 0.0
    assert out["walking_controller_step_us_median"] > 0.0
    for key in ("tsid_tick_us_median", "ratio_vs_tsid", "trajectory_ratio_vs_tsid"):
        assert key in out
        if out["tsid"] == "not installed" or out["tsid"].startswith("failed"):
            assert out[key] is None
        else:
            assert out[key] > 0.0


def test_contact_reduction_gives_the_full_problems_answer_in_single_support() -> None:
    # with a foot out of contact the QP leaves its forces and rows out (a smaller problem per set of feet in
    # contact); the answer must be the one of the problem with every variable and row (reduction off), across
    # contact switches (left, right, both), and the swing foot's forces exactly 0
    from humanoid_control.wbc.qp import WbcSettings
    from humanoid_control.wbc.solver import OsqpSettings, OsqpSolver

    q0, _ = _standing_state()
    rng = np.random.default_rng(5)
    nv = PMODEL.model.nv
    precise = OsqpSettings(eps_abs=1e-8, eps_rel=1e-8, max_iter=100000, scaling=10)
    reduced = WholeBodyQP(CONFIG, PMODEL, solver=OsqpSolver(precise))
    whole = WholeBodyQP(CONFIG, PMODEL, WbcSettings(contact_reduction=False), solver=OsqpSolver(precise))
    sizes = {(p.cols.size, p.rows.size) for p in reduced.problems}
    assert (reduced.n, reduced.m) in sizes and min(sizes) < (reduced.n, reduced.m)
    assert all(p.cols.size == whole.n for p in whole.problems)
    schedule = ["left"] * 4 + ["both"] * 3 + ["right"] * 4 + ["left"] * 2
    for stance in schedule:
        q = pin.integrate(PMODEL.model, q0, rng.normal(scale=0.02, size=nv))
        v = rng.normal(scale=0.2, size=nv)
        outs = []
        for qp in (reduced, whole):
            for side in qp.dyn.sides:
                qp.set_contact(side, stance in (side, "both"))
            qp.update_dynamics(q, v)
            qp.com.desired_acceleration[:] = [0.2, -0.1, 0.0]
            outs.append(qp.solve())
        a, b = outs
        assert a.ok and b.ok
        np.testing.assert_allclose(a.qdd, b.qdd, atol=1e-3)
        if stance != "both":  # on both feet the split between them is set by the 1e-5 force penalty alone:
            # solutions within the tolerance can differ by newtons there, whatever the problem's size
            np.testing.assert_allclose(a.tau, b.tau, atol=1e-2)
        for side in reduced.dyn.sides:
            if stance not in (side, "both"):
                assert np.all(a.forces[side] == 0.0)
        assert reduced.dynamics_residual(a.qdd, a.forces, a.tau) <= 1e-6
