"""The node graph stays true: node_graph.NODE_TOPICS against the nodes' code, the docs' picture against the
launch file (``humanoid-graph``)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

from humanoid_bringup.evaluation.launched_graph import default_launch_file
from humanoid_bringup.node_graph import BEGIN_MARK, END_MARK, NODE_TOPICS, mermaid_graph, update_markdown

REPO_ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"


def _module_of(executable: str) -> str:
    for entry in importlib.metadata.distribution("humanoid_stack").entry_points:
        if entry.group == "console_scripts" and entry.name == executable:
            return entry.module
    raise AssertionError(f"no console script {executable}")


def _tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _constant(tree: ast.Module, name: str) -> str:
    """The string value of a module-level ``name``, following ``from X import name``."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in stmt.targets
        ):
            assert isinstance(stmt.value, ast.Constant), name
            return str(stmt.value.value)
        if isinstance(stmt, ast.ImportFrom) and any(alias.name == name for alias in stmt.names):
            assert stmt.module is not None
            return _constant(_tree(stmt.module), name)
    raise AssertionError(f"cannot resolve {name}")


def _topic(expr: ast.expr, tree: ast.Module) -> str:
    """A topic argument as NODE_TOPICS writes it: f-string fields become ``{name}``."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name):
        return _constant(tree, expr.id)
    if isinstance(expr, ast.JoinedStr):
        parts = []
        for value in expr.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                assert isinstance(value, ast.FormattedValue)
                inner = value.value
                parts.append(
                    "{" + (inner.attr if isinstance(inner, ast.Attribute) else ast.unparse(inner)) + "}"
                )
        return "".join(parts)
    raise AssertionError(f"topic expression {ast.unparse(expr)} is not a literal, constant or f-string")


def _calls(tree: ast.AST, method: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method
    ]


def _node_bases(module: str) -> list[str]:
    """Modules of other nodes whose node class a class of ``module`` derives from (WalkingNode(WbcNode))."""
    tree = _tree(module)
    node_modules = {
        e.module
        for e in importlib.metadata.distribution("humanoid_stack").entry_points
        if e.group == "console_scripts"
    }
    classes = [c for c in tree.body if isinstance(c, ast.ClassDef)]
    bases = {b.id for c in classes for b in c.bases if isinstance(b, ast.Name)}
    return [
        str(stmt.module)
        for stmt in tree.body
        if isinstance(stmt, ast.ImportFrom)
        and stmt.module in node_modules
        and any(alias.name in bases for alias in stmt.names)
    ]


def topics_in_code(module: str) -> tuple[set[str], set[str]]:
    """(published, subscribed) topics of a node module, with those of the LockstepPeer it creates."""
    tree = _tree(module)
    trees = [(tree, tree)]
    if any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "LockstepPeer" for n in ast.walk(tree)):
        lockstep = _tree("humanoid_control.ros.lockstep")
        peer = next(n for n in lockstep.body if isinstance(n, ast.ClassDef) and n.name == "LockstepPeer")
        trees.append((peer, lockstep))
    found: tuple[set[str], set[str]] = (set(), set())
    for scope, module_tree in trees:
        for kind, method in enumerate(("create_publisher", "create_subscription")):
            for call in _calls(scope, method):
                found[kind].add(_topic(call.args[1], module_tree))
    for base in _node_bases(module):  # WalkingNode(WbcNode): the WBC node's topics too
        inherited = topics_in_code(base)
        found[0].update(inherited[0])
        found[1].update(inherited[1])
    if _class_attribute(tree, "balance_markers") is False:  # WbcNode's markers turned off by a subclass
        found[0].discard("/wbc/markers")
    return found


def _class_attribute(tree: ast.Module, name: str) -> object:
    """The constant value a class of the module assigns to ``name`` in its body (None if none does)."""
    for cls in (c for c in tree.body if isinstance(c, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign):
                target, value = stmt.target, stmt.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Constant):
                return value.value
    return None


def parameter_default(module: str, name: str) -> object:
    for call in ast.walk(_tree(module)):
        if (
            isinstance(call, ast.Call)
            and getattr(call.func, "id", None) == "declare"
            and isinstance(call.args[1], ast.Constant)
            and call.args[1].value == name
        ):
            return ast.literal_eval(call.args[2])
    for base in _node_bases(module):
        return parameter_default(base, name)
    raise AssertionError(f"{module} declares no parameter {name}")


@pytest.mark.parametrize("executable", sorted(NODE_TOPICS))
def test_node_topics_match_the_code(executable: str) -> None:
    module = _module_of(executable)
    published, subscribed = topics_in_code(module)
    table = NODE_TOPICS[executable]
    assert set(table.publishes) == published, module
    assert set(table.subscribes) == subscribed, module
    for name, default in table.parameters.items():
        assert parameter_default(module, name) == default, (module, name)


def test_every_node_of_the_package_has_topics() -> None:
    nodes = {
        entry.name
        for entry in importlib.metadata.distribution("humanoid_stack").entry_points
        if entry.group == "console_scripts" and "-" not in entry.name  # ROS nodes; tools are humanoid-*
    }
    assert nodes == set(NODE_TOPICS)


def test_architecture_picture_is_generated_from_the_launch_file() -> None:
    doc = ARCHITECTURE.read_text(encoding="utf-8")
    assert BEGIN_MARK in doc and END_MARK in doc
    graph = mermaid_graph(default_launch_file())
    assert update_markdown(doc, graph) == doc, "regenerate it: humanoid-graph --update docs/architecture.md"
