"""Hardware backend interface: what the robot driver needs from a simulator or a real robot.

A backend owns one robot. The driver calls, once per tick: :meth:`RobotBackend.read` (sensors),
:meth:`RobotBackend.write` (the joint-level command, held until the next write) and
:meth:`RobotBackend.advance` (simulators integrate physics for the tick; hardware returns at once because
time passes by itself).
A real robot's motor drivers run the law ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff`` on board; a simulator
backend evaluates it at every physics step. Add a backend by subclassing and registering it in
``humanoid_control.hardware.registry.BACKENDS``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from humanoid_control.hardware.types import GroundTruth, LowLevelCommand, RobotState


class RobotBackend(ABC):
    """A simulator or a real robot behind the driver's real-time loop."""

    #: True for simulators: the driver publishes /clock and /sim/* and may run lockstep.
    simulated: bool = False

    @abstractmethod
    def read(self) -> RobotState:
        """Read the sensors."""

    @abstractmethod
    def write(self, command: LowLevelCommand) -> None:
        """Set the joint-level command applied until the next write."""

    @abstractmethod
    def advance(self, dt: float) -> None:
        """Let ``dt`` seconds pass (simulators integrate; hardware returns immediately)."""

    def ground_truth(self) -> GroundTruth | None:
        """Simulator truth, or None on hardware."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release resources (put hardware in a safe state)."""
