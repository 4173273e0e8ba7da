"""Modes, settings and per-tick status of the walking controller
(:class:`~humanoid_control.walking.controller.WalkingController`).

:class:`WalkMode` (stand or walk); :class:`WalkingSettings`: the DCM law's gains (dimensionless
``k / omega``), the CoM height PD (1/s^2, 1/s), margins and reaches (m), timing (s), the step adjustment,
push recovery and crossing step parameters and the friction coefficient the QP assumes;
:class:`WalkingStatus`: what one tick did, for diagnostics and plots (odom frame, m). The behaviour they
tune is described in :mod:`humanoid_control.walking.controller` and
:mod:`humanoid_control.walking.push_recovery`.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from humanoid_control.walking.footsteps import SIDES


class WalkMode(str, enum.Enum):
    """What the controller does."""

    STAND = "stand"
    WALK = "walk"


@dataclass
class WalkingSettings:
    """Gains and timing of :class:`WalkingController`.

    Attributes:
        dcm_gain: ``k / omega`` of the DCM law (dimensionless).
        stand_dcm_gain: the same while standing.
        cop_margin: ZMP kept this far inside the support polygon (m).
        kp_height, kd_height: CoM height PD (1/s^2, 1/s).
        replan_period: ZMP preview re-solve period (s), a multiple of the control period.
        n_steps: footsteps planned ahead (their span should exceed the preview horizon).
        stale_command_s: a command older than this (s) counts as zero: the robot finishes its step and stands.
        step_adjustment: move the swing foot's touchdown by the DCM error predicted at touchdown.
        capture_tolerance: dead band of that error (m), forward and lateral in the stance sole's frame.
        adjust_window: the part of the swing (phase 0..1) in which the touchdown may move.
        adjust_gain: scale of the touchdown move, forward and lateral in the stance sole's frame.
        adjust_recovery_reach: the moved touchdown may go as far as a capture step (``recovery_reach``),
            not only the walking step limits (a push while walking).
        walk_push_error: a swing whose predicted touchdown DCM error ``(xi - xi_r) e^(omega t_left)`` (m)
            exceeds this is pushed (``pushed_swings``): its sole may land as close as
            ``walk_push_width_min`` (m) to the stance sole (the next stance's ZMP nearer a DCM pushed toward
            the stance foot, which the swing foot cannot cross to catch), and the hip strategy is on with
            ``walk_push_cmp_margin`` (m) until the end of the weight transfer after it. Unpushed walks stay
            under 0.15 m (in process: the locomotion script, the top-speed ramp).
        walk_adjust_reach: with ``adjust_recovery_reach``, the walking touchdown adjustment's reach
            (forward, backward, width; m) instead of ``recovery_reach`` (None: the same): forward 0.45 m,
            which saved 22.5 N s front pushes at mid single support in process that 0.4 m did not.
        recovery_steps: standing, step when the DCM leaves the feet's support polygon.
        recovery_threshold: how far beyond the polygon (m) the DCM may go before a step starts.
        recovery_transfer: weight transfer before the capture step's swing (s).
        recovery_min_swing: shortest capture swing (s).
        takeover_swing: the swing (s) of the capture step with a foot already in the air when the controller
            takes a walking robot over from another (``take_over``): the rest of a swing, not a whole one
            (forced handovers from the holosoma policy's walk at 20 phases of its gait: 20 stood at 0.15 s
            and at 0.12 s, 19 at 0.2 s, 15 at 0.25 s, the capture swing; see docs/supervised.md).
        cmp_margin: standing and in a capture step, the hip strategy: the CMP may leave the support polygon
            by this much (m), the difference to the CoP made by a rate of centroidal angular momentum (as
            :class:`~humanoid_control.wbc.balance.StandingBalance`); 0 turns it off.
        walk_cmp_margin: the same while walking (m).
        walk_recovery_threshold: at a touchdown, a DCM this far (m) from the plan's (a push) ends the walk:
            the controller stands on both feet (capture steps allowed) and walks on once the DCM is back
            within ``walk_start_radius`` (m) of the middle of the feet and the CoM slower than
            ``walk_start_speed`` (m/s); 0 turns it off. Standing, a command starts a walk only from there.
        walk_measured_replan_error: at a touchdown, a DCM within this distance (m) of the plan's (every
            touchdown of an unpushed walk: at most 0.063 m measured in process) re-solves the preview from
            the measured CoM; beyond it (a push) from the preview's own prediction moved with the feet (by
            how far the foot landed from its planned place), so the DCM error stays visible to the next
            swing's touchdown adjustment instead of being planned into a fall.
        walk_transfer_extension: after such a pushed touchdown, the weight transfer may last this much (s)
            longer than the plan's double support: while the DCM, pushed toward the former stance foot,
            runs back from the ZMP held under that foot (toward the foot that just landed, which cannot
            step across it); 0 turns it off.
        wide_start_transfer: the first weight transfer (s) of a walk that starts from feet more than 5 cm
            from the nominal stance (after a capture step).
        crossing_steps: standing (or in the weight transfer of a standing capture step), a DCM beyond the
            loaded sole's outer edge (across the walking frame) by more than ``crossing_threshold`` (m),
            where no uncrossed step catches it, starts a crossing step instead: the unloaded foot lands
            across the loaded one at ``crossing_step`` (forward of the loaded sole, beyond its centre line,
            yaw toward it: m, m, rad, in the loaded sole's frame; the legs' reach:
            ``scripts/crossing_reach.py``), its swing ``crossing_swing`` (s) long, moving along the loaded
            sole first and across it after ``crossing_delay`` of the swing (clearing the stance foot); then
            the loaded foot steps out from behind it (``crossing_exit_width`` (m) to its side, re-targeted
            from the DCM as a capture step, as far as ``crossing_exit_reach`` (m) across the crossed foot:
            stepping out of a crossed stance uncrosses the legs, so it reaches beyond ``recovery_reach``'s
            width; 0.55 held 25 N s at 12 of 12 push timings in process through the estimator, 0.45 at 8).
        crossing_max_travel: no crossing step farther than this (m) from where the crossing foot stands
            (a wide stance after a step out: an uncrossed capture step instead).
        friction: friction coefficient the QP assumes while walking, unless ``WbcSettings.friction`` is set.
            Half the simulated feet's 0.6: with the standing controller's 0.5 the stance foot turned by up
            to 0.35 rad under the swing leg's yaw moment at 0.6 m/s (MuJoCo's soft contacts creep near the
            cone's edge) and the robot fell; with 0.3 it turned by less than 0.12 rad and walked on.
    """

    dcm_gain: float = 1.0
    stand_dcm_gain: float = 1.5
    cop_margin: float = 0.01
    kp_height: float = 100.0
    kd_height: float = 20.0
    replan_period: float = 0.02
    n_steps: int = 6
    stale_command_s: float = 0.5
    step_adjustment: bool = True
    capture_tolerance: tuple[float, float] = (0.0, 0.0)
    adjust_window: tuple[float, float] = (0.1, 0.8)
    adjust_gain: tuple[float, float] = (1.0, 1.0)
    adjust_recovery_reach: bool = True
    friction: float = 0.3
    recovery_steps: bool = True
    recovery_threshold: float = 0.0
    recovery_transfer: float = 0.05
    recovery_min_swing: float = 0.25
    takeover_swing: float = 0.15
    recovery_reach: tuple[float, float, float] = (0.4, 0.36, 0.45)
    walk_adjust_reach: tuple[float, float, float] | None = (0.45, 0.36, 0.45)
    walk_push_error: float = 0.15
    walk_push_width_min: float = 0.11
    walk_push_cmp_margin: float = 0.06
    recovery_offset: float = 0.2
    cmp_margin: float = 0.06
    walk_cmp_margin: float = 0.0
    walk_recovery_threshold: float = 0.15
    walk_measured_replan_error: float = 0.07
    walk_transfer_extension: float = 0.3
    walk_start_radius: float = 0.05
    walk_start_speed: float = 0.1
    wide_start_transfer: float = 0.8
    crossing_steps: bool = True
    crossing_threshold: float = 0.005
    crossing_step: tuple[float, float, float] = (0.18, 0.05, 0.15)
    crossing_swing: float = 0.25
    crossing_delay: float = 0.4
    crossing_exit_width: float = 0.3
    crossing_max_travel: float = 0.4
    crossing_exit_reach: float = 0.55


def tuned_settings(settings: WalkingSettings, tuning: tuple[tuple[str, Any], ...]) -> WalkingSettings:
    """``settings`` with a robot's tuning (``walking.controller`` of its configuration: ``(name, value)``
    pairs) written over it; ``ValueError`` naming an unknown setting or a value of the wrong kind."""
    if not tuning:
        return settings
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(WalkingSettings)}
    changes: dict[str, Any] = {}
    for name, value in tuning:
        if name not in fields:
            raise ValueError(f"walking.controller.{name}: no such walking controller setting")
        current = fields[name]
        if isinstance(current, bool) or isinstance(value, bool):
            ok = isinstance(current, bool) and isinstance(value, bool)
        elif isinstance(current, int):
            ok = isinstance(value, (int, float)) and float(value).is_integer()
            value = int(value) if ok else value
        elif isinstance(current, tuple) or (current is None and isinstance(value, tuple)):
            ok = isinstance(value, tuple) and (current is None or len(value) == len(current))
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, tuple)
            value = float(value) if ok else value
        if not ok:
            raise ValueError(f"walking.controller.{name}: {value!r} does not fit the setting ({current!r})")
        changes[name] = value
    return dataclasses.replace(settings, **changes)


@dataclass
class WalkingStatus:
    """Per tick, for diagnostics and plots (odom frame, m): CoM, DCM and their plan, ZMP commanded and
    planned, the support polygon, contacts, the swing foot."""

    t: float = 0.0
    mode: WalkMode = WalkMode.STAND
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    com_ref: np.ndarray = field(default_factory=lambda: np.zeros(3))
    dcm: np.ndarray = field(default_factory=lambda: np.zeros(2))
    dcm_ref: np.ndarray = field(default_factory=lambda: np.zeros(2))
    zmp_cmd: np.ndarray = field(default_factory=lambda: np.zeros(2))
    zmp_ref: np.ndarray = field(default_factory=lambda: np.zeros(2))
    contacts: dict[str, bool] = field(default_factory=lambda: {s: True for s in SIDES})
    swing: str | None = None
    adjusted_steps: int = 0
    command_clipped: bool = False
