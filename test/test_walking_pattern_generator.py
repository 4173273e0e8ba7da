"""ZMP preview QP (humanoid_control.walking.pattern_generator) and the per-tick references built on it."""

from __future__ import annotations

import numpy as np
import pytest

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.walking.footsteps import FootstepPlanner, VelocityCommand
from humanoid_control.walking.generator import WalkingGenerator
from humanoid_control.walking.geometry import Pose2D, distance_outside, halfspaces
from humanoid_control.walking.lipm import Lipm
from humanoid_control.walking.pattern_generator import PreviewSettings, ZmpPreviewQP
from humanoid_control.walking.schedule import ContactSchedule
from humanoid_control.wbc.solver import QpStatus

CONFIG = load_robot_config("g1")
SPEC = CONFIG.walking
PLANNER = FootstepPlanner.from_config(CONFIG)
RATE_HZ = 50.0  # re-solve rate
SAMPLE_TOL = 1e-4  # m: the ZMP at the QP's samples, where it is constrained (OSQP's tolerance is 1e-5)


def standing() -> dict[str, Pose2D]:
    return {side: PLANNER.nominal_foot(Pose2D(0.0, 0.0, 0.0), side) for side in ("left", "right")}


def walk(command: VelocityCommand, n_steps: int, push: tuple[float, np.ndarray] | None = None) -> dict:
    """Receding-horizon run of the pattern generator on an exact LIPM (constant jerk between solves).

    ``push``: at that time (s) the CoM velocity jumps by the given (2,) m/s; from then on each solve starts
    from the simulated ("measured") state, so the plan must absorb the disturbance.
    """
    gen = WalkingGenerator(CONFIG)
    plan = PLANNER.plan_velocity(standing(), command, n_steps)
    sched = gen.set_plan(plan, t0=0.0)
    lipm = gen.lipm
    state = np.zeros((2, 3))
    state[:, 0] = sched.zmp_reference(0.0)
    dt = 1.0 / RATE_HZ
    log: dict[str, list] = {"t": [], "com": [], "outside": [], "sample": [], "solve_s": [], "iters": []}
    log["osqp_s"] = []
    t = 0.0
    while t < sched.t_end + 2.0:
        out = gen.replan(t, state)
        assert out.ok, (t, out.status)
        log["solve_s"].append(out.total_time_s)
        log["osqp_s"].append(out.solve_time_s)
        log["iters"].append(out.iterations)
        # the plan's state over the next period: exact integration of its constant jerk at 5 ms
        for tau in np.arange(0.0, dt - 1e-9, 0.005):
            s = out.com_state(t + tau)
            zmp = lipm.zmp(s)
            log["t"].append(t + tau)
            log["com"].append(s[:, 0].copy())
            log["sample"].append(tau == 0.0)
            log["outside"].append(distance_outside(zmp, sched.support_polygon(t + tau)))
        state = out.com_state(t + dt)
        t += dt
        if push is not None and abs(t - push[0]) < 0.5 * dt:
            state[:, 1] += push[1]
    return {k: np.array(v) for k, v in log.items()} | {"schedule": sched, "plan": plan, "gen": gen}


def assert_zmp_supported(run: dict) -> None:
    """At the QP's samples the ZMP is in the support polygon shrunk by ``zmp_margin`` (to the solver's
    tolerance); between them (every 5 ms) it is a cubic in time that stays within 1 mm of it (far inside
    the soles' own polygon)."""
    outside, sample = run["outside"], run["sample"]
    assert outside[sample].max() < SAMPLE_TOL
    assert outside.max() < 1e-3


def test_straight_walk_zmp_in_support_polygon_and_com_at_commanded_speed() -> None:
    run = walk(VelocityCommand(0.4, 0.0, 0.0), 12)
    sched, t, com = run["schedule"], run["t"], run["com"]
    assert_zmp_supported(run)
    # steady walking: the CoM advances at the commanded speed between the 3rd and the 11th touchdown
    times = run["plan"].touchdown_times()
    i0, i1 = np.searchsorted(t, times[2]), np.searchsorted(t, times[10])
    speed = (com[i1, 0] - com[i0, 0]) / (t[i1] - t[i0])
    assert speed == pytest.approx(0.4, abs=0.02)
    # the CoM sways over the stance foot: in every single support its lateral offset points to the stance side
    for phase in sched.phases:
        if phase.swing is None:
            continue
        k = np.searchsorted(t, 0.5 * (phase.t_start + phase.t_end))
        stance_y = phase.feet["left" if phase.swing == "right" else "right"].y
        assert np.sign(com[k, 1]) == np.sign(stance_y)
    # and comes to rest over the middle of the final feet
    end_mid = sched.zmp_reference(sched.t_end + 10.0)
    assert np.linalg.norm(com[-1] - end_mid) < 0.01
    final = run["gen"].last.com_state(t[-1])
    assert np.abs(final[:, 1]).max() < 0.02
    # re-solvable well above 50 Hz (median of the solve with its assembly; generous for a loaded CI machine)
    assert np.median(run["solve_s"]) < 0.02


def test_turning_walk_and_a_push_stay_in_the_support_polygon() -> None:
    run = walk(VelocityCommand(0.25, 0.05, 0.3), 10)
    assert_zmp_supported(run)
    # a lateral push in the middle of the walk: the preview re-plans from the pushed state
    run = walk(VelocityCommand(0.3, 0.0, 0.0), 10, push=(2.0, np.array([0.05, 0.08])))
    assert_zmp_supported(run)


def test_references_for_the_whole_body_controller() -> None:
    gen = WalkingGenerator(CONFIG)
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(0.3, 0.0, 0.0), 4)
    sched = gen.set_plan(plan, t0=1.0, ground_z=0.01)
    state = np.zeros((2, 3))
    state[:, 0] = sched.zmp_reference(1.0)
    gen.replan(1.0, state)
    swing_phase = sched.phases[1]
    t = 0.5 * (swing_phase.t_start + swing_phase.t_end)
    gen.replan(t)  # from its own prediction
    ref = gen.reference(t)
    assert ref.com[2] == pytest.approx(0.01 + SPEC.com_height)
    assert ref.com_velocity[2] == 0.0 and ref.com_acceleration[2] == 0.0
    assert ref.swing == "left" and ref.contacts == {"left": False, "right": True}
    assert ref.feet["left"].position[2] > 0.01 + 0.9 * SPEC.swing_height
    assert np.allclose(ref.feet["right"].position[:2], plan.start["right"].position)
    lipm = Lipm(SPEC.com_height)
    assert np.allclose(ref.dcm, ref.com[:2] + ref.com_velocity[:2] / lipm.omega)


def test_non_finite_state_is_refused() -> None:
    gen = WalkingGenerator(CONFIG)
    gen.set_plan(PLANNER.plan_velocity(standing(), VelocityCommand(0.3, 0.0, 0.0), 4), t0=0.0)
    state = np.zeros((2, 3))
    state[0, 1] = np.nan
    out = gen.replan(0.0, state)
    assert out.status == QpStatus.NON_FINITE and not out.ok
    assert gen.last is None  # a refused solve does not become the plan


def reference_assembly(
    qp: ZmpPreviewQP, t: float, state: np.ndarray, sched: ContactSchedule
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The QP data of a solve, looked up sample by sample in the schedule (the assembly before it was
    vectorized): ``g``, ``Ax`` (CSC order), ``lower``, ``upper`` and the ZMP references at ``t + k dt``."""
    s = qp.settings
    N, E, dt = s.horizon, s.max_edges, s.dt
    times = t + dt * np.arange(1, N + 1)
    refs = np.array([sched.zmp_reference(tk) for tk in times])
    m_dyn = 6 * N
    lower, upper = np.zeros(qp.m), np.zeros(qp.m)
    lower[0:6] = (qp._A @ state.T).T.ravel()
    upper[:m_dyn] = lower[:m_dyn]
    lower[m_dyn:] = -np.inf
    upper[m_dyn:] = np.inf
    vals = qp._A_vals.copy()
    poly = vals[qp._n_dyn_vals :].reshape(N, E, 2, 2)
    poly[:] = 0.0
    C = qp.lipm.zmp_row
    for k, tk in enumerate(times):
        normals, offsets = halfspaces(
            sched.phase_polygon(ZmpPreviewQP._constraining_phase(sched, float(tk), dt))
        )
        ne = min(len(offsets), E)
        poly[k, :ne, :, 0] = normals[:ne] * C[0]
        poly[k, :ne, :, 1] = normals[:ne] * C[2]
        upper[m_dyn + E * k : m_dyn + E * k + ne] = offsets[:ne]
    g = np.zeros(qp.n)
    g[qp._s_cols] = refs[:, :, None] * (-2.0 * s.w_zmp * C)[None, None, :]
    dcm = np.array([1.0, 1.0 / qp.lipm.omega, 0.0])
    g[qp._s_cols[-1]] += refs[-1][:, None] * (-2.0 * s.w_dcm * dcm)[None, :]
    return g, vals[qp._A_perm], lower, upper, np.vstack([sched.zmp_reference(t), refs])


def test_vectorized_assembly_equals_the_per_sample_reference() -> None:
    # the QP data of the vectorized assembly are those of the sample-by-sample look-ups, bit for bit, all
    # along a turning and side-stepping walk (before its start, across every phase, past its end), and a
    # fresh solver on either gives the same plan
    gen = WalkingGenerator(CONFIG)
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(0.35, 0.06, 0.3), 7)
    sched = gen.set_plan(plan, t0=0.3)
    qp = gen.qp
    rng = np.random.default_rng(3)
    times = np.concatenate([np.arange(0.0, sched.t_end + 2.0, 0.06), rng.uniform(0.0, sched.t_end + 2.0, 40)])
    for t in times:
        state = rng.normal(scale=0.1, size=(2, 3))
        got = [a.copy() for a in qp.assemble(float(t), state, sched)]
        want = reference_assembly(qp, float(t), state, sched)
        for name, a, b in zip(("g", "Ax", "lower", "upper", "zmp_ref"), got, want, strict=True):
            assert np.array_equal(a, b), (name, t)
    # the same plan from the same data: a fresh pattern generator against OSQP fed the reference data
    state = np.zeros((2, 3))
    state[:, 0] = sched.zmp_reference(1.2)
    out = WalkingGenerator(CONFIG).qp.solve(1.2, state, sched)
    g, Ax, lower, upper, _ = reference_assembly(qp, 1.2, state, sched)
    A = qp._A_csc.copy()
    A.data[:] = Ax
    solver = qp.solver.spawn()  # OSQP with the pattern generator's settings
    assert solver is not None
    solver.setup(qp._P, g, A, lower, upper)
    ref = solver.solve()
    assert out.ok and ref.status.ok
    np.testing.assert_allclose(out.states[1:], ref.x[qp._s_cols], rtol=0.0, atol=1e-9)


def test_shifted_warm_start_gives_the_same_plans_in_fewer_iterations() -> None:
    # re-solved every sample from its own prediction: starting OSQP from the last plan moved by one sample
    # (the default) converges to the plans of a plain warm start, in fewer ADMM iterations
    plan = PLANNER.plan_velocity(standing(), VelocityCommand(0.4, 0.0, 0.2), 6)
    runs = {}
    for shift in (False, True):
        gen = WalkingGenerator(CONFIG, PreviewSettings(shift_warm_start=shift))
        sched = gen.set_plan(plan, t0=0.0)
        state = np.zeros((2, 3))
        state[:, 0] = sched.zmp_reference(0.0)
        gen.replan(0.0, state)
        com, iters = [], []
        for t in np.arange(1, round(sched.t_end / 0.02)) * 0.02:
            out = gen.replan(float(t))
            assert out.ok
            com.append(out.states[:, :, 0])
            iters.append(out.iterations)
        runs[shift] = (np.array(com), np.array(iters))
    (com_plain, it_plain), (com_shift, it_shift) = runs[False], runs[True]
    assert np.abs(com_plain - com_shift).max() < 1e-4  # m (OSQP's tolerance is 1e-5)
    assert np.median(it_shift) < 0.8 * np.median(it_plain)
    assert it_shift.max() < it_plain.max()
