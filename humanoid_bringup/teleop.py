"""``humanoid-teleop``: keyboard teleop in a terminal (curses; works over ssh).

Publishes the keyboard's velocity on ``/teleop/cmd_vel`` (geometry_msgs/Twist: linear.x, linear.y in m/s,
angular.z in rad/s, heading frame) at ``--rate`` Hz, all the time (zero when stopped), and calls the mode
manager's services for the mode keys. Shows the mode manager's latched ``/mode_manager/state`` and the answer
to the last request. Keys (:mod:`humanoid_control.modes.teleop_keys`):

    arrows or w/s (forward/back), a/d (turn left/right), z/c (sideways), space: stop
    1 stand   2 walk   3 run_policy   0 damp   e E-STOP   r reset   R respawn (simulation)
    o/p autonomy on/off   q quit

In simulation the mode manager's timeouts run on simulated time; this program publishes on wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
import time
from typing import Any

from humanoid_control.modes.teleop_keys import TeleopKeys

HELP = [
    "arrows / w s: forward back   a d: turn   z c: sideways   space: stop",
    "1 stand  2 walk  3 run_policy  0 damp  e E-STOP  r reset  R respawn (sim)  o/p autonomy on/off  q quit",
]


class TeleopClient:
    """The ROS side: a node in its own thread that publishes the velocity and calls the services."""

    def __init__(self, namespace: str, topic: str) -> None:
        import rclpy
        from geometry_msgs.msg import Twist
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        from humanoid_control.ros.node_utils import QuietNode

        self.namespace = namespace.rstrip("/")
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = QuietNode(f"humanoid_teleop_{os.getpid()}", context=self.context)
        self._twist = Twist
        self.pub = self.node.create_publisher(Twist, topic, 10)
        self.lock = threading.Lock()
        self.state: dict[str, Any] = {}
        self.status = "ready"
        self.node.create_subscription(
            String,
            f"{self.namespace}/state",
            self._on_state,
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )
        from std_srvs.srv import SetBool, Trigger

        from humanoid_control.modes.teleop_keys import REQUEST_KEYS

        # created now: a client is ready only once discovery matched it to its service
        self._clients: dict[str, Any] = {
            service: self.node.create_client(
                Trigger if data is None else SetBool, f"{self.namespace}/{service}"
            )
            for service, data in REQUEST_KEYS.values()
        }
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        with contextlib.suppress(Exception):  # shutting down
            self.executor.spin()

    def _on_state(self, msg: Any) -> None:
        try:
            state = json.loads(msg.data)
        except ValueError:
            return
        with self.lock:
            self.state = state

    def publish(self, velocity: tuple[float, float, float]) -> None:
        """One ``/teleop/cmd_vel`` message."""
        msg = self._twist()
        msg.linear.x, msg.linear.y, msg.angular.z = (float(v) for v in velocity)
        self.pub.publish(msg)

    def call(self, service: str, data: bool | None) -> None:
        """Call ``<namespace>/<service>`` (Trigger, or SetBool with ``data``) without blocking the keys."""
        threading.Thread(target=self._call, args=(service, data), daemon=True).start()

    def _call(self, service: str, data: bool | None) -> None:
        from std_srvs.srv import SetBool, Trigger

        name = f"{self.namespace}/{service}"
        client = self._clients[service]
        with self.lock:
            self.status = f"{name}: calling ..."
        if not client.wait_for_service(timeout_sec=2.0):
            with self.lock:
                self.status = f"{name}: not available"
            return
        future = client.call_async(Trigger.Request() if data is None else SetBool.Request(data=data))

        def done(f: Any) -> None:
            try:
                result = f.result()
                text = f"{name}: {'ok' if result.success else 'REFUSED'}: {result.message}"
            except Exception as exc:
                text = f"{name}: failed: {exc}"
            with self.lock:
                self.status = text

        future.add_done_callback(done)

    def close(self) -> None:
        """Publish a last zero, stop the thread."""
        self.publish((0.0, 0.0, 0.0))
        time.sleep(0.1)
        self.context.try_shutdown()
        self.thread.join(timeout=2.0)


def _draw(screen: Any, keys: TeleopKeys, client: TeleopClient, topic: str) -> None:
    import curses

    with client.lock:
        state, status = dict(client.state), client.status
    lines = [
        "humanoid-teleop",
        *HELP,
        "",
        f"{topic}: vx {keys.vx:+.2f} m/s   vy {keys.vy:+.2f} m/s   wz {keys.wz:+.2f} rad/s",
        (
            f"mode {state.get('mode', '?')}   source {state.get('source', '?')}   autonomy "
            f"{'on' if state.get('autonomy') else 'off'}   driver {state.get('driver_mode', '?')}   policy "
            f"{state.get('policy_state', '?')}"
            if state
            else "mode manager: no state yet"
        ),
        f"last: {status}",
    ]
    screen.erase()
    height, width = screen.getmaxyx()
    for row, line in enumerate(lines[:height]):
        with contextlib.suppress(curses.error):
            screen.addstr(row, 0, line[: max(0, width - 1)])
    screen.refresh()


def run(screen: Any, options: argparse.Namespace) -> None:
    """The curses loop: keys in, velocity out at ``options.rate`` Hz."""
    import curses

    with contextlib.suppress(curses.error):  # terminals without cursor control
        curses.curs_set(0)
    screen.keypad(True)
    screen.timeout(50)
    keys = TeleopKeys(step_vx=options.step_linear, step_vy=options.step_linear, step_wz=options.step_angular)
    client = TeleopClient(options.namespace, options.topic)
    period = 1.0 / options.rate
    next_pub = time.monotonic()
    try:
        while True:
            ch = screen.getch()
            if ch != -1:
                key = curses.keyname(ch).decode(errors="replace")
                result = keys.press(key)
                if result.request is not None:
                    if result.request[0] in ("estop", "damp"):
                        client.publish(keys.velocity)  # the zero first
                    client.call(*result.request)
                if result.quit:
                    break
                if result.known:
                    client.publish(keys.velocity)
                    next_pub = time.monotonic() + period
            now = time.monotonic()
            if now >= next_pub:
                client.publish(keys.velocity)
                next_pub = max(next_pub + period, now)
            _draw(screen, keys, client, options.topic)
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanoid-teleop``."""
    parser = argparse.ArgumentParser(
        prog="humanoid-teleop",
        description="Keyboard teleop in a terminal: /teleop/cmd_vel and the mode manager's services.",
        epilog="\n".join(HELP),
    )
    parser.add_argument(
        "--rate", type=float, default=10.0, help="publishing rate (Hz, wall clock; default 10)"
    )
    parser.add_argument("--topic", default="/teleop/cmd_vel", help="velocity topic (default /teleop/cmd_vel)")
    parser.add_argument(
        "--namespace", default="/mode_manager", help="the mode manager (default /mode_manager)"
    )
    parser.add_argument("--step-linear", type=float, default=0.1, help="m/s per key press (default 0.1)")
    parser.add_argument("--step-angular", type=float, default=0.2, help="rad/s per key press (default 0.2)")
    options = parser.parse_args(argv)
    if not (0.5 <= options.rate <= 100.0):
        parser.error("--rate must be within 0.5-100 Hz")
    import curses

    with contextlib.suppress(KeyboardInterrupt):
        curses.wrapper(run, options)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
