"""Tiny ONNX networks for tests, built with the ``onnx`` package: ``action = obs @ W + b``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def make_linear_policy(
    path: Path,
    weight: np.ndarray,
    bias: np.ndarray,
    metadata: dict[str, object] | None = None,
    input_name: str = "obs",
    output_name: str = "actions",
) -> Path:
    """Write an ONNX model computing ``output = input @ weight + bias`` (float32, batch 1)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n_in, n_out = weight.shape
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", [input_name, "W"], ["xw"]),
            helper.make_node("Add", ["xw", "B"], [output_name]),
        ],
        "linear_policy",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, n_in])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [1, n_out])],
        [
            numpy_helper.from_array(weight.astype(np.float32), "W"),
            numpy_helper.from_array(bias.astype(np.float32).reshape(1, n_out), "B"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
