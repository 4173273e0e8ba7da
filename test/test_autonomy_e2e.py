"""The marker-approach task end to end: driver (MuJoCo), learned policy under the mode manager, state
estimator, simulated head camera, perception and autonomy nodes in separate processes over DDS, lockstep.

From one start pose (the marker out of view, 60 deg to the left) the robot finds the marker, walks to the
standoff pose and stops there (ground truth); the operation record shows autonomy and no teleop. Then, in
the same graph: a bad image on the camera topic gives a perception diagnostics error, the perception node
keeps running, and a task started at that moment aborts with a zero velocity command."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.evaluation.autonomy_eval import SCENE, run_once
from humanoid_bringup.evaluation.launched_graph import isolated_ros_env
from humanoid_control.hardware.scene import load_scene
from humanoid_perception.autonomy.approach import standoff_pose

pytestmark = pytest.mark.slow


def _bad_image_check(probe: Any, graph: Any, watch: Any) -> dict[str, Any]:
    """At the held tick: start the task again, publish a frame with a wrong encoding, watch what follows."""
    from sensor_msgs.msg import Image

    from humanoid_control.ros.node_utils import to_time_msg

    t = probe.sim_time()
    with watch.lock:
        n_det, n_cmd, n_diag = len(watch.detections), len(watch.cmd_vel), len(watch.perception_diag)
    ok, why = probe.call_trigger("/autonomy_node/start", timeout=30.0)
    assert ok, why
    pub = probe.node.create_publisher(Image, "/camera/color/image_raw", 10)
    end = time.monotonic() + 10.0
    while pub.get_subscription_count() < 1:
        assert time.monotonic() < end, "the perception node's image subscription is not matched"
        time.sleep(0.01)
    bad = Image()
    bad.header.stamp = to_time_msg(t)
    bad.header.frame_id = "head_camera_optical_frame"
    bad.height, bad.width, bad.encoding, bad.step = 240, 424, "yuv422", 848
    bad.data = bytes(848 * 240)
    pub.publish(bad)
    end = time.monotonic() + 30.0
    while time.monotonic() < end:
        with watch.lock:
            outcome = watch.outcome
        if outcome is not None and outcome.get("phase") == "aborted":
            break
        time.sleep(0.05)
    probe.run_until(
        t + 0.3, timeout=120.0
    )  # the graph runs on (a frame due in any 0.2 s): perception goes on
    end = time.monotonic() + 10.0
    while time.monotonic() < end:  # the diagnostics' 1 Hz timer (wall time)
        with watch.lock:
            diags = watch.perception_diag[n_diag:]
        if any(level == 2 for level, _, _ in diags):
            break
        time.sleep(0.05)
    with watch.lock:
        return {
            "outcome": dict(watch.outcome or {}),
            "detections": watch.detections[n_det:],
            "cmd_vel": watch.cmd_vel[n_cmd:],
            "diags": watch.perception_diag[n_diag:],
            "running": graph.running(),
            "t": t,
        }


def test_autonomy_reaches_the_marker_and_stops_on_a_bad_image(tmp_path: Path) -> None:
    isolated_ros_env(tmp_path / "ros_logs")
    marker = load_scene(SCENE).markers[0]
    goal = standoff_pose(np.array(marker.position), marker.rotation, 0.5)
    # 1.3 m in front of the marker, facing 60 deg to its right: the marker is out of view, to the left
    start = (float(marker.position[0]) - 1.3, 0.0, -math.radians(60.0))
    r = run_once(
        start, goal, tmp_path, start_at_s=2.8, settle_s=1.0, task_timeout_s=40.0, on_reached=_bad_image_check
    )

    task = r["task"]
    assert task["phase"] == "reached", task
    assert not r["marker_seen_at_start"] and task["t_first_seen"] > task["t_start"]
    assert r["position_error_m"] <= 0.3 and r["heading_error_deg"] <= 15.0, r
    assert r["reached"] and not r["fell"]
    # the operation record: autonomy switched on, no teleop afterwards, no takeover
    assert r["autonomy_on_t"] is not None and r["teleop_share"] == 0.0
    assert r["record_counts"]["takeovers"] == 0 and r["record_shares"]["autonomy"] > 0.0

    check = r["check"]
    # the bad frame: an error detection with the reason, a diagnostics ERROR, and the node kept going
    errors = [d for d in check["detections"] if d[1] == "error"]
    assert errors and "unsupported encoding 'yuv422'" in errors[0][2], check["detections"]
    assert any(s == "ok" and t > check["t"] for t, s, _ in check["detections"]), check["detections"]
    assert any(level == 2 and "yuv422" in msg for level, msg, _ in check["diags"]), check["diags"]
    assert check["running"]
    # the task started at that frame aborted on the perception error with a zero command
    assert check["outcome"]["phase"] == "aborted" and "perception error" in check["outcome"]["reason"]
    assert check["cmd_vel"] and check["cmd_vel"][-1] == (0.0, 0.0, 0.0)
