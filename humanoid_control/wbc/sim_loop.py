"""In-process closed loop: :class:`StandingController` on the MuJoCo backend, ground-truth state (no ROS).

For tests and quick evaluations; the acceptance runs go through the ROS graph with the estimator instead.
A push is a constant horizontal force (N, world frame) at the base body for a duration (s), applied by the
backend (:meth:`~humanoid_control.hardware.mujoco_sim.MujocoBackend.push`, MuJoCo's ``xfrc_applied``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from humanoid_control.hardware.mujoco_sim import MujocoBackend
from humanoid_control.hardware.push import PushLimits, validate_push
from humanoid_control.hardware.types import GroundTruth, LowLevelCommand
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import PinocchioRobotModel, quat_wxyz_to_xyzw
from humanoid_control.wbc.command import CommandMode
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.dynamics import pinocchio_state


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


def ground_truth_state(
    backend: MujocoBackend, pmodel: PinocchioRobotModel, gt: GroundTruth | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The pinocchio state ``(q, v)`` of the simulated robot from the simulator's ground truth (base pose
    in the world frame, base twist in the base frame) and its joint state: the in-process loops' estimator.
    ``gt``: this tick's ground truth when the caller read it already."""
    s = backend.read()
    gt = gt or backend.ground_truth()
    return pinocchio_state(
        pmodel,
        gt.position,
        quat_wxyz_to_xyzw(gt.quat),
        gt.linear_velocity_body,
        gt.angular_velocity_body,
        s.q,
        s.dq,
    )


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
    backend = MujocoBackend(config, initial_joint_positions=config.array("default"))
    ctl = controller or StandingController(config)
    gains = config.gain_profile(gain_profile)
    dt = 1.0 / rate_hz
    log = LoopLog()
    limits = PushLimits(timestep=config.simulation.timestep)
    for k in range(round(seconds * rate_hz)):
        t = k * dt
        q, v = ground_truth_state(backend, ctl.pmodel)
        cmd = ctl.step(q, v)
        backend.write(LowLevelCommand(cmd.q, cmd.dq, gains.kp, gains.kd, cmd.tau_ff))
        if push is not None and k == round(push.start * rate_hz):
            backend.push(validate_push((*push.force, 0.0), push.duration, limits))
        backend.advance(dt)
        bal = ctl.balance.state
        assert bal is not None and ctl.last_output is not None
        log.time.append(t)
        log.com.append(bal.com)
        log.com_ref.append(bal.dcm_ref)
        log.base_height.append(backend.base_height())
        log.modes.append(cmd.mode.value)
        log.qp_ok.append(ctl.last_output.ok)
        if cmd.mode == CommandMode.DAMPING or backend.base_height() < config.simulation.fall_height:
            log.fell = True
            break
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
