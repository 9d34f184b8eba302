"""Fusion passes: BatchNormalization and per-channel arithmetic into layers, Pad into windows,
activations into their producer, and Clip/Relu merging."""

import math

import numpy as np
import pytest

from tests.passes.util import Builder, apply, op_counts


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_fold_batchnorm_into_conv(layout):
    b = Builder()
    x = b.input("x", (1, 3, 6, 6) if layout == "NCHW" else (1, 6, 6, 3))
    y = b.node("Conv", [x, b.weights(4, 3, 3, 3), b.weights(4, name="b")], layout=layout)
    params = [b.positive(4, name=f"p{i}") for i in range(4)]
    y = b.node("BatchNormalization", [y, *params], layout=layout)
    g = apply(b.build(y), "fold_batchnorm", rtol=1e-4, atol=1e-5)
    assert op_counts(g) == {"Conv": 1}


def test_fold_batchnorm_into_fully_connected_but_not_past_an_activation():
    b = Builder()
    x = b.input("x", (2, 5))
    fc = b.node("FullyConnected", [x, b.weights(4, 5)])
    y = b.node("BatchNormalization", [fc, *(b.positive(4, name=f"p{i}") for i in range(4))])
    relu_fc = b.node("FullyConnected", [x, b.weights(4, 5, name="w2")], activation="Relu")
    z = b.node("BatchNormalization", [relu_fc, *(b.positive(4, name=f"q{i}") for i in range(4))])
    g = apply(b.build(y, z), "fold_batchnorm", rtol=1e-4, atol=1e-5)
    assert op_counts(g) == {"FullyConnected": 2, "BatchNormalization": 1}


@pytest.mark.parametrize("trans_b", [0, 1])
def test_fold_batchnorm_into_gemm_folds_beta_too(trans_b):
    b = Builder()
    x = b.input("x", (3, 5))
    w = b.weights(*((4, 5) if trans_b else (5, 4)))
    y = b.node("Gemm", [x, w, b.weights(3, 4, name="c")], transB=trans_b, beta=0.5)
    y = b.node("BatchNormalization", [y, *(b.positive(4, name=f"p{i}") for i in range(4))])
    g = apply(b.build(y), "fold_batchnorm", rtol=1e-4, atol=1e-5)
    assert op_counts(g) == {"Gemm": 1}


@pytest.mark.parametrize("op", ["Mul", "Div", "Add", "Sub"])
def test_fold_channel_affine_into_conv(op):
    b = Builder()
    x = b.input("x", (1, 3, 6, 6))
    y = b.node("Conv", [x, b.weights(4, 3, 3, 3)])
    y = b.node(op, [y, b.positive(4, 1, 1, name="c")])
    g = apply(b.build(y), "fold_channel_affine", rtol=1e-4, atol=1e-5)
    assert op_counts(g) == {"Conv": 1}


def test_fold_channel_affine_leaves_spatial_constants_and_reversed_operands():
    b = Builder()
    x = b.input("x", (1, 3, 6, 6))
    conv = b.node("Conv", [x, b.weights(4, 3, 3, 3)], pads=(1, 1, 1, 1))
    spatial = b.node("Add", [conv, b.weights(1, 6, 6, name="s")])
    fc = b.node("FullyConnected", [b.input("v", (1, 5)), b.weights(4, 5, name="w2")])
    reversed_sub = b.node("Sub", [b.weights(4, name="c"), fc])
    apply(b.build(spatial, reversed_sub), "fold_channel_affine", changed=False)


def test_merge_pad_into_conv_and_average_pool():
    b = Builder()
    x = b.input("x", (1, 6, 6, 3))
    pad = b.node("Pad", [x, b.ints([0, 1, 2, 0, 0, 1, 2, 0])])  # H and W of NHWC
    conv = b.node("Conv", [pad, b.weights(4, 3, 3, 3)], layout="NHWC", pads=(1, 0, 1, 0))
    pad2 = b.node("Pad", [x, b.ints([0, 0, 1, 1, 0, 0, 1, 1])])
    pool = b.node("AveragePool", [pad2], kernel_shape=(3, 3))  # NCHW: pads H, W
    g = apply(b.build(conv, pool), "merge_pad")
    assert op_counts(g) == {"Conv": 1, "AveragePool": 1}
    merged = next(n for n in g.nodes if n.op == "Conv")
    assert merged.attrs["pads"] == (2, 2, 2, 2)
    assert next(n for n in g.nodes if n.op == "AveragePool").attrs["count_include_pad"] == 1


def test_merge_pad_into_max_pool_needs_minus_infinity():
    b = Builder()
    x = b.input("x", (1, 3, 6, 6))
    pads = b.ints([0, 0, 1, 1, 0, 0, 1, 1])
    low = b.node("Pad", [x, pads, b.const(np.float32(-math.inf), "ninf")])
    merged = b.node("MaxPool", [low], kernel_shape=(3, 3))
    zero = b.node("MaxPool", [b.node("Pad", [x, pads])], kernel_shape=(3, 3))  # 0 is not -inf
    g = apply(b.build(merged, zero), "merge_pad")
    assert op_counts(g) == {"MaxPool": 2, "Pad": 1}


@pytest.mark.parametrize(("act", "inputs", "attrs"), [
    ("Relu", [], {}), ("LeakyRelu", [], {"alpha": 0.2}), ("Clip", [0.0, 6.0], {})])
def test_fuse_activations_into_conv_fc_and_add(act, inputs, attrs):
    b = Builder()
    x = b.input("x", (1, 3, 5, 5))
    bounds = [b.const(np.float32(v), f"bound{i}") for i, v in enumerate(inputs)]
    conv = b.node(act, [b.node("Conv", [x, b.weights(4, 3, 3, 3)]), *bounds], **attrs)
    fc = b.node(act, [b.node("FullyConnected", [b.input("v", (2, 5)), b.weights(3, 5, name="w2")]),
                      *bounds], **attrs)
    add = b.node(act, [b.node("Add", [conv, conv]), *bounds], **attrs)
    g = apply(b.build(add, fc), "fuse_activations", rtol=0, atol=0)
    assert op_counts(g) == {"Conv": 1, "FullyConnected": 1, "Add": 1}
    assert {n.attrs["activation"] for n in g.nodes} == {act}


def test_fuse_activations_needs_the_producer_to_have_no_other_reader():
    b = Builder()
    x = b.input("x", (1, 3, 5, 5))
    conv = b.node("Conv", [x, b.weights(4, 3, 3, 3)])
    apply(b.build(b.node("Relu", [conv]), conv), "fuse_activations", changed=False)


@pytest.mark.parametrize(("first", "second", "expect"), [
    ("relu", "relu6", {"Clip": 1}), ("relu6", "relu", {"Clip": 1}),
    ("relu", "relu", {"Relu": 1}), ("clip_neg", "relu6", {"Clip": 1})])
def test_merge_clips(first, second, expect):
    b = Builder()
    x = b.input("x", (3, 4))

    def apply_one(kind, value):
        if kind == "relu":
            return b.node("Relu", [value])
        low, high = {"relu6": (0.0, 6.0), "clip_neg": (-3.0, -1.0)}[kind]
        return b.node("Clip", [value, b.const(np.float32(low)), b.const(np.float32(high))])

    g = apply(b.build(apply_one(second, apply_one(first, x))), "merge_clips", rtol=0, atol=0,
              feeds={"x": np.linspace(-8, 8, 12, dtype=np.float32).reshape(3, 4)})
    assert op_counts(g) == expect
