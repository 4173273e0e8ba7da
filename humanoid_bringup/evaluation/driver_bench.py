"""``humanoid-bench driver --lockstep`` and ``--hardware``: the robot driver's figures from launched graphs.

The driver is launched through ``launch/sim.launch.yaml`` in its own processes and measured from its own
``/diagnostics``: the realtime loop (``rate_hz``, wake-up jitter in us relative to the absolute deadlines,
``overruns``) and the lockstep real-time factor (simulated seconds per wall second), on MuJoCo
(:func:`bench_driver`) or through a hardware protocol's emulator beside MuJoCo
(:func:`bench_driver_hardware`).
The keys are described in :mod:`humanoid_bringup.evaluation.bench` (the ``humanoid-bench`` help); the
realtime scenarios with their bare-loop baselines are :mod:`humanoid_bringup.evaluation.rt_bench`.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


def _run_graph(arguments: dict[str, str], log_dir: Path, timeout: float) -> dict[str, str]:
    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph

    probe = GraphProbe(subscribe_description=False, name="bench_probe")
    # a short run can end before the probe's /diagnostics subscription is matched (CI: a 2 s realtime run on
    # a loaded machine ended before discovery): the driver waits paused until the probe is matched
    arguments = {**arguments, "start_paused": "true"}
    graph = LaunchedGraph(
        arguments, log_dir / f"launch_{arguments['clock']}_{arguments['controller']}.log"
    ).start()
    try:
        probe.start_graph(timeout=120.0, running=graph.running)
        code = graph.wait(timeout)
        if code is None:
            raise RuntimeError(f"benchmark graph did not finish in {timeout} s: {graph.log()[-2000:]}")
        if code != 0:
            raise RuntimeError(f"benchmark graph failed ({code}): {graph.log()[-2000:]}")
        probe.wait_for(lambda d: bool(d.diagnostics), 5.0)
        time.sleep(0.5)
    finally:
        close_graph(probe, graph)
    diag = probe.last_diagnostics()
    if not diag:
        raise RuntimeError("no /diagnostics received from the driver")
    return diag


def _run_graph_for(arguments: dict[str, str], log_dir: Path, wall_s: float) -> dict[str, str]:
    """Run a graph for ``wall_s`` seconds of wall time after the driver's first diagnostics, then stop it; the
    driver's last diagnostics (an emulator in realtime may fall behind wall time on a loaded machine, so its
    simulated time cannot bound the run)."""
    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph

    probe = GraphProbe(subscribe_description=False, name="bench_probe", reliable_streams=False)
    log = log_dir / f"launch_{arguments['clock']}_{arguments['controller']}.log"
    graph = LaunchedGraph(arguments, log).start()
    try:
        if not probe.wait_for(lambda d: bool(d.diagnostics), 120.0):
            raise RuntimeError(f"no /diagnostics from the driver: {graph.log()[-2000:]}")
        time.sleep(wall_s)
        if not graph.running():
            raise RuntimeError(f"benchmark graph stopped early: {graph.log()[-2000:]}")
        diag = probe.last_diagnostics()
    finally:
        close_graph(probe, graph)
    return diag


def bench_driver_hardware(
    hardware: str, seconds: float, rate: float, lockstep_seconds: float, robot: str = "g1"
) -> dict[str, Any]:
    """The driver on a hardware backend through its protocol emulator (see module docstring), beside the same
    figures on MuJoCo (``mujoco`` key). ``robot``: launched with ``robot:=``."""
    import os

    from humanoid_bringup.evaluation.launched_graph import isolated_ros_env

    log_dir = Path(tempfile.mkdtemp(prefix=f"humanoid_bench_{hardware}_"))
    isolated_ros_env(log_dir)

    def num(d: dict[str, str], key: str) -> float | None:
        v = d.get(key, "")
        return float(v) if v not in ("", "None") else None

    def measure(backend: str) -> dict[str, Any]:
        """Realtime for ``seconds`` of wall time, then the driver alone in lockstep, on one backend."""
        extra = (
            {"robot": robot}
            if backend == "mujoco"
            else {
                "robot": robot,
                "hardware": backend,
                "emulator": "true",
                "dds_domain": str(100 + os.getpid() % 100),
            }
        )
        sub = log_dir / backend
        sub.mkdir()
        rt = _run_graph_for(
            {"clock": "realtime", "controller": "none", "rate_hz": f"{rate}", **extra}, sub, seconds
        )
        alone = _run_graph(
            {
                "clock": "lockstep",
                "controller": "none",
                "rate_hz": f"{rate}",
                "sim_duration_s": f"{lockstep_seconds}",
                **extra,
            },
            sub,
            timeout=lockstep_seconds * 60 + 120,
        )
        out: dict[str, Any] = {
            "hardware": backend,
            "rate_hz": float(rt["rate_hz"]),
            "jitter_us_median": float(rt["jitter_us_median"]),
            "jitter_us_p99": float(rt["jitter_us_p99"]),
            "jitter_us_max": float(rt["jitter_us_max"]),
            "overruns": int(rt["overruns"]),
            "ticks": int(rt["ticks"]),
            "realtime_mode_final": rt["mode"],
            "realtime_mode_reason": rt.get("mode_reason", ""),
            # backend time / wall time: an emulator (or MuJoCo) that falls behind the wall clock shows here
            "realtime_backend_realtime_factor": num(rt, "realtime_factor"),
            "lockstep_realtime_factor_driver_only": float(alone["realtime_factor"]),
        }
        if backend != "mujoco":
            out["roundtrip_us_median"] = num(alone, "hw_roundtrip_us_median")
            out["roundtrip_us_p99"] = num(alone, "hw_roundtrip_us_p99")
        return out

    result: dict[str, Any] = {
        "benchmark": "driver",
        "robot": robot,
        "emulator": True,
        "target_rate_hz": rate,
        "duration_s": seconds,
        "lockstep_sim_seconds": lockstep_seconds,
        **measure(hardware),
        "mujoco": measure("mujoco"),
        "logs": str(log_dir),
    }
    return result


def bench_driver(seconds: float, rate: float, lockstep_seconds: float, robot: str = "g1") -> dict[str, Any]:
    """Realtime and lockstep figures of the robot driver (see module docstring); ``robot``: launched with
    ``robot:=``."""
    from humanoid_bringup.evaluation.launched_graph import isolated_ros_env

    log_dir = Path(tempfile.mkdtemp(prefix="humanoid_bench_"))
    isolated_ros_env(log_dir)
    # realtime: the driver holds the robot (boot ramp + hold), nothing else running
    rt = _run_graph(
        {
            "robot": robot,
            "clock": "realtime",
            "controller": "none",
            "rate_hz": f"{rate}",
            "sim_duration_s": f"{seconds}",
        },
        log_dir,
        timeout=seconds * 3 + 60,
    )
    ls = _run_graph(
        {
            "robot": robot,
            "clock": "lockstep",
            "controller": "joint_hold",
            "rate_hz": f"{rate}",
            "sim_duration_s": f"{lockstep_seconds}",
        },
        log_dir,
        timeout=lockstep_seconds * 20 + 60,
    )
    alone = _run_graph(
        {
            "robot": robot,
            "clock": "lockstep",
            "controller": "none",
            "rate_hz": f"{rate}",
            "sim_duration_s": f"{lockstep_seconds}",
        },
        log_dir,
        timeout=lockstep_seconds * 20 + 60,
    )
    return {
        "benchmark": "driver",
        "robot": robot,
        "hardware": "mujoco",
        "target_rate_hz": rate,
        "duration_s": seconds,
        "rate_hz": float(rt["rate_hz"]),
        "jitter_us_median": float(rt["jitter_us_median"]),
        "jitter_us_p99": float(rt["jitter_us_p99"]),
        "jitter_us_max": float(rt["jitter_us_max"]),
        "overruns": int(rt["overruns"]),
        "ticks": int(rt["ticks"]),
        "realtime_mode_final": rt["mode"],
        "lockstep_realtime_factor": float(ls["realtime_factor"]),
        "lockstep_sim_seconds": lockstep_seconds,
        "lockstep_commands_accepted": int(ls["commands_accepted"]),
        "lockstep_timeouts": int(ls["lockstep_timeouts"]),
        "lockstep_realtime_factor_driver_only": float(alone["realtime_factor"]),
        "logs": str(log_dir),
    }
