"""Small dense linear algebra of the estimator: LAPACK solves (a few us per call) and index slices."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import lapack


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^-1 b`` for a small square ``a``; least squares if ``a`` is singular.

    LAPACK ``gesv`` directly: a few us, where ``numpy.linalg.solve`` costs 10 or more on these sizes.
    """
    _, _, x, info = lapack.dgesv(a, b)
    if info != 0:
        return np.linalg.lstsq(a, b, rcond=None)[0]
    return x


def solve_spd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a^-1 b`` for a small symmetric positive definite ``a`` (LAPACK ``posv``); else as :func:`solve`."""
    _, x, info = lapack.dposv(a, b)
    if info != 0:
        return solve(a, b)
    return x


def as_slice(idx: np.ndarray) -> Any:
    """A slice for a contiguous increasing index array (a view, no copy when indexing), else the array."""
    idx = np.asarray(idx)
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx
