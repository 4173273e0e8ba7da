"""Walking trials in one process: the ``mpc_walk`` controller (:class:`~.mpc_walk.MpcWalkController`) on the
in-process runner (:mod:`humanoid_control.controllers.inprocess`: driver core, MuJoCo backend; no ROS), for
tests and tuning, with the simulator's ground truth as the base estimate or (``estimated``) the state
estimator's core fed by the simulated IMU and encoders, as the graph's ``state_estimator`` is (its default
noise and flat-ground prior). The acceptance runs go through the ROS graph with the estimator.

Push trials (:func:`survives_walking_push`, :func:`max_survived_walking_impulse`): a 0.1 s horizontal push
(N, world frame; the robot spawns facing +x) at the base body, standing (stepping allowed) or walking
forward, then at mid single support with the chosen foot in stance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from humanoid_control.controllers.inprocess import InProcessRunner, RunnerSettings
from humanoid_control.hardware.push import PushLimits, validate_push
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.walking.controller import WalkingController, WalkingSettings
from humanoid_control.walking.mpc_walk import MpcWalkController
from humanoid_control.wbc.sim_loop import TRIAL_RAMP_S, Push


@dataclass
class WalkLog:
    """Per tick: time (s), base position (3) and yaw (rad), base velocity in the base frame (3), CoM (3),
    CoM reference (3), DCM and its reference (2), ZMP commanded and planned (2), mode, QP status."""

    time: list[float] = field(default_factory=list)
    base: list[np.ndarray] = field(default_factory=list)
    yaw: list[float] = field(default_factory=list)
    velocity: list[np.ndarray] = field(default_factory=list)
    yaw_rate: list[float] = field(default_factory=list)
    com: list[np.ndarray] = field(default_factory=list)
    com_ref: list[np.ndarray] = field(default_factory=list)
    dcm: list[np.ndarray] = field(default_factory=list)
    dcm_ref: list[np.ndarray] = field(default_factory=list)
    zmp_cmd: list[np.ndarray] = field(default_factory=list)
    zmp_ref: list[np.ndarray] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    qp_ok: list[bool] = field(default_factory=list)
    swing_force: list[float] = field(default_factory=list)
    fell: bool = False
    push_time: float | None = None


def run_walking(
    config: RobotConfig,
    seconds: float,
    command: Callable[[float], tuple[float, float, float]],
    push: Push | None = None,
    gain_profile: str = "low",
    controller: WalkingController | None = None,
    push_when: Callable[[WalkingController], bool] | None = None,
    stop_after: float | None = None,
    estimated: bool = False,
) -> WalkLog:
    """Walk in MuJoCo for ``seconds`` following ``command(t) -> (vx, vy, wz)``; optional push, at
    ``push.start`` or, with ``push_when``, at the first tick (after the controller's step) from ``push.start``
    on where ``push_when(controller)`` holds (``WalkLog.push_time``); ``stop_after``: end the run that long
    (s) after the push; ``estimated``: the controller sees the state estimator's state (module docstring),
    not the ground truth."""
    ctl = controller or WalkingController(config)
    plugin = MpcWalkController(ctl)
    runner = InProcessRunner(
        config,
        plugin,
        {"gain_profile": gain_profile},
        RunnerSettings(rate_hz=1.0 / ctl.dt, ramp_s=TRIAL_RAMP_S, estimator="ekf" if estimated else "truth"),
        initial_joint_positions=config.array("default"),
    )
    backend = runner.backend
    dt = ctl.dt
    log = WalkLog()
    limits = PushLimits(timestep=config.simulation.timestep)
    try:
        for k in range(round(seconds / dt)):
            t = k * dt
            runner.set_cmd_vel(*command(t))
            tick = runner.control()
            gt = tick.truth
            due = push is not None and log.push_time is None and k >= round(push.start / dt)
            if push is not None and due and (push_when is None or push_when(ctl)):
                backend.push(validate_push((*push.force, 0.0), push.duration, limits))
                log.push_time = t
            runner.advance()
            st = ctl.status
            log.time.append(t)
            log.base.append(np.array(gt.position, dtype=float))
            w, x, y, z = gt.quat
            log.yaw.append(float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))))
            log.velocity.append(np.array(gt.linear_velocity_body, dtype=float))
            log.yaw_rate.append(float(gt.angular_velocity_body[2]))
            log.com.append(st.com)
            log.com_ref.append(st.com_ref)
            log.dcm.append(st.dcm)
            log.dcm_ref.append(st.dcm_ref)
            log.zmp_cmd.append(st.zmp_cmd)
            log.zmp_ref.append(st.zmp_ref)
            log.modes.append(st.mode.value)
            swinging = [side for side, down in st.contacts.items() if not down]
            wrenches = backend.contact_wrenches() if swinging else {}
            log.swing_force.append(max((float(wrenches[side].force[2]) for side in swinging), default=0.0))
            log.qp_ok.append(ctl.last_output is not None and ctl.last_output.ok)
            if plugin.fault or backend.base_height() < config.simulation.fall_height:
                log.fell = True
                break
            if stop_after is not None and log.push_time is not None and t >= log.push_time + stop_after:
                break
    finally:
        runner.close()
    return log


def mid_single_support(stance: str, lead: float = 0.0) -> Callable[[WalkingController], bool]:
    """A ``push_when`` test: the controller is half-way through a planned single support on ``stance``,
    less ``lead`` (s): a push of duration ``2 lead`` is then centred on the middle, as in
    ``humanoid-eval push --walking-speed``."""

    def test(ctl: WalkingController) -> bool:
        sched = ctl.generator.schedule
        if ctl.status.swing is None or sched is None:
            return False
        phase = sched.phase_at(ctl.status.t)
        if phase is None or phase.swing is None or phase.swing == stance:
            return False
        return (ctl.status.t - phase.t_start) >= 0.5 * (phase.t_end - phase.t_start) - lead - 1e-9

    return test


def survives_walking_push(
    config: RobotConfig,
    direction: tuple[float, float],
    impulse: float,
    speed: float = 0.0,
    stance: str = "left",
    settings: WalkingSettings | None = None,
    duration: float = 0.1,
    observe: float = 2.5,
    centred: bool = True,
    estimated: bool = False,
) -> bool:
    """Whether the walking controller survives a push of ``impulse`` (N s) over ``duration`` (s) along
    ``direction`` (world frame), standing (``speed`` 0: pushed at 1.0 s, stepping allowed) or walking
    forward at ``speed`` (m/s, from 0.5 s; pushed from 2.5 s on at the first mid single support on
    ``stance``: the push centred on its middle, as the graph evaluation does, or with ``centred`` False
    starting there), watched ``observe`` s after the push; ``estimated``: through the state estimator
    (:func:`run_walking`). Survived: no fall (base above
    ``simulation.fall_height``, no damping), the base within 0.1 m of its starting height, and standing the
    robot at rest again (CoM slower than 0.15 m/s horizontally at the end)."""
    u = np.asarray(direction, dtype=float)
    u = u / np.linalg.norm(u)
    force = u * impulse / duration
    start = 1.0 if speed == 0.0 else 2.5
    when = None if speed == 0.0 else mid_single_support(stance, 0.5 * duration if centred else 0.0)
    ctl = WalkingController(config, settings=settings)
    push = Push((float(force[0]), float(force[1])), start, duration)
    log = run_walking(
        config,
        start + 1.0 + observe,
        lambda t: (speed, 0.0, 0.0) if t >= 0.5 else (0.0, 0.0, 0.0),
        push=push,
        controller=ctl,
        push_when=when,
        stop_after=observe,
        estimated=estimated,
    )
    if log.fell or log.push_time is None:
        return False
    if log.base[-1][2] < log.base[0][2] - 0.1:
        return False
    if speed == 0.0:
        com = np.array(log.com[-26:])
        com_speed = float(np.linalg.norm(com[-1, :2] - com[0, :2])) / (25 * ctl.dt)
        return com_speed < 0.15
    return True


def max_survived_walking_impulse(
    config: RobotConfig,
    direction: tuple[float, float],
    upper: float = 40.0,
    iterations: int = 6,
    **kw: object,
) -> float:
    """Bisection of the largest survived impulse (N s) in ``[0, upper]`` (:func:`survives_walking_push`
    with ``kw``)."""
    lo, hi = 0.0, upper
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if survives_walking_push(config, direction, mid, **kw):  # type: ignore[arg-type]
            lo = mid
        else:
            hi = mid
    return lo
