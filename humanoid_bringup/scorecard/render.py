"""One rendered picture of a scorecard trial's world at its start (:func:`render_world`), for the
scorecard's HTML page: the robot in its spawn pose with the scenario's terrain, obstacles, payload or ball
(offscreen MuJoCo, headless with ``MUJOCO_GL=egl`` or ``osmesa``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from humanoid_bringup.scorecard.events import ball_launch_state
from humanoid_bringup.scorecard.worlds import BALL_BODY, world_for


def render_world(spec: Any, width: int = 320, height: int = 240) -> np.ndarray:
    """One RGB picture of a trial's world at its start (see :func:`humanoid_bringup.scorecard.trial.
    render_world`): shadows, reflections and skybox off (about 0.1 s in software rendering)."""
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")  # headless (before the first renderer is made)
    import mujoco

    from humanoid_bringup.scorecard.scenarios import load_family
    from humanoid_bringup.scorecard.sim import robot_config
    from humanoid_control.hardware.mujoco_sim import MujocoBackend

    family = load_family(spec.scenario, spec.robot)
    cfg = robot_config(spec.robot)
    world = world_for(family, family.level(spec.level), spec.seed, cfg)
    backend = MujocoBackend(cfg, initial_joint_positions=cfg.array("default"), edit=world.edit)
    model, data = backend.model, backend.data
    if family.name == "impact":  # show the ball where it will be thrown from, in front-left of the robot
        j = model.joint(BALL_BODY + "_joint")
        pos, _vel = ball_launch_state(data, model, family, family.level(spec.level), world, cfg)
        data.qpos[j.qposadr[0] : j.qposadr[0] + 3] = pos
        mujoco.mj_forward(model, data)
    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    renderer = mujoco.Renderer(model, height, width)
    try:
        cam = mujoco.MjvCamera()
        cam.lookat[:] = [1.2, 0.0, 0.3]
        cam.distance, cam.azimuth, cam.elevation = 4.3, 290.0, -18.0
        renderer.update_scene(data, cam)
        for flag in (
            mujoco.mjtRndFlag.mjRND_SHADOW,
            mujoco.mjtRndFlag.mjRND_REFLECTION,
            mujoco.mjtRndFlag.mjRND_SKYBOX,
        ):
            renderer.scene.flags[flag] = False
        return np.array(renderer.render(), dtype=np.uint8)
    finally:
        renderer.close()
        backend.close()
