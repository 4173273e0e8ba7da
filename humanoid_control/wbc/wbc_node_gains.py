"""The gains hand-shake of the whole-body controller node (:mod:`humanoid_control.wbc.wbc_node`) with the
robot driver.

:class:`WbcGainsMixin` is a base class of :class:`~humanoid_control.wbc.wbc_node.WbcNode` holding the
methods that set the driver's ``gain_profile`` parameter to the node's own (and, under the mode manager,
clear another controller's ``command_kp`` / ``command_kd``) through ``<driver>/set_parameters_atomically``:
retried by the node's gains timer at start-up (``_request_gains``, ``_on_gains_set``), or set and waited for
by ``~/start`` (``_set_gains_now``). The runner's ``gains_ready`` turns true once the driver accepted them;
the node sends nothing before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rcl_interfaces.srv import SetParametersAtomically
from rclpy.parameter import Parameter

if TYPE_CHECKING:
    from humanoid_control.ros.service_caller import ServiceCaller
    from humanoid_control.wbc.runner import WbcRunner


class WbcGainsMixin:
    """The WBC node's gains hand-shake with the driver (a base class of the node: it reads and sets the
    node's state)."""

    # the node's state used here (set in ``WbcNode.__init__``)
    runner: WbcRunner
    gain_profile: str
    autostart: bool
    param_client: Any
    _gain_request: Any
    _gains_timer: Any
    _caller: ServiceCaller | None

    if TYPE_CHECKING:  # the node's methods used here

        def get_logger(self) -> Any: ...

    def _request_gains(self) -> None:
        if self.runner.gains_ready:
            self._gains_timer.cancel()
            return
        if self._gain_request is not None or not self.param_client.service_is_ready():
            return
        self._gain_request = self.param_client.call_async(self._gains_msg())
        self._gain_request.add_done_callback(self._on_gains_set)

    def _gains_msg(self) -> Any:
        """The driver's parameters for this node's commands: its gain profile (and, switched by the mode
        manager, another controller's explicit gains cleared)."""
        req = SetParametersAtomically.Request()
        req.parameters = [
            Parameter("gain_profile", Parameter.Type.STRING, self.gain_profile).to_parameter_msg()
        ]
        if not self.autostart:
            req.parameters += [
                Parameter(name, Parameter.Type.DOUBLE_ARRAY, []).to_parameter_msg()
                for name in ("command_kp", "command_kd")
            ]
        return req

    def _set_gains_now(self, timeout: float = 4.0) -> str | None:
        """Set the driver's gain profile and wait for its answer (wall time, ``timeout`` s, under the mode
        manager's 5 s for the start); None, or why not."""
        assert self._caller is not None
        result = self._caller.request_when_ready("gains", self._gains_msg(), timeout)
        if isinstance(result, str):
            return result
        if not result.result.successful:
            return f"the driver refused gain profile '{self.gain_profile}': {result.result.reason}"
        self.runner.gains_ready = True
        self.get_logger().info(f"driver applies gain profile '{self.gain_profile}' to our commands")
        return None

    def _on_gains_set(self, future: Any) -> None:
        self._gain_request = None
        try:
            result = future.result().result
        except Exception as exc:
            self.get_logger().error(f"setting the driver's gain profile failed: {exc}")
            return
        if result.successful:
            self.runner.gains_ready = True
            self.get_logger().info(f"driver applies gain profile '{self.gain_profile}' to our commands")
        else:
            self.get_logger().error(f"the driver refused gain profile '{self.gain_profile}': {result.reason}")
