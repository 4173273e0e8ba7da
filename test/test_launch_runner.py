"""Tests for humanoid_bringup.launcher (the YAML launch file runner for pip-only ROS 2)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from humanoid_bringup.launcher.cli import main
from humanoid_bringup.launcher.interpreter import declared_arguments, load_launch_description
from humanoid_bringup.launcher.packages import find_launch_file, find_package_share
from humanoid_bringup.launcher.plan import LaunchError, LaunchPlan, ProcessSpec
from humanoid_bringup.launcher.supervisor import run

REPO_ROOT = Path(__file__).resolve().parent.parent

# A tiny child process used by the supervision tests.
#   sigint   MARKER       -> records the first SIGINT/SIGTERM in MARKER and exits 0
#   stubborn MARKER       -> ignores SIGINT, records SIGTERM in MARKER and exits 0
#   exit     READY CODE   -> waits until file READY exists, then exits with CODE
#   env      OUT          -> writes selected environment variables to OUT as YAML and exits 0
CHILD_SCRIPT = r"""
import os, signal, sys, time
mode = sys.argv[1]

def record(signum, _frame):
    with open(sys.argv[2] + ".tmp", "w") as handle:
        handle.write(signal.Signals(signum).name)
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
    sys.exit(0)

if mode == "exit":
    deadline = time.monotonic() + 15
    while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        time.sleep(0.01)
    print("exiting", flush=True)
    sys.exit(int(sys.argv[3]))
if mode == "env":
    import json
    keys = ("FOO", "FROM_SET_ENV", "LD_LIBRARY_PATH", "_ROS_WHEELS_BOOTSTRAP_COMPLETE")
    with open(sys.argv[2], "w") as handle:
        json.dump({key: os.environ.get(key) for key in keys}, handle)
    sys.exit(0)
if mode == "sigint":
    signal.signal(signal.SIGINT, record)
    signal.signal(signal.SIGTERM, record)
elif mode == "stubborn":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, record)
open(sys.argv[2] + ".ready", "w").close()
print("ready", flush=True)
while True:
    time.sleep(0.02)
"""


def write_launch(tmp_path: Path, actions: list[dict[str, Any]], name: str = "test.launch.yaml") -> Path:
    """Write a launch file from Python data (yaml.safe_dump avoids quoting trouble)."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"launch": actions}, sort_keys=False), encoding="utf-8")
    return path


def write_text_launch(tmp_path: Path, text: str, name: str = "test.launch.yaml") -> Path:
    """Write a launch file verbatim (for syntax that matters as written)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def child(tmp_path: Path) -> Path:
    """Path of the helper child script."""
    path = tmp_path / "child.py"
    path.write_text(CHILD_SCRIPT, encoding="utf-8")
    return path


def child_cmd(script: Path, *args: str | Path) -> str:
    """A shell-quoted command line running the helper child with ``args``."""
    return shlex.join([sys.executable, str(script), *map(str, args)])


def echo_plan(tmp_path: Path, text: str, arguments: dict[str, str] | None = None) -> list[str]:
    """Load a launch file whose only process is an ``echo`` and return its resolved cmd."""
    plan = load_launch_description(write_text_launch(tmp_path, text), arguments or {})
    assert len(plan.processes) == 1
    return plan.processes[0].cmd


def wait_for(path: Path, timeout: float = 10.0) -> None:
    """Wait until ``path`` exists."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.01)


# ------------------------------------------------------------------------------------------------
# arguments
# ------------------------------------------------------------------------------------------------

ARGS_FILE = """\
launch:
- arg:
    name: clock
    default: lockstep
    description: Simulation clock mode.
    choice:
    - value: lockstep
    - value: realtime
- arg: {name: rate, default: '500'}
- arg: {name: robot, default: 'g1_$(var clock)'}
- executable: {cmd: 'echo $(var clock) $(var rate) $(var robot)'}
"""


def test_argument_defaults(tmp_path: Path) -> None:
    plan = load_launch_description(write_text_launch(tmp_path, ARGS_FILE), {})
    assert plan.arguments == {"clock": "lockstep", "rate": "500", "robot": "g1_lockstep"}
    assert plan.processes[0].cmd == ["echo", "lockstep", "500", "g1_lockstep"]


def test_argument_overrides(tmp_path: Path) -> None:
    plan = load_launch_description(
        write_text_launch(tmp_path, ARGS_FILE), {"clock": "realtime", "rate": "250"}
    )
    assert plan.arguments == {"clock": "realtime", "rate": "250", "robot": "g1_realtime"}
    assert plan.processes[0].cmd == ["echo", "realtime", "250", "g1_realtime"]


def test_unknown_argument_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as info:
        load_launch_description(write_text_launch(tmp_path, ARGS_FILE), {"clok": "realtime"})
    message = str(info.value)
    assert "'clok'" in message
    assert "clock, rate, robot" in message


def test_bad_choice_names_argument_value_and_choices(tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as info:
        load_launch_description(write_text_launch(tmp_path, ARGS_FILE), {"clock": "fast"})
    message = str(info.value)
    assert "'clock'" in message and "'fast'" in message
    assert "lockstep, realtime" in message


def test_missing_required_argument(tmp_path: Path) -> None:
    path = write_text_launch(tmp_path, "launch:\n- arg: {name: robot_ip}\n- executable: {cmd: echo}\n")
    with pytest.raises(LaunchError, match="required launch argument 'robot_ip'"):
        load_launch_description(path, {})
    assert load_launch_description(path, {"robot_ip": "10.0.0.2"}).arguments == {"robot_ip": "10.0.0.2"}


def test_non_string_default_is_rejected_like_ros2_launch(tmp_path: Path) -> None:
    path = write_text_launch(tmp_path, "launch:\n- arg: {name: rate, default: 500}\n")
    with pytest.raises(LaunchError, match="must be a string"):
        load_launch_description(path, {})


def test_declared_arguments_lists_group_arguments(tmp_path: Path) -> None:
    path = write_text_launch(
        tmp_path, ARGS_FILE + "- group:\n    children:\n    - arg: {name: inner, description: hidden}\n"
    )
    specs = declared_arguments(path)
    assert [s.name for s in specs] == ["clock", "rate", "robot", "inner"]
    assert specs[0].choices == ["lockstep", "realtime"]
    assert specs[0].default == "lockstep" and specs[0].description == "Simulation clock mode."
    assert specs[3].default is None


# ------------------------------------------------------------------------------------------------
# substitutions and conditions
# ------------------------------------------------------------------------------------------------


def test_env_substitution_with_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HL_TEST_SET", "abc")
    monkeypatch.delenv("HL_TEST_UNSET", raising=False)
    cmd = echo_plan(
        tmp_path, "launch:\n- executable: {cmd: \"echo $(env HL_TEST_SET) $(env HL_TEST_UNSET 'x y')\"}\n"
    )
    assert cmd == ["echo", "abc", "x y"]
    with pytest.raises(LaunchError, match="HL_TEST_UNSET"):
        echo_plan(tmp_path, "launch:\n- executable: {cmd: 'echo $(env HL_TEST_UNSET)'}\n")


def test_eval_and_nested_substitutions(tmp_path: Path) -> None:
    text = """\
launch:
- arg: {name: clock, default: lockstep}
- let: {name: lock, value: "$(eval \\"'$(var clock)' == 'lockstep'\\")"}
- executable: {cmd: "echo $(var lock) $(eval '2 * 3') $(eval 'sqrt(16)') $(eval 'math.pi > 3')"}
"""
    assert echo_plan(tmp_path, text) == ["echo", "True", "6", "4.0", "True"]
    assert echo_plan(tmp_path, text, {"clock": "realtime"})[1] == "False"


def test_eval_namespace_is_restricted(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"\$\(eval\)"):
        echo_plan(tmp_path, 'launch:\n- executable: {cmd: "echo $(eval \'__import__(\\"os\\")\')"}\n')
    with pytest.raises(LaunchError, match=r"\$\(eval\)"):
        echo_plan(tmp_path, "launch:\n- executable: {cmd: \"echo $(eval 'open')\"}\n")


def test_command_substitution(tmp_path: Path) -> None:
    cmd = echo_plan(tmp_path, "launch:\n- executable: {cmd: \"echo $(command 'echo hello world')\"}\n")
    assert cmd == ["echo", "hello world\n"]  # stdout verbatim, not split (like ros2 launch)
    with pytest.raises(LaunchError, match="failed with exit code"):
        echo_plan(tmp_path, "launch:\n- executable: {cmd: \"echo $(command 'false')\"}\n")


def test_dirname_and_quoting_in_cmd(tmp_path: Path) -> None:
    text = """\
launch:
- let: {name: msg, value: 'two words'}
- executable: {cmd: "echo $(dirname)/cfg.yaml '$(var msg)' x$(var msg)y \\"a 'b' c\\""}
"""
    assert echo_plan(tmp_path, text) == [
        "echo",
        f"{tmp_path}/cfg.yaml",
        "two words",
        "xtwo wordsy",
        "a 'b' c",
    ]


def test_unknown_variable_error(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="unknown launch variable 'nope'"):
        echo_plan(tmp_path, "launch:\n- executable: {cmd: 'echo $(var nope)'}\n")


def test_unsupported_substitution_and_syntax_errors(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="unsupported substitution"):
        echo_plan(tmp_path, "launch:\n- executable: {cmd: 'echo $(frobnicate x)'}\n")
    with pytest.raises(LaunchError, match="unterminated"):
        echo_plan(tmp_path, "launch:\n- executable: {cmd: 'echo $(var x'}\n")


def test_if_and_unless(tmp_path: Path) -> None:
    text = """\
launch:
- arg: {name: headless, default: 'false'}
- executable: {cmd: echo viewer, unless: $(var headless)}
- executable: {cmd: echo headless, if: $(var headless)}
- executable: {cmd: echo always, if: 'True'}
- executable: {cmd: echo never, if: '0'}
- executable: {cmd: echo one, unless: '0'}
- executable: {cmd: echo upper, if: 'FALSE'}
"""
    path = write_text_launch(tmp_path, text)
    names = [p.cmd[1] for p in load_launch_description(path, {}).processes]
    assert names == ["viewer", "always", "one"]
    names = [p.cmd[1] for p in load_launch_description(path, {"headless": "true"}).processes]
    assert names == ["headless", "always", "one"]
    names = [p.cmd[1] for p in load_launch_description(path, {"headless": "1"}).processes]
    assert names == ["headless", "always", "one"]


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "2", "", " true", "true "])
@pytest.mark.parametrize("key", ["if", "unless"])
def test_condition_words_other_than_true_false_1_0_are_errors(tmp_path: Path, key: str, word: str) -> None:
    # launch.conditions.evaluate_condition_expression: lower-cased (not stripped) text must be one of
    # true, 1, false, 0 ("expected one of [true, 1, false, 0]")
    echo = {"executable": {"cmd": "echo x", key: "$(var w)"}}
    path = write_launch(tmp_path, [{"arg": {"name": "w"}}, echo])
    expected = r"invalid condition expression .*expected one of \[true, 1, false, 0\]"
    with pytest.raises(LaunchError, match=expected):
        load_launch_description(path, {"w": word})


def test_group_scoping(tmp_path: Path) -> None:
    text = """\
launch:
- let: {name: where, value: outside}
- group:
    children:
    - let: {name: where, value: inside}
    - executable: {cmd: echo $(var where)}
- executable: {cmd: echo $(var where)}
- group:
    scoped: false
    children:
    - let: {name: where, value: leaked}
- executable: {cmd: echo $(var where)}
- group:
    if: 'false'
    children:
    - executable: {cmd: echo skipped}
"""
    plan = load_launch_description(write_text_launch(tmp_path, text), {})
    assert [p.cmd[1] for p in plan.processes] == ["inside", "outside", "leaked"]


# ------------------------------------------------------------------------------------------------
# nodes: executables, parameters, remaps
# ------------------------------------------------------------------------------------------------

NODE_FILE = """\
launch:
- arg: {name: rate, default: '500'}
- arg: {name: use_sim_time, default: 'true'}
- node:
    pkg: humanoid_stack
    exec: robot_driver
    name: driver
    namespace: robot
    output: log
    on_exit: shutdown
    args: --backend mujoco
    ros_args: --log-level debug
    env:
    - {name: MUJOCO_GL, value: egl}
    param:
    - {from: PARAMS_FILE}
    - {name: rate_hz, value: $(var rate)}
    - {name: use_sim_time, value: $(var use_sim_time)}
    - {name: frame, value: base_link}
    - {name: stiffness, value: [100.0, 50.5]}
    - {name: joints, value: "[1, 2, 3]"}
    - {name: joints_subst, value: "[$(var rate), 2]"}
    - {name: quoted, value: "'500'"}
    - {name: quoted_subst, value: "'$(var rate)'"}
    - {name: literal_int, value: '500'}
    - {name: typed, value: 7}
    - {name: items, value: ['a', '$(var use_sim_time)x', 'b']}
    - name: pid
      param:
      - {name: kp, value: 1.5}
    remap:
    - {from: /joint_states, to: /robot/joint_states}
    - {from: cmd, to: $(var rate)_cmd}
"""


@pytest.fixture
def node_plan(tmp_path: Path) -> Iterator[LaunchPlan]:
    params_file = tmp_path / "driver.yaml"
    params_file.write_text("/**:\n  ros__parameters:\n    rate_hz: 1\n", encoding="utf-8")
    text = NODE_FILE.replace("PARAMS_FILE", str(params_file))
    plan = load_launch_description(write_text_launch(tmp_path, text), {})
    yield plan
    plan.cleanup()


def test_node_parameter_typing(node_plan: LaunchPlan) -> None:
    proc = node_plan.processes[0]
    # launch_ros: a value with a substitution is type-guessed with YAML rules; literal text stays a string
    assert proc.params == {
        "rate_hz": 500,
        "use_sim_time": True,
        "frame": "base_link",
        "stiffness": [100.0, 50.5],
        "joints": "[1, 2, 3]",
        "joints_subst": [500, 2],
        "quoted": "'500'",
        "quoted_subst": "500",
        "literal_int": "500",
        "typed": 7,
        "items": ["a", "truex", "b"],
        "pid": {"kp": 1.5},
    }
    assert isinstance(proc.params["rate_hz"], int)


def test_node_command_line(node_plan: LaunchPlan, tmp_path: Path) -> None:
    proc = node_plan.processes[0]
    assert proc.name == "driver" and proc.kind == "node" and proc.required and proc.output == "log"
    assert proc.node_name == "/robot/driver"
    assert proc.env == {"MUJOCO_GL": "egl"}
    cmd = proc.cmd
    assert cmd[:2] == [sys.executable, "-c"]
    assert "from humanoid_control.driver.robot_driver_node import main" in cmd[2]
    assert "sys.argv[0] = 'robot_driver'" in cmd[2]
    ros = cmd.index("--ros-args")
    assert cmd[3:ros] == ["--backend", "mujoco"]
    inline_file = proc.cmd[proc.cmd.index("--log-level") - 1]
    assert cmd[ros + 1 :] == [
        "-r",
        "__node:=driver",
        "-r",
        "__ns:=/robot",
        "-r",
        "/joint_states:=/robot/joint_states",
        "-r",
        "cmd:=500_cmd",
        "--params-file",
        str(tmp_path / "driver.yaml"),
        "--params-file",
        inline_file,
        "--log-level",
        "debug",
    ]


def test_node_params_file_content(node_plan: LaunchPlan) -> None:
    proc = node_plan.processes[0]
    inline_file = Path(proc.cmd[proc.cmd.index("--log-level") - 1])
    content = yaml.safe_load(inline_file.read_text(encoding="utf-8"))
    assert content == {"/robot/driver": {"ros__parameters": proc.params}}
    node_plan.cleanup()
    assert not inline_file.exists()


def test_node_without_namespace_uses_wildcard_key_and_set_parameter(tmp_path: Path) -> None:
    text = """\
launch:
- set_parameter: {name: use_sim_time, value: 'true'}
- node: {pkg: humanoid_stack, exec: joint_hold_controller, name: hold, param: [{name: kp, value: '20'}]}
- node: {pkg: humanoid_stack, exec: robot_description}
"""
    plan = load_launch_description(write_text_launch(tmp_path, text), {})
    hold, desc = plan.processes
    # set_parameter type-guesses even literal text (launch_ros parses its value as a substitution); a
    # node's literal 'value' stays a string
    assert hold.params == {"use_sim_time": True, "kp": "20"}
    content = yaml.safe_load(Path(hold.cmd[-1]).read_text(encoding="utf-8"))
    assert content == {"/**": {"ros__parameters": {"use_sim_time": True, "kp": "20"}}}
    assert desc.name == "robot_description" and desc.params == {"use_sim_time": True}
    assert "-r" not in desc.cmd
    plan.cleanup()


def test_push_ros_namespace(tmp_path: Path) -> None:
    text = """\
launch:
- group:
    children:
    - push_ros_namespace: {namespace: g1}
    - node: {pkg: humanoid_stack, exec: robot_driver, name: a}
    - node: {pkg: humanoid_stack, exec: robot_driver, name: b, namespace: arm}
    - node: {pkg: humanoid_stack, exec: robot_driver, name: c, namespace: /abs}
- node: {pkg: humanoid_stack, exec: robot_driver, name: d}
"""
    plan = load_launch_description(write_text_launch(tmp_path, text), {})
    assert [p.node_name for p in plan.processes] == ["/g1/a", "/g1/arm/b", "/abs/c", None]


def test_mixed_type_list_parameter_is_rejected(tmp_path: Path) -> None:
    # launch's parse_if_substitutions: "The result is a non-uniform list"
    text = "launch:\n- node: {pkg: humanoid_stack, exec: robot_driver, param: [{name: k, value: [1, 2.5]}]}\n"
    with pytest.raises(LaunchError, match="same type"):
        load_launch_description(write_text_launch(tmp_path, text), {})


PARAM_FILE = """\
launch:
- arg: {name: v, default: '500'}
- node: {pkg: humanoid_stack, exec: robot_driver, name: d, param: [{name: p, value: VALUE}]}
"""


def param_of(tmp_path: Path, value: str, v: str | None = None) -> Any:
    """The value that parameter ``p`` gets from ``value: VALUE`` (written verbatim), with ``v:=...``."""
    path = write_text_launch(tmp_path, PARAM_FILE.replace("VALUE", value))
    plan = load_launch_description(path, {} if v is None else {"v": v})
    plan.cleanup()
    return plan.processes[0].params["p"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("'500'", "500"),
        ("'500.0'", "500.0"),
        ("'true'", "true"),
        ("'[1, 2.5]'", "[1, 2.5]"),
        ("'{a: 1}'", "{a: 1}"),
        ("'null'", "null"),
        ("''", ""),
        ("'a\\$(var v)'", "a$(var v)"),  # an escaped '$(' is text, not a substitution
        ("500", 500),
        ("500.0", 500.0),
        ("true", True),
        ("['1', '2']", ["1", "2"]),
    ],
)
def test_literal_parameter_values_are_not_type_guessed(tmp_path: Path, value: str, expected: Any) -> None:
    # launch_ros: a value without a substitution keeps its YAML type; a string stays the string written
    result = param_of(tmp_path, value)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("v", "expected"),
    [
        ("500", 500),
        ("500.0", 500.0),
        ("true", True),
        ("True", True),
        ("g1", "g1"),
        ("[1, 2]", [1, 2]),
        ("[0.5, 1.5]", [0.5, 1.5]),
        ("'500'", "500"),
    ],
)
def test_substituted_parameter_values_are_type_guessed(tmp_path: Path, v: str, expected: Any) -> None:
    result = param_of(tmp_path, "'$(var v)'", v)
    assert result == expected and type(result) is type(expected)
    assert param_of(tmp_path, "\"'$(var v)'\"", "500") == "500"  # quoted in the file: a string


@pytest.mark.parametrize(
    ("v", "match"),
    [
        ("null", "YAML null"),
        ("~", "YAML null"),
        ("", "YAML null"),
        ("  ", "YAML null"),
        ("{a: 1}", "YAML dict"),
        ("[1, 2.5]", "mixes types"),
        ("[]", "not a valid parameter array"),
        ("[[1]]", "not a valid parameter array"),
        ("a: b: c", "not valid YAML"),
    ],
)
def test_bad_substituted_parameter_values_are_errors(tmp_path: Path, v: str, match: str) -> None:
    # launch_ros: evaluate_parameter_dict / coerce_to_type raise for these; a quoted value stays a string
    with pytest.raises(LaunchError, match=match):
        param_of(tmp_path, "'$(var v)'", v)
    assert param_of(tmp_path, "\"'$(var v)'\"", "null") == "null"


def test_set_parameter_value_is_always_type_guessed(tmp_path: Path) -> None:
    # launch_ros' SetParameter parses its value as a substitution: even literal text is type-guessed
    node = {"node": {"pkg": "humanoid_stack", "exec": "robot_driver"}}
    plan = load_launch_description(
        write_launch(tmp_path, [{"set_parameter": {"name": "x", "value": "500"}}, node]), {}
    )
    assert plan.processes[0].params == {"x": 500}
    plan.cleanup()
    for value, match in (("null", "YAML null"), (5, "must be a string")):
        path = write_launch(tmp_path, [{"set_parameter": {"name": "x", "value": value}}, node])
        with pytest.raises(LaunchError, match=match):
            load_launch_description(path)


def test_node_from_ament_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = tmp_path / "install"
    exe = prefix / "lib" / "fake_pkg" / "fake_node"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    exe.chmod(0o755)
    monkeypatch.setenv("AMENT_PREFIX_PATH", f"/nonexistent{os.pathsep}{prefix}")
    text = "launch:\n- node: {pkg: fake_pkg, exec: fake_node, name: fake}\n"
    plan = load_launch_description(write_text_launch(tmp_path, text), {})
    assert plan.processes[0].cmd == [str(exe), "--ros-args", "-r", "__node:=fake"]


def test_missing_executable_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    text = "launch:\n- node: {pkg: robot_state_publisher_nope, exec: robot_state_publisher}\n"
    with pytest.raises(LaunchError) as info:
        load_launch_description(write_text_launch(tmp_path, text), {})
    message = str(info.value)
    assert "robot_state_publisher_nope" in message and "'robot_state_publisher'" in message
    assert "not installed" in message
    with pytest.raises(LaunchError, match="not found"):
        echo_plan(tmp_path, "launch:\n- executable: {cmd: no_such_program_hl --x}\n")


def test_find_pkg_share_and_launch_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = tmp_path / "install"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "fake_pkg").touch()
    launch_dir = prefix / "share" / "fake_pkg" / "launch"
    launch_dir.mkdir(parents=True)
    (launch_dir / "demo.launch.yaml").write_text(
        "launch:\n- executable: {cmd: 'echo $(find-pkg-share fake_pkg)'}\n", encoding="utf-8"
    )
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    assert find_package_share("fake_pkg") == prefix / "share" / "fake_pkg"
    found = find_launch_file("fake_pkg", "demo.launch.yaml")
    assert found == launch_dir / "demo.launch.yaml"
    assert load_launch_description(found, {}).processes[0].cmd == ["echo", str(prefix / "share" / "fake_pkg")]
    with pytest.raises(LaunchError, match="not found"):
        find_package_share("no_such_package_hl")


def test_find_pkg_share_own_package_falls_back_to_source_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    assert (REPO_ROOT / "launch" / "sim.launch.yaml").is_file()
    assert find_package_share("humanoid_stack") == REPO_ROOT


# ------------------------------------------------------------------------------------------------
# file-level errors
# ------------------------------------------------------------------------------------------------


def test_unsupported_action_error(tmp_path: Path) -> None:
    path = write_text_launch(tmp_path, "launch:\n- include: {file: other.launch.yaml}\n")
    with pytest.raises(LaunchError) as info:
        load_launch_description(path, {})
    message = str(info.value)
    assert "unsupported launch action 'include'" in message
    assert str(path) in message and "supported: arg, let, node" in message


def test_unexpected_key_error(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"unexpected key.*packag"):
        load_launch_description(write_text_launch(tmp_path, "launch:\n- node: {packag: x, exec: y}\n"), {})


def test_malformed_yaml_error(tmp_path: Path) -> None:
    path = write_text_launch(tmp_path, "launch:\n- arg: {name: x\n  - bad: [\n")
    with pytest.raises(LaunchError) as info:
        load_launch_description(path, {})
    assert "malformed YAML" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    "text",
    ["- arg: {name: x}\n", "launch: {arg: {name: x}}\n", "launch:\n- {arg: {name: x}, let: {name: y}}\n"],
)
def test_wrong_structure_error(tmp_path: Path, text: str) -> None:
    path = write_text_launch(tmp_path, text)
    with pytest.raises(LaunchError) as info:
        load_launch_description(path, {})
    assert path.name in str(info.value)


# ------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------


def test_main_launch_and_argument_errors_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ros2 launch exits with 1 for launch-file and launch-argument errors
    path = write_text_launch(tmp_path, ARGS_FILE)
    assert main([str(path), "clok:=realtime"]) == 1
    assert "unknown launch argument 'clok'" in capsys.readouterr().err
    assert main([str(path), "clock:=fast"]) == 1
    err = capsys.readouterr().err
    assert "'clock'" in err and "lockstep, realtime" in err
    assert main([str(tmp_path / "missing.launch.yaml")]) == 1
    assert "not found" in capsys.readouterr().err
    bad = write_text_launch(tmp_path, "launch:\n- executable: {cmd: echo x, if: 'yes'}\n", "bad.launch.yaml")
    assert main([str(bad)]) == 1
    assert "invalid condition expression 'yes'" in capsys.readouterr().err
    assert main(["--print", str(bad)]) == 1


def test_main_malformed_command_line_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse's usage error, as the ros2 command's own (argparse) usage errors
    with pytest.raises(SystemExit) as info:
        main(["--no-such-option", "x.launch.yaml"])
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_main_show_args_and_print(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_text_launch(tmp_path, ARGS_FILE)
    assert main(["--show-args", str(path)]) == 0
    out = capsys.readouterr().out
    assert "'clock'" in out and "Simulation clock mode." in out and "lockstep" in out
    assert main(["--print", str(path), "clock:=realtime"]) == 0
    out = capsys.readouterr().out
    assert "echo realtime 500 g1_realtime" in out


def test_main_package_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "install"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "fake_pkg").touch()
    (prefix / "share" / "fake_pkg" / "launch").mkdir(parents=True)
    (prefix / "share" / "fake_pkg" / "launch" / "x.launch.yaml").write_text(ARGS_FILE, encoding="utf-8")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    assert main(["--print", "fake_pkg", "x.launch.yaml", "rate:=10"]) == 0
    assert "echo lockstep 10 g1_lockstep" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# process supervision (real, tiny processes)
# ------------------------------------------------------------------------------------------------


def test_required_process_exit_stops_others(
    tmp_path: Path, child: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "worker.signal"
    path = write_launch(
        tmp_path,
        [
            {"executable": {"cmd": child_cmd(child, "sigint", marker), "name": "worker"}},
            {
                "executable": {
                    "cmd": child_cmd(child, "exit", f"{marker}.ready", 3),
                    "name": "boss",
                    "on_exit": "shutdown",
                }
            },
        ],
    )
    started = time.monotonic()
    assert run(load_launch_description(path, {}), sigterm_timeout=5.0) == 3
    assert time.monotonic() - started < 10
    assert marker.read_text() == "SIGINT"
    out = capsys.readouterr().out
    assert "[humanoid-launch] required process boss exited with code 3; shutting down" in out
    assert "[worker] ready" in out and "[boss] exiting" in out


def test_required_process_clean_exit_returns_0_and_escalates_to_sigterm(
    tmp_path: Path, child: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "stubborn.signal"
    path = write_launch(
        tmp_path,
        [
            {"executable": {"cmd": child_cmd(child, "stubborn", marker), "name": "stubborn"}},
            {
                "executable": {
                    "cmd": child_cmd(child, "exit", f"{marker}.ready", 0),
                    "name": "boss",
                    "on_exit": "shutdown",
                }
            },
        ],
    )
    assert run(load_launch_description(path, {}), sigterm_timeout=0.3) == 0
    assert marker.read_text() == "SIGTERM"
    assert "escalating to SIGTERM: stubborn" in capsys.readouterr().out


def test_non_required_exit_does_not_stop_others(
    tmp_path: Path, child: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = tmp_path / "short.done"
    path = write_launch(
        tmp_path,
        [
            {"executable": {"cmd": child_cmd(child, "exit", tmp_path, 5), "name": "short"}},
            {"executable": {"cmd": f"touch {done}", "name": "toucher"}},
            {"executable": {"cmd": child_cmd(child, "exit", done, 0), "name": "later"}},
        ],
    )
    assert run(load_launch_description(path, {})) == 0
    out = capsys.readouterr().out
    assert "process short" in out and "exited with code 5" in out
    assert "[later] exiting" in out and "shutting down" not in out


def test_environment_is_inherited(tmp_path: Path, child: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_ROS_WHEELS_BOOTSTRAP_COMPLETE", "1")
    monkeypatch.setenv("LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH", "") + os.pathsep + "/hl_test_lib")
    out_file = tmp_path / "env.json"
    path = write_launch(
        tmp_path,
        [
            {"set_env": {"name": "FROM_SET_ENV", "value": "yes"}},
            {
                "executable": {
                    "cmd": child_cmd(child, "env", out_file),
                    "name": "envdump",
                    "env": [{"name": "FOO", "value": "bar"}],
                }
            },
        ],
    )
    plan = load_launch_description(path, {})
    assert plan.processes[0].env == {"FROM_SET_ENV": "yes", "FOO": "bar"}
    assert run(plan) == 0
    import json

    env = json.loads(out_file.read_text())
    assert env["FOO"] == "bar" and env["FROM_SET_ENV"] == "yes"
    assert env["_ROS_WHEELS_BOOTSTRAP_COMPLETE"] == "1"
    assert env["LD_LIBRARY_PATH"].endswith("/hl_test_lib")


def test_output_log_writes_log_file(
    tmp_path: Path, child: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dir = tmp_path / "logs"
    monkeypatch.setenv("ROS_LOG_DIR", str(log_dir))
    path = write_launch(
        tmp_path,
        [
            {"executable": {"cmd": child_cmd(child, "exit", tmp_path, 0), "name": "quiet", "output": "log"}},
        ],
    )
    assert run(load_launch_description(path, {})) == 0
    logs = list(log_dir.glob("quiet-*.log"))
    assert len(logs) == 1 and logs[0].read_text() == "exiting\n"
    assert "[quiet] exiting" not in capsys.readouterr().out


def test_sigint_to_runner_stops_children(tmp_path: Path, child: Path) -> None:
    marker_a, marker_b = tmp_path / "a.signal", tmp_path / "b.signal"
    path = write_launch(
        tmp_path,
        [
            {"executable": {"cmd": child_cmd(child, "sigint", marker_a), "name": "a"}},
            {"executable": {"cmd": child_cmd(child, "sigint", marker_b), "name": "b"}},
        ],
    )
    runner = subprocess.Popen(
        [sys.executable, "-m", "humanoid_bringup.launcher", str(path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(Path(f"{marker_a}.ready"))
        wait_for(Path(f"{marker_b}.ready"))
        runner.send_signal(signal.SIGINT)
        out, _ = runner.communicate(timeout=15)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 0, out
    assert marker_a.read_text() == "SIGINT" and marker_b.read_text() == "SIGINT"
    assert "received SIGINT, shutting down" in out


def test_run_with_no_processes(tmp_path: Path) -> None:
    plan = load_launch_description(
        write_text_launch(tmp_path, "launch:\n- arg: {name: x, default: '1'}\n"), {}
    )
    assert run(plan) == 0


def test_failed_start_of_required_process(tmp_path: Path) -> None:
    plan = LaunchPlan(
        path=tmp_path / "virtual.launch.yaml",
        arguments={},
        declared=[],
        processes=[ProcessSpec(name="ghost", cmd=[str(tmp_path / "does-not-exist")], required=True)],
    )
    assert run(plan) == 127


def test_module_exports() -> None:
    from humanoid_bringup.launcher import cli, interpreter, plan, supervisor

    for module, names in (
        (plan, ("LaunchError", "LaunchPlan", "ProcessSpec")),
        (interpreter, ("load_launch_description",)),
        (supervisor, ("run",)),
        (cli, ("main",)),
    ):
        for name in names:
            assert name in module.__all__


def test_ros_domains_claimed_here_are_never_shared_between_processes(tmp_path: Path) -> None:
    """Two processes that isolate their graphs with isolated_ros_env never get the same domain id."""
    import ast

    from humanoid_bringup.evaluation.launched_graph import claim_ros_domain

    mine = claim_ros_domain()
    code = (
        "from humanoid_bringup.evaluation.launched_graph import isolated_ros_env\n"
        f"print(sorted({{int(isolated_ros_env({str(tmp_path)!r})['ROS_DOMAIN_ID']) for _ in range(300)}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    theirs = ast.literal_eval(out)
    assert mine not in theirs and len(theirs) > 50  # every id but the ones held elsewhere, never ours
