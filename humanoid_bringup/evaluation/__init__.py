"""Evaluations, benchmarks, rendering: they launch the stack, drive it through a probe node, score it."""

import os

# Offscreen rendering (the head camera, pictures) needs the OpenGL platform chosen before mujoco is first
# imported in the process: headless EGL unless the user chose another.
os.environ.setdefault("MUJOCO_GL", "egl")
