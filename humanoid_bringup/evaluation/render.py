"""Offscreen pictures of the robot in MuJoCo (headless: ``MUJOCO_GL=egl``, falling back to ``osmesa``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from humanoid_control.model.robot_config import RobotConfig

# must be set before mujoco is first imported in the process
os.environ.setdefault("MUJOCO_GL", "egl")


def _import_mujoco_for_rendering() -> object:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco

    return mujoco


def render_robot(
    config: RobotConfig,
    qpos: np.ndarray,
    path: str | Path,
    width: int = 640,
    height: int = 480,
    azimuth: float = 140.0,
    elevation: float = -15.0,
    distance: float = 2.6,
) -> Path:
    """Render the robot at MuJoCo ``qpos`` (base wxyz) to a PNG, camera looking at the base.

    Shadows and reflections are turned off (10x faster offscreen on CPU). Returns the written path.
    """
    mujoco = _import_mujoco_for_rendering()
    import cv2

    from humanoid_control.model.robot_model import load_mujoco_model

    mj = load_mujoco_model(config, scene=True, torque_actuators=False)
    model = mj.model
    data = mujoco.MjData(model)  # type: ignore[attr-defined]
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)  # type: ignore[attr-defined]
    model.vis.quality.shadowsize = 0  # type: ignore[attr-defined]
    model.mat_reflectance[:] = 0.0  # type: ignore[attr-defined]
    renderer = mujoco.Renderer(model, height=height, width=width)  # type: ignore[attr-defined]
    camera = mujoco.MjvCamera()  # type: ignore[attr-defined]
    camera.lookat[:] = data.xpos[mj.base_body_id] - np.array([0.0, 0.0, 0.15])
    camera.distance, camera.azimuth, camera.elevation = distance, azimuth, elevation
    renderer.update_scene(data, camera=camera)
    pixels = renderer.render()
    renderer.close()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {path}")
    return path


def qpos_from_state(
    config: RobotConfig,
    position: np.ndarray,
    quat_wxyz: np.ndarray,
    joint_names: list[str],
    joint_positions: np.ndarray,
) -> np.ndarray:
    """MuJoCo qpos from a base pose (world, wxyz) and named joint positions (e.g. recorded ROS messages)."""
    from humanoid_control.model.robot_model import load_mujoco_model

    mj = load_mujoco_model(config, scene=True, torque_actuators=False)
    qpos = np.array(mj.model.qpos0, dtype=float)  # type: ignore[attr-defined]
    b = mj.base_qpos_adr
    qpos[b : b + 3] = position
    qpos[b + 3 : b + 7] = quat_wxyz
    index = {n: i for i, n in enumerate(config.joint_names)}
    for name, value in zip(joint_names, joint_positions, strict=False):
        qpos[mj.qpos_adr[index[name]]] = value
    return qpos
