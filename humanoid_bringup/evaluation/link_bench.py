"""``humanoid-bench link``: the per-tick cost of each hardware link in the driver's process, beside the SDK's
own Python path (python-can's for CAN) timed on the same messages in the same run, interleaved tick by tick.

``unitree_g1``: per tick the driver encodes a LowCmd (CRC included), writes it, and later takes and decodes
the LowState answering it (CRC checked). The fast path is :mod:`humanoid_control.hardware.unitree_cdr`
(numpy CDR codec, raw CycloneDDS writer / reader); the SDK path is what the backend did before:
``unitree_hg.to_bytes`` for the CRC, ``unitree_dds.lowcmd_to_sdk``, the SDK's ``ChannelPublisher.Write``;
``DataReader.take`` (the SDK's listener's call: CycloneDDS's Python deserialiser), ``lowstate_from_sdk`` and
the CRC check. A peer process (this module run with ``--peer``) answers every LowCmd with a LowState built
from it, on loopback (``lo``) in a DDS domain of its own; each path has its own pair of topics so that each
reader gets exactly the answers to its own writes. Waiting for the answer is not timed: the figure is what the
link costs the driver per tick, not the round trip.

``can_mit``: the 29 actuators of ``hardware.can_mit`` on python-can ``virtual`` buses, each actuator emulated
(:class:`MitBusEmulator` served by a thread, which answers between the timed sections only). Per tick the
driver encodes and sends 29 command frames and, once every reply is queued (not timed), receives and decodes
29 replies. Fast path: :mod:`mit_batch` (all frames encoded / decoded at once with numpy,
:class:`mit_batch.BatchHostBus`); python-can's path: the per-frame :class:`can_io.MitHostBus`
(``encode_command``, ``can.Message``, ``bus.send``; ``bus.recv``, ``decode_reply``).

Keys per link: ``link_us_median`` / ``link_us_p99`` (fast path, wall time per tick), ``sdk_link_us_median``
/ ``sdk_link_us_p99``, ``ratio_vs_sdk`` (median fast / median SDK); the same in CPU time of the driver's
thread (``link_cpu_us_*``, ``sdk_link_cpu_us_*``, ``ratio_cpu_vs_sdk``: on a loaded machine wall time
includes waiting for a core, CPU time does not); the per-piece wall medians (``*_us_median``), ``ticks`` and
``lost`` (answers not received within 1 s). The garbage collector is off inside the ticks and collects the
young generation between them, as in the driver's realtime loop.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

SDK_TOPICS = ("bench/sdk/lowcmd", "bench/sdk/lowstate")
FAST_TOPICS = ("bench/fast/lowcmd", "bench/fast/lowstate")


def _stats(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float) * 1e6
    return round(float(np.median(a)), 1), round(float(np.percentile(a, 99)), 1)


class _Clock:
    """Wall (``perf_counter``) and thread CPU (``thread_time``) time, read together."""

    @staticmethod
    def now() -> tuple[float, float]:
        return time.perf_counter(), time.thread_time()


def _summary(
    fast: list[tuple[float, float]], sdk: list[tuple[float, float]], pieces: dict[str, list[float]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, tag in ((0, ""), (1, "_cpu")):
        med, p99 = _stats([f[k] for f in fast])
        sdk_med, sdk_p99 = _stats([f[k] for f in sdk])
        out[f"link{tag}_us_median"] = med
        out[f"link{tag}_us_p99"] = p99
        out[f"sdk_link{tag}_us_median"] = sdk_med
        out[f"sdk_link{tag}_us_p99"] = sdk_p99
        out[f"ratio{tag}_vs_sdk"] = round(med / sdk_med, 4) if sdk_med > 0 else None
    out["ticks"] = len(fast)
    for name, values in pieces.items():
        out[f"{name}_us_median"] = _stats(values)[0]
    return out


# ---------------------------------------------------------------------------------------------- unitree_g1
def _lowstate_answer(cmd: np.ndarray, state: np.ndarray) -> None:
    """Fill ``state`` as the peer's answer to ``cmd`` (tick = the command's ``reserve[0]``)."""
    m, c = state["motor_state"], cmd["motor_cmd"]
    m["mode"] = c["mode"]
    m["q"], m["dq"], m["tau_est"] = c["q"], c["dq"], c["tau"]
    m["ddq"] = c["kp"]
    state["tick"] = cmd["reserve"][0]
    state["mode_machine"] = cmd["mode_machine"]


def run_peer(domain: int) -> int:
    """The G1 side of the benchmark (own process): answers each LowCmd on both topic pairs with a LowState."""
    from humanoid_control.hardware import unitree_dds as dds
    from humanoid_control.hardware.unitree_cdr import RawReader, RawWriter, lowcmd_codec, lowstate_codec

    dds.init_channels(domain, "lo")
    lowcmd_t, lowstate_t = dds.hg_types()
    lock = threading.Lock()
    cmd_codec, state_codec = lowcmd_codec(), lowstate_codec()
    state = np.zeros((), dtype=state_codec.dtype)
    state["imu_state"]["quaternion"] = (1.0, 0.0, 0.0, 0.0)
    state["imu_state"]["accelerometer"] = (0.0, 0.0, 9.81)
    writers = {name: RawWriter(name, lowstate_t) for name in (SDK_TOPICS[1], FAST_TOPICS[1])}

    def answer(out_topic: str) -> Any:
        def handler(data: bytes) -> None:
            with lock:
                cmd, ok = cmd_codec.decode_checked(data)
                if not ok:
                    return
                _lowstate_answer(cmd, state)
                writers[out_topic].write(state_codec.encode_sealed(state)[0])

        return handler

    readers = [  # noqa: F841 - kept alive
        RawReader(SDK_TOPICS[0], lowcmd_t, answer(SDK_TOPICS[1])),
        RawReader(FAST_TOPICS[0], lowcmd_t, answer(FAST_TOPICS[1])),
    ]
    print("ready", flush=True)
    sys.stdin.read()  # until the benchmark closes the pipe
    return 0


def bench_unitree_g1(ticks: int, domain: int | None = None) -> dict[str, Any]:
    """Per-tick link cost of the G1's DDS link, fast path and SDK path interleaved (see the module doc)."""
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from humanoid_control.hardware import unitree_dds as dds
    from humanoid_control.hardware.unitree_cdr import (
        RawReader,
        RawWriter,
        _participant,
        lowcmd_codec,
        lowstate_codec,
    )
    from humanoid_control.hardware.unitree_hg import message_crc, new_lowcmd, to_bytes

    domain = random.randint(100, 230) if domain is None else int(domain)
    peer = subprocess.Popen(
        [sys.executable, "-m", "humanoid_bringup.evaluation.link_bench", "--peer", str(domain)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert peer.stdout is not None
        if peer.stdout.readline().strip() != "ready":
            raise RuntimeError("the benchmark's G1 peer process did not start")
        dds.init_channels(domain, "lo")
        lowcmd_t, lowstate_t = dds.hg_types()
        fast_w = RawWriter(FAST_TOPICS[0], lowcmd_t)
        fast_r = RawReader(FAST_TOPICS[1], lowstate_t)
        sdk_w = dds.publisher(SDK_TOPICS[0], lowcmd_t)
        sdk_r: Any = DataReader(_participant(), Topic(_participant(), SDK_TOPICS[1], lowstate_t))
        cmd_codec, state_codec = lowcmd_codec(), lowstate_codec()
        rng = np.random.default_rng(0)
        rec = new_lowcmd()
        rec["mode_machine"] = 5
        rec["motor_cmd"]["mode"][:29] = 1

        def wait(take: Any, tick: int) -> tuple[Any, tuple[float, float]] | None:
            """Poll ``take`` until it returns the answer of ``tick``; that call's (wall, CPU) time."""
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                w0, c0 = _Clock.now()
                got = take()
                w1, c1 = _Clock.now()
                if got is not None and got[1] == tick:
                    return got[0], (w1 - w0, c1 - c0)
                if got is None:
                    time.sleep(5e-5)
            return None

        def fast_take() -> tuple[Any, int] | None:
            data = fast_r.take(1)
            if not data:
                return None
            state, ok = state_codec.decode_checked(data[0])
            if not ok:
                raise RuntimeError("LowState with a wrong CRC on the fast path")
            return state, int(state["tick"])

        def sdk_take() -> tuple[Any, int] | None:
            samples = sdk_r.take(1)
            if not samples:
                return None
            state = dds.lowstate_from_sdk(samples[0])
            if message_crc(to_bytes(state, sealed=False)) != int(state["crc"]):
                raise RuntimeError("LowState with a wrong CRC on the SDK path")
            return state, int(state["tick"])

        def fast_write() -> None:
            fast_w.write(cmd_codec.encode_sealed(rec)[0])

        def sdk_write() -> None:
            sealed = to_bytes(rec)
            sdk_w.Write(dds.lowcmd_to_sdk(rec, int.from_bytes(sealed[-4:], "little")))

        # readiness: each path answered once (discovery), not timed
        for tick, write, take in ((1 << 30, fast_write, fast_take), (1 << 30 | 1, sdk_write, sdk_take)):
            deadline = time.monotonic() + 20.0
            rec["reserve"][0] = tick
            while time.monotonic() < deadline:
                write()
                if wait(take, tick) is not None:
                    break
            else:
                raise RuntimeError("no answer from the benchmark's G1 peer within 20 s (DDS on lo)")

        fast: list[tuple[float, float]] = []
        sdk: list[tuple[float, float]] = []
        names = (
            "encode",
            "write",
            "read",
            "sdk_encode",
            "sdk_write",
            "sdk_read",
            "crc_lowcmd",
            "crc_lowstate",
        )
        pieces: dict[str, list[float]] = {k: [] for k in names}
        lost = 0
        gc.freeze()  # as the driver's realtime loop: no collection inside a tick, young objects in the slack
        gc.disable()
        for tick in range(ticks):
            gc.collect(0)  # not timed: the slack
            mc = rec["motor_cmd"]
            for key in ("q", "dq", "tau", "kp", "kd"):
                mc[key][:29] = rng.normal(size=29)
            rec["reserve"][0] = tick
            # fast path
            w0, c0 = _Clock.now()
            data, _ = cmd_codec.encode_sealed(rec)
            w1, _c1 = _Clock.now()
            fast_w.write(data)
            w2, c2 = _Clock.now()
            got = wait(fast_take, tick)
            # SDK path, the same command
            w3, c3 = _Clock.now()
            sealed = to_bytes(rec)
            msg = dds.lowcmd_to_sdk(rec, int.from_bytes(sealed[-4:], "little"))
            w4, _c4 = _Clock.now()
            sdk_w.Write(msg)
            w5, c5 = _Clock.now()
            sdk_got = wait(sdk_take, tick)
            if got is None or sdk_got is None:
                lost += 1
                continue
            fast_state, sdk_state = got[0], sdk_got[0]
            if to_bytes(fast_state) != to_bytes(sdk_state):
                raise RuntimeError(f"tick {tick}: the two paths decoded different LowStates")
            # the CRC alone (part of encode / read above; timed here once more, not counted in the tick)
            w6, _ = _Clock.now()
            message_crc(cmd_codec.c_bytes(rec).data)
            w7, _ = _Clock.now()
            message_crc(state_codec.c_bytes(fast_state).data)
            w8, _ = _Clock.now()
            for name, value in (
                ("encode", w1 - w0), ("write", w2 - w1), ("read", got[1][0]), ("sdk_encode", w4 - w3),
                ("sdk_write", w5 - w4), ("sdk_read", sdk_got[1][0]), ("crc_lowcmd", w7 - w6),
                ("crc_lowstate", w8 - w7),
            ):  # fmt: skip
                pieces[name].append(value)
            fast.append((w2 - w0 + got[1][0], c2 - c0 + got[1][1]))
            sdk.append((w5 - w3 + sdk_got[1][0], c5 - c3 + sdk_got[1][1]))
        if not fast:
            raise RuntimeError("no tick answered on both paths")
        out = _summary(fast, sdk, pieces)
        out["lost"] = lost
        out["dds_domain"] = domain
        fast_w.close()
        fast_r.close()
        sdk_w.Close()
        return out
    finally:
        gc.enable()
        if peer.stdin is not None:
            peer.stdin.close()
        try:
            peer.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            peer.kill()
            peer.wait()


# ------------------------------------------------------------------------------------------------- can_mit
def bench_can_mit(ticks: int) -> dict[str, Any]:
    """Per-tick link cost of the 29 MIT actuators on virtual CAN, batch and per-frame path interleaved."""
    from humanoid_control.hardware.can_io import EmulatedBusNode, MitHostBus, open_bus
    from humanoid_control.hardware.hardware_config import load_can_mit_config
    from humanoid_control.hardware.mit_batch import BatchHostBus, MitBatchCodec
    from humanoid_control.hardware.mit_can import ENTER_MOTOR_MODE
    from humanoid_control.hardware.mit_emulator import MitActuatorEmulator, MitBusEmulator, MotorModel
    from humanoid_control.hardware.types import LowLevelCommand
    from humanoid_control.model.robot_config import load_robot_config

    config = load_robot_config("g1")
    hw = load_can_mit_config(config)
    tag = f"linkbench-{os.getpid()}"
    buses: list[Any] = []
    nodes: list[EmulatedBusNode] = []
    fast_hosts: dict[str, BatchHostBus] = {}
    sdk_hosts: dict[str, MitHostBus] = {}
    for name in hw.buses:
        joints = [j for j in hw.joints if j.bus == name]
        for kind in ("fast", "sdk"):
            channel = f"{tag}-{kind}-{name}"
            emu = MitBusEmulator(
                [MitActuatorEmulator(j.can_id, j.ranges, MotorModel(timeout=1e9)) for j in joints]
            )
            node_bus = open_bus(channel, "virtual")
            host_bus = open_bus(channel, "virtual")
            buses += [node_bus, host_bus]
            nodes.append(EmulatedBusNode(node_bus, emu))
            if kind == "fast":
                fast_hosts[name] = BatchHostBus(host_bus, joints)
            else:
                sdk_hosts[name] = MitHostBus(host_bus, joints)
    running = True
    go = threading.Event()  # the actuators answer when told: never during a timed section (see wait_queued)

    passes = [0]  # full passes over the nodes done by the serving thread

    def serve() -> None:
        while running:
            if go.wait(0.1):
                go.clear()
                for node in nodes:
                    node.poll(0.0)
                passes[0] += 1

    server = threading.Thread(target=serve, name="mit_bench_peer", daemon=True)
    server.start()
    try:
        for host in sdk_hosts.values():
            host.send_special(ENTER_MOTOR_MODE)
            go.set()
            host.collect(1.0)
        for fhost in fast_hosts.values():
            fhost.send_special(ENTER_MOTOR_MODE)
            go.set()
            fhost.receive_frames(1.0)
        n = config.num_joints
        rng = np.random.default_rng(0)
        stand = config.gain_profile("stand")
        q0 = np.zeros(n)
        fast: list[tuple[float, float]] = []
        sdk: list[tuple[float, float]] = []
        pieces: dict[str, list[float]] = {k: [] for k in ("send", "receive", "sdk_send", "sdk_receive")}
        lost = 0
        n_fast = {name: len(h.joints) for name, h in fast_hosts.items()}
        codec = MitBatchCodec(hw.joints)
        replies = np.zeros((len(hw.joints), 8), dtype=np.uint8)
        bus_index = {
            name: np.array([i for i, j in enumerate(hw.joints) if j.bus == name]) for name in fast_hosts
        }

        def wait_queued(hosts: dict[str, Any]) -> bool:
            """Let the emulated actuators answer and wait until every reply is queued (not timed): in this
            process they would otherwise take the GIL in the middle of the driver's timed work, which
            hardware actuators do not."""
            done = passes[0]
            go.set()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                if passes[0] > done and all(h.bus.queue.qsize() >= n_fast[name] for name, h in hosts.items()):
                    return True  # every reply queued, and the serving thread back to waiting
                time.sleep(5e-5)
            return False

        gc.freeze()  # as the driver's realtime loop: no collection inside a tick, young objects in the slack
        gc.disable()
        for _ in range(ticks):
            gc.collect(0)  # not timed: the slack
            cmd = LowLevelCommand(
                q0 + 0.05 * rng.normal(size=n),
                0.1 * rng.normal(size=n),
                stand.kp.copy(),
                stand.kd.copy(),
                rng.normal(size=n),
            )
            w0, c0 = _Clock.now()
            frames, _flags = codec.encode_joint(cmd.q, cmd.dq, cmd.kp, cmd.kd, cmd.tau_ff)
            for name, fhost in fast_hosts.items():
                fhost.send_frames(frames[bus_index[name]])
            w1, c1 = _Clock.now()
            ok = wait_queued(fast_hosts)
            w2, c2 = _Clock.now()
            for name, fhost in fast_hosts.items():
                replies[bus_index[name]] = fhost.receive_frames()[1]
            codec.decode_joint(replies)
            w3, c3 = _Clock.now()
            per_bus: dict[str, dict[int, Any]] = {name: {} for name in sdk_hosts}
            for j, m in zip(hw.joints, hw.motor_commands(cmd), strict=True):
                per_bus[j.bus][j.can_id] = m
            for name, host in sdk_hosts.items():
                host.send_commands(per_bus[name])
            w4, c4 = _Clock.now()
            ok = wait_queued(sdk_hosts) and ok
            w5, c5 = _Clock.now()
            for host in sdk_hosts.values():
                host.collect(0.0)
            w6, c6 = _Clock.now()
            if not ok:
                lost += 1
                continue
            pieces["send"].append(w1 - w0)
            pieces["receive"].append(w3 - w2)
            pieces["sdk_send"].append(w4 - w3)
            pieces["sdk_receive"].append(w6 - w5)
            fast.append((w1 - w0 + w3 - w2, c1 - c0 + c3 - c2))
            sdk.append((w4 - w3 + w6 - w5, c4 - c3 + c6 - c5))
        if not fast:
            raise RuntimeError("no tick answered by every emulated actuator")
        out = _summary(fast, sdk, pieces)
        out["lost"] = lost
        out["actuators"] = len(hw.joints)
        return out
    finally:
        gc.enable()
        running = False
        server.join(timeout=2.0)
        for bus in buses:
            bus.shutdown()


# ------------------------------------------------------------------------------------------------ command
def add_link_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``humanoid-bench link``."""
    parser.add_argument("--ticks", type=int, default=2000, help="ticks timed per link (default 2000)")
    parser.add_argument(
        "--links",
        default="unitree_g1,can_mit",
        help="comma-separated links to time (unitree_g1, can_mit; default both)",
    )
    parser.add_argument("--dds-domain", type=int, default=None, help="DDS domain (default: random 100..230)")


def link_main(args: argparse.Namespace) -> int:
    """``humanoid-bench link``: print one JSON object, one entry per link."""
    names = [n.strip() for n in str(args.links).split(",") if n.strip()]
    unknown = sorted(set(names) - {"unitree_g1", "can_mit"})
    if unknown or not names:
        raise SystemExit(f"humanoid-bench link: unknown links {unknown} (unitree_g1, can_mit)")
    if args.ticks < 10:
        raise SystemExit("humanoid-bench link: --ticks must be >= 10")
    result: dict[str, Any] = {}
    for name in names:
        if name == "unitree_g1":
            result[name] = bench_unitree_g1(args.ticks, args.dds_domain)
        else:
            result[name] = bench_can_mit(args.ticks)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--peer":
        sys.exit(run_peer(int(sys.argv[2])))
    parser = argparse.ArgumentParser(prog="link_bench")
    add_link_arguments(parser)
    sys.exit(link_main(parser.parse_args()))
