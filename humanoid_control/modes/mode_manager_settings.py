"""Parameter tables and settings of the mode manager (:mod:`humanoid_control.modes.mode_manager_node`).

The velocity limits, the command mux's timeouts and the joystick mapping as node parameters (name, default,
range, description), and the builders of :class:`MuxSettings` and :class:`JoyMapping` from the parameter
values. Pure (no rclpy).
"""

from __future__ import annotations

from typing import Any

from humanoid_control.modes.command_mux import MuxSettings, Source, VelocityLimits
from humanoid_control.modes.joy_mapping import JoyMapping

SHARE_OF = {Source.TELEOP: "teleop", Source.AUTONOMY: "autonomy", Source.NONE: "idle"}
#: parameter name (= attribute of VelocityLimits) -> (default, low, high, description)
LIMIT_PARAMS: dict[str, tuple[float, float, float, str]] = {
    "vx_max": (0.8, 0.0, 3.0, "largest forward velocity (m/s)"),
    "vx_min": (-0.5, -3.0, 0.0, "largest backward velocity, negative (m/s)"),
    "vy_max": (0.4, 0.0, 2.0, "largest sideways velocity (m/s)"),
    "wz_max": (1.0, 0.0, 4.0, "largest turn rate (rad/s)"),
    "ax_max": (1.5, 0.01, 20.0, "largest forward acceleration (m/s^2); stopping is immediate"),
    "ay_max": (1.5, 0.01, 20.0, "largest sideways acceleration (m/s^2)"),
    "awz_max": (3.0, 0.01, 40.0, "largest turn acceleration (rad/s^2)"),
}
MUX_PARAMS: dict[str, tuple[float, float, float, str]] = {
    "teleop_timeout_s": (0.5, 0.02, 10.0, "a /teleop/cmd_vel older than this is stale (s): zero"),
    "autonomy_timeout_s": (0.5, 0.02, 10.0, "a /autonomy/cmd_vel older than this is stale (s): zero"),
    "joy_timeout_s": (0.5, 0.02, 10.0, "a /joy message older than this is stale (s): zero"),
    "takeover_threshold": (0.05, 0.0, 1.0, "a teleop command faster than this on any axis takes over"),
}
JOY_PARAMS: dict[str, tuple[int, str]] = {
    "joy_deadman_button": (4, "joystick deadman button (held to drive and for the mode buttons)"),
    "joy_axis_vx": (1, "joystick axis of the forward velocity"),
    "joy_axis_vy": (0, "joystick axis of the sideways (left) velocity"),
    "joy_axis_wz": (3, "joystick axis of the turn (left) rate"),
    "joy_button_stand": (0, "joystick button: stand"),
    "joy_button_estop": (1, "joystick button: e-stop (works without the deadman)"),
    "joy_button_walk": (2, "joystick button: walk"),
    "joy_button_run_policy": (3, "joystick button: run_policy"),
}


def make_mux_settings(v: dict[str, Any]) -> MuxSettings:
    """The command mux's settings from the parameter values (``LIMIT_PARAMS`` and ``MUX_PARAMS``)."""
    limits = VelocityLimits(**{k: float(v[k]) for k in LIMIT_PARAMS})
    return MuxSettings(limits=limits, **{k: float(v[k]) for k in MUX_PARAMS})


def make_joy_mapping(v: dict[str, Any]) -> JoyMapping:
    """The joystick mapping from the parameter values (``JOY_PARAMS``, scaled by the velocity limits);
    ValueError where it is inconsistent."""
    mapping = JoyMapping(
        deadman_button=int(v["joy_deadman_button"]),
        axis_vx=int(v["joy_axis_vx"]),
        axis_vy=int(v["joy_axis_vy"]),
        axis_wz=int(v["joy_axis_wz"]),
        scale_vx=float(v["vx_max"]),
        scale_vy=float(v["vy_max"]),
        scale_wz=float(v["wz_max"]),
        buttons={name: int(v[f"joy_button_{name}"]) for name in ("stand", "estop", "walk", "run_policy")},
    )
    mapping.check()
    return mapping
