"""IDL type of the G1 emulator's truth topic (``emu/ground_truth``); imported only where the DDS binding is.

No ``from __future__ import annotations`` here: the DDS binding resolves the field types from the class
annotations at run time.
"""

from dataclasses import dataclass

import cyclonedds.idl as idl  # type: ignore[import-not-found]
import cyclonedds.idl.types as types  # type: ignore[import-not-found]


@dataclass
class EmulatorTruth(idl.IdlStruct, typename="humanoid_emulator.EmulatorTruth"):
    """Simulation truth of one LowState tick: ``tick`` (ms, as in LowState), ``time`` (s); base ``position``
    (m, world frame), ``quat`` (w, x, y, z, base to world), ``linear_velocity_body`` and
    ``angular_velocity_body`` (m/s, rad/s, base frame); ``contacts``: left force, left torque, right force,
    right torque (N, N m, each foot's sole frame)."""

    tick: types.uint32
    time: types.float64
    position: types.array[types.float64, 3]
    quat: types.array[types.float64, 4]
    linear_velocity_body: types.array[types.float64, 3]
    angular_velocity_body: types.array[types.float64, 3]
    contacts: types.array[types.float64, 12]
