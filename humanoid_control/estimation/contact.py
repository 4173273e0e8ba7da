"""Per-foot contact detection from the estimated normal forces, with hysteresis."""

from __future__ import annotations

import numpy as np

from humanoid_control.estimation.ekf import N_FEET


class ContactDetector:
    """Per-foot contact from the estimated normal force, with hysteresis (fractions of body weight)."""

    def __init__(self, weight_n: float, on_fraction: float = 0.25, off_fraction: float = 0.15) -> None:
        self.on = on_fraction * weight_n
        self.off = off_fraction * weight_n
        self.state = np.zeros(N_FEET, dtype=bool)

    def update(self, normal_forces: np.ndarray | list[float]) -> np.ndarray:
        """New contact flags from the feet's normal forces (N)."""
        for i, f in enumerate(normal_forces):
            self.state[i] = f > self.off if self.state[i] else f > self.on
        return self.state.copy()
