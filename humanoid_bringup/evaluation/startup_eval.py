"""``humanoid-eval startup``: the full graph starts in lockstep on a busy machine, every peer kept, the run a
function of its inputs.

Each run launches ``launch/sim.launch.yaml`` with ``perception:=true autonomy:=true mode_manager:=true
controller:=policy`` (driver, policy runner, state estimator, mode manager, head camera, perception node,
autonomy node; separate processes, lockstep), *not* paused: the driver holds simulated time at 0 until every
peer the launch declares (``lockstep_peers``) has joined, and each gets the start-up timeout for its first
acknowledgement. The evaluator is one more declared peer (launch argument ``lockstep_observers``), so it sees
every tick and calls services at held ticks: ``/mode_manager/run_policy`` at ``policy_at`` s,
``/autonomy_node/start`` at ``autonomy_at`` s, then simulated time runs to ``seconds``. ``burners`` processes
spin on the CPU meanwhile (started and stopped by PID).

Output (last stdout line, and ``startup.json`` in ``--out``): per run ``dropped`` (the driver's dropped peers;
must be empty), ``peers`` and ``declared`` (from ``/robot_driver/lockstep``), ``start_wall_s`` (launch to
simulated time 0 released), ``fingerprint`` (SHA-256 of the run's record: the ground-truth base pose every
0.1 s of simulated time, the driver's modes, the autonomy task's states) and ``record`` of the first run;
``no_peer_dropped`` (count), ``identical`` (every run's fingerprint equal).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from humanoid_bringup.evaluation.autonomy_eval import PEERS  # the same graph
from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

GRAPH = {
    "perception": "true",
    "autonomy": "true",
    "mode_manager": "true",
    "controller": "policy",
    "clock": "lockstep",
    "scene": "autonomy",
    "ramp_duration_s": "0.5",  # the boot ramp (run_policy is refused until it is over)
}
SAMPLE_S = 0.1  # ground-truth sampling of the record (s of simulated time)


def start_burners(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes that keep a CPU core busy (stopped with :func:`stop_burners`)."""
    code = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def stop_burners(burners: list[subprocess.Popen[bytes]]) -> None:
    """Stop the burners, by PID."""
    for b in burners:
        b.kill()
    for b in burners:
        b.wait(10)


class _Watch:
    """The task's latched state (``/autonomy_node/state``) as it changes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.task_states: list[str] = []

    def setup(self, node: Any) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(String, "/autonomy_node/state", self._on_state, latched)

    def _on_state(self, msg: Any) -> None:
        with self.lock:
            if not self.task_states or self.task_states[-1] != msg.data:
                self.task_states.append(msg.data)


def record_of(probe: GraphProbe, watch: _Watch, seconds: float) -> dict[str, Any]:
    """The run's record: ground-truth base pose on the ``SAMPLE_S`` grid up to ``seconds``, driver modes,
    task states (simulated-time quantities only: the same inputs give the same record)."""
    with probe.lock:
        t = list(probe.data.truth_t)
        pos = list(probe.data.truth_pos)
        quat = list(probe.data.truth_quat_wxyz)
        modes = list(probe.data.modes)
    samples = []
    k = 0
    for i, ti in enumerate(t):
        if ti > seconds + 1e-9:
            break
        if ti >= k * SAMPLE_S - 1e-9:
            samples.append([round(ti, 6), *pos[i], *quat[i]])
            k = int(ti / SAMPLE_S + 1e-6) + 1
    with watch.lock:
        tasks = list(watch.task_states)
    return {"truth": samples, "modes": modes, "task_states": tasks}


def run_once(
    out: Path, seconds: float, policy_at: float, autonomy_at: float, log: Any = print
) -> dict[str, Any]:
    """One unpaused start of the full graph and a scripted run; the run's summary (see the module doc)."""
    out.mkdir(parents=True, exist_ok=True)
    isolated_ros_env(out / "ros_logs")
    watch = _Watch()
    probe = GraphProbe(
        subscribe_description=False,
        name="startup_probe",
        contacts=False,
        lockstep_peer=True,
        setup=watch.setup,
    )
    graph = LaunchedGraph({**GRAPH, "lockstep_observers": probe.name}, out / "graph.log")
    t0 = time.monotonic()
    graph.start()
    result: dict[str, Any] = {}
    try:
        probe.start_graph(PEERS, timeout=300.0, running=graph.running, hold_at=0.0, unpause=False)
        probe.run_until(0.0, timeout=300.0)
        result["start_wall_s"] = round(time.monotonic() - t0, 2)
        probe.run_until(policy_at, timeout=300.0)
        ok, why = probe.call_trigger("/mode_manager/run_policy", timeout=30.0)
        if not ok:
            raise RuntimeError(f"run_policy refused: {why}")
        probe.run_until(autonomy_at, timeout=300.0)
        ok, why = probe.call_trigger("/autonomy_node/start", timeout=30.0)
        if not ok:
            raise RuntimeError(f"/autonomy_node/start refused: {why}")
        probe.run_until(seconds + 0.01, timeout=600.0)
        with probe.lock:
            status = dict(probe.lockstep_status)
        record = record_of(probe, watch, seconds)
    finally:
        close_graph(probe, graph)
    text = json.dumps(record, sort_keys=True)
    (out / "record.json").write_text(text)
    log_text = graph.log()
    result.update(
        {
            "dropped": status.get("dropped", []),
            "peers": status.get("peers", []),
            "declared": status.get("declared", []),
            "drop_logged": "did not acknowledge" in log_text,
            "fingerprint": hashlib.sha256(text.encode()).hexdigest(),
            "record": record,
        }
    )
    log(f"startup run in {out}: start {result['start_wall_s']} s, dropped {result['dropped']}")
    return result


def run_startup_eval(
    out: Path,
    runs: int = 5,
    burners: int = 2,
    seconds: float = 3.0,
    policy_at: float = 0.7,
    autonomy_at: float = 1.2,
    log: Any = print,
) -> dict[str, Any]:
    """``runs`` unpaused starts of the full graph with ``burners`` CPU burners; the summary (module doc)."""
    if runs < 1 or burners < 0 or not (0.0 < policy_at < autonomy_at < seconds):
        raise ValueError(
            f"need runs >= 1, burners >= 0, 0 < policy_at < autonomy_at < seconds (got {runs}, {burners}, "
            f"{policy_at}, {autonomy_at}, {seconds})"
        )
    out.mkdir(parents=True, exist_ok=True)
    procs = start_burners(burners)
    results = []
    try:
        for i in range(runs):
            results.append(run_once(out / f"run_{i}", seconds, policy_at, autonomy_at, log))
    finally:
        stop_burners(procs)
    first = results[0]["record"]
    for r in results:
        r.pop("record")
    summary = {
        "graph": GRAPH,
        "burners": burners,
        "seconds": seconds,
        "runs": results,
        "no_peer_dropped": sum(1 for r in results if not r["dropped"] and not r["drop_logged"]),
        "identical": len({r["fingerprint"] for r in results}) == 1,
        "record": first,
    }
    (out / "startup.json").write_text(json.dumps(summary, indent=1))
    return summary


def default_out() -> Path:
    """A fresh temporary folder."""
    return Path(tempfile.mkdtemp(prefix="startup_eval_"))
