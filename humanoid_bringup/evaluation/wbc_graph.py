"""The launched whole-body graph (driver, state estimator and the WBC or the walking controller, in lockstep)
with a recording probe, and the pinocchio kinematics that judge its states; ``push_eval`` runs its trials and
evaluations on it.

``controller``: ``wbc_stand`` (``wbc_controller``) or ``mpc_walk`` (``walking_controller``). With ``mpc_walk``
the probe also plays a constant ``/cmd_vel`` (:attr:`WbcGraph.cmd_vel`, set at held ticks, published on the
10 ms grid of simulated time like :mod:`~.script_source`) and records ``/walking/status`` (which feet the
controller plans in contact, 50 Hz), both deterministic at held ticks."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env
from humanoid_control.ros.lockstep import tick_stream_qos

RESPAWN_SETTLE_S = 0.5  # driver ramp in place after a respawn; the estimator is reset in it (s)
CONTROLLER_NODES = {"wbc_stand": "wbc_controller", "mpc_walk": "walking_controller"}
CMD_GRID_S = 0.01  # /cmd_vel publication grid (s of simulated time)
PARAMETER_ATTEMPTS = 3  # a driver-parameter call that times out (a loaded machine) is repeated this often


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
    """The launched graph (driver, estimator, WBC or walking controller in lockstep) plus an observer
    recording keyed by stamp. ``extra_args``: more launch arguments (``scene``, ...)."""

    def __init__(
        self,
        out_dir: Path,
        robot: str = "g1",
        sim_duration_s: float = 3600.0,
        controller: str = "wbc_stand",
        extra_args: dict[str, str] | None = None,
    ) -> None:
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        if controller not in CONTROLLER_NODES:
            raise ValueError(f"controller must be one of {sorted(CONTROLLER_NODES)}, not {controller!r}")
        self.controller = controller
        self.node_name = CONTROLLER_NODES[controller]
        self.walking = controller == "mpc_walk"
        self.cmd_vel = (0.0, 0.0, 0.0)  # mpc_walk: (vx m/s, vy m/s, wz rad/s) played on /cmd_vel
        self.status: list[list[float]] = []  # mpc_walk: /walking/status rows (fields: status_fields)
        self.status_fields: list[str] = []
        self._cmd_pub: Any = None
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
        self.parameter_retries = 0  # driver-parameter calls repeated after a timeout
        qos = tick_stream_qos(500)  # per-tick streams, read as a lockstep peer (transient-local)
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        from geometry_msgs.msg import WrenchStamped

        def setup(node: Any) -> None:  # served before the per-tick streams (see GraphProbe's setup)
            node.create_subscription(WrenchStamped, "/sim/push", self._on_push, 10)
            node.create_subscription(String, f"/{self.node_name}/state", self._on_wbc_state, latched)
            if self.walking:
                from std_msgs.msg import Float64MultiArray

                node.create_subscription(Float64MultiArray, "/walking/status", self._on_status, 1000)
                self._cmd_pub = node.create_publisher(Twist, "/cmd_vel", 10)

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
            ack_period=CMD_GRID_S if self.walking else 0.02,
        )
        self.probe.subscribe(Odometry, "/odom", self._on_odom, qos, per_tick=True)
        args = {
            "robot": robot,
            "controller": controller,
            "clock": "lockstep",
            "start_paused": "true",
            "sim_duration_s": f"{sim_duration_s:.1f}",
            **(extra_args or {}),
        }
        self.graph = LaunchedGraph(args, out_dir / "graph.log")

    # ------------------------------------------------------------------ recording
    @staticmethod
    def _key(msg: Any) -> float:
        return round(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, 4)

    def _on_joints(self, msg: Any) -> None:
        key = self._key(msg)
        with self.lock:
            self.joints[key] = (np.array(msg.position), np.array(msg.velocity))
            cmd = self.cmd_vel
        if self._cmd_pub is not None and round(key * 1000.0) % round(CMD_GRID_S * 1000.0) == 0:
            from geometry_msgs.msg import Twist

            tw = Twist()
            tw.linear.x, tw.linear.y, tw.angular.z = (float(v) for v in cmd)
            self._cmd_pub.publish(tw)  # before this tick's acknowledgement (GraphProbe.on_tick)

    def _on_status(self, msg: Any) -> None:
        with self.lock:
            if not self.status_fields and msg.layout.dim:
                self.status_fields = msg.layout.dim[0].label.split(",")
            self.status.append(list(msg.data))

    def set_cmd_vel(self, vx: float, vy: float = 0.0, wz: float = 0.0) -> None:
        """mpc_walk: the ``/cmd_vel`` played from the next grid tick on (call at a held tick)."""
        with self.lock:
            self.cmd_vel = (float(vx), float(vy), float(wz))

    def latest_status(self) -> dict[str, float]:
        """mpc_walk: the latest ``/walking/status`` row by field name (empty before the first)."""
        with self.lock:
            if not self.status or not self.status_fields:
                return {}
            return dict(zip(self.status_fields, self.status[-1], strict=False))

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
            self.status = [row for row in self.status if row[0] >= t]

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
            peers=("state_estimator", self.node_name), running=self.graph.running, hold_at=0.0
        )
        self.probe.run_until(0.0)  # returns at the held first tick
        if not self.run_while(lambda: not self.modes() or self.modes()[-1] != "active", 10.0):
            raise RuntimeError(
                f"the {self.node_name} never took over (modes {self.probe.data.modes}); "
                f"see {self.graph.log_path}"
            )

    def stop(self) -> None:
        close_graph(self.probe, self.graph)

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

    def set_driver_parameters(self, params: list[Any], attempts: int = PARAMETER_ATTEMPTS) -> None:
        """Set driver parameters (``rclpy.parameter.Parameter``) in one atomic call; raise ``RuntimeError`` if
        refused. A call that times out (service missing, no answer within 10 s: a loaded machine) is repeated
        up to ``attempts`` times, then ``TimeoutError``. Setting the same values twice is harmless."""
        for attempt in range(attempts):
            try:
                self._set_driver_parameters_once(params)
                return
            except TimeoutError:
                if attempt == attempts - 1 or not self.graph.running():
                    raise
                self.parameter_retries += 1

    def _set_driver_parameters_once(self, params: list[Any]) -> None:
        self.probe.set_driver_parameters(params)

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
