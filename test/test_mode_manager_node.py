"""The mode manager node in this process (no driver, no simulator): parameters with ranges, refusals with
their reasons, the /cmd_vel it always publishes (zero on a timeout), refused and clipped inputs."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def harness() -> Iterator[dict[str, Any]]:
    import rclpy
    from geometry_msgs.msg import Twist
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Joy
    from std_msgs.msg import String

    from humanoid_control.modes.mode_manager_node import ModeManagerNode

    rclpy.init()
    try:
        node = ModeManagerNode()
    except BaseException:
        rclpy.shutdown()
        raise
    helper = rclpy.create_node("mode_manager_test_helper")
    latched = QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    received: list[tuple[float, float, float]] = []
    states: list[dict[str, Any]] = []
    lock = threading.Lock()

    def on_cmd(msg: Any) -> None:
        with lock:
            received.append((msg.linear.x, msg.linear.y, msg.angular.z))

    def on_state(msg: Any) -> None:
        with lock:
            states.append(json.loads(msg.data))

    helper.create_subscription(Twist, "/cmd_vel", on_cmd, 10)
    helper.create_subscription(String, "/mode_manager/state", on_state, latched)
    parts = {
        "node": node,
        "helper": helper,
        "teleop": helper.create_publisher(Twist, "/teleop/cmd_vel", 10),
        "joy": helper.create_publisher(Joy, "/joy", 10),
        "driver_mode": helper.create_publisher(String, "/robot_driver/mode", latched),
        "received": received,
        "states": states,
        "lock": lock,
    }
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    executor.add_node(helper)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield parts
    finally:
        executor.shutdown()
        node.destroy_node()
        helper.destroy_node()
        rclpy.shutdown()
        thread.join(timeout=5)


def _call(h: dict[str, Any], name: str) -> tuple[bool, str]:
    from std_srvs.srv import Trigger

    client = h["helper"].create_client(Trigger, f"/mode_manager/{name}")
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(Trigger.Request())
    end = time.monotonic() + 10.0
    while not future.done() and time.monotonic() < end:
        time.sleep(0.01)
    result = future.result()
    h["helper"].destroy_client(client)
    return bool(result.success), str(result.message)


def _wait(h: dict[str, Any], what: str, predicate: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with h["lock"]:
            if predicate():
                return
        time.sleep(0.02)
    raise AssertionError(f"{what}: not seen (last state {h['states'][-1:]})")


def test_parameters_have_ranges_and_bad_values_are_refused(harness: dict[str, Any]) -> None:
    from rclpy.parameter import Parameter

    node = harness["node"]
    for name, value in (("vx_max", 10.0), ("vx_min", 0.5), ("max_torque_step", 0.0), ("joy_axis_vx", -1)):
        assert not node.set_parameters([Parameter(name, value=value)])[0].successful, name
    assert node.set_parameters([Parameter("vx_max", value=0.5)])[0].successful
    assert node.mux.settings.limits.vx_max == 0.5 and node.joy_mapping.scale_vx == 0.5
    for name in ("vx_max", "ax_max", "teleop_timeout_s", "takeover_threshold", "max_torque_step"):
        descriptor = node.describe_parameter(name)
        assert descriptor.floating_point_range, name
    assert node.describe_parameter("joy_deadman_button").integer_range


def test_requests_are_refused_with_their_reason(harness: dict[str, Any]) -> None:
    ok, msg = _call(harness, "stand")
    assert not ok and msg == "stand: the driver is still booting (ramp to the default pose)"
    from std_msgs.msg import String

    harness["driver_mode"].publish(String(data="hold"))
    _wait(harness, "mode hold", lambda: bool(harness["states"]) and harness["states"][-1]["mode"] == "hold")
    ok, msg = _call(harness, "walk")  # no walking controller in this graph
    assert not ok and msg.startswith("walk: no walking controller is reachable (launch with"), msg
    ok, msg = _call(harness, "run_policy")
    assert not ok and "no policy runner" in msg
    assert _call(harness, "stand")[0]
    ok, msg = _call(harness, "estop")  # no driver here: the e-stop cannot be delivered, and says so
    assert not ok and "/robot_driver/estop is not available" in msg
    _wait(harness, "refusals counted", lambda: harness["states"][-1]["counts"]["refusals"] == 4)


def test_a_fallen_robot_without_a_simulator_is_refused_with_the_reason(harness: dict[str, Any]) -> None:
    """No driver ~/respawn here (as on hardware or an emulator): respawn is refused; the driver's ~/down
    report makes reset and stand refused with "robot is down" (a fall counted) until it is up again."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    h = harness
    latched = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    down = h["helper"].create_publisher(String, "/robot_driver/down", latched)
    h["driver_mode"].publish(String(data="hold"))
    _wait(h, "mode hold", lambda: bool(h["states"]) and h["states"][-1]["mode"] == "hold")
    ok, msg = _call(h, "respawn")
    assert not ok and msg == (
        "respawn: no respawn on hardware (the driver offers no ~/respawn: a real robot or an emulator); put "
        "the robot upright by hand, then reset"
    )
    h["driver_mode"].publish(String(data="damping"))  # the fall detection damped
    down.publish(String(data=json.dumps({"down": True, "tilt_deg": 87.6, "fall_tilt_deg": 60.0, "t": 3.2})))
    _wait(h, "down, damp", lambda: h["states"][-1]["robot_down"] and h["states"][-1]["mode"] == "damp")
    assert h["states"][-1]["counts"]["falls"] == 1
    why = (
        "robot is down: base tilt 88 deg beyond the driver's fall_tilt_deg 60; put it upright by hand, then "
        "reset"
    )
    for name in ("reset", "stand"):
        ok, msg = _call(h, name)
        assert not ok and msg == f"{name}: {why} (no respawn on hardware)", msg
    down.publish(String(data="not json"))  # ignored, with a warning
    down.publish(String(data=json.dumps({"down": False, "tilt_deg": 3.0, "fall_tilt_deg": 60.0, "t": 9.0})))
    _wait(h, "up again", lambda: not h["states"][-1]["robot_down"])
    ok, msg = _call(h, "reset")  # now the driver's reset is tried (there is no driver here)
    assert not ok and "/robot_driver/reset is not available" in msg, msg
    assert h["node"].record.counts["fall"] == 1


def test_cmd_vel_is_always_published_zero_on_timeout_and_bad_inputs_counted(harness: dict[str, Any]) -> None:
    from geometry_msgs.msg import Twist
    from sensor_msgs.msg import Joy

    h = harness
    _wait(h, "zero /cmd_vel with no source", lambda: len(h["received"]) >= 5)
    assert all(v == (0.0, 0.0, 0.0) for v in h["received"])
    twist = Twist()
    twist.linear.x = math.nan
    h["teleop"].publish(twist)
    h["joy"].publish(Joy(axes=[0.0, 0.0], buttons=[0] * 8))
    # clipped to vx_max, reached through the acceleration ramp (0.53 s): published until it is (or 10 s
    # pass, on a loaded machine), never above it
    end = time.monotonic() + 10.0
    twist.linear.x = 5.0
    while time.monotonic() < end:
        h["teleop"].publish(twist)
        time.sleep(0.05)
        with h["lock"]:
            if max(v[0] for v in h["received"]) >= 0.8 - 1e-9:
                break
    with h["lock"]:
        assert max(v[0] for v in h["received"]) == pytest.approx(0.8)
        n = len(h["received"])
    time.sleep(1.0)  # the teleop source times out (0.5 s): zeros, not silence
    with h["lock"]:
        tail = h["received"][n:]
    assert len(tail) > 20 and tail[-1] == (0.0, 0.0, 0.0)
    _wait(h, "counted inputs", lambda: h["states"][-1]["counts"]["inputs_refused"] == 2)
    with h["lock"]:
        assert h["states"][-1]["counts"]["inputs_clipped"] >= 1
