"""Standing trials in one process: the ``wbc_stand`` controller (:class:`~.wbc_stand.WbcStandController`) on
the in-process runner (:mod:`humanoid_control.controllers.inprocess`: driver core, MuJoCo backend), the
simulator's ground truth as the base estimate (no ROS).

For tests and quick evaluations; the acceptance runs go through the ROS graph with the estimator instead.
A push is a constant horizontal force (N, world frame) at the base body for a duration (s), applied by the
backend (:meth:`~humanoid_control.hardware.mujoco_sim.MujocoBackend.push`, MuJoCo's ``xfrc_applied``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from humanoid_control.controllers.inprocess import InProcessRunner, RunnerSettings
from humanoid_control.hardware.push import PushLimits, validate_push
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.wbc_stand import WbcStandController


@dataclass
class Push:
    """Horizontal push on the base body: ``force`` (2,) N, world frame, from ``start`` for ``duration``."""

    force: tuple[float, float]
    start: float = 1.0
    duration: float = 0.1


@dataclass
class LoopLog:
    """Per tick: time (s), CoM (3) and its reference (2) (m), base height (m), command mode, QP status."""

    time: list[float] = field(default_factory=list)
    com: list[np.ndarray] = field(default_factory=list)
    com_ref: list[np.ndarray] = field(default_factory=list)
    base_height: list[float] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    qp_ok: list[bool] = field(default_factory=list)
    fell: bool = False


#: the driver's boot ramp in the trials (s): the robot spawns in the default pose, so one tick; the controller
#: commands from the third tick on (ramp, hold, active)
TRIAL_RAMP_S = 0.002


def run_standing(
    config: RobotConfig,
    seconds: float,
    push: Push | None = None,
    gain_profile: str = "low",
    rate_hz: float = 500.0,
    controller: StandingController | None = None,
) -> LoopLog:
    """Stand in MuJoCo for ``seconds`` with the WBC in the loop at ``rate_hz``; optional push.

    The robot spawns in the default pose. It counts as fallen when the base drops below
    ``simulation.fall_height`` or the controller requests damping (the loop then stops).
    """
    plugin = WbcStandController(controller)
    runner = InProcessRunner(
        config,
        plugin,
        {"gain_profile": gain_profile},
        RunnerSettings(rate_hz=rate_hz, ramp_s=TRIAL_RAMP_S, estimator="truth"),
        initial_joint_positions=config.array("default"),
    )
    ctl = plugin.ctl
    assert ctl is not None
    backend = runner.backend
    log = LoopLog()
    limits = PushLimits(timestep=config.simulation.timestep)
    try:
        for k in range(round(seconds * rate_hz)):
            tick = runner.control()
            if push is not None and k == round(push.start * rate_hz):
                backend.push(validate_push((*push.force, 0.0), push.duration, limits))
            runner.advance()
            bal = ctl.balance.state
            log.time.append(tick.t)
            log.base_height.append(backend.base_height())
            if bal is not None and ctl.last_output is not None:
                log.com.append(bal.com)
                log.com_ref.append(bal.dcm_ref)
                log.modes.append(plugin.last_mode)
                log.qp_ok.append(ctl.last_output.ok)
            if plugin.fault or backend.base_height() < config.simulation.fall_height:
                log.fell = True
                break
    finally:
        runner.close()
    return log


def survives_push(config: RobotConfig, direction: tuple[float, float], impulse: float, **kw: float) -> bool:
    """Whether the robot still stands 2 s after a 0.1 s push of ``impulse`` (N s) along ``direction``."""
    duration = 0.1
    u = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
    force = u * impulse / duration
    log = run_standing(config, 3.0, Push((float(force[0]), float(force[1])), 0.5, duration), **kw)  # type: ignore[arg-type]
    if log.fell:
        return False
    # standing: base height within 10 cm of the start and CoM back within 5 cm of its reference
    final_err = np.linalg.norm(log.com[-1][:2] - log.com_ref[-1])
    return bool(log.base_height[-1] > log.base_height[0] - 0.1 and final_err < 0.05)


def max_survived_impulse(
    config: RobotConfig, direction: tuple[float, float], upper: float, iterations: int = 6
) -> float:
    """Bisection of the largest survived impulse (N s) in ``[0, upper]`` (``upper`` doubled if survived)."""
    while survives_push(config, direction, upper):
        upper *= 2.0
    lo, hi = 0.0, upper
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if survives_push(config, direction, mid):
            lo = mid
        else:
            hi = mid
    return lo
