"""``hardware:=can_mit``: the robot's joints driven by MIT-mode CAN actuators (python-can: SocketCAN on a
robot, the ``virtual`` interface against the emulators).

Each :meth:`write` sends one command frame per actuator (q*, dq*, kp, kd, tau_ff of its joint, mapped with the
joint's direction and offset of ``hardware.can_mit``, quantised to the actuator model's ranges, out-of-range
values clamped); the actuators run ``t + kp (p - q) + kd (v - dq)`` on board. :meth:`read` collects the
replies (position, velocity, torque) into joint states. The frames of all actuators are encoded and decoded
at once with numpy (:mod:`mit_batch`, bytes identical to :mod:`mit_can`'s per-frame codec) and sent bus by
bus (:class:`mit_batch.BatchHostBus`).

Start-up: every actuator is sent *enter motor mode* (``...FC``), which enables it with an empty command (zero
torque); its reply is the first measured state, from which the driver's ramp starts (soft start). Every
actuator must answer, or the backend refuses to start, naming the silent ones. :meth:`close` sends damping
frames, then *exit motor mode*.

Host-side supervision (:class:`~humanoid_control.hardware.watchdog.LinkMonitor`): an actuator without a reply
for ``max_missed_replies`` (3) consecutive periods, a bus error (a send that fails, a reply that does not
decode), or no command written for longer than ``command_timeout`` (25 ms, the firmware's own timeout) sets
:attr:`link_fault`; the driver then latches damping, and from then on every frame sent is a damping frame
(kp = 0, tau = 0, v = 0, the command's kd) until :meth:`reset_link`.

With ``emulator=True`` the actuators are :mod:`mit_g1_emulator`'s, in a thread of this process on virtual
buses, driving the simulated G1; the backend then takes the simulator's clock, IMU and truth. On a robot
(``emulator=False``) the IMU needs its own driver, which is not built: the backend refuses to start.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

import numpy as np

from humanoid_control.hardware.base import RobotBackend
from humanoid_control.hardware.can_io import open_bus
from humanoid_control.hardware.hardware_config import load_can_mit_config
from humanoid_control.hardware.mit_batch import BatchHostBus, MitBatchCodec
from humanoid_control.hardware.mit_can import ENTER_MOTOR_MODE, EXIT_MOTOR_MODE
from humanoid_control.hardware.mujoco_sim import ImuNoise
from humanoid_control.hardware.types import GroundTruth, LowLevelCommand, RobotState
from humanoid_control.hardware.watchdog import LinkMonitor, LinkMonitorConfig
from humanoid_control.model.robot_config import RobotConfig

_instances = itertools.count()


class CanMitBackend(RobotBackend):
    """MIT-mode CAN actuators (or their emulators) behind the driver's loop."""

    def __init__(
        self,
        config: RobotConfig,
        imu_noise: ImuNoise | None = None,
        network_interface: str = "",
        dds_domain: int = 0,
        emulator: bool = False,
        lockstep: bool = False,
        reply_timeout_s: float = 0.5,
    ) -> None:
        del network_interface, dds_domain  # DDS options of other backends
        if lockstep and not emulator:
            raise ValueError("lockstep needs the emulator: a robot runs in real time (clock:=realtime)")
        if not emulator:
            raise ValueError(
                "hardware can_mit on a robot needs an IMU driver, which is not built; use emulator:=true"
            )
            self.config = config
        self.hw = load_can_mit_config(config)
        problems = self.hw.coverage_problems(config)
        if problems:
            raise ValueError(f"hardware.can_mit cannot carry the robot's ranges: {'; '.join(problems)}")
        self.simulated = True
        self.lockstep = bool(lockstep)
        self.reply_timeout = float(reply_timeout_s)
        self.n = config.num_joints
        self.effort = config.array("effort")
        from humanoid_control.hardware.mit_g1_emulator import MitG1Emulator

        tag = f"humanoid-{os.getpid()}-{next(_instances)}"
        channels = {bus: f"{tag}-{bus}" for bus in self.hw.buses}
        self.emu = MitG1Emulator(config, self.hw, channels, lockstep, imu_noise)
        self.emu.start()
        self.buses = {
            bus: BatchHostBus(open_bus(channels[bus], "virtual"), [j for j in self.hw.joints if j.bus == bus])
            for bus in self.hw.buses
        }
        self._codec = MitBatchCodec(self.hw.joints)  # all actuators, robot joint order
        self._bus_index = {
            bus: np.array([i for i, j in enumerate(self.hw.joints) if j.bus == bus]) for bus in self.buses
        }
        self._replies = np.zeros((self.n, 8), dtype=np.uint8)
        self._index = {(j.bus, j.can_id): i for i, j in enumerate(self.hw.joints)}
        self.monitor = LinkMonitor(
            list(self._index),
            LinkMonitorConfig(command_timeout=self.hw.command_timeout, max_missed=self.hw.max_missed_replies),
        )
        self.link_fault: str | None = None
        self.clamped_frames = 0
        self.bus_errors: list[str] = []
        self.q = np.zeros(self.n)
        self.dq = np.zeros(self.n)
        self.tau = np.zeros(self.n)
        self._periods = 0
        self._missing: set[tuple[str, int]] = set()
        self._kd_in_force = config.gain_profile("stand").kd
        # enter motor mode (zero torque until the first command); every actuator must answer
        heard: set[tuple[str, int]] = set()
        for host in self.buses.values():
            host.send_special(ENTER_MOTOR_MODE)
        deadline = time.monotonic() + 5.0
        while len(heard) < len(self._index) and time.monotonic() < deadline:
            heard |= self._collect(0.05)
        silent = sorted(set(self._index) - heard)
        if silent:
            self.emu.stop()
            raise ConnectionError(f"actuators did not answer 'enter motor mode': {silent} (bus, CAN id)")

    # ------------------------------------------------------------------ bus helpers
    def _collect(self, timeout: float) -> set[tuple[str, int]]:
        """Replies of every bus (waiting up to ``timeout`` s on each bus for its missing ones)."""
        heard = set()
        got = np.zeros(self.n, dtype=bool)
        for bus, host in self.buses.items():
            # do not wait for actuators that already missed the last period (once is enough to count them)
            expected = sum(1 for j in host.can_ids if (bus, j) not in self._missing)
            on_bus, rows = host.receive_frames(timeout if expected else 0.0, expected=expected or None)
            idx = self._bus_index[bus]
            self._replies[idx[on_bus]] = rows[on_bus]
            got[idx[on_bus]] = True
            heard.update((bus, host.can_ids[k]) for k in np.flatnonzero(on_bus))
            self.bus_errors.extend(host.errors)
            host.errors = []
        if got.any():
            q, dq, tau = self._codec.decode_joint(self._replies)
            self.q[got], self.dq[got], self.tau[got] = q[got], dq[got], tau[got]
        return heard

    def _now(self) -> float:
        """The supervision clock (s): simulated time in lockstep, wall time otherwise."""
        return self.emu.time if self.lockstep else time.monotonic()

    # ------------------------------------------------------------------ backend interface
    @property
    def time(self) -> float:
        """Simulated time of the emulated robot (s)."""
        return self.emu.time

    def read(self) -> RobotState:
        """Joint states from the replies to the last frames sent; the IMU from the simulator."""
        if self._periods > 0:
            timeout = self.reply_timeout if self.lockstep else 0.5 * self.hw.period
            heard = self._collect(timeout)
            self._missing = set(self._index) - heard
            for key in heard:
                self.monitor.reply(key)
            for err in self.bus_errors:
                self.monitor.bus_error(err)
            self.bus_errors.clear()
            decision = self.monitor.check(self._now())
            if decision.damping and self.link_fault is None:
                self.link_fault = f"CAN link: {'; '.join(decision.reasons)}"
        s = self.emu.imu()
        return RobotState(
            stamp=s.stamp,
            q=self.q.copy(),
            dq=self.dq.copy(),
            tau=self.tau.copy(),
            imu_quat=s.imu_quat,
            gyro=s.gyro,
            accel=s.accel,
        )

    def write(self, command: LowLevelCommand) -> None:
        """One command frame per actuator (damping frames while :attr:`link_fault` is set)."""
        if self.link_fault is not None:
            zeros = np.zeros(self.n)
            command = LowLevelCommand(self.q.copy(), zeros, zeros, np.asarray(command.kd, float), zeros)
        self._kd_in_force = np.asarray(command.kd, float)
        frames, clamped = self._codec.encode_joint(
            command.q, command.dq, command.kp, command.kd, command.tau_ff
        )
        self.clamped_frames += int(clamped.any(axis=1).sum())
        for bus, host in self.buses.items():
            host.send_frames(frames[self._bus_index[bus]])
            self.bus_errors.extend(host.errors)
        if self._periods == 0:
            self.monitor.start(self._now())
        self.monitor.command(self._now())
        self._periods += 1

    def advance(self, dt: float) -> None:
        """Hardware: time passes by itself (lockstep: the emulator steps once it has every frame)."""

    def ground_truth(self) -> GroundTruth:
        """Simulation truth of the emulated robot."""
        return self.emu.ground_truth()

    def reset_link(self) -> None:
        """Re-arm after a link fault (the operator's reset)."""
        self.monitor.reset(self._now())
        self.link_fault = None

    def diagnostics(self) -> dict[str, Any]:
        """Backend values for ``/diagnostics``."""
        return {
            "link_fault": self.link_fault or "",
            "clamped_frames": self.clamped_frames,
            "emulator_ticks": self.emu.ticks,
            "actuator_timeouts": sum(a.timeouts for a in self.emu.actuators),
        }

    def close(self) -> None:
        """Damping frames, then exit motor mode; stop the emulator."""
        try:
            zeros = np.zeros(self.n)
            self.link_fault = self.link_fault or "closing"
            self.write(LowLevelCommand(self.q.copy(), zeros, zeros, self._kd_in_force, zeros))
            for host in self.buses.values():
                host.send_special(EXIT_MOTOR_MODE)
        finally:
            self.emu.stop()
            for host in self.buses.values():
                host.bus.shutdown()


__all__ = ["CanMitBackend"]
