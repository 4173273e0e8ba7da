"""The fixed ``/cmd_vel`` command scripts of the locomotion evaluation (``humanoid-eval locomotion``).

A script is a list of segments ``(name, duration s, (vx m/s, vy m/s, wz rad/s))``, the command in the heading
frame (x forward along the base's yaw, y left, z up), played on the simulated clock from the moment the
controller runs.
"""

from __future__ import annotations

# (segment, duration s, (vx m/s, vy m/s, wz rad/s)) - the fixed script
LOCOMOTION_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    ("forward", 6.0, (0.5, 0.0, 0.0)),
    ("turn", 4.0, (0.0, 0.0, 0.5)),
    ("lateral", 4.0, (0.0, 0.3, 0.0)),
    ("backward", 4.0, (-0.3, 0.0, 0.0)),
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]
# a forward ramp: each speed held 4 s (the last 3 s are measured); max_forward_mps = the fastest held
TOP_SPEED_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    *[(f"forward_{v:.1f}", 4.0, (v, 0.0, 0.0)) for v in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)],
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]
# blind walking over a scene's terrain (``--terrain``): forward at 0.3 m/s for 8 s
TERRAIN_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 2.0, (0.0, 0.0, 0.0)),
    ("forward", 8.0, (0.3, 0.0, 0.0)),
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]
# a 10 s script (``--short``, the demo's walk): stand, forward, turn, stop
SHORT_SCRIPT: list[tuple[str, float, tuple[float, float, float]]] = [
    ("stand", 1.0, (0.0, 0.0, 0.0)),
    ("forward", 4.0, (0.5, 0.0, 0.0)),
    ("turn", 3.0, (0.0, 0.0, 0.5)),
    ("stop", 2.0, (0.0, 0.0, 0.0)),
]
