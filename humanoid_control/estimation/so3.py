"""SO(3) and small-vector helpers of the estimator, in floats (numpy's general routines cost more per call).

:func:`skew`, :func:`cross`, :func:`so3_exp` (Rodrigues) and :func:`so3_log`.
"""

from __future__ import annotations

import math

import numpy as np


def skew(w: np.ndarray) -> np.ndarray:
    """Cross-product matrix: ``skew(a) @ b == a x b``."""
    x, y, z = float(w[0]), float(w[1]), float(w[2])
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a x b`` of two 3-vectors (numpy's general ``cross`` costs ~10x more per call)."""
    a0, a1, a2 = float(a[0]), float(a[1]), float(a[2])
    b0, b1, b2 = float(b[0]), float(b[1]), float(b[2])
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


def so3_exp(w: np.ndarray) -> np.ndarray:
    """Rotation matrix of the rotation vector ``w`` (rad): Rodrigues, in floats (one array made)."""
    x, y, z = float(w[0]), float(w[1]), float(w[2])
    t2 = x * x + y * y + z * z
    if t2 < 1e-20:
        return np.array([[1.0, -z, y], [z, 1.0, -x], [-y, x, 1.0]])
    t = math.sqrt(t2)
    a = math.sin(t) / t
    b = (1.0 - math.cos(t)) / t2
    bxy, bxz, byz = b * x * y, b * x * z, b * y * z
    return np.array(
        [
            [1.0 - b * (y * y + z * z), bxy - a * z, bxz + a * y],
            [bxy + a * z, 1.0 - b * (x * x + z * z), byz - a * x],
            [bxz - a * y, byz + a * x, 1.0 - b * (x * x + y * y)],
        ]
    )


def so3_log(r: np.ndarray) -> np.ndarray:
    """Rotation vector (rad) of a rotation matrix."""
    cos = np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.arccos(cos))
    vee = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if angle < 1e-8:
        return 0.5 * vee
    return angle / (2.0 * np.sin(angle)) * vee
