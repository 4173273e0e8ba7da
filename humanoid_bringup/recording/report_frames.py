"""``humanoid-report``'s rendered frames: the robot at the run's events, offscreen in MuJoCo.

The robot's state at an event (the recorded ground-truth pose and joint positions,
:meth:`~.report_balance.BalanceModel.state_at`) is rendered by
:func:`humanoid_bringup.evaluation.render.render_robot` in a child process (one core per renderer, and the
OpenGL backend is chosen before MuJoCo is imported there): ``MUJOCO_GL=egl`` first, ``osmesa`` if that fails.
The frame is labelled with the event and its time.

``python -m humanoid_bringup.recording.report_frames JOB.json``: the child's entry (``robot``, ``width``,
``height``, ``frames``: ``qpos``, ``file``, ``label`` each); it prints one JSON line: the files written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FrameJob", "render_frames"]


@dataclass
class FrameJob:
    """One frame to render: MuJoCo ``qpos`` (base pose wxyz), the PNG path, the label drawn on it."""

    qpos: list[float]
    file: Path
    label: str


def render_frames(
    robot: str, jobs: list[FrameJob], width: int = 480, height: int = 360, timeout_s: float = 300.0
) -> tuple[list[Path], str]:
    """Render ``jobs`` in a child process (module docstring); the files written and, if none could be, why."""
    if not jobs:
        return [], ""
    job_file = jobs[0].file.parent / ".frames_job.json"
    job_file.parent.mkdir(parents=True, exist_ok=True)
    job_file.write_text(
        json.dumps(
            {
                "robot": robot,
                "width": width,
                "height": height,
                "frames": [{"qpos": j.qpos, "file": str(j.file), "label": j.label} for j in jobs],
            }
        )
    )
    errors = []
    try:
        for backend in ("egl", "osmesa"):
            env = {**os.environ, "MUJOCO_GL": backend}
            env.pop("PYOPENGL_PLATFORM", None)
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "humanoid_bringup.recording.report_frames", str(job_file)],
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                    env=env,
                )
            except subprocess.TimeoutExpired:
                errors.append(f"MUJOCO_GL={backend}: no frames within {timeout_s:g} s")
                continue
            if proc.returncode == 0:
                written = json.loads(proc.stdout.strip().splitlines()[-1])
                return [Path(p) for p in written], ""
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            errors.append(f"MUJOCO_GL={backend}: {tail[-1] if tail else f'exit code {proc.returncode}'}")
    finally:
        job_file.unlink(missing_ok=True)
    return [], "; ".join(errors)


def _label(path: Path, text: str) -> None:
    import cv2

    image = cv2.imread(str(path))
    if image is None:
        return
    cv2.rectangle(image, (0, 0), (image.shape[1], 26), (255, 255, 255), thickness=-1)
    cv2.putText(image, text, (8, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.imwrite(str(path), image)


def main(argv: list[str] | None = None) -> int:
    """Child entry: render the frames of a job file (module docstring)."""
    import numpy as np

    args = sys.argv[1:] if argv is None else argv
    job: dict[str, Any] = json.loads(Path(args[0]).read_text())
    from humanoid_bringup.evaluation.render import render_robot
    from humanoid_control.model.robot_config import load_robot_config

    config = load_robot_config(job["robot"])
    written = []
    for frame in job["frames"]:
        path = render_robot(
            config, np.asarray(frame["qpos"], dtype=float), frame["file"], job["width"], job["height"]
        )
        _label(path, frame["label"])
        written.append(str(path))
    print(json.dumps(written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
