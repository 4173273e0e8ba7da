"""Process supervision: start the processes of a :class:`LaunchPlan`, relay their output, stop them."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from humanoid_bringup.launcher.plan import RUNNER, LaunchPlan, ProcessSpec

__all__ = ["run"]

_SIGKILL_AFTER_SIGTERM_S = 2.0
_POLL_S = 0.02


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
