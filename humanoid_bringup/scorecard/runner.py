"""The scorecard's plan and its execution: (controllers x families x levels x seeds) -> trials, each trial a
Ray task (or, with ``workers=0``, a call in this process), each finished trial stored under its key.

Planning (:func:`plan_trials`) validates everything before any trial runs: every family is loaded (its file
checked: unknown family, out-of-range value), every ``family:level`` key looked up, every controller checked
(unknown name, missing policy file); each is a ``ValueError`` naming it. Standing-only controllers
(``wbc_stand``; the catalog's ``can_run``) are planned only on the families that a standing controller can
take (``Family.standing_only``).

Execution (:func:`run_trials`): by default Ray starts embedded in this process's machine, bound to loopback
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: an embedded instance is nobody else's to reach; usage statistics
off), with ``workers`` CPUs (default: every core); ``address`` (``auto`` or ``HOST:PORT``) joins an existing
cluster instead (its token authentication as configured for that cluster, e.g. ``RAY_AUTH_MODE=token``);
``workers=0`` runs the trials one after the other in this process without Ray. ``workers`` caps the trials in
flight. A trial that raises is recorded with outcome ``error`` and its traceback; the scorecard goes on.
"""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from humanoid_bringup.scorecard.store import TrialStore, spec_dict

MODEL_BASED_CONTROLLERS: tuple[str, ...] = ("mpc_walk",)  # beside the robot's learned policies by default
DEFAULT_STANDING_CONTROLLERS: tuple[str, ...] = ("wbc_stand",)  # added on standing families by default
DEFAULT_SEEDS = 3
OUTCOMES: tuple[str, ...] = ("survived", "fell", "safe_stop")
ERROR = "error"

TrialFn = Callable[[Any], dict]


def default_controllers(robot: str) -> list[str]:
    """The scorecard's default columns for ``robot``: the learned policies of its configuration
    (``policies``: ``policy:holosoma/g1_ppo``, ``policy:holosoma/g1_fastsac`` for the G1) and ``mpc_walk``."""
    from humanoid_control.model.robot_config import load_robot_config

    return [f"policy:{p}" for p in load_robot_config(robot).policies] + list(MODEL_BASED_CONTROLLERS)


class Catalog(Protocol):
    """What planning needs from the scenario side (``humanoid_bringup.scorecard.scenarios`` + ``trial``)."""

    def family_names(self) -> list[str]: ...
    def load_family(self, name: str, robot: str = "g1") -> Any: ...
    def validate_controller(self, name: str, robot: str = "g1") -> None: ...
    def can_run(self, controller: str, family: Any) -> bool: ...
    def make_spec(self, controller: str, scenario: str, level: str, seed: int, robot: str) -> Any: ...


class _DefaultCatalog:
    """The real scenario files and trial spec."""

    def family_names(self) -> list[str]:
        from humanoid_bringup.scorecard import scenarios

        return list(scenarios.family_names())

    def load_family(self, name: str, robot: str = "g1") -> Any:
        from humanoid_bringup.scorecard import scenarios

        return scenarios.load_family(name, robot)

    def validate_controller(self, name: str, robot: str = "g1") -> None:
        from humanoid_bringup.scorecard import scenarios

        scenarios.validate_controller(name, robot)

    def can_run(self, controller: str, family: Any) -> bool:
        from humanoid_bringup.scorecard import scenarios

        return bool(scenarios.can_run(controller, family))

    def make_spec(self, controller: str, scenario: str, level: str, seed: int, robot: str) -> Any:
        from humanoid_bringup.scorecard.trial import TrialSpec

        return TrialSpec(controller=controller, scenario=scenario, level=level, seed=seed, robot=robot)


def default_catalog() -> Catalog:
    """The catalog of the real scenario files (``config/scenarios``) and :class:`TrialSpec`."""
    return _DefaultCatalog()


@dataclass(frozen=True)
class PlanRequest:
    """What to score.

    Attributes:
        controllers: controller names (``policy:holosoma/g1_ppo``, ``policy:<manifest path>``, ``mpc_walk``,
            ``wbc_stand``, any registered controller); None: :func:`default_controllers`, plus ``wbc_stand``
            on the standing families unless ``quick``.
        scenarios: family names, each optionally ``family:level`` (that level only); None: every family.
        seeds: seeds per (controller, family, level): 0 .. seeds-1; None: 1 with ``quick``, else
            :data:`DEFAULT_SEEDS`.
        quick: each family's ``quick_level`` only (unless levels are named in ``scenarios``).
        robot: the robot (its config names the model and the policies).
    """

    controllers: tuple[str, ...] | None = None
    scenarios: tuple[str, ...] | None = None
    seeds: int | None = None
    quick: bool = False
    robot: str = "g1"


@dataclass(frozen=True)
class Plan:
    """The validated trial list, in a fixed order (family, level, controller, seed), plus the ordering the
    reports use."""

    specs: tuple[Any, ...]
    controllers: tuple[str, ...]
    families: tuple[str, ...]
    levels: dict[str, tuple[str, ...]]
    seeds: int
    skipped: tuple[str, ...]  # human-readable notes on (controller, family) pairs not planned


def plan_trials(request: PlanRequest, catalog: Catalog | None = None) -> Plan:
    """Validate ``request`` and expand it into trials. Raises ``ValueError`` naming the first bad input
    (unknown family, level key or controller, a scenario file out of range, a missing policy file, seeds < 1,
    nothing to run)."""
    cat = catalog or default_catalog()
    seeds = request.seeds if request.seeds is not None else (1 if request.quick else DEFAULT_SEEDS)
    if seeds < 1:
        raise ValueError(f"--seeds must be at least 1 (got {seeds})")
    known = list(cat.family_names())
    wanted: list[tuple[str, str | None]] = []
    for entry in request.scenarios or tuple(known):
        name, _, level = entry.strip().partition(":")
        if name not in known:
            raise ValueError(f"unknown scenario family {name!r} (known: {', '.join(known)})")
        wanted.append((name, level or None))
    families: dict[str, Any] = {}
    levels: dict[str, list[str]] = {}
    for name, level in wanted:
        if name not in families:
            families[name] = cat.load_family(name, request.robot)  # validates the file's values
            levels[name] = []
        fam = families[name]
        if level is not None:
            if level not in fam.levels:
                raise ValueError(
                    f"unknown level {level!r} of scenario family {name!r} (levels: {', '.join(fam.levels)})"
                )
            chosen = [level]
        elif request.quick:
            chosen = [fam.quick_level]
        else:
            chosen = list(fam.levels)
        levels[name] += [lv for lv in chosen if lv not in levels[name]]
    explicit = request.controllers is not None
    controllers = list(request.controllers) if explicit else default_controllers(request.robot)
    if not explicit and not request.quick and any(f.standing_only for f in families.values()):
        controllers += list(DEFAULT_STANDING_CONTROLLERS)
    if not controllers:
        raise ValueError("no controller given")
    for c in dict.fromkeys(controllers):
        cat.validate_controller(c, request.robot)  # unknown controller / missing policy file
    controllers = list(dict.fromkeys(controllers))
    specs: list[Any] = []
    skipped: list[str] = []
    for name, fam in families.items():
        for c in controllers:
            if not cat.can_run(c, fam):
                skipped.append(f"{c} not planned on {name} (a standing controller; the family walks)")
                continue
            for level in levels[name]:
                for seed in range(seeds):
                    specs.append(cat.make_spec(c, name, level, seed, request.robot))
    if not specs:
        raise ValueError("nothing to run: " + ("; ".join(skipped) or "no trial planned"))
    keys = [s.key() for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError("two planned trials share a key (TrialSpec.key() is not unique)")
    return Plan(
        specs=tuple(specs),
        controllers=tuple(controllers),
        families=tuple(families),
        levels={k: tuple(v) for k, v in levels.items()},
        seeds=seeds,
        skipped=tuple(skipped),
    )


def _json_safe(value: Any) -> Any:
    """``value`` with numpy scalars/arrays as Python numbers/lists and non-finite floats as None."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalar or array
        return _json_safe(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def guarded_trial(trial_fn: TrialFn, spec: Any) -> dict[str, Any]:
    """Run one trial; never raises an ``Exception``. The record: ``outcome`` (survived / fell / safe_stop, or
    ``error`` with ``traceback`` when the trial raised or returned something malformed), ``figures``,
    ``spec`` (as a dict), ``wall_s`` (the trial's own wall time, s)."""
    t0 = time.perf_counter()
    try:
        result = trial_fn(spec)
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if outcome not in OUTCOMES:
            raise ValueError(f"the trial returned outcome {outcome!r}; expected one of {', '.join(OUTCOMES)}")
        figures = result.get("figures") or {}
        if not isinstance(figures, dict):
            raise ValueError(f"the trial returned figures of type {type(figures).__name__}, not a dict")
        record: dict[str, Any] = {"outcome": outcome, "figures": _json_safe(figures)}
        wall = result.get("wall_s")
    except Exception:
        record = {"outcome": ERROR, "figures": {}, "traceback": traceback.format_exc()}
        wall = None
    record["spec"] = spec_dict(spec)
    record["wall_s"] = float(wall) if isinstance(wall, int | float) else time.perf_counter() - t0
    return record


def execute_trial(spec: Any) -> dict[str, Any]:
    """The real trial (``humanoid_bringup.scorecard.trial.run_trial``), guarded (:func:`guarded_trial`)."""
    from humanoid_bringup.scorecard.trial import run_trial

    return guarded_trial(run_trial, spec)


def uncached_trial(spec: Any) -> dict[str, Any]:
    """The real trial simulated in full: a worker's remembered trials (``trial.run_trial``'s cache of the
    families without a random element) are forgotten first, so a benchmark that runs the same trial set twice
    times the simulation both times, not a lookup the first run left in that worker."""
    from humanoid_bringup.scorecard.trial import clear_trial_cache, run_trial

    clear_trial_cache()
    return run_trial(spec)


def _remote_trial(trial_fn: TrialFn | None, spec: Any) -> dict[str, Any]:
    """The body of a Ray task: :func:`execute_trial` or a given trial function, guarded."""
    return execute_trial(spec) if trial_fn is None else guarded_trial(trial_fn, spec)


def _warm(_: int) -> int:
    """A Ray task that imports the trial code (warms a worker process before a timed run)."""
    import humanoid_bringup.scorecard.trial  # noqa: F401

    return os.getpid()


class Progress:
    """A progress line on ``stream`` (stderr): trials done of the total, falls and errors so far, and the
    time left (from the mean wall time of the trials finished in this run). Rewritten in place on a
    terminal, one line per update otherwise (at most one per ``min_interval_s`` but always the last)."""

    def __init__(self, total: int, done: int = 0, stream: Any = None, min_interval_s: float = 5.0) -> None:
        self.total = total
        self.done = done
        self.resumed = done
        self.fell = 0
        self.errors = 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.min_interval_s = min_interval_s
        self.t0 = time.monotonic()
        self._last = -math.inf

    def line(self) -> str:
        """The current progress text."""
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        ran = self.done - self.resumed
        left = self.total - self.done
        if left == 0:
            eta = "done"
        elif ran > 0:
            eta = f"~{_hms((time.monotonic() - self.t0) / ran * left)} left"
        else:
            eta = "time left unknown"
        return (
            f"scorecard [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} trials, "
            f"{self.fell} fell, {self.errors} errors, {eta}"
        )

    def update(self, record: dict[str, Any] | None = None) -> None:
        """Count one finished trial (``record``) or just redraw (None)."""
        if record is not None:
            self.done += 1
            self.fell += record.get("outcome") == "fell"
            self.errors += record.get("outcome") == ERROR
        now = time.monotonic()
        if not self.tty and self.done < self.total and now - self._last < self.min_interval_s:
            return
        self._last = now
        end = "\n" if not self.tty or self.done >= self.total else ""
        self.stream.write(("\r" if self.tty else "") + self.line() + end)
        self.stream.flush()


def _hms(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


@contextmanager
def ray_session(address: str | None, workers: int | None) -> Iterator[tuple[Any, str]]:
    """Ray for the scorecard: yields ``(ray, description of the address)``.

    ``address`` None: an embedded instance bound to loopback with ``workers`` CPUs (default: every core),
    shut down on exit. Otherwise ``ray.init(address=...)`` on an existing cluster (``auto`` or ``HOST:PORT``),
    disconnected on exit. If this process already holds a Ray connection, that one is used and kept."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        yield ray, str(ray.get_runtime_context().gcs_address)
        return
    if address is not None:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
        try:
            yield ray, str(ray.get_runtime_context().gcs_address)
        finally:
            ray.shutdown()
        return
    with _loopback_only():
        cpus = workers if workers else (os.cpu_count() or 1)
        ctx = ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            ip = str(ctx.address_info.get("node_ip_address"))
            if not ip.startswith("127."):
                raise RuntimeError(f"the embedded Ray instance bound {ip}, not loopback: refusing to run")
            yield ray, f"embedded {ctx.address_info.get('gcs_address') or ctx.address_info.get('address')}"
        finally:
            ray.shutdown()


@contextmanager
def _loopback_only() -> Iterator[None]:
    """Make Ray take 127.0.0.1 as this node's address while starting an embedded instance (its
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` behaviour; Ray reads that variable at import, so the constant is
    set too), and restore both afterwards (a later ``--address`` run must resolve the real address)."""
    from ray._private import ray_constants

    var = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
    old_env, old_const = os.environ.get(var), getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    os.environ[var] = "0"  # inherited by the raylet's worker processes
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old_env
        if old_const is not None:
            ray_constants.ENABLE_RAY_CLUSTER = old_const


def submit_all(
    ray: Any,
    specs: Sequence[Any],
    cap: int,
    on_done: Callable[[Any, dict[str, Any]], None],
    trial_fn: TrialFn | None = None,
) -> None:
    """Run ``specs`` as Ray tasks (one CPU each, no retry), at most ``cap`` in flight; ``on_done(spec,
    record)`` as each finishes (in finishing order). A task that dies without a record (worker crash) is
    recorded as an ``error`` with Ray's message."""
    remote = ray.remote(num_cpus=1, max_retries=0)(_remote_trial)
    queue = list(specs)
    flight: dict[Any, Any] = {}
    try:
        while queue or flight:
            while queue and len(flight) < cap:
                spec = queue.pop(0)
                flight[remote.remote(trial_fn, spec)] = spec
            ready, _ = ray.wait(list(flight), num_returns=1)
            for ref in ready:
                spec = flight.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception:
                    record = {
                        "outcome": ERROR,
                        "figures": {},
                        "traceback": traceback.format_exc(),
                        "spec": spec_dict(spec),
                        "wall_s": 0.0,
                    }
                on_done(spec, record)
    finally:
        for ref in flight:
            ray.cancel(ref, force=True)


@dataclass
class RunInfo:
    """How the trials ran (the scorecard's non-reproducible fields)."""

    wall_s: float
    workers: int
    ray_address: str | None
    trials_run: int
    trials_resumed: int


def run_trials(
    specs: Sequence[Any],
    store: TrialStore,
    workers: int | None = None,
    address: str | None = None,
    trial_fn: TrialFn | None = None,
    progress_stream: Any = None,
    resume: bool = True,
) -> tuple[dict[str, dict[str, Any]], RunInfo]:
    """Run every trial not already stored (``resume``), store each as it finishes; returns the records of all
    ``specs`` by key and how they ran. ``trial_fn`` replaces the real trial (tests); with Ray it must be
    importable by the workers (a module-level function)."""
    if workers is not None and workers < 0:
        raise ValueError(f"--workers must be 0 (no Ray) or more (got {workers})")
    if workers == 0 and address is not None:
        raise ValueError(f"--address {address} needs Ray; --workers 0 runs in this process without it")
    t0 = time.perf_counter()
    records: dict[str, dict[str, Any]] = {}
    pending: list[Any] = []
    for spec in specs:
        stored = store.load(spec) if resume else None
        if stored is None:
            pending.append(spec)
        else:
            records[spec.key()] = stored
    progress = Progress(len(specs), done=len(records), stream=progress_stream)
    progress.update()

    def done(spec: Any, record: dict[str, Any]) -> None:
        store.save(spec, record)
        records[spec.key()] = record
        progress.update(record)

    if workers == 0:
        for spec in pending:
            done(spec, execute_trial(spec) if trial_fn is None else guarded_trial(trial_fn, spec))
        used, desc = 0, None
    elif not pending:
        used, desc = workers or 0, None
    else:
        with ray_session(address, workers) as (ray, desc):
            cluster_cpus = int(ray.cluster_resources().get("CPU", 1))
            used = max(1, min(workers, cluster_cpus) if workers else cluster_cpus)
            submit_all(ray, pending, used, done, trial_fn)
    info = RunInfo(
        wall_s=time.perf_counter() - t0,
        workers=used,
        ray_address=desc,
        trials_run=len(pending),
        trials_resumed=len(specs) - len(pending),
    )
    return records, info
