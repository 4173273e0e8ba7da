"""The G1's low-level DDS transport through the Unitree SDK (``unitree-sdk2py-dimos``): channels, message
conversion, and the emulator's side channel of simulation truth.

The SDK and its DDS binding (``cyclonedds`` 0.10.x, the robot's version; ``make setup`` builds it) are
imported only when a channel opens, so the rest of the package works without them; :func:`require_sdk` raises
:class:`ImportError` saying what to install.

- :func:`init_channels` initialises the SDK's process-wide channel factory (DDS domain, network interface:
  ``lo`` for the emulator on one machine, the robot's Ethernet port otherwise). The SDK allows one domain per
  process; a second call with other values raises :class:`RuntimeError`.
- :func:`lowcmd_to_sdk` / :func:`lowcmd_from_sdk`, :func:`lowstate_to_sdk` / :func:`lowstate_from_sdk`: the
  SDK's ``unitree_hg`` IDL objects <-> the numpy C-layout records of
  :mod:`humanoid_control.hardware.unitree_hg`,
  over which the CRC is computed (floats travel as float32, so a record survives the round trip exactly).
  The backend and the emulator no longer use these for LowCmd / LowState (0.3-0.5 ms per message): they send
  and receive the serialised bytes through :mod:`unitree_cdr`; these remain the reference its tests and
  ``humanoid-bench link`` compare with.
- :class:`EmulatorTruth` on ``emu/ground_truth``: the base pose, twist and foot wrenches of the emulator's
  simulation, stamped with the LowState tick they belong to. Emulator-only (a robot has no such topic): the
  driver publishes it as ``/sim/ground_truth`` so that evaluations can measure a run through the emulator.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from humanoid_control.hardware.unitree_hg import NUM_MOTOR_SLOTS, new_lowcmd, new_lowstate

SDK_HINT = (
    "the Unitree SDK is not importable: `make setup` installs unitree-sdk2py-dimos (--no-deps) and "
    "cyclonedds==0.10.2 built against Debian's cyclonedds-dev (CYCLONEDDS_HOME, see docs/hardware.md)"
)
TRUTH_TOPIC = "emu/ground_truth"

_lock = threading.Lock()
_initialised: tuple[int, str] | None = None


def require_sdk() -> Any:
    """The SDK's channel module; ImportError with the installation hint when absent."""
    try:
        from unitree_sdk2py.core import channel  # type: ignore[import-not-found]
    except Exception as exc:  # not installed, or its DDS binding missing / the wrong version
        raise ImportError(f"{SDK_HINT} ({exc!r})") from None
    return channel


def init_channels(domain: int, interface: str) -> None:
    """Initialise the SDK's channel factory once per process on DDS ``domain`` and network ``interface``."""
    global _initialised
    channel = require_sdk()
    with _lock:
        if _initialised is not None:
            if _initialised != (int(domain), str(interface)):
                raise RuntimeError(
                    f"the Unitree SDK's DDS is already on domain {_initialised[0]}, interface "
                    f"'{_initialised[1]}' in this process (one per process); "
                    f"asked for {domain}, '{interface}'"
                )
            return
        if not 0 <= int(domain) <= 232:
            raise ValueError(f"DDS domain must be in 0..232, got {domain}")
        if not channel.ChannelFactoryInitialize(int(domain), str(interface) or None) and not _factory_ready(
            channel
        ):
            raise RuntimeError(f"DDS initialisation failed on domain {domain}, interface '{interface}'")
        _initialised = (int(domain), str(interface))


def _factory_ready(channel: Any) -> bool:
    return bool(getattr(channel.ChannelFactory, "_ChannelFactory__initialized", False))


def hg_types() -> tuple[Any, Any]:
    """The SDK's ``unitree_hg`` ``LowCmd_`` and ``LowState_`` classes."""
    require_sdk()
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_  # type: ignore[import-not-found]

    return LowCmd_, LowState_


def publisher(topic: str, msg_type: Any) -> Any:
    """An initialised SDK ``ChannelPublisher`` (call :func:`init_channels` first)."""
    channel = require_sdk()
    pub = channel.ChannelPublisher(topic, msg_type)
    pub.Init()
    return pub


def subscriber(topic: str, msg_type: Any, handler: Any) -> Any:
    """An initialised SDK ``ChannelSubscriber`` calling ``handler(sample)`` on DDS's listener thread."""
    channel = require_sdk()
    sub = channel.ChannelSubscriber(topic, msg_type)
    sub.Init(handler, 0)
    return sub


# ------------------------------------------------------------------------------------------------ messages
# uint8 arrays of the IDL (wireless_remote) deserialise as bytes; everything else as lists of numbers
def lowcmd_to_sdk(record: np.ndarray, crc: int) -> Any:
    """SDK ``LowCmd_`` carrying ``record``'s values and ``crc`` (the CRC of the record's C-layout bytes)."""
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, MotorCmd_  # type: ignore[import-not-found]

    m = record["motor_cmd"]
    cols = [m[k].tolist() for k in ("mode", "q", "dq", "tau", "kp", "kd", "reserve")]
    motors = [MotorCmd_(*row) for row in zip(*cols, strict=True)]
    return LowCmd_(
        int(record["mode_pr"]), int(record["mode_machine"]), motors, record["reserve"].tolist(), int(crc)
    )


def lowcmd_from_sdk(msg: Any) -> np.ndarray:
    """``LowCmd_`` record (C layout, its ``crc`` as received) from an SDK message."""
    rec = new_lowcmd()
    rec["mode_pr"], rec["mode_machine"], rec["crc"] = msg.mode_pr, msg.mode_machine, msg.crc
    rec["reserve"] = msg.reserve
    m = rec["motor_cmd"]
    motors = msg.motor_cmd
    if len(motors) != NUM_MOTOR_SLOTS:
        raise ValueError(f"LowCmd_ has {len(motors)} motor slots, expected {NUM_MOTOR_SLOTS}")
    for k in ("mode", "q", "dq", "tau", "kp", "kd", "reserve"):
        m[k] = [getattr(c, k) for c in motors]
    return rec


def lowstate_to_sdk(record: np.ndarray, crc: int) -> Any:
    """SDK ``LowState_`` carrying ``record``'s values and ``crc``."""
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import (  # type: ignore[import-not-found]
        IMUState_,
        LowState_,
        MotorState_,
    )

    imu = record["imu_state"]
    m = record["motor_state"]
    motors = [
        MotorState_(int(m["mode"][i]), *(float(m[k][i]) for k in ("q", "dq", "ddq", "tau_est")),
                    m["temperature"][i].tolist(), float(m["vol"][i]), m["sensor"][i].tolist(),
                    int(m["motorstate"][i]), m["reserve"][i].tolist())
        for i in range(NUM_MOTOR_SLOTS)
    ]  # fmt: skip
    return LowState_(
        record["version"].tolist(),
        int(record["mode_pr"]),
        int(record["mode_machine"]),
        int(record["tick"]),
        IMUState_(
            imu["quaternion"].tolist(),
            imu["gyroscope"].tolist(),
            imu["accelerometer"].tolist(),
            imu["rpy"].tolist(),
            int(imu["temperature"]),
        ),
        motors,
        record["wireless_remote"].tolist(),
        record["reserve"].tolist(),
        int(crc),
    )


def lowstate_from_sdk(msg: Any) -> np.ndarray:
    """``LowState_`` record (C layout, its ``crc`` as received) from an SDK message."""
    rec = new_lowstate()
    rec["version"] = msg.version
    rec["mode_pr"], rec["mode_machine"], rec["tick"] = msg.mode_pr, msg.mode_machine, msg.tick
    imu = rec["imu_state"]
    s = msg.imu_state
    imu["quaternion"], imu["gyroscope"], imu["accelerometer"], imu["rpy"] = (
        s.quaternion,
        s.gyroscope,
        s.accelerometer,
        s.rpy,
    )
    imu["temperature"] = s.temperature
    m = rec["motor_state"]
    motors = msg.motor_state
    if len(motors) != NUM_MOTOR_SLOTS:
        raise ValueError(f"LowState_ has {len(motors)} motor slots, expected {NUM_MOTOR_SLOTS}")
    for k in ("mode", "q", "dq", "ddq", "tau_est", "temperature", "vol", "sensor", "motorstate", "reserve"):
        m[k] = [getattr(c, k) for c in motors]
    remote = msg.wireless_remote  # uint8[40] arrives as bytes
    rec["wireless_remote"] = (
        np.frombuffer(bytes(remote), dtype=np.uint8) if isinstance(remote, bytes | bytearray) else remote
    )
    rec["reserve"] = msg.reserve
    rec["crc"] = msg.crc
    return rec


# ------------------------------------------------------------------------------------------------ emulator
def truth_type() -> Any:
    """The IDL class of :data:`TRUTH_TOPIC` (:mod:`emulator_truth_idl`; it needs the DDS binding)."""
    require_sdk()
    from humanoid_control.hardware.emulator_truth_idl import EmulatorTruth

    return EmulatorTruth


__all__ = [
    "SDK_HINT",
    "TRUTH_TOPIC",
    "hg_types",
    "init_channels",
    "lowcmd_from_sdk",
    "lowcmd_to_sdk",
    "lowstate_from_sdk",
    "lowstate_to_sdk",
    "publisher",
    "require_sdk",
    "subscriber",
    "truth_type",
]
