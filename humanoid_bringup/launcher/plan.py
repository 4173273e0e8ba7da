"""What a launch file resolves to: :class:`LaunchPlan` (processes, arguments), and :class:`LaunchError`."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["RUNNER", "ArgumentSpec", "LaunchError", "LaunchPlan", "ProcessSpec"]

#: The launcher's name in its messages.
RUNNER = "humanoid-launch"


class LaunchError(Exception):
    """A user error: bad command line, bad launch file, unresolvable substitution or executable."""


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
