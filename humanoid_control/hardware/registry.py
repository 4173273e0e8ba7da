"""The hardware backends by name (the driver's ``hardware`` parameter): ``BACKENDS``, ``create_backend``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from humanoid_control.hardware.base import RobotBackend


def _mujoco(**kwargs: Any) -> RobotBackend:
    from humanoid_control.hardware.mujoco_sim import MujocoBackend

    return MujocoBackend(**kwargs)


def _unitree_g1(**kwargs: Any) -> RobotBackend:
    from humanoid_control.hardware.unitree_g1 import UnitreeG1Backend

    return UnitreeG1Backend(**kwargs)


def _can_mit(**kwargs: Any) -> RobotBackend:
    from humanoid_control.hardware.can_mit_backend import CanMitBackend

    return CanMitBackend(**kwargs)


#: hardware name -> factory(config=RobotConfig, **options)
BACKENDS: dict[str, Callable[..., RobotBackend]] = {
    "mujoco": _mujoco,
    "unitree_g1": _unitree_g1,
    "can_mit": _can_mit,
}
#: backends that talk to hardware (or its emulator): the driver passes them the hardware options
#: (network_interface, dds_domain, emulator, lockstep)
HARDWARE_BACKENDS = frozenset({"unitree_g1", "can_mit"})


def create_backend(name: str, **kwargs: Any) -> RobotBackend:
    """Instantiate the backend ``name``; ValueError naming the allowed values otherwise."""
    if name not in BACKENDS:
        raise ValueError(f"unknown hardware '{name}' (allowed: {', '.join(sorted(BACKENDS))})")
    return BACKENDS[name](**kwargs)


__all__ = ["BACKENDS", "HARDWARE_BACKENDS", "create_backend"]
