"""State estimator in the ROS graph: ``humanoid-eval estimator``'s runs, shortened for CI.

Driver (MEMS IMU noise), policy runner and estimator in separate processes, lockstep: standing 6 s, walking,
and walking over a low-friction patch; ``/odom`` and ``/contacts/*`` scored against the simulator's truth with
the issue's thresholds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from humanoid_bringup.evaluation.estimator_eval import DEFAULT_PATCH, run_estimator_eval

pytestmark = pytest.mark.slow

# stand, forward (about 4 m), turn and stop: 16 s
SHORT_WALK = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    ("forward", 8.0, (0.5, 0.0, 0.0)),
    ("turn", 4.0, (0.0, 0.0, 0.5)),
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]
# the patch run: stand, forward across the patch's x range (1.5-3.0 m) and beyond, stop: 11 s
PATCH_WALK = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    ("forward", 8.0, (0.5, 0.0, 0.0)),
    ("stop", 1.0, (0.0, 0.0, 0.0)),
]


def test_estimator_standing_walking_and_slipping_within_the_issue_thresholds(tmp_path: Path) -> None:
    res = run_estimator_eval(
        tmp_path, script=SHORT_WALK, stand_s=6.0, friction_patch=DEFAULT_PATCH, patch_script=PATCH_WALK
    )
    print(res)
    assert not res["fell"]
    assert res["roll_pitch_rmse_deg"] <= 0.5
    assert res["lin_vel_rmse_mps"] <= 0.05
    assert res["height_rmse_m"] <= 0.01
    assert res["xy_drift_pct"] <= 2.0
    assert min(res["contact_agreement"].values()) >= 0.95
    assert res["standing_xy_drift_m"] <= 0.01
    assert res["diagnostics"]["imu_dropped"] == "0" and res["diagnostics"]["joint_states_dropped"] == "0"
    patch = res["low_friction_patch"]
    assert not patch["fell"]
    assert patch["ticks_on_patch"] > 500
    assert patch["lin_vel_rmse_mps_on_patch"] <= 0.1
    # the slip shows in the diagnostics: more slip per second on the patch than off it
    assert patch["slip_ticks_per_s_on_patch"] > patch["slip_ticks_per_s_off_patch"]
    assert (tmp_path / "estimator_walk.png").stat().st_size > 10_000
    assert (tmp_path / "estimator_patch.png").stat().st_size > 10_000
