"""``humanoid-bench wbc``: the whole-body controller's QP tick time, beside TSID's where it is installed.

The robot (``--robot``, default the G1) with the full task set, in one process (one core), over perturbed
standing states (:func:`_wbc_states`), over a recorded closed-loop standing trajectory with a push
(:func:`_wbc_trajectory`) and over recorded walking at :data:`WALK_SPEED` (:func:`_walking_trajectory`,
replayed by :func:`_time_walking`); :class:`_TsidTicker` is the equivalent TSID formulation. Times in us; the
keys are described in :mod:`humanoid_bringup.evaluation.bench` (the ``humanoid-bench`` help).
"""

from __future__ import annotations

import time
from typing import Any


def _wbc_states(n: int, seed: int, robot: str = "g1") -> list[tuple[Any, Any]]:
    """``n`` pinocchio states near the default standing pose (small joint, base and velocity noise)."""
    import numpy as np
    import pinocchio as pin

    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.model.robot_model import load_pinocchio_model, standing_base_height

    config = load_robot_config(robot)
    pmodel = load_pinocchio_model(config)
    joints = config.array("default")
    q0 = pmodel.neutral_q(joints, standing_base_height(config, pmodel, joints))
    rng = np.random.default_rng(seed)
    nv = pmodel.model.nv
    return [
        (pin.integrate(pmodel.model, q0, rng.normal(scale=0.01, size=nv)), rng.normal(scale=0.05, size=nv))
        for _ in range(n)
    ]


class _TsidTicker:
    """TSID (``InverseDynamicsFormulationAccForce`` + ``SolverHQuadProgFast``) with a task set equivalent to
    ours: CoM, angular momentum, base and torso orientation, posture, joint position/velocity/acceleration
    bounds, 6D contacts with the 4 sole corners and friction pyramids, actuation bounds. :meth:`tick` times
    one state: problem data, solve, accelerations and torques. Raises ImportError when ``tsid`` is absent.

    The robot, its model, the QP settings (weights, gains, limits) and the joint order are those of ``ctl``,
    the controller it is compared with."""

    def __init__(self, ctl: Any, q0: Any, v0: Any) -> None:
        import warnings

        import numpy as np

        with warnings.catch_warnings():  # tsid 1.10 registers a converter pinocchio already has
            warnings.filterwarnings("ignore", "to-Python converter", RuntimeWarning)
            import tsid

        config, pmodel, s = ctl.config, ctl.pmodel, ctl.qp.settings

        def model_order(name: str) -> Any:  # a configuration array in the model's joint order
            return config.array(name)[ctl.qp.to_v_order]

        robot = tsid.RobotWrapper(pmodel.model, False)
        form = tsid.InverseDynamicsFormulationAccForce("wbc", robot, False)
        # the formulation holds raw references: the robot, its tasks and their references must outlive it
        self._keep: list[Any] = [robot]
        form.computeProblemData(0.0, q0, v0)
        data = form.data()
        for side, foot in config.feet.items():
            points = np.array([[x, y, 0.0] for x, y in foot.polygon]).T
            contact = tsid.Contact6d(
                f"contact_{side}",
                robot,
                foot.sole_frame,
                points,
                np.array([0.0, 0.0, 1.0]),
                config.wbc.friction,
                s.f_min,
                s.f_max,
            )
            contact.setKp(np.zeros(6))
            contact.setKd(s.kd_contact * np.ones(6))
            contact.setReference(robot.framePosition(data, pmodel.sole_frame_ids[side]))
            form.addRigidContact(contact, s.reg_force)
            self._keep.append(contact)
        com = tsid.TaskComEquality("com", robot)
        com.setKp(100.0 * np.ones(3))
        com.setKd(20.0 * np.ones(3))
        com_ref = tsid.TrajectoryEuclidianConstant("com_ref", robot.com(data))
        com.setReference(com_ref.computeNext())
        form.addMotionTask(com, s.w_com, 1, 0.0)
        am = tsid.TaskAMEquality("am", robot)
        am.setKp(np.zeros(3))
        am.setKd(s.kd_angular_momentum * np.ones(3))
        am_ref = tsid.TrajectoryEuclidianConstant("am_ref", np.zeros(3))
        am.setReference(am_ref.computeNext())
        form.addMotionTask(am, s.w_angular_momentum, 1, 0.0)
        self._keep += [com, am, com_ref, am_ref]
        for name, frame, kp, kd, w in (
            ("base", config.base_body, s.kp_base, s.kd_base, s.w_base),
            ("torso", config.wbc.torso_frame, s.kp_torso, s.kd_torso, s.w_torso),
        ):
            task = tsid.TaskSE3Equality(name, robot, frame)
            task.setKp(kp * np.ones(6))
            task.setKd(kd * np.ones(6))
            task.setMask(np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]))
            traj = tsid.TrajectorySE3Constant(
                f"{name}_ref", robot.framePosition(data, robot.model().getFrameId(frame))
            )
            task.setReference(traj.computeNext())
            form.addMotionTask(task, w, 1, 0.0)
            self._keep += [task, traj]
        posture = tsid.TaskJointPosture("posture", robot)
        posture.setKp(s.kp_posture * np.ones(robot.na))
        posture.setKd(s.kd_posture * np.ones(robot.na))
        q_ref = tsid.TrajectoryEuclidianConstant("q_ref", model_order("default"))
        posture.setReference(q_ref.computeNext())
        form.addMotionTask(posture, s.w_posture, 1, 0.0)
        limits = tsid.TaskJointPosVelAccBounds("joint_limits", robot, 0.002, False)
        limits.setPositionBounds(model_order("lower"), model_order("upper"))
        limits.setVelocityBounds(model_order("velocity"))
        limits.setAccelerationBounds(s.qdd_max * np.ones(robot.na))
        form.addMotionTask(limits, 1.0, 0, 0.0)
        bounds = tsid.TaskActuationBounds("tau", robot)
        effort = model_order("effort")
        bounds.setBounds(-effort, effort)
        form.addActuationTask(bounds, 1.0, 0, 0.0)
        self._keep += [posture, q_ref, limits, bounds]
        solver = tsid.SolverHQuadProgFast("qp")
        solver.resize(form.nVar, form.nEq, form.nIn)
        self._form, self._solver, self.failed = form, solver, 0

    def tick(self, q: Any, v: Any) -> float:
        t0 = time.perf_counter()
        sol = self._solver.solve(self._form.computeProblemData(0.0, q, v))
        self._form.getAccelerations(sol)
        self._form.getActuatorForces(sol)  # the torques, as our tick recovers them
        dt = time.perf_counter() - t0
        self.failed += int(sol.status != 0)
        return dt


def _wbc_trajectory(robot: str = "g1") -> list[tuple[Any, Any]]:
    """The states a running controller meets: 3 s of closed-loop standing in MuJoCo (in process, ground-truth
    state, 500 Hz) with a 7 N s push to the front at 1 s; both feet stay down."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.controller import StandingController
    from humanoid_control.wbc.sim_loop import Push, run_standing

    class Recorder(StandingController):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.states: list[tuple[Any, Any]] = []

        def step(self, q: Any, v: Any) -> Any:
            self.states.append((q.copy(), v.copy()))
            return super().step(q, v)

    config = load_robot_config(robot)
    recorder = Recorder(config)
    log = run_standing(config, 3.0, push=Push((70.0, 0.0), 1.0, 0.1), controller=recorder)
    if log.fell:
        raise RuntimeError("the recorded standing trajectory fell")
    return recorder.states


def _time_side_by_side(states: list[tuple[Any, Any]], chunk: int = 100, robot: str = "g1") -> dict[str, Any]:
    """Our controller and TSID (if importable) over ``states`` in order, alternating blocks of ``chunk``
    states so that both see the same machine load; our warm starts carry over from tick to tick."""
    import numpy as np

    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.controller import StandingController

    ctl = StandingController(load_robot_config(robot))
    theirs: _TsidTicker | None = None
    note = "not installed"
    try:
        theirs = _TsidTicker(ctl, *states[0])
    except ImportError:
        pass
    except Exception as exc:  # an installed but broken binding (e.g. ABI mismatch with pinocchio)
        note = f"failed: {exc!r}"
    for q, v in states[:50]:  # warm-up: first setup, caches
        ctl.step(q, v)
        if theirs is not None:
            theirs.tick(q, v)
    steps, ticks, solves, iters, tsid_ticks, ok, full = [], [], [], [], [], 0, 0
    for start in range(0, len(states), chunk):
        block = states[start : start + chunk]
        for q, v in block:
            t0 = time.perf_counter()
            ctl.step(q, v)
            steps.append(time.perf_counter() - t0)
            ticks.append(ctl.qp_tick_s)
            out = ctl.last_output
            assert out is not None
            solves.append(out.solve_time_s)
            iters.append(out.iterations)
            ok += int(out.ok)
            full += int(out.full_problem)
        if theirs is not None:
            tsid_ticks += [theirs.tick(q, v) for q, v in block]
    us, step_us = np.array(ticks) * 1e6, np.array(steps) * 1e6
    result: dict[str, Any] = {
        "qp_variables": ctl.qp.n,
        "qp_constraints": ctl.qp.m,
        "solved_fraction": ok / len(states),
        "full_problem_fraction": full / len(states),
        "solve_us_median": float(np.median(solves) * 1e6),
        "iterations_median": float(np.median(iters)),
        "wbc_tick_us_median": float(np.median(us)),
        "wbc_tick_us_p99": float(np.percentile(us, 99)),
        "controller_step_us_median": float(np.median(step_us)),
        "controller_step_us_p99": float(np.percentile(step_us, 99)),
        "tsid_tick_us_median": None,
        "tsid_tick_us_p99": None,
        "ratio_vs_tsid": None,
        "ratio_controller_step_vs_tsid": None,
    }
    if theirs is None:
        result["tsid"] = note
        return result
    if theirs.failed:
        raise RuntimeError(f"TSID failed to solve {theirs.failed} states")
    from importlib.metadata import PackageNotFoundError, version

    try:
        result["tsid"] = version("tsid")
    except PackageNotFoundError:  # importable, but not installed as a distribution
        result["tsid"] = "installed"
    tsid_us = np.array(tsid_ticks) * 1e6
    result["tsid_tick_us_median"] = float(np.median(tsid_us))
    result["tsid_tick_us_p99"] = float(np.percentile(tsid_us, 99))
    result["ratio_vs_tsid"] = result["wbc_tick_us_median"] / result["tsid_tick_us_median"]
    result["ratio_controller_step_vs_tsid"] = (
        result["controller_step_us_median"] / result["tsid_tick_us_median"]
    )
    return result


WALK_SPEED = 0.3  # m/s, forward: the walking trajectory of humanoid-bench wbc


def _walking_trajectory(seconds: float, robot: str = "g1") -> list[tuple[Any, Any, tuple[bool, ...], bool]]:
    """The states the walking controller meets: ``seconds`` of closed-loop walking forward at
    :data:`WALK_SPEED` in MuJoCo (in process, ground-truth state, 500 Hz; ``run_walking``), recorded tick by
    tick with the planned contacts of each tick and whether the deploy logic held the walk still before the
    tick's step (while the driver ramps). Raises if the walk fell."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.walking.controller import WalkingController
    from humanoid_control.walking.sim_loop import run_walking

    class Recorder(WalkingController):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.states: list[tuple[Any, Any, tuple[bool, ...], bool]] = []
            self.hold_before_step = False

        def hold_still(self) -> None:  # the deploy logic's call while the driver ramps (WbcRunner)
            self.hold_before_step = True
            super().hold_still()

        def step(self, q: Any, v: Any) -> Any:
            q, v = q.copy(), v.copy()
            out = super().step(q, v)
            self.states.append((q, v, tuple(self.contacts.values()), self.hold_before_step))
            self.hold_before_step = False
            return out

    config = load_robot_config(robot)
    recorder = Recorder(config)
    log = run_walking(config, seconds, lambda t: (WALK_SPEED, 0.0, 0.0), controller=recorder)
    if log.fell:
        raise RuntimeError("the recorded walking trajectory fell")
    return recorder.states


def _time_walking(
    states: list[tuple[Any, Any, tuple[bool, ...], bool]],
    standing: list[tuple[Any, Any]] | None = None,
    robot: str = "g1",
) -> dict[str, Any]:
    """The walking controller replayed on the recorded states, in order, with the command of the recording:
    it makes the same decisions tick by tick (plans, contact switches, swing references), so each tick's
    whole-body QP is the one the running controller solved. Timed per tick: the QP tick (``qp_tick_s``:
    rigid-body terms, assembly, solve, torques) and the whole controller step (with the ZMP preview
    re-solves every 20 ms and the footstep re-plans), split by single and double support. The QP tick's calls
    are also timed in this thread's CPU time (``..._cpu_us_median``: without the waits for a core of a
    machine shared with other work). With ``standing`` (the recorded standing trajectory) a standing
    controller replays it tick for tick in turn with the walk, so both see the same load: their ratio
    (``walking_single_support_vs_standing_tick``) moves less with the load than the absolute figures.
    Raises if the replay's contacts differ from the recording's (it would not be the recorded walk)."""
    import numpy as np

    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.walking.controller import WalkingController
    from humanoid_control.wbc.controller import StandingController

    config = load_robot_config(robot)
    ctl = WalkingController(config)
    # the CPU time (this thread's) of the same calls as the QP tick: rigid-body terms and solve
    cpu_s = [0.0]

    def cpu_timed(call: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            c0 = time.thread_time()
            out = call(*args, **kwargs)
            cpu_s[0] += time.thread_time() - c0
            return out

        return timed

    for name in ("update_dynamics", "solve"):
        setattr(ctl.qp, name, cpu_timed(getattr(ctl.qp, name)))
    stand = StandingController(config) if standing else None
    stand_ticks: list[float] = []
    ticks, cpu, steps, single, solves, iters, ok, full = [], [], [], [], [], [], 0, 0
    for k, (q, v, contacts, held) in enumerate(states):
        ctl.set_command(WALK_SPEED, 0.0, 0.0)
        if held:
            ctl.hold_still()
        cpu_s[0] = 0.0
        t0 = time.perf_counter()
        ctl.step(q, v)
        steps.append(time.perf_counter() - t0)
        ticks.append(ctl.qp_tick_s)
        cpu.append(cpu_s[0])
        if stand is not None and standing:
            stand.step(*standing[k % len(standing)])
            stand_ticks.append(stand.qp_tick_s)
        if tuple(ctl.contacts.values()) != contacts:
            raise RuntimeError(f"the replay left the recorded walk at tick {k}")
        single.append(sum(contacts) == 1)
        out = ctl.last_output
        assert out is not None
        ok += int(out.ok)
        full += int(out.full_problem)
        solves.append(out.solve_time_s)
        iters.append(out.iterations)
    us, step_us, ss = np.array(ticks) * 1e6, np.array(steps) * 1e6, np.array(single)
    cpu_us = np.array(cpu) * 1e6
    solve_us, iters_arr = np.array(solves) * 1e6, np.array(iters)
    if not ss.any():
        raise RuntimeError("the walking trajectory has no single support")
    result: dict[str, Any] = {
        "walking_speed_mps": WALK_SPEED,
        "walking_states": len(states),
        "walking_single_support_states": int(ss.sum()),
        "walking_solved_fraction": ok / len(states),
        "walking_single_support_wbc_tick_us_median": float(np.median(us[ss])),
        "walking_single_support_wbc_tick_us_p99": float(np.percentile(us[ss], 99)),
        "walking_single_support_wbc_tick_cpu_us_median": float(np.median(cpu_us[ss])),
        "walking_single_support_solve_us_median": float(np.median(solve_us[ss])),
        "walking_single_support_iterations_median": float(np.median(iters_arr[ss])),
        "walking_full_problem_fraction": full / len(states),
        "walking_double_support_wbc_tick_us_median": float(np.median(us[~ss])) if (~ss).any() else None,
        "walking_wbc_tick_us_median": float(np.median(us)),
        "walking_wbc_tick_us_p99": float(np.percentile(us, 99)),
        "walking_controller_step_us_median": float(np.median(step_us)),
        "walking_controller_step_us_p99": float(np.percentile(step_us, 99)),
        "goal_walking_single_support_wbc_tick_us_median": 400.0,
        "walking_interleaved_standing_tick_us_median": None,
        "walking_single_support_vs_standing_tick": None,
    }
    if stand_ticks:
        st_us = float(np.median(stand_ticks) * 1e6)
        result["walking_interleaved_standing_tick_us_median"] = st_us
        result["walking_single_support_vs_standing_tick"] = (
            result["walking_single_support_wbc_tick_us_median"] / st_us
        )
    return result


def bench_wbc(n_states: int, seed: int, walking_seconds: float = 4.0, robot: str = "g1") -> dict[str, Any]:
    """WBC tick time over ``n_states`` perturbed standing states, over a recorded closed-loop standing
    trajectory and over ``walking_seconds`` of recorded walking (see module docstring); TSID side by side
    (standing) if installed. ``robot``: the configuration (``config/robots/<robot>.yaml``)."""
    states = _wbc_states(n_states, seed, robot)
    result: dict[str, Any] = {"states": n_states, **_time_side_by_side(states, robot=robot)}
    trajectory = _wbc_trajectory(robot)
    traj = _time_side_by_side(trajectory, robot=robot)
    result["trajectory_states"] = len(trajectory)
    for key in (
        "wbc_tick_us_median",
        "wbc_tick_us_p99",
        "iterations_median",
        "solve_us_median",
        "full_problem_fraction",
        "tsid_tick_us_median",
        "ratio_vs_tsid",
    ):
        result[f"trajectory_{key}"] = traj[key]
    result.update(_time_walking(_walking_trajectory(walking_seconds, robot), trajectory, robot))
    result["robot"] = robot
    return result
