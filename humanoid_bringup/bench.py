"""``humanoid-bench``: benchmarks that print figures as JSON (last line of stdout).

``humanoid-bench driver``: the robot driver on MuJoCo, launched through ``launch/sim.launch.yaml`` in its own
processes, measured from its own ``/diagnostics``:

- realtime mode at ``--rate`` Hz (default 500) for ``--seconds`` (default 30): achieved ``rate_hz``, wake-up
  jitter relative to the absolute deadlines (``jitter_us_median``, ``jitter_us_p99``, ``jitter_us_max``) and
  ``overruns`` (ticks whose work ended after the next deadline);
- lockstep mode with the joint hold controller in a separate process answering every tick:
  ``lockstep_realtime_factor`` (simulated seconds per wall second), plus the driver alone in lockstep
  (``lockstep_realtime_factor_driver_only``, no controller to wait for).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _run_graph(arguments: dict[str, str], log_dir: Path, timeout: float) -> dict[str, str]:
    from humanoid_bringup.graph import GraphProbe, LaunchedGraph

    probe = GraphProbe(subscribe_description=False, name="bench_probe")
    graph = LaunchedGraph(
        arguments, log_dir / f"launch_{arguments['clock']}_{arguments['controller']}.log"
    ).start()
    try:
        code = graph.wait(timeout)
        if code is None:
            raise RuntimeError(f"benchmark graph did not finish in {timeout} s: {graph.log()[-2000:]}")
        if code != 0:
            raise RuntimeError(f"benchmark graph failed ({code}): {graph.log()[-2000:]}")
        probe.wait_for(lambda d: bool(d.diagnostics), 5.0)
        time.sleep(0.5)
    finally:
        graph.stop()
        probe.close()
    diag = probe.last_diagnostics()
    if not diag:
        raise RuntimeError("no /diagnostics received from the driver")
    return diag


def bench_driver(seconds: float, rate: float, lockstep_seconds: float) -> dict[str, Any]:
    """Realtime and lockstep figures of the robot driver (see module docstring)."""
    from humanoid_bringup.graph import isolated_ros_env

    log_dir = Path(tempfile.mkdtemp(prefix="humanoid_bench_"))
    isolated_ros_env(log_dir)
    # realtime: the driver holds the robot (boot ramp + hold), nothing else running
    rt = _run_graph(
        {"clock": "realtime", "controller": "none", "rate_hz": f"{rate}", "sim_duration_s": f"{seconds}"},
        log_dir,
        timeout=seconds * 3 + 60,
    )
    ls = _run_graph(
        {
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
        "robot": "g1",
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


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark; print its JSON object as the last line of stdout."""
    parser = argparse.ArgumentParser(
        prog="humanoid-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="benchmark", required=True)
    drv = sub.add_parser("driver", help="real-time loop rate/jitter/overruns and lockstep real-time factor")
    drv.add_argument("--seconds", type=float, default=30.0, help="realtime run length (s, default 30)")
    drv.add_argument("--rate", type=float, default=500.0, help="loop rate (Hz, default 500)")
    drv.add_argument("--lockstep-seconds", type=float, default=10.0, help="lockstep simulated time (s)")
    args = parser.parse_args(argv)
    if args.benchmark == "driver":
        result = bench_driver(args.seconds, args.rate, args.lockstep_seconds)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
