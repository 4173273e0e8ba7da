"""Substitutions: the ``$(name arg ...)`` template parser and their evaluation in a launch scope."""

from __future__ import annotations

import math
import os
import random
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from humanoid_bringup.launcher.packages import find_package_prefix, find_package_share
from humanoid_bringup.launcher.plan import RUNNER, LaunchError

__all__ = ["SUPPORTED_SUBSTITUTIONS", "Scope", "Subst", "Substitutions", "Text", "parse_template"]

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

_IDENTIFIER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

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


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Subst:
    name: str
    args: tuple[tuple[_Node, ...], ...]


_Node = Text | Subst


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
                    nodes.append(Text("".join(buf)))
                    buf = []
                nodes.append(self._substitution())
            elif char == "\\" and self.pos + 1 < len(text):
                buf.append(text[self.pos + 1])
                self.pos += 2
            else:
                buf.append(char)
                self.pos += 1
        if buf:
            nodes.append(Text("".join(buf)))
        return nodes

    def _substitution(self) -> Subst:
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
                return Subst(name, tuple(args))
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
                nodes.append(Text("".join(buf)))
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
                    nodes.append(Text(""))
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


def parse_template(text: str, where: str) -> list[_Node]:
    return _TemplateParser(text, where).parse()


@dataclass
class Scope:
    """What ``group`` scoping saves and restores (launch configurations, environment, ...)."""

    variables: dict[str, str]
    env_overrides: dict[str, str]
    global_params: dict[str, Any]
    ros_namespace: str | None

    def copy(self) -> Scope:
        return Scope(
            dict(self.variables), dict(self.env_overrides), dict(self.global_params), self.ros_namespace
        )


class Substitutions:
    """Evaluates substitutions in the current launch scope (variables, environment) of one launch file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.scope = Scope({}, {}, {}, None)
        self.anon_names: dict[str, str] = {}

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.scope.env_overrides)
        return env

    def subst(self, value: str, where: str) -> str:
        return self.eval_nodes(parse_template(value, where), where)

    def eval_nodes(self, nodes: Sequence[_Node], where: str) -> str:
        return "".join(node.text if isinstance(node, Text) else self.perform(node, where) for node in nodes)

    def perform(self, sub: Subst, where: str) -> str:
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
        nodes = parse_template(value, where)
        chunks = [
            (node.text, False) if isinstance(node, Text) else (self.perform(node, where), True)
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
