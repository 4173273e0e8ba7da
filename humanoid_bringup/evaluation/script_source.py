"""A ``/cmd_vel`` command script played on the simulated clock, started when the policy runner takes over.

Used by the evaluations that drive the policy runner through the ROS graph (``humanoid-eval locomotion``,
``humanoid-eval estimator``). The script's start ``t0`` (s, simulated time) is found from stamps, never from
arrival order:

- a runner that starts from the driver's hold (no ramp) sends no command before it runs: ``t0`` is the stamp
  of its first ``/joint_commands`` message;
- a runner that ramps first: ``t0`` is the first tick seen while ``/policy_runner/state`` is ``run`` (the
  state is read before the probe's ``/joint_states``, so a state published while tick k ran is in before
  tick k+1);
- a controller that commands through the driver's own ramp (the whole-body and walking controllers,
  ``start_on="driver_active"``): ``t0`` is the first tick seen while ``/robot_driver/mode`` is ``active``.

The command is published on the 10 ms grid of simulated time (100 Hz, plenty for a 50 Hz policy) and is zero
up to and including ``t0``. Once ``t0`` is known, the probe acknowledges 10 ms of ticks at once
(``GraphProbe.ack_period``) and the 500 Hz ``/joint_commands`` subscription, needed only for the start, is
dropped: both only cut the cost of a lockstep run; its results are unchanged.
"""

from __future__ import annotations

import threading
from typing import Any

from humanoid_policy.inprocess import command_at

Script = list[tuple[str, float, tuple[float, float, float]]]

GRID_S = 0.01  # the command's publication grid (s of simulated time)


class ScriptSource:
    """Plays ``script`` ((segment, duration s, (vx m/s, vy m/s, wz rad/s)) rows) on ``/cmd_vel``.

    ``setup`` goes into ``GraphProbe(setup=...)`` (or is called from the probe's own ``setup``) and
    ``on_tick`` into ``GraphProbe(on_tick=...)``; ``probe`` must be set before the graph starts.
    """

    def __init__(
        self,
        script: Script,
        stamp_digits: int | None = None,
        state_topic: str = "/policy_runner/state",
        start_on: str = "runner",
        command_topic: str = "/joint_commands",
    ) -> None:
        if start_on not in ("runner", "driver_active"):
            raise ValueError(f"start_on must be runner or driver_active, not {start_on!r}")
        self.script = script
        self.stamp_digits = stamp_digits  # stamps rounded to this many decimals (s), if set
        self.state_topic = state_topic
        self.start_on = start_on
        self.command_topic = command_topic  # the runner's commands (its mirror when it runs in the loop)
        self.driver_modes: list[str] = []  # /robot_driver/mode, in arrival order (start_on="driver_active")
        self.lock = threading.Lock()
        self.runner_states: list[str] = []  # the controller's state topic, in arrival order
        self.t0: float | None = None  # the script's start (s, simulated time)
        self.last_t: float | None = None  # the stamp of the latest tick seen (s)
        self.probe: Any = None
        self._pub: Any = None
        self._twist: Any = None
        self._cmd_sub: Any = None

    def setup(self, node: Any) -> None:
        """Create the subscriptions and the publisher; call before the probe's ``/joint_states``."""
        from geometry_msgs.msg import Twist
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(String, self.state_topic, self._on_runner_state, latched)
        self._twist = Twist
        self._pub = node.create_publisher(Twist, "/cmd_vel", 10)
        if self.start_on == "driver_active":
            node.create_subscription(String, "/robot_driver/mode", self._on_driver_mode, latched)
            return
        self._cmd_sub = node.create_subscription(
            JointState,
            self.command_topic,
            self._on_command,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
        )

    def stamp(self, msg: Any) -> float:
        """A header's stamp (s)."""
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        return t if self.stamp_digits is None else round(t, self.stamp_digits)

    def _on_runner_state(self, msg: Any) -> None:
        with self.lock:
            self.runner_states.append(msg.data)

    def _on_driver_mode(self, msg: Any) -> None:
        with self.lock:
            self.driver_modes.append(msg.data)

    def _on_command(self, msg: Any) -> None:
        t = self.stamp(msg)
        with self.lock:
            if self.t0 is None and "ramp" not in self.runner_states:
                self.t0 = t

    def on_tick(self, msg: Any) -> None:
        """Per ``/joint_states`` tick: find the start, publish the command on the 10 ms grid."""
        t = self.stamp(msg)
        with self.lock:
            states = self.runner_states
            if self.start_on == "driver_active":
                if self.t0 is None and self.driver_modes and self.driver_modes[-1] == "active":
                    self.t0 = t  # the first tick seen with the driver taking the controller's commands
                    self.probe.ack_period = GRID_S
            elif self.t0 is None and "ramp" in states and states[-1] == "run":
                self.t0 = t  # after a ramp: the first tick seen running
            t0 = self.t0
            self.last_t = t
        if t0 is not None and self._cmd_sub is not None:
            self.probe.ack_period = GRID_S
            self.probe.node.destroy_subscription(self._cmd_sub)
            self._cmd_sub = None
        if round(t * 1000.0) % round(GRID_S * 1000.0) != 0:
            return
        # zero up to the start tick itself: t0 may not be known yet when that tick is processed
        cmd = command_at(self.script, t - t0) if t0 is not None and t > t0 + 1e-9 else (0.0, 0.0, 0.0)
        tw = self._twist()
        tw.linear.x, tw.linear.y, tw.angular.z = cmd
        self._pub.publish(tw)
