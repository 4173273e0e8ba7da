"""Joystick mapping (pure, no rclpy): a ``sensor_msgs/Joy`` message (axes in [-1, 1], buttons 0/1) to a
velocity command, a deadman state and button presses.

Default layout: an Xbox-style pad under the Linux ``joy`` driver (``joy_node``): left stick up/down = axis 1
(forward +), left stick left/right = axis 0 (left +), right stick left/right = axis 3 (left + = turn left);
buttons A 0, B 1, X 2, Y 3, LB 4. Defaults: deadman LB (held to drive and for the mode buttons), A stand,
X walk, Y run_policy, B e-stop (works without the deadman). A button acts on its press (rising edge).

Velocity: ``vx = axis_vx * scale_vx`` (m/s), ``vy = axis_vy * scale_vy`` (m/s), ``wz = axis_wz * scale_wz``
(rad/s); the scales default to the mux's velocity limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class JoyCommand:
    """A mapped joystick message: deadman held, velocity (vx m/s, vy m/s, wz rad/s), buttons pressed now."""

    deadman: bool
    velocity: tuple[float, float, float]
    pressed: tuple[str, ...] = ()


@dataclass
class JoyMapping:
    """Axis and button indices of the joystick (``sensor_msgs/Joy``) and the velocity scales.

    Attributes:
        deadman_button: held to drive (and for the mode buttons); released: zero velocity.
        axis_vx, axis_vy, axis_wz: axis indices of forward, left and turn-left velocity.
        scale_vx, scale_vy: m/s at full deflection; scale_wz: rad/s at full deflection.
        buttons: request name (``stand``, ``walk``, ``run_policy``, ``estop``) -> button index.
        estop_without_deadman: the e-stop button works without the deadman.
    """

    deadman_button: int = 4
    axis_vx: int = 1
    axis_vy: int = 0
    axis_wz: int = 3
    scale_vx: float = 0.8
    scale_vy: float = 0.4
    scale_wz: float = 1.0
    buttons: dict[str, int] = field(
        default_factory=lambda: {"stand": 0, "estop": 1, "walk": 2, "run_policy": 3}
    )
    estop_without_deadman: bool = True

    @property
    def axes_needed(self) -> int:
        """Axes a message must have."""
        return max(self.axis_vx, self.axis_vy, self.axis_wz) + 1

    @property
    def buttons_needed(self) -> int:
        """Buttons a message must have."""
        return max(self.deadman_button, *self.buttons.values()) + 1

    def check(self) -> None:
        """Raise ValueError for negative indices, non-finite scales or unknown request names."""
        indices = [self.deadman_button, self.axis_vx, self.axis_vy, self.axis_wz, *self.buttons.values()]
        if any(i < 0 for i in indices):
            raise ValueError(f"joystick indices must be >= 0: {indices}")
        if not all(math.isfinite(s) for s in (self.scale_vx, self.scale_vy, self.scale_wz)):
            raise ValueError("joystick scales must be finite")
        unknown = set(self.buttons) - {"stand", "walk", "run_policy", "estop", "damp", "reset"}
        if unknown:
            raise ValueError(f"unknown joystick button requests {sorted(unknown)}")

    def map(
        self, axes: list[float], buttons: list[int], previous: list[int] | None = None
    ) -> JoyCommand | str:
        """The command of one message, or a refusal (a string saying why). ``previous``: the buttons of the
        message before (presses are rising edges)."""
        if len(axes) < self.axes_needed:
            return (
                f"joy: refused a message with {len(axes)} axes; the mapping needs {self.axes_needed} "
                f"(vx axis {self.axis_vx}, vy axis {self.axis_vy}, wz axis {self.axis_wz})"
            )
        if len(buttons) < self.buttons_needed:
            return (
                f"joy: refused a message with {len(buttons)} buttons; the mapping needs "
                f"{self.buttons_needed} (deadman {self.deadman_button}, {self.buttons})"
            )
        picked = (axes[self.axis_vx], axes[self.axis_vy], axes[self.axis_wz])
        if not all(math.isfinite(a) for a in picked):
            return f"joy: refused a message with non-finite axes {list(picked)}"
        prev = previous if previous is not None and len(previous) >= self.buttons_needed else None
        deadman = bool(buttons[self.deadman_button])
        pressed = []
        for name, index in self.buttons.items():
            edge = buttons[index] and not (prev is not None and prev[index])
            if edge and (deadman or (name == "estop" and self.estop_without_deadman)):
                pressed.append(name)
        velocity = (
            picked[0] * self.scale_vx,
            picked[1] * self.scale_vy,
            picked[2] * self.scale_wz,
        )
        return JoyCommand(deadman, velocity if deadman else (0.0, 0.0, 0.0), tuple(pressed))
