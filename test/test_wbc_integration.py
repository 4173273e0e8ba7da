"""WBC through the ROS graph (driver, state estimator, WBC node as separate processes, lockstep): stands 10 s
on the estimator's /odom with the CoM within 1 cm RMS of its reference (ground truth), then survives a push of
60 % of the LIPM bound to the left through the driver's push service."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from humanoid_bringup.evaluation.push_eval import run_trial
from humanoid_bringup.evaluation.wbc_graph import Kinematics, WbcGraph
from humanoid_control.model.robot_config import load_robot_config
from humanoid_control.wbc.balance import push_impulse_bounds

pytestmark = pytest.mark.slow


def test_wbc_stands_and_survives_a_push_through_the_graph(tmp_path: Path) -> None:
    config = load_robot_config("g1")
    kin = Kinematics(config)
    g = WbcGraph(tmp_path, sim_duration_s=120.0)
    markers: list[int] = []
    try:
        from visualization_msgs.msg import MarkerArray

        g.probe.node.create_subscription(
            MarkerArray, "/wbc/markers", lambda m: markers.append(len(m.markers)), 10
        )
    except ImportError:
        MarkerArray = None
    wbc_diag: list[dict[str, str]] = []
    from diagnostic_msgs.msg import DiagnosticArray

    g.probe.node.create_subscription(
        DiagnosticArray,
        "/diagnostics",
        lambda m: wbc_diag.extend(
            {kv.key: kv.value for kv in s.values} for s in m.status if s.name == "wbc_controller"
        ),
        10,
    )
    try:
        g.start()
        t0 = g.probe.sim_time()
        g.run_to(t0 + 10.0)
        truth = g.truth_since(t0)
        with g.lock:
            joints = dict(g.joints)
        assert g.probe.data.modes[-1] == "active", g.probe.data.modes
        stamps = [t for t in sorted(truth) if t in joints and t <= t0 + 10.0][::5]
        err = [np.linalg.norm((r := kin.evaluate(*truth[t], *joints[t]))[0][:2] - r[3]) for t in stamps]
        rms = float(np.sqrt(np.mean(np.square(err))))
        print(f"standing 10 s: CoM error RMS {rms * 100:.2f} cm over {len(stamps)} samples")
        assert len(stamps) > 900
        assert rms < 0.01
        bound = push_impulse_bounds(config, kin.pmodel)["left"]["bound_Ns"]
        trial = run_trial(g, kin, "left", 0.6 * bound, config)
        print(f"push left {trial.impulse:.2f} N s: {trial.reason}")
        assert trial.survived, trial.reason
        assert len(g.push_events) == 2 and g.push_events[1][0] - g.push_events[0][0] == pytest.approx(
            0.1, abs=1e-6
        )
    finally:
        g.stop()
    assert wbc_diag, "no wbc_controller diagnostics"
    assert wbc_diag[-1]["state"] == "run" and int(wbc_diag[-1]["qp_solved"]) > 4000
    if MarkerArray is not None:
        assert markers and markers[-1] >= 7
