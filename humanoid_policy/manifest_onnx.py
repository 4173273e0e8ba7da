"""The ONNX side of a policy manifest: the network's signature and the manifest's check against it.

:func:`read_onnx_signature` loads an ONNX file with onnxruntime (CPU) and describes it
(:class:`OnnxSignature`: input and output tensors with their shapes, custom metadata, the recurrent state
pairs ``<x>_in`` -> ``<x>_out``); :func:`onnx_problems` lists every way a
:class:`~humanoid_policy.manifest_types.PolicyManifest` does not fit its network (tensor names, observation
and action sizes, recurrent state, gains, rate, phase clock), and ``_check_against_onnx`` raises them as one
:class:`~humanoid_policy.manifest_types.ManifestError`. Used by the loaders of
:mod:`humanoid_policy.manifest` and :mod:`humanoid_policy.isaaclab_io`.

Units: tensor shapes in elements (``None`` for a symbolic dimension); rate in Hz; gains N m/rad, N m s/rad.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from humanoid_policy.manifest_types import PolicyManifest, RecurrentState, _fail


@dataclass(frozen=True)
class OnnxSignature:
    """Tensors of an ONNX model: name -> shape (``None`` for a symbolic dimension), in graph order, and its
    custom metadata (JSON-decoded where possible)."""

    path: Path
    inputs: dict[str, tuple[int | None, ...]]
    outputs: dict[str, tuple[int | None, ...]]
    metadata: dict[str, Any]

    def last_dim(self, shapes: dict[str, tuple[int | None, ...]], name: str) -> int | None:
        """The last dimension of tensor ``name`` in ``shapes`` (None if unknown)."""
        shape = shapes.get(name, ())
        return shape[-1] if shape else None

    def recurrent_state(self, obs_input: str) -> tuple[list[RecurrentState], list[str]]:
        """State tensors besides ``obs_input``: each ``<x>_in`` input paired with its ``<x>_out`` output
        (Isaac Lab's exporter: ``h_in``/``c_in`` -> ``h_out``/``c_out``); the problems found."""
        states, problems = [], []
        for name, shape in self.inputs.items():
            if name == obs_input:
                continue
            out = name[: -len("_in")] + "_out" if name.endswith("_in") else None
            if out is None or out not in self.outputs:
                problems.append(
                    f"ONNX {self.path.name} has an input '{name}' besides the observation '{obs_input}' and "
                    f"no matching state output (a recurrent state '<x>_in' needs an output '<x>_out')"
                )
            elif any(d is None for d in shape) or self.outputs[out] != shape:
                problems.append(
                    f"recurrent state '{name}' -> '{out}' needs one fixed shape, got {list(shape)} and "
                    f"{list(self.outputs[out])}"
                )
            else:
                states.append(RecurrentState(name, out, tuple(int(d) for d in shape)))  # type: ignore[arg-type]
        return states, problems


def read_onnx_signature(path: Path, where: str) -> OnnxSignature:
    """Load ``path`` with onnxruntime (CPU) and describe its tensors; ManifestError if it cannot."""
    import onnxruntime as ort

    if not path.is_file():
        raise _fail(where, f"ONNX file not found: {path}")
    try:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise _fail(where, f"cannot load ONNX file {path}: {exc}") from exc

    def shapes(tensors: Any) -> dict[str, tuple[int | None, ...]]:
        return {t.name: tuple(d if isinstance(d, int) else None for d in (t.shape or ())) for t in tensors}

    meta: dict[str, Any] = {}
    for key, raw in session.get_modelmeta().custom_metadata_map.items():
        try:
            meta[key] = json.loads(raw)
        except (ValueError, TypeError):
            meta[key] = raw
    return OnnxSignature(path, shapes(session.get_inputs()), shapes(session.get_outputs()), meta)


def onnx_problems(m: PolicyManifest, onnx: OnnxSignature) -> tuple[list[RecurrentState], list[str]]:
    """The manifest against its network: tensor names, observation and action sizes (both named when they
    differ), recurrent state pairs, gains, rate, phase clock. The recurrent states and every problem."""
    problems = []
    name = onnx.path.name
    if m.input_name not in onnx.inputs:
        problems.append(f"ONNX {name} has no input '{m.input_name}' (inputs: {list(onnx.inputs)})")
    if m.output_name not in onnx.outputs:
        problems.append(f"ONNX {name} has no output '{m.output_name}' (outputs: {list(onnx.outputs)})")
    size = onnx.last_dim(onnx.inputs, m.input_name)
    if size is not None and size != m.obs_size:
        problems.append(
            f"observation size mismatch: the manifest's terms make {m.obs_size} values but ONNX input "
            f"'{m.input_name}' of {name} takes {size}"
        )
    out = onnx.last_dim(onnx.outputs, m.output_name)
    if out is not None and out != m.num_joints:
        problems.append(
            f"action size mismatch: the manifest names {m.num_joints} joints but ONNX output "
            f"'{m.output_name}' has {out} values"
        )
    states, state_problems = onnx.recurrent_state(m.input_name)
    problems += state_problems
    if np.any(m.kp < 0) or np.any(m.kd < 0):
        problems.append("gains must be non-negative")
    if not (0.0 < m.rate_hz <= 1000.0):
        problems.append(f"rate_hz {m.rate_hz} out of range (0, 1000]")
    if m.history_fill not in ("zeros", "first"):
        problems.append(f"history_fill must be 'zeros' or 'first', not '{m.history_fill}'")
    phase_terms = [t.name for t in m.terms if t.kind in ("sin_phase", "cos_phase")]
    if phase_terms and m.phase is None:
        problems.append(f"terms {phase_terms} need a phase clock (phase: {{period_s: ...}})")
    return states, problems


def _check_against_onnx(m: PolicyManifest, onnx: OnnxSignature) -> PolicyManifest:
    """:func:`onnx_problems`, raised as one ManifestError; the manifest with its recurrent states."""
    states, problems = onnx_problems(m, onnx)
    if problems:
        raise _fail(m.source, " | ".join(problems))
    return replace(m, recurrent=tuple(states))
