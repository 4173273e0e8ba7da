"""The mode manager's state machine (pure, no rclpy): which operator requests are allowed in which mode, what
the node must do for each, and how the mode follows the driver and the controllers.

Modes (:class:`Mode`):

- ``boot``: the driver has not reached its hold yet (boot ramp to the default pose). Only ``estop`` and
  ``damp`` are accepted.
- ``hold``: the driver holds the default pose (``stand`` gains) and no operator mode was chosen yet, or after
  a reset.
- ``stand``: standing chosen by the operator: the whole-body controller (WBC balance) where one is
  reachable, else the driver's hold.
- ``walk``: model-based walking: the walking controller (``walking_controller``) follows the mux's
  ``/cmd_vel``; refused when no walking controller is reachable.
- ``run_policy``: the learned policy (``policy_runner``) commands the driver.
- ``damp``: the driver is in damping (e-stop, ``damp`` request, or a fault), latched until ``reset``.

Requests (:class:`Request`) give a :class:`Decision`: refused with the reason, or allowed with the ordered
actions the node performs (``driver_estop``, ``driver_reset``, ``policy_start``, ``policy_stop``,
``policy_reset``, ``wbc_start``, ``wbc_stop``, ``walk_start``, ``walk_stop``) and the target mode. The node
calls :meth:`ModeMachine.commit` once the actions succeeded. Exactly one controller commands the driver at a
time: every switch stops the controller in charge before it starts the next one (which waits for the driver's
hold), and damping stops the WBC and the walking controller too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Mode(str, Enum):
    """Operating mode of the robot, as the mode manager reports it."""

    BOOT = "boot"
    HOLD = "hold"
    STAND = "stand"
    WALK = "walk"
    RUN_POLICY = "run_policy"
    DAMP = "damp"


class Request(str, Enum):
    """Operator requests (the ``/mode_manager/*`` services and the joystick buttons)."""

    STAND = "stand"
    WALK = "walk"
    RUN_POLICY = "run_policy"
    DAMP = "damp"
    ESTOP = "estop"
    RESET = "reset"
    AUTONOMY_ON = "set_autonomy"
    AUTONOMY_OFF = "set_autonomy_off"


#: initial modes the launch file may name (``controller:=X`` with ``mode_manager:=true``)
INITIAL_MODES = {
    "none": Mode.HOLD,
    "hold": Mode.HOLD,
    "stand": Mode.STAND,
    "policy": Mode.RUN_POLICY,
    "run_policy": Mode.RUN_POLICY,
    "wbc_stand": Mode.STAND,
    "walk": Mode.WALK,
    "mpc_walk": Mode.WALK,
}


@dataclass(frozen=True)
class Decision:
    """What to do with a request.

    Attributes:
        allowed: False: refused, ``reason`` says why (answered as ``success: false``).
        reason: the refusal, or what is being done.
        actions: the node's steps, in order (see the module docstring).
        target: the mode after the actions (None: unchanged).
    """

    allowed: bool
    reason: str
    actions: tuple[str, ...] = ()
    target: Mode | None = None


@dataclass
class Available:
    """Controllers the node can reach now: the policy runner's, the WBC's and the walking controller's
    ``~/start`` services."""

    policy: bool = False
    walking: bool = False
    wbc: bool = False


@dataclass
class Transition:
    """A mode change: time (s), from, to, why."""

    t: float
    old: Mode
    new: Mode
    reason: str


@dataclass
class ModeMachine:
    """Transition rules; :attr:`mode` is the current mode and :attr:`reason` why it was entered."""

    mode: Mode = Mode.BOOT
    reason: str = "waiting for the driver's hold"
    driver_mode: str | None = None
    policy_state: str | None = None
    busy: bool = False  # the node is carrying out a request: the robot's reports do not change the mode
    policy_ran: bool = False  # the policy runner reported "run" since run_policy was entered
    wbc_active: bool = False  # the WBC was started (stand) and not stopped since
    walk_active: bool = False  # the walking controller was started (walk) and not stopped since
    history: list[Transition] = field(default_factory=list)

    # ------------------------------------------------------------------ requests
    def decide(
        self, request: Request, available: Available, moving: bool = False, stepping: bool = False
    ) -> Decision:
        """The decision for ``request`` in the current mode (pure: nothing changes until :meth:`commit`).

        ``moving``: a non-zero velocity was commanded lately; leaving ``run_policy`` or ``walk`` for another
        controller is then refused (a walking robot handed to a standing controller mid-step tips over: stop
        it first). ``stepping``: the walking controller still reports a step in progress (it finishes its
        step and brings its feet together after a zero command); leaving ``walk`` is refused until it
        stands."""
        name = "set_autonomy" if request in (Request.AUTONOMY_ON, Request.AUTONOMY_OFF) else request.value
        mode = self.mode
        wbc_stop = ("wbc_stop",) if self.wbc_active else ()
        walk_stop = ("walk_stop",) if self.walk_active else ()
        if request == Request.ESTOP:
            return Decision(
                True,
                "e-stop: damping latched until reset",
                ("driver_estop", *wbc_stop, *walk_stop),
                Mode.DAMP,
            )
        if request == Request.DAMP:
            if mode == Mode.DAMP:
                return Decision(True, "damp: already damping")
            return Decision(
                True, "damp: damping latched until reset", ("driver_estop", *wbc_stop, *walk_stop), Mode.DAMP
            )
        if request == Request.AUTONOMY_OFF:
            return Decision(True, "autonomy off: teleop commands the velocity")
        if request == Request.RESET:
            if mode != Mode.DAMP:
                return Decision(
                    False, f"reset: the robot is not damping (mode {mode.value}); nothing to reset"
                )
            actions = ("driver_reset", "policy_reset") if available.policy else ("driver_reset",)
            return Decision(True, "reset: ramping to the default pose, then hold", actions, Mode.HOLD)
        if request == Request.WALK and not available.walking:
            return Decision(
                False,
                "walk: no walking controller is reachable (launch with mode_manager:=true and mode_walk:=mpc "
                "or controller:=mpc_walk)",
            )
        if request == Request.RUN_POLICY and not available.policy:
            return Decision(
                False, "run_policy: no policy runner is reachable (launch with mode_manager:=true)"
            )
        if mode == Mode.DAMP:
            return Decision(False, f"{name}: the driver is in damping; call reset first")
        if mode == Mode.BOOT:
            return Decision(False, f"{name}: the driver is still booting (ramp to the default pose)")
        if request == Request.AUTONOMY_ON:
            return Decision(
                True, "autonomy on: /autonomy/cmd_vel commands the velocity until a teleop takeover"
            )
        target = {Request.STAND: Mode.STAND, Request.WALK: Mode.WALK, Request.RUN_POLICY: Mode.RUN_POLICY}[
            request
        ]
        if mode == target:
            return Decision(True, f"{name}: already in {mode.value}")
        if mode in (Mode.RUN_POLICY, Mode.WALK) and moving:
            return Decision(False, f"{name}: the robot is walking; command zero velocity first")
        if mode == Mode.WALK and stepping:
            return Decision(
                False, f"{name}: the walking controller is still stepping; wait until it stands on both feet"
            )
        stop = ("policy_stop",) if mode == Mode.RUN_POLICY else wbc_stop + walk_stop
        start: tuple[str, ...] = ()
        if target == Mode.RUN_POLICY:
            start = ("policy_start",)
        elif target == Mode.WALK:
            start = ("walk_start",)
        elif target == Mode.STAND and available.wbc:
            start = ("wbc_start",)
        what = {
            Mode.STAND: "standing (WBC balance)" if available.wbc else "standing (the driver's hold)",
            Mode.WALK: "walking (the walking controller follows /cmd_vel)",
            Mode.RUN_POLICY: "the learned policy commands the robot",
        }[target]
        return Decision(True, f"{name}: {what}", stop + start, target)

    def commit(self, decision: Decision, t: float) -> Transition | None:
        """Enter the decision's target mode (after its actions succeeded); the transition, or None."""
        if "wbc_stop" in decision.actions:
            self.wbc_active = False
        if "wbc_start" in decision.actions:
            self.wbc_active = True
        if "walk_stop" in decision.actions:
            self.walk_active = False
        if "walk_start" in decision.actions:
            self.walk_active = True
        if decision.target is None or decision.target == self.mode:
            return None
        if decision.target == Mode.RUN_POLICY:
            self.policy_ran = self.policy_state == "run"
        return self._enter(decision.target, decision.reason, t)

    # ------------------------------------------------------------------ what the robot does
    def on_driver_mode(self, driver_mode: str, t: float) -> Transition | None:
        """The driver's latched ``~/mode`` changed (``ramp``, ``hold``, ``active``, ``damping``)."""
        self.driver_mode = driver_mode
        if self.busy:
            return None  # the node calls sync() once its request is done
        if driver_mode == "damping" and self.mode != Mode.DAMP:
            return self._enter(Mode.DAMP, "the driver went to damping (fault, watchdog or its e-stop)", t)
        if self.mode == Mode.BOOT and driver_mode in ("hold", "active"):
            return self._enter(Mode.HOLD, "the driver holds the default pose", t)
        if self.mode == Mode.DAMP and driver_mode == "ramp" and not self.busy:
            # the driver was reset directly (its own ~/reset service), not through the mode manager
            return self._enter(Mode.HOLD, "the driver was reset (robot_driver/reset)", t)
        return None

    def sync(self, t: float) -> Transition | None:
        """After a request: apply the driver's mode as it is now (a fault during the request is not lost)."""
        if self.driver_mode == "damping" and self.mode != Mode.DAMP:
            return self._enter(Mode.DAMP, "the driver went to damping (fault, watchdog or its e-stop)", t)
        return None

    def on_policy_state(self, state: str, t: float) -> Transition | None:
        """The policy runner's latched ``~/state`` changed; a runner that stopped by itself (``hold``: its
        ``/cmd_vel`` went silent) leaves ``run_policy`` for ``stand``."""
        self.policy_state = state
        if self.mode == Mode.RUN_POLICY and state == "run":
            self.policy_ran = True
        if self.busy:
            return None
        # only a runner seen running since run_policy was entered: a "hold" of the runner's own start-up
        # (idle until started) can arrive after the start request
        if self.mode == Mode.RUN_POLICY and state == "hold" and self.policy_ran:
            return self._enter(Mode.STAND, "the policy runner stopped by itself; the driver holds", t)
        return None

    def _enter(self, mode: Mode, reason: str, t: float) -> Transition:
        tr = Transition(t, self.mode, mode, reason)
        self.mode, self.reason = mode, reason
        self.history.append(tr)
        del self.history[:-200]
        return tr
