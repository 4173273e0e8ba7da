"""``humanoid-bench link`` end to end (its own process: the SDK allows one DDS domain per process; a peer
process answers the G1 link on loopback): one JSON object per link with the keys the issue asks for, every
tick answered on both paths (the benchmark itself fails if the two paths decode different LowStates)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("unitree_sdk2py.core.channel", reason="the Unitree SDK is installed by `make setup`")
pytest.importorskip("can", reason="python-can is optional")


@pytest.mark.slow
def test_link_bench_reports_both_links_beside_the_sdk() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "humanoid_bringup.evaluation.bench", "link", "--ticks", "30"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(result) == {"unitree_g1", "can_mit"}
    for name, figures in result.items():
        assert figures["ticks"] == 30 and figures["lost"] == 0, name
        for key in ("link_us_median", "link_us_p99", "sdk_link_us_median", "link_cpu_us_median"):
            assert figures[key] > 0, (name, key)
        assert figures["link_us_p99"] >= figures["link_us_median"]
        assert figures["ratio_vs_sdk"] == pytest.approx(
            figures["link_us_median"] / figures["sdk_link_us_median"], rel=1e-2, abs=1e-3
        )
    assert result["can_mit"]["actuators"] == 29


def test_link_bench_refuses_unknown_links() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "humanoid_bringup.evaluation.bench", "link", "--links", "unitree_g1,ethercat"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "unknown links ['ethercat']" in out.stderr
