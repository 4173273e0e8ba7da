"""config/rviz/humanoid.rviz stays true to the node graph (rviz2 is not installable here, so the file is
checked instead of run): every topic a display names is published by a node that launch/sim.launch.yaml
starts (with everything on: mode manager, WBC stand, MPC walking, perception), with the message type the
display expects. The publishers and their types are read from the nodes' code (as test/test_node_graph.py
does), the nodes from the launch file (:mod:`humanoid_bringup.node_graph`). Also the launch arguments ``rviz``
and ``console`` (with ``console_host``, ``console_port``, ``console_token``)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from humanoid_bringup.evaluation.launched_graph import default_launch_file
from humanoid_bringup.node_graph import NODE_TOPICS, _collect_nodes, _resolve

RVIZ = Path(__file__).resolve().parent.parent / "config" / "rviz" / "humanoid.rviz"

#: rviz2 display class -> the message type of its topic
DISPLAY_TYPES = {
    "rviz_default_plugins/RobotModel": "std_msgs/msg/String",
    "rviz_default_plugins/Odometry": "nav_msgs/msg/Odometry",
    "rviz_default_plugins/Path": "nav_msgs/msg/Path",
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/PointCloud2": "sensor_msgs/msg/PointCloud2",
    "rviz_default_plugins/Image": "sensor_msgs/msg/Image",
}
#: displays without a topic of their own (TF reads /tf and /tf_static)
NO_TOPIC = {"rviz_default_plugins/Grid", "rviz_default_plugins/TF"}
TF_TOPICS = {"/tf": "tf2_msgs/msg/TFMessage", "/tf_static": "tf2_msgs/msg/TFMessage"}
EVERYTHING_ON = {
    "mode_manager": "true",
    "mode_stand": "wbc",
    "mode_walk": "mpc",
    "perception": "true",
    "console": "true",
}


def _tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _message_type(module: str, name: str, depth: int = 0) -> str | None:
    """``pkg/msg/Name`` of the class ``name`` as ``module`` imports it (following re-exports)."""
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
            if node.module.endswith(".msg"):
                return f"{node.module.rsplit('.', 1)[0]}/msg/{name}"
            if depth < 3:
                return _message_type(node.module, name, depth + 1)
    return None


def published_types() -> dict[str, set[str]]:
    """Topic (as written in the code) -> message types published on it, over every node of the package."""
    modules = {
        e.module
        for e in importlib.metadata.distribution("humanoid_stack").entry_points
        if e.group == "console_scripts" and e.name in NODE_TOPICS
    }
    out: dict[str, set[str]] = {}
    for module in sorted(modules):
        for call in ast.walk(_tree(module)):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "create_publisher"
                and len(call.args) >= 2
                and isinstance(call.args[0], ast.Name)
                and isinstance(call.args[1], ast.Constant)
            ):
                continue
            msg = _message_type(module, call.args[0].id)
            if msg is not None:
                out.setdefault(str(call.args[1].value), set()).add(msg)
    return out


def displays(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """Every display of the file, groups' members included."""
    found: list[dict[str, Any]] = []

    def walk(items: list[dict[str, Any]]) -> None:
        for d in items:
            found.append(d)
            walk(d.get("Displays", []) or [])

    walk(tree["Visualization Manager"]["Displays"])
    return found


def display_topic(display: dict[str, Any]) -> str | None:
    for key in ("Topic", "Description Topic"):
        value = display.get(key)
        if isinstance(value, dict) and value.get("Value"):
            return str(value["Value"])
    return None


def graph_publishers() -> dict[str, str]:
    """Resolved topic -> the node that publishes it, for the launch with everything on."""
    nodes, _ = _collect_nodes(default_launch_file(), EVERYTHING_ON, ())
    published: dict[str, str] = {}
    for node in nodes:
        table = NODE_TOPICS[node.executable]
        for topic in table.publishes:
            published[_resolve(topic, node, table.parameters)] = node.name
    return published


def check_rviz(config: dict[str, Any], published: dict[str, str], types: dict[str, set[str]]) -> list[str]:
    """The problems of an rviz configuration against the graph (empty: none), and the topics checked."""
    problems: list[str] = []
    for display in displays(config):
        cls, name = display.get("Class", "?"), display.get("Name", "?")
        if cls == "rviz_default_plugins/TF":
            for topic, msg in TF_TOPICS.items():
                if topic not in published or msg not in types.get(topic, set()):
                    problems.append(f"TF display: {topic} ({msg}) is not published")
            continue
        if cls in NO_TOPIC:
            continue
        if cls not in DISPLAY_TYPES:
            problems.append(f"display {name}: class {cls} unknown to this check (add its message type)")
            continue
        topic = display_topic(display)
        if topic is None:
            problems.append(f"display {name} names no topic")
        elif topic not in published:
            problems.append(f"display {name}: no node of the launch publishes {topic}")
        elif types.get(topic) != {DISPLAY_TYPES[cls]}:
            problems.append(
                f"display {name}: {topic} is {types.get(topic)}, the display expects {DISPLAY_TYPES[cls]}"
            )
    return problems


def test_rviz_file_topics_exist_with_the_expected_types() -> None:
    config = yaml.safe_load(RVIZ.read_text(encoding="utf-8"))
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == "odom"
    assert check_rviz(config, graph_publishers(), published_types()) == []
    # what the issue lists: robot model, TF, odometry, footsteps and plan, WBC and perception markers, the
    # camera image, the height map
    named = {display_topic(d) for d in displays(config)}
    classes = {d["Class"] for d in displays(config)}
    assert set(DISPLAY_TYPES) | {"rviz_default_plugins/TF"} <= classes
    for topic in (
        "/robot_description",
        "/odom",
        "/walking/plan",
        "/walking/footsteps",
        "/wbc/markers",
        "/perception/markers",
        "/camera/color/image_raw",
        "/perception/height_map",
    ):
        assert topic in named, topic


def test_the_check_catches_a_wrong_topic_and_a_wrong_type() -> None:
    """The check can fail: a display on a topic nobody publishes, and one on a topic of another type."""
    config = yaml.safe_load(RVIZ.read_text(encoding="utf-8"))
    published, types = graph_publishers(), published_types()
    odom = next(d for d in displays(config) if display_topic(d) == "/odom")
    odom["Topic"]["Value"] = "/odom_typo"
    path = next(d for d in displays(config) if display_topic(d) == "/walking/plan")
    path["Topic"]["Value"] = "/sim/ground_truth"  # an Odometry topic under a Path display
    problems = check_rviz(config, published, types)
    assert len(problems) == 2, problems
    assert "no node of the launch publishes /odom_typo" in problems[0]
    assert "/sim/ground_truth" in problems[1] and "nav_msgs/msg/Path" in problems[1]


@pytest.mark.parametrize(("rviz", "installed"), [("true", False), ("true", True), ("false", True)])
def test_rviz_launch_argument(
    rviz: str, installed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rviz:=true starts ``rviz2 -d <share>/config/rviz/humanoid.rviz`` only where rviz2 is installed (a
    stand-in on PATH plays the installed one; the real one is not installable here)."""
    import os
    import shutil

    from humanoid_bringup.launcher.interpreter import load_launch_description

    path = os.environ.get("PATH", "")
    if installed:
        fake = tmp_path / "rviz2"
        fake.write_text("#!/bin/sh\nexit 0\n")
        fake.chmod(0o755)
        path = f"{tmp_path}:{path}"
    else:
        path = os.pathsep.join(p for p in path.split(os.pathsep) if not (Path(p) / "rviz2").exists())
    monkeypatch.setenv("PATH", path)
    assert (shutil.which("rviz2") is not None) == installed
    plan = load_launch_description(default_launch_file(), {"rviz": rviz})
    try:
        procs = [p for p in plan.processes if p.name == "rviz2"]
        assert bool(procs) == (rviz == "true" and installed)
        if procs:
            assert procs[0].cmd[0] == "rviz2" and procs[0].cmd[1] == "-d"
            assert Path(procs[0].cmd[2]).resolve() == RVIZ.resolve()
    finally:
        plan.cleanup()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, None),
        ({"console": "true"}, {"host": "127.0.0.1", "port": 8080, "token": "none"}),
        (
            {
                "console": "true",
                "console_host": "0.0.0.0",
                "console_port": "9090",
                "console_token": "abc-12345",
            },
            {"host": "0.0.0.0", "port": 9090, "token": "abc-12345"},
        ),
    ],
)
def test_console_launch_arguments(arguments: dict[str, str], expected: dict[str, Any] | None) -> None:
    """console:=true starts the node ``console`` with host, port and token from the launch arguments (an empty
    token as "none"); off by default."""
    from humanoid_bringup.launcher.interpreter import load_launch_description

    plan = load_launch_description(default_launch_file(), arguments)
    try:
        procs = [p for p in plan.processes if p.name == "console"]
        assert bool(procs) == (expected is not None)
        if expected is None:
            return
        cmd = procs[0].cmd
        files = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--params-file"]
        params: dict[str, Any] = {}
        for path in files:
            for section in yaml.safe_load(Path(path).read_text(encoding="utf-8")).values():
                params.update(section.get("ros__parameters", {}))
        assert {k: params[k] for k in expected} == expected, params
    finally:
        plan.cleanup()
