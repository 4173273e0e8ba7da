"""The ``humanoid-launch`` command line: arguments, ``--print``, ``--show-args``, then :func:`run`."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from humanoid_bringup.launcher.interpreter import declared_arguments, load_launch_description
from humanoid_bringup.launcher.packages import find_launch_file
from humanoid_bringup.launcher.plan import RUNNER, ArgumentSpec, LaunchError
from humanoid_bringup.launcher.supervisor import run

__all__ = ["main"]

#: Exit code of a usage, launch-file or launch-argument error (``LaunchError``), as ``ros2 launch``.
EXIT_LAUNCH_ERROR = 1
_LAUNCH_ARG_RE = re.compile(r"^([^\s:=]+):=(.*)$", re.DOTALL)


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
