"""The scorecard's trial store: one JSON file per finished trial, named by the trial's key, so that an
interrupted scorecard resumes where it stopped.

Layout under the output folder: ``trials/<spec.key()>.json``, each holding the trial's record as
:func:`humanoid_bringup.scorecard.runner.execute_trial` returns it (``outcome``, ``figures``, ``spec``,
``wall_s``; ``traceback`` for an ``error``). A file is written to a temporary name and renamed, so a killed
run leaves either the whole record or none.

A stored record is reused only when its ``spec`` equals the planned trial's (a key collision or a hand-edited
file is run again) and its outcome is not ``error`` (an error may come from a bug fixed since: resuming
retries it).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

TRIALS_DIR = "trials"


def spec_dict(spec: Any) -> dict[str, Any]:
    """The trial spec as a plain dict (``dataclasses.asdict`` of a :class:`TrialSpec`)."""
    if is_dataclass(spec) and not isinstance(spec, type):
        return asdict(spec)
    return dict(spec)


class TrialStore:
    """Finished trials as ``<out>/trials/<key>.json``.

    Args:
        out_dir: the scorecard's output folder (created on the first save).
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir) / TRIALS_DIR

    def path(self, key: str) -> Path:
        """The record file of the trial ``key``."""
        if not key or "/" in key or key.startswith("."):
            raise ValueError(f"trial key {key!r} is not a file name")
        return self.dir / f"{key}.json"

    def load(self, spec: Any) -> dict[str, Any] | None:
        """The stored record of ``spec``, or None if there is none, it is unreadable, it belongs to another
        spec or it is an ``error`` (then it is run again)."""
        path = self.path(spec.key())
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("spec") != spec_dict(spec):
            return None
        if record.get("outcome") == "error":
            return None
        return record

    def save(self, spec: Any, record: dict[str, Any]) -> Path:
        """Write ``record`` under ``spec``'s key atomically (temporary file + rename); returns the path."""
        path = self.path(spec.key())
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(record, f, indent=1, sort_keys=True, allow_nan=False)
                f.write("\n")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path
