"""MIT actuator emulators driving the simulated G1: one :class:`MitActuatorEmulator` per joint (firmware:
motor mode, PD law on the decoded frame, torque limit, 25 ms command timeout), served on python-can buses,
with MuJoCo physics behind them.

python-can's ``virtual`` interface connects bus objects of one process only, so the emulator runs as a thread
in the process of the host (the driver's ``can_mit`` backend); on a robot the buses are SocketCAN and this
module is not used.

Per physics step each actuator produces ``t + kp (p - q) + kd (v - dq)`` (its own quantised command, clamped
to its model's torque range; zero torque outside motor mode or after its firmware timeout) at its output
position ``q = direction * joint + offset``; the joint torque is ``direction * t``.

Clocks, as the G1 emulator's: **lockstep** - physics advances one period once every actuator received a
command frame, and the replies to those frames are sent after the step (they carry the state at the end of the
period), which makes runs reproducible; **realtime** - physics steps every period of wall time from the first
command frame on, and each frame is answered at once with the current state, as a firmware does.
Special frames (enter / exit / zero) are answered at once in both.

The IMU is not on the CAN buses: :meth:`MitG1Emulator.imu` reads it from the simulator (a robot needs its own
IMU driver, not built here).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import numpy as np

from humanoid_control.hardware.can_io import can, open_bus
from humanoid_control.hardware.hardware_config import CanMitConfig
from humanoid_control.hardware.mit_batch import send_frames
from humanoid_control.hardware.mit_can import special_frame
from humanoid_control.hardware.mit_emulator import MitActuatorEmulator, MitBusEmulator, MotorModel
from humanoid_control.hardware.mujoco_sim import ImuNoise, MujocoBackend
from humanoid_control.hardware.types import GroundTruth, LowLevelCommand, RobotState
from humanoid_control.model.robot_config import RobotConfig


class MitG1Emulator:
    """The simulated G1 behind emulated MIT actuators on virtual CAN ``channels`` (bus name -> channel)."""

    def __init__(
        self,
        config: RobotConfig,
        hw: CanMitConfig,
        channels: dict[str, str],
        lockstep: bool,
        imu_noise: ImuNoise | None = None,
    ) -> None:
        self.config = config
        self.hw = hw
        self.lockstep = bool(lockstep)
        self.sim = MujocoBackend(config, imu_noise=imu_noise)
        steps = hw.period / config.simulation.timestep
        if abs(steps - round(steps)) > 1e-6:
            raise ValueError(f"hardware.can_mit.period {hw.period} s is not a whole number of physics steps")
        model = MotorModel(timeout=hw.command_timeout)
        self.actuators: list[MitActuatorEmulator] = [
            MitActuatorEmulator(j.can_id, j.ranges, model) for j in hw.joints
        ]
        self.emulators = {
            bus: MitBusEmulator(
                [a for a, j in zip(self.actuators, hw.joints, strict=True) if j.bus == bus], hw.host_id
            )
            for bus in hw.buses
        }
        self.buses = {bus: open_bus(channels[bus], "virtual") for bus in hw.buses}
        self.direction = np.array([j.direction for j in hw.joints], dtype=float)
        self.offset = np.array([j.offset for j in hw.joints], dtype=float)
        self._all = {(j.bus, j.can_id) for j in hw.joints}
        self._tick_frames: set[tuple[str, int]] = set()
        self._held: list[tuple[str, int]] = []  # lockstep: frames answered after the step
        self._started = False
        self.lock = threading.Lock()
        self.ticks = 0
        self._update_actuators(np.zeros(len(hw.joints)))
        self._snapshot()
        self._running = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start serving the buses (and, in realtime, stepping physics) on a thread."""
        self._running = True
        self._thread = threading.Thread(target=self._run, name="mit_emulator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close the emulator's bus ends."""
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        for bus in self.buses.values():
            bus.shutdown()

    def silence(self, bus: str, can_id: int, silent: bool = True) -> None:
        """Make an actuator stop answering (it still obeys), or answer again."""
        with self.lock:
            s = self.emulators[bus].silenced
            s.add(can_id) if silent else s.discard(can_id)

    # ------------------------------------------------------------------ readings (any thread)
    def imu(self) -> RobotState:
        """The simulator's state at the last step (the IMU fields are what the backend uses)."""
        with self.lock:
            return self._state

    def ground_truth(self) -> GroundTruth:
        """Simulation truth at the last step."""
        with self.lock:
            return self._truth

    @property
    def time(self) -> float:
        """Simulated time (s)."""
        return float(self.sim.time)

    # ------------------------------------------------------------------ thread
    def _snapshot(self) -> None:
        self._state = self.sim.read()
        self._truth = self.sim.ground_truth()

    def _update_actuators(self, joint_torque_out: np.ndarray) -> np.ndarray:
        """Tell every actuator its output state; the joint torques they produce now (N m)."""
        d = self.sim.data
        q = np.asarray(d.qpos[self.sim.mj.qpos_adr])
        dq = np.asarray(d.qvel[self.sim.mj.qvel_adr])
        raw = self.direction * q + self.offset
        vel = self.direction * dq
        now = self.time
        for i, a in enumerate(self.actuators):
            joint_torque_out[i] = self.direction[i] * a.update(raw[i], vel[i], now, self.hw.period)
        return joint_torque_out

    def _step(self) -> None:
        """One period of physics under the actuators' torques (lock held)."""
        tau = self._update_actuators(np.zeros(len(self.actuators)))
        zeros = np.zeros_like(tau)
        self.sim.write(LowLevelCommand(zeros, zeros, zeros, zeros, tau))
        self.sim.advance(self.hw.period)
        self._update_actuators(np.zeros(len(self.actuators)))  # replies carry the new state
        self._snapshot()
        self.ticks += 1

    def _send(self, bus: str, arbitration_id: int, data: bytes) -> None:
        self._send_many(bus, [arbitration_id], [data])

    def _send_many(self, bus: str, ids: list[int], data: list[bytes]) -> None:
        """Frames out on ``bus`` in one go (:func:`mit_batch.send_frames`); errors ignored: the host's end
        is gone (shutting down)."""
        with contextlib.suppress(can.CanError):
            send_frames(self.buses[bus], ids, data)

    def _run(self) -> None:
        deadline = time.perf_counter()
        last = list(self.buses)[-1]  # the host sends bus by bus: a frame here means the others' are queued
        while self._running:
            got = False
            if self.lockstep:  # block (cheaply) until the host's frames of a period arrive
                msg = self.buses[last].recv(timeout=0.005)
                if msg is not None:
                    got = True
                    self._handle(last, msg)
            for bus, end in self.buses.items():
                msg = end.recv(timeout=0.0)
                while msg is not None:
                    got = True
                    self._handle(bus, msg)
                    msg = end.recv(timeout=0.0)
            if self.lockstep:
                with self.lock:
                    if self._tick_frames >= self._all:
                        self._step()
                        replies: dict[str, list[bytes]] = {}
                        for b, can_id in self._held:
                            if can_id not in self.emulators[b].silenced:
                                replies.setdefault(b, []).append(self.emulators[b].actuators[can_id].reply())
                        for b, frames in replies.items():  # a bus's replies at once
                            self._send_many(b, [self.hw.host_id] * len(frames), frames)
                        self._held.clear()
                        self._tick_frames.clear()
            else:
                now = time.perf_counter()
                if now >= deadline:
                    with self.lock:
                        if self._started:
                            self._step()
                    deadline += self.hw.period
                    if now - deadline > self.hw.period:
                        deadline = now
                if not got:
                    time.sleep(min(0.0002, max(0.0, deadline - time.perf_counter())))

    def _handle(self, bus: str, msg: Any) -> None:
        if msg.is_extended_id or not msg.data:
            return
        data = bytes(msg.data)
        can_id = int(msg.arbitration_id)
        with self.lock:
            emu = self.emulators[bus]
            if can_id not in emu.actuators:
                return
            is_command = special_frame(data) is None
            if self.lockstep and is_command:
                a = emu.actuators[can_id]
                if a.receive(data, self.time) is not None:
                    self._tick_frames.add((bus, can_id))
                    self._held.append((bus, can_id))
                return
            if is_command:
                self._started = True
            replies = emu.handle(can_id, data, self.time)
        for arbitration_id, reply in replies:
            self._send(bus, arbitration_id, reply)


__all__ = ["MitG1Emulator"]
