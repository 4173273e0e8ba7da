"""Controllers as plugins: the interface, the host, the registry, and a controller from outside the project.

The end-to-end tests build a tiny package of their own (a sine on the left shoulder pitch), install it with
pip into a folder put on the launched graph's PYTHONPATH (its entry point in group
``humanoid_stack.controllers`` is then what makes it known, as for any installed package), launch
``controller:=arm_sine`` as its own node and in the driver's loop, and check that the shoulder follows the
sine in MuJoCo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from humanoid_control.controllers.host import ControllerHost
from humanoid_control.controllers.interface import Controller, ControllerState, ParameterSpec
from humanoid_control.controllers.joint_hold import JointHoldController
from humanoid_control.controllers.registry import (
    UnknownControllerError,
    create_controller,
    load_controller,
    own_node_class,
    registered_controllers,
)
from humanoid_control.driver.driver_core import CommandError, JointCommand
from humanoid_control.model.robot_config import load_robot_config

JOINT = "left_shoulder_pitch_joint"
AMPLITUDE = 0.3  # rad
GIVEN_AMPLITUDE = 0.2  # rad: given at launch (controller_parameters), in its own node and in the loop
FREQUENCY = 1.0  # Hz

PLUGIN = textwrap.dedent(
    '''
    """A controller from outside humanoid_stack: a sine on one joint, the default pose elsewhere."""

    import math

    import numpy as np

    from humanoid_control.controllers.interface import Controller, ParameterSpec
    from humanoid_control.driver.driver_core import JointCommand


    class ArmSineController(Controller):
        name = "arm_sine"
        parameters = {
            "joint": ParameterSpec("left_shoulder_pitch_joint", "the joint that swings"),
            "amplitude": ParameterSpec(0.3, "sine amplitude (rad)", 0.0, 1.0),
            "frequency": ParameterSpec(1.0, "sine frequency (Hz)", 0.01, 5.0),
        }

        def configure(self, robot, params):
            super().configure(robot, params)
            if self.params["joint"] not in robot.joint_names:
                raise ValueError(f"arm_sine: unknown joint {self.params['joint']}")
            self.index = robot.joint_names.index(self.params["joint"])
            self.default = np.asarray(robot.array("default"), dtype=float)
            self.t0 = 0.0

        def activate(self, state):
            self.t0 = state.stamp

        def update(self, state, t):
            q = self.default.copy()
            phase = 2.0 * math.pi * self.params["frequency"] * (t - self.t0)
            q[self.index] += self.params["amplitude"] * math.sin(phase)
            zeros = np.zeros_like(q)
            return JointCommand(q=q, dq=zeros, tau_ff=zeros, stamp=t)

        def status(self):
            return {"joint": self.params["joint"]}
    '''
)

PYPROJECT = textwrap.dedent(
    """
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "arm-sine-controller"
    version = "0.1.0"

    [project.entry-points."humanoid_stack.controllers"]
    arm_sine = "arm_sine_controller:ArmSineController"
    """
)


def _state(t: float, n: int) -> ControllerState:
    return ControllerState(
        stamp=t,
        q=np.zeros(n),
        dq=np.zeros(n),
        imu_quat=np.array([1.0, 0, 0, 0]),
        gyro=np.zeros(3),
        driver_mode="",
    )


def test_registry_lists_the_stack_controllers_and_refuses_unknown_names() -> None:
    names = registered_controllers()
    assert {"joint_hold", "policy", "wbc_stand", "mpc_walk"} <= set(names)
    assert isinstance(create_controller("joint_hold"), JointHoldController)
    assert load_controller("wbc").__name__ == "WbcStandController"  # the driver parameter's older name
    with pytest.raises(UnknownControllerError, match=r"registered controllers .* joint_hold, mpc_walk"):
        load_controller("no_such_controller")
    # the stack's controllers that still have a node of their own name it; joint_hold has none
    assert own_node_class(load_controller("policy")).__name__ == "PolicyRunnerNode"
    assert own_node_class(load_controller("mpc_walk")).__name__ == "WalkingNode"
    assert own_node_class(JointHoldController) is None


def test_joint_hold_through_the_host_answers_each_state_with_the_default_pose() -> None:
    robot = load_robot_config("g1")
    host = ControllerHost(JointHoldController(), robot)
    assert not host.active
    cmd = host.step(_state(2.5, robot.num_joints))
    assert host.active and cmd is not None and cmd.stamp == 2.5
    assert np.array_equal(cmd.q, robot.array("default")) and not cmd.dq.any() and not cmd.tau_ff.any()
    assert host.stop()[0] and host.step(_state(2.502, robot.num_joints)) is None
    assert host.start()[0] and host.step(_state(2.504, robot.num_joints)) is not None
    assert host.report()["updates"] == "2" and host.status()["controller"] == "joint_hold"


class _Counting(Controller):
    name = "counting"
    parameters: ClassVar[dict[str, ParameterSpec]] = {
        "gain": ParameterSpec(1.0, "a gain", 0.0, 2.0),
        "label": ParameterSpec("x", "text"),
    }
    rate_hz = 100.0

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[float] = []
        self.bad = False

    def update(self, state: ControllerState, t: float) -> JointCommand | None:
        self.calls.append(t)
        n = len(state.q)
        q = np.full(n, np.nan) if self.bad else np.full(n, self.params["gain"] * t)
        return JointCommand(q=q, dq=np.zeros(n), tau_ff=np.zeros(n), stamp=t)


def test_host_runs_a_controller_at_its_own_rate_and_checks_its_commands() -> None:
    robot = load_robot_config("g1")
    n = robot.num_joints
    ctl = _Counting()
    host = ControllerHost(ctl, robot, {"gain": 2}, autostart=False)
    assert ctl.params == {"gain": 2.0, "label": "x"}
    assert host.step(_state(0.0, n)) is None  # not started
    host.start()
    cmds = [host.step(_state(k * 0.002, n)) for k in range(10)]  # 500 Hz ticks, a 100 Hz controller
    assert ctl.calls == pytest.approx([0.0, 0.01])
    assert all(c is not None for c in cmds)
    assert [c.stamp for c in cmds] == pytest.approx([k * 0.002 for k in range(10)])  # stamped with the tick
    assert np.allclose(cmds[4].q, 0.0) and np.allclose(cmds[5].q, 0.02)  # held between updates
    ctl.bad = True
    with pytest.raises(CommandError, match="non-finite position"):
        host.step(_state(0.05, n))


def test_controller_parameters_are_checked() -> None:
    robot = load_robot_config("g1")
    with pytest.raises(ValueError, match="outside"):
        ControllerHost(_Counting(), robot, {"gain": 3.0})
    with pytest.raises(ValueError, match="unknown parameter"):
        ControllerHost(_Counting(), robot, {"gian": 1.0})
    with pytest.raises(ValueError, match="is not a str"):
        ControllerHost(_Counting(), robot, {"label": 1})
    with pytest.raises(ValueError, match="not finite"):
        ControllerHost(_Counting(), robot, {"gain": float("nan")})


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The arm_sine package, pip-installed into a folder of its own (what PYTHONPATH then names)."""
    root = tmp_path_factory.mktemp("arm_sine")
    src = root / "src"
    src.mkdir()
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "arm_sine_controller.py").write_text(PLUGIN)
    site = root / "site"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(site.glob("arm_sine_controller-*.dist-info/entry_points.txt"))
    return site


def _run_arm_sine(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch, in_loop: bool
) -> tuple[Any, ...]:
    from std_msgs.msg import String

    from humanoid_bringup.evaluation.graph_probe import GraphProbe, close_graph
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    )
    isolated_ros_env(tmp_path / "ros")
    states: list[dict[str, Any]] = []

    def setup(node: Any) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        node.create_subscription(
            String,
            "/arm_sine_controller/state",
            lambda m: states.append(json.loads(m.data)),
            QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            ),
        )

    # the probe is a lockstep peer: simulated time advances only as it acknowledges, so it misses no tick
    probe = GraphProbe(subscribe_description=False, name="arm_sine_probe", setup=setup, lockstep_peer=True)
    args = {
        "controller": "arm_sine",
        "controller_parameters": f"amplitude={GIVEN_AMPLITUDE}",
        "activation_ticks": "1",
        "start_paused": "true",
        "sim_duration_s": "120",
    }
    if in_loop:
        args["in_loop"] = "true"
    graph = LaunchedGraph(args, tmp_path / "graph.log").start()
    try:
        try:
            # in its own node the controller is a lockstep peer too; in the loop it is the driver's call
            probe.start_graph(peers=() if in_loop else ("arm_sine_controller",), running=graph.running)
            probe.run_until(5.0)
        except (TimeoutError, RuntimeError) as exc:
            pytest.fail(f"{exc}\n{graph.log()[-4000:]}")
        diag = probe.diagnostics_at(4.0)
        with probe.lock:
            t = np.array(probe.data.joint_t)
            names = list(probe.data.joint_names)
            q = np.array(probe.data.joint_q)
    finally:
        close_graph(probe, graph)
    return t, q[:, names.index(JOINT)], diag, states, graph.log()


@pytest.mark.slow
@pytest.mark.parametrize("in_loop", [False, True], ids=["own_node", "in_loop"])
def test_a_controller_from_another_package_runs_by_name(
    tmp_path: Path, plugin_site: Path, monkeypatch: pytest.MonkeyPatch, in_loop: bool
) -> None:
    t, q, diag, states, log = _run_arm_sine(tmp_path, plugin_site, monkeypatch, in_loop)
    default = load_robot_config("g1").array("default")[load_robot_config("g1").joint_names.index(JOINT)]
    window = (t > 3.0) & (t < 5.0)  # after the 2 s boot ramp and activation: two periods of the sine
    swing = q[window] - default
    assert swing.max() > 0.6 * GIVEN_AMPLITUDE and swing.min() < -0.6 * GIVEN_AMPLITUDE, (
        swing.min(),
        swing.max(),
    )
    # it follows a 1 Hz sine: the measured swing correlates with a sine fitted in phase
    tt = t[window]
    basis = np.stack([np.sin(2 * np.pi * FREQUENCY * tt), np.cos(2 * np.pi * FREQUENCY * tt)], axis=1)
    coef, *_ = np.linalg.lstsq(basis, swing, rcond=None)
    fit = basis @ coef
    assert np.corrcoef(fit, swing)[0, 1] > 0.95
    assert np.hypot(*coef) == pytest.approx(GIVEN_AMPLITUDE, rel=0.25)  # not the default AMPLITUDE
    assert diag.get("mode") == "active" or "active" in log
    assert any(s.get("active") and s.get("joint") == JOINT for s in states), states
    if in_loop:
        assert "in_loop_controller" in diag and diag["in_loop_controller"] == "arm_sine"


@pytest.mark.slow
def test_an_unknown_controller_is_refused_at_launch_with_the_registered_ones(tmp_path: Path) -> None:
    from humanoid_bringup.evaluation.launched_graph import LaunchedGraph, isolated_ros_env

    isolated_ros_env(tmp_path / "ros")
    graph = LaunchedGraph({"controller": "no_such_controller"}, tmp_path / "graph.log").start()
    code = graph.wait(120.0)
    log = graph.log()
    if code is None:
        graph.stop()
    assert code not in (None, 0), log[-3000:]
    assert "unknown controller 'no_such_controller'" in log, log[-3000:]
    assert "joint_hold, mpc_walk, policy, supervised, wbc_stand" in log, log[-3000:]
