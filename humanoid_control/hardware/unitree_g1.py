"""``hardware:=unitree_g1``: the Unitree G1 over its low-level DDS protocol (``rt/lowcmd`` / ``rt/lowstate``,
``unitree_hg`` messages) through the Unitree SDK's DDS participant; LowCmd / LowState go over the wire as
raw CDR encoded and decoded with numpy (:mod:`unitree_cdr`, byte-exact with the SDK's serialisation, about a
tenth of its cost).

The robot's own motor drivers run the law ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff``: each :meth:`write`
sends one ``LowCmd_`` with the driver's per-joint q*, dq*, kp, kd, tau_ff, mapped to motor slots with the
directions and offsets of ``hardware.unitree_g1`` in the robot configuration (unused slots: mode 0, all zero),
``mode_pr`` from that configuration, ``mode_machine`` copied from the latest ``LowState_``, CRC sealed.
:meth:`read` turns the latest ``LowState_`` (CRC checked; a bad one is counted and ignored) into joint states
and the IMU (orientation w x y z, gyroscope, accelerometer in the IMU frame).

Safety on the host side (the driver's core does the rest: soft start by a ramp from the measured pose, limits,
hold -> active handshake, e-stop -> damping; the backend only reports):

- :attr:`link_fault`: LowState not received for more than ``max_missed`` (3) periods (realtime: wall time
  since the latest LowState; lockstep: reads that found none within ``state_timeout_s``). The driver then
  latches damping and says so on ``/diagnostics``; from then on :meth:`write` sends damping frames whatever it
  is given (kp = 0, tau_ff = 0, dq* = 0, the command's kd), until :meth:`reset_link`.
- :attr:`activation_blocker`: the motors do not follow the commands (:mod:`follow_check`; the sport service
  not released): the driver refuses to let a controller take the robot, with the message.

Against the G1 emulator (``emulator=True``; :mod:`g1_emulator`): the backend takes the emulator's simulated
clock (LowState ``tick``, ms) and its simulation truth (``emu/ground_truth``), so the driver publishes
``/clock`` and ``/sim/ground_truth`` as with MuJoCo; with ``lockstep=True`` each :meth:`read` waits for the
LowState that answers the previous LowCmd (the emulator steps physics once per LowCmd), which makes runs
reproducible. On a robot (``emulator=False``) the time is the wall clock and there is no truth.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from humanoid_control.hardware import unitree_dds as dds
from humanoid_control.hardware.base import RobotBackend
from humanoid_control.hardware.follow_check import FollowCheckConfig, FollowMonitor
from humanoid_control.hardware.hardware_config import load_unitree_g1_config
from humanoid_control.hardware.mujoco_sim import ImuNoise
from humanoid_control.hardware.types import GroundTruth, LowLevelCommand, RobotState, Wrench
from humanoid_control.hardware.unitree_cdr import RawReader, RawWriter, lowcmd_codec, lowstate_codec
from humanoid_control.hardware.unitree_hg import (
    RemoteState,
    UnitreeMessageError,
    decode_wireless_remote,
    new_lowcmd,
)
from humanoid_control.hardware.watchdog import LinkMonitor, LinkMonitorConfig
from humanoid_control.model.robot_config import RobotConfig


class UnitreeG1Backend(RobotBackend):
    """The G1 (or its emulator) behind the driver's loop."""

    def __init__(
        self,
        config: RobotConfig,
        imu_noise: ImuNoise | None = None,
        network_interface: str = "eth0",
        dds_domain: int = 0,
        emulator: bool = False,
        lockstep: bool = False,
        connect_timeout_s: float = 30.0,
        state_timeout_s: float = 2.0,
        max_missed: int = 3,
        follow_check: FollowCheckConfig | None = None,
    ) -> None:
        if lockstep and not emulator:
            raise ValueError("lockstep needs the emulator: a robot runs in real time (clock:=realtime)")
        del imu_noise  # a real IMU has its own noise; the emulator adds none
        self.config = config
        self.hw = load_unitree_g1_config(config)
        self.simulated = bool(emulator)
        self.emulator = bool(emulator)
        self.lockstep = bool(lockstep)
        self.state_timeout = float(state_timeout_s)
        self.effort = config.array("effort")
        self.monitor = LinkMonitor(
            ["lowstate"], LinkMonitorConfig(command_timeout=1e9, max_missed=max_missed)
        )
        self.follow = FollowMonitor(config.joint_names, self.effort, follow_check)
        self.link_fault: str | None = None
        self.counters = {
            "lowstate_received": 0,
            "lowstate_bad_crc": 0,
            "lowcmd_sent": 0,
            "lowstate_timeouts": 0,
        }
        self.roundtrip_s: list[float] = []  # lockstep: LowCmd written -> the LowState answering it read
        self._cond = threading.Condition()
        self._state: np.ndarray | None = None
        self._state_tick = -1
        self._consumed_tick = -1
        self._truth: dict[int, Any] = {}
        self._periods = 0
        self._last_cmd_msg: bytes | None = None
        self._cmd_codec = lowcmd_codec()  # the driver's thread
        self._state_codec = lowstate_codec()  # DDS's listener thread
        self._last_write = 0.0
        self._prev: tuple[LowLevelCommand, np.ndarray, np.ndarray] | None = None
        self._measured: RobotState | None = None
        self._t0 = time.monotonic()
        self._arrival = self._t0
        self.max_missed = int(max_missed)

        dds.init_channels(dds_domain, network_interface)
        lowcmd_t, lowstate_t = dds.hg_types()
        # LowCmd / LowState: raw CDR through numpy (unitree_cdr), the SDK's IDL types for the topics
        self._pub: RawWriter | None = RawWriter(self.hw.lowcmd_topic, lowcmd_t)
        self._sub_truth = (
            dds.subscriber(dds.TRUTH_TOPIC, dds.truth_type(), self._on_truth) if self.emulator else None
        )
        self._sub: RawReader | None = RawReader(self.hw.lowstate_topic, lowstate_t, self._on_lowstate)
        deadline = time.monotonic() + connect_timeout_s
        with self._cond:
            while self._state is None or (self.emulator and self._state_tick not in self._truth):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConnectionError(
                        f"no LowState on '{self.hw.lowstate_topic}' within {connect_timeout_s:g} s "
                        f"(DDS domain "
                        f"{dds_domain}, interface '{network_interface}'): is the robot on, on this network, "
                        f"{'the emulator running' if emulator else 'its Ethernet port the interface'}?"
                    )
                self._cond.wait(min(left, 0.1))
        self.mode_machine = int(self._state["mode_machine"])

    # ------------------------------------------------------------------ DDS in (listener threads)
    def _on_lowstate(self, data: bytes) -> None:
        try:
            rec, ok = self._state_codec.decode_checked(data)
        except UnitreeMessageError:
            rec, ok = None, False
        with self._cond:
            if rec is None or not ok:
                self.counters["lowstate_bad_crc"] += 1
                return
            self.counters["lowstate_received"] += 1
            tick = int(rec["tick"])
            self._state, self._state_tick = rec, tick
            self._arrival = time.monotonic()
            self._cond.notify_all()

    def _on_truth(self, msg: Any) -> None:
        with self._cond:
            self._truth[int(msg.tick)] = msg
            for old in [t for t in self._truth if t < int(msg.tick) - 200]:
                del self._truth[old]
            self._cond.notify_all()

    # ------------------------------------------------------------------ backend interface
    @property
    def time(self) -> float:
        """Emulator: its simulated time (LowState tick, s). Robot: seconds since the backend started."""
        if self.emulator:
            return max(self._state_tick, 0) * 1e-3
        return time.monotonic() - self._t0

    def read(self) -> RobotState:
        """The latest LowState as joint states and IMU. Lockstep: waits (``state_timeout_s``) for the one
        answering the last LowCmd; none within it counts as a lost period."""
        with self._cond:
            fresh = self._state_tick != self._consumed_tick
            if self.lockstep and not fresh:
                deadline = time.monotonic() + self.state_timeout
                while self._state_tick == self._consumed_tick or (
                    self.emulator and self._state_tick not in self._truth
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, 0.02))
                fresh = self._state_tick != self._consumed_tick
                if not fresh:
                    # never resent: a LowCmd that did arrive late would step the emulator twice
                    self.counters["lowstate_timeouts"] += 1
            if fresh:
                self.monitor.reply("lowstate")
                if self.lockstep and self._last_cmd_msg is not None:
                    self.roundtrip_s.append(time.perf_counter() - self._last_write)
                    del self.roundtrip_s[:-100000]
            self._periods += 1
            if self.lockstep:  # a period is a read: count the reads without the LowState they waited for
                decision = self.monitor.check(self._periods * self.hw.period)
                if decision.damping and self.link_fault is None:
                    self.link_fault = (
                        f"LowState lost: none for {self.monitor.config.max_missed} periods of "
                        f"{self.hw.period * 1e3:g} ms ({'; '.join(decision.reasons)})"
                    )
            else:  # wall time since the latest LowState (reads of a late loop come in bursts)
                age = time.monotonic() - self._arrival
                if age > self.max_missed * self.hw.period and self.link_fault is None:
                    self.link_fault = (
                        f"LowState lost: none for {age * 1e3:.1f} ms (more than {self.max_missed} periods of "
                        f"{self.hw.period * 1e3:g} ms)"
                    )
            self._consumed_tick = self._state_tick
            rec = self._state
        assert rec is not None
        m = rec["motor_state"]
        q, dq, tau = self.hw.joint_state(m["q"], m["dq"], m["tau_est"])
        imu = rec["imu_state"]
        state = RobotState(
            stamp=self.time if self.emulator else time.time(),
            q=q,
            dq=dq,
            tau=tau,
            imu_quat=imu["quaternion"].astype(float),
            gyro=imu["gyroscope"].astype(float),
            accel=imu["accelerometer"].astype(float),
        )
        if fresh and self._prev is not None:
            cmd, q0, dq0 = self._prev
            self.follow.update(cmd, q0, dq0, tau)
        self._measured = state
        return state

    def write(self, command: LowLevelCommand) -> None:
        """Send ``command`` as one LowCmd (damping frames instead while :attr:`link_fault` is set)."""
        if self.link_fault is not None:
            command = self.damping(command.kd)
        if self._measured is not None:
            self._prev = (command, self._measured.q, self._measured.dq)
        motor = self.hw.motor_command(command)
        rec = new_lowcmd()
        rec["mode_pr"] = self.hw.mode_pr
        rec["mode_machine"] = self.mode_machine
        mc = rec["motor_cmd"]
        for key in ("mode", "q", "dq", "tau", "kp", "kd"):
            mc[key] = motor[key]
        data, _ = self._cmd_codec.encode_sealed(rec)
        with self._cond:
            self._last_cmd_msg = data
            self._last_write = time.perf_counter()
        if self._pub is None:
            raise RuntimeError("the backend is closed")
        self._pub.write(data)
        self.counters["lowcmd_sent"] += 1

    def advance(self, dt: float) -> None:
        """Hardware: time passes by itself (lockstep: the next :meth:`read` waits for the emulator)."""

    def damping(self, kd: np.ndarray) -> LowLevelCommand:
        """The damping law on the wire: kp = 0, tau_ff = 0, dq* = 0, damping ``kd`` (q* = the measured q)."""
        n = self.config.num_joints
        q = self._measured.q.copy() if self._measured is not None else np.zeros(n)
        return LowLevelCommand(q, np.zeros(n), np.zeros(n), np.asarray(kd, float).copy(), np.zeros(n))

    @property
    def activation_blocker(self) -> str | None:
        """Why a controller may not take the robot now (the motors do not follow), or None."""
        return self.follow.problem

    def reset_link(self) -> None:
        """Re-arm after a link fault (the operator's reset)."""
        with self._cond:
            self.monitor.reset(self._periods * self.hw.period)
            self._arrival = time.monotonic()
            self.link_fault = None

    def remote(self) -> RemoteState | None:
        """The robot's remote as in the latest LowState."""
        with self._cond:
            rec = self._state
        return None if rec is None else decode_wireless_remote(rec["wireless_remote"])

    def ground_truth(self) -> GroundTruth | None:
        """Emulator only: the simulation truth of the tick last read."""
        if not self.emulator:
            return None
        with self._cond:
            t = self._truth.get(self._consumed_tick)
        if t is None:
            return None
        c = np.asarray(t.contacts, dtype=float)
        feet = self.config.feet
        return GroundTruth(
            position=np.asarray(t.position, float),
            quat=np.asarray(t.quat, float),
            linear_velocity_body=np.asarray(t.linear_velocity_body, float),
            angular_velocity_body=np.asarray(t.angular_velocity_body, float),
            contacts={
                "left": Wrench(feet["left"].sole_frame, c[0:3], c[3:6]),
                "right": Wrench(feet["right"].sole_frame, c[6:9], c[9:12]),
            },
        )

    def diagnostics(self) -> dict[str, Any]:
        """Backend values for ``/diagnostics``."""
        out: dict[str, Any] = dict(self.counters)
        out["mode_machine"] = self.mode_machine
        out["link_fault"] = self.link_fault or ""
        out["motors_follow"] = self.follow.problem is None
        out["follow_worst_ratio"] = round(self.follow.worst_ratio, 4)
        rt = self.roundtrip_s[-5000:]
        if rt:
            out["roundtrip_us_median"] = round(float(np.median(rt)) * 1e6, 1)
            out["roundtrip_us_p99"] = round(float(np.percentile(rt, 99)) * 1e6, 1)
        return out

    def close(self) -> None:
        """Leave the robot damped (a few damping frames, kd of the stand profile), then close the channels."""
        kd = self.config.gain_profile("stand").kd
        for _ in range(3):
            try:
                self.write(self.damping(kd))
            except Exception:
                break
        for raw in (self._sub, self._pub):
            if raw is not None:
                raw.close()
        if self._sub_truth is not None:
            self._sub_truth.Close()
        self._sub = self._sub_truth = self._pub = None


__all__ = ["UnitreeG1Backend"]
