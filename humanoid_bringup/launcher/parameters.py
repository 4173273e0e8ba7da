"""ROS parameter values of a node's ``param`` entries, typed as ``launch_ros`` types them."""

from __future__ import annotations

from typing import Any

import yaml

from humanoid_bringup.launcher.plan import LaunchError
from humanoid_bringup.launcher.substitutions import Subst, Substitutions, parse_template

__all__ = ["param_value", "typed_value"]


def param_value(subs: Substitutions, raw: Any, where: str) -> Any:
    """Turn the ``value`` of a node's ``param`` entry into a ROS parameter value, as ``launch_ros`` does.

    - a YAML bool, int or float stays as it is;
    - a string without a substitution is a string, as written (``'500'`` gives ``"500"``, ``'[1, 2]'``
      gives ``"[1, 2]"``): ``parse_if_substitutions`` keeps literal text a ``str``;
    - a string with a substitution is substituted and its result type-guessed with YAML rules
      (:func:`typed_value`: ``500`` int, ``500.0`` float, ``true`` bool, ``[1, 2]`` int array; a null,
      an empty result or a mapping is an error);
    - a YAML list applies these rules to each item; the items must all end up with the same type
      (``[1, 2.5]`` is refused by ``ros2 launch`` as a non-uniform list) and the list must not be empty.
    """
    if isinstance(raw, bool | int | float):
        return raw
    if isinstance(raw, str):
        return _param_text(subs, raw, where, in_list=False)
    if isinstance(raw, list):
        if not raw:
            raise LaunchError(f"{where}: empty lists are not valid parameter values (type unknown)")
        items = []
        for item in raw:
            if isinstance(item, str):
                items.append(_param_text(subs, item, where, in_list=True))
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


def _param_text(subs: Substitutions, raw: str, where: str, *, in_list: bool) -> Any:
    """A string parameter value: literal text stays a string; a substituted one is type-guessed."""
    nodes = parse_template(raw, where)
    text = subs.eval_nodes(nodes, where)
    if not any(isinstance(node, Subst) for node in nodes):
        return text
    return typed_value(text, where, in_list=in_list)


def typed_value(text: str, where: str, *, in_list: bool = False) -> Any:
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
