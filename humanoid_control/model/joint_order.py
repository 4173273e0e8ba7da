"""Joint arrays of ``sensor_msgs/JointState``-shaped messages in the configuration's joint order (no rclpy).

The nodes get a joint state (and the driver its commands) every tick, usually with the same name list:
:class:`JointOrder` computes the index map once per name list and reuses it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class JointOrder:
    """Reorders message arrays into ``names`` (the configuration's joint order)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self._key: tuple[str, ...] | None = None
        self._order = np.zeros(0, dtype=int)

    def missing(self, msg_names: Sequence[str]) -> list[str]:
        """Configured joints absent from ``msg_names`` (empty when all are there); caches the index map."""
        key = tuple(msg_names)
        if key == self._key:
            return []
        index = {n: i for i, n in enumerate(key)}
        missing = [n for n in self.names if n not in index]
        if not missing:
            self._key, self._order = key, np.array([index[n] for n in self.names])
        return missing

    def take(self, values: Sequence[float]) -> np.ndarray:
        """``values`` (in the order of the names last passed to :meth:`missing`) in configuration order."""
        return np.asarray(values, dtype=float)[self._order]

    def __call__(self, msg_names: Sequence[str], *arrays: Sequence[float]) -> tuple[np.ndarray, ...] | str:
        """The arrays in configuration order; a reason string when joints or values are missing."""
        missing = self.missing(msg_names)
        if missing:
            return f"joint state without joints {missing}"
        if any(len(a) != len(msg_names) for a in arrays):
            return "joint state with wrong lengths"
        return tuple(self.take(a) for a in arrays)


def reorder(
    names: Sequence[str], msg_names: Sequence[str], *arrays: Sequence[float]
) -> tuple[np.ndarray, ...] | str:
    """One-off :class:`JointOrder` call: the arrays of a joint message in the order ``names``."""
    return JointOrder(names)(msg_names, *arrays)
