"""Each supported builtin in .tflite files written here: int8 bit for bit with TFLite Micro,
float with LiteRT, so a fresh clone tests the front end without the shared models."""

import numpy as np
import pytest

from tests.tflite.oracles import (
    NONE,
    RELU,
    RELU6,
    RELU_N1_TO_1,
    SAME,
    VALID,
    check_float,
    check_int8,
    quantized,
)
from tests.tflite.writer import Model, Op, T


def _conv_model(depthwise: bool, padding: int, stride: int, dilation: int, activation: int,
                integer: bool, multiplier: int = 1):
    rng = np.random.default_rng(1)
    cin, k, h, w = 3, 3, 9, 8
    cout = cin * multiplier if depthwise else 5
    wshape = (1, k, k, cout) if depthwise else (cout, k, k, cin)
    eff = (k - 1) * dilation + 1
    if padding == SAME:
        oh, ow = -(-h // stride), -(-w // stride)
    else:
        oh, ow = (h - eff) // stride + 1, (w - eff) // stride + 1
    if depthwise:
        options = ("DepthwiseConv2DOptions", {
            "Padding": padding, "StrideH": stride, "StrideW": stride,
            "DepthMultiplier": multiplier, "FusedActivationFunction": activation,
            "DilationHFactor": dilation, "DilationWFactor": dilation})
    else:
        options = ("Conv2DOptions", {
            "Padding": padding, "StrideH": stride, "StrideW": stride,
            "FusedActivationFunction": activation, "DilationHFactor": dilation,
            "DilationWFactor": dilation})
    builtin = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
    axis = 3 if depthwise else 0
    if integer:
        ws = rng.uniform(0.005, 0.03, cout).tolist()
        tensors = [quantized("x", (1, h, w, cin), 0.04, 5),
                   T("w", wshape, "int8", rng.integers(-127, 128, wshape), scale=ws,
                     zero_point=[0] * cout, axis=axis),
                   T("b", (cout,), "int32", rng.integers(-800, 800, cout),
                     scale=[0.04 * s for s in ws], zero_point=[0] * cout),
                   quantized("y", (1, oh, ow, cout), 0.05, -7)]
    else:
        tensors = [T("x", (1, h, w, cin)), T("w", wshape, data=rng.standard_normal(wshape)),
                   T("b", (cout,), data=rng.standard_normal(cout)), T("y", (1, oh, ow, cout))]
    return Model(tensors, [Op(builtin, [0, 1, 2], [3], options)], [0], [3]), {"x": (1, h, w, cin)}


CONV_CASES = [(False, SAME, 1, 1, RELU6, 1), (False, VALID, 2, 1, NONE, 1),
              (False, SAME, 2, 2, RELU, 1), (True, SAME, 1, 1, RELU, 1),
              (True, SAME, 2, 1, RELU6, 2), (True, VALID, 1, 2, RELU_N1_TO_1, 1)]


@pytest.mark.parametrize("integer", [True, False], ids=["int8", "float"])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "dw" if c[0] else "conv")
def test_convolutions(case, integer):
    depthwise, padding, stride, dilation, activation, multiplier = case
    model, shapes = _conv_model(depthwise, padding, stride, dilation, activation, integer,
                                multiplier)
    (check_int8 if integer else check_float)(model, shapes)


@pytest.mark.parametrize("integer,per_channel", [(True, False), (True, True), (False, False)],
                         ids=["int8", "int8-per-channel", "float"])
def test_fully_connected_flattens_its_input(integer, per_channel):
    rng = np.random.default_rng(2)
    shape, units, depth = (1, 2, 3, 4), 6, 24
    if integer:
        ws = rng.uniform(0.002, 0.01, units if per_channel else 1).tolist()
        tensors = [quantized("x", shape, 0.06, -3),
                   T("w", (units, depth), "int8", rng.integers(-127, 128, (units, depth)),
                     scale=ws, zero_point=[0] * len(ws)),
                   T("b", (units,), "int32", rng.integers(-300, 300, units),
                     scale=[0.06 * s for s in (ws * units if len(ws) == 1 else ws)],
                     zero_point=[0] * units),
                   quantized("y", (1, units), 0.03, 4)]
    else:
        tensors = [T("x", shape), T("w", (units, depth), data=rng.standard_normal((units, depth))),
                   T("b", (units,), data=rng.standard_normal(units)), T("y", (1, units))]
    op = Op("FULLY_CONNECTED", [0, 1, 2], [3],
            ("FullyConnectedOptions", {"FusedActivationFunction": RELU}))
    (check_int8 if integer else check_float)(Model(tensors, [op], [0], [3]), {"x": shape})


@pytest.mark.parametrize("integer", [True, False], ids=["int8", "float"])
@pytest.mark.parametrize("builtin,padding,size,stride", [
    ("AVERAGE_POOL_2D", SAME, 3, 2), ("AVERAGE_POOL_2D", VALID, 7, 1),
    ("MAX_POOL_2D", SAME, 3, 2), ("MAX_POOL_2D", VALID, 2, 2)])
def test_pools(builtin, padding, size, stride, integer):
    h, w, c = 7, 7, 4
    out = -(-h // stride) if padding == SAME else (h - size) // stride + 1
    x = quantized("x", (1, h, w, c), 0.05, 2) if integer else T("x", (1, h, w, c))
    y = quantized("y", (1, out, out, c), 0.05, 2) if integer else T("y", (1, out, out, c))
    op = Op(builtin, [0], [1], ("Pool2DOptions", {
        "Padding": padding, "StrideH": stride, "StrideW": stride, "FilterHeight": size,
        "FilterWidth": size, "FusedActivationFunction": RELU6 if integer else NONE}))
    (check_int8 if integer else check_float)(Model([x, y], [op], [0], [1]),
                                               {"x": (1, h, w, c)})


@pytest.mark.parametrize("integer", [True, False], ids=["int8", "float"])
def test_add_with_broadcast_and_relu(integer):
    a_shape, b_shape = (1, 4, 5, 3), (1, 1, 1, 3)
    if integer:
        tensors = [quantized("a", a_shape, 0.07, -4), quantized("b", b_shape, 0.03, 9),
                   quantized("y", a_shape, 0.09, -20)]
    else:
        tensors = [T("a", a_shape), T("b", b_shape), T("y", a_shape)]
    op = Op("ADD", [0, 1], [2], ("AddOptions", {"FusedActivationFunction": RELU}))
    (check_int8 if integer else check_float)(Model(tensors, [op], [0, 1], [2]),
                                               {"a": a_shape, "b": b_shape})


@pytest.mark.parametrize("integer", [True, False], ids=["int8", "float"])
@pytest.mark.parametrize("beta", [1.0, 0.5])
@pytest.mark.parametrize("scale", [0.02, 0.3])
def test_softmax_after_reshape(integer, beta, scale):
    shape, flat = (2, 1, 10), (2, 10)
    if integer:
        tensors = [quantized("x", shape, scale, 6), quantized("r", flat, scale, 6),
                   T("y", flat, "int8", scale=[1 / 256], zero_point=[-128])]
    else:
        tensors = [T("x", shape), T("r", flat), T("y", flat)]
    tensors.append(T("shape", (2,), "int32", np.array(flat)))
    ops = [Op("RESHAPE", [0, 3], [1]),
           Op("SOFTMAX", [1], [2], ("SoftmaxOptions", {"Beta": beta}))]
    (check_int8 if integer else check_float)(Model(tensors, ops, [0], [2]), {"x": shape})


def test_tflite_micros_hello_world_model_runs_as_tflite_micro_runs_it():
    """sine_float.tflite, the hello_world model shipped inside the tflite-micro wheel."""
    import importlib.resources

    from compiler.driver import compilation
    from compiler.frontends.load import load_model
    from compiler.interpreter import run
    from tests.conftest import require_module
    from tests.helpers import assert_close
    from tests.tflite.oracles import tflm

    require_module("tflite_micro", "the tflite-micro wheel exists for Linux x86-64 only")
    package = importlib.resources.files("tflite_micro") / "python" / "tflite_micro"
    data = (package / "sine_float.tflite").read_bytes()
    final = compilation(load_model(data)).final
    oracle = tflm(data)
    for value in np.linspace(0, 2 * np.pi, 24, dtype=np.float32):
        x = np.array([[value]], np.float32)
        oracle.set_input(x, 0)
        oracle.invoke()
        assert_close(run(final, {final.inputs[0].name: x})[final.outputs[0].name],
                     oracle.get_output(0), rtol=1e-5, atol=1e-6)
