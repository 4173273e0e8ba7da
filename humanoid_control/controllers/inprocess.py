"""The in-process runner: any registered controller on the driver's core and a backend, one process, no ROS.

Benchmarks, tuning scripts, tests and the scorecard run a controller here at full speed. Each tick does what
the driver's loop does with a controller in it (``in_loop:=true``), in the same order:

1. read the backend's sensors (joint state, IMU: :class:`~humanoid_control.hardware.types.RobotState`);
2. the base estimate, when the controller reads one (``needs_estimate``) or the runner is asked for one: the
   state estimator's core on the IMU and encoders (``estimator="ekf"``, as the graph's ``state_estimator``
   with its default noise and flat-ground prior), or the simulator's ground truth (``estimator="truth"``);
3. the controller, through the same :class:`~humanoid_control.controllers.host.ControllerHost` the driver's
   loop and the node adapter use: ``update(state, t)`` -> a checked command (with ``delay_ticks`` of
   transport delay, for experiments);
4. the driver's safety core (:class:`~humanoid_control.driver.driver_core.DriverCore`: boot ramp, hold,
   activation, watchdog, limits, damping) turns it into the low-level command written to the backend;
5. the backend advances one period (the physics steps of one tick).

Frames and units as in :mod:`~humanoid_control.controllers.interface`. Ground truth: base pose in the world
frame, twist in the base frame (:class:`~humanoid_control.hardware.types.GroundTruth`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from humanoid_control.controllers.host import ControllerHost
from humanoid_control.controllers.interface import Controller, ControllerState
from humanoid_control.controllers.registry import create_controller
from humanoid_control.driver.driver_core import CommandError, DriverCore, DriverSettings, JointCommand
from humanoid_control.estimation.estimator import BaseEstimate
from humanoid_control.hardware.mujoco_sim import MujocoBackend, tilt_from_quat
from humanoid_control.hardware.types import GroundTruth, LowLevelCommand, RobotState
from humanoid_control.model.robot_config import RobotConfig
from humanoid_control.model.robot_model import quat_wxyz_to_matrix

#: where the base estimate comes from
ESTIMATORS = ("none", "truth", "ekf")


@dataclass
class RunnerSettings:
    """How the runner drives the controller.

    Attributes:
        rate_hz: loop rate (Hz). ramp_s: the driver's boot ramp to the default pose (s; the robot spawns in
            its configured spawn pose unless the backend is given). activation_ticks: the driver's hand-shake.
        estimator: ``none`` (no estimate unless the controller needs one: then ``ekf``), ``truth`` or ``ekf``.
        flat_ground_std: the estimator's flat-ground prior (m; 0: off).
        delay_ticks: commands reach the driver this many ticks late (experiments: transport delay).
        fall_tilt_deg: the driver's fall detection (deg; 0: off).
        autostart: the controller starts at the first state (else :meth:`InProcessRunner.start`).
    """

    rate_hz: float = 500.0
    ramp_s: float = 2.0
    activation_ticks: int = 1
    estimator: str = "none"
    flat_ground_std: float = 0.01
    delay_ticks: int = 0
    fall_tilt_deg: float = 60.0
    autostart: bool = True

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator '{self.estimator}' is not one of {', '.join(ESTIMATORS)}")
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"rate_hz {self.rate_hz} must be positive")
        if self.delay_ticks < 0:
            raise ValueError(f"delay_ticks {self.delay_ticks} must be >= 0")


@dataclass
class Tick:
    """One tick of the runner: its time (s), the sensors, the state the controller saw, its command (None:
    none this tick), the driver's mode after the update and the simulator's ground truth."""

    t: float
    sensors: RobotState
    state: ControllerState
    command: JointCommand | None
    mode: str
    truth: GroundTruth


def truth_estimate(truth: GroundTruth, stamp: float) -> BaseEstimate:
    """The simulator's ground truth as a base estimate (pose in the world frame, twist in the base frame)."""
    return BaseEstimate(
        stamp=stamp,
        position=np.asarray(truth.position, dtype=float),
        rotation=quat_wxyz_to_matrix(np.asarray(truth.quat, dtype=float)),
        linear_velocity=np.asarray(truth.linear_velocity_body, dtype=float),
        angular_velocity=np.asarray(truth.angular_velocity_body, dtype=float),
        contact=np.ones(2, dtype=bool),
        forces=[],
        covariance=np.zeros((0, 0)),
    )


class InProcessRunner:
    """A controller (registered name or instance) on the driver core and a MuJoCo backend.

    Args:
        robot: the robot configuration.
        controller: a registered controller's name or an unconfigured :class:`Controller`.
        params: the controller's parameters.
        settings: :class:`RunnerSettings`.
        backend: a backend to use (default: a new :class:`MujocoBackend` of ``robot``, with
            ``backend_kwargs``).
    """

    def __init__(
        self,
        robot: RobotConfig,
        controller: str | Controller,
        params: Mapping[str, Any] | None = None,
        settings: RunnerSettings | None = None,
        backend: Any = None,
        **backend_kwargs: Any,
    ) -> None:
        self.robot = robot
        self.settings = settings or RunnerSettings()
        s = self.settings
        ctl = create_controller(controller) if isinstance(controller, str) else controller
        self.host = ControllerHost(ctl, robot, params, autostart=s.autostart)
        self.controller = ctl
        self.backend = backend if backend is not None else MujocoBackend(robot, **backend_kwargs)
        self.driver = DriverCore(
            robot,
            DriverSettings(
                rate_hz=s.rate_hz,
                ramp_duration=s.ramp_s,
                activation_ticks=s.activation_ticks,
                fall_tilt=math.radians(s.fall_tilt_deg),
            ),
        )
        gains = ctl.gains()
        if isinstance(gains, str):
            self.driver.set_command_profile(gains)
        elif gains is not None:
            self.driver.set_command_gains(np.asarray(gains[0]), np.asarray(gains[1]), name=ctl.name)
        estimator = s.estimator if s.estimator != "none" or not ctl.needs_estimate else "ekf"
        self.estimator_kind = estimator
        self.estimator: Any = None
        if estimator == "ekf":
            from humanoid_control.estimation.ekf import EstimatorNoise
            from humanoid_control.estimation.estimator import StateEstimator

            self.estimator = StateEstimator(robot, EstimatorNoise(ground_height=s.flat_ground_std))
        self.dt = 1.0 / s.rate_hz
        self.cmd_vel: np.ndarray | None = None
        self.cmd_vel_stamp = -math.inf
        self.state_hook: Callable[[ControllerState, Any], ControllerState] | None = None
        self.commands_refused = 0
        self.last_refusal = ""
        self._pending: deque[JointCommand] = deque()

    def start(self) -> tuple[bool, str]:
        """Start the controller (it activates at the next tick)."""
        return self.host.start()

    def set_cmd_vel(self, vx: float, vy: float, wz: float) -> None:
        """The velocity command (m/s, m/s, rad/s; base frame) in the states from the next tick on, stamped
        with the backend's time now."""
        self.cmd_vel = np.array([vx, vy, wz], dtype=float)
        self.cmd_vel_stamp = self.time

    @property
    def time(self) -> float:
        """The backend's time (s)."""
        return float(self.backend.time)

    def step(self) -> Tick:
        """One tick (module docstring): :meth:`control`, then :meth:`advance`; returns what happened."""
        tick = self.control()
        self.advance()
        return tick

    def control(self) -> Tick:
        """Steps 1-4 of a tick: read, estimate, the controller's command, the driver's law written to the
        backend (a caller that acts between the command and the physics, e.g. a push at a gait phase, calls
        this, then :meth:`advance`)."""
        s = self.backend.read()
        truth = self.backend.ground_truth()
        estimate = None
        if self.estimator is not None:
            estimate = self.estimator.step(s.stamp, s.gyro, s.accel, s.q, s.tau, s.imu_quat, s.dq)
        elif self.estimator_kind == "truth":
            estimate = truth_estimate(truth, s.stamp)
        state = ControllerState(
            stamp=s.stamp,
            q=s.q,
            dq=s.dq,
            imu_quat=s.imu_quat,
            gyro=s.gyro,
            driver_mode=self.driver.mode.value,
            accel=s.accel,
            tau=s.tau,
            estimate=estimate,
            cmd_vel=self.cmd_vel,
            cmd_vel_stamp=self.cmd_vel_stamp,
        )
        if self.state_hook is not None:  # experiments: what the controller sees, rewritten
            state = self.state_hook(state, self.backend)
        try:
            command = self.host.step(state)
        except CommandError as exc:
            command = None
            self.commands_refused += 1
            self.last_refusal = str(exc)
            self.driver.refuse(str(exc))
        if command is not None:
            self._pending.append(command)
        while len(self._pending) > self.settings.delay_ticks:
            self.driver.submit(self._pending.popleft())
        out: LowLevelCommand = self.driver.update(s.q, s.dq, tilt_from_quat(s.imu_quat))
        self.backend.write(out)
        return Tick(s.stamp, s, state, command, self.driver.mode.value, truth)

    def advance(self) -> None:
        """Step 5 of a tick: the backend advances one period."""
        self.backend.advance(self.dt)

    def run(
        self,
        seconds: float,
        on_tick: Callable[[Tick], bool | None] | None = None,
    ) -> None:
        """Run for ``seconds`` of backend time; ``on_tick(tick)`` after each tick may return True to stop."""
        end = self.time + seconds - 0.5 * self.dt
        while self.time < end:
            tick = self.step()
            if on_tick is not None and on_tick(tick):
                break

    def fell(self, truth: GroundTruth | None = None) -> bool:
        """The base below the configured fall height or tilted past 60 degrees."""
        gt = truth or self.backend.ground_truth()
        return bool(
            gt.position[2] < self.robot.simulation.fall_height or tilt_from_quat(gt.quat) > math.radians(60)
        )

    def close(self) -> None:
        """Release the backend."""
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()
