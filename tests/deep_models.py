"""Deep ONNX graphs built with onnx.helper: residual chains and plain chains of any length.

Kiln must take them without recursion over graph depth anywhere (loading, passes, schedule,
lowering, memory, code generation).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def residual_chain(blocks: int, channels: int = 4, size: int = 8, seed: int = 0) -> onnx.ModelProto:
    """`blocks` times y = Relu(Conv(x)) + x on an NCHW input: Conv, Relu and Add per block."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"
    for i in range(blocks):
        # Small weights: a thousand residual additions must not overflow float32.
        w = (rng.standard_normal((channels, channels, 3, 3)) * 0.002).astype(np.float32)
        b = (rng.standard_normal(channels) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}",
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"),
                  helper.make_node("Add", [f"r{i}", x], [f"y{i}"], name=f"add{i}")]
        x = f"y{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    return _model(nodes, inits, [1, channels, size, size], [1, channels, size, size])


def conv_relu_chain(nodes_count: int, channels: int = 4, size: int = 8,
                    seed: int = 0) -> onnx.ModelProto:
    """A chain of `nodes_count` nodes alternating 1x1 Conv and Relu on an NCHW input."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"
    for i in range(nodes_count):
        if i % 2 == 0:
            w = (np.eye(channels) + rng.standard_normal((channels, channels)) * 0.05)
            inits.append(numpy_helper.from_array(
                w.astype(np.float32).reshape(channels, channels, 1, 1), f"w{i}"))
            nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"t{i}"], name=f"conv{i}"))
        else:
            nodes.append(helper.make_node("Relu", [x], [f"t{i}"], name=f"relu{i}"))
        x = f"t{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    return _model(nodes, inits, [1, channels, size, size], [1, channels, size, size])


def _model(nodes, inits, in_shape, out_shape) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, in_shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
