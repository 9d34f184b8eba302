"""Lowering passes: reshapes, Sum, fully connected layers, BatchNormalization, global pooling."""

import numpy as np
import pytest

from tests.passes.util import Builder, apply, op_counts


def test_lower_reshapes_turns_squeeze_unsqueeze_flatten_into_reshapes():
    b = Builder()
    x = b.input("x", (1, 3, 1, 4))
    y = b.node("Squeeze", [x, b.ints([2])])
    y = b.node("Unsqueeze", [y, b.ints([0])])
    y = b.node("Flatten", [y], axis=2)
    g = apply(b.build(y), "lower_reshapes")
    assert op_counts(g) == {"Reshape": 3}
    assert g.outputs[0].type.shape == (1, 12)


def test_lower_sum_makes_a_chain_of_adds():
    b = Builder()
    x, y, z = (b.input(n, (2, 3)) for n in "xyz")
    g = apply(b.build(b.node("Sum", [x, y, z])), "lower_sum", rtol=0, atol=0)
    assert op_counts(g) == {"Add": 2}


@pytest.mark.parametrize("trans_b", [0, 1])
def test_lower_fully_connected_from_gemm_folds_alpha_and_beta(trans_b):
    b = Builder()
    x = b.input("x", (2, 5))
    w = b.weights(*((3, 5) if trans_b else (5, 3)))
    c = b.weights(1, 3, name="c")
    y = b.node("Gemm", [x, w, c], transB=trans_b, alpha=0.5, beta=2.0)
    g = apply(b.build(y), "lower_fully_connected")
    assert op_counts(g) == {"FullyConnected": 1}
    assert g.nodes[0].inputs[1].type.shape == (3, 5)


def test_lower_fully_connected_from_matmul_and_bias_add():
    b = Builder()
    x = b.input("x", (1, 4, 5))
    y = b.node("Add", [b.weights(3, name="bias"), b.node("MatMul", [x, b.weights(5, 3)])])
    alone = b.node("MatMul", [x, b.weights(5, 2, name="w2")])
    g = apply(b.build(y, alone), "lower_fully_connected")
    assert op_counts(g) == {"FullyConnected": 2}


def test_lower_fully_connected_leaves_per_row_c_and_runtime_weights():
    b = Builder()
    x = b.input("x", (2, 5))
    w = b.input("w", (5, 3))
    gemm = b.node("Gemm", [x, b.weights(5, 3), b.weights(2, 3, name="c")])
    apply(b.build(gemm, b.node("MatMul", [x, w])), "lower_fully_connected", changed=False)


@pytest.mark.parametrize(("shape", "layout"), [((1, 3, 4, 4), "NCHW"), ((1, 4, 4, 3), "NHWC"),
                                               ((2, 3), "NCHW")])
def test_lower_batchnorm_is_exact(shape, layout):
    b = Builder()
    x = b.input("x", shape)
    params = [b.const(np.abs(b.weights(3).data) + 0.1, f"p{i}") for i in range(4)]
    y = b.node("BatchNormalization", [x, *params], layout=layout)
    g = apply(b.build(y), "lower_batchnorm", rtol=0, atol=0)
    assert op_counts(g) == {"Mul": 1, "Add": 1}


def test_lower_global_pool_for_global_average_pool_and_reduce_mean():
    b = Builder()
    x = b.input("x", (1, 3, 5, 6))
    gap = b.node("GlobalAveragePool", [x])
    nchw = b.node("ReduceMean", [x, b.ints([2, 3])], keepdims=0)
    nhwc = b.node("ReduceMean", [x, b.ints([1, 2])])
    channels = b.node("ReduceMean", [x, b.ints([1])])  # not the image axes: stays
    g = apply(b.build(gap, nchw, nhwc, channels), "lower_global_pool")
    assert op_counts(g) == {"AveragePool": 3, "Reshape": 1, "ReduceMean": 1}


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_lower_conv_1d_makes_an_image_of_one_row(layout):
    b = Builder()
    x = b.input("x", (2, 3, 11) if layout == "NCHW" else (2, 11, 3))
    y = b.node("Conv", [x, b.weights(4, 3, 3), b.weights(4, name="b")], pads=[2, 1],
               strides=[2], dilations=[2], layout=layout)
    g = apply(b.build(y), "lower_conv_1d")
    assert op_counts(g) == {"Reshape": 2, "Conv": 1}
    conv = next(n for n in g.nodes if n.op == "Conv")
    assert conv.inputs[1].type.shape == (4, 3, 1, 3)
    assert (conv.attrs["pads"], conv.attrs["strides"], conv.attrs["dilations"]) == (
        (0, 2, 0, 1), (1, 2), (1, 2))


def test_lower_conv_1d_leaves_2d_convolutions():
    b = Builder()
    y = b.node("Conv", [b.input("x", (1, 3, 5, 5)), b.weights(4, 3, 3, 3)])
    apply(b.build(y), "lower_conv_1d", changed=False)

