"""A small runner for ROS 2 YAML launch files (``launch_yaml`` frontend) without ``launch``/``launch_ros``.

``ros2 launch`` needs the ``launch``, ``launch_ros`` and ``launch_yaml`` Python packages, which a pip-only
ROS 2 install (rclpy wheels in a virtual environment) does not have.  This module interprets the subset of
the YAML launch syntax that this project uses, so the *same* ``*.launch.yaml`` file works with
``ros2 launch humanoid_stack sim.launch.yaml`` on a full ROS 2 install and with
``humanoid-launch humanoid_stack sim.launch.yaml`` everywhere else.

Supported actions: ``arg``, ``let``, ``node``, ``executable``, ``group``, ``set_env``, ``set_parameter``
and ``push_ros_namespace``/``push-ros-namespace``.  Supported substitutions: ``var``, ``env``,
``find-pkg-share``, ``find-pkg-prefix``, ``eval``, ``command``, ``dirname``, ``filename`` and ``anon``.
See ``docs/launch.md`` for the details and the few deliberate differences from ``ros2 launch``.

Parsing and resolution (:func:`load_launch_description`) are pure apart from writing the generated
parameter files; :func:`run` starts and supervises the processes; :func:`main` is the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

__all__ = [
    "ArgumentSpec",
    "LaunchError",
    "LaunchPlan",
    "ProcessSpec",
    "declared_arguments",
    "find_launch_file",
    "find_package_prefix",
    "find_package_share",
    "load_launch_description",
    "main",
    "run",
]

RUNNER = "humanoid-launch"
OWN_PACKAGE = "humanoid_stack"

#: Launch actions this runner understands (``unsupported launch action`` lists them).
SUPPORTED_ACTIONS = (
    "arg",
    "let",
    "node",
    "executable",
    "group",
    "set_env",
    "set_parameter",
    "push_ros_namespace",
    "push-ros-namespace",
)
#: Substitutions this runner understands.
SUPPORTED_SUBSTITUTIONS = (
    "var",
    "env",
    "find-pkg-share",
    "find-pkg-prefix",
    "eval",
    "command",
    "dirname",
    "filename",
    "anon",
)
OUTPUT_MODES = ("screen", "log", "both")

#: Words of an ``if:`` / ``unless:`` condition, compared lower-cased and unstripped, as ``launch``'s
#: ``IfCondition`` does (``evaluate_condition_expression``); anything else is an error there and here.
_CONDITION_TRUE = ("true", "1")
_CONDITION_FALSE = ("false", "0")
#: Words of the boolean attributes ``scoped``, ``forwarding``, ``shell`` and ``respawn``.
_TRUE_WORDS = ("true", "1", "yes")
_FALSE_WORDS = ("false", "0", "no")
#: Exit code of a usage, launch-file or launch-argument error (``LaunchError``), as ``ros2 launch``.
EXIT_LAUNCH_ERROR = 1
_SIGKILL_AFTER_SIGTERM_S = 2.0
_POLL_S = 0.02

# Keys accepted by ``ros2 launch`` that this runner parses but deliberately ignores.
_IGNORED_PROCESS_KEYS = frozenset(
    {"respawn_delay", "respawn_max_retries", "emulate_tty", "sigterm_timeout", "sigkill_timeout"}
)
_CONDITION_KEYS = frozenset({"if", "unless"})
_ALLOWED_KEYS: dict[str, frozenset[str]] = {
    "arg": frozenset({"name", "default", "description", "choice"}) | _CONDITION_KEYS,
    "let": frozenset({"name", "value"}) | _CONDITION_KEYS,
    "node": frozenset(
        {
            "pkg",
            "exec",
            "name",
            "namespace",
            "exec_name",
            "output",
            "on_exit",
            "respawn",
            "args",
            "ros_args",
            "param",
            "remap",
            "env",
            "cwd",
            "launch-prefix",
        }
    )
    | _CONDITION_KEYS
    | _IGNORED_PROCESS_KEYS,
    "executable": frozenset(
        {"cmd", "name", "output", "on_exit", "respawn", "env", "cwd", "shell", "launch-prefix"}
    )
    | _CONDITION_KEYS
    | _IGNORED_PROCESS_KEYS,
    "group": frozenset({"scoped", "forwarding", "keep", "children"}) | _CONDITION_KEYS,
    "set_env": frozenset({"name", "value"}) | _CONDITION_KEYS,
    "set_parameter": frozenset({"name", "value"}) | _CONDITION_KEYS,
    "push_ros_namespace": frozenset({"namespace"}) | _CONDITION_KEYS,
    "push-ros-namespace": frozenset({"namespace"}) | _CONDITION_KEYS,
}

_IDENTIFIER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_LAUNCH_ARG_RE = re.compile(r"^([^\s:=]+):=(.*)$", re.DOTALL)

_SAFE_BUILTINS: dict[str, Any] = {
    "abs": abs,
    "all": all,
    "any": any,
    "bool": bool,
    "dict": dict,
    "divmod": divmod,
    "enumerate": enumerate,
    "float": float,
    "int": int,
    "len": len,
    "list": list,
    "max": max,
    "min": min,
    "pow": pow,
    "range": range,
    "reversed": reversed,
    "round": round,
    "set": set,
    "sorted": sorted,
    "str": str,
    "sum": sum,
    "tuple": tuple,
    "zip": zip,
    "True": True,
    "False": False,
    "None": None,
}


class LaunchError(Exception):
    """A user error: bad command line, bad launch file, unresolvable substitution or executable."""


# --------------------------------------------------------------------------------------------------
# data model
# --------------------------------------------------------------------------------------------------


@dataclass
class ArgumentSpec:
    """A declared launch argument (``arg`` action), as written in the file (default unsubstituted)."""

    name: str
    default: str | None = None
    description: str = ""
    choices: list[str] | None = None


@dataclass
class ProcessSpec:
    """One process to start: a ``node`` or an ``executable`` action after all substitutions.

    ``env`` holds only the overrides (``set_env`` actions and the action's ``env`` entries); the child
    inherits the runner's environment with these applied on top.  For nodes, ``params`` is the merged
    dictionary of inline parameters (``set_parameter`` + the node's ``param: {name, value}`` entries) that
    was written to the generated parameter file, and ``param_files`` the ``param: {from: PATH}`` files.
    """

    name: str
    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)
    output: str = "screen"
    required: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    param_files: list[str] = field(default_factory=list)
    kind: str = "executable"
    package: str | None = None
    executable: str | None = None
    node_name: str | None = None
    cwd: str | None = None
    shell: bool = False
    respawn: bool = False


@dataclass
class LaunchPlan:
    """The fully resolved launch description: what :func:`run` will start."""

    path: Path
    arguments: dict[str, str]
    declared: list[ArgumentSpec]
    processes: list[ProcessSpec]
    temp_dir: str | None = None

    def cleanup(self) -> None:
        """Remove the generated parameter files (safe to call more than once)."""
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None

    def describe(self) -> str:
        """Human-readable summary used by ``--print``: one resolved command line per process."""
        lines = [f"# launch file: {self.path}"]
        if self.arguments:
            lines.append("# arguments: " + " ".join(f"{k}:={v}" for k, v in self.arguments.items()))
        if not self.processes:
            lines.append("# (no processes)")
        for proc in self.processes:
            flags = [proc.kind, f"output={proc.output}"]
            if proc.required:
                flags.append("on_exit=shutdown")
            lines.append(f"[{proc.name}] ({', '.join(flags)})")
            lines.append("    " + (" ".join(proc.cmd) if proc.shell else shlex.join(proc.cmd)))
            for key, value in proc.env.items():
                lines.append(f"    env {key}={value}")
            if proc.cwd:
                lines.append(f"    cwd {proc.cwd}")
            if proc.params:
                dumped = yaml.safe_dump(proc.params, default_flow_style=True, sort_keys=False).strip()
                lines.append(f"    params {dumped}")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# substitution templates
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Subst:
    name: str
    args: tuple[tuple[_Node, ...], ...]


_Node = _Text | _Subst


class _TemplateParser:
    """Recursive-descent parser for ``$(name arg ...)`` substitutions inside a string.

    Follows the ``launch`` frontend grammar: outside substitutions everything is text (quotes included)
    and a backslash escapes the next character; substitution arguments are separated by spaces and may
    be quoted with ``'...'`` or ``"..."``, inside which nested substitutions are allowed.
    """

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.pos = 0

    def error(self, message: str) -> LaunchError:
        return LaunchError(f"{self.where}: {message} in {self.text!r}")

    def parse(self) -> list[_Node]:
        nodes: list[_Node] = []
        buf: list[str] = []
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if text.startswith("$(", self.pos):
                if buf:
                    nodes.append(_Text("".join(buf)))
                    buf = []
                nodes.append(self._substitution())
            elif char == "\\" and self.pos + 1 < len(text):
                buf.append(text[self.pos + 1])
                self.pos += 2
            else:
                buf.append(char)
                self.pos += 1
        if buf:
            nodes.append(_Text("".join(buf)))
        return nodes

    def _substitution(self) -> _Subst:
        text = self.text
        self.pos += 2  # "$("
        match = _IDENTIFIER_RE.match(text, self.pos)
        if match is None:
            raise self.error("expected a substitution name after '$('")
        name = match.group(0)
        self.pos = match.end()
        args: list[tuple[_Node, ...]] = []
        while True:
            if self.pos >= len(text):
                raise self.error(f"unterminated substitution '$({name}'")
            char = text[self.pos]
            if char == ")":
                self.pos += 1
                return _Subst(name, tuple(args))
            if char != " ":
                raise self.error(f"unexpected {char!r} after substitution name '{name}'")
            while self.pos < len(text) and text[self.pos] == " ":
                self.pos += 1
            if self.pos < len(text) and text[self.pos] != ")":
                args.append(self._argument())

    def _argument(self) -> tuple[_Node, ...]:
        text = self.text
        nodes: list[_Node] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                nodes.append(_Text("".join(buf)))
                buf.clear()

        while self.pos < len(text) and text[self.pos] not in " )":
            char = text[self.pos]
            if char in "'\"":
                quote = char
                self.pos += 1
                quoted_empty = True
                while True:
                    if self.pos >= len(text):
                        raise self.error(f"unterminated {quote} quote in a substitution argument")
                    char = text[self.pos]
                    if char == quote:
                        self.pos += 1
                        break
                    quoted_empty = False
                    if text.startswith("$(", self.pos):
                        flush()
                        nodes.append(self._substitution())
                    elif char == "\\" and self.pos + 1 < len(text):
                        buf.append(text[self.pos + 1])
                        self.pos += 2
                    else:
                        buf.append(char)
                        self.pos += 1
                if quoted_empty and not nodes and not buf:
                    nodes.append(_Text(""))
            elif text.startswith("$(", self.pos):
                flush()
                nodes.append(self._substitution())
            elif char == "\\" and self.pos + 1 < len(text):
                buf.append(text[self.pos + 1])
                self.pos += 2
            else:
                buf.append(char)
                self.pos += 1
        flush()
        return tuple(nodes)


def _parse_template(text: str, where: str) -> list[_Node]:
    return _TemplateParser(text, where).parse()


# --------------------------------------------------------------------------------------------------
# package / executable lookup
# --------------------------------------------------------------------------------------------------


def _source_tree_root() -> Path | None:
    """The ``humanoid_stack`` source tree (the folder holding package.xml), if this module lives in one."""
    root = Path(__file__).resolve().parent.parent
    package_xml = root / "package.xml"
    try:
        content = package_xml.read_text(encoding="utf-8")
    except OSError:
        return None
    if f"<name>{OWN_PACKAGE}</name>" not in content:
        return None
    return root


def _ament_share(package: str) -> Path | None:
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        share = Path(get_package_share_directory(package))
    except (LookupError, OSError, ValueError):  # PackageNotFoundError; OSError if AMENT_PREFIX_PATH unset
        return None
    return share if share.is_dir() else None


def _ament_prefix(package: str) -> Path | None:
    try:
        from ament_index_python.packages import get_package_prefix
    except ImportError:
        return None
    try:
        return Path(get_package_prefix(package))
    except (LookupError, OSError, ValueError):  # not found, or AMENT_PREFIX_PATH unset
        return None


def find_package_share(package: str) -> Path:
    """Share directory of ``package`` (what ``$(find-pkg-share PKG)`` returns).

    Order: ament index; for ``humanoid_stack`` the source tree (if it has a ``launch/`` folder);
    ``<sys.prefix>/share/<package>``.  Raises :class:`LaunchError` when none exists.
    """
    share = _ament_share(package)
    if share is not None:
        return share
    if package == OWN_PACKAGE:
        root = _source_tree_root()
        if root is not None and (root / "launch").is_dir():
            return root
    candidate = Path(sys.prefix) / "share" / package
    if candidate.is_dir():
        return candidate
    raise LaunchError(
        f"package '{package}' not found: not in the ament index (AMENT_PREFIX_PATH="
        f"{os.environ.get('AMENT_PREFIX_PATH', '') or '<unset>'}) and no {candidate}"
    )


def find_package_prefix(package: str) -> Path:
    """Install prefix of ``package`` (what ``$(find-pkg-prefix PKG)`` returns)."""
    prefix = _ament_prefix(package)
    if prefix is not None:
        return prefix
    if (Path(sys.prefix) / "share" / package).is_dir():
        return Path(sys.prefix)
    if package == OWN_PACKAGE:
        root = _source_tree_root()
        if root is not None:
            return root
    raise LaunchError(f"package '{package}' not found (cannot resolve $(find-pkg-prefix {package}))")


def find_launch_file(package: str, launch_file: str) -> Path:
    """Find ``launch_file`` of ``package`` like ``ros2 launch PACKAGE LAUNCH_FILE`` does."""
    share = find_package_share(package)
    direct = share / "launch" / launch_file
    if direct.is_file():
        return direct
    for root, dirs, files in os.walk(share):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if launch_file in files:
            return Path(root) / launch_file
    raise LaunchError(f"launch file '{launch_file}' not found in package '{package}' ({share}/launch/)")


def _ament_prefixes() -> list[Path]:
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if Path(sys.prefix) not in prefixes:
        prefixes.append(Path(sys.prefix))
    return prefixes


def _entry_point_command(executable: str) -> list[str] | None:
    """``[python, -c, ...]`` running console script ``executable`` of the installed humanoid_stack."""
    try:
        dist = importlib.metadata.distribution(OWN_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.entry_points:
        if entry.group != "console_scripts" or entry.name != executable or not entry.attr:
            continue
        head = entry.attr.split(".")[0]
        code = (
            f"import sys; from {entry.module} import {head}; "
            f"sys.argv[0] = {executable!r}; sys.exit({entry.attr}())"
        )
        return [sys.executable, "-c", code]
    return None


def _resolve_node_executable(package: str | None, executable: str, where: str) -> list[str]:
    if package is None:
        return [executable]
    if package == OWN_PACKAGE:
        command = _entry_point_command(executable)
        if command is not None:
            return command
    searched = []
    for prefix in _ament_prefixes():
        candidate = prefix / "lib" / package / executable
        searched.append(str(candidate))
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    hint = (
        f"console script '{executable}' of the installed '{OWN_PACKAGE}' distribution and "
        if (package == OWN_PACKAGE)
        else ""
    )
    raise LaunchError(
        f"{where}: executable '{executable}' of package '{package}' not found (looked for the {hint}"
        f"{', '.join(searched)}). The package is probably not installed here: a pip-only ROS 2 has no "
        f"launch_ros and few ROS packages; install '{package}' or drop this node for this machine"
    )


# --------------------------------------------------------------------------------------------------
# launch file interpretation
# --------------------------------------------------------------------------------------------------


@dataclass
class _Scope:
    """What ``group`` scoping saves and restores (launch configurations, environment, ...)."""

    variables: dict[str, str]
    env_overrides: dict[str, str]
    global_params: dict[str, Any]
    ros_namespace: str | None

    def copy(self) -> _Scope:
        return _Scope(
            dict(self.variables), dict(self.env_overrides), dict(self.global_params), self.ros_namespace
        )


class _Interpreter:
    """Walks the parsed YAML and produces a :class:`LaunchPlan`."""

    def __init__(self, path: Path, arguments: Mapping[str, str]) -> None:
        self.path = path
        self.provided = dict(arguments)
        self.scope = _Scope({}, {}, {}, None)
        self.resolved_args: dict[str, str] = {}
        self.processes: list[ProcessSpec] = []
        self.temp_dir: str | None = None
        self.anon_names: dict[str, str] = {}
        self.label_counts: dict[str, int] = {}

    # ---- substitutions ------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.scope.env_overrides)
        return env

    def subst(self, value: str, where: str) -> str:
        return self.eval_nodes(_parse_template(value, where), where)

    def eval_nodes(self, nodes: Sequence[_Node], where: str) -> str:
        return "".join(node.text if isinstance(node, _Text) else self.perform(node, where) for node in nodes)

    def perform(self, sub: _Subst, where: str) -> str:
        name = sub.name

        def arg(index: int) -> str:
            return self.eval_nodes(sub.args[index], where)

        def expect(low: int, high: int) -> None:
            if not low <= len(sub.args) <= high:
                count = str(low) if low == high else f"{low} to {high}"
                raise LaunchError(f"{where}: $({name}) expects {count} argument(s), got {len(sub.args)}")

        if name == "var":
            expect(1, 1)
            var = arg(0)
            if var not in self.scope.variables:
                known = ", ".join(sorted(self.scope.variables)) or "none"
                raise LaunchError(
                    f"{where}: unknown launch variable '{var}' in $(var {var}) (defined so far: {known})"
                )
            return self.scope.variables[var]
        if name == "env":
            expect(1, 2)
            env_name = arg(0)
            env = self.environment()
            if env_name in env:
                return env[env_name]
            if len(sub.args) == 2:
                return arg(1)
            raise LaunchError(
                f"{where}: environment variable '{env_name}' is not set "
                f"(use $(env {env_name} DEFAULT) to give a default)"
            )
        if name == "find-pkg-share":
            expect(1, 1)
            return str(find_package_share(arg(0)))
        if name == "find-pkg-prefix":
            expect(1, 1)
            return str(find_package_prefix(arg(0)))
        if name == "eval":
            expect(1, 2)
            return self._eval(arg(0), arg(1) if len(sub.args) == 2 else "math", where)
        if name == "command":
            expect(1, 2)
            return self._command(arg(0), arg(1) if len(sub.args) == 2 else "fail", where)
        if name == "dirname":
            expect(0, 0)
            return str(self.path.parent)
        if name == "filename":
            expect(0, 0)
            return str(self.path)
        if name == "anon":
            expect(1, 1)
            base = arg(0)
            if base not in self.anon_names:
                self.anon_names[base] = f"{base}_{os.getpid()}_{random.randint(0, 2**31)}"
            return self.anon_names[base]
        raise LaunchError(
            f"{where}: unsupported substitution '$({name} ...)' "
            f"(supported: {', '.join(SUPPORTED_SUBSTITUTIONS)})"
        )

    def _eval(self, expression: str, modules: str, where: str) -> str:
        namespace: dict[str, Any] = {}
        for module in (m.strip() for m in modules.split(",")):
            if not module:
                continue
            if module != "math":
                raise LaunchError(f"{where}: $(eval) may only use the 'math' module here, not '{module}'")
            namespace.update({k: v for k, v in vars(math).items() if not k.startswith("_")})
            namespace["math"] = math
        try:
            result = eval(expression, {"__builtins__": _SAFE_BUILTINS}, namespace)
        except Exception as exc:
            raise LaunchError(
                f"{where}: $(eval) of {expression!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        return str(result)

    def _command(self, command: str, on_stderr: str, where: str) -> str:
        if on_stderr not in ("fail", "ignore", "warn", "capture"):
            raise LaunchError(f"{where}: $(command) on_stderr must be fail, ignore, warn or capture")
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise LaunchError(f"{where}: $(command {command!r}): {exc}") from exc
        if not argv:
            raise LaunchError(f"{where}: $(command) got an empty command")
        try:
            result = subprocess.run(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if on_stderr == "capture" else subprocess.PIPE,
                text=True,
                env=self.environment(),
                check=False,
            )
        except OSError as exc:
            raise LaunchError(f"{where}: $(command {command!r}) could not run: {exc}") from exc
        if result.returncode != 0:
            raise LaunchError(
                f"{where}: $(command {command!r}) failed with exit code {result.returncode}"
                + (f"; stderr: {result.stderr.strip()}" if result.stderr else "")
            )
        if result.stderr and on_stderr == "fail":
            raise LaunchError(
                f"{where}: $(command {command!r}) wrote to stderr (pass 'ignore' or 'warn' as second "
                f"argument to allow it): {result.stderr.strip()}"
            )
        if result.stderr and on_stderr == "warn":
            print(
                f"[{RUNNER}] warning: $(command {command}) stderr: {result.stderr.strip()}", file=sys.stderr
            )
        return result.stdout

    def split_cmdline(self, value: str, where: str) -> list[str]:
        """Split a command line like a POSIX shell; substitution results are never split or unquoted."""
        nodes = _parse_template(value, where)
        chunks = [
            (node.text, False) if isinstance(node, _Text) else (self.perform(node, where), True)
            for node in nodes
        ]
        words: list[str] = []
        current: list[str] = []
        started = False
        quote: str | None = None
        for text, literal in chunks:
            if literal:
                current.append(text)
                started = True
                continue
            i = 0
            while i < len(text):
                char = text[i]
                if quote is None:
                    if char.isspace():
                        if started:
                            words.append("".join(current))
                            current, started = [], False
                    elif char in "'\"":
                        quote, started = char, True
                    elif char == "\\" and i + 1 < len(text):
                        current.append(text[i + 1])
                        started = True
                        i += 1
                    else:
                        current.append(char)
                        started = True
                elif char == quote:
                    quote = None
                elif quote == '"' and char == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`':
                    current.append(text[i + 1])
                    i += 1
                else:
                    current.append(char)
                i += 1
        if quote is not None:
            raise LaunchError(f"{where}: unbalanced {quote} quote in {value!r}")
        if started:
            words.append("".join(current))
        return words

    # ---- attribute helpers ----------------------------------------------------------------------

    def get_str(self, body: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
        if key not in body:
            if required:
                raise LaunchError(f"{where}: missing required attribute '{key}'")
            return None
        value = body[key]
        if not isinstance(value, str):
            raise LaunchError(
                f"{where}: attribute '{key}' must be a string, got {type(value).__name__} {value!r}; "
                f"quote it (ros2 launch rejects non-string values here too)"
            )
        return value

    def get_bool(self, body: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
        if key not in body:
            return default
        value = body[key]
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self.truth(self.subst(value, where), f"{where}: attribute '{key}'")
        raise LaunchError(f"{where}: attribute '{key}' must be true or false, got {value!r}")

    def get_entities(self, body: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
        if key not in body:
            return []
        value = body[key]
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise LaunchError(f"{where}: attribute '{key}' must be a list of mappings, got {value!r}")
        return value

    @staticmethod
    def truth(value: str, what: str) -> bool:
        """Value of a boolean attribute (scoped, forwarding, shell, respawn): true/1/yes, false/0/no."""
        lowered = value.strip().lower()
        if lowered in _TRUE_WORDS:
            return True
        if lowered in _FALSE_WORDS:
            return False
        raise LaunchError(
            f"{what}: {value!r} is not a boolean (use one of {', '.join(_TRUE_WORDS + _FALSE_WORDS)})"
        )

    @staticmethod
    def condition(value: str, what: str) -> bool:
        """The truth of a substituted ``if:`` / ``unless:`` expression.

        As ``launch.conditions.evaluate_condition_expression``: the text is lower-cased (not stripped) and
        must be one of ``true``, ``1``, ``false``, ``0``; ``yes``, ``on`` and the like are errors.
        """
        lowered = value.lower()
        if lowered in _CONDITION_TRUE:
            return True
        if lowered in _CONDITION_FALSE:
            return False
        words = ", ".join(_CONDITION_TRUE + _CONDITION_FALSE)
        raise LaunchError(
            f"{what}: invalid condition expression {value!r}, expected one of [{words}] (any case; "
            f"ros2 launch accepts nothing else either)"
        )

    def condition_holds(self, body: Mapping[str, Any], where: str) -> bool:
        if_expr = self.get_str(body, "if", where)
        unless_expr = self.get_str(body, "unless", where)
        if if_expr is not None and unless_expr is not None:
            raise LaunchError(f"{where}: 'if' and 'unless' cannot be used together")
        if if_expr is not None:
            return self.condition(self.subst(if_expr, where), f"{where}: 'if' condition")
        if unless_expr is not None:
            return not self.condition(self.subst(unless_expr, where), f"{where}: 'unless' condition")
        return True

    # ---- actions --------------------------------------------------------------------------------

    def run_actions(self, entities: Sequence[tuple[str, Any, str]]) -> None:
        for kind, body, where in entities:
            if kind not in SUPPORTED_ACTIONS:
                location = where.split(": ", 1)[-1]
                raise LaunchError(
                    f"unsupported launch action '{kind}' in {self.path} (at {location}; "
                    f"supported: {', '.join(SUPPORTED_ACTIONS)})"
                )
            if kind == "group" and isinstance(body, list):
                body = {"children": body}
            if not isinstance(body, dict):
                raise LaunchError(f"{where}: the body of '{kind}' must be a mapping, got {body!r}")
            unknown = sorted(set(body) - _ALLOWED_KEYS[kind])
            if unknown:
                raise LaunchError(
                    f"{where}: unexpected key(s) {', '.join(unknown)} in '{kind}' "
                    f"(allowed: {', '.join(sorted(_ALLOWED_KEYS[kind]))})"
                )
            if not self.condition_holds(body, where):
                continue
            handler: Callable[[Mapping[str, Any], str], None] = {
                "arg": self.do_arg,
                "let": self.do_let,
                "node": self.do_node,
                "executable": self.do_executable,
                "group": self.do_group,
                "set_env": self.do_set_env,
                "set_parameter": self.do_set_parameter,
                "push_ros_namespace": self.do_push_ros_namespace,
                "push-ros-namespace": self.do_push_ros_namespace,
            }[kind]
            handler(body, where)

    def do_arg(self, body: Mapping[str, Any], where: str) -> None:
        spec = _argument_spec(body, where, self)
        if spec.name in self.provided:
            value = self.provided[spec.name]
        elif spec.default is not None:
            value = self.subst(spec.default, where)
        else:
            raise LaunchError(
                f"required launch argument '{spec.name}' was not given (pass {spec.name}:=VALUE)"
                + (f": {spec.description}" if spec.description else "")
            )
        if spec.choices is not None and value not in spec.choices:
            raise LaunchError(
                f"invalid value {value!r} for launch argument '{spec.name}' "
                f"(allowed values: {', '.join(spec.choices)})"
            )
        self.scope.variables[spec.name] = value
        self.resolved_args[spec.name] = value

    def do_let(self, body: Mapping[str, Any], where: str) -> None:
        name = self.subst(self.get_str(body, "name", where, required=True) or "", where)
        value = self.subst(self.get_str(body, "value", where, required=True) or "", where)
        self.scope.variables[name] = value

    def do_set_env(self, body: Mapping[str, Any], where: str) -> None:
        name = self.subst(self.get_str(body, "name", where, required=True) or "", where)
        value = self.subst(self.get_str(body, "value", where, required=True) or "", where)
        self.scope.env_overrides[name] = value

    def do_set_parameter(self, body: Mapping[str, Any], where: str) -> None:
        name = self.subst(self.get_str(body, "name", where, required=True) or "", where)
        # launch_ros' SetParameter parses its value as a substitution even without one, so the text is
        # always type-guessed (evaluate_parameter_dict): 'true' -> true, '500' -> 500
        raw = self.get_str(body, "value", where, required=True) or ""
        what = f"{where} parameter '{name}'"
        self.scope.global_params[name] = _typed_value(self.subst(raw, what), what)

    def do_push_ros_namespace(self, body: Mapping[str, Any], where: str) -> None:
        namespace = self.subst(self.get_str(body, "namespace", where, required=True) or "", where)
        self.scope.ros_namespace = _join_namespace(self.scope.ros_namespace, namespace)

    def do_group(self, body: Mapping[str, Any], where: str) -> None:
        scoped = self.get_bool(body, "scoped", where, True)
        forwarding = self.get_bool(body, "forwarding", where, True)
        keep = {}
        for index, entry in enumerate(self.get_entities(body, "keep", where)):
            kwhere = f"{where}.keep[{index}]"
            keep[self.subst(self.get_str(entry, "name", kwhere, required=True) or "", kwhere)] = self.subst(
                self.get_str(entry, "value", kwhere, required=True) or "", kwhere
            )
        children = _child_entities(body.get("children", []), f"{where}.children", self.path)
        saved = self.scope.copy()
        if scoped and not forwarding:
            self.scope = _Scope({}, {}, {}, None)
        self.scope.variables.update(keep)
        try:
            self.run_actions(children)
        finally:
            if scoped:
                self.scope = saved

    def process_common(
        self, body: Mapping[str, Any], where: str
    ) -> tuple[str, bool, dict[str, str], str | None, list[str], bool]:
        output = self.subst(self.get_str(body, "output", where) or "screen", where)
        if output not in OUTPUT_MODES:
            raise LaunchError(f"{where}: output must be one of {', '.join(OUTPUT_MODES)}, got {output!r}")
        on_exit = self.get_str(body, "on_exit", where)
        if on_exit is not None and on_exit != "shutdown":
            raise LaunchError(f"{where}: on_exit supports only 'shutdown', got {on_exit!r}")
        env = dict(self.scope.env_overrides)
        for index, entry in enumerate(self.get_entities(body, "env", where)):
            ewhere = f"{where}.env[{index}]"
            unknown = sorted(set(entry) - {"name", "value"})
            if unknown:
                raise LaunchError(f"{ewhere}: unexpected key(s) {', '.join(unknown)} (allowed: name, value)")
            env[self.subst(self.get_str(entry, "name", ewhere, required=True) or "", ewhere)] = self.subst(
                self.get_str(entry, "value", ewhere, required=True) or "", ewhere
            )
        cwd_raw = self.get_str(body, "cwd", where)
        cwd = self.subst(cwd_raw, where) if cwd_raw is not None else None
        prefix_raw = self.get_str(body, "launch-prefix", where)
        prefix = self.split_cmdline(prefix_raw, where) if prefix_raw else []
        respawn = self.get_bool(body, "respawn", where, False)
        return output, on_exit == "shutdown", env, cwd, prefix, respawn

    def unique_label(self, label: str) -> str:
        count = self.label_counts.get(label, 0) + 1
        self.label_counts[label] = count
        return label if count == 1 else f"{label}-{count}"

    def do_executable(self, body: Mapping[str, Any], where: str) -> None:
        cmd_raw = self.get_str(body, "cmd", where, required=True) or ""
        output, required, env, cwd, prefix, respawn = self.process_common(body, where)
        shell = self.get_bool(body, "shell", where, False)
        cmd = self.split_cmdline(cmd_raw, where)
        if not cmd:
            raise LaunchError(f"{where}: empty cmd")
        if not shell:
            _check_command_exists(cmd[0], {**self.environment(), **env}, where)
        name_raw = self.get_str(body, "name", where)
        label = self.subst(name_raw, where) if name_raw is not None else os.path.basename(cmd[0])
        self.processes.append(
            ProcessSpec(
                name=self.unique_label(label),
                cmd=[*prefix, *cmd],
                env=env,
                output=output,
                required=required,
                kind="executable",
                cwd=cwd,
                shell=shell,
                respawn=respawn,
            )
        )

    def do_node(self, body: Mapping[str, Any], where: str) -> None:
        pkg_raw = self.get_str(body, "pkg", where)
        package = self.subst(pkg_raw, where) if pkg_raw is not None else None
        executable = self.subst(self.get_str(body, "exec", where, required=True) or "", where)
        where = f"{where} ({package or ''}/{executable})"
        output, required, env, cwd, prefix, respawn = self.process_common(body, where)
        name_raw = self.get_str(body, "name", where)
        node_name = self.subst(name_raw, where) if name_raw is not None else None
        ns_raw = self.get_str(body, "namespace", where)
        namespace = self.subst(ns_raw, where) if ns_raw is not None else None
        if namespace is None:
            namespace = self.scope.ros_namespace
        elif not namespace.startswith("/"):
            namespace = _join_namespace(self.scope.ros_namespace, namespace)
        args_raw = self.get_str(body, "args", where)
        args = self.split_cmdline(args_raw, where) if args_raw else []
        ros_args_raw = self.get_str(body, "ros_args", where)
        ros_args = self.split_cmdline(ros_args_raw, where) if ros_args_raw else []
        remaps = []
        for index, entry in enumerate(self.get_entities(body, "remap", where)):
            rwhere = f"{where}.remap[{index}]"
            unknown = sorted(set(entry) - {"from", "to"})
            if unknown:
                raise LaunchError(f"{rwhere}: unexpected key(s) {', '.join(unknown)} (allowed: from, to)")
            source = self.subst(self.get_str(entry, "from", rwhere, required=True) or "", rwhere)
            target = self.subst(self.get_str(entry, "to", rwhere, required=True) or "", rwhere)
            remaps.append((source, target))
        params = dict(self.scope.global_params)
        param_files: list[str] = []
        for index, entry in enumerate(self.get_entities(body, "param", where)):
            self.node_param(entry, f"{where}.param[{index}]", params, param_files)

        full_name = None
        if node_name is not None and namespace is not None:
            full_name = ("" if namespace == "/" else namespace) + "/" + node_name
        exec_name_raw = self.get_str(body, "exec_name", where)
        label = self.unique_label(
            self.subst(exec_name_raw, where) if exec_name_raw is not None else node_name or executable
        )

        cmd = [*prefix, *_resolve_node_executable(package, executable, where), *args, "--ros-args"]
        if node_name is not None:
            cmd += ["-r", f"__node:={node_name}"]
        if namespace is not None:
            cmd += ["-r", f"__ns:={namespace}"]
        for source, target in remaps:
            cmd += ["-r", f"{source}:={target}"]
        for path in param_files:
            cmd += ["--params-file", path]
        if params:
            cmd += ["--params-file", self.write_params_file(label, full_name or "/**", params)]
        cmd += ros_args
        self.processes.append(
            ProcessSpec(
                name=label,
                cmd=cmd,
                env=env,
                output=output,
                required=required,
                params=params,
                param_files=param_files,
                kind="node",
                package=package,
                executable=executable,
                node_name=full_name,
                cwd=cwd,
                respawn=respawn,
            )
        )

    def node_param(
        self, entry: Mapping[str, Any], where: str, params: dict[str, Any], param_files: list[str]
    ) -> None:
        if "from" in entry:
            unknown = sorted(set(entry) - {"from"})
            if unknown:
                raise LaunchError(f"{where}: 'from' cannot be combined with {', '.join(unknown)}")
            path = Path(self.subst(self.get_str(entry, "from", where) or "", where))
            if not path.is_absolute():
                path = Path.cwd() / path
            if not path.is_file():
                raise LaunchError(f"{where}: parameter file not found: {path}")
            param_files.append(str(path))
            return
        params.update(self.inline_param(entry, where))

    def inline_param(self, entry: Mapping[str, Any], where: str) -> dict[str, Any]:
        unknown = sorted(set(entry) - {"name", "value", "param"})
        if unknown:
            raise LaunchError(
                f"{where}: unexpected key(s) {', '.join(unknown)} (allowed: name, value, param, from)"
            )
        name = self.subst(self.get_str(entry, "name", where, required=True) or "", where)
        if ("value" in entry) == ("param" in entry):
            raise LaunchError(f"{where}: parameter '{name}' needs exactly one of 'value' or nested 'param'")
        if "value" in entry:
            return {name: self.param_value(entry["value"], f"{where} parameter '{name}'")}
        nested: dict[str, Any] = {}
        for index, child in enumerate(self.get_entities(entry, "param", where)):
            nested.update(self.inline_param(child, f"{where}.param[{index}]"))
        return {name: nested}

    def param_value(self, raw: Any, where: str) -> Any:
        """Turn the ``value`` of a node's ``param`` entry into a ROS parameter value, as ``launch_ros`` does.

        - a YAML bool, int or float stays as it is;
        - a string without a substitution is a string, as written (``'500'`` gives ``"500"``, ``'[1, 2]'``
          gives ``"[1, 2]"``): ``parse_if_substitutions`` keeps literal text a ``str``;
        - a string with a substitution is substituted and its result type-guessed with YAML rules
          (:func:`_typed_value`: ``500`` int, ``500.0`` float, ``true`` bool, ``[1, 2]`` int array; a null,
          an empty result or a mapping is an error);
        - a YAML list applies these rules to each item; the items must all end up with the same type
          (``[1, 2.5]`` is refused by ``ros2 launch`` as a non-uniform list) and the list must not be empty.
        """
        if isinstance(raw, bool | int | float):
            return raw
        if isinstance(raw, str):
            return self._param_text(raw, where, in_list=False)
        if isinstance(raw, list):
            if not raw:
                raise LaunchError(f"{where}: empty lists are not valid parameter values (type unknown)")
            items = []
            for item in raw:
                if isinstance(item, str):
                    items.append(self._param_text(item, where, in_list=True))
                elif isinstance(item, bool | int | float):
                    items.append(item)
                else:
                    raise LaunchError(f"{where}: list items must be scalars, got {item!r}")
            kinds = {type(item).__name__ for item in items}
            if len(kinds) > 1:
                raise LaunchError(
                    f"{where}: list items must all have the same type, got {', '.join(sorted(kinds))} "
                    f"in {items!r} (ROS 2 parameter arrays are homogeneous; e.g. write 1.0, not 1)"
                )
            return items
        raise LaunchError(
            f"{where}: unsupported parameter value {raw!r} (use nested 'param' entries for mappings)"
        )

    def _param_text(self, raw: str, where: str, *, in_list: bool) -> Any:
        """A string parameter value: literal text stays a string; a substituted one is type-guessed."""
        nodes = _parse_template(raw, where)
        text = self.eval_nodes(nodes, where)
        if not any(isinstance(node, _Subst) for node in nodes):
            return text
        return _typed_value(text, where, in_list=in_list)

    def write_params_file(self, label: str, key: str, params: dict[str, Any]) -> str:
        if self.temp_dir is None:
            self.temp_dir = tempfile.mkdtemp(prefix="humanoid_launch_")
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", label)
        path = Path(self.temp_dir) / f"{safe}_params.yaml"
        with path.open("w", encoding="utf-8") as handle:
            yaml.safe_dump(
                {key: {"ros__parameters": params}}, handle, default_flow_style=False, sort_keys=False
            )
        return str(path)


def _typed_value(text: str, where: str, *, in_list: bool = False) -> Any:
    """Type-guess a substituted parameter value with YAML rules, as ``launch_ros`` does.

    ``"500"`` -> 500, ``"500.0"`` -> 500.0, ``"true"`` -> True, ``"g1"`` -> ``"g1"``, ``"[1, 2]"`` -> [1, 2]
    (not inside a list). Errors, as in ``ros2 launch``: text that is not YAML, YAML null (``null``, ``~``,
    an empty or blank result), a mapping, a date, an empty or non-uniform list. To keep such a result as a
    string, quote it in the launch file: ``value: "'$(var x)'"``.
    """
    hint = f"quote it to keep a string, e.g. value: \"'{text}'\""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LaunchError(f"{where}: substituted value {text!r} is not valid YAML ({first}); {hint}") from exc
    if value is None:
        raise LaunchError(
            f"{where}: substituted value {text!r} is YAML null, which is not a parameter value "
            f"(ros2 launch refuses it too); {hint}"
        )
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list) and not in_list:
        if not value or not all(type(item) in (bool, int, float, str) for item in value):
            raise LaunchError(
                f"{where}: substituted value {text!r} is not a valid parameter array "
                "(a non-empty list of bools, ints, floats or strings)"
            )
        if len({type(item) for item in value}) > 1:
            raise LaunchError(
                f"{where}: substituted array {text!r} mixes types (ROS 2 parameter arrays are homogeneous)"
            )
        return value
    raise LaunchError(
        f"{where}: substituted value {text!r} is a YAML {type(value).__name__}, not a parameter value "
        f"(a bool, int, float, string{'' if in_list else ' or a list of one of them'}); {hint}"
    )


def _join_namespace(base: str | None, namespace: str) -> str:
    if namespace.startswith("/") or not base:
        result = namespace if namespace.startswith("/") else "/" + namespace
    else:
        result = base.rstrip("/") + "/" + namespace
    result = "/" + result.strip("/")
    return result


def _check_command_exists(program: str, env: Mapping[str, str], where: str) -> None:
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise LaunchError(f"{where}: command '{program}' does not exist or is not executable")
        return
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise LaunchError(f"{where}: command '{program}' not found on PATH")


def _child_entities(raw: Any, where: str, path: Path) -> list[tuple[str, Any, str]]:
    if not isinstance(raw, list):
        raise LaunchError(f"{path}: {where} must be a list of actions, got {type(raw).__name__}")
    entities = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or len(item) != 1:
            raise LaunchError(
                f"{path}: {where}[{index}] must be a mapping with exactly one key (the action type), "
                f"got {item!r}"
            )
        ((kind, body),) = item.items()
        entities.append((str(kind), body, f"{path.name}: {where}[{index}].{kind}"))
    return entities


def _argument_spec(body: Mapping[str, Any], where: str, interp: _Interpreter) -> ArgumentSpec:
    name = interp.get_str(body, "name", where, required=True) or ""
    default = interp.get_str(body, "default", where)
    description = interp.get_str(body, "description", where) or ""
    choices = None
    if "choice" in body:
        choices = []
        for index, entry in enumerate(interp.get_entities(body, "choice", where)):
            choices.append(interp.get_str(entry, "value", f"{where}.choice[{index}]", required=True) or "")
        if not choices:
            raise LaunchError(f"{where}: 'choice' of argument '{name}' is empty")
        if default is not None and "$(" not in default and default not in choices:
            raise LaunchError(
                f"{where}: default {default!r} of argument '{name}' is not one of its choices "
                f"({', '.join(choices)})"
            )
    return ArgumentSpec(name=name, default=default, description=description, choices=choices)


def _load_top_level(path: Path) -> list[tuple[str, Any, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LaunchError(f"cannot read launch file {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LaunchError(f"malformed YAML in launch file {path}: {exc}") from exc
    if not isinstance(data, dict) or "launch" not in data:
        raise LaunchError(f"{path}: a YAML launch file must be a mapping with a top-level 'launch:' list")
    if len(data) != 1:
        extra = sorted(str(key) for key in data if key != "launch")
        raise LaunchError(
            f"{path}: unexpected top-level key(s) {', '.join(extra)} (only 'launch' is allowed)"
        )
    return _child_entities(data["launch"] or [], "launch", path)


def _walk_arguments(entities: Sequence[tuple[str, Any, str]], interp: _Interpreter) -> Iterator[ArgumentSpec]:
    for kind, body, where in entities:
        if kind == "arg" and isinstance(body, dict):
            yield _argument_spec(body, where, interp)
        elif kind == "group":
            children = body.get("children", []) if isinstance(body, dict) else body
            yield from _walk_arguments(_child_entities(children, f"{where}.children", interp.path), interp)


def declared_arguments(path: str | Path) -> list[ArgumentSpec]:
    """All ``arg`` declarations of a launch file (including those inside groups), in file order."""
    path = Path(path)
    interp = _Interpreter(path, {})
    seen: dict[str, ArgumentSpec] = {}
    for spec in _walk_arguments(_load_top_level(path), interp):
        seen.setdefault(spec.name, spec)
    return list(seen.values())


def load_launch_description(path: str | Path, arguments: Mapping[str, str] | None = None) -> LaunchPlan:
    """Interpret a YAML launch file with the given launch arguments; start nothing.

    Raises :class:`LaunchError` for every user error (undeclared argument, bad choice, missing required
    argument, malformed file, unsupported action or substitution, executable not found, ...).  Inline node
    parameters are written to a temporary directory (``plan.temp_dir``); :meth:`LaunchPlan.cleanup`
    removes it (``run`` does so when it finishes).
    """
    path = Path(path).resolve()
    arguments = dict(arguments or {})
    declared = declared_arguments(path)
    names = [spec.name for spec in declared]
    for name in arguments:
        if name not in names:
            raise LaunchError(
                f"unknown launch argument '{name}' for {path.name} "
                f"(declared arguments: {', '.join(names) or 'none'})"
            )
    interp = _Interpreter(path, arguments)
    try:
        interp.run_actions(_load_top_level(path))
    except BaseException:
        if interp.temp_dir is not None:
            shutil.rmtree(interp.temp_dir, ignore_errors=True)
        raise
    return LaunchPlan(
        path=path,
        arguments=interp.resolved_args,
        declared=declared,
        processes=interp.processes,
        temp_dir=interp.temp_dir,
    )


# --------------------------------------------------------------------------------------------------
# process supervision
# --------------------------------------------------------------------------------------------------


class _Output:
    """Serialises writes of the runner and of the reader threads to the runner's stdout."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def say(self, message: str) -> None:
        self.line(f"[{RUNNER}] {message}")

    def line(self, text: str) -> None:
        with self.lock:
            try:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
            except (OSError, ValueError):
                pass


class _Child:
    """A started process, its output relay thread and its exit status."""

    def __init__(self, spec: ProcessSpec) -> None:
        self.spec = spec
        self.popen: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.reader: threading.Thread | None = None
        self.log: IO[bytes] | None = None
        self.log_path: Path | None = None
        self.reported = False

    def start(self, out: _Output, log_dir: Callable[[], Path]) -> None:
        spec = self.spec
        env = dict(os.environ)
        env.update(spec.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        command: str | list[str] = " ".join(spec.cmd) if spec.shell else spec.cmd
        try:
            self.popen = subprocess.Popen(
                command,
                shell=spec.shell,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            out.say(f"failed to start process {spec.name}: {exc}")
            self.returncode = 127
            return
        if spec.output in ("log", "both"):
            safe_name = re.sub(r"[^A-Za-z0-9_.-]", "_", spec.name)
            self.log_path = log_dir() / f"{safe_name}-{self.popen.pid}.log"
            self.log = self.log_path.open("wb")
        where = f", output in {self.log_path}" if self.log_path else ""
        out.say(f"process started: {spec.name} [pid {self.popen.pid}]{where}")
        self.reader = threading.Thread(
            target=self._relay, args=(out,), name=f"relay-{spec.name}", daemon=True
        )
        self.reader.start()

    def _relay(self, out: _Output) -> None:
        assert self.popen is not None and self.popen.stdout is not None
        to_screen = self.spec.output in ("screen", "both")
        for raw in iter(self.popen.stdout.readline, b""):
            if self.log is not None:
                self.log.write(raw)
                self.log.flush()
            if to_screen:
                out.line(f"[{self.spec.name}] {raw.decode(errors='replace').rstrip(chr(10)).rstrip(chr(13))}")
        self.popen.stdout.close()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, signum: int) -> None:
        if not self.alive():
            return
        assert self.popen is not None
        try:
            os.killpg(self.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signum)

    def finish(self) -> None:
        if self.reader is not None:
            self.reader.join(timeout=2.0)
        if self.log is not None:
            self.log.close()
            self.log = None


def _describe_exit(code: int) -> str:
    if code == 0:
        return "finished cleanly"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def run(plan: LaunchPlan, sigterm_timeout: float = 5.0) -> int:
    """Start every process of ``plan`` and supervise them until all have exited.

    SIGINT/SIGTERM to the runner are forwarded as SIGINT to every child; children still running after
    ``sigterm_timeout`` seconds get SIGTERM and, 2 s later, SIGKILL.  A further signal escalates at
    once.  When a process with ``on_exit: shutdown`` exits, all others are stopped the same way.
    Returns 0 after a clean shutdown, or the (non-zero) exit code of a required process that exited by
    itself (1 if it was killed by a signal).  Removes the plan's generated parameter files at the end.
    """
    out = _Output()
    children = [_Child(spec) for spec in plan.processes]
    pending_signals: list[int] = []
    log_dirs: list[Path] = []

    def log_dir() -> Path:
        if not log_dirs:
            configured = os.environ.get("ROS_LOG_DIR")
            if configured:
                Path(configured).mkdir(parents=True, exist_ok=True)
                log_dirs.append(Path(configured))
            else:
                log_dirs.append(Path(tempfile.mkdtemp(prefix="humanoid_launch_logs_")))
        return log_dirs[0]

    def on_signal(signum: int, _frame: Any) -> None:
        pending_signals.append(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, on_signal)

    phase = "running"  # -> "sigint" -> "sigterm" -> "sigkill"
    phase_since = 0.0
    exit_code = 0

    def escalate(reason: str | None = None) -> None:
        nonlocal phase, phase_since
        phase_since = time.monotonic()
        if phase == "running":
            phase = "sigint"
            if reason:
                out.say(reason)
            for child in children:
                child.signal(signal.SIGINT)
        elif phase == "sigint":
            phase = "sigterm"
            names = ", ".join(c.spec.name for c in children if c.alive())
            out.say(f"escalating to SIGTERM: {names}")
            for child in children:
                child.signal(signal.SIGTERM)
        else:
            phase = "sigkill"
            names = ", ".join(c.spec.name for c in children if c.alive())
            out.say(f"escalating to SIGKILL: {names}")
            for child in children:
                child.signal(signal.SIGKILL)

    try:
        if not children:
            out.say(f"no processes to start in {plan.path}")
        for child in children:
            child.start(out, log_dir)
        while True:
            while pending_signals:
                signum = pending_signals.pop(0)
                name = signal.Signals(signum).name
                if phase == "running":
                    escalate(f"received {name}, shutting down")
                elif phase != "sigkill":
                    escalate()
            for child in children:
                if child.reported:
                    continue
                if child.popen is not None:
                    if child.popen.poll() is None:
                        continue
                    child.returncode = child.popen.returncode
                    if child.reader is not None:
                        child.reader.join(timeout=0.5)
                    out.say(
                        f"process {child.spec.name} [pid {child.popen.pid}] "
                        f"{_describe_exit(child.returncode)}"
                    )
                child.reported = True
                code = child.returncode
                assert code is not None
                if child.spec.required and phase == "running":
                    if code != 0:
                        exit_code = code if code > 0 else 1
                    escalate(f"required process {child.spec.name} exited with code {code}; shutting down")
            if all(child.returncode is not None for child in children):
                break
            now = time.monotonic()
            limit = sigterm_timeout if phase == "sigint" else _SIGKILL_AFTER_SIGTERM_S
            if phase in ("sigint", "sigterm") and now - phase_since >= limit:
                escalate()
            time.sleep(_POLL_S)
    finally:
        for child in children:
            if child.alive():
                child.signal(signal.SIGKILL)
                assert child.popen is not None
                child.popen.wait()
            child.finish()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        plan.cleanup()
    if log_dirs:
        out.say(f"logs are in {log_dirs[0]}")
    return exit_code


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------


def _format_arguments(specs: Sequence[ArgumentSpec]) -> str:
    if not specs:
        return "No arguments."
    lines = ["Arguments (pass arguments as '<name>:=<value>'):", ""]
    for spec in specs:
        lines.append(f"    '{spec.name}':")
        lines.append(f"        {spec.description or 'no description given'}")
        if spec.choices is not None:
            lines.append(f"        (choices: {', '.join(repr(c) for c in spec.choices)})")
        lines.append(
            f"        (default: {spec.default!r})" if spec.default is not None else "        (required)"
        )
        lines.append("")
    return "\n".join(lines).rstrip()


def _split_targets(targets: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    positional: list[str] = []
    launch_args: dict[str, str] = {}
    for item in targets:
        match = _LAUNCH_ARG_RE.match(item)
        if match:
            launch_args[match.group(1)] = match.group(2)
        elif launch_args:
            raise LaunchError(f"unexpected {item!r} after launch arguments (expected name:=value)")
        else:
            positional.append(item)
    return positional, launch_args


def _launch_file_from(positional: Sequence[str]) -> Path:
    if len(positional) == 1:
        path = Path(positional[0])
        if path.is_file():
            return path
        raise LaunchError(
            f"launch file not found: {positional[0]} (to use a package, pass PACKAGE LAUNCH_FILE)"
        )
    if len(positional) == 2:
        return find_launch_file(positional[0], positional[1])
    raise LaunchError(
        "expected FILE or PACKAGE LAUNCH_FILE, followed by name:=value arguments"
        + (f" (got {' '.join(positional)})" if positional else "")
    )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (``humanoid-launch``); returns the exit code.

    0 for ``--print`` / ``--show-args`` and a clean run; 1 (:data:`EXIT_LAUNCH_ERROR`) for a launch-file or
    launch-argument error, as ``ros2 launch``; 2 for a malformed command line (argparse, as the ``ros2``
    command); otherwise what :func:`run` returns.
    """
    parser = argparse.ArgumentParser(
        prog=RUNNER,
        usage=f"{RUNNER} [-h] [-s] [-p] [--sigterm-timeout SECONDS] "
        "FILE_OR_PACKAGE [LAUNCH_FILE] [name:=value ...]",
        description="Run a ROS 2 YAML launch file without launch/launch_ros (subset of ros2 launch).",
        epilog="Example: humanoid-launch humanoid_stack sim.launch.yaml clock:=realtime",
    )
    parser.add_argument(
        "-s", "--show-args", action="store_true", help="print the declared arguments and exit"
    )
    parser.add_argument(
        "-p",
        "--print",
        dest="print_only",
        action="store_true",
        help="print the resolved process command lines and exit without starting anything",
    )
    parser.add_argument(
        "--sigterm-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="seconds to wait after SIGINT before sending SIGTERM (default: 5)",
    )
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="ARG",
        help="a launch file path, or PACKAGE LAUNCH_FILE (found under the package's share/launch/), "
        "followed by launch arguments as name:=value",
    )
    options = parser.parse_intermixed_args(argv)
    try:
        positional, launch_args = _split_targets(options.targets)
        path = _launch_file_from(positional)
        if options.show_args:
            print(_format_arguments(declared_arguments(path)), flush=True)
            return 0
        plan = load_launch_description(path, launch_args)
    except LaunchError as exc:
        print(f"{RUNNER}: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_LAUNCH_ERROR
    except KeyboardInterrupt:
        return 130
    if options.print_only:
        try:
            print(plan.describe(), flush=True)
        finally:
            plan.cleanup()
        return 0
    for proc in plan.processes:
        if proc.respawn:
            print(f"[{RUNNER}] warning: respawn of {proc.name} is not supported here; ignored", flush=True)
    return run(plan, sigterm_timeout=options.sigterm_timeout)


if __name__ == "__main__":
    sys.exit(main())
