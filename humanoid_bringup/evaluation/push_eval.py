"""WBC evaluations through the ROS graph (driver, state estimator, WBC: separate processes, lockstep).

``humanoid-eval push --controller wbc_stand``: for each direction (front, back, left, right: world axes; the
robot spawns facing +x) bisects the largest impulse (N s) of a push of ``T = 0.1`` s at the pelvis that the
robot survives standing, in one graph: each trial respawns the robot (driver ``~/respawn``), resets the
estimator (``/state_estimator/reset``) while the driver settles, lets the WBC take over and stand, pushes
(driver ``~/push``) and watches. The bound of each direction is
:func:`~humanoid_control.wbc.balance.push_impulse_bounds` of the robot model (LIPM, CoP at the sole edge).

**Survived standing without stepping** (all from ``/sim/ground_truth`` + joint states, pinocchio):

- the driver never damps and the WBC never faults during the trial;
- the base stays above ``simulation.fall_height`` and tilts less than ``MAX_TILT_DEG`` from upright;
- no sole lifts (origin more than ``MAX_LIFT_M`` above its height at the push) or slides (more than
  ``MAX_SLIDE_M`` horizontally) from the push to the end of the trial;
- ``OBSERVE_S`` after the push ends the CoM moves slower than ``MAX_END_SPEED`` horizontally.

A trial stops early (failed) once the CoM is ``MAX_COM_OFFSET_M`` from its reference, the base is low or
tilted, the driver damps or the WBC faults.

``humanoid-eval stand --controller wbc_stand``: stands ``seconds`` (60 by default) once the WBC has the robot;
``com_error_rms_m`` is the RMS horizontal distance between the true CoM and the controller's reference (the
default pose's CoM relative to the sole midpoint, carried with the feet), both from ground truth;
``com_estimate_error_rms_m`` compares the CoM relative to the sole midpoint as the WBC sees it (``/odom`` +
joints) with the same from ground truth.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.graph_probe import GraphProbe, LaunchedGraph, isolated_ros_env
from humanoid_control.hardware.push import DIRECTIONS, push_force
from humanoid_control.ros.lockstep import tick_stream_qos

PUSH_DURATION_S = 0.1
RESPAWN_SETTLE_S = 0.5  # driver ramp in place after a respawn; the estimator is reset in it (s)
SETTLE_S = 0.6  # standing under the WBC before each push (s, simulated)
OBSERVE_S = 1.5  # watched after the push ends (s)
MAX_TILT_DEG = 30.0
MAX_LIFT_M = 0.02
MAX_SLIDE_M = 0.03
MAX_END_SPEED = 0.15  # m/s
MAX_COM_OFFSET_M = 0.2  # early stop: the CoM this far from its reference is beyond every sole edge


@dataclass
class Kinematics:
    """Pinocchio helpers on ground-truth (or estimated) states: CoM, its velocity, soles, CoM reference."""

    config: Any
    pmodel: Any = None
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self) -> None:
        from humanoid_control.model.robot_model import load_pinocchio_model
        from humanoid_control.wbc.balance import default_com_offset

        self.pmodel = self.pmodel or load_pinocchio_model(self.config)
        self.data = self.pmodel.model.createData()
        self.offset = default_com_offset(self.config, self.pmodel)

    def evaluate(
        self, pos: Any, quat_wxyz: Any, twist_body: Any, q: Any, dq: Any
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """CoM (3) and CoM velocity (3) in the pose's frame (m, m/s), sole origins per side (3) and the
        reference CoM (horizontal, 2) for one state (base pose, base twist in the base frame, joints)."""
        import pinocchio as pin

        from humanoid_control.wbc.dynamics import pinocchio_state

        w, x, y, z = quat_wxyz
        tw = np.asarray(twist_body, dtype=float)
        qp, vp = pinocchio_state(self.pmodel, np.asarray(pos), np.array([x, y, z, w]), tw[:3], tw[3:], q, dq)
        m, d = self.pmodel.model, self.data
        com = pin.centerOfMass(m, d, qp, vp)
        pin.framesForwardKinematics(m, d, qp)
        soles = {s: d.oMf[f].translation.copy() for s, f in self.pmodel.sole_frame_ids.items()}
        heading = sum(d.oMf[f].rotation[:, 0] for f in self.pmodel.sole_frame_ids.values())
        yaw = math.atan2(heading[1], heading[0])
        c, s = math.cos(yaw), math.sin(yaw)
        mid = np.mean(list(soles.values()), axis=0)
        o = self.offset
        ref = mid[:2] + np.array([c * o[0] - s * o[1], s * o[0] + c * o[1]])
        return np.array(com), np.array(d.vcom[0]), soles, ref


class WbcGraph:
    """The launched graph (driver, estimator, WBC in lockstep) plus an observer recording keyed by stamp."""

    def __init__(self, out_dir: Path, robot: str = "g1", sim_duration_s: float = 3600.0) -> None:
        from nav_msgs.msg import Odometry
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        isolated_ros_env(out_dir / "ros_logs")
        self.lock = threading.Lock()
        self.joints: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        self.odom: dict[float, tuple[Any, ...]] = {}
        self.wbc_states: list[str] = []
        self.push_events: list[tuple[float, tuple[float, float, float]]] = []
        self.record_odom = False
        self.respawn_retries = 0  # respawns repeated before a trial (estimator reset too late, WBC fault)
        qos = tick_stream_qos(500)  # per-tick streams, read as a lockstep peer (transient-local)
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        from geometry_msgs.msg import WrenchStamped

        def setup(node: Any) -> None:  # served before the per-tick streams (see GraphProbe's setup)
            node.create_subscription(WrenchStamped, "/sim/push", self._on_push, 10)
            node.create_subscription(String, "/wbc_controller/state", self._on_wbc_state, latched)

        # a lockstep peer: every decision of the evaluation (respawn, estimator reset, push, end of a trial)
        # is
        # taken while the simulation is held at a tick chosen from simulated time, so runs repeat exactly
        # (ack_period: it publishes nothing per tick, so it acknowledges 20 ms at once)
        self.probe = GraphProbe(
            subscribe_description=False,
            name="wbc_eval",
            contacts=False,
            lockstep_peer=True,
            setup=setup,
            on_tick=self._on_joints,  # the probe's own /joint_states subscription
            ack_period=0.02,
        )
        self.probe.subscribe(Odometry, "/odom", self._on_odom, qos, per_tick=True)
        args = {
            "robot": robot,
            "controller": "wbc_stand",
            "clock": "lockstep",
            "start_paused": "true",
            "sim_duration_s": f"{sim_duration_s:.1f}",
        }
        self.graph = LaunchedGraph(args, out_dir / "graph.log")

    # ------------------------------------------------------------------ recording
    @staticmethod
    def _key(msg: Any) -> float:
        return round(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, 4)

    def _on_joints(self, msg: Any) -> None:
        with self.lock:
            self.joints[self._key(msg)] = (np.array(msg.position), np.array(msg.velocity))

    def _on_odom(self, msg: Any) -> None:
        if not self.record_odom:
            return
        p, o, tw = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
        with self.lock:
            self.odom[self._key(msg)] = (
                (p.x, p.y, p.z),
                (o.w, o.x, o.y, o.z),
                (tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y, tw.angular.z),
            )

    def _on_wbc_state(self, msg: Any) -> None:
        with self.lock:
            self.wbc_states.append(msg.data)

    def _on_push(self, msg: Any) -> None:
        f = msg.wrench.force
        with self.lock:
            self.push_events.append((self._key(msg), (f.x, f.y, f.z)))

    def truth_since(self, t0: float) -> dict[float, tuple[Any, Any, Any]]:
        """Ground truth samples (pos, quat wxyz, twist) stamped ``>= t0``, keyed by rounded stamp."""
        d = self.probe.data
        with self.probe.lock:
            n = len(d.truth_t)
            i = n
            while i > 0 and d.truth_t[i - 1] >= t0 - 1e-9:
                i -= 1
            return {
                round(d.truth_t[k], 4): (d.truth_pos[k], d.truth_quat_wxyz[k], d.truth_twist[k])
                for k in range(i, n)
            }

    def forget_before(self, t: float) -> None:
        """Drop recordings older than ``t`` (s) (memory stays flat over many trials)."""
        d = self.probe.data
        with self.probe.lock:
            k = 0
            while k < len(d.truth_t) and d.truth_t[k] < t:
                k += 1
            del d.truth_t[:k], d.truth_pos[:k], d.truth_quat_wxyz[:k], d.truth_twist[:k]
            k = 0
            while k < len(d.joint_t) and d.joint_t[k] < t:
                k += 1
            del d.joint_t[:k], d.joint_q[:k], d.joint_effort[:k]
        with self.lock:
            for key in [k for k in self.joints if k < t]:
                del self.joints[key]
            for key in [k for k in self.odom if k < t]:
                del self.odom[key]

    # ------------------------------------------------------------------ control
    def start(self, timeout: float = 120.0) -> None:
        """Start the graph; return once the driver runs the WBC's commands (``active``)."""
        from rclpy.parameter import Parameter

        self.graph.start()
        # exact lockstep also on a loaded machine: the driver waits up to 10 s of wall time for each command
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.set_driver_parameters(
                    [
                        Parameter("lockstep_timeout_s", Parameter.Type.DOUBLE, 10.0),
                        Parameter("respawn_settle_s", Parameter.Type.DOUBLE, RESPAWN_SETTLE_S),
                    ]
                )
                break
            except TimeoutError:
                if time.monotonic() > deadline or not self.graph.running():
                    raise
        self.probe.start_graph(
            peers=("state_estimator", "wbc_controller"), running=self.graph.running, hold_at=0.0
        )
        self.probe.run_until(0.0)  # returns at the held first tick
        if not self.run_while(lambda: not self.modes() or self.modes()[-1] != "active", 10.0):
            raise RuntimeError(
                f"the WBC never took over (modes {self.probe.data.modes}); see {self.graph.log_path}"
            )

    def stop(self) -> None:
        self.graph.stop()
        self.probe.close()

    def running(self) -> bool:
        return self.graph.running()

    def modes(self) -> list[str]:
        """Driver modes seen so far."""
        with self.probe.lock:
            return list(self.probe.data.modes)

    def now(self) -> float:
        """Simulated time of the held tick (s)."""
        return self.probe.sim_time()

    def run_to(self, t: float) -> float:
        """Run simulated time to ``t`` (s) and hold it there (services called now act from the next tick)."""
        if not self.graph.running():
            raise RuntimeError(f"the graph stopped; see {self.graph.log_path}")
        return self.probe.run_until(t)

    def run_while(self, condition: Any, max_s: float, step_s: float = 0.01) -> bool:
        """Run in ``step_s`` steps of simulated time while ``condition()`` holds, at most ``max_s``; True if
        it
        stopped holding. Checked at held ticks only, so the stop lands on the same tick in every run."""
        end = self.now() + max_s
        while condition():
            if self.now() >= end - 1e-9:
                return False
            self.run_to(self.now() + step_s)
        return True

    def set_push(self, force: tuple[float, float, float], duration: float) -> None:
        """Set the driver's ``push_force`` / ``push_duration_s`` (one atomic parameter call)."""
        from rclpy.parameter import Parameter

        self.set_driver_parameters(
            [
                Parameter("push_force", Parameter.Type.DOUBLE_ARRAY, [float(v) for v in force]),
                Parameter("push_duration_s", Parameter.Type.DOUBLE, float(duration)),
            ]
        )

    def set_driver_parameters(self, params: list[Any]) -> None:
        """Set driver parameters (``rclpy.parameter.Parameter``) in one atomic call; raise if refused."""
        from rcl_interfaces.srv import SetParametersAtomically

        node = self.probe.node
        client = node.create_client(SetParametersAtomically, "/robot_driver/set_parameters_atomically")
        if not client.wait_for_service(timeout_sec=10.0):
            node.destroy_client(client)
            raise TimeoutError("driver parameters service unavailable")
        req = SetParametersAtomically.Request()
        req.parameters = [p.to_parameter_msg() for p in params]
        future = client.call_async(req)
        end = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < end:
            time.sleep(0.002)
        node.destroy_client(client)
        if not future.done() or not future.result().result.successful:
            raise RuntimeError(
                f"driver refused the parameters: {future.result() if future.done() else 'timeout'}"
            )

    def respawn_and_take_over(self, timeout: float = 60.0, attempts: int = 3) -> float:
        """Respawn, reset the estimator during the driver's settle ramp, wait until the WBC has the robot;
        returns the simulated time at which the driver went ``active``. Retried (counted in
        ``respawn_retries``) if the driver left its settle ramp before the estimator was reset, or if the WBC
        faulted before it took over."""
        for _ in range(attempts):
            n_modes = len(self.modes())
            ok, msg = self.probe.call_trigger("/robot_driver/respawn")  # at the next tick
            if not ok:
                raise RuntimeError(f"respawn refused: {msg}")
            t1 = self.now()
            # the estimator has processed every tick up to the held one (a lockstep peer): reset it a few
            # ticks
            # into the settle ramp, so everything it processes after the reset is from the respawned robot
            self.run_to(t1 + 0.02)
            if "ramp" not in self.modes()[n_modes:]:
                raise RuntimeError("the driver did not ramp after the respawn")
            n_ramp = len(self.modes())
            ok, msg = self.probe.call_trigger("/state_estimator/reset")
            if not ok:
                raise RuntimeError(f"estimator reset refused: {msg}")
            if not self.run_while(
                lambda n=n_ramp: not (len(self.modes()) > n and self.modes()[-1] in ("active", "damping")),
                timeout,
            ):
                raise RuntimeError(f"the WBC did not take over after the respawn (modes {self.modes()[-5:]})")
            if self.modes()[-1] == "damping":  # the WBC faulted before any push: respawn again
                self.respawn_retries += 1
                continue
            return self.now()
        raise RuntimeError(
            f"no trial could start after {attempts} respawns (the estimator reset after the settle ramp, or "
            "the WBC faulted before it took over)"
        )


@dataclass
class Trial:
    """One push: direction, impulse (N s), outcome and why, recorded series (s, m)."""

    direction: str
    impulse: float
    survived: bool
    reason: str
    push_t: float
    series: dict[str, list[Any]] = field(default_factory=dict)
    wall_s: float = 0.0


def run_trial(g: WbcGraph, kin: Kinematics, direction: str, impulse: float, config: Any) -> Trial:
    """Respawn, stand ``SETTLE_S``, push, watch ``OBSERVE_S``; judge with the module's criteria."""
    wall0 = time.monotonic()
    t_active = g.respawn_and_take_over()
    g.forget_before(t_active - 0.5)
    force = push_force(direction, impulse, PUSH_DURATION_S)
    g.set_push(force, PUSH_DURATION_S)
    g.run_to(t_active + SETTLE_S)
    n_events = len(g.push_events)
    with g.lock:
        n_states = len(g.wbc_states)
    ok, msg = g.probe.call_trigger("/robot_driver/push")
    if not ok:
        raise RuntimeError(f"push refused: {msg}")
    g.run_to(g.now() + 0.004)
    if len(g.push_events) <= n_events:
        raise RuntimeError("the driver never reported the push")
    push_t = g.push_events[n_events][0]
    end_t = push_t + PUSH_DURATION_S + OBSERVE_S
    reason = ""
    fall_h = config.simulation.fall_height
    cos_tilt = math.cos(math.radians(MAX_TILT_DEG))
    while True:  # watch live: stop early on a fall
        with g.probe.lock:
            d = g.probe.data
            t_now = d.joint_t[-1] if d.joint_t else 0.0
            z = d.truth_pos[-1][2] if d.truth_pos else 1.0
            qw = d.truth_quat_wxyz[-1] if d.truth_quat_wxyz else [1.0, 0.0, 0.0, 0.0]
            last = (d.truth_t[-1], d.truth_pos[-1], qw, d.truth_twist[-1]) if d.truth_t else None
            modes = list(d.modes)
        with g.lock:
            state = g.joints.get(round(last[0], 4)) if last is not None else None
        if last is not None and state is not None:
            com, _v, _soles, ref = kin.evaluate(last[1], last[2], last[3], *state)
            if np.linalg.norm(com[:2] - ref) > MAX_COM_OFFSET_M:
                reason = f"CoM {MAX_COM_OFFSET_M * 100:.0f} cm off its reference"
        upright = 1.0 - 2.0 * (qw[1] ** 2 + qw[2] ** 2)
        if reason:
            pass
        elif modes and modes[-1] == "damping":
            reason = "driver damping"
        elif z < fall_h:
            reason = f"base below {fall_h} m"
        elif upright < cos_tilt:
            reason = f"base tilt over {MAX_TILT_DEG:g} deg"
        with g.lock:
            if "fault" in g.wbc_states[n_states:]:
                reason = reason or "WBC fault"
        if reason or t_now >= end_t:
            break
        g.run_to(t_now + 0.01)  # the next check at a held tick: the same ticks in every run
    truth = g.truth_since(push_t - 0.3)
    with g.lock:
        joints = dict(g.joints)
    stamps = [t for t in sorted(truth) if t in joints]
    series: dict[str, list[Any]] = {"t": [], "com": [], "dcm": [], "ref": [], "soles": []}
    omega = math.sqrt(9.81 / max(kin.offset[2], 0.1))
    for t in stamps[::2]:
        p, qw, tw = truth[t]
        com, vcom, soles, ref = kin.evaluate(p, qw, tw, *joints[t])
        series["t"].append(t - push_t)
        series["com"].append(com.tolist())
        series["dcm"].append((com[:2] + vcom[:2] / omega).tolist())
        series["ref"].append(ref.tolist())
        series["soles"].append({s: v.tolist() for s, v in soles.items()})
    if not reason and series["t"]:
        ts = np.array(series["t"])
        at_push = int(np.argmin(np.abs(ts)))
        for side in series["soles"][0]:
            sole = np.array([s[side] for s in series["soles"]])[at_push:]
            lift = float((sole[:, 2] - sole[0, 2]).max())
            slide = float(np.linalg.norm(sole[:, :2] - sole[0, :2], axis=1).max())
            if lift > MAX_LIFT_M:
                reason = f"{side} sole lifted {lift * 100:.1f} cm"
            elif slide > MAX_SLIDE_M:
                reason = f"{side} sole slid {slide * 100:.1f} cm"
        if not reason:
            tail = np.array(series["com"])[ts >= ts[-1] - 0.1]
            speed = (
                float(np.linalg.norm(tail[-1, :2] - tail[0, :2]) / max(0.1, 1e-9)) if len(tail) > 1 else 0.0
            )
            if speed > MAX_END_SPEED:
                reason = f"CoM still moving {speed:.2f} m/s at the end"
        if not reason and series["t"][-1] < PUSH_DURATION_S + OBSERVE_S - 0.05:
            reason = "trial ended early"
    return Trial(direction, impulse, not reason, reason or "stood", push_t, series, time.monotonic() - wall0)


def bisect_direction(
    g: WbcGraph, kin: Kinematics, config: Any, direction: str, bound: float, iterations: int, log: Any
) -> tuple[float, list[Trial], Trial | None]:
    """Largest survived impulse (N s) by bisection on ``[0, 1.6 bound]`` (extended while the top survives)."""
    lo, hi = 0.0, 1.6 * bound
    trials: list[Trial] = []
    best: Trial | None = None
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        tr = run_trial(g, kin, direction, mid, config)
        trials.append(tr)
        log(
            f"  {direction}: {mid:6.2f} N s ({mid / bound * 100:5.1f} % of bound) -> {tr.reason} "
            f"[{tr.wall_s:.1f} s wall]"
        )
        if tr.survived:
            lo, best = mid, tr
        else:
            hi = mid
    if lo >= 1.6 * bound * (1 - 0.5**iterations) - 1e-9:  # never failed: probe beyond the bracket
        tr = run_trial(g, kin, direction, 2.0 * bound, config)
        trials.append(tr)
        if tr.survived:
            lo, best = 2.0 * bound, tr
    return lo, trials, best


def plot_push(path: Path, direction: str, trial: Trial, bound: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u = np.array(DIRECTIONS[direction])
    t = np.array(trial.series["t"])
    com = np.array(trial.series["com"])[:, :2]
    dcm = np.array(trial.series["dcm"])
    ref = np.array(trial.series["ref"])
    origin = ref[0]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(t, (com - origin) @ u * 100, label="CoM")
    ax.plot(t, (dcm - origin) @ u * 100, label="capture point (DCM)")
    ax.plot(t, (ref - origin) @ u * 100, "k--", lw=0.8, label="reference")
    ax.axhline(bound["d_m"] * 100, color="r", lw=0.8, label="support polygon edge")
    ax.axvspan(0.0, PUSH_DURATION_S, color="0.85", label="push")
    ax.set_xlabel("time since the push (s)")
    ax.set_ylabel(f"along the push ({direction}) (cm)")
    ax.set_title(
        f"{direction}: {trial.impulse:.2f} N s ({trial.impulse / bound['bound_Ns'] * 100:.0f} % of the LIPM "
        f"bound {bound['bound_Ns']:.1f} N s), survived; ground truth"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_push_eval(
    out_dir: Path,
    robot: str = "g1",
    directions: tuple[str, ...] = ("front", "back", "left", "right"),
    iterations: int = 5,
    log: Any = print,
) -> dict[str, Any]:
    """Bisect the survived push impulse per direction through the graph; the result dictionary."""
    from humanoid_control.model.robot_config import load_robot_config
    from humanoid_control.wbc.balance import push_impulse_bounds

    wall0 = time.monotonic()
    config = load_robot_config(robot)
    kin = Kinematics(config)
    bounds = push_impulse_bounds(config, kin.pmodel, PUSH_DURATION_S)
    g = WbcGraph(Path(out_dir), robot)
    result: dict[str, Any] = {
        "evaluation": "push",
        "controller": "wbc_stand",
        "push_duration_s": PUSH_DURATION_S,
    }
    try:
        g.start()
        log(f"graph up, WBC active after {time.monotonic() - wall0:.1f} s wall")
        for direction in directions:
            b = bounds[direction]
            best_ns, trials, best = bisect_direction(
                g, kin, config, direction, b["bound_Ns"], iterations, log
            )
            result[direction] = {
                "max_Ns": round(best_ns, 3),
                "bound_Ns": round(b["bound_Ns"], 3),
                "ratio": round(best_ns / b["bound_Ns"], 3),
                "trials": [[round(tr.impulse, 3), tr.survived, tr.reason] for tr in trials],
            }
            if best is not None:
                png = Path(out_dir) / f"push_{direction}.png"
                plot_push(png, direction, best, b)
                result[direction]["plot"] = str(png)
        diag = g.probe.last_diagnostics()
    finally:
        g.stop()
    result["lockstep_timeouts"] = int(diag.get("lockstep_timeouts", "0") or 0)
    result["respawn_retries"] = g.respawn_retries
    result["bound_params"] = {k: round(v, 4) for k, v in bounds["params"].items()}
    result["criteria"] = {
        "max_tilt_deg": MAX_TILT_DEG,
        "max_sole_lift_m": MAX_LIFT_M,
        "max_sole_slide_m": MAX_SLIDE_M,
        "max_end_com_speed_mps": MAX_END_SPEED,
        "early_stop_com_offset_m": MAX_COM_OFFSET_M,
        "settle_s": SETTLE_S,
        "observe_s": OBSERVE_S,
    }
    result["wall_s"] = round(time.monotonic() - wall0, 1)
    (Path(out_dir) / "push.json").write_text(json.dumps(result, indent=2))
    return result


def run_stand_eval(
    out_dir: Path, seconds: float = 60.0, robot: str = "g1", log: Any = print
) -> dict[str, Any]:
    """Stand ``seconds`` under the WBC; CoM errors against ground truth (see module docstring)."""
    from humanoid_control.model.robot_config import load_robot_config

    wall0 = time.monotonic()
    config = load_robot_config(robot)
    kin = Kinematics(config)
    g = WbcGraph(Path(out_dir), robot, sim_duration_s=seconds + 30.0)
    g.record_odom = True
    fell = False
    try:
        g.start()
        t0 = g.now()
        log(f"WBC active at t = {t0:.3f} s; standing {seconds:g} s")
        while True:
            t = g.now()
            with g.probe.lock:
                z = g.probe.data.truth_pos[-1][2] if g.probe.data.truth_pos else 1.0
                modes = list(g.probe.data.modes)
            if z < config.simulation.fall_height or modes[-1] == "damping":
                fell = True
                break
            if t >= t0 + seconds - 1e-9:
                break
            g.run_to(min(t + 0.5, t0 + seconds))
        sim_wall = time.monotonic() - wall0
        diag = g.probe.last_diagnostics()
        truth = g.truth_since(t0)
        with g.lock:
            joints, odom, wbc_states = dict(g.joints), dict(g.odom), list(g.wbc_states)
    finally:
        g.stop()
    stamps = [t for t in sorted(truth) if t in joints and t0 <= t <= t0 + seconds]
    err, est_err, ts = [], [], []
    for t in stamps:
        p, qw, tw = truth[t]
        com, _v, soles, ref = kin.evaluate(p, qw, tw, *joints[t])
        err.append(np.linalg.norm(com[:2] - ref))
        ts.append(t - t0)
        if t in odom:
            mid = np.mean(list(soles.values()), axis=0)
            op, oq, otw = odom[t]
            ecom, _ev, esoles, _eref = kin.evaluate(op, oq, otw, *joints[t])
            emid = np.mean(list(esoles.values()), axis=0)
            est_err.append(np.linalg.norm((ecom - emid) - (com - mid)))
    err_a = np.array(err)
    result = {
        "evaluation": "stand",
        "controller": "wbc_stand",
        "fell": bool(fell),
        "duration_s": round(ts[-1], 3) if ts else 0.0,
        "com_error_rms_m": round(float(np.sqrt(np.mean(err_a**2))), 5) if len(err_a) else None,
        "com_error_max_m": round(float(err_a.max()), 5) if len(err_a) else None,
        "com_estimate_error_rms_m": round(float(np.sqrt(np.mean(np.square(est_err)))), 5)
        if est_err
        else None,
        "samples": len(stamps),
        "wbc_states": wbc_states,
        "driver_modes": g.probe.data.modes,
        "lockstep_timeouts": int(diag.get("lockstep_timeouts", "0") or 0),
        "realtime_factor": round(seconds / max(sim_wall, 1e-9), 3),
        "wall_s": round(time.monotonic() - wall0, 1),
    }
    if len(err_a):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.plot(ts, err_a * 100)
        ax.set_xlabel("time since the WBC took over (s)")
        ax.set_ylabel("|CoM - reference| horizontal (cm)")
        ax.set_title("WBC standing through the graph (estimator /odom in the loop); ground truth")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(Path(out_dir) / "stand_com_error.png", dpi=110)
        plt.close(fig)
    (Path(out_dir) / "stand.json").write_text(json.dumps(result, indent=2))
    return result
