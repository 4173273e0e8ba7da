"""The node and topic graph of a launch file, as a Mermaid flowchart (``humanoid-graph``).

The nodes come from the launch file through the launcher's own parsing (what ``humanoid-launch --print``
shows), once for every combination of the varied arguments (``controller``, ``estimator`` and
``mode_manager`` by default), so a node that only some arguments start carries that condition. The topics
of each node come from :data:`NODE_TOPICS`, keyed by executable; ``test/test_node_graph.py`` checks that
table against the ``create_publisher`` / ``create_subscription`` calls in the nodes' code, and the picture at
the top of
``docs/architecture.md`` against this command's output (``humanoid-graph --update docs/architecture.md``
rewrites it).
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from humanoid_bringup.launcher.interpreter import declared_arguments, load_launch_description
from humanoid_bringup.launcher.packages import find_launch_file
from humanoid_bringup.launcher.plan import LaunchError
from humanoid_control.ros.lockstep import ACK_TOPIC, STATUS_TOPIC

__all__ = ["NODE_TOPICS", "NodeTopics", "main", "mermaid_graph"]

BEGIN_MARK = "<!-- node-graph:begin (humanoid-graph --update docs/architecture.md) -->"
END_MARK = "<!-- node-graph:end -->"
DEFAULT_VARY = ("controller", "estimator", "mode_manager", "perception", "autonomy")


@dataclass(frozen=True)
class NodeTopics:
    """The topics a node's code creates publishers and subscriptions for, as written there.

    ``~/name`` is private to the node (``<node name>/name``); ``{param}`` is the node parameter of that name
    (its default in ``parameters`` unless the launch file sets it); ``{side}`` is each foot of the robot.
    Some are created only in some modes (``/clock`` and ``/sim/*`` for simulators, ``/joy`` for hardware
    backends with a remote, ``/lockstep/ack`` in
    lockstep, ``/tf`` where ``tf2_msgs`` is installed, ``/wbc/markers`` when enabled, ``~/joint_commands``
    (the commands mirrored for tooling) only for a controller in the driver's loop, ``in_loop:=true``).
    """

    publishes: tuple[str, ...]
    subscribes: tuple[str, ...]
    parameters: dict[str, str] = field(default_factory=dict)


_CONTROLLER_NODE = NodeTopics(
    # {state_topic}: the hosted controller's latched topic, if it has one (supervised: /supervisor/state)
    publishes=("/joint_commands", "~/joint_commands", "~/state", "{state_topic}", "/diagnostics", ACK_TOPIC),
    subscribes=("/cmd_vel", "/joint_states", "/imu/data", STATUS_TOPIC),
)

#: executable (console script) -> its topics; checked against the nodes' code by test/test_node_graph.py
NODE_TOPICS: dict[str, NodeTopics] = {
    "robot_driver": NodeTopics(
        publishes=(
            "/joint_states",
            "/imu/data",
            "/diagnostics",
            "~/mode",
            "/clock",
            "/sim/ground_truth",
            "/sim/contacts/{side}",
            "/sim/push",
            "~/lockstep",
            "~/switch",
            "~/down",
            "/joy",
        ),
        subscribes=("/joint_commands", ACK_TOPIC),
    ),
    # the emulated G1 (hardware:=unitree_g1 emulator:=true); its robot side is DDS (rt/lowcmd, rt/lowstate)
    "g1_emulator": NodeTopics(publishes=("~/status",), subscribes=("~/remote",)),
    "robot_description": NodeTopics(publishes=("/robot_description",), subscribes=()),
    # the links' transforms (robot_state_publisher's job, for installs without it; needs tf2_msgs)
    "tf_publisher": NodeTopics(
        publishes=("/tf", "/tf_static"), subscribes=("/robot_description", "/joint_states")
    ),
    # the browser console (console:=true): observes, drives /teleop/cmd_vel through the mode manager
    "console": NodeTopics(
        publishes=("/teleop/cmd_vel", "/diagnostics"),
        subscribes=(
            "/robot_description",
            "{driver}/mode",
            "{mode_manager}/state",
            "/diagnostics",
            "/walking/plan",
            "/walking/footsteps",
            "/wbc/markers",
            "/perception/markers",
            "/perception/height_map",
            "/camera/color/image_raw",
            "/joint_states",
            "/odom",
            "/sim/ground_truth",
        ),
        parameters={"driver": "/robot_driver", "mode_manager": "/mode_manager"},
    ),
    # the generic node adapter hosting a registered controller (joint_hold_controller: hosting joint_hold)
    "controller_node": _CONTROLLER_NODE,
    "joint_hold_controller": _CONTROLLER_NODE,
    "policy_runner": NodeTopics(
        publishes=("/joint_commands", "~/joint_commands", "~/state", "/diagnostics", ACK_TOPIC),
        subscribes=("/imu/data", "/cmd_vel", "{driver}/mode", "/joint_states", STATUS_TOPIC),
        parameters={"driver": "/robot_driver"},
    ),
    "state_estimator": NodeTopics(
        publishes=("/odom", "/contacts/{side}", "/diagnostics", "/tf", ACK_TOPIC),
        subscribes=("/imu/data", "/joint_states", STATUS_TOPIC),
    ),
    "mode_manager": NodeTopics(
        publishes=("/cmd_vel", "~/state", ACK_TOPIC),
        subscribes=(
            "/clock",
            STATUS_TOPIC,
            "{driver}/mode",
            "{driver}/switch",
            "{driver}/down",
            "{policy_runner}/state",
            "{wbc}/state",
            "{walking}/state",
            "/walking/status",
            "/teleop/cmd_vel",
            "/autonomy/cmd_vel",
            "/joy",
        ),
        parameters={
            "driver": "/robot_driver",
            "policy_runner": "/policy_runner",
            "wbc": "/wbc_controller",
            "walking": "/walking_controller",
        },
    ),
    "camera_node": NodeTopics(
        publishes=(
            "/camera/color/image_raw",
            "/camera/color/camera_info",
            "/camera/depth/image_raw",
            "/camera/depth/camera_info",
            "/diagnostics",
            ACK_TOPIC,
        ),
        subscribes=("/sim/ground_truth", "/joint_states", STATUS_TOPIC),
    ),
    "perception_node": NodeTopics(
        publishes=(
            "/perception/marker_ids",
            "/perception/marker_poses",
            "/perception/marker_poses_odom",
            "/perception/detections",
            "/perception/markers",
            "/perception/height_map",
            "/diagnostics",
            ACK_TOPIC,
        ),
        subscribes=(
            "/odom",
            "/joint_states",
            "/camera/color/camera_info",
            "/camera/color/image_raw",
            "/camera/depth/camera_info",
            "/camera/depth/image_raw",
            STATUS_TOPIC,
        ),
    ),
    "autonomy_node": NodeTopics(
        publishes=("/autonomy/cmd_vel", "~/state", "~/outcome", ACK_TOPIC),
        subscribes=("{mode_manager}/state", "/perception/detections", STATUS_TOPIC),
        parameters={"mode_manager": "/mode_manager"},
    ),
    "wbc_controller": NodeTopics(
        publishes=(
            "/joint_commands",
            "~/joint_commands",
            "~/state",
            "/diagnostics",
            "/wbc/markers",
            ACK_TOPIC,
        ),
        subscribes=("{driver}/mode", "/odom", "/joint_states", STATUS_TOPIC),
        parameters={"driver": "/robot_driver"},
    ),
    # the WBC node's topics (but /wbc/markers: balance_markers = False) plus its own (WalkingNode subclasses
    # WbcNode)
    "walking_controller": NodeTopics(
        publishes=(
            "/joint_commands",
            "~/joint_commands",
            "~/state",
            "/diagnostics",
            ACK_TOPIC,
            "/walking/plan",
            "/walking/footsteps",
            "/walking/status",
        ),
        subscribes=("{driver}/mode", "/odom", "/joint_states", STATUS_TOPIC, "/cmd_vel"),
        parameters={"driver": "/robot_driver"},
    ),
}


@dataclass
class _GraphNode:
    name: str
    executable: str
    params: dict[str, object]
    variants: set[int] = field(default_factory=set)


def _resolve(topic: str, node: _GraphNode, defaults: dict[str, str]) -> str:
    if topic.startswith("~/"):
        return f"{node.name}/{topic[2:]}"

    def param(match: re.Match[str]) -> str:
        key = match.group(1)
        if key in node.params:
            return str(node.params[key])
        return defaults.get(key, match.group(0))

    return re.sub(r"\{(\w+)\}", param, topic)


def _condition(present: set[int], variants: list[dict[str, str]]) -> str:
    """The arguments that start a node present in ``present`` (indices of ``variants``); "" if always."""
    if len(present) == len(variants):
        return ""
    terms = []
    covered: set[int] = set()
    for name in variants[0]:
        for value in dict.fromkeys(v[name] for v in variants):
            having = {i for i, v in enumerate(variants) if v[name] == value}
            if having <= present:
                terms.append(f"{name}:={value}")
                covered |= having
    if covered != present:  # not a union of single arguments: list the combinations
        terms = [" ".join(f"{k}:={v}" for k, v in variants[i].items()) for i in sorted(present)]
    return " or ".join(terms)


def _collect_nodes(
    path: Path, arguments: dict[str, str], vary: Sequence[str]
) -> tuple[list[_GraphNode], list[dict[str, str]]]:
    declared = {spec.name: spec for spec in declared_arguments(path)}
    choices = []
    for name in vary:
        spec = declared.get(name)
        if spec is not None and not spec.choices and name == "controller":
            # any registered controller's name is valid: vary over the stack's own
            from humanoid_control.controllers.registry import NO_CONTROLLER, STACK_CONTROLLERS

            choices.append([NO_CONTROLLER, *STACK_CONTROLLERS])
            continue
        if spec is None or not spec.choices:
            raise LaunchError(f"--vary {name}: not an argument with choices in {path.name}")
        choices.append(spec.choices)
    variants = [dict(zip(vary, combo, strict=True)) for combo in itertools.product(*choices)]
    nodes: dict[str, _GraphNode] = {}
    for index, variant in enumerate(variants):
        plan = load_launch_description(path, {**arguments, **variant})
        try:
            for proc in plan.processes:
                if proc.kind != "node" or proc.executable is None:
                    continue
                name = proc.node_name or f"/{proc.executable}"
                node = nodes.setdefault(name, _GraphNode(name, proc.executable, dict(proc.params)))
                node.variants.add(index)
        finally:
            plan.cleanup()
    return list(nodes.values()), variants


def mermaid_graph(
    path: str | Path, arguments: dict[str, str] | None = None, vary: Sequence[str] = DEFAULT_VARY
) -> str:
    """Mermaid ``flowchart`` of the nodes of launch file ``path`` and the topics between them."""
    path = Path(path)
    nodes, variants = _collect_nodes(path, dict(arguments or {}), vary)
    lines = ["flowchart LR"]
    topic_ids: dict[str, str] = {}
    edges: list[str] = []
    for index, node in enumerate(nodes):
        node_id = f"n{index}"
        condition = _condition(node.variants, variants)
        label = f"{node.name}<br/><i>{node.executable}</i>" + (f"<br/>if {condition}" if condition else "")
        lines.append(f'    {node_id}(["{label}"])')
        table = NODE_TOPICS.get(node.executable)
        if table is None:
            raise LaunchError(
                f"node {node.name}: executable '{node.executable}' has no entry in node_graph.NODE_TOPICS"
            )
        for direction, topics in (("pub", table.publishes), ("sub", table.subscribes)):
            for topic in topics:
                resolved = _resolve(topic, node, table.parameters)
                topic_id = topic_ids.setdefault(resolved, f"t{len(topic_ids)}")
                edges.append(
                    f"    {node_id} --> {topic_id}" if direction == "pub" else f"    {topic_id} --> {node_id}"
                )
    for topic, topic_id in topic_ids.items():
        lines.append(f'    {topic_id}["{topic}"]')
    lines += edges
    fixed = " ".join(f"{k}:={v}" for k, v in (arguments or {}).items())
    command = " ".join(["humanoid-graph", path.name, *(f"--vary {v}" for v in vary), fixed]).strip()
    return "\n".join([f"%% generated by: {command}", *lines]) + "\n"


def update_markdown(markdown: str, graph: str) -> str:
    """``markdown`` with the Mermaid block between :data:`BEGIN_MARK` and :data:`END_MARK` replaced."""
    start = markdown.find(BEGIN_MARK)
    end = markdown.find(END_MARK)
    if start < 0 or end < start:
        raise ValueError(f"no '{BEGIN_MARK}' ... '{END_MARK}' block")
    block = f"{BEGIN_MARK}\n```mermaid\n{graph}```\n"
    return markdown[:start] + block + markdown[end:]


def main(argv: list[str] | None = None) -> int:
    """``humanoid-graph``: print the Mermaid graph of a launch file, or update it in a Markdown file."""
    parser = argparse.ArgumentParser(
        prog="humanoid-graph",
        description="Mermaid graph of the nodes and topics of a launch file (default: sim.launch.yaml).",
    )
    parser.add_argument(
        "--vary",
        action="append",
        metavar="ARG",
        help=f"launch argument whose choices all run (repeatable; default: {', '.join(DEFAULT_VARY)})",
    )
    parser.add_argument("--update", metavar="MARKDOWN", help="rewrite the graph block of this Markdown file")
    parser.add_argument(
        "targets", nargs="*", metavar="ARG", help="[FILE | PACKAGE LAUNCH_FILE] [name:=value ...]"
    )
    options = parser.parse_args(argv)
    positional = [t for t in options.targets if ":=" not in t]
    arguments = dict(t.split(":=", 1) for t in options.targets if ":=" in t)
    try:
        if not positional:
            path = find_launch_file("humanoid_stack", "sim.launch.yaml")
        elif len(positional) == 1:
            path = Path(positional[0])
        else:
            path = find_launch_file(positional[0], positional[1])
        graph = mermaid_graph(path, arguments, tuple(options.vary or DEFAULT_VARY))
    except LaunchError as exc:
        print(f"humanoid-graph: error: {exc}", file=sys.stderr)
        return 1
    if options.update:
        doc = Path(options.update)
        doc.write_text(update_markdown(doc.read_text(encoding="utf-8"), graph), encoding="utf-8")
        return 0
    sys.stdout.write(graph)
    return 0


if __name__ == "__main__":
    sys.exit(main())
