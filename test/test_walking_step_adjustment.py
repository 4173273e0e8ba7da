"""DCM step adjustment (humanoid_control.walking.step_adjustment) on the point-foot LIPM."""

from __future__ import annotations

import math

import numpy as np
import pytest

from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.walking.footsteps import Footstep, FootstepPlanner, other_side
from humanoid_control.walking.geometry import Pose2D, inside_polygon, polygon_centroid, support_polygon
from humanoid_control.walking.lipm import Lipm
from humanoid_control.walking.step_adjustment import (
    DcmStepAdjuster,
    StepAdjustmentSettings,
    nominal_dcm_offset,
)
from humanoid_control.wbc.balance import clamp_to_polygon

CONFIG = load_robot_config("g1")
SPEC = CONFIG.walking
PLANNER = FootstepPlanner.from_config(CONFIG)
LIPM = Lipm(SPEC.com_height)
FEET = {side: PLANNER.nominal_foot(Pose2D(0.0, 0.0, 0.0), side) for side in ("left", "right")}


def centroid(side: str, pose: Pose2D) -> np.ndarray:
    return polygon_centroid(pose.apply(PLANNER.soles[side]))


def standing_law(c: np.ndarray, v: np.ndarray, hull: np.ndarray, target: np.ndarray, seconds: float) -> tuple:
    """Both feet down: ZMP = DCM + (DCM - target) clamped into the support polygon, 1 ms steps."""
    for _ in range(round(seconds / 0.001)):
        xi = LIPM.dcm(c, v)
        zmp = clamp_to_polygon(xi + 1.0 * (xi - target), hull)
        c, v = LIPM.point_foot(c, v, zmp, 0.001)
    return c, v


def recover(velocity: np.ndarray, step: bool) -> dict:
    """Standing LIPM pushed to ``velocity`` (m/s) at the feet's midpoint.

    ``step`` False: stay on both feet (ankle strategy only). True: lift the foot on the side the DCM went at
    once, hold the ZMP at the point of the stance sole nearest the DCM, re-adjust the step every 10 ms while
    swinging, then both feet down. Point-foot LIPM, 1 ms steps. Returns the final state after 3 s."""
    c = 0.5 * (centroid("left", FEET["left"]) + centroid("right", FEET["right"]))
    v = np.asarray(velocity, dtype=float)
    both = support_polygon([FEET[s].apply(PLANNER.soles[s]) for s in ("left", "right")])
    if not step:
        c, v = standing_law(c, v, both, c.copy(), 3.0)
        return {"c": c, "v": v, "hull": both, "xi_touchdown": LIPM.dcm(c, v)}
    adjuster = DcmStepAdjuster(PLANNER, LIPM)
    swing = adjuster.swing_side_for(FEET, LIPM.dcm(c, v))
    stance = Footstep(other_side(swing), FEET[other_side(swing)])
    nominal = Footstep(swing, FEET[swing])  # the plan had no step: the foot would go back where it is
    p = clamp_to_polygon(LIPM.dcm(c, v), stance.pose.apply(PLANNER.soles[stance.side]))
    t, dt, touchdown = 0.0, 0.001, SPEC.single_support
    first = None
    while t < touchdown - 1e-9:
        # re-adjusted every 10 ms until the last min_remaining of the swing (then the foot is committed)
        if round(t / dt) % 10 == 0 and touchdown - t > StepAdjustmentSettings().min_remaining:
            result = adjuster.adjust(stance, nominal, LIPM.dcm(c, v), touchdown - t, stance_zmp=p)
            assert result.status.ok
            first = first or result
            landing, touchdown = result.step, t + result.touchdown_in
            assert PLANNER.violations(stance, landing, tol=1e-6) == []
        h = min(dt, touchdown - t)
        c, v = LIPM.point_foot(c, v, p, h)
        t += h
    hull = support_polygon(
        [stance.pose.apply(PLANNER.soles[stance.side]), landing.pose.apply(PLANNER.soles[landing.side])]
    )
    xi_touchdown = LIPM.dcm(c, v)
    target = 0.5 * (centroid(stance.side, stance.pose) + centroid(landing.side, landing.pose))
    c, v = standing_law(c, v, hull, target, 3.0 - t)
    return {"c": c, "v": v, "xi_touchdown": xi_touchdown, "hull": hull, "first": first}


@pytest.mark.parametrize("velocity", [(0.7, 0.0), (-0.45, 0.0), (0.6, 0.3), (-0.4, -0.3), (0.5, -0.25)])
def test_a_step_from_the_dcm_captures_a_pushed_lipm(velocity: tuple[float, float]) -> None:
    # on both feet, the ankle strategy alone cannot stop this push: the DCM is beyond the support polygon
    stay = recover(np.array(velocity), step=False)
    assert np.linalg.norm(stay["v"]) > 1.0
    # one step placed (and timed) from the DCM stops it: the DCM lands inside the new support polygon
    run = recover(np.array(velocity), step=True)
    assert run["first"].captured
    assert inside_polygon(run["xi_touchdown"], run["hull"])
    assert np.linalg.norm(run["v"]) < 0.01
    assert inside_polygon(run["c"], run["hull"])


def test_timing_adaptation_and_limits() -> None:
    stance = Footstep("right", FEET["right"])
    nominal = Footstep("left", FEET["left"])
    c = centroid("right", FEET["right"]) + np.array([0.0, 0.05])
    adjuster = DcmStepAdjuster(PLANNER, LIPM)
    # a push far beyond one step's reach: the step goes to the limit and says it is limited
    result = adjuster.adjust(stance, nominal, LIPM.dcm(c, np.array([2.5, 0.0])), 0.3)
    rel = stance.pose.relative(result.step.pose)
    assert result.limited and not result.captured
    assert rel.x == pytest.approx(SPEC.step_forward, abs=1e-4)
    assert PLANNER.violations(stance, result.step, tol=1e-6) == []
    # it also steps sooner than planned: less time for the DCM to run away
    assert result.touchdown_in == pytest.approx(StepAdjustmentSettings().min_remaining, abs=1e-3)
    # with the timing fixed, the touchdown stays the planned one
    fixed = DcmStepAdjuster(PLANNER, LIPM, StepAdjustmentSettings(adapt_timing=False))
    assert fixed.adjust(
        stance, nominal, LIPM.dcm(c, np.array([0.3, 0.0])), 0.3
    ).touchdown_in == pytest.approx(0.3)
    # a DCM on its nominal course (it reaches the nominal step plus the nominal offset at the planned time)
    # keeps the nominal step and timing
    p = centroid("right", FEET["right"])
    b_nom = 0.5 * (stance.pose.position - nominal.pose.position)
    on_course = p + (nominal.pose.position + b_nom - p) * math.exp(-LIPM.omega * 0.3)
    calm = adjuster.adjust(stance, nominal, on_course, 0.3)
    assert np.allclose(calm.step.pose.position, nominal.pose.position, atol=1e-4)
    assert calm.touchdown_in == pytest.approx(0.3, abs=1e-4) and not calm.limited and calm.captured
    with pytest.raises(ValueError, match="non-finite"):
        adjuster.adjust(stance, nominal, np.array([math.nan, 0.0]), 0.3)


def test_nominal_offset_makes_a_periodic_gait() -> None:
    # starting a step with the nominal offset, the DCM at the next touchdown has the mirrored offset
    T, L, W = SPEC.single_support, 0.2, SPEC.foot_spacing
    u0, u1, u2 = Pose2D(0.0, -W / 2, 0.0), Pose2D(L, W / 2, 0.0), Pose2D(2 * L, -W / 2, 0.0)
    b0 = nominal_dcm_offset(u0, u1, T, LIPM.omega)
    b1 = nominal_dcm_offset(u1, u2, T, LIPM.omega)
    xi_end = u0.position + b0 * math.exp(LIPM.omega * T)
    assert np.allclose(xi_end, u1.position + b1)
    assert b1[0] == pytest.approx(b0[0]) and b1[1] == pytest.approx(-b0[1])
