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
