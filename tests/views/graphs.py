"""Graphs for the view tests and the layout benchmark, built directly in the IR."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from compiler.ir.graph import Graph, Value
from compiler.ir.types import TensorType

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "app" / "resources" / "models" / "digits_cnn.onnx"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
DENSENET = LIGHT / "light_densenet121.onnx"
INCEPTION = LIGHT / "light_inception_v1.onnx"


def diamond() -> Graph:
    """x -> Relu -> (Sigmoid | Tanh -> Neg) -> Add, plus a skip from x into a final Mul."""
    t = TensorType((1, 4))
    g = Graph("diamond")
    x = g.add_input("x", t)
    a = g.add_node("Relu", [x], [t], name="a").output
    b = g.add_node("Sigmoid", [a], [t], name="b").output
    c = g.add_node("Tanh", [a], [t], name="c").output
    d = g.add_node("Neg", [c], [t], name="d").output
    e = g.add_node("Add", [b, d], [t], name="e").output
    f = g.add_node("Mul", [e, x], [t], name="f").output
    g.outputs = [f]
    return g


def _conv(g: Graph, x: Value, channels: int, kernel: int, weight: np.ndarray) -> Value:
    n, _, h, w = x.type.shape
    data = weight[:channels, : x.type.shape[1], :kernel, :kernel]
    wt = g.add_constant(f"w{len(g.constants)}", data)
    p = kernel // 2
    return g.add_node("Conv", [x, wt], [TensorType((n, channels, h, w))],
                      {"kernel_shape": (kernel, kernel), "pads": (p, p, p, p),
                       "strides": (1, 1), "group": 1}).output


def _unary(g: Graph, op: str, x: Value, attrs=None) -> Value:
    return g.add_node(op, [x], [x.type], attrs).output


def synthetic(nodes: int = 5000, channels: int = 8) -> Graph:
    """Inception-like blocks (four branches, concat, reduce) with residual adds, ~`nodes` nodes.

    Weights share one payload, so the graph is big in structure and small in memory.
    """
    g = Graph("synthetic")
    weight = np.zeros((4 * channels, 4 * channels, 3, 3), np.float32)
    x: Value = g.add_input("input", TensorType((1, channels, 8, 8)))
    block = 0
    while len(g.nodes) < nodes:
        skip = x
        b1 = _conv(g, x, channels, 1, weight)
        b2 = _conv(g, _unary(g, "Relu", _conv(g, x, channels, 1, weight)), channels, 3, weight)
        b3 = _conv(g, _unary(g, "Relu", _conv(g, x, channels, 1, weight)), channels, 3, weight)
        b3 = _conv(g, _unary(g, "Relu", b3), channels, 3, weight)
        b4 = _conv(g, _unary(g, "MaxPool", x, {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1),
                                               "strides": (1, 1)}), channels, 1, weight)
        cat = g.add_node("Concat", [b1, b2, b3, b4],
                         [TensorType((1, 4 * channels, 8, 8))], {"axis": 1}).output
        x = _unary(g, "Relu", _conv(g, cat, channels, 1, weight))
        if block % 2:
            x = g.add_node("Add", [x, skip], [x.type]).output
        block += 1
    g.outputs = [x]
    return g


def scoped_model(stages: int, blocks: int, layers: int, width: int = 4) -> onnx.ModelProto:
    """An ONNX model named in scopes `stage_i/block_j/layer_k/op`, as exporters name layers.

    Each layer is MatMul, Add (bias), Relu and a residual Add: four nodes; each block ends with
    a Mul, so the model has stages * blocks * (4 * layers + 1) nodes on [1, width] tensors
    (tiny tensors: the size under test is the graph's, not the arithmetic's).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for s in range(stages):
        for b in range(blocks):
            scope = f"stage_{s}/block_{b}"
            for k in range(layers):
                name = f"{scope}/layer_{k}"
                w = (rng.standard_normal((width, width)) * 0.1).astype(np.float32)
                inits += [numpy_helper.from_array(w, f"{name}/w"),
                          numpy_helper.from_array(np.full(width, 0.01, np.float32),
                                                  f"{name}/b")]
                nodes += [
                    helper.make_node("MatMul", [x, f"{name}/w"], [f"{name}/mm"],
                                     name=f"{name}/matmul"),
                    helper.make_node("Add", [f"{name}/mm", f"{name}/b"], [f"{name}/biased"],
                                     name=f"{name}/bias"),
                    helper.make_node("Relu", [f"{name}/biased"], [f"{name}/act"],
                                     name=f"{name}/relu"),
                    helper.make_node("Add", [f"{name}/act", x], [f"{name}/out"],
                                     name=f"{name}/residual")]
                x = f"{name}/out"
            inits.append(numpy_helper.from_array(np.full(width, 0.5, np.float32),
                                                 f"{scope}/scale"))
            nodes.append(helper.make_node("Mul", [x, f"{scope}/scale"], [f"{scope}/y"],
                                          name=f"{scope}/scale"))
            x = f"{scope}/y"
    graph = helper.make_graph(
        nodes, "scoped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
