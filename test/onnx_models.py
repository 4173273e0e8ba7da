"""Tiny ONNX networks for tests, built with the ``onnx`` package: linear ``action = obs @ W + b`` (constant
with W = 0) and a one-layer LSTM with its numpy reference."""

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


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class LstmPolicy:
    """A one-layer LSTM policy as Isaac Lab's exporter writes it (``obs, h_in, c_in`` -> ``actions, h_out,
    c_out``, state shape ``(1, 1, hidden)``), with the numpy reference of one step (ONNX LSTM semantics, gates
    i, o, f, c): ``actions = h_out @ A + b``."""

    def __init__(self, n_in: int, hidden: int, n_out: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.hidden = hidden
        self.W = (0.3 * rng.standard_normal((4 * hidden, n_in))).astype(np.float32)
        self.R = (0.3 * rng.standard_normal((4 * hidden, hidden))).astype(np.float32)
        self.B = (0.1 * rng.standard_normal(8 * hidden)).astype(np.float32)
        self.A = (0.5 * rng.standard_normal((hidden, n_out))).astype(np.float32)
        self.b = (0.1 * rng.standard_normal(n_out)).astype(np.float32)

    def step(self, obs: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
        """(actions, h_out, c_out) for one observation and state ``(hidden,)`` (float64)."""
        x = np.asarray(obs, dtype=np.float32).astype(float)
        z = self.W.astype(float) @ x + self.R.astype(float) @ h
        z += self.B[: 4 * self.hidden].astype(float) + self.B[4 * self.hidden :].astype(float)
        i, o, f, g = np.split(z, 4)
        c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h_new = _sigmoid(o) * np.tanh(c_new)
        return h_new @ self.A.astype(float) + self.b.astype(float), h_new, c_new

    def save(self, path: Path) -> Path:
        """Write the ONNX model (an ``LSTM`` node, as torch exports ``nn.LSTM``)."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        n_in, hid, n_out = self.W.shape[1], self.hidden, self.A.shape[1]
        state = [1, 1, hid]
        graph = helper.make_graph(
            [
                helper.make_node("Unsqueeze", ["obs", "axis0"], ["x_seq"]),
                helper.make_node(
                    "LSTM",
                    ["x_seq", "W", "R", "B", "", "h_in", "c_in"],
                    ["", "h_out", "c_out"],
                    hidden_size=hid,
                ),
                helper.make_node("Reshape", ["h_out", "flat"], ["h_flat"]),
                helper.make_node("MatMul", ["h_flat", "A"], ["ha"]),
                helper.make_node("Add", ["ha", "b"], ["actions"]),
            ],
            "lstm_policy",
            [
                helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, n_in]),
                helper.make_tensor_value_info("h_in", TensorProto.FLOAT, state),
                helper.make_tensor_value_info("c_in", TensorProto.FLOAT, state),
            ],
            [
                helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, n_out]),
                helper.make_tensor_value_info("h_out", TensorProto.FLOAT, state),
                helper.make_tensor_value_info("c_out", TensorProto.FLOAT, state),
            ],
            [
                numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0"),
                numpy_helper.from_array(np.array([1, hid], dtype=np.int64), "flat"),
                numpy_helper.from_array(self.W[None], "W"),
                numpy_helper.from_array(self.R[None], "R"),
                numpy_helper.from_array(self.B[None], "B"),
                numpy_helper.from_array(self.A, "A"),
                numpy_helper.from_array(self.b.reshape(1, n_out), "b"),
            ],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
        return path
