"""The robot driver's per-tick checks of a hardware backend: a link fault latches damping, motors that do not
follow the commands block activation (``link_fault``, ``activation_blocker``), and the robot's own remote
(the Unitree wireless remote, ``remote()``) goes out on ``/joy`` in joy_node's Xbox layout, which
``humanoid_control/modes/joy_mapping.py`` expects.

:class:`DriverHardwareMixin` is a base of
:class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`; its loop thread calls
``_check_backend`` after each read. Simulators have none of these.
"""

from __future__ import annotations

from typing import Any

from sensor_msgs.msg import Joy

from humanoid_control.driver.driver_core import DriverMode
from humanoid_control.ros.node_utils import to_time_msg


class DriverHardwareMixin:
    """The hardware backend's checks of :class:`~humanoid_control.driver.robot_driver_node.RobotDriverNode`
    (``self`` is the driver node)."""

    _joy_tick = 0

    def _check_backend(self) -> None:
        """Loop thread: a hardware backend's link fault latches damping; motors that do not follow block
        activation; the robot's remote goes out on /joy (every 10 ticks)."""
        fault = getattr(self.backend, "link_fault", None)
        blocker = getattr(self.backend, "activation_blocker", None) or ""
        with self.lock:
            if fault and self.core.mode != DriverMode.DAMPING:
                self.core.fault(fault)
            if blocker != self.core.activation_block:
                self.core.activation_block = blocker
                if blocker:
                    self.get_logger().error(f"refusing to go active: {blocker}")
                else:
                    self.get_logger().info("the motors follow the commands again: activation allowed")
        if self.pub_joy is not None:
            self._joy_tick += 1
            if self._joy_tick % 10 == 0:
                remote = self.backend.remote()  # type: ignore[attr-defined]
                if remote is not None:
                    self.pub_joy.publish(_remote_to_joy(remote, self.backend_time()))


#: /joy layout of the robot's remote (joy_node's Xbox layout, which modes/joy_mapping.py expects): button
#: index -> remote button; axes 0 left stick left+, 1 left stick up+, 2 unused, 3 right stick left+,
#: 4 right stick up+
JOY_BUTTONS = (
    "A",
    "B",
    "X",
    "Y",
    "L1",
    "R1",
    "select",
    "start",
    "L2",
    "R2",
    "up",
    "down",
    "left",
    "right",
    "F1",
    "F2",
)


def _remote_to_joy(remote: Any, stamp: float) -> Joy:
    """sensor_msgs/Joy of the robot's remote (``JOY_BUTTONS`` order; sticks with joy_node's signs)."""
    msg = Joy()
    msg.header.stamp = to_time_msg(stamp)
    msg.header.frame_id = "wireless_remote"
    msg.axes = [float(-remote.lx), float(remote.ly), 0.0, float(-remote.rx), float(remote.ry)]
    msg.buttons = [int(remote.buttons.get(name, False)) for name in JOY_BUTTONS]
    return msg
