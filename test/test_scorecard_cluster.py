"""The scorecard on a real two-node Ray cluster: ``ray start --head`` and ``ray start --address`` (one CPU
each), both in a network namespace of their own with only loopback (``unshare -n``, as root), and a small
scorecard driven there with ``--address``: its JSON equals the embedded run's (timing aside). The real trial
runs (push_standing, front: ``wbc_stand`` and the holosoma PPO policy).

Only this test's own Ray processes are stopped, by PID (and any process left in their sessions, by PID):
``ray stop`` would stop every Ray process on the machine. The test checks that none is left behind.

Run as a script (``python test/test_scorecard_cluster.py OUT``) it is the part inside the namespace: it brings
up loopback, starts the two nodes, waits until both are alive, runs the scorecard with ``--address`` and
stops the nodes; ``OUT/cluster.json`` names the sessions it started.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

CONTROLLERS = ("wbc_stand", "policy:holosoma/g1_ppo")
SCENARIOS = ("push_standing:front",)
PORT = 6391
READY_TIMEOUT_S = 180.0


def _sessions_alive(sids: list[int]) -> list[int]:
    """PIDs of live processes whose session id is one of ``sids`` (the sessions this test started)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) in sids:
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return alive


def _stop_session(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Stop a ``ray start --block`` process we started (SIGTERM: it stops the node's processes), then
    SIGKILL anything left in its session, by PID."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    deadline = time.monotonic() + 20.0
    while (left := _sessions_alive([proc.pid])) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def _wait_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode} before its port {port} opened")
        with socket.socket() as s:
            s.settimeout(1.0)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"Ray's port {port} not open after {timeout} s")


def inside_namespace(out: Path) -> int:
    """The part of the test that runs in the network namespace (module docstring)."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0")
    os.environ.update(RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0")
    ray_bin = str(Path(sys.executable).with_name("ray"))
    temp = tempfile.mkdtemp(prefix="rsc_", dir="/tmp")  # short: Ray's unix socket paths are bounded
    logs = out / "ray_logs"
    logs.mkdir(parents=True, exist_ok=True)
    common = ["--num-cpus=1", "--block", "--disable-usage-stats"]
    procs: list[subprocess.Popen] = []
    record: dict = {"sessions": [], "ok": False}
    try:
        head = subprocess.Popen(
            [
                ray_bin,
                "start",
                "--head",
                f"--port={PORT}",
                "--include-dashboard=false",
                f"--temp-dir={temp}",
                *common,
            ],
            env=env,
            stdout=open(logs / "head.log", "w"),  # noqa: SIM115 - closed with the process
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(head)
        record["sessions"].append(head.pid)
        (out / "cluster.json").write_text(json.dumps(record))
        _wait_port(PORT, head, READY_TIMEOUT_S)
        node = subprocess.Popen(
            [ray_bin, "start", f"--address=127.0.0.1:{PORT}", *common],
            env=env,
            stdout=open(logs / "node.log", "w"),  # noqa: SIM115 - closed with the process
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(node)
        record["sessions"].append(node.pid)
        (out / "cluster.json").write_text(json.dumps(record))
        import ray

        ray.init(address=f"127.0.0.1:{PORT}", log_to_driver=False, configure_logging=False)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            if time.monotonic() > deadline or node.poll() is not None:
                raise RuntimeError("the second Ray node did not join the cluster")
            time.sleep(0.2)
        record["nodes"] = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])
        record["cpus"] = ray.cluster_resources().get("CPU")
        ray.shutdown()

        from humanoid_bringup.evaluation.evaluate import main

        args = ["scorecard", "--controllers", *CONTROLLERS, "--scenarios", *SCENARIOS, "--seeds", "1"]
        args += ["--address", f"127.0.0.1:{PORT}", "--out", str(out / "cluster"), "--no-render"]
        record["exit_code"] = main(args)
        record["ok"] = True
    finally:
        for p in reversed(procs):
            _stop_session(p)
        record["left"] = _sessions_alive(record["sessions"])
        (out / "cluster.json").write_text(json.dumps(record))
        shutil.rmtree(temp, ignore_errors=True)
    return 0


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare(), reason="needs root and unshare -n (a network namespace)")
def test_two_node_cluster_scorecard_equals_embedded(tmp_path: Path) -> None:
    from humanoid_bringup.scorecard.cli import run_scorecard
    from humanoid_bringup.scorecard.report import comparable
    from humanoid_bringup.scorecard.runner import PlanRequest

    out = tmp_path / "ns"
    helper = subprocess.Popen(
        ["unshare", "-n", sys.executable, __file__, str(out)],
        stdout=open(tmp_path / "helper.log", "w"),  # noqa: SIM115 - closed with the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        helper.wait(timeout=540)
    finally:
        _stop_session(helper, timeout=30)
    log = (tmp_path / "helper.log").read_text()
    record = json.loads((out / "cluster.json").read_text())
    sessions = [helper.pid, *record["sessions"]]
    assert _sessions_alive(sessions) == [], "Ray processes left behind"
    assert record["ok"] and record["exit_code"] == 0, log[-4000:]
    assert record["nodes"] == ["127.0.0.1", "127.0.0.1"] and record["cpus"] == 2.0
    assert record["left"] == []
    cluster = json.loads((out / "cluster" / "scorecard.json").read_text())
    assert cluster["ray_address"] == f"127.0.0.1:{PORT}" and cluster["workers"] == 2
    assert cluster["totals"]["trials"] == 2 and cluster["totals"]["outcomes"]["error"] == 0, log[-4000:]

    request = PlanRequest(controllers=CONTROLLERS, scenarios=SCENARIOS, seeds=1)
    embedded, _ = run_scorecard(
        request, out=tmp_path / "embedded", workers=2, render=False, progress_stream=io.StringIO()
    )
    assert str(embedded["ray_address"]).startswith("embedded 127.0.0.1:")
    assert comparable(cluster) == json.loads(json.dumps(comparable(embedded)))


if __name__ == "__main__":
    sys.exit(inside_namespace(Path(sys.argv[1])))
