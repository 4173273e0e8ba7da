"""Scoring of a locomotion run against the truth: velocities in the heading frame and per-segment statistics.

:func:`heading_frame_velocity` turns the ground truth's base orientations and body twists into
``[vx, vy, wz]`` in the heading frame (x forward along the base's yaw, y left, z up; m/s, m/s, rad/s);
:func:`segment_metrics` scores them against a command script segment by segment (and the joint and torque
limit fractions); :func:`max_forward_speed` is the top speed held on a forward ramp
(:data:`~humanoid_bringup.evaluation.locomotion_scripts.TOP_SPEED_SCRIPT`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

HOLD_S = 3.0  # top speed: a speed counts when held this long (s) at the end of its segment


def max_forward_speed(
    script: list[tuple[str, float, tuple[float, float, float]]],
    t: np.ndarray,
    vel: np.ndarray,
    fell_at: float,
) -> dict[str, Any]:
    """Top speed of a forward ramp: per ``forward_*`` segment finished before ``fell_at`` (s since the
    script started; inf: no fall), the mean forward speed (m/s, heading frame) over its last ``HOLD_S``
    seconds; ``max_forward_mps`` is the largest of them."""
    start, held = 0.0, {}
    for name, duration, _cmd in script:
        end = start + duration
        if name.startswith("forward") and end <= fell_at:
            sel = (t >= end - HOLD_S) & (t < end)
            if sel.any():
                held[name] = round(float(vel[sel, 0].mean()), 4)
        start = end
    return {"max_forward_mps": max(held.values()) if held else 0.0, "held_mps": held, "hold_s": HOLD_S}


def heading_frame_velocity(quat_wxyz: np.ndarray, twist_body: np.ndarray) -> np.ndarray:
    """``[vx, vy, wz]`` in the heading frame from base orientations (N,4) and body twists (N,6: v, w)."""
    w, x, y, z = quat_wxyz.T
    # rotation matrix rows (body -> world)
    r00, r01, r02 = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
    r10, r11, r12 = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
    r20, r21, r22 = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
    v, om = twist_body[:, :3], twist_body[:, 3:]
    vw = np.stack(
        [
            r00 * v[:, 0] + r01 * v[:, 1] + r02 * v[:, 2],
            r10 * v[:, 0] + r11 * v[:, 1] + r12 * v[:, 2],
        ],
        axis=1,
    )
    wz = r20 * om[:, 0] + r21 * om[:, 1] + r22 * om[:, 2]
    yaw = np.arctan2(r10, r00)
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([c * vw[:, 0] + s * vw[:, 1], -s * vw[:, 0] + c * vw[:, 1], wz], axis=1)


def segment_metrics(
    script: list[tuple[str, float, tuple[float, float, float]]],
    t: np.ndarray,
    vel: np.ndarray,
    settle_s: float,
    joint_t: np.ndarray,
    at_joint_limit: np.ndarray,
    at_torque_limit: np.ndarray,
) -> dict[str, dict[str, Any]]:
    """Per-segment tracking statistics; ``t`` and ``joint_t`` are seconds since the script started."""
    out: dict[str, dict[str, Any]] = {}
    start = 0.0
    for name, duration, cmd in script:
        end = start + duration
        sel = (t >= start + min(settle_s, 0.5 * duration)) & (t < end)  # short segments: skip half at most
        full = (t >= start) & (t < end)
        jsel = (joint_t >= start) & (joint_t < end)
        c = np.array(cmd)
        if sel.any():
            err = np.abs(vel[sel] - c)
            seg: dict[str, Any] = {
                "commanded": [round(float(v), 4) for v in c],
                "achieved_mean": [round(float(v), 4) for v in vel[sel].mean(axis=0)],
                "abs_err_mean": [round(float(v), 4) for v in err.mean(axis=0)],
                "abs_err_max": [round(float(v), 4) for v in err.max(axis=0)],
                "achieved_mean_full": [round(float(v), 4) for v in vel[full].mean(axis=0)],
                "samples": int(sel.sum()),
            }
        else:
            seg = {
                "commanded": [float(v) for v in c],
                "achieved_mean": None,
                "abs_err_mean": None,
                "abs_err_max": None,
                "achieved_mean_full": None,
                "samples": 0,
            }
        if jsel.any():
            jl, tl = at_joint_limit[jsel], at_torque_limit[jsel]
            seg["joint_limit_fraction"] = round(float(jl.mean()), 4)
            seg["torque_limit_fraction"] = round(float(tl.mean()), 4)
            seg["limit_fraction"] = round(float((jl | tl).mean()), 4)
        out[name] = seg
        start = end
    return out
