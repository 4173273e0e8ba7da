"""Every parameter of every node of the launch file is visible to the standard ROS 2 tools.

``ros2 param dump`` and rqt_reconfigure list a node's parameters, then ask for all their values in one
``get_parameters`` request and for all their descriptors in one ``describe_parameters`` request. rclpy answers
such a request with nothing when one of the parameters was declared without a value, so a node then shows no
parameters at all. This test does what those tools do, through the parameter services of each node of the
launched graph, from an rclpy node in a context of its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, default_launch_file
from humanoid_bringup.launcher.interpreter import load_launch_description
from humanoid_control.model.robot_config import load_robot_config

pytestmark = pytest.mark.slow

# start_paused: simulated time stays at 0 while the parameters are read (nothing runs meanwhile)
CASES = {
    "wbc_stand": {"controller": "wbc_stand"},  # driver, description, state estimator, WBC
    "policy": {"controller": "policy", "policy_autostart": "false"},  # driver, description, policy runner
    "joint_hold": {"controller": "joint_hold"},  # driver, description, joint hold controller
    "mode_manager": {"mode_manager": "true"},  # driver, description, policy runner (idle), mode manager
}
SERVICE_TIMEOUT_S = 120.0  # node start-up (imports, model loading) on a loaded 2-core machine
CALL_TIMEOUT_S = 30.0


class ParameterTool:
    """An rclpy node in its own context that calls other nodes' parameter services, as the ``ros2 param``
    verbs and rqt_reconfigure do."""

    def __init__(self, graph: LaunchedGraph) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.graph = graph
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"parameter_tool_{os.getpid()}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def call(self, srv_type: Any, service: str, request: Any) -> Any:
        """Wait for ``service`` (failing at once if the graph exits), call it and return the response."""
        client = self.node.create_client(srv_type, service)
        try:
            deadline = time.monotonic() + SERVICE_TIMEOUT_S
            while not client.wait_for_service(timeout_sec=0.5):
                if not self.graph.running():
                    pytest.fail(f"the graph exited before {service} was up\n{self.graph.log()[-4000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"{service} not available after {SERVICE_TIMEOUT_S} s\n{self.graph.log()[-4000:]}"
                    )
            future = client.call_async(request)
            self.executor.spin_until_future_complete(future, timeout_sec=CALL_TIMEOUT_S)
            assert future.done(), f"{service} did not answer within {CALL_TIMEOUT_S} s"
            return future.result()
        finally:
            self.node.destroy_client(client)

    def close(self) -> None:
        """Destroy the node and shut its context down."""
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture(params=sorted(CASES), ids=sorted(CASES))
def launched(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[str], ParameterTool]]:
    """Node names of the launch file for one argument set, with the graph running and a tool to query it."""
    arguments = {**CASES[request.param], "start_paused": "true"}
    plan = load_launch_description(default_launch_file(), arguments)
    plan.cleanup()
    nodes = [proc.name for proc in plan.processes if proc.kind == "node"]
    graph = LaunchedGraph(arguments, tmp_path / "graph.log").start()
    tool = ParameterTool(graph)
    try:
        yield nodes, tool
    finally:
        tool.close()
        graph.stop()


def _dump(tool: ParameterTool, node: str) -> tuple[list[str], list[Any], list[Any]]:
    """Names, values and descriptors of all parameters of ``node``, each asked for in one request."""
    from rcl_interfaces.srv import DescribeParameters, GetParameters, ListParameters

    listed = tool.call(
        ListParameters,
        f"/{node}/list_parameters",
        ListParameters.Request(prefixes=[], depth=ListParameters.Request.DEPTH_RECURSIVE),
    )
    names = list(listed.result.names)
    values = list(
        tool.call(GetParameters, f"/{node}/get_parameters", GetParameters.Request(names=names)).values
    )
    descriptors = list(
        tool.call(
            DescribeParameters, f"/{node}/describe_parameters", DescribeParameters.Request(names=names)
        ).descriptors
    )
    return names, values, descriptors


def test_every_parameter_has_a_value_and_a_descriptor(launched: tuple[list[str], ParameterTool]) -> None:
    from rcl_interfaces.msg import ParameterType

    nodes, tool = launched
    assert "robot_driver" in nodes and len(nodes) >= 3, nodes
    for node in nodes:
        names, values, descriptors = _dump(tool, node)
        assert "use_sim_time" in names, f"{node}: {names}"
        assert len(values) == len(names), (
            f"{node}: {len(values)} values for {len(names)} parameters (ros2 param dump would show none)"
        )
        unset = [n for n, v in zip(names, values, strict=True) if v.type == ParameterType.PARAMETER_NOT_SET]
        assert not unset, f"{node}: parameters without a value: {unset}"
        assert [d.name for d in descriptors] == names, f"{node}: descriptors do not match the names"
        mistyped = [d.name for d, v in zip(descriptors, values, strict=True) if d.type != v.type]
        assert not mistyped, f"{node}: descriptor type differs from the value's type: {mistyped}"
        if node == "robot_driver":
            types = {n: v.type for n, v in zip(names, values, strict=True)}
            assert types["command_kp"] == types["command_kd"] == ParameterType.PARAMETER_DOUBLE_ARRAY
    if "policy_runner" not in nodes:  # (the policy runner sets the driver's gains itself)
        _check_driver_command_gains(tool)


def _check_driver_command_gains(tool: ParameterTool) -> None:
    """Empty ``command_kp`` / ``command_kd`` mean unset (the gain profile applies): set both, clear both."""
    from rcl_interfaces.srv import SetParametersAtomically
    from rclpy.parameter import Parameter

    joints = load_robot_config("g1").num_joints

    def set_gains(kp: list[float], kd: list[float]) -> Any:
        request = SetParametersAtomically.Request(
            parameters=[
                Parameter("command_kp", Parameter.Type.DOUBLE_ARRAY, kp).to_parameter_msg(),
                Parameter("command_kd", Parameter.Type.DOUBLE_ARRAY, kd).to_parameter_msg(),
            ]
        )
        return tool.call(SetParametersAtomically, "/robot_driver/set_parameters_atomically", request).result

    def gains() -> tuple[list[float], list[float]]:
        names, values, _ = _dump(tool, "robot_driver")
        by_name = dict(zip(names, values, strict=True))
        return list(by_name["command_kp"].double_array_value), list(by_name["command_kd"].double_array_value)

    assert gains() == ([], [])
    result = set_gains([40.0] * joints, [2.0] * joints)
    assert result.successful, result.reason
    assert gains() == ([40.0] * joints, [2.0] * joints)
    result = set_gains([], [2.0] * joints)
    assert not result.successful and "0 values" in result.reason
    result = set_gains([], [])
    assert result.successful, result.reason
    assert gains() == ([], [])
