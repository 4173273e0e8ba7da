"""What the WBC node does around :class:`~.controller.StandingController` (pure, no rclpy).

Inputs per tick: the joint state (configuration order, rad and rad/s, stamp ``t`` in s of the driver's clock),
the latest estimated base state from ``/odom`` (:class:`OdomSample`: pose of the base in the ``odom`` frame,
twist in the base frame) and the driver's mode. Output: a joint command to publish, or None.

States (:class:`WbcState`):

- ``wait``: the driver's gains are not set yet, the driver mode is unknown or ``damping``, or no valid
  ``/odom`` yet: no command.
- ``run``: one command per joint state. While the driver ramps (boot, reset, respawn) commands are still sent
  (the driver ignores them, but they pace lockstep, which keeps the estimator in step too) and QP failures
  and bad input are not acted on (the command is then the measured pose with zero torque, a pure pacing
  message); the controller's failure latch is cleared every ramp tick. In ``hold`` and ``active``
  the command is the controller's.
- ``fault``: the QP failed for more than ``max_hold_ticks`` ticks in a row (the controller's
  :class:`~humanoid_control.wbc.command.CommandGenerator` policy: last safe command meanwhile), or the input
  was bad (non-finite joint state, no or stale ``/odom``) for more than ``max_bad_ticks`` ticks in a row while
  the driver held or ran the robot. No more commands, and the node calls the driver's e-stop (damping at
  once). Latched until the driver ramps again (an operator reset or a respawn) or :meth:`WbcRunner.reset`.

A single bad input is refused and counted, and nothing is sent for that tick (the driver keeps the last
command; its watchdog damps after ``watchdog_ticks`` without one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from humanoid_control.wbc.command import CommandMode, JointCommand
from humanoid_control.wbc.controller import StandingController
from humanoid_control.wbc.dynamics import pinocchio_state


class WbcState(str, Enum):
    """State of the WBC runner."""

    WAIT = "wait"
    RUN = "run"
    FAULT = "fault"


@dataclass
class OdomSample:
    """Estimated base state: stamp ``t`` (s); ``position`` (3,) m and ``quat_xyzw`` (4,) of the base in the
    ``odom`` frame; ``linear_velocity`` (3,) m/s and ``angular_velocity`` (3,) rad/s in the base frame."""

    t: float
    position: np.ndarray
    quat_xyzw: np.ndarray
    linear_velocity: np.ndarray
    angular_velocity: np.ndarray

    def problem(self) -> str | None:
        """Why this sample is unusable (non-finite, non-unit quaternion), or None."""
        # one sum per array: non-finite iff an entry is (the tick's control path: a few us, not a dozen)
        total = self.t + self.position.sum() + self.linear_velocity.sum() + self.angular_velocity.sum()
        quat = self.quat_xyzw
        norm2 = float(quat @ quat)
        if not (math.isfinite(float(total)) and math.isfinite(norm2)):
            return "non-finite /odom"
        if abs(math.sqrt(norm2) - 1.0) > 0.05:
            return "/odom orientation is not a unit quaternion"
        return None


@dataclass
class WbcRunnerSettings:
    """Attributes:
    max_odom_age_s: a joint state more than this much newer than the latest ``/odom`` is refused (s).
    max_bad_ticks: consecutive refused ticks tolerated in ``run`` before ``fault``.
    """

    max_odom_age_s: float = 0.02
    max_bad_ticks: int = 10


@dataclass
class InputCounters:
    """Refused inputs (diagnostics): joint states, ``/odom`` samples, stale ``/odom``; faults entered."""

    states_refused: int = 0
    odom_refused: int = 0
    odom_stale: int = 0
    consecutive_bad: int = 0
    faults: int = 0
    last_refusal: str = ""
    transitions: list[tuple[float, str, str]] = field(default_factory=list)


class WbcRunner:
    """Call :meth:`set_odom` with each ``/odom`` and :meth:`update` with each joint state."""

    def __init__(self, controller: StandingController, settings: WbcRunnerSettings | None = None) -> None:
        self.controller = controller
        self.settings = settings or WbcRunnerSettings()
        self.state = WbcState.WAIT
        self.reason = "waiting for the driver's gains, its mode and /odom"
        self.gains_ready = False
        self.odom: OdomSample | None = None
        self.counters = InputCounters()
        self.estop_requested = False  # set on entering fault; the node calls the e-stop and clears it

    # ------------------------------------------------------------------ inputs
    def set_odom(self, sample: OdomSample) -> bool:
        """A new ``/odom`` sample; refused (False, counted) if unusable."""
        problem = sample.problem()
        if problem is not None:
            self.counters.odom_refused += 1
            self.counters.last_refusal = problem
            return False
        self.odom = sample
        return True

    def reset(self) -> None:
        """Leave ``fault`` (operator): wait for fresh input; the controller's failure latch is cleared."""
        self.controller.commands.reset()
        self.counters.consecutive_bad = 0
        self._set(WbcState.WAIT, "reset", math.nan)

    # ------------------------------------------------------------------ per joint state
    def update(self, t: float, q: np.ndarray, dq: np.ndarray, driver_mode: str | None) -> JointCommand | None:
        """The command answering the joint state ``q, dq`` stamped ``t`` (s), or None (send nothing)."""
        ramp = driver_mode == "ramp"
        if self.state == WbcState.FAULT:
            if not ramp:
                return None
            self.reset()  # the driver was reset or the robot respawned: start over
        if not self.gains_ready or driver_mode is None:
            return self._wait("waiting for the driver's gains and mode", t)
        if driver_mode == "damping":
            return self._wait("the driver is damping", t)
        problem = self._input_problem(t, q, dq)
        if problem is not None:
            c = self.counters
            c.consecutive_bad += 1
            c.last_refusal = problem
            if self.state == WbcState.RUN and not ramp and c.consecutive_bad > self.settings.max_bad_ticks:
                self._fault(f"bad input for {c.consecutive_bad} ticks: {problem}", t)
            elif self.odom is None:
                self._wait(problem, t)
            if ramp and bool(np.all(np.isfinite(q))):
                return self._pacing(q)  # e.g. the estimator restarting during a respawn: keep lockstep paced
            return None
        self.counters.consecutive_bad = 0
        assert self.odom is not None
        o = self.odom
        ctl = self.controller
        qp, vp = pinocchio_state(
            ctl.pmodel, o.position, o.quat_xyzw, o.linear_velocity, o.angular_velocity, q, dq
        )
        if ramp:
            ctl.commands.reset()  # failures while the driver ramps are not acted on
            hold = getattr(ctl, "hold_still", None)  # a stepping controller: no plan, no step meanwhile
            if hold is not None:
                hold()
        cmd = ctl.step(qp, vp)
        if self.state != WbcState.RUN:
            self._set(WbcState.RUN, f"driver {driver_mode}, /odom received", t)
        if cmd.mode == CommandMode.DAMPING:
            if ramp:  # ignored by the driver; keeps lockstep paced
                return self._pacing(q)
            last = ctl.last_output
            status = last.status.value if last is not None else "none"
            self._fault(f"QP failed {ctl.commands.counters.consecutive} ticks in a row (last: {status})", t)
            return None
        return cmd

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _pacing(q: np.ndarray) -> JointCommand:
        """A command the ramping driver ignores (measured pose, no velocity, no torque): it only paces
        lockstep."""
        zeros = np.zeros_like(q, dtype=float)
        return JointCommand(CommandMode.DAMPING, np.array(q, dtype=float), zeros, zeros.copy())

    def _input_problem(self, t: float, q: np.ndarray, dq: np.ndarray) -> str | None:
        c = self.counters
        if not math.isfinite(float(q.sum() + dq.sum()) + t):
            c.states_refused += 1
            return "non-finite joint state"
        if self.odom is None:
            return "no /odom yet"
        age = t - self.odom.t
        if age > self.settings.max_odom_age_s:
            c.odom_stale += 1
            return f"/odom {age * 1e3:.0f} ms older than the joint state"
        return None

    def _wait(self, reason: str, t: float) -> None:
        if self.state != WbcState.WAIT:
            self._set(WbcState.WAIT, reason, t)
        else:
            self.reason = reason
        return None

    def _fault(self, reason: str, t: float) -> None:
        self.counters.faults += 1
        self.estop_requested = True
        self._set(WbcState.FAULT, reason, t)

    def _set(self, state: WbcState, reason: str, t: float) -> None:
        self.state = state
        self.reason = reason
        self.counters.transitions.append((t, state.value, reason))
        del self.counters.transitions[:-50]
