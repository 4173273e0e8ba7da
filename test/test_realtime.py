"""The real-time path's pure parts and parameters: priorities, CPU affinity and locked memory with their
fallbacks where the system refuses, histogram loop statistics, garbage collection in the slack, the in-loop
controller's command checks, and the driver refusing bad real-time parameter values (docs/realtime.md)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from humanoid_control.driver.driver_core import CommandError
from humanoid_control.driver.in_loop import checked_command, parse_node_parameters
from humanoid_control.loop.realtime import (
    RealtimeSettingError,
    RealtimeSettings,
    SlackCollector,
    parse_cpus,
    parse_priority,
)
from humanoid_control.loop.stats import Histogram, LoopStats


def test_priorities_auto_only_with_a_controller_in_the_loop() -> None:
    assert parse_priority("thread_priority", "auto", in_loop=True, auto_value=50) == 50
    assert parse_priority("thread_priority", "AUTO", in_loop=False, auto_value=50) == 0
    assert parse_priority("thread_priority", 70, in_loop=False, auto_value=50) == 70
    assert parse_priority("process_priority", "0", in_loop=True, auto_value=40) == 0


@pytest.mark.parametrize("value", [-1, 100, "high", True, 2.5, "101"])
def test_bad_priorities_are_refused(value: object) -> None:
    with pytest.raises(RealtimeSettingError, match="thread_priority"):
        parse_priority("thread_priority", value, in_loop=True, auto_value=50)


def test_cpu_affinity_values() -> None:
    assert parse_cpus([-1]) == ()
    assert parse_cpus([]) == ()
    assert parse_cpus([1, 0]) == (1, 0)
    with pytest.raises(RealtimeSettingError, match="cpu_affinity"):
        parse_cpus([0, -2])


def test_in_loop_parameters_pairs_and_json() -> None:
    assert parse_node_parameters("") == {}
    assert parse_node_parameters("policy=holosoma/g1_ppo; autostart=false;rate=50;gain=0.5") == {
        "policy": "holosoma/g1_ppo",
        "autostart": False,
        "rate": 50,
        "gain": 0.5,
    }
    assert parse_node_parameters('{"policy": "x", "autostart": true}') == {"policy": "x", "autostart": True}
    for bad in ("policy", "=x", "a=1;a=2", "[1, 2]", "{not json"):
        with pytest.raises(ValueError, match="in_loop_parameters"):
            parse_node_parameters(bad)


def test_in_loop_commands_are_checked() -> None:
    cmd = checked_command(3, 1.5, np.array([0.1, 0.2, 0.3]))
    assert cmd.stamp == 1.5 and np.all(cmd.dq == 0) and np.all(cmd.tau_ff == 0)
    with pytest.raises(CommandError, match="non-finite position"):
        checked_command(3, 0.0, np.array([0.1, np.nan, 0.3]))
    with pytest.raises(CommandError, match="2 values for 3 joints"):
        checked_command(3, 0.0, np.array([0.1, 0.2]))


def test_histogram_percentiles_and_maximum() -> None:
    h = Histogram()
    values = np.concatenate([np.arange(1000) * 1.0, [2500.0, 15_000.0, 3e6]])
    for v in values:
        h.add(float(v))
    assert h.n == values.size
    assert h.percentile(50) == pytest.approx(np.percentile(values, 50), abs=1.0)
    assert h.percentile(90) == pytest.approx(np.percentile(values, 90), abs=1.0)
    assert h.max == 3e6 and h.percentile(100) == 3e6
    assert h.count_above(2000) == 3
    assert 2490 <= h.percentile(99.8) <= 15_000
    other = Histogram()
    other.add(5.0)
    h.merge(other)
    assert h.n == values.size + 1
    h.clear()
    assert h.n == 0 and h.percentile(99) == 0.0


def test_loop_stats_whole_run_and_last_second() -> None:
    stats = LoopStats(500.0)
    t = 0.0
    for k in range(1000):
        t += 0.002 if k != 500 else 0.012  # one 12 ms gap
        stats.record_wake(20e-6 if k % 100 else 400e-6, t)
        stats.record_controller(100e-6 if k % 250 else 1.5e-3)  # 4 steps over half a period (1 ms)
        if k in (10, 20):
            stats.record_overrun()
        if k == 499:
            stats.roll()
    s = stats.summary()
    assert s["ticks"] == 1000 and s["overruns"] == 2 and s["overruns_pct"] == pytest.approx(0.2)
    assert s["lateness_us_p50"] == 20 and s["lateness_us_max"] == 400
    assert s["max_gap_us"] == pytest.approx(12_000, abs=1)
    assert s["controller_steps"] == 1000 and s["controller_overruns"] == 4
    assert s["controller_us_median"] == 100 and s["controller_us_max"] == 1500
    # the first 500 ticks (rolled): both overruns, no gap beyond a period
    assert s["ticks_last_s"] == 500 and s["overruns_last_s"] == 2
    assert s["max_gap_us_last_s"] == pytest.approx(2000, abs=1)
    stats.roll()
    s = stats.summary()
    assert s["overruns_last_s"] == 0 and s["max_gap_us_last_s"] == pytest.approx(12_000, abs=1)
    assert s["overruns"] == 2  # whole run kept


def test_slack_collector_collects_only_with_slack() -> None:
    now = [0.0]
    collector = SlackCollector(min_slack_s=0.001, every_s=0.05, max_delay_s=1.0, clock=lambda: now[0])
    now[0] = 0.01
    assert not collector.maybe_collect(next_deadline=1.0)  # too soon after the last
    now[0] = 0.1
    assert not collector.maybe_collect(next_deadline=0.1005)  # 0.5 ms of slack: not enough
    assert collector.maybe_collect(next_deadline=0.105)
    now[0] = 1.2
    assert collector.maybe_collect(next_deadline=1.2001)  # never slack for 1 s: collected anyway
    assert collector.collections == 2 and collector.forced == 1


_APPLY = """
import json, os, resource, sys, threading
from humanoid_control.loop.realtime import RealtimeSettings, apply_to_loop_thread
threading.Thread(target=threading.Event().wait, daemon=True).start()  # another thread: process_priority
settings = RealtimeSettings(**json.loads(sys.argv[1]))
if sys.argv[2] == "drop" and os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # nobody: no CAP_SYS_NICE, no CAP_IPC_LOCK
if sys.argv[2] == "drop":
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
a = apply_to_loop_thread(settings)
print(json.dumps({"thread_priority": a.thread_priority, "process_priority": a.process_priority,
    "cpu_affinity": list(a.cpu_affinity), "lock_memory": a.lock_memory, "warnings": a.warnings,
    "policy": os.sched_getscheduler(0) == os.SCHED_FIFO}))
os._exit(0)
"""


def _apply(settings: RealtimeSettings, mode: str) -> dict:
    fields = {
        "thread_priority": settings.thread_priority,
        "process_priority": settings.process_priority,
        "cpu_affinity": list(settings.cpu_affinity),
        "lock_memory": settings.lock_memory,
        "gc_in_slack": settings.gc_in_slack,
    }
    out = subprocess.run(
        [sys.executable, "-c", _APPLY, json.dumps(fields), mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_refused_settings_fall_back_to_a_normal_thread() -> None:
    """Without the privilege (a process that dropped it), each refused setting is a warning and the thread
    runs normally; a CPU that does not exist is refused even with it."""
    result = _apply(
        RealtimeSettings(thread_priority=50, process_priority=40, cpu_affinity=(4096,), lock_memory=True),
        "drop",
    )
    assert result["thread_priority"] == 0 and result["process_priority"] == 0
    assert not result["policy"] and not result["lock_memory"] and result["cpu_affinity"] == []
    text = " ".join(result["warnings"])
    for what in ("cpu_affinity", "lock_memory", "thread_priority", "process_priority"):
        assert what in text


@pytest.mark.skipif(os.geteuid() != 0, reason="granting SCHED_FIFO needs root (CAP_SYS_NICE) here")
def test_granted_settings_are_applied() -> None:
    result = _apply(RealtimeSettings(thread_priority=10, process_priority=5, cpu_affinity=(0,)), "keep")
    assert result["thread_priority"] == 10 and result["process_priority"] == 5 and result["policy"]
    assert result["cpu_affinity"] == [0] and result["warnings"] == []


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        ("thread_priority", "150", "outside 0..99"),
        ("process_priority", "fast", "neither auto nor an integer"),
        ("in_loop_controller", "wbc_walk", "in_loop_controller"),
        ("publish_rate_hz", "300.0", "does not divide rate_hz"),
        ("in_loop_parameters", "policy", "not name=value"),
        ("cpu_affinity", "[-3]", "cpu_affinity"),
    ],
)
def test_driver_refuses_bad_realtime_parameters(param: str, value: str, message: str) -> None:
    """The driver exits with code 2 and names the parameter before it starts a loop."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "humanoid_control.driver.robot_driver_node",
            "--ros-args",
            "-p",
            f"{param}:={value}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stdout + out.stderr


def test_bench_baseline_loop_reports_its_work_beside_the_loop() -> None:
    """``humanoid-bench driver``'s bare-loop baseline: every tick run, and its work's figures (median, p99,
    max, steps longer than half a period) under the keys the benchmark compares with the graph's."""
    from humanoid_bringup.evaluation.rt_bench import baseline_loop

    out = baseline_loop("joint_hold", rate=500.0, seconds=0.2)
    assert out["baseline_ticks"] == 100
    assert out["baseline_final_mode"] in ("ramp", "hold", "active")
    assert 0 <= out["baseline_controller_overruns"] <= out["baseline_ticks"]
    work = (out["baseline_work_us_median"], out["baseline_work_us_p99"], out["baseline_work_us_max"] + 1)
    assert 0 <= work[0] <= work[1] <= work[2]
    assert 0.0 <= out["baseline_overruns_pct"] <= 100.0
    with pytest.raises(ValueError, match="work must be"):
        baseline_loop("dance", rate=500.0, seconds=0.01)


def test_slack_gate_opens_windows_and_never_starves_the_executor_for_good() -> None:
    """The executor's callbacks start only in windows the loop opens; closed, the gate makes it wait (GIL
    released); a loop that never opens one still lets a callback through every starve_s."""
    import threading
    import time

    from humanoid_control.loop.realtime import SlackGate

    gate = SlackGate(starve_s=0.05)
    assert gate.window(0.0) == math.inf  # open at construction (before the loop runs)
    gate.close()
    start = time.perf_counter()
    assert gate.window(0.01) is None  # closed: waited, nothing given
    assert time.perf_counter() - start >= 0.009
    now = time.perf_counter()
    gate.open_until(now + 0.2)
    left = gate.window(0.0)
    assert left is not None and 0.1 < left <= 0.2
    gate.close()
    # a window opened from another thread wakes the waiter at once
    got: list[float | None] = []
    waiter = threading.Thread(target=lambda: got.append(gate.window(1.0)))
    waiter.start()
    time.sleep(0.005)
    gate.open_until(time.perf_counter() + 0.1)
    waiter.join(1.0)
    assert got and got[0] is not None and got[0] > 0.05
    # the loop overruns: its windows end in the past, so none opens; after starve_s one is given anyway
    gate.close()
    gate.open_until(time.perf_counter() - 0.001)
    start = time.perf_counter()
    assert gate.window(0.01) is None
    assert gate.window(1.0) == 0.0
    assert 0.04 <= time.perf_counter() - start < 0.5
    assert gate.starved == 1
    gate.open()
    assert gate.window(0.0) == math.inf
