"""Keyboard teleop mapping (pure): keys of a plain terminal to velocity steps and mode requests.

``humanoid-teleop`` (``humanoid_bringup/teleop.py``) reads keys with curses and publishes the velocity on
``/teleop/cmd_vel``; this module decides what each key does. Velocities in the heading frame: ``vx`` forward,
``vy`` left (m/s), ``wz`` turn left (rad/s).

| key | action |
|---|---|
| up / ``w`` | vx + step |
| down / ``s`` | vx - step |
| left / ``a`` | wz + step (turn left) |
| right / ``d`` | wz - step (turn right) |
| ``z`` / ``c`` | vy + step / vy - step (sideways left / right) |
| space | stop: all zero |
| ``1`` / ``2`` / ``3`` | stand / walk / run_policy |
| ``0`` | damp |
| ``e`` | e-stop |
| ``r`` | reset |
| ``R`` | respawn (simulation: the robot back upright after a fall) |
| ``o`` / ``p`` | autonomy on / off |
| ``q`` | quit (publishes a zero first) |
"""

from __future__ import annotations

from dataclasses import dataclass

#: key -> (axis index, sign); the key names curses gives the arrow keys are KEY_UP, ...
VELOCITY_KEYS: dict[str, tuple[int, int]] = {
    "KEY_UP": (0, 1),
    "w": (0, 1),
    "KEY_DOWN": (0, -1),
    "s": (0, -1),
    "z": (1, 1),
    "c": (1, -1),
    "KEY_LEFT": (2, 1),
    "a": (2, 1),
    "KEY_RIGHT": (2, -1),
    "d": (2, -1),
}

#: key -> (service under /mode_manager, SetBool data or None for std_srvs/Trigger)
REQUEST_KEYS: dict[str, tuple[str, bool | None]] = {
    "1": ("stand", None),
    "2": ("walk", None),
    "3": ("run_policy", None),
    "0": ("damp", None),
    "e": ("estop", None),
    "r": ("reset", None),
    "R": ("respawn", None),
    "o": ("set_autonomy", True),
    "p": ("set_autonomy", False),
}


@dataclass
class KeyResult:
    """What a key did: a service to call (name, SetBool data or None), quit, or neither."""

    request: tuple[str, bool | None] | None = None
    quit: bool = False
    known: bool = True


@dataclass
class TeleopKeys:
    """The velocity the keyboard commands; steps per key press (m/s, m/s, rad/s) and limits."""

    step_vx: float = 0.1
    step_vy: float = 0.1
    step_wz: float = 0.2
    max_vx: float = 0.8
    max_vy: float = 0.4
    max_wz: float = 1.0
    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0

    @property
    def velocity(self) -> tuple[float, float, float]:
        """(vx, vy, wz)."""
        return (self.vx, self.vy, self.wz)

    def press(self, key: str) -> KeyResult:
        """Apply one key (a character, ``" "`` for space, or a curses key name such as ``KEY_UP``)."""
        if key in VELOCITY_KEYS:
            axis, sign = VELOCITY_KEYS[key]
            steps = (self.step_vx, self.step_vy, self.step_wz)
            limits = (self.max_vx, self.max_vy, self.max_wz)
            values = [self.vx, self.vy, self.wz]
            values[axis] = round(min(max(values[axis] + sign * steps[axis], -limits[axis]), limits[axis]), 6)
            self.vx, self.vy, self.wz = values
            return KeyResult()
        if key == " ":
            self.vx = self.vy = self.wz = 0.0
            return KeyResult()
        if key in REQUEST_KEYS:
            if REQUEST_KEYS[key][0] in ("estop", "damp"):
                self.vx = self.vy = self.wz = 0.0
            return KeyResult(request=REQUEST_KEYS[key])
        if key in ("q", "Q"):
            self.vx = self.vy = self.wz = 0.0
            return KeyResult(quit=True)
        return KeyResult(known=False)
