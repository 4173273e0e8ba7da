"""The launch command lines shown in the docs work: each is run with ``--print`` (nothing starts).

Examples come from the ``bash`` code blocks of ``docs/launch.md`` and ``README.md`` and from the header
comment of ``launch/sim.launch.yaml``. ``humanoid-launch`` and ``python -m humanoid_bringup.launcher``
lines run through :func:`main`. ``ros2 launch`` is not installed here: for its lines every ``name:=value``
must be a declared argument with an allowed value (``ros2 launch`` silently ignores an undeclared one, so
such an example would do nothing there).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from humanoid_bringup.launcher.cli import _LAUNCH_ARG_RE, main
from humanoid_bringup.launcher.interpreter import declared_arguments
from humanoid_bringup.launcher.packages import find_launch_file

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = ("docs/launch.md", "README.md")
LAUNCH_FILES = ("launch/sim.launch.yaml",)
RUNNERS = (("humanoid-launch",), ("python", "-m", "humanoid_bringup.launcher"), ("ros2", "launch"))


def _bash_lines(path: Path) -> list[str]:
    blocks = re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", path.read_text(encoding="utf-8"), re.M | re.S)
    return [line for block in blocks for line in block.splitlines()]


def _header_lines(path: Path) -> list[str]:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return lines


def example_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every launch command line in the docs, comments stripped."""
    found = []
    sources = [(doc, _bash_lines(REPO_ROOT / doc)) for doc in DOCS]
    sources += [(launch, _header_lines(REPO_ROOT / launch)) for launch in LAUNCH_FILES]
    for where, lines in sources:
        for line in lines:
            # the header comments put a note in parentheses after the command
            argv = shlex.split(re.sub(r"\s\(.*\)\s*$", "", line), comments=True)
            if any(tuple(argv[: len(runner)]) == runner for runner in RUNNERS):
                found.append((f"{where}: {shlex.join(argv)}", argv))
    return found


EXAMPLES = example_commands()


def test_the_docs_have_launch_examples() -> None:
    assert len(EXAMPLES) >= 7, [where for where, _ in EXAMPLES]
    assert any(argv[:2] == ["ros2", "launch"] for _, argv in EXAMPLES)


@pytest.mark.parametrize(("where", "argv"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_launch_example_works(
    where: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO_ROOT)  # examples name launch/sim.launch.yaml relative to the repository
    if argv[:2] == ["ros2", "launch"]:
        package, launch_file, *rest = argv[2:]
        specs = {spec.name: spec for spec in declared_arguments(find_launch_file(package, launch_file))}
        for item in rest:
            match = _LAUNCH_ARG_RE.match(item)
            assert match, f"{where}: {item!r} is not name:=value"
            name, value = match.groups()
            assert name in specs, (
                f"{where}: '{name}' is not a declared argument (declared: {', '.join(specs)})"
            )
            choices = specs[name].choices
            assert choices is None or value in choices, f"{where}: {name}:={value} is not one of {choices}"
        return
    args = argv[1:] if argv[0] == "humanoid-launch" else argv[3:]
    if "--show-args" not in args and "-s" not in args and "--print" not in args:
        args = ["--print", *args]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, f"{where}: exit code {code}\n{captured.err}"
    assert captured.out.strip(), where
