"""``humanoid-bench console``: what the browser console costs and delivers with the robot walking in realtime.

Launches ``clock:=realtime controller:=policy console:=true`` (the learned policy walking from a ``/cmd_vel``
that this benchmark publishes), then for ``--seconds`` of wall time measures

- **scene updates per second reaching the page**: a websocket client of the console speaking viser's wire
  protocol (what the browser page receives: 16-byte header, zstd-compressed msgpack of a message window)
  counts the windows that move the robot (a message on ``/odom/base_link`` or one of its links);
- **the console process's CPU** (user + system time from ``/proc/<pid>/stat`` over the same interval, as %
  of one core);
- the distance the robot walked in ground truth (that it did walk while measured).

Prints one JSON object (the last line of stdout). The issue's targets: >= 30 updates/s, <= 15 % of a core.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["add_console_arguments", "bench_console", "bench_main"]

ROBOT_PREFIX = "/odom/base_link"


def add_console_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``humanoid-bench console`` arguments."""
    parser.add_argument("--seconds", type=float, default=20.0, help="measured wall seconds (default 20)")
    parser.add_argument("--speed", type=float, default=0.4, help="forward /cmd_vel while measured (m/s)")
    parser.add_argument("--port", type=int, default=0, help="console port (default: a free one)")
    parser.add_argument("--out", default=None, help="also write the JSON here")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (s)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _find_console_pid(root: int) -> int | None:
    """The console node's process among the launcher's descendants (its command line names the module)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    stack = [root]
    while stack:
        pid = stack.pop()
        for child in children.get(pid, []):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"humanoid_bringup.console.console_node" in cmdline:
                return child
            stack.append(child)
    return None


class PageCounter:
    """A websocket client of the console that counts the message windows moving the robot (wall time)."""

    def __init__(self, url: str) -> None:
        import viser

        self.url = url
        self.protocol = f"viser-v{viser.__version__}"
        self.times: list[float] = []
        self.frames = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def start(self) -> PageCounter:
        self._thread.start()
        return self

    def _run(self) -> None:
        import msgspec
        import zstandard
        from websockets.sync.client import connect

        dctx = zstandard.ZstdDecompressor()
        try:
            with connect(self.url, subprotocols=[self.protocol], max_size=None) as ws:
                while not self._stop.is_set():
                    try:
                        data = ws.recv(timeout=0.5)
                    except TimeoutError:
                        continue
                    if not isinstance(data, bytes) or len(data) < 16:
                        continue
                    size = int.from_bytes(data[:8], "little")
                    compressed = int.from_bytes(data[8:16], "little")
                    inner = msgspec.msgpack.decode(
                        dctx.decompress(data[16 : 16 + compressed], max_output_size=size)
                    )
                    self.frames += 1
                    if any(
                        str(m.get("name", "")).startswith(ROBOT_PREFIX) for m in inner.get("messages", ())
                    ):
                        self.times.append(time.monotonic())
        except BaseException as exc:  # reported by the benchmark
            self.error = exc

    def rate(self, t0: float, t1: float) -> float:
        """Robot-moving windows per second received in [t0, t1]."""
        n = sum(1 for t in self.times if t0 <= t <= t1)
        return n / (t1 - t0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


def bench_console(seconds: float = 20.0, speed: float = 0.4, port: int = 0) -> dict[str, Any]:
    """Run the measurement (module docstring); the result as a dict."""
    import rclpy
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"--seconds must be > 0, got {seconds}")
    work = Path(tempfile.mkdtemp(prefix="console_bench_"))
    isolated_ros_env(work / "ros_logs")
    port = port or _free_port()
    graph = LaunchedGraph(
        {"clock": "realtime", "controller": "policy", "console": "true", "console_port": str(port)},
        work / "graph.log",
    ).start()
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(f"console_bench_{os.getpid()}", context=context)
    truth: list[tuple[float, float, float]] = []
    sent: list[float] = []  # the console's own scene updates per second (its /diagnostics)
    from diagnostic_msgs.msg import DiagnosticArray

    def on_diag(msg: Any) -> None:
        for st in msg.status:
            if st.name == "console":
                sent.extend(float(kv.value) for kv in st.values if kv.key == "scene_updates_per_s")

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
    node.create_subscription(
        Odometry,
        "/sim/ground_truth",
        lambda m: truth.append((time.monotonic(), m.pose.pose.position.x, m.pose.pose.position.y)),
        QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT),
    )
    pub = node.create_publisher(Twist, "/cmd_vel", 10)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    counter: PageCounter | None = None
    try:
        end = time.monotonic() + 180.0
        while True:  # the page is served
            assert graph.running(), graph.log()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > end:
                raise TimeoutError("the console page was not served within 180 s")
            time.sleep(0.5)
        counter = PageCounter(f"ws://127.0.0.1:{port}").start()
        cmd = Twist()
        cmd.linear.x = float(speed)

        def publish_until(t_end: float) -> None:
            while time.monotonic() < t_end:
                pub.publish(cmd)
                time.sleep(0.05)

        # warm up: the robot drawn and walking
        end = time.monotonic() + 180.0
        while not counter.times or time.monotonic() - counter.times[-1] > 0.5:
            if counter.error is not None:
                raise RuntimeError(f"page client failed: {counter.error}")
            if time.monotonic() > end:
                raise TimeoutError("no robot update reached the page within 180 s")
            pub.publish(cmd)
            time.sleep(0.05)
        publish_until(time.monotonic() + 3.0)
        pid = _find_console_pid(graph.process.pid)  # type: ignore[union-attr]
        if pid is None:
            raise RuntimeError("console process not found")
        t0, cpu0 = time.monotonic(), _cpu_seconds(pid)
        n_sent = len(sent)
        publish_until(t0 + seconds)
        t1, cpu1 = time.monotonic(), _cpu_seconds(pid)
        walked = [p for p in truth if t0 <= p[0] <= t1]
        distance = math.hypot(walked[-1][1] - walked[0][1], walked[-1][2] - walked[0][2]) if walked else 0.0
        updates = counter.rate(t0, t1)
        cpu = 100.0 * (cpu1 - cpu0) / (t1 - t0)
        return {
            "benchmark": "console",
            "seconds": round(t1 - t0, 2),
            "scene_updates_per_s": round(updates, 1),
            "scene_updates_sent_per_s": round(sum(sent[n_sent:]) / max(1, len(sent[n_sent:])), 1),
            "console_cpu_percent_of_one_core": round(cpu, 1),
            "walked_m": round(distance, 2),
            "command_speed_mps": speed,
            "targets": {"scene_updates_per_s": ">= 30", "console_cpu_percent_of_one_core": "<= 15"},
            "meets_targets": bool(updates >= 30.0 and cpu <= 15.0),
            "cores": os.cpu_count(),
            "load_avg_1min": round(os.getloadavg()[0], 2),  # the machine's load while measured
            "graph_log": str(work / "graph.log"),
        }
    finally:
        if counter is not None:
            counter.close()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.shutdown(context=context)
        graph.stop()


def bench_main(args: argparse.Namespace) -> int:
    """``humanoid-bench console``: run, print (and write) the JSON."""
    result = bench_console(args.seconds, args.speed, args.port)
    text = json.dumps(result, indent=None)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text, flush=True)
    return 0
