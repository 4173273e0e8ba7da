"""``humanoid-report`` (issue 44, docs/recording.md): a bag -> a static HTML page, PNGs and ``summary.json``.

Fast tests (no graph): a small bag written with rosbags directly, without most topics: the report says which
plots are absent and does not crash; events are found and marked on the plots; a path that is not a bag (or a
killed, unrecovered recording) is refused with exit code 2; the operation record is rebuilt from
``/mode_manager/state``.

The slow test records a lockstep run (the learned policy walking under the mode manager, teleop from 3 s, a
push through ``/robot_driver/push`` and an e-stop through ``/mode_manager/estop`` at held ticks) through the
launch (``record:=``), then runs ``humanoid-report`` on the bag: the PNGs are there, non-empty, with a marker
drawn at each event (pixels of the event's colour in the marker's column), and ``summary.json`` has the shares
and event counts of the operation record the mode manager wrote (``mode_record:=``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

GRID = 0.02  # the probe's /teleop/cmd_vel grid (s of simulated time)
REPO = Path(__file__).resolve().parent.parent


def report_command() -> list[str]:
    script = Path(sys.executable).parent / "humanoid-report"
    return [str(script)] if script.exists() else [sys.executable, "-m", "humanoid_bringup.recording.report"]


def wait_until(what: Any, condition: Any, timeout: float, alive: Any = None) -> None:
    """Wait (wall time) for ``condition()``; ``what`` (a string, or a callable giving one) names it."""
    end = time.monotonic() + timeout
    while not condition():
        text = what() if callable(what) else what
        assert alive is None or alive(), f"stopped while waiting for {text}"
        assert time.monotonic() < end, f"timed out waiting for {text}"
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------------- the graph
def record_push_estop_run(out: Path, sim_s: float = 9.0) -> dict[str, Any]:
    """A lockstep run recorded through the launch: the policy under the mode manager (run_policy from the
    start), teleop 0.3 m/s forward from 3 s, a 4 N s push to the front at 5 s, the e-stop at 7 s; ``sim_s``
    of simulated time. Returns the bag path, the operation record path and the held ticks of the push and
    the e-stop (s)."""
    from geometry_msgs.msg import Twist
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    isolated_ros_env(out / "ros_logs")
    bag, record = out / "run_bag", out / "record.json"
    teleop: list[tuple[float, float, float] | None] = [None]
    pubs: dict[str, Any] = {}
    status: dict[str, Any] = {}

    def setup(node: Any) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        pubs["teleop"] = node.create_publisher(Twist, "/teleop/cmd_vel", 10)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(
            String, "/recorder/status", lambda m: status.update(json.loads(m.data)), latched
        )

    def on_tick(msg: Any) -> None:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        cmd = teleop[0]
        if cmd is not None and round(t * 1000.0) % round(GRID * 1000.0) == 0:
            tw = Twist()
            tw.linear.x, tw.linear.y, tw.angular.z = cmd
            pubs["teleop"].publish(tw)

    probe = GraphProbe(
        subscribe_description=False,
        name="report_probe",
        contacts=False,
        lockstep_peer=True,
        on_tick=on_tick,
        setup=setup,
        ack_period=GRID,
    )
    graph = LaunchedGraph(
        {
            "controller": "policy",
            "mode_manager": "true",
            "clock": "lockstep",
            "start_paused": "true",
            "sim_duration_s": f"{sim_s}",
            "record": str(bag),
            "mode_record": str(record),
        },
        out / "graph.log",
    ).start()
    try:
        node = probe.node
        wait_until(
            "the mode manager reading /teleop/cmd_vel",
            lambda: pubs["teleop"].get_subscription_count() >= 1,
            180.0,
            graph.running,
        )

        def not_recorded() -> list[str]:
            """Topics of the graph the recorder has not matched every publisher of yet."""
            matched = status.get("publishers", {})
            return [
                name
                for name, _types in node.get_topic_names_and_types()
                if not any(p.startswith("_") for p in name.split("/"))
                and name not in ("/rosout", "/parameter_events", "/recorder/status")
                and matched.get(name, 0) < node.count_publishers(name)
            ]

        wait_until(lambda: f"the recorder subscribed: {not_recorded()}", lambda: not not_recorded(), 120.0)
        probe.start_graph(peers=("policy_runner", "mode_manager"), running=graph.running, hold_at=3.0)
        probe.run_until(3.0)
        teleop[0] = (0.3, 0.0, 0.0)
        t_push = probe.run_until(5.0)
        probe.set_driver_parameters(
            [
                Parameter("push_force", Parameter.Type.DOUBLE_ARRAY, [40.0, 0.0, 0.0]),
                Parameter("push_duration_s", Parameter.Type.DOUBLE, 0.1),
            ]
        )
        ok, msg = probe.call_trigger("/robot_driver/push")
        assert ok, msg
        t_estop = probe.run_until(7.0)
        teleop[0] = None
        ok, msg = probe.call_trigger("/mode_manager/estop", timeout=30.0)
        assert ok, msg
        probe.release()
        code = graph.wait(600)
        assert code == 0, graph.log()[-3000:]
    finally:
        close_graph(probe, graph)
    # the push acts from the tick after the held one; the e-stop is taken at the held tick
    return {"bag": bag, "record": record, "t_push": t_push, "t_estop": t_estop}


# ---------------------------------------------------------------------------------------------- helpers
def load_png(path: Path) -> np.ndarray:
    """RGB pixels (h, w, 3) of a PNG, uint8."""
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert image is not None, f"{path} is not a readable image"
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def marker_pixels(image: np.ndarray, marker: dict[str, Any], color: tuple[int, int, int]) -> int:
    """Pixels of ``color`` (within 40 per channel) in the marker's column (+-2 px) between its axes' rows."""
    x = round(marker["x"])
    y0, y1 = int(marker["y0"]) + 2, int(marker["y1"]) - 2
    patch = image[y0:y1, max(0, x - 2) : x + 3].astype(int)
    close = np.all(np.abs(patch - np.array(color)) <= 40, axis=2)
    return int(close.any(axis=1).sum())


def check_markers(report: Path, summary: dict[str, Any]) -> dict[str, list[float]]:
    """Every figure: a non-empty PNG of the size the summary gives, and at each marker's column the colour of
    the most important event kind at that time along most of its axes' height (the line is drawn above the
    data), where columns away from any event have none of it. Returns the event times marked per figure."""
    from humanoid_bringup.recording.report_events import EVENT_KINDS
    from humanoid_bringup.recording.report_plots import EVENT_COLORS

    marked = {}
    for name, fig in summary["figures"].items():
        image = load_png(report / fig["file"])
        assert (image.shape[1], image.shape[0]) == tuple(fig["size_px"]), name
        assert image.std() > 5.0, f"{name}: a blank image"
        # markers within 3 px of each other on one axes share a column: the most important kind is on top
        by_column: dict[tuple[int, float, float], list[str]] = {}
        for m in sorted(fig["markers"], key=lambda m: (m["y0"], m["x"])):
            near = [k for k in by_column if k[1:] == (m["y0"], m["y1"]) and abs(k[0] - m["x"]) <= 3]
            key = near[0] if near else (round(m["x"]), m["y0"], m["y1"])
            by_column.setdefault(key, []).append(m["kind"])
        for (x, y0, y1), kinds in by_column.items():
            top = min(kinds, key=EVENT_KINDS.index)
            marker = {"x": x, "y0": y0, "y1": y1}
            found = marker_pixels(image, marker, EVENT_COLORS[top])
            assert found >= 0.6 * (y1 - y0 - 4), (name, top, x, found, y1 - y0)
            # the same rows 25 px beside it, away from every marker: no line of that colour there
            xs = [k[0] for k in by_column]
            away = next((x + d for d in (25, -25, 40, -40) if all(abs(x + d - o) > 6 for o in xs)), None)
            if away is not None:
                assert marker_pixels(image, {**marker, "x": away}, EVENT_COLORS[top]) < 0.3 * (y1 - y0), name
        marked[name] = fig["events_marked"]
    return marked


# ---------------------------------------------------------------------------------------------- fast
def write_small_bag(path: Path, killed: bool = False, walking: bool = False) -> None:
    """A bag written with rosbags alone: 4 s of simulated time with /clock, /cmd_vel, the driver's mode
    (ramp, hold, active, then damping at 3 s), a push at 1.5 s, the driver loop's diagnostics (a WARN with
    overruns, an ERROR once damping); no mode manager, ground truth, joint states or contacts. ``killed``:
    written by the recorder's writer core, flushed, then left as a SIGKILL leaves it (no summary, no
    ``metadata.yaml``). ``walking``: with a walking controller's ``/walking/status`` (CoM, DCM, ZMP), 50 Hz.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    T = store.types

    def stamp(t: float) -> Any:
        return T["builtin_interfaces/msg/Time"](sec=int(t), nanosec=round((t - int(t)) * 1e9))

    def header(t: float, frame: str = "") -> Any:
        return T["std_msgs/msg/Header"](stamp=stamp(t), frame_id=frame)

    vec = T["geometry_msgs/msg/Vector3"]
    types = {
        "/clock": "rosgraph_msgs/msg/Clock",
        "/cmd_vel": "geometry_msgs/msg/Twist",
        "/robot_driver/mode": "std_msgs/msg/String",
        "/sim/push": "geometry_msgs/msg/WrenchStamped",
        "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    }
    out: list[tuple[float, str, Any]] = []
    for k in range(0, 401):
        t = k * 0.01
        out.append((t, "/clock", T["rosgraph_msgs/msg/Clock"](clock=stamp(t))))
        if k % 10 == 0:
            v = 0.3 if 1.0 <= t < 3.0 else 0.0
            out.append(
                (
                    t,
                    "/cmd_vel",
                    T["geometry_msgs/msg/Twist"](
                        linear=vec(x=v, y=0.0, z=0.0), angular=vec(x=0.0, y=0.0, z=0.1)
                    ),
                )
            )
        if k % 100 == 0 and k > 0:
            damping = t > 3.0
            values = {
                "mode": "damping" if damping else "active",
                "overruns": str(3 * k),
                "ticks": str(5 * k),
                "clock": "realtime",
                "respawns": "0",
            }
            status = T["diagnostic_msgs/msg/DiagnosticStatus"](
                level=2 if damping else 1,
                name="robot_driver: loop",
                message="damping: e-stop" if damping else "active, overruns",
                hardware_id="g1/mujoco",
                values=[T["diagnostic_msgs/msg/KeyValue"](key=a, value=b) for a, b in values.items()],
            )
            out.append(
                (
                    t,
                    "/diagnostics",
                    T["diagnostic_msgs/msg/DiagnosticArray"](header=header(t), status=[status]),
                )
            )
    if walking:
        types["/walking/status"] = "std_msgs/msg/Float64MultiArray"
        labels = "t,com_x,com_y,dcm_x,dcm_y,zmp_x,zmp_y,contact_left,contact_right,walking"
        dim = T["std_msgs/msg/MultiArrayDimension"](label=labels, size=10, stride=10)
        for k in range(0, 200):
            t = k * 0.02
            row = [t, 0.1 * t, 0.02, 0.1 * t + 0.03, 0.04, 0.1 * t, -0.05, 1.0, 1.0, 1.0]
            layout = T["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
            msg = T["std_msgs/msg/Float64MultiArray"](layout=layout, data=np.array(row))
            out.append((t, "/walking/status", msg))
    for t, mode in ((0.0, "ramp"), (0.5, "hold"), (1.0, "active"), (3.0, "damping")):
        out.append((t, "/robot_driver/mode", T["std_msgs/msg/String"](data=mode)))
    wrench = T["geometry_msgs/msg/Wrench"]
    for t, fx in ((1.5, 50.0), (1.6, 0.0)):
        msg = T["geometry_msgs/msg/WrenchStamped"](
            header=header(t, "world"),
            wrench=wrench(force=vec(x=fx, y=0.0, z=0.0), torque=vec(x=0.0, y=0.0, z=0.0)),
        )
        out.append((t, "/sim/push", msg))
    rows = [(round(t * 1e9), topic, bytes(store.serialize_cdr(msg, types[topic]))) for t, topic, msg in out]
    rows.sort(key=lambda r: r[0])
    if killed:
        from humanoid_bringup.recording.bag_writer import BagWriter

        core = BagWriter(path, typestore=store)
        topics = {name: core.add_topic(name, msgtype) for name, msgtype in types.items()}
        for t_ns, topic, data in rows:
            core.write(topics[topic], t_ns, data)
        core.flush()
        core.abort()
        return
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    conns = {name: writer.add_connection(name, msgtype, typestore=store) for name, msgtype in types.items()}
    for t_ns, topic, data in rows:
        writer.write(conns[topic], t_ns, data)
    writer.set_custom_data("time_base", "sim")
    writer.close()


def run_report(bag: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*report_command(), str(bag), "--out", str(out), *extra], capture_output=True, text=True, timeout=600
    )


def test_a_bag_without_most_topics_gives_the_plots_it_can_and_says_what_is_absent(tmp_path: Path) -> None:
    bag, out = tmp_path / "small_bag", tmp_path / "report"
    write_small_bag(bag)
    proc = run_report(bag, out)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["figures"]) == {"velocity", "control", "loop", "diagnostics"}, summary["absent"]
    assert set(summary["absent"]) == {"contacts", "balance"}
    assert "/sim/ground_truth" in summary["absent"]["balance"]
    assert summary["frames"] == [] and "ground truth" in summary["frames_absent"]
    assert summary["shares"] is None and summary["counts"] is None and summary["operation_record"] is None
    assert summary["topics"]["/clock"] == {"type": "rosgraph_msgs/msg/Clock", "count": 401}
    assert summary["duration_s"] == pytest.approx(4.0)
    events = [(e["t"], e["kind"]) for e in summary["events"]]
    assert events == [(pytest.approx(1.5), "push"), (pytest.approx(3.0), "damping")], events
    assert summary["event_counts"] == {"push": 1, "damping": 1}
    marked = check_markers(out, summary)
    assert all(m == [pytest.approx(1.5), pytest.approx(3.0)] for m in marked.values()), marked
    page = (out / "index.html").read_text()
    for name in ("velocity.png", "control.png", "loop.png", "diagnostics.png", "summary.json"):
        assert f"'{name}'" in page
    assert (
        "Not in this bag: no contact wrenches" in page and "Not in this bag: no /mode_manager/state" in page
    )
    assert not (out / "contacts.png").exists() and not (out / "balance.png").exists()


def test_without_ground_truth_the_balance_figure_is_the_walking_controllers_status(tmp_path: Path) -> None:
    bag, out = tmp_path / "walk_bag", tmp_path / "report"
    write_small_bag(bag, walking=True)
    assert run_report(bag, out).returncode == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["absent"]) == {"contacts"}, summary["absent"]
    assert summary["figures"]["balance"]["title"] == "CoM, DCM and ZMP (from /walking/status)"
    check_markers(out, summary)


def test_a_path_that_is_not_a_bag_is_refused_with_exit_code_2(tmp_path: Path) -> None:
    cases = {
        "missing": tmp_path / "nothing_here",
        "file": tmp_path / "notes.txt",
        "folder": tmp_path / "empty",
    }
    cases["file"].write_text("not a bag")
    cases["folder"].mkdir()
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "killed.mcap").write_bytes(b"\x89MCAP0\r\n")  # what a killed recording leaves: no metadata.yaml
    cases["killed"] = killed
    for what, path in cases.items():
        proc = run_report(path, tmp_path / f"out_{what}")
        assert proc.returncode == 2, (what, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("humanoid-report: error: "), (what, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert not (tmp_path / f"out_{what}").exists(), what
    assert "humanoid-record --recover" in run_report(killed, tmp_path / "o").stderr
    bag = tmp_path / "bag"
    write_small_bag(bag)
    proc = run_report(bag, bag / "report")  # a report folder inside the bag would spoil the bag
    assert proc.returncode == 2 and "inside the bag" in proc.stderr, proc.stderr


def test_a_killed_recording_is_reported_once_recovered(tmp_path: Path) -> None:
    from humanoid_bringup.recording.recovery import recover_bag

    killed, complete = tmp_path / "killed_bag", tmp_path / "complete_bag"
    write_small_bag(killed, killed=True)
    write_small_bag(complete)
    proc = run_report(killed, tmp_path / "refused")
    assert proc.returncode == 2 and f"humanoid-record --recover {killed}" in proc.stderr, proc.stderr
    assert recover_bag(killed).messages == 401 + 41 + 4 + 2 + 4
    for bag in (killed, complete):
        assert run_report(bag, tmp_path / f"{bag.name}_report").returncode == 0
    got, want = (
        json.loads((tmp_path / f"{b.name}_report" / "summary.json").read_text()) for b in (killed, complete)
    )
    assert got["topics"] == want["topics"] and got["events"] == want["events"]
    assert set(got["figures"]) == set(want["figures"]) == {"velocity", "control", "loop", "diagnostics"}
    assert got["recorder"].get("recovered") == "true"


def _states(
    rows: list[tuple[float, str, str, dict[str, int]]], record: bool
) -> list[tuple[float, dict[str, Any]]]:
    """Mode manager states (t, mode, source, counts) as /mode_manager/state gives them; with ``record``
    the operation record so far, as the mode manager accounts it (shares up to t)."""
    out = []
    shares = {"teleop": 0.0, "autonomy": 0.0, "idle": 0.0}
    last_t, last_source = rows[0][0], "idle"
    for t, mode, source, counts in rows:
        shares[last_source] += t - last_t
        last_t, last_source = t, {"none": "idle"}.get(source, source)
        st: dict[str, Any] = {
            "t": t,
            "mode": mode,
            "source": source,
            "autonomy": source == "autonomy",
            "counts": {
                "estops": counts.get("estops", 0),
                "falls": 0,
                "respawns": 0,
                "takeovers": counts.get("takeovers", 0),
                "switches": 1,
                "refusals": 0,
                "mode_changes": counts.get("mode_changes", 0),
            },
            "last_event": None,
        }
        if record:
            st["record"] = {
                "start_t": rows[0][0],
                "end_t": t,
                "shares_s": dict(shares),
                "modes_s": {},
                "counts": {"faults": counts.get("faults", 0), "estops": counts.get("estops", 0)},
            }
        out.append((t, st))
    return out


def test_the_operation_record_from_the_mode_manager_states() -> None:
    from humanoid_bringup.recording.report_bag import RunData
    from humanoid_bringup.recording.report_events import find_events, operation_record

    rows = [
        (0.0, "boot", "none", {}),
        (1.0, "hold", "none", {"mode_changes": 1}),
        (2.0, "run_policy", "none", {"mode_changes": 2}),
        (3.0, "run_policy", "autonomy", {"mode_changes": 2}),
        (5.0, "run_policy", "teleop", {"mode_changes": 2, "takeovers": 1}),
        (6.0, "damp", "none", {"mode_changes": 3, "estops": 1, "faults": 1}),
    ]
    for record in (True, False):
        run = RunData(
            path=Path("x"),
            topics={},
            start_s=0.0,
            end_s=8.0,
            origin_ns=0,
            time_base="sim",
            mm_states=_states(rows, record),
            last_clock_s=8.0,
        )
        rec = operation_record(run)
        assert rec is not None and rec["exact"] is record
        # idle 0-3 s and 6-8 s (carried on to the run's last /clock), autonomy 3-5 s, teleop 5-6 s
        assert rec["shares_s"] == {"teleop": 1.0, "autonomy": 2.0, "idle": 5.0}
        assert rec["shares"] == {"teleop": 0.125, "autonomy": 0.25, "idle": 0.625}
        kinds = [(e.t, e.kind) for e in find_events(run)]
        # at one time the more important kinds first; faults only where the state carries the record's counts
        fault = [(6.0, "fault")] if record else []
        assert kinds == [
            (1.0, "mode"),
            (2.0, "mode"),
            (5.0, "takeover"),
            (6.0, "estop"),
            *fault,
            (6.0, "mode"),
        ]
        if not record:
            assert rec["counts"]["source_switches"] == 3 and rec["counts"]["autonomy_changes"] == 2
            assert rec["counts"]["estops"] == 1 and rec["counts"]["controller_switches"] == 1


# ---------------------------------------------------------------------------------------------- slow
@pytest.mark.slow
def test_report_of_a_recorded_run_with_a_push_and_an_estop(tmp_path: Path) -> None:
    """The report of a recorded lockstep run (module docstring): every figure written with the push and the
    e-stop marked, frames rendered at them, and summary.json with the operation record's shares and counts
    (as the mode manager wrote them at shutdown) and the bag's topics and counts."""
    import yaml

    run = record_push_estop_run(tmp_path)
    out = tmp_path / "report"
    proc = run_report(run["bag"], out)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    record = json.loads(run["record"].read_text())

    # the operation record: the same shares and counts as the mode manager's own
    assert summary["counts"] == record["counts"], (summary["counts"], record["counts"])
    for share, value in record["shares"].items():
        assert summary["shares"][share] == pytest.approx(value, abs=0.002), (
            summary["shares"],
            record["shares"],
        )
    # (seconds: the report carries the record on to the bag's last /clock, which may lack the run's last ticks
    # where the recorder did not take them before it stopped)
    for share, value in record["shares_s"].items():
        assert summary["operation_record"]["shares_s"][share] == pytest.approx(value, abs=0.05)
    assert record["counts"]["estops"] == 1 and record["shares"]["teleop"] > 0.3

    # events: the push and the e-stop at their ticks, the mode changes and falls as the record counts them
    events = summary["events"]
    pushes = [e["t"] for e in events if e["kind"] == "push"]
    estops = [e["t"] for e in events if e["kind"] == "estop"]
    assert pushes == [pytest.approx(run["t_push"], abs=0.005)], events
    assert estops == [pytest.approx(run["t_estop"], abs=0.005)], events
    assert summary["event_counts"].get("mode", 0) == record["counts"]["mode_changes"]
    assert summary["event_counts"].get("fall", 0) == record["counts"]["falls"]
    assert summary["event_counts"].get("fault", 0) == record["counts"]["faults"]

    # every figure, each with every event marked (the push and the e-stop among them) and drawn
    assert set(summary["figures"]) == {"velocity", "control", "contacts", "balance", "loop", "diagnostics"}, (
        summary["absent"]
    )
    marked = check_markers(out, summary)
    for name, times in marked.items():
        assert times == [pytest.approx(e["t"]) for e in events], name
        assert any(abs(t - pushes[0]) < 1e-6 for t in times) and any(abs(t - estops[0]) < 1e-6 for t in times)

    # frames of the robot at the push and the e-stop
    kinds = {f["kind"]: f for f in summary["frames"]}
    assert {"push", "estop"} <= set(kinds), summary["frames"]
    for frame in summary["frames"]:
        image = load_png(out / frame["file"])
        assert image.shape == (360, 480, 3) and image.std() > 10.0, frame

    # topics and message counts as the bag's metadata lists them
    meta = yaml.safe_load((run["bag"] / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    listed = {e["topic_metadata"]["name"]: e for e in meta["topics_with_message_count"]}
    assert summary["topics"] == {
        n: {"type": e["topic_metadata"]["type"], "count": e["message_count"]} for n, e in listed.items()
    }
    assert summary["message_count"] == meta["message_count"]
    assert float(summary["recorder"]["recorder_cpu_pct"]) > 0.0
    page = (out / "index.html").read_text()
    assert all(f"src='{f['file']}'" in page for f in summary["figures"].values())
    assert "Not in this bag" not in page.split("<h2>Topics</h2>")[0].split("Frames at the events")[0]
