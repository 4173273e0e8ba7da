"""G1 emulator: the Unitree G1's low-level DDS interface (``rt/lowcmd`` / ``rt/lowstate``, ``unitree_hg``)
with MuJoCo physics behind it, for testing the ``unitree_g1`` backend without a robot.

What it does with each ``LowCmd_`` (as the robot does, as far as the references say):

- checks the CRC over the message's C layout and **drops** a frame whose CRC is wrong (``crc_dropped``);
- drops a frame whose ``mode_machine`` differs from the one it reports in ``LowState_`` (an assumption: the
  SDK examples copy it from LowState for this reason; ``mode_machine_dropped``);
- otherwise runs the motors' own PD on it: per motor slot with ``mode`` 1,
  ``tau = kp (q* - q) + kd (dq* - dq) + tau`` at every physics step (the same law as the MuJoCo backend,
  clamped to the effort limits), motor slots mapped to joints by the robot configuration's
  ``hardware.unitree_g1`` (order, directions, offsets); a slot with ``mode`` 0 produces no torque;
- with **sport mode** on (``sport_mode``; the robot's own loco service not released with MotionSwitcher), it
  ignores every LowCmd (``ignored_sport_mode``) and its own controller holds the spawn pose with the ``stand``
  gains: what users report as commands silently ignored.

``LowState_`` carries the motor states (q, dq, tau_est = the torque applied over the last tick), the IMU
(quaternion w x y z, gyroscope, accelerometer, rpy), ``tick`` (ms of simulated time), ``mode_machine``,
``wireless_remote`` (settable: :meth:`G1Emulator.set_remote`) and its CRC. ``pause_lowstate`` stops publishing
LowState (physics runs on in realtime) to test the host's reaction to a lost state stream.

Two clocks:

- **lockstep** (reproducible; the evaluations): physics advances one period (2 ms) per LowCmd received with a
  valid CRC, then the next LowState goes out. While no command comes, the current LowState is sent again every
  ``republish_s`` of wall time (DDS discovery; a lost sample). Physics is then independent of the machine's
  speed, unlike a robot.
- **realtime** (like a robot): a thread steps physics every period of wall time (sleeping to absolute
  deadlines) with the latest command and publishes LowState each period. Physics starts with the first LowCmd
  (until then the robot hangs still, as in its harness); the motors keep the last command they received (an
  assumption: the references say nothing of a G1 command timeout).

LowCmd / LowState go over DDS as bytes encoded and decoded with numpy (:mod:`unitree_cdr`, the SDK's wire
format byte for byte), not through the SDK's Python IDL objects.

Beside LowState, each tick's simulation truth goes out on ``emu/ground_truth`` (:mod:`unitree_dds`), an
emulator-only topic that lets the driver publish ``/sim/ground_truth`` for evaluations.

Run it as its own process: ``g1_emulator`` (a ROS 2 node: parameters, ``~/pause_lowstate`` and
``~/sport_mode`` services (std_srvs/SetBool), ``~/remote`` (sensor_msgs/Joy in -> ``wireless_remote``),
``~/status`` (std_msgs/String, JSON counters)); ``humanoid-launch launch/sim.launch.yaml hardware:=unitree_g1
emulator:=true`` starts it.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from humanoid_control.hardware import unitree_dds as dds
from humanoid_control.hardware.hardware_config import UnitreeG1Config, load_unitree_g1_config
from humanoid_control.hardware.mujoco_sim import ImuNoise, MujocoBackend
from humanoid_control.hardware.types import LowLevelCommand
from humanoid_control.hardware.unitree_cdr import RawReader, RawWriter, lowcmd_codec, lowstate_codec
from humanoid_control.hardware.unitree_hg import (
    RemoteState,
    UnitreeMessageError,
    encode_wireless_remote,
    new_lowstate,
)
from humanoid_control.model.robot_config import RobotConfig

#: ``mode_machine`` the emulator reports (the G1's value is the robot type; 5 is assumed for the 29-DoF G1)
DEFAULT_MODE_MACHINE = 5


@dataclass
class G1EmulatorSettings:
    """Emulator options.

    Attributes:
        lockstep: physics advances one period per valid LowCmd (True) or with wall time (False).
        sport_mode: start with the sport service on (LowCmd ignored).
        mode_machine: value reported in LowState (and required in LowCmd).
        republish_s: lockstep: resend the current LowState after this much wall time without a command (s).
    """

    lockstep: bool = True
    sport_mode: bool = False
    mode_machine: int = DEFAULT_MODE_MACHINE
    republish_s: float = 0.05


def quat_to_rpy(quat_wxyz: np.ndarray) -> np.ndarray:
    """Roll, pitch, yaw (rad, ZYX) of a (w, x, y, z) quaternion."""
    w, x, y, z = quat_wxyz
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.array([roll, pitch, yaw])


class G1Emulator:
    """The emulated G1: MuJoCo physics behind ``rt/lowcmd`` / ``rt/lowstate`` (see the module docstring)."""

    def __init__(
        self,
        config: RobotConfig,
        settings: G1EmulatorSettings | None = None,
        imu_noise: ImuNoise | None = None,
    ) -> None:
        self.config = config
        self.settings = settings or G1EmulatorSettings()
        self.hw: UnitreeG1Config = load_unitree_g1_config(config)
        self.sim = MujocoBackend(config, imu_noise=imu_noise)
        steps = self.hw.period / config.simulation.timestep
        if abs(steps - round(steps)) > 1e-6:
            raise ValueError(
                f"hardware.unitree_g1.period {self.hw.period} s is not a whole number of physics steps"
            )
        self.period_ms = round(self.hw.period * 1000)
        self.tick_ms = 0
        self.sport_mode = bool(self.settings.sport_mode)
        self.lowstate_paused = False
        self.remote = RemoteState()
        self.counters = {
            "lowcmd_received": 0,
            "crc_dropped": 0,
            "mode_machine_dropped": 0,
            "ignored_sport_mode": 0,
            "applied": 0,
            "lowstate_sent": 0,
            "ticks": 0,
        }
        self.last_applied: LowLevelCommand | None = None  # joint space, the last command the motors ran
        self._sport_pose = self.sim.read().q.copy()
        stand = config.gain_profile("stand")
        zeros = np.zeros(config.num_joints)
        self._sport_command = LowLevelCommand(self._sport_pose, zeros, stand.kp, stand.kd, zeros)
        self._cond = threading.Condition()
        self._queue: list[LowLevelCommand | None] = []  # lockstep: commands (None: ignored) to step with
        self._command: LowLevelCommand | None = None
        self._started = False  # realtime: physics starts with the first LowCmd (the robot hangs until then)
        self._running = False
        self._thread: threading.Thread | None = None
        self._pub_state: Any = None
        self._pub_truth: Any = None
        self._sub: Any = None
        self._sdk_state: Any = None
        self._cmd_codec = lowcmd_codec()  # DDS's listener thread
        self._state_codec = lowstate_codec()  # under the lock

    # ------------------------------------------------------------------ lifecycle
    def start(self, domain: int, interface: str) -> None:
        """Open the DDS channels (SDK, ``domain``, network ``interface``) and start the emulator thread."""
        dds.init_channels(domain, interface)
        lowcmd_t, lowstate_t = dds.hg_types()
        # LowCmd / LowState as raw CDR through numpy (unitree_cdr); the truth topic through the SDK's classes
        self._pub_state = RawWriter(self.hw.lowstate_topic, lowstate_t)
        self._pub_truth = dds.publisher(dds.TRUTH_TOPIC, dds.truth_type())
        self._sub = RawReader(self.hw.lowcmd_topic, lowcmd_t, self._on_lowcmd)
        self._running = True
        target = self._run_lockstep if self.settings.lockstep else self._run_realtime
        self._thread = threading.Thread(target=target, name="g1_emulator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the emulator thread and close its DDS channels (no callback reaches it afterwards)."""
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        for raw in (self._sub, self._pub_state):
            if raw is not None:
                raw.close()
        if self._pub_truth is not None:
            self._pub_truth.Close()
        self._sub = self._pub_state = self._pub_truth = None

    # ------------------------------------------------------------------ controls
    def set_sport_mode(self, on: bool) -> None:
        """Sport service on (LowCmd ignored, own stand controller) or released (MotionSwitcher)."""
        with self._cond:
            self.sport_mode = bool(on)

    def pause_lowstate(self, paused: bool) -> None:
        """Stop (True) or resume publishing LowState."""
        with self._cond:
            self.lowstate_paused = bool(paused)

    def set_remote(self, remote: RemoteState) -> None:
        """The remote's state sent in ``wireless_remote``."""
        with self._cond:
            self.remote = remote

    def status(self) -> dict[str, Any]:
        """Counters and switches (JSON-ready)."""
        with self._cond:
            out: dict[str, Any] = dict(self.counters)
            out.update(
                time=round(self.tick_ms * 1e-3, 6),
                lockstep=self.settings.lockstep,
                sport_mode=self.sport_mode,
                lowstate_paused=self.lowstate_paused,
                mode_machine=self.settings.mode_machine,
            )
            cmd = self.last_applied
            out["last_kp_max"] = None if cmd is None else round(float(np.max(cmd.kp)), 6)
            out["last_tau_ff_abs_max"] = None if cmd is None else round(float(np.max(np.abs(cmd.tau_ff))), 6)
            out["base_height"] = round(self.sim.base_height(), 4)
        return out

    # ------------------------------------------------------------------ DDS in
    def _on_lowcmd(self, data: bytes) -> None:
        """DDS listener thread: check a LowCmd (serialised sample) and hand it to the physics."""
        try:
            rec, ok = self._cmd_codec.decode_checked(data)
        except UnitreeMessageError:
            with self._cond:
                self.counters["crc_dropped"] += 1
            return
        with self._cond:
            self.counters["lowcmd_received"] += 1
            if not ok:
                self.counters["crc_dropped"] += 1  # the robot drops it: no motion, no tick in lockstep
                return
            if int(rec["mode_machine"]) != self.settings.mode_machine:
                self.counters["mode_machine_dropped"] += 1
                return
            if self.sport_mode:
                self.counters["ignored_sport_mode"] += 1
                command = None
            else:
                command = self._joint_command(rec)
                self.counters["applied"] += 1
            self._started = True
            if self.settings.lockstep:
                self._queue.append(command)
            elif command is not None:
                self._command = command
            self._cond.notify_all()

    def _joint_command(self, rec: np.ndarray) -> LowLevelCommand:
        """Joint-space law of the motor slots (disabled slots: no torque)."""
        m = rec["motor_cmd"]
        idx, sign, off = self.hw.index, self.hw.direction, self.hw.offset
        on = m["mode"][idx].astype(float) > 0
        return LowLevelCommand(
            q=sign * (m["q"][idx].astype(float) - off),
            dq=sign * m["dq"][idx].astype(float),
            kp=np.where(on, m["kp"][idx].astype(float), 0.0),
            kd=np.where(on, m["kd"][idx].astype(float), 0.0),
            tau_ff=np.where(on, sign * m["tau"][idx].astype(float), 0.0),
        )

    # ------------------------------------------------------------------ physics
    def _step(self, command: LowLevelCommand | None) -> None:
        """One period of physics under ``command`` (None: keep the last); lock held."""
        if self.sport_mode:
            law = self._sport_command
        else:
            if command is not None:
                self._command = command
            law = self._command
        if law is not None:
            self.sim.write(law)
            self.last_applied = law
        self.sim.advance(self.hw.period)
        self.tick_ms += self.period_ms
        self.counters["ticks"] += 1

    def _lowstate(self) -> tuple[bytes, Any]:
        """Serialised LowState (CRC sealed) and truth of the current simulation state; lock held."""
        state = self.sim.read()
        rec = new_lowstate()
        rec["mode_pr"] = self.hw.mode_pr
        rec["mode_machine"] = self.settings.mode_machine
        rec["tick"] = self.tick_ms & 0xFFFFFFFF
        imu = rec["imu_state"]
        imu["quaternion"] = state.imu_quat
        imu["gyroscope"] = state.gyro
        imu["accelerometer"] = state.accel
        imu["rpy"] = quat_to_rpy(state.imu_quat)
        m = rec["motor_state"]
        idx, sign, off = self.hw.index, self.hw.direction, self.hw.offset
        m["mode"][idx] = 1
        m["q"][idx] = sign * state.q + off
        m["dq"][idx] = sign * state.dq
        m["tau_est"][idx] = sign * state.tau
        rec["wireless_remote"] = np.frombuffer(encode_wireless_remote(self.remote), dtype=np.uint8)
        msg, _ = self._state_codec.encode_sealed(rec)
        g = self.sim.ground_truth()
        c = g.contacts
        contacts = [
            *c["left"].force, *c["left"].torque, *c["right"].force, *c["right"].torque
        ]  # fmt: skip
        truth = dds.truth_type()(
            tick=int(rec["tick"]),
            time=float(self.sim.time),
            position=[float(v) for v in g.position],
            quat=[float(v) for v in g.quat],
            linear_velocity_body=[float(v) for v in g.linear_velocity_body],
            angular_velocity_body=[float(v) for v in g.angular_velocity_body],
            contacts=[float(v) for v in contacts],
        )
        return msg, truth

    def _publish(self) -> None:
        """Send the current LowState and truth unless LowState is paused (lock held)."""
        if self.lowstate_paused:
            return
        msg, truth = self._lowstate()
        # truth first: a host waiting for a tick's LowState then finds its truth already there
        self._pub_truth.Write(truth)
        self._pub_state.write(msg)
        self.counters["lowstate_sent"] += 1

    def _run_lockstep(self) -> None:
        with self._cond:
            self._publish()
            while self._running:
                if not self._queue:
                    if not self._cond.wait(self.settings.republish_s):
                        self._publish()  # nobody answered (discovery, a lost sample): send it again
                    continue
                self._step(self._queue.pop(0))
                self._publish()

    def _run_realtime(self) -> None:
        deadline = time.perf_counter()
        while self._running:
            with self._cond:
                if self._started:
                    self._step(None)
                self._publish()
            deadline += self.hw.period
            delay = deadline - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            elif delay < -self.hw.period:
                deadline = time.perf_counter()  # far behind: do not burst


# ---------------------------------------------------------------------------------------------- ROS node
def _make_node() -> Any:
    from sensor_msgs.msg import Joy
    from std_msgs.msg import String
    from std_srvs.srv import SetBool

    from humanoid_control.hardware.unitree_hg import REMOTE_BUTTONS
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.ros.node_utils import QuietNode, declare

    class G1EmulatorNode(QuietNode):
        """ROS 2 wrapper of :class:`G1Emulator`: parameters, services, status."""

        def __init__(self) -> None:
            super().__init__("g1_emulator")
            robot = declare(self, "robot", "g1", "robot configuration name or YAML path", read_only=True)
            lockstep = declare(
                self,
                "lockstep",
                True,
                "physics advances one period per LowCmd (else wall time)",
                read_only=True,
            )
            iface = declare(self, "network_interface", "lo", "DDS network interface", read_only=True)
            domain = declare(self, "dds_domain", 0, "DDS domain of the G1 protocol", 0, 232, read_only=True)
            sport = declare(self, "sport_mode", False, "start with the sport service on (LowCmd ignored)")
            machine = declare(
                self, "mode_machine", DEFAULT_MODE_MACHINE, "mode_machine reported", 0, 255, read_only=True
            )
            config = load_robot_config(robot)
            self.emulator = G1Emulator(
                config, G1EmulatorSettings(lockstep=lockstep, sport_mode=sport, mode_machine=machine)
            )
            self.emulator.start(domain, iface)
            self.pub_status = self.create_publisher(String, "~/status", 10)
            self.create_service(SetBool, "~/pause_lowstate", self._on_pause)
            self.create_service(SetBool, "~/sport_mode", self._on_sport)
            self.create_subscription(Joy, "~/remote", self._on_remote, 10)
            self.create_timer(0.2, self._publish_status)
            self.get_logger().info(
                f"G1 emulator on DDS domain {domain}, interface '{iface}', "
                f"{'lockstep' if lockstep else 'realtime'}, sport mode {'on' if sport else 'off'}"
            )

        def _on_pause(self, req: Any, resp: Any) -> Any:
            self.emulator.pause_lowstate(bool(req.data))
            resp.success, resp.message = True, f"LowState {'paused' if req.data else 'publishing'}"
            self.get_logger().info(resp.message)
            self._publish_status()
            return resp

        def _on_sport(self, req: Any, resp: Any) -> Any:
            self.emulator.set_sport_mode(bool(req.data))
            resp.success, resp.message = True, f"sport mode {'on' if req.data else 'released'}"
            self.get_logger().info(resp.message)
            self._publish_status()
            return resp

        def _on_remote(self, msg: Any) -> None:
            buttons = {n: bool(msg.buttons[i]) for i, n in enumerate(REMOTE_BUTTONS) if i < len(msg.buttons)}
            axes = list(msg.axes) + [0.0] * 4
            self.emulator.set_remote(RemoteState(buttons, lx=axes[0], ly=axes[1], rx=axes[2], ry=axes[3]))

        def _publish_status(self) -> None:
            self.pub_status.publish(String(data=json.dumps(self.emulator.status())))

        def close(self) -> None:
            self.emulator.stop()

    return G1EmulatorNode()


def main(args: list[str] | None = None) -> int:
    """Entry point: ``ros2 run humanoid_stack g1_emulator`` (or the ``g1_emulator`` console script)."""
    from humanoid_control.ros.node_utils import run_node

    sys.setswitchinterval(5e-4)  # the physics thread, DDS listeners and the executor share the GIL
    return run_node(_make_node, args if args is not None else sys.argv, "g1_emulator")


if __name__ == "__main__":
    raise SystemExit(main())
