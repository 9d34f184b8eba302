"""Element-wise, activation, quantization and data-movement builtins in .tflite files written
here: int8 bit for bit with TFLite Micro (every input code for one-input operators), float with
LiteRT."""

import numpy as np
import pytest

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.tflite.oracles import (
    NONE,
    RELU,
    RELU6,
    check_float,
    check_int8,
    quantized,
    tflm,
)
from tests.tflite.writer import Model, Op, T, write

SHAPE = (1, 4, 4, 16)  # 256 elements: every int8 code appears for the one-input operators


@pytest.mark.parametrize("integer", [True, False], ids=["int8", "float"])
@pytest.mark.parametrize("builtin,options", [
    ("ADD", ("AddOptions", {"FusedActivationFunction": RELU6})),
    ("SUB", ("SubOptions", {"FusedActivationFunction": NONE})),
    ("SUB", ("SubOptions", {"FusedActivationFunction": RELU})),
    ("MUL", ("MulOptions", {"FusedActivationFunction": NONE})),
    ("MINIMUM", None), ("MAXIMUM", None)])
def test_binary(builtin, options, integer):
    b_shape = (1, 1, 4, 16)
    if integer:
        same = builtin in ("MINIMUM", "MAXIMUM")  # TFLite compares the stored integers
        tensors = [quantized("a", SHAPE, 0.05, 3), quantized("b", b_shape, 0.05 if same else 0.08,
                                                             3 if same else -11),
                   quantized("y", SHAPE, 0.05 if same else 0.11, 3 if same else 7)]
    else:
        tensors = [T("a", SHAPE), T("b", b_shape), T("y", SHAPE)]
    model = Model(tensors, [Op(builtin, [0, 1], [2], options)], [0, 1], [2])
    (check_int8 if integer else check_float)(model, {"a": SHAPE, "b": b_shape})


ACTIVATIONS = [("RELU", None), ("RELU6", None),
               ("LEAKY_RELU", ("LeakyReluOptions", {"Alpha": 0.2}))]


@pytest.mark.parametrize("builtin,options", ACTIVATIONS)
@pytest.mark.parametrize("params", [(0.05, -10, 0.04, -128), (0.02, 30, 0.02, 30),
                                    (0.1, 0, 0.03, -20)])
def test_int8_activations_are_tflite_micros_tables(builtin, options, params):
    xs, xz, ys, yz = params
    if builtin == "RELU6":
        ys, yz = xs, xz  # TFLite Micro clamps the stored integers: the converter keeps them
    model = Model([quantized("x", SHAPE, xs, xz), quantized("y", SHAPE, ys, yz)],
                  [Op(builtin, [0], [1], options)], [0], [1])
    check_int8(model, {"x": SHAPE})


@pytest.mark.parametrize("builtin,options", ACTIVATIONS + [
    ("RELU_N1_TO_1", None), ("LOGISTIC", None), ("TANH", None), ("HARD_SWISH", None)])
def test_float_activations(builtin, options):
    model = Model([T("x", SHAPE), T("y", SHAPE)], [Op(builtin, [0], [1], options)], [0], [1])
    check_float(model, {"x": SHAPE})


@pytest.mark.parametrize("out", [(0.03, 5), (0.011, -100)])
def test_quantize_requantizes_int8(out):
    model = Model([quantized("x", SHAPE, 0.05, -3), quantized("y", SHAPE, *out)],
                  [Op("QUANTIZE", [0], [1])], [0], [1])
    check_int8(model, {"x": SHAPE})


def test_quantize_and_dequantize_around_a_layer():
    tensors = [T("x", SHAPE), quantized("q", SHAPE, 0.0123, 4), quantized("r", SHAPE, 0.0123, 4),
               T("y", SHAPE)]
    ops = [Op("QUANTIZE", [0], [1]), Op("RELU", [1], [2]), Op("DEQUANTIZE", [2], [3])]
    data = write(Model(tensors, ops, [0], [3]))
    oracle = tflm(data)
    final = compilation(load_model(data)).final
    # Values on the rounding ties: half away from zero, not to even.
    x = ((np.arange(-128, 128) + 0.5) * 0.0123).astype(np.float32).reshape(SHAPE)
    oracle.set_input(x, 0)
    oracle.invoke()
    want = oracle.get_output(0)
    ours = run(final, {"x": x})[final.outputs[0].name]
    assert np.array_equal(ours, want)


@pytest.mark.parametrize("integer", [True, False], ids=["int8", "float"])
def test_data_movement(integer):
    """PAD, TRANSPOSE, STRIDED_SLICE, CONCATENATION, EXPAND_DIMS, SQUEEZE, PACK in one model."""
    x_shape = (1, 3, 4, 2)

    def t(name, shape):
        return quantized(name, shape, 0.05, -6) if integer else T(name, shape)

    tensors = [t("x", x_shape),                                                     # 0
               T("paddings", (4, 2), "int32", np.array([[0, 0], [1, 2], [0, 1], [0, 0]])),
               t("padded", (1, 6, 5, 2)),                                           # 2
               T("perm", (4,), "int32", np.array([0, 2, 1, 3])),
               t("transposed", (1, 5, 6, 2)),                                       # 4
               T("begin", (4,), "int32", np.array([0, 1, 0, 0])),
               T("end", (4,), "int32", np.array([1, 5, 6, 2])),
               T("strides", (4,), "int32", np.array([1, 2, 1, 1])),
               t("sliced", (1, 2, 6, 2)),                                           # 8
               t("joined", (1, 2, 6, 4)),
               T("axis", (1,), "int32", np.array([0])),
               t("expanded", (1, 1, 2, 6, 4)),                                      # 11
               t("squeezed", (2, 6, 4)),
               t("packed", (2, 2, 6, 4))]                                           # 13
    ops = [Op("PAD", [0, 1], [2]), Op("TRANSPOSE", [2, 3], [4]),
           Op("STRIDED_SLICE", [4, 5, 6, 7], [8], ("StridedSliceOptions", {"EndMask": 8})),
           Op("CONCATENATION", [8, 8], [9], ("ConcatenationOptions", {"Axis": 3})),
           Op("EXPAND_DIMS", [9, 10], [11]),
           Op("SQUEEZE", [11], [12], ("SqueezeOptions", {})),
           Op("PACK", [12, 12], [13], ("PackOptions", {"ValuesCount": 2, "Axis": 0}))]
    model = Model(tensors, ops, [0], [13])
    (check_int8 if integer else check_float)(model, {"x": x_shape})


@pytest.mark.parametrize("integer", [True, False], ids=["int8", "float"])
@pytest.mark.parametrize("keep", [True, False])
def test_mean_over_the_image(integer, keep):
    out_shape = (1, 1, 1, 16) if keep else (1, 16)
    x = quantized("x", SHAPE, 0.05, -3) if integer else T("x", SHAPE)
    y = quantized("y", out_shape, 0.02, 9) if integer else T("y", out_shape)
    model = Model([x, T("axes", (2,), "int32", np.array([1, 2])), y],
                  [Op("MEAN", [0, 1], [2], ("ReducerOptions", {"KeepDims": keep}))], [0], [2])
    (check_int8 if integer else check_float)(model, {"x": SHAPE})


@pytest.mark.parametrize("builtin,out", [("LOGISTIC", (1 / 256, -128)), ("TANH", (1 / 128, 0))])
@pytest.mark.parametrize("params", [(0.05, -10), (0.02, 30), (0.1, 0), (0.003, -128),
                                    (0.5, 100)])
def test_int8_sigmoid_and_tanh_are_tflite_micros_fixed_point(builtin, out, params):
    model = Model([quantized("x", SHAPE, *params), quantized("y", SHAPE, *out)],
                  [Op(builtin, [0], [1])], [0], [1])
    check_int8(model, {"x": SHAPE})


@pytest.mark.parametrize("params", [(0.05, -10, 0.04, -60), (0.02, 30, 0.01, -128),
                                    (0.1, 0, 0.05, -20), (0.2, -100, 0.3, -90),
                                    (0.004, 5, 0.002, -3)])
def test_int8_hard_swish_is_tflite_micros_fixed_point(params):
    xs, xz, ys, yz = params
    model = Model([quantized("x", SHAPE, xs, xz), quantized("y", SHAPE, ys, yz)],
                  [Op("HARD_SWISH", [0], [1])], [0], [1])
    check_int8(model, {"x": SHAPE})


@pytest.mark.parametrize("alpha,params", [
    (0.25, (0.05, 3, 0.04, -20)),  # in x alpha / out is 0.3125 in float32, a little more in double
    (0.15208126113950587, (0.07170243824079797, 60, 0.10671683702562339, -60)),
    (0.1, (0.14871697080606214, -128, 0.15928926598753587, -128)),  # the identity multiplier
])
def test_int8_leaky_relu_forms_its_multipliers_in_double(alpha, params):
    """Parameters where forming LEAKY_RELU's multipliers in float32 first moves an output."""
    xs, xz, ys, yz = params
    model = Model([quantized("x", SHAPE, xs, xz), quantized("y", SHAPE, ys, yz)],
                  [Op("LEAKY_RELU", [0], [1], ("LeakyReluOptions", {"Alpha": alpha}))], [0], [1])
    check_int8(model, {"x": SHAPE})
