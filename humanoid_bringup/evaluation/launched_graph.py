"""Launch a ROS graph from Python in its own processes, isolated from every other graph on the machine.

Used by the demo, the benchmarks, the evaluations and the integration tests. :func:`isolated_ros_env` gives a
private ROS graph (a ROS domain id of its own claimed by :func:`claim_ros_domain`, localhost discovery, logs
in a folder); :class:`LaunchedGraph` runs ``humanoid-launch`` on a launch file (:func:`default_launch_file`:
``launch/sim.launch.yaml``) in a subprocess. The probe that observes and drives such a graph is
:class:`humanoid_bringup.evaluation.graph_probe.GraphProbe`.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def default_launch_file() -> Path:
    """``launch/sim.launch.yaml`` of this package (source tree or installed share folder)."""
    from humanoid_bringup.launcher.packages import find_launch_file

    return find_launch_file("humanoid_stack", "sim.launch.yaml")


_DOMAIN_LOCK: list[Any] = []  # the open lock file of the domain this process uses now


def claim_ros_domain() -> int:
    """A ROS domain id (1-100) that no other process on this machine has claimed through this function.

    Each id is guarded by an exclusive ``flock`` on a file in the temporary folder, held until this process
    claims another id or exits, so concurrent evaluations and test runs never share a graph (a random id
    alone collided: two ``humanoid-eval estimator`` started together joined one driver)."""
    import fcntl
    import tempfile

    folder = Path(tempfile.gettempdir()) / "humanoid_ros_domains"
    folder.mkdir(parents=True, exist_ok=True)
    for old in _DOMAIN_LOCK:
        old.close()  # releases its lock
    _DOMAIN_LOCK.clear()
    ids = list(range(1, 101))
    random.SystemRandom().shuffle(ids)
    for i in ids:
        f = open(folder / f"{i}.lock", "a")  # noqa: SIM115 - held open: the lock lives as long as the file
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _DOMAIN_LOCK.append(f)
        return i
    raise RuntimeError(f"every ROS domain id 1-100 is claimed by another process (locks in {folder})")


_DISCOVERY_RANGE = ["LOCALHOST"]  # SYSTEM_DEFAULT once use_loopback_udp() chose the transports itself


def use_loopback_udp() -> dict[str, str]:
    """From now on, graphs of this process (and its children) use Fast DDS over loopback UDP only, without
    the shared-memory transport (``config/dds/loopback_udp.xml``; the test suite's choice): Fast DDS 3.2's
    shared-memory transport can crash a process (SIGSEGV) that opens a port segment left inconsistent by a
    process killed with SIGKILL (eProsima/Fast-DDS#6501), and tests kill nodes on purpose. Discovery range
    ``SYSTEM_DEFAULT`` then (the profile keeps it on loopback; the rmw's ``LOCALHOST`` would add the
    shared-memory transport back). Sets and returns the variables."""
    import tempfile

    from humanoid_bringup.launcher.packages import find_package_share

    profile = find_package_share("humanoid_stack") / "config" / "dds" / "loopback_udp.xml"
    if not profile.is_file():
        raise FileNotFoundError(f"the Fast DDS profile {profile} is missing")
    # socket buffers of 4 MiB, or what the kernel allows (net.core.rmem_max / wmem_max): Fast DDS refuses a
    # transport whose buffer it cannot set to the size asked for
    limit = 4 * 1024 * 1024
    for name in ("rmem_max", "wmem_max"):
        with contextlib.suppress(OSError, ValueError):
            limit = min(limit, int(Path(f"/proc/sys/net/core/{name}").read_text().split()[0]))
    text = profile.read_text().replace("4194304", str(limit))
    if text != profile.read_text():
        folder = Path(tempfile.gettempdir()) / "humanoid_dds"
        folder.mkdir(parents=True, exist_ok=True)
        profile = folder / f"loopback_udp_{limit}.xml"
        profile.write_text(text)
    _DISCOVERY_RANGE[:] = ["SYSTEM_DEFAULT"]
    env = {"FASTDDS_DEFAULT_PROFILES_FILE": str(profile), "ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"}
    os.environ.update(env)
    return env


def isolated_ros_env(log_dir: str | Path, domain_id: int | None = None) -> dict[str, str]:
    """Set (in ``os.environ``) and return the variables that isolate a ROS graph on this machine: a domain
    id of its own (:func:`claim_ros_domain` unless given), localhost discovery (the rmw's ``LOCALHOST``
    range, or loopback UDP after :func:`use_loopback_udp`), logs in ``log_dir``."""
    env = {
        "ROS_DOMAIN_ID": str(domain_id if domain_id is not None else claim_ros_domain()),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": _DISCOVERY_RANGE[0],
        "ROS_LOG_DIR": str(log_dir),
        "PYTHONUNBUFFERED": "1",
    }
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    os.environ.update(env)
    return env


_RECORD_RUNS: list[bool] = []  # record_runs() was called: every graph started from then on is recorded


def record_runs(enabled: bool = True) -> None:
    """Record every :class:`LaunchedGraph` started from now on in this process (``humanoid-eval ...
    --record``): launch argument ``record:=`` set to :meth:`LaunchedGraph.bag_path`, beside the run's log
    and JSON (replaced if it exists), unless the caller's arguments name ``record`` themselves."""
    _RECORD_RUNS[:] = [True] if enabled else []


class LaunchedGraph:
    """``humanoid-launch FILE name:=value ...`` in a subprocess; output to ``log_path``."""

    def __init__(
        self, arguments: dict[str, str], log_path: str | Path, launch_file: str | Path | None = None
    ):
        self.launch_file = Path(launch_file) if launch_file else default_launch_file()
        self.arguments = arguments
        self.log_path = Path(log_path)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bag_path(self) -> Path:
        """Where :func:`record_runs` records this run: ``bag`` beside ``graph.log``, else ``<stem>_bag``."""
        stem = self.log_path.stem
        return self.log_path.with_name("bag" if stem == "graph" else f"{stem}_bag")

    def start(self) -> LaunchedGraph:
        """Start the launch runner."""
        script = Path(sys.executable).parent / "humanoid-launch"  # the console script, where installed
        runner = [str(script)] if script.exists() else [sys.executable, "-m", "humanoid_bringup.launcher"]
        if _RECORD_RUNS and "record" not in self.arguments:
            self.arguments = {**self.arguments, "record": str(self.bag_path), "record_overwrite": "true"}
        cmd = [*runner, str(self.launch_file)]
        cmd += [f"{k}:={v}" for k, v in self.arguments.items()]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
        return self

    def running(self) -> bool:
        """True while the runner is alive."""
        return self.process is not None and self.process.poll() is None

    def wait(self, timeout: float) -> int | None:
        """Wait for the runner to exit by itself; its exit code, or None on timeout."""
        assert self.process is not None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGINT the runner (it stops every node) and wait; kill after ``timeout``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()
        return self.process.returncode

    def log(self) -> str:
        """Everything the graph printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> LaunchedGraph:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
