"""The browser console (humanoid-console): its pure parts (drive limits, NaN, deadman, one driver, token
checks), the token gate over real sockets, and, as a person uses it, the whole console in headless Chromium
(Debian's, driven by Playwright) against a launched graph (driver, policy runner, mode manager; lockstep)."""

from __future__ import annotations

import io
import json
import math
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanoid_bringup.console.access import COOKIE, authorize, check_binding, is_loopback, parse_request_head
from humanoid_bringup.console.drive import (
    DriveControl,
    DriveLimits,
    DriveSettings,
    SliderError,
    drive_command,
)
from humanoid_bringup.console.gate import TokenGate
from humanoid_bringup.console.status import ConsoleStatus

LIMITS = DriveLimits(vx_max=0.8, vx_min=-0.5, wz_max=1.0)


# ---------------------------------------------------------------------------------------------- pure parts
def test_slider_values_nan_refused_and_out_of_range_clamped() -> None:
    assert drive_command(0.3, -0.2, LIMITS) == (0.3, -0.2)
    assert drive_command(5.0, 9.0, LIMITS) == (0.8, 1.0)
    assert drive_command(-5.0, -9.0, LIMITS) == (-0.5, -1.0)
    for bad in (math.nan, math.inf, -math.inf, "x", None):
        with pytest.raises(SliderError):
            drive_command(bad, 0.0, LIMITS)  # type: ignore[arg-type]
        with pytest.raises(SliderError):
            drive_command(0.1, bad, LIMITS)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DriveLimits(vx_max=math.nan)
    with pytest.raises(ValueError):
        DriveSettings(deadman_s=0.01)


def test_drive_control_deadman_release_disconnect_and_one_driver() -> None:
    drive = DriveControl(DriveSettings(rate_hz=20.0, hold_hz=20.0, deadman_s=0.3, zero_ticks=2), LIMITS)
    assert drive.tick(0.0) is None  # idle: silent
    assert drive.hold(1, 0.0, 0.5, 0.1) is None
    assert drive.tick(0.05) == (0.5, 0.1)
    # a second page is refused while the first drives: commands are not multiplied
    reason = drive.hold(2, 0.06, 0.8, 0.0)
    assert reason is not None and "another console page" in reason
    assert drive.tick(0.1) == (0.5, 0.1)
    # NaN from the driving page: refused, and its driving stops (zeros follow)
    assert drive.hold(1, 0.12, math.nan, 0.0) is not None
    assert drive.tick(0.15) == (0.0, 0.0) and drive.tick(0.2) == (0.0, 0.0) and drive.tick(0.25) is None
    # out of range: clamped
    assert drive.hold(1, 0.3, 3.0, -3.0) is None
    assert drive.tick(0.31) == (0.8, -1.0)
    # release: zeros, then silence
    assert drive.release(2) is False and drive.release(1) is True
    assert [drive.tick(0.35 + 0.05 * i) for i in range(3)] == [(0.0, 0.0), (0.0, 0.0), None]
    # deadman: no hold tick for longer than deadman_s
    assert drive.hold(2, 1.0, 0.4, 0.0) is None
    assert drive.tick(1.29) == (0.4, 0.0)
    assert drive.tick(1.31) == (0.0, 0.0) and drive.stops["deadman"] == 1 and drive.driver is None
    # disconnect
    assert drive.hold(1, 2.0, 0.4, 0.0) is None
    assert drive.disconnect(1) and drive.tick(2.01) == (0.0, 0.0)
    assert drive.stops == {"release": 2, "disconnect": 1, "deadman": 1}


def test_binding_and_token_rules() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert check_binding("127.0.0.1", "") is False
    assert check_binding("127.0.0.1", "s3cret-token") is True
    with pytest.raises(ValueError, match="not a loopback address"):
        check_binding("0.0.0.0", "")
    for bad in ("short", "has space1", "semi;colon9"):
        with pytest.raises(ValueError, match="console_token"):
            check_binding("0.0.0.0", bad)
    token = "s3cret-token"

    def head(target: str, **headers: str) -> Any:
        lines = [f"GET {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
        return parse_request_head("\r\n".join(lines).encode())

    assert authorize(head("/"), token).action == "refuse"
    assert authorize(head("/?token=wrong-token"), token).action == "refuse"
    assert authorize(head("/assets/x.js", Cookie=f"{COOKIE}=nope"), token).action == "refuse"
    decision = authorize(head("/?token=s3cret-token"), token)
    assert decision.action == "redirect" and decision.location == "/"
    assert authorize(head("/assets/x.js", Cookie=f"a=b; {COOKIE}={token}"), token).action == "forward"
    assert authorize(head("/", Upgrade="websocket", Cookie=f"{COOKIE}={token}"), token).action == "forward"
    assert authorize(head("/", Upgrade="websocket"), token).action == "refuse"
    with pytest.raises(ValueError):
        parse_request_head(b"garbage")


def test_status_model() -> None:
    status = ConsoleStatus()
    status.on_driver_mode("damping")
    status.on_manager_state(json.dumps({"mode": "damp", "source": "none", "counts": {"estops": 1}}))
    status.on_diagnostics([("robot_driver: loop", b"\x00", "hold", {"overruns": "10"})], 1.0)
    status.on_diagnostics([("robot_driver: loop", b"\x01", "hold", {"overruns": "14"})], 3.0)
    assert status.overruns_per_s == pytest.approx(2.0)
    status.on_manager_state("{not json")
    text = status.markdown(True, "idle")
    assert "damp" in text and "e-stop latched** yes (1 e-stops)" in text and "unreadable" in text
    assert "WARN robot_driver: loop" in text
    assert "operating controls disabled" in status.markdown(False, "idle")


def test_camera_image_and_height_map_conversions() -> None:
    """The head camera image and the height map as the perception nodes publish them (their own message
    builders), and malformed ones refused."""
    from builtin_interfaces.msg import Time

    from humanoid_bringup.console.convert import cloud_xyz, height_map_mesh, image_rgb
    from humanoid_perception.camera_node import image_message
    from humanoid_perception.perception_messages import pointcloud_message

    rgb = np.random.default_rng(0).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    assert np.array_equal(image_rgb(image_message(rgb, "rgb8", Time(), "camera")), rgb)
    bgr = image_message(np.ascontiguousarray(rgb[:, :, ::-1]), "bgr8", Time(), "camera")
    assert np.array_equal(image_rgb(bgr), rgb)
    with pytest.raises(ValueError, match="encoding"):
        image_rgb(image_message(np.zeros((4, 4), np.float32), "32FC1", Time(), "camera"))
    short = image_message(rgb, "rgb8", Time(), "camera")
    short.data = bytes(short.data)[:-1]
    with pytest.raises(ValueError, match="inconsistent"):
        image_rgb(short)

    # a 5 x 4 grid of 2 cm cells (heights vary), one cell missing, one point NaN
    x, y = np.meshgrid(np.arange(5) * 0.02 + 1.0, np.arange(4) * 0.02 - 0.5, indexing="ij")
    pts = np.stack([x.ravel(), y.ravel(), 0.01 * x.ravel()], axis=1)
    cloud = cloud_xyz(pointcloud_message(np.vstack([pts[1:], [[np.nan, 0.0, 0.0]]]), Time(), "odom"))
    assert cloud.shape == (19, 3) and np.allclose(cloud, pts[1:], atol=1e-6)
    vertices, faces = height_map_mesh(cloud)
    assert vertices.shape == (19, 3) and faces.shape == (22, 3)  # 12 blocks, the one at the hole dropped
    # counter-clockwise seen from above: every face's normal points up
    tri = vertices[faces]
    assert (np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])[:, 2] > 0).all()
    assert height_map_mesh(pts, cell=0.02)[1].shape == (24, 3)
    bad = pointcloud_message(pts, Time(), "odom")
    bad.fields = bad.fields[:2]
    with pytest.raises(ValueError, match="x, y, z"):
        cloud_xyz(bad)


def test_scene_fast_joint_posing_equals_viser_urdf() -> None:
    """The scene's fast joint posing gives every joint frame of the G1 the pose ``ViserUrdf.update_cfg``
    gives it (fixed joints and joint origins included: legs in place, not folded into the pelvis)."""
    import viser

    from humanoid_bringup.console.scene import ConsoleScene
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.model.urdf import robot_description_xml

    class Actions:
        def request(self, name: str, client: int) -> None: ...

        def hold(self, client: int, speed: float, turn: float) -> None: ...

        def release(self, client: int) -> None: ...

        def push(self, client: int, direction: str, impulse: float) -> None: ...

    server = viser.ViserServer(host="127.0.0.1", port=_free_port(), verbose=False)
    try:
        scene = ConsoleScene(server, Actions(), LIMITS, 20.0, push=True)
        assert scene.set_robot(robot_description_xml(load_robot_config("g1"), "file")).endswith("(29 joints)")
        assert scene._fast is not None
        cfg = np.random.default_rng(1).uniform(-0.6, 0.6, len(scene.joint_names))
        scene.update_robot(None, dict(zip(scene.joint_names, cfg, strict=True)), None)
        fast = [(np.array(f.wxyz), np.array(f.position)) for f in scene.robot._joint_frames]
        scene.robot.update_cfg(cfg)
        frames = scene.robot._joint_frames
        for (q, p), f in zip(fast, frames, strict=True):
            assert min(np.abs(q - f.wxyz).max(), np.abs(q + f.wxyz).max()) < 1e-6, f.name
            assert np.abs(p - f.position).max() < 1e-6, f.name
        knee = next(f for f in frames if f.name.endswith("left_knee_link"))
        assert np.linalg.norm(knee.position) > 0.1  # the knee's origin below the hip, not at it
    finally:
        server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_console_refuses_to_start_beyond_loopback_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node itself (a real process): host 0.0.0.0 without a token exits 2 with the reason."""
    import os
    import subprocess
    import sys

    from humanoid_bringup.evaluation.launched_graph import claim_ros_domain

    monkeypatch.delenv("HUMANOID_CONSOLE_TOKEN", raising=False)
    env = {**os.environ, "ROS_DOMAIN_ID": str(claim_ros_domain()), "ROS_LOG_DIR": str(tmp_path)}
    port = _free_port()
    args = ["--ros-args", "-p", "host:=0.0.0.0", "-p", f"port:={port}"]
    run = subprocess.run(
        [sys.executable, "-m", "humanoid_bringup.console.console_node", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    said = run.stdout + run.stderr
    assert "is not a loopback address" in said and "console_token" in said, said


def test_token_gate_refuses_pages_without_the_token() -> None:
    """Real sockets: a plain HTTP server behind the gate; no token -> 403, wrong token -> 403, the right
    token -> redirect with the cookie, the cookie -> the upstream's page."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"the console page"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    gate = TokenGate("127.0.0.1", _free_port(), upstream.server_address[1], "s3cret-token").start()
    base = f"http://127.0.0.1:{gate.port}"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        for url in (f"{base}/", f"{base}/?token=wrong-token"):
            with pytest.raises(urllib.error.HTTPError) as err:
                opener.open(url, timeout=10)
            assert err.value.code == 403 and b"refused" in err.value.read()
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open(f"{base}/?token=s3cret-token", timeout=10)
        assert err.value.code == 303 and err.value.headers["Location"] == "/"
        cookie = err.value.headers["Set-Cookie"]
        assert cookie.startswith(f"{COOKIE}=s3cret-token") and "HttpOnly" in cookie
        request = urllib.request.Request(f"{base}/", headers={"Cookie": cookie.split(";")[0]})
        with opener.open(request, timeout=10) as response:
            assert response.read() == b"the console page"
        assert gate.refused == 2 and gate.forwarded == 1
    finally:
        gate.close()
        upstream.shutdown()


# ---------------------------------------------------------------------------------------------- browser
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--no-sandbox",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
]


def _changed_fraction(a: bytes, b: bytes) -> tuple[float, tuple[int, int, int, int] | None]:
    """Fraction of pixels that differ (any channel by > 40) between two PNG screenshots, and their box."""
    from PIL import Image

    x = np.asarray(Image.open(io.BytesIO(a)).convert("RGB"), dtype=np.int16)
    y = np.asarray(Image.open(io.BytesIO(b)).convert("RGB"), dtype=np.int16)
    diff = np.abs(x - y).max(axis=2) > 40
    if not diff.any():
        return 0.0, None
    rows, cols = np.flatnonzero(diff.any(axis=1)), np.flatnonzero(diff.any(axis=0))
    return float(diff.mean()), (int(cols[0]), int(rows[0]), int(cols[-1]), int(rows[-1]))


class TeleopProbe:
    """The test's view of the graph: ground truth and ``/robot_driver/mode`` (the GraphProbe, a lockstep
    peer that holds simulated time where the test says), ``/teleop/cmd_vel`` with the simulated time each
    message arrived at, and ``/mode_manager/state``."""

    def __init__(self) -> None:
        from humanoid_bringup.evaluation.graph_probe import GraphProbe

        self.lock = threading.Lock()
        self.teleop: list[tuple[float, float, float]] = []  # (sim t, vx, wz)
        self.states: list[dict[str, Any]] = []
        self.probe = GraphProbe(
            subscribe_description=False,
            name="console_test",
            contacts=False,
            lockstep_peer=True,
            hold_timeout=120.0,  # the simulation held while the browser works (screenshots: seconds each)
            setup=self._setup,
        )

    def _setup(self, node: Any) -> None:
        from geometry_msgs.msg import Twist
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(Twist, "/teleop/cmd_vel", self._on_teleop, 50)
        node.create_subscription(String, "/mode_manager/state", self._on_state, latched)

    def _on_teleop(self, msg: Any) -> None:
        t = self.probe.sim_time()
        with self.lock:
            self.teleop.append((t, float(msg.linear.x), float(msg.angular.z)))

    def _on_state(self, msg: Any) -> None:
        with self.lock:
            self.states.append(json.loads(msg.data))

    def teleop_since(self, i: int) -> list[tuple[float, float, float]]:
        with self.lock:
            return list(self.teleop[i:])

    def count(self) -> int:
        with self.lock:
            return len(self.teleop)

    def wait_teleop(
        self, start: int, what: str, predicate: Any, timeout: float = 30.0
    ) -> tuple[float, float, float]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for m in self.teleop_since(start):
                if predicate(m):
                    return m
            time.sleep(0.01)
        raise AssertionError(f"/teleop/cmd_vel: {what} not seen; got {self.teleop_since(start)[-5:]}")

    def mode(self) -> str:
        with self.lock:
            return str(self.states[-1].get("mode", "")) if self.states else ""

    def wait_mode(self, mode: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while self.mode() != mode:
            assert time.monotonic() < end, f"/mode_manager/state: mode {mode} not seen (last {self.mode()!r})"
            time.sleep(0.02)

    def driver_mode(self) -> str:
        with self.probe.lock:
            return self.probe.data.modes[-1] if self.probe.data.modes else ""

    def x_at(self, t: float) -> float:
        with self.probe.lock:
            ts = np.array(self.probe.data.truth_t)
            i = int(np.searchsorted(ts, t + 1e-9)) - 1
            return float(self.probe.data.truth_pos[i][0])


def _open_page(browser: Any, url: str, running: Any, timeout: float = 180.0) -> Any:
    """A new page on ``url`` once the console serves it (its process may still be starting)."""
    end = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).close()
            break
        except OSError:
            assert running(), "the graph stopped before the console served its page"
            assert time.monotonic() < end, f"the console did not serve {url} within {timeout} s"
            time.sleep(0.5)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(url)
    page.get_by_role("button", name="run policy").wait_for(timeout=120_000)
    return page


def _click(page: Any, label: str, answer: str, timeout: float = 60.0) -> None:
    """Click a mode button once it is enabled and wait for its answer on the page."""
    button = page.get_by_role("button", name=label, exact=True)
    end = time.monotonic() + timeout
    while not button.is_enabled():
        assert time.monotonic() < end, f"button {label!r} never enabled"
        time.sleep(0.1)
    button.click()
    page.get_by_text(answer).first.wait_for(timeout=timeout * 1000)


@pytest.mark.slow
def test_console_in_a_real_browser(tmp_path: Path) -> None:
    """As a person uses it: the page shows the robot (screenshot: the robot's pixels vanish when "show robot"
    is unticked), "run policy", hold to drive 2 s of simulated time (ground truth moves forward), release
    (a zero on /teleop/cmd_vel within 0.2 s of simulated time), close the page while holding (a zero too),
    "e-stop" (the driver damps), "reset" (it ramps back to the standing pose). Chromium and Playwright come
    with make setup: a missing one fails here, it is not skipped."""
    from playwright.sync_api import sync_playwright

    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} missing: make setup installs Debian's chromium"
    isolated_ros_env(tmp_path / "ros_logs")
    port = _free_port()
    arguments = {
        "mode_manager": "true",
        "console": "true",
        "console_port": str(port),
        "clock": "lockstep",
        "start_paused": "true",
        "sim_duration_s": "300.0",
    }
    graph = LaunchedGraph(arguments, tmp_path / "graph.log").start()
    tp = TeleopProbe()
    url = f"http://127.0.0.1:{port}/"
    shots = tmp_path / "shots"
    shots.mkdir()
    try:
        with sync_playwright() as p:
            # the page loaded and the robot drawn while the simulation is still paused (no lockstep peer
            # waits on the browser's first paint, which takes minutes on a loaded machine)
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = _open_page(browser, url, graph.running)
            page.get_by_text("29 joints").first.wait_for(timeout=120_000)
            # the robot drawn: screenshots with and without it differ in the middle of the view
            fraction, box = 0.0, None
            end = time.monotonic() + 120.0
            while fraction < 0.002 and time.monotonic() < end:
                shown = page.screenshot(timeout=180_000)
                page.get_by_label("show robot").uncheck(force=True)
                time.sleep(1.0)
                hidden = page.screenshot(timeout=180_000)
                page.get_by_label("show robot").check(force=True)
                fraction, box = _changed_fraction(shown, hidden)
                time.sleep(1.0)
            (shots / "shown.png").write_bytes(shown)
            (shots / "hidden.png").write_bytes(hidden)
            assert fraction >= 0.002 and box is not None, f"robot not drawn: {fraction:.4f} of pixels changed"
            assert box[0] < 900 and 100 < (box[1] + box[3]) / 2 < 700, box  # in the 3D view, not the panel

            tp.probe.start_graph(peers=("policy_runner", "mode_manager"), running=graph.running, hold_at=2.5)
            t = tp.probe.run_until(2.5)  # the boot ramp done: the driver holds the robot standing
            _click(page, "run policy", "run_policy: ok")
            tp.wait_mode("run_policy")
            t = tp.probe.run_until(t + 1.0)
            x0 = tp.x_at(t)

            # hold to drive for 2 s of simulated time
            # aimed at before each press (hover: the button's centre as it is laid out now; the panel's
            # status lines above it change height while the robot runs: a press at an old position missed it)
            drive = page.get_by_role("button", name="hold to drive")
            drive.hover(timeout=60_000)
            n = tp.count()
            page.mouse.down()
            tp.wait_teleop(n, "a forward command", lambda m: m[1] > 0.1)
            t = tp.probe.run_until(t + 2.0)
            page.screenshot(path=str(shots / "walking.png"), timeout=180_000)
            moved = tp.x_at(t) - x0
            assert moved > 0.15, f"ground truth moved {moved:.3f} m forward while driving"
            driving = tp.teleop_since(n)
            assert all(math.isfinite(v) and -0.5 <= v <= 0.8 for _, v, _ in driving)
            # release: a zero at once (the simulation held: within 0.2 s of simulated time by construction; it
            # is the release, not a timeout, that sends it)
            n = tp.count()
            page.mouse.up()
            zero = tp.wait_teleop(n, "zero after release", lambda m: m[1] == 0.0 and m[2] == 0.0)
            assert zero[0] - t <= 0.2, (zero, t)
            t = tp.probe.run_until(t + 0.5)

            # close the page while holding: zero too
            drive.hover(timeout=60_000)
            page.mouse.down()
            n = tp.count()
            tp.wait_teleop(n, "a forward command (held again)", lambda m: m[1] > 0.1)
            n = tp.count()
            t_close = tp.probe.sim_time()
            page.close()
            zero = tp.wait_teleop(n, "zero after the page closed", lambda m: m[1] == 0.0 and m[2] == 0.0)
            assert zero[0] - t_close <= 0.2, (zero, t_close)
            t = tp.probe.run_until(t + 0.5)

            page = _open_page(browser, url, graph.running)
            _click(page, "e-stop", "estop: ok")
            t = tp.probe.run_until(t + 0.2)
            tp.wait_mode("damp")
            assert tp.driver_mode() == "damping"
            _click(page, "reset", "reset: ok")
            # the reset taken: the driver ramps back to the standing pose (whether a robot damped mid-walk
            # stands up again depends on how far it sank, which the browser's wall-clock driving varies)
            t = tp.probe.run_until(t + 0.1)
            end = time.monotonic() + 30.0  # the latched mode topic arrives beside the tick stream
            while tp.driver_mode() not in ("ramp", "hold") and time.monotonic() < end:
                time.sleep(0.02)
            assert tp.driver_mode() in ("ramp", "hold"), tp.driver_mode()
            browser.close()
    finally:
        tp.probe.close()
        graph.stop()
    log = graph.log()
    assert "Traceback" not in log, log[-4000:]


@pytest.mark.slow
def test_console_shows_the_head_camera_and_the_height_map(tmp_path: Path) -> None:
    """With perception:=true the console takes the head camera's frames and draws the height map as a mesh
    (its own ``console`` status on /diagnostics counts both); no page needed."""
    from humanoid_bringup.evaluation.graph_probe import GraphProbe
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    isolated_ros_env(tmp_path / "ros_logs")
    console: list[dict[str, str]] = []

    def setup(node: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        def on_diag(msg: Any) -> None:
            for st in msg.status:
                if st.name == "console":
                    console.append({kv.key: kv.value for kv in st.values})

        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)

    arguments = {"perception": "true", "console": "true", "console_port": str(_free_port())}
    graph = LaunchedGraph(arguments, tmp_path / "graph.log").start()
    probe = GraphProbe(
        subscribe_description=False,
        name="console_perception",
        contacts=False,
        reliable_streams=False,
        setup=setup,
    )
    try:

        def shown() -> bool:
            last = console[-1] if console else {}
            return int(last.get("camera_frames_shown", 0)) > 0 and int(last.get("height_map_faces", 0)) > 100

        end = time.monotonic() + 400.0
        while not shown():
            assert graph.running(), graph.log()[-3000:]
            assert time.monotonic() < end, f"console status: {console[-1:]}; log: {graph.log()[-2000:]}"
            time.sleep(0.5)
    finally:
        probe.close()
        graph.stop()
    log = graph.log()
    assert "Traceback" not in log and "not shown" not in log and "not drawn" not in log, log[-4000:]


def test_console_node_gated_and_without_mode_manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node in-process with a token (loopback): viser's page is served only through the gate (no token:
    403; ``?token=``: a redirect with the cookie; the cookie: the page). Without a mode manager the operating
    controls are disabled, a button's request is refused with the reason, and a hold publishes nothing."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from humanoid_bringup.console.console_node import ConsoleNode
    from humanoid_bringup.evaluation.launched_graph import claim_ros_domain

    monkeypatch.setenv("ROS_DOMAIN_ID", str(claim_ros_domain()))
    monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path))
    context = rclpy.Context()
    rclpy.init(context=context)
    port = _free_port()
    node = ConsoleNode(
        context=context,
        parameter_overrides=[Parameter("port", value=port), Parameter("token", value="s3cret-token")],
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        assert node.gate is not None and node.server.get_port() != port  # viser behind the gate
        base = f"http://127.0.0.1:{port}"
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open(f"{base}/", timeout=10)
        assert err.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open(f"{base}/?token=s3cret-token", timeout=10)
        assert err.value.code == 303
        cookie = err.value.headers["Set-Cookie"].split(";")[0]
        with opener.open(urllib.request.Request(f"{base}/", headers={"Cookie": cookie}), timeout=10) as page:
            assert page.status == 200 and b"<html" in page.read().lower()

        end = time.monotonic() + 30.0
        while "mode manager** not running" not in node.scene.status.content:
            assert time.monotonic() < end, node.scene.status.content
            executor.spin_once(timeout_sec=0.1)
        assert all(b.disabled for b in node.scene.buttons.values()) and node.scene.drive.disabled
        node.request("stand", 7)
        assert node.status.answers[0].startswith("stand: refused (the mode manager is not running")
        node.hold(7, 0.5, 0.0)
        assert node.drive.driver is None and node.drive.tick(time.monotonic()) is None
    finally:
        node.close()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.shutdown(context=context)


@pytest.mark.slow
def test_console_push_moves_the_simulated_robot(tmp_path: Path) -> None:
    """The page's push (the node's action, in-process) against a launched driver: a forward push of 5 N s
    is accepted and the ground-truth base speeds up forward; a non-finite impulse is refused with the
    reason. (The mode manager is not needed for pushes.)"""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from humanoid_bringup.console.console_node import ConsoleNode
    from humanoid_bringup.evaluation.graph_probe import GraphProbe
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    isolated_ros_env(tmp_path / "ros_logs")
    graph = LaunchedGraph({"clock": "realtime"}, tmp_path / "graph.log").start()
    probe = GraphProbe(
        subscribe_description=False, name="console_push", contacts=False, reliable_streams=False
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    node = ConsoleNode(context=context, parameter_overrides=[Parameter("port", value=_free_port())])
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    try:
        end = time.monotonic() + 180.0
        while not (node.push_up and probe.data.modes and probe.data.modes[-1] == "hold"):
            assert graph.running(), graph.log()[-3000:]
            assert time.monotonic() < end, f"driver push service / hold not seen: {probe.data.modes[-3:]}"
            time.sleep(0.2)
        node.push(3, "forward", math.nan)
        assert node.status.answers[0].startswith("push: refused (bad push"), node.status.answers[0]
        n = len(probe.data.truth_t)
        node.push(3, "forward", 5.0)
        assert node.status.answers[0].startswith("push forward 5 N s: ok"), node.status.answers[0]
        assert probe.wait_for(
            lambda d: len(d.truth_twist) > n and max(tw[0] for tw in d.truth_twist[n:]) > 0.05, timeout=60.0
        ), f"no forward speed-up: {max(tw[0] for tw in probe.data.truth_twist[n:]):.3f} m/s"
    finally:
        node.close()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.shutdown(context=context)
        probe.close()
        graph.stop()
    assert "Traceback" not in graph.log(), graph.log()[-4000:]
