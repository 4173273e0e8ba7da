"""Hold-to-drive for the browser console (pure: no rclpy, no viser).

A page drives the robot only while its "hold to drive" button is held: the page sends a hold tick at a fixed
rate (``GuiButtonHoldMessage``, wall time) and the console publishes ``/teleop/cmd_vel`` (geometry_msgs/Twist,
heading frame: ``linear.x`` forward in m/s, ``angular.z`` turn rate in rad/s, counter-clockwise positive) at
its own fixed rate from the newest accepted hold. The command goes back to zero

- on release (the page's pointer-up click),
- when the page disconnects (its websocket closes),
- when the page stops sending hold ticks for ``deadman_s`` seconds (a frozen tab, a lost network),

and the console then publishes zeros for ``zero_ticks`` more ticks before going silent (the mode manager's
teleop source then times out by itself, and other sources are not blocked by a console that is not driving).

Several pages do not multiply commands: one page at a time is the driver; a hold from another page is
refused (with the reason) until the driver releases, disconnects or goes stale.

Slider values are validated here, not in the browser (a page can send anything over its websocket): a
non-finite value is refused (:class:`SliderError`), a finite value outside the mode manager's limits is
clamped to them.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

__all__ = ["DriveControl", "DriveLimits", "DriveSettings", "SliderError", "drive_command"]


class SliderError(ValueError):
    """A slider value that can never be published (NaN or infinite)."""


@dataclass(frozen=True)
class DriveLimits:
    """The velocity limits the drive sliders allow: the mode manager's ``vx_max``, ``vx_min`` and ``wz_max``
    parameters (m/s, m/s (negative), rad/s; its defaults here)."""

    vx_max: float = 0.8
    vx_min: float = -0.5
    wz_max: float = 1.0

    def __post_init__(self) -> None:
        for name in ("vx_max", "vx_min", "wz_max"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"drive limit {name} must be finite, got {getattr(self, name)}")
        if self.vx_max < 0.0 or self.vx_min > 0.0 or self.wz_max < 0.0:
            raise ValueError(f"drive limits must bracket zero: {self}")


@dataclass(frozen=True)
class DriveSettings:
    """Timing of hold-to-drive. ``rate_hz``: ``/teleop/cmd_vel`` publishing rate while driving (Hz, wall
    time); ``deadman_s``: a driver whose last hold tick is older than this is stale (s, wall time; the page
    sends ticks at ``hold_hz``); ``zero_ticks``: zeros published after a stop before going silent."""

    rate_hz: float = 20.0
    hold_hz: float = 20.0
    deadman_s: float = 0.3
    zero_ticks: int = 3

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and 1.0 <= self.rate_hz <= 200.0):
            raise ValueError(f"rate_hz must be in 1-200 Hz, got {self.rate_hz}")
        if not (math.isfinite(self.hold_hz) and 1.0 <= self.hold_hz <= 100.0):
            raise ValueError(f"hold_hz must be in 1-100 Hz, got {self.hold_hz}")
        if not (math.isfinite(self.deadman_s) and 2.0 / self.hold_hz <= self.deadman_s <= 5.0):
            raise ValueError(
                f"deadman_s must be in [2/hold_hz, 5] s = [{2.0 / self.hold_hz:.3f}, 5], got {self.deadman_s}"
            )
        if not 1 <= self.zero_ticks <= 100:
            raise ValueError(f"zero_ticks must be in 1-100, got {self.zero_ticks}")


def drive_command(speed: float, turn: float, limits: DriveLimits) -> tuple[float, float]:
    """``(vx, wz)`` (m/s, rad/s) from the slider values: :class:`SliderError` for a non-finite or non-numeric
    value, a finite one clamped to ``limits``."""
    try:
        vx, wz = float(speed), float(turn)
    except (TypeError, ValueError) as exc:
        raise SliderError(f"slider values must be numbers, got speed={speed!r} turn={turn!r}") from exc
    if not (math.isfinite(vx) and math.isfinite(wz)):
        raise SliderError(f"slider values must be finite, got speed={vx} turn={wz}: not driving")
    vx = min(max(vx, limits.vx_min), limits.vx_max)
    wz = min(max(wz, -limits.wz_max), limits.wz_max)
    return vx, wz


class DriveControl:
    """One driver at a time, deadman, zero on stop (module docstring). Thread-safe: the page's events come
    from viser's threads, :meth:`tick` from the node's timer. Times are wall seconds (any monotonic clock)."""

    def __init__(self, settings: DriveSettings | None = None, limits: DriveLimits | None = None) -> None:
        self.settings = settings or DriveSettings()
        self.limits = limits or DriveLimits()
        self._lock = threading.Lock()
        self._driver: int | None = None  # the driving page's client id
        self._last_hold = -math.inf
        self._command = (0.0, 0.0)
        self._zeros_left = 0
        self.refused = 0  # holds refused (another page drives, or bad slider values)
        self.stops: dict[str, int] = {"release": 0, "disconnect": 0, "deadman": 0}

    @property
    def driver(self) -> int | None:
        """The client id of the page that drives, or None."""
        with self._lock:
            return self._driver

    def set_limits(self, limits: DriveLimits) -> None:
        """New limits (the mode manager's parameters, read once it is up)."""
        with self._lock:
            self.limits = limits

    def hold(self, client: int, now: float, speed: float, turn: float) -> str | None:
        """A hold tick from page ``client`` with its slider values: None when accepted (it drives), else the
        reason it was refused (another page drives; bad slider values, which also stop this page's
        driving)."""
        with self._lock:
            self._expire(now)
            if self._driver is not None and self._driver != client:
                self.refused += 1
                return f"another console page (client {self._driver}) is driving: wait until it releases"
            try:
                command = drive_command(speed, turn, self.limits)
            except SliderError as exc:
                self.refused += 1
                if self._driver == client:
                    self._stop("release")
                return str(exc)
            self._driver = client
            self._last_hold = now
            self._command = command
            self._zeros_left = 0
            return None

    def release(self, client: int) -> bool:
        """Page ``client`` released the button; True when it was the driver (zeros follow)."""
        with self._lock:
            if self._driver != client:
                return False
            self._stop("release")
            return True

    def disconnect(self, client: int) -> bool:
        """Page ``client`` disconnected; True when it was the driver (zeros follow)."""
        with self._lock:
            if self._driver != client:
                return False
            self._stop("disconnect")
            return True

    def tick(self, now: float) -> tuple[float, float] | None:
        """The ``(vx, wz)`` to publish at this tick (m/s, rad/s): the driver's command, a zero after a stop
        (``zero_ticks`` times), or None (publish nothing)."""
        with self._lock:
            self._expire(now)
            if self._driver is not None:
                return self._command
            if self._zeros_left > 0:
                self._zeros_left -= 1
                return (0.0, 0.0)
            return None

    def _expire(self, now: float) -> None:
        if self._driver is not None and now - self._last_hold > self.settings.deadman_s:
            self._stop("deadman")

    def _stop(self, why: str) -> None:
        self._driver = None
        self._command = (0.0, 0.0)
        self._last_hold = -math.inf
        self._zeros_left = self.settings.zero_ticks
        self.stops[why] += 1
