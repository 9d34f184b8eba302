"""Folding passes: layout operators of constants, and constant folding through the interpreter."""

import numpy as np

from compiler.passes.rewrite import is_splat
from tests.passes.util import Builder, apply, op_counts


def test_fold_constant_layout_folds_transposed_and_reshaped_weights_as_views():
    b = Builder()
    x = b.input("x", (2, 6))
    w = b.weights(3, 2, 4)
    wt = b.node("Transpose", [w], perm=(2, 1, 0))  # [4, 2, 3]
    w2 = b.node("Reshape", [wt, b.ints([4, 6])])
    g = apply(b.build(b.node("MatMul", [x, b.node("Transpose", [w2], perm=(1, 0))])),
              "fold_constant_layout")
    assert op_counts(g) == {"MatMul": 1}
    folded = g.nodes[0].inputs[1].data
    assert folded.shape == (6, 4) and not folded.flags.writeable


def test_fold_constant_layout_keeps_a_splat_a_splat_and_leaves_runtime_data():
    b = Builder()
    x = b.input("x", (1, 3, 1000))
    big = b.const(np.broadcast_to(np.float32(0.5), (3, 1000)), "splat")
    wide = b.node("Add", [x, b.node("Unsqueeze", [big, b.ints([0])])])
    y = b.node("Transpose", [x], perm=(2, 1, 0))  # runtime data: stays
    g = apply(b.build(wide, y), "fold_constant_layout", then_dce=False)
    (unsqueeze_value,) = [c for c in g.constants.values() if c.data.shape == (1, 3, 1000)]
    assert is_splat(unsqueeze_value.data)
    assert "Transpose" in op_counts(g)


def test_fold_constants_runs_the_interpreter_and_makes_constant_of_shape_a_splat():
    b = Builder()
    x = b.input("x", (2, 4))
    fill = b.node("ConstantOfShape", [b.ints([2, 4])], value=np.array([0.25], np.float32))
    scaled = b.node("Mul", [b.const(np.arange(8.0).reshape(2, 4), "a"), b.const(0.5, "half")])
    shape = b.node("Shape", [x])
    y = b.node("Reshape", [b.node("Add", [b.node("Mul", [x, fill]), scaled]), shape])
    g = apply(b.build(y), "fold_constants")
    assert op_counts(g) == {"Mul": 1, "Add": 1, "Reshape": 1}
    assert any(is_splat(c.data) for c in g.constants.values())


def test_fold_constants_keeps_quantized_weights_quantized():
    b = Builder()
    x = b.input("x", (2, 4))
    q = b.const(np.array([[1, -2, 3, 4], [5, 6, -7, 8]], np.int8), "q")
    dq = b.node("DequantizeLinear", [q, b.const(np.float32(0.5), "scale")])
    apply(b.build(b.node("Add", [x, dq])), "fold_constants", changed=False)


def test_fold_constants_keeps_model_outputs_and_runtime_nodes():
    b = Builder()
    x = b.input("x", (2,))
    constant_output = b.node("Add", [b.const([1.0, 2.0], "a"), b.const([3.0, 4.0], "b")])
    apply(b.build(b.node("Relu", [x]), constant_output), "fold_constants", changed=False)


def test_fold_constants_refuses_a_result_much_bigger_than_its_inputs():
    b = Builder()
    x = b.input("x", (1, 1))
    zeros = b.const(np.zeros((1, 1), np.float32), "z")
    big = b.node("Pad", [zeros, b.ints([0, 0, 1000, 1000])])  # 1 element -> 4 MB
    apply(b.build(b.node("Add", [x, big])), "fold_constants", changed=False)
