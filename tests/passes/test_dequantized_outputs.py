"""A DequantizeLinear whose output the model returns stays a float output of the integer graph.

Lowering turns DequantizeLinear -> Conv -> QuantizeLinear into one integer Conv; when the
DequantizeLinear's float output is also a graph output, folding it into that unit would drop an
output the caller reads by name.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from tests.helpers import make_model


def _model():
    rng = np.random.default_rng(4)
    n = helper.make_node
    inits = {"s": np.float32(0.02), "z": np.int8(0),
             "w": rng.integers(-60, 60, (4, 2, 3, 3)).astype(np.int8),
             "ws": np.float32(0.01), "b": rng.integers(-50, 50, 4).astype(np.int32),
             "bs": np.float32(0.0002), "os": np.float32(0.05), "oz": np.int8(3)}
    nodes = [n("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
             n("DequantizeLinear", ["xq", "s", "z"], ["x_dq"], name="dq_in"),
             n("DequantizeLinear", ["w", "ws"], ["w_dq"], name="dq_w"),
             n("DequantizeLinear", ["b", "bs"], ["b_dq"], name="dq_b"),
             n("Conv", ["x_dq", "w_dq", "b_dq"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             n("QuantizeLinear", ["c", "os", "oz"], ["cq"], name="q_out"),
             n("DequantizeLinear", ["cq", "os", "oz"], ["y"], name="dq_out")]
    return make_model(nodes, [("x", np.float32, [1, 2, 6, 6])],
                      [("x_dq", np.float32, None), ("y", np.float32, None)], inits)


def test_a_dequantized_graph_output_survives_lowering():
    graph = load_onnx(_model())
    compiled = compilation(graph)
    final = compiled.final
    assert [v.name for v in final.outputs] == ["x_dq", "y"]
    assert any(node.op == "QLinearConv" for node in final.nodes), "the Conv became integer"
    x = np.random.default_rng(5).uniform(-2, 2, (1, 2, 6, 6)).astype(np.float32)
    want, got = run(graph, {"x": x}), run(final, {"x": x})
    for name in ("x_dq", "y"):
        np.testing.assert_array_equal(got[name], want[name])


def test_a_dequantized_graph_output_stays_out_of_the_canvas_unit():
    """The canvas folds a QDQ unit into one box: a DequantizeLinear the model returns stays a
    node of its own beside it (folded, the edge to the model's output would vanish)."""
    from compiler.hierarchy import QDQ, build_hierarchy

    graph = load_onnx(_model())
    h = build_hierarchy(graph)
    names = {n.id: n.name for n in graph.nodes}
    units = [{names[m] for m in h.members(g.id)} for g in h.walk() if g.kind == QDQ]
    conv = next(u for u in units if "conv" in u)
    assert "dq_w" in conv and "dq_b" in conv and "q_out" in conv  # its weights and output
    assert "dq_in" not in conv  # the graph output x_dq
