"""The head camera and the perception node in realtime, beside a 500 Hz driver: separate processes over DDS,
real MuJoCo rendering, OpenCV detection.

The driver holds the robot standing (no controller) in the ``markers`` scene; marker 0 lies on the floor
1.8 m ahead, in view. In realtime the camera renders the latest state on a wall-clock timer and drops frames
when it falls behind, never the driver's loop (another process): the driver stays in ``hold`` (no watchdog,
no damping), the perception node reports the marker in ``odom`` where the scene put it (the estimator's
``odom`` starts at the robot's spawn pose, the world origin), and every frame is either a detection or an
explicit error, never lost silently (a frame whose robot state did not arrive in time still carries the
marker in the camera frame). The share of frames with the marker in ``odom`` is printed (``-s``) for the
docs; only behaviour is asserted, no timing."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

pytestmark = pytest.mark.slow

MARKER_0 = np.array([1.8, 0.0, 0.0])  # config/scenes/markers.yaml


def test_realtime_camera_and_perception_see_the_marker_and_never_hold_the_loop(tmp_path: Path) -> None:
    isolated_ros_env(tmp_path / "ros_logs")
    args = {
        "controller": "none",  # the driver holds the default pose
        "perception": "true",
        "scene": "markers",
        "clock": "realtime",
        "start_paused": "true",
        "camera_rate_hz": "5.0",
        "camera_depth": "false",
        "sim_duration_s": "600.0",
    }
    graph = LaunchedGraph(args, tmp_path / "graph.log")
    lock = threading.Lock()
    detections: list[dict[str, Any]] = []
    camera_diag: list[dict[str, str]] = []

    def setup(node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import String

        def on_det(msg: Any) -> None:
            with lock:
                detections.append(json.loads(msg.data))

        def on_diag(msg: Any) -> None:
            for st in msg.status:
                if "camera" in st.name:
                    with lock:
                        camera_diag.append({kv.key: kv.value for kv in st.values})

        node.create_subscription(String, "/perception/detections", on_det, 100)
        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)

    probe = GraphProbe(
        subscribe_description=False, name="perception_rt", contacts=False, reliable_streams=False, setup=setup
    )
    try:
        graph.start()
        probe.start_graph(running=graph.running, timeout=180.0)
        # 40 frames once the driver holds (2 s boot ramp); at most 10 minutes of wall time (a loaded machine)
        end = time.monotonic() + 600.0
        while True:
            with lock:
                n = sum(1 for d in detections if d["stamp"] >= 2.5)
            if n >= 40 or time.monotonic() > end or not graph.running():
                break
            time.sleep(0.1)
        modes = list(probe.data.modes)
        with lock:
            frames = [d for d in detections if d["stamp"] >= 2.5]
            cam = list(camera_diag)
        log = graph.log_path.read_text(errors="replace")
    finally:
        close_graph(probe, graph)

    assert len(frames) >= 40, f"{len(frames)} frames; see {tmp_path / 'graph.log'}"
    # every frame is accounted for: the marker, or an error with its reason (e.g. no robot state at the stamp)
    assert all(d["status"] == "ok" or d["error"] for d in frames)
    assert all(d["status"] in ("ok", "error") for d in frames)
    # the marker is detected in the camera frame, with or without the robot state of the frame's stamp; a
    # frame without that state (the estimator process behind: on a loaded 2-core machine it lagged 0.5-1.5 s
    # behind the camera, which renders in software) still carries its camera-frame detections
    detected = [d for d in frames if any(m["id"] == 0 for m in d["markers"])]
    assert len(detected) >= 10, (len(detected), len(frames))
    in_camera = np.array([next(m for m in d["markers"] if m["id"] == 0)["position_camera"] for d in detected])
    # the robot holds still: the same marker position in the camera frame, 1.8 m ahead on the floor (range
    # from the head camera about 2.1 m)
    assert np.ptp(in_camera, axis=0).max() < 0.05, in_camera
    assert 1.8 < float(np.linalg.norm(in_camera.mean(axis=0))) < 2.6, in_camera.mean(axis=0)
    seen = [d for d in detected if d["status"] == "ok"]
    errors = [d for d in frames if d["status"] != "ok"]
    share = len(seen) / len(frames)
    reasons = sorted({d["error"].split(":")[0] for d in errors})
    print(f"\nrealtime: {len(seen)} of {len(frames)} frames with marker 0 in odom ({share:.2f}), {reasons}")
    assert set(reasons) <= {"state"}, reasons
    # with the state of its stamp (nearest /odom within state_tolerance_s), the marker in odom where the
    # scene put it: measured 0.046-0.049 m off on an idle machine (the estimator's odom against the world: a
    # steady offset of the standing robot's estimate) and up to 0.10 m on a loaded one
    odom_err = [
        float(np.linalg.norm(np.array(m["position_odom"]) - MARKER_0))
        for d in seen
        for m in d["markers"]
        if m["id"] == 0
    ]
    if odom_err:
        print(f"marker 0 in odom: {min(odom_err):.3f}-{max(odom_err):.3f} m from where the scene put it")
    assert all(e < 0.12 for e in odom_err), odom_err
    # the stamps increase: frames are dropped when rendering falls behind, never repeated or reordered
    stamps = [d["stamp"] for d in frames]
    assert all(b > a for a, b in itertools.pairwise(stamps))
    # the driver's loop was never held by the camera or perception: it held the robot all along
    assert modes and modes[-1] == "hold", modes
    assert "damping" not in modes and "mode -> damping" not in log, modes
    # the camera reports its dropped frames
    assert cam and "dropped_frames" in cam[-1], cam[-1:] or "no camera diagnostics"
    print(f"camera: {cam[-1].get('frames')} frames, {cam[-1].get('dropped_frames')} dropped")
