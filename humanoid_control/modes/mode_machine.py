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
- ``damp``: the driver is in damping (e-stop, ``damp`` request, or a fault), latched until ``reset`` (or, in
  simulation, ``respawn``).

Recovery from a fall: the driver reports whether the robot is down (``{driver}/down``: base tilt beyond its
``fall_tilt_deg``; :meth:`ModeMachine.on_down`). While it is down in ``damp``, ``reset`` and the requests that
need the robot up are refused with "robot is down: ...". In simulation (the driver offers ``~/respawn``)
``respawn`` puts the robot back upright at its start pose: the controller in charge is stopped, the driver
respawns (it ramps in place, then holds) and every controller's fault is cleared (the policy runner's reset:
fresh state and statistics); the mode is then ``hold``, from which ``stand`` and the others work. On hardware
(or an emulator) ``respawn`` is refused: put the robot upright by hand, then ``reset``. ``reset`` also clears
the faults the controllers report while the robot is up and the driver is not damping (a controller left in
``fault`` after the driver was reset or respawned through its own services).

Requests (:class:`Request`) give a :class:`Decision`: refused with the reason, or allowed with the ordered
actions the node performs (``driver_estop``, ``driver_reset``, ``driver_respawn``, ``policy_start``,
``policy_stop``, ``policy_reset``, ``wbc_start``, ``wbc_stop``, ``wbc_reset``, ``walk_start``, ``walk_stop``,
``walk_reset``) and the target mode. The node
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
    RESPAWN = "respawn"
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
    ``~/start`` services; ``respawn``: the driver's ``~/respawn`` (a simulator; never on hardware or an
    emulator)."""

    policy: bool = False
    walking: bool = False
    wbc: bool = False
    respawn: bool = False


#: the controllers' reset actions, by the name their ``~/state`` is kept under in :class:`ModeMachine`
RESET_ACTIONS = {"policy": "policy_reset", "wbc": "wbc_reset", "walk": "walk_reset"}


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
    wbc_state: str | None = None  # the WBC's ~/state (idle, wait, run, fault); None where none runs
    walk_state: str | None = None  # the walking controller's ~/state, the same way
    down: bool = False  # the driver reports the robot down (base tilt beyond its fall_tilt_deg)
    down_reason: str = ""  # what the driver reported (tilt and its limit)
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
        if request == Request.RESPAWN:
            return self._decide_respawn(available, wbc_stop + walk_stop)
        if request == Request.RESET:
            return self._decide_reset(available)
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
        if mode == Mode.DAMP and self.down:
            return Decision(False, f"{name}: {self._down_text(available)}")
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
        starting = {Mode.RUN_POLICY: "policy", Mode.WALK: "walk"}.get(target, "wbc" if available.wbc else "")
        if starting in self.faulted():
            what = {"policy": "the policy runner", "wbc": "the WBC", "walk": "the walking controller"}[
                starting
            ]
            return Decision(False, f"{name}: {what} is in fault; call reset first")
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

    def faulted(self) -> list[str]:
        """The controllers whose last ``~/state`` is ``fault`` (``policy``, ``wbc``, ``walk``)."""
        states = {"policy": self.policy_state, "wbc": self.wbc_state, "walk": self.walk_state}
        return [name for name, state in states.items() if state == "fault"]

    def _resets(self, available: Available) -> tuple[str, ...]:
        """The controllers' reset actions: the policy runner's whenever it is reachable (a fresh state and
        fresh statistics), the WBC's and the walking controller's where they report ``fault``."""
        faulted = self.faulted()
        return tuple(
            action
            for name, action in RESET_ACTIONS.items()
            if (name == "policy" and available.policy) or (name != "policy" and name in faulted)
        )

    def _down_text(self, available: Available) -> str:
        """Why a request needs the robot up, and what to do."""
        what = f"robot is down: {self.down_reason or 'base tilt beyond the driver fall_tilt_deg'}"
        if available.respawn:
            return f"{what}; call respawn (simulation)"
        return f"{what}; put it upright by hand, then reset (no respawn on hardware)"

    def _decide_reset(self, available: Available) -> Decision:
        """``reset``: in ``damp`` the driver's reset (refused while the robot is down) and the controllers';
        elsewhere the faults of the controllers that report one (the mode stays, or ``hold`` where the
        controller in charge faulted), else nothing to reset."""
        mode = self.mode
        if mode == Mode.DAMP:
            if self.down:
                return Decision(False, f"reset: {self._down_text(available)}")
            return Decision(
                True,
                "reset: ramping to the default pose, then hold",
                ("driver_reset", *self._resets(available)),
                Mode.HOLD,
            )
        faulted = self.faulted()
        if not faulted or mode == Mode.BOOT:
            return Decision(False, f"reset: the robot is not damping (mode {mode.value}); nothing to reset")
        actions = tuple(RESET_ACTIONS[name] for name in faulted)  # a running controller is left alone
        in_charge = {Mode.RUN_POLICY: "policy", Mode.WALK: "walk"}.get(
            mode, "wbc" if mode == Mode.STAND and self.wbc_active else ""
        )
        target = Mode.HOLD if in_charge in faulted else None
        names = ", ".join(
            {"policy": "policy runner", "wbc": "WBC", "walk": "walking controller"}[n] for n in faulted
        )
        return Decision(True, f"reset: clearing the fault of the {names}", actions, target)

    def _decide_respawn(self, available: Available, stops: tuple[str, ...]) -> Decision:
        """``respawn`` (simulation only): stop the controller in charge, the driver's respawn, the
        controllers' resets; -> ``hold`` (the driver ramps in place, then holds)."""
        if not available.respawn:
            return Decision(
                False,
                "respawn: no respawn on hardware (the driver offers no ~/respawn: a real robot or an "
                "emulator); put the robot upright by hand, then reset",
            )
        stop = ("policy_stop",) if self.mode == Mode.RUN_POLICY else stops
        return Decision(
            True,
            "respawn: the robot is put back upright at its start pose (simulation); the driver ramps in "
            "place, then holds",
            (*stop, "driver_respawn", *self._resets(available)),
            Mode.HOLD,
        )

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
        if "driver_respawn" in decision.actions:
            self.down = False  # upright again (the driver confirms at its next tick)
        # a reset controller leaves fault at once (its next ~/state confirms): what each one publishes then
        if "policy_reset" in decision.actions and self.policy_state == "fault":
            self.policy_state = "wait_state"
        if "wbc_reset" in decision.actions and self.wbc_state == "fault":
            self.wbc_state = "wait"
        if "walk_reset" in decision.actions and self.walk_state == "fault":
            self.walk_state = "wait"
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
            # the driver was reset or respawned directly (its own services), not through the mode manager; a
            # controller may still be in fault (reset clears it)
            return self._enter(Mode.HOLD, "the driver was reset (robot_driver/reset or respawn)", t)
        return None

    def on_down(self, down: bool, reason: str = "") -> bool:
        """The driver's ``~/down`` changed: the robot is down (base tilt beyond the driver's
        ``fall_tilt_deg``; ``reason`` says so) or up again. True when it went down (a fall to record)."""
        fell = down and not self.down
        self.down = down
        self.down_reason = reason if down else ""
        return fell

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
