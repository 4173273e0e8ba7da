"""The gains hand-shake of the policy runner node (:mod:`humanoid_policy.policy_runner_node`) with the robot
driver.

:class:`PolicyGainsMixin` is a base class of :class:`~humanoid_policy.policy_runner_node.PolicyRunnerNode`
holding the methods that set the driver's ``command_kp`` / ``command_kd`` parameters (robot joint order) to
the manifest's PD gains: through ``<driver>/set_parameters_atomically``, retried by the node's gains timer
at start-up (``_request_gains``, ``_on_gains_set``) or set and waited for by ``~/start``
(``_set_gains_now``), or, in the driver's loop, on the driver's parameters directly (``in_loop_gains``). The
runner's ``gains_ready`` turns true once the driver accepted them; the node sends nothing before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rcl_interfaces.srv import SetParametersAtomically
from rclpy.parameter import Parameter

if TYPE_CHECKING:
    from humanoid_control.ros.service_caller import ServiceCaller
    from humanoid_policy.policy_core import PolicyCore
    from humanoid_policy.runner import PolicyRunner


class PolicyGainsMixin:
    """The policy runner node's gains hand-shake with the driver (a base class of the node: it reads and
    sets the node's state)."""

    # the node's state used here (set in ``PolicyRunnerNode.__init__``)
    core: PolicyCore
    runner: PolicyRunner
    driver: str
    in_loop_gains: Callable[[list[float], list[float]], str | None] | None
    param_client: Any
    _gain_request: Any
    _gains_timer: Any
    _caller: ServiceCaller | None

    if TYPE_CHECKING:  # the node's methods used here

        def get_logger(self) -> Any: ...

    def _gains_msg(self) -> Any:
        req = SetParametersAtomically.Request()
        req.parameters = [
            Parameter(
                "command_kp", Parameter.Type.DOUBLE_ARRAY, [float(v) for v in self.core.kp]
            ).to_parameter_msg(),
            Parameter(
                "command_kd", Parameter.Type.DOUBLE_ARRAY, [float(v) for v in self.core.kd]
            ).to_parameter_msg(),
        ]
        return req

    def _request_gains(self) -> None:
        if self.runner.gains_ready:
            self._gains_timer.cancel()
            return
        if self._gain_request is not None:
            return
        if self.in_loop_gains is not None:
            self._set_gains_now()
            return
        if not self.param_client.service_is_ready():
            return
        self._gain_request = self.param_client.call_async(self._gains_msg())
        self._gain_request.add_done_callback(self._on_gains_set)

    def _set_gains_now(self, timeout: float = 5.0) -> str | None:
        """Set the driver's gains and wait for its answer (wall time, ``timeout`` s); None, or why not."""
        if self.in_loop_gains is not None:  # same process: the driver's parameters, set directly
            why = self.in_loop_gains([float(v) for v in self.core.kp], [float(v) for v in self.core.kd])
            if why is not None:
                return f"the driver refused the policy's gains: {why}"
            self.runner.gains_ready = True
            self.get_logger().info(f"driver uses the policy's PD gains ({self.driver}/command_kp, kd)")
            return None
        assert self._caller is not None
        result = self._caller.request_when_ready("gains", self._gains_msg(), timeout)
        if isinstance(result, str):
            return result
        if not result.result.successful:
            return f"the driver refused the policy's gains: {result.result.reason}"
        self.runner.gains_ready = True
        self.get_logger().info(f"driver uses the policy's PD gains ({self.driver}/command_kp, command_kd)")
        return None

    def _on_gains_set(self, future: Any) -> None:
        self._gain_request = None
        try:
            result = future.result().result
        except Exception as exc:
            self.get_logger().error(f"setting the driver's gains failed: {exc}")
            return
        if result.successful:
            self.runner.gains_ready = True
            self.get_logger().info(
                f"driver uses the policy's PD gains ({self.driver}/command_kp, command_kd)"
            )
        else:
            self.get_logger().error(f"the driver refused the policy's gains: {result.reason}")
