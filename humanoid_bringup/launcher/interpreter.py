"""Actions and conditions: the interpreter that walks a YAML launch file into a :class:`LaunchPlan`."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from humanoid_bringup.launcher.packages import resolve_node_executable
from humanoid_bringup.launcher.parameters import param_value, typed_value
from humanoid_bringup.launcher.plan import ArgumentSpec, LaunchError, LaunchPlan, ProcessSpec
from humanoid_bringup.launcher.substitutions import Scope, Substitutions

__all__ = ["declared_arguments", "load_launch_description"]

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
OUTPUT_MODES = ("screen", "log", "both")


#: Words of an ``if:`` / ``unless:`` condition, compared lower-cased and unstripped, as ``launch``'s
#: ``IfCondition`` does (``evaluate_condition_expression``); anything else is an error there and here.
_CONDITION_TRUE = ("true", "1")
_CONDITION_FALSE = ("false", "0")
#: Words of the boolean attributes ``scoped``, ``forwarding``, ``shell`` and ``respawn``.
_TRUE_WORDS = ("true", "1", "yes")
_FALSE_WORDS = ("false", "0", "no")


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


class _Interpreter(Substitutions):
    """Walks the parsed YAML and produces a :class:`LaunchPlan`."""

    def __init__(self, path: Path, arguments: Mapping[str, str]) -> None:
        super().__init__(path)
        self.provided = dict(arguments)
        self.resolved_args: dict[str, str] = {}
        self.processes: list[ProcessSpec] = []
        self.temp_dir: str | None = None
        self.label_counts: dict[str, int] = {}

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
        self.scope.global_params[name] = typed_value(self.subst(raw, what), what)

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
            self.scope = Scope({}, {}, {}, None)
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

        cmd = [*prefix, *resolve_node_executable(package, executable, where), *args, "--ros-args"]
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
            return {name: param_value(self, entry["value"], f"{where} parameter '{name}'")}
        nested: dict[str, Any] = {}
        for index, child in enumerate(self.get_entities(entry, "param", where)):
            nested.update(self.inline_param(child, f"{where}.param[{index}]"))
        return {name: nested}

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
