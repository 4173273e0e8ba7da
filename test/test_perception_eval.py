"""``humanoid-eval perception`` and ``humanoid-bench perception`` as a user runs them (one slow test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

BIN = Path(sys.executable).parent


@pytest.mark.slow
def test_perception_eval_meets_its_goals_and_bench_reports_every_size(tmp_path: Path) -> None:
    out = tmp_path / "perception"
    run = subprocess.run(
        [str(BIN / "humanoid-eval"), "perception", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result == json.loads((out / "perception.json").read_text())
    for key in ("position_error_m", "orientation_error_deg"):
        assert set(result[key]) == {"median", "p95"} == set(result[f"{key}_noiseless"])
    assert result["position_error_m"]["p95"] <= 0.03
    assert result["orientation_error_deg"]["p95"] <= 3.0
    assert 0.0 < result["heightmap_rmse_m"] <= 0.01
    markers = result["markers"]
    assert markers["placements"] == 280 and markers["in_view"] >= 200
    assert markers["detection_rate"] == 1.0 and not markers["wrong_ids"]
    # the camera's floor footprint ends near 2.5 m: the 2.5 m row is out of view, reported as such
    assert all(p[0] >= 2.25 for p in markers["out_of_view"]) and len(markers["out_of_view"]) >= 40
    assert sorted(markers["showcase"]["detected_ids"]) == [0, 1, 2, 3]
    for name in ("detections.png", "terrain.png", "heightmap.png"):
        image = cv2.imread(str(out / name))
        assert image is not None and image.shape[0] >= 240
    bench = subprocess.run(
        [str(BIN / "humanoid-bench"), "perception", "--frames", "2", "--rtf-seconds", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bench.returncode == 0, bench.stderr[-3000:]
    figures = json.loads(bench.stdout.strip().splitlines()[-1])
    for key in ("render_rgb_ms", "render_depth_ms", "detect_ms", "heightmap_ms"):
        assert set(figures[key]) == {"640x480", "424x240"}
        assert all(v["median"] > 0 for v in figures[key].values())
    assert figures["markers_in_view"] == 4
