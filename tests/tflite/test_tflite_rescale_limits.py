"""8-bit operators whose scales make TFLite Micro shift by 32 bits or more are refused at load.

A fuzzed MUL with a constant input of scale 1.8e38 had a multiplier of 5e38: TFLite Micro's
MultiplyByQuantizedMultiplier then computes `x * (1 << 129)`, undefined in C (x86 shifts by 129
mod 32), Kiln's interpreter shifted by all of it (giving the zero point) and its compiled
kernel shifted an i32 by 129 (poison in LLVM): three different outputs. Each operator's largest
exponent that C defines is accepted, bit for bit with TFLite Micro and compiled equal to the
interpreter; one more is refused in one sentence naming the operator.
"""

from __future__ import annotations

import numpy as np
import pytest

from app import cli
from compiler.driver import compilation
from compiler.errors import ModelError
from compiler.frontends.load import load_model
from compiler.harness.guarded import compile_guarded
from compiler.interpreter import run
from tests.tflite.oracles import quantized, tflm
from tests.tflite.writer import Model, Op, T, write

SHAPE = (1, 2, 2, 8)
LOGISTIC_OUT, TANH_OUT = (1 / 256, -128), (1 / 128, 0)


def _one_input(builtin: str, xs: float, ys: float, out=None, options=None) -> Model:
    out = out or (ys, -3)
    return Model([quantized("x", SHAPE, xs, 2), quantized("y", SHAPE, *out)],
                 [Op(builtin, [0], [1], options)], [0], [1])


def _binary(builtin: str, real: float) -> Model:
    """MUL: 1 x 1 / ys; ADD and SUB: 2 x 1 / (2**20 x ys); both = `real`."""
    ys = 1.0 / real if builtin == "MUL" else 2.0 / ((1 << 20) * real)
    return Model([quantized("a", SHAPE, 1.0, 2), quantized("b", SHAPE, 1.0, -1),
                  quantized("y", SHAPE, ys, -3)], [Op(builtin, [0, 1], [2])], [0, 1], [2])


def _layer(builtin: str, real: float) -> Model:
    """A 1x1 convolution or a fully connected layer with weights of scale 1, input 1."""
    rng = np.random.default_rng(3)
    channels = SHAPE[-1]
    if builtin == "FULLY_CONNECTED":
        w_shape, options = (channels, channels), None
        x_shape = y_shape = (4, channels)
    elif builtin == "CONV_2D":
        w_shape = (channels, 1, 1, channels)
        options = ("Conv2DOptions", {"Padding": 1, "StrideW": 1, "StrideH": 1})
        x_shape = y_shape = SHAPE
    else:
        w_shape = (1, 1, 1, channels)
        options = ("DepthwiseConv2DOptions", {"Padding": 1, "StrideW": 1, "StrideH": 1,
                                              "DepthMultiplier": 1})
        x_shape = y_shape = SHAPE
    return Model([quantized("x", x_shape, 1.0, 2),
                  T("w", w_shape, "int8", rng.integers(-127, 128, w_shape), scale=[1.0],
                    zero_point=[0]),
                  T("b", (channels,), "int32", rng.integers(-9, 9, channels), scale=[1.0],
                    zero_point=[0]),
                  quantized("y", y_shape, 1.0 / real, -3)],
                 [Op(builtin, [0, 1, 2], [3], options)], [0], [3])


def _mean(real: float) -> Model:
    """MEAN over 2 x 2 pixels: two bits of 1/4 fold into its shift."""
    return Model([quantized("x", SHAPE, 1.0, 2), T("axes", (2,), "int32", np.array([1, 2])),
                  quantized("y", (1, 1, 1, SHAPE[-1]), 1.0 / real, -3)],
                 [Op("MEAN", [0, 1], [2], ("ReducerOptions", {"KeepDims": True}))], [0], [2])


def _hard_swish(real: float) -> Model:
    """HARD_SWISH's relu multiplier: input scale / 128 / (3 / 32768) = `real`."""
    xs = real * 128 * 3 / 32768
    return _one_input("HARD_SWISH", xs, xs)


BUILDERS = {  # builtin -> (model of multiplier `real`, the largest exponent accepted)
    "MUL": (lambda r: _binary("MUL", r), 31),
    "ADD": (lambda r: _binary("ADD", r), 0),
    "SUB": (lambda r: _binary("SUB", r), 0),
    "CONV_2D": (lambda r: _layer("CONV_2D", r), 31),
    "DEPTHWISE_CONV_2D": (lambda r: _layer("DEPTHWISE_CONV_2D", r), 31),
    "FULLY_CONNECTED": (lambda r: _layer("FULLY_CONNECTED", r), 31),
    "RELU": (lambda r: _one_input("RELU", 1.0, 1.0 / r), 31),
    "QUANTIZE": (lambda r: _one_input("QUANTIZE", 1.0, 1.0 / r), 31),
    "LEAKY_RELU": (lambda r: _one_input("LEAKY_RELU", 1.0, 1.0 / r, options=(
        "LeakyReluOptions", {"Alpha": 0.5})), 31),
    "LOGISTIC": (lambda r: _one_input("LOGISTIC", r / 2**27, 0, LOGISTIC_OUT), 62),
    "TANH": (lambda r: _one_input("TANH", r / 2**27, 0, TANH_OUT), 62),
    "HARD_SWISH": (_hard_swish, 31),
    "MEAN": (_mean, 33),
}


def _multiplier(exponent: int) -> float:
    """A multiplier whose QuantizeMultiplier exponent is `exponent`: 1.5 x 2**(exponent - 1)."""
    return 1.5 * 2.0 ** (exponent - 1)


@pytest.mark.parametrize("builtin", BUILDERS)
def test_the_largest_defined_exponent_runs_as_tflite_micro(builtin):
    build, limit = BUILDERS[builtin]
    model = build(_multiplier(limit))
    data = write(model)
    oracle = tflm(data)
    graph = load_model(data)
    runner = compile_guarded(compilation(load_model(data)).prepared, "host")
    try:
        for seed in range(3):
            rng = np.random.default_rng(seed)
            feeds = {model.tensors[i].name: rng.integers(-128, 128, model.tensors[i].shape)
                     .astype(np.int8) for i in model.inputs}
            for i, value in enumerate(feeds.values()):
                oracle.set_input(value, i)
            oracle.invoke()
            ours = run(graph, feeds)[graph.outputs[0].name]
            np.testing.assert_array_equal(ours, oracle.get_output(0), err_msg="TFLite Micro")
            compiled = runner.run(feeds)[graph.outputs[0].name]
            np.testing.assert_array_equal(compiled, ours, err_msg="compiled")
    finally:
        runner.close()


@pytest.mark.parametrize("builtin", BUILDERS)
def test_one_more_bit_of_exponent_is_refused_at_load(builtin):
    build, limit = BUILDERS[builtin]
    with pytest.raises(ModelError, match=rf"node {builtin} #0: its multiplier .* needs an "
                                         rf"exponent of {limit + 1}, above {limit}"):
        load_model(write(build(_multiplier(limit + 1))))


@pytest.mark.parametrize("builtin", ["LOGISTIC", "TANH"])
def test_a_sigmoid_input_scale_below_two_to_the_minus_28_is_refused_at_load(builtin):
    """Its radius divides by 1LL << (a negative exponent): x86's TFLite Micro then jumps from
    the lowest code to the highest (found by the exactness campaign); the exponent 0 runs."""
    build, _ = BUILDERS[builtin]
    with pytest.raises(ModelError, match=rf"node {builtin} #0: its multiplier .* needs an "
                                         r"exponent of -1, below 0: TFLite Micro's input radius"):
        load_model(write(build(0.375)))
    load_model(write(build(0.75)))


def test_the_fuzzed_mul_before_a_depthwise_convolution_is_refused_in_one_line(tmp_path,
                                                                              capsys):
    """tflite-bytes-24 with a constant MUL operand of a scale the scale rule takes (2**30)."""
    rng = np.random.default_rng(24)
    tensors = [quantized("t0", (1, 5, 8, 1), 0.14128879, 104),
               T("t1", (1, 5, 8, 1), "int8", rng.integers(-128, 128, (1, 5, 8, 1)),
                 scale=[2.0**30], zero_point=[28]),
               quantized("t2", (1, 5, 8, 1), 0.05164412, -70),
               T("t3", (1, 2, 3, 2), "int8", rng.integers(-127, 128, (1, 2, 3, 2)),
                 scale=[0.09130932, 0.05102136], zero_point=[0, 0], axis=3),
               T("t4", (2,), "int32", np.array([1538, 1360]),
                 scale=[0.00471559, 0.00263495], zero_point=[0, 0]),
               quantized("t5", (1, 5, 8, 2), 0.14184292, -34)]
    ops = [Op("MUL", [0, 1], [2]),
           Op("DEPTHWISE_CONV_2D", [2, 3, 4], [5], ("DepthwiseConv2DOptions", {
               "Padding": 0, "StrideW": 1, "StrideH": 1, "DepthMultiplier": 2}))]
    path = tmp_path / "mul_dw.tflite"
    path.write_bytes(write(Model(tensors, ops, [0], [5])))
    for args in (["inspect", path], ["run", path], ["compile", path, "-o", tmp_path / "out"]):
        assert cli.main([str(a) for a in args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("kiln: error: ") and err.count("\n") == 1, err
        assert "mul_dw.tflite" in err and "node MUL #0" in err, err
        assert "exponent of 32, above 31" in err and "undefined" in err, err
    assert not (tmp_path / "out").exists()
