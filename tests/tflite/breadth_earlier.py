"""Generated cases of the TFLite builtins Kiln read before the breadth work (layers, pooling,
ADD/SUB/MUL, activations, data movement), in the same harness as the new ones."""

from __future__ import annotations

import numpy as np

from tests.tflite.case_builders import SCALE, ZERO_POINT, Case, one, two
from tests.tflite.case_builders import const as _const
from tests.tflite.case_builders import tensor as _t
from tests.tflite.writer import Model, Op, T


def _binary_fused(builtin: str, activation: int, out_quant=(0.08, -6)):
    def build(integer):
        options = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions"}.get(builtin)
        opts = (options, {"FusedActivationFunction": activation}) if options else None
        tensors = [_t("a", (1, 3, 4, 5), integer), _t("b", (1, 1, 4, 5), integer),
                   _t("y", (1, 3, 4, 5), integer,
                      out_quant if builtin in ("ADD", "SUB", "MUL") else (SCALE, ZERO_POINT))]
        return (Model(tensors, [Op(builtin, [0, 1], [2], opts)], [0, 1], [2]),
                {"a": (1, 3, 4, 5), "b": (1, 1, 4, 5)})
    return build


def _layer(builtin: str):
    def build(integer):
        rng = np.random.default_rng(3)
        shape = (1, 6, 5, 4)
        if builtin == "FULLY_CONNECTED":
            wshape, out, axis, options = (7, 120), (1, 7), 0, ("FullyConnectedOptions", {
                "FusedActivationFunction": 1})
        elif builtin == "CONV_2D":
            wshape, out, axis, options = (3, 3, 3, 4), (1, 3, 3, 3), 0, ("Conv2DOptions", {
                "Padding": 0, "StrideH": 2, "StrideW": 2, "DilationHFactor": 1,
                "DilationWFactor": 1, "FusedActivationFunction": 3})
        else:
            wshape, out, axis, options = (1, 3, 3, 8), (1, 6, 5, 8), 3, (
                "DepthwiseConv2DOptions", {"Padding": 0, "StrideH": 1, "StrideW": 1,
                                           "DepthMultiplier": 2, "DilationHFactor": 1,
                                           "DilationWFactor": 1, "FusedActivationFunction": 1})
        cout = wshape[axis]
        if integer:
            ws = rng.uniform(0.005, 0.03, cout).tolist()
            w = T("w", wshape, "int8", rng.integers(-127, 128, wshape), scale=ws,
                  zero_point=[0] * cout, axis=axis)
            if builtin == "FULLY_CONNECTED":
                ws = [ws[0]] * cout
                w = T("w", wshape, "int8", rng.integers(-127, 128, wshape), scale=ws[:1],
                      zero_point=[0])
            bias = T("bias", (cout,), "int32", rng.integers(-900, 900, cout),
                     scale=[SCALE * s for s in ws], zero_point=[0] * cout)
            y = _t("y", out, True, (0.1, -3))
        else:
            w = T("w", wshape, data=rng.standard_normal(wshape))
            bias = T("bias", (cout,), data=rng.standard_normal(cout))
            y = _t("y", out, False)
        tensors = [_t("x", shape, integer), w, bias, y]
        return Model(tensors, [Op(builtin, [0, 1, 2], [3], options)], [0], [3]), {"x": shape}
    return build


def _pool(builtin: str):
    def build(integer):
        options = ("Pool2DOptions", {"Padding": 0, "StrideW": 2, "StrideH": 2, "FilterWidth": 3,
                                     "FilterHeight": 2, "FusedActivationFunction": 0})
        return one(builtin, (1, 6, 7, 3), [(1, 3, 4, 3)], integer, (), options)
    return build


def _softmax(integer):
    out_quant = (1 / 256, -128)
    return one("SOFTMAX", (1, 2, 10), [(1, 2, 10)], integer, (),
               ("SoftmaxOptions", {"Beta": 1.0}), out_quant=out_quant)


def _fixed_activation(builtin: str, out_quant):
    def build(integer):
        return one(builtin, (2, 3, 7), [(2, 3, 7)], integer, out_quant=out_quant)
    return build


def _leaky_relu(integer):
    return one("LEAKY_RELU", (2, 3, 7), [(2, 3, 7)], integer, (),
               ("LeakyReluOptions", {"Alpha": 0.25}), out_quant=(0.04, -20))


def _reshape_like(builtin: str, out):
    def build(integer):
        consts = [_const("shape", list(out))] if builtin == "RESHAPE" else (
            [_const("axis", 1)] if builtin == "EXPAND_DIMS" else [])
        options = ("SqueezeOptions", {}) if builtin == "SQUEEZE" else None
        return one(builtin, (2, 1, 6), [out], integer, consts, options)
    return build


def _transpose(integer):
    return one("TRANSPOSE", (2, 3, 4), [(4, 2, 3)], integer, [_const("perm", [2, 0, 1])])


def _pad(builtin: str):
    def build(integer):
        consts = [_const("paddings", [[0, 0], [1, 2], [2, 0]])]
        if builtin == "PADV2":
            consts.append(T("value", (), "int8", np.array(9), scale=[SCALE],
                            zero_point=[ZERO_POINT]) if integer else
                          T("value", (), data=np.array(0.75, np.float32)))
        return one(builtin, (2, 3, 4), [(2, 6, 6)], integer, consts)
    return build


def _concat(builtin: str):
    def build(integer):
        shapes = [(2, 3, 4), (2, 3, 4)] if builtin == "PACK" else [(2, 3, 4), (2, 1, 4)]
        out = (2, 2, 3, 4) if builtin == "PACK" else (2, 4, 4)
        options = ("PackOptions", {"ValuesCount": 2, "Axis": 1}) if builtin == "PACK" else (
            "ConcatenationOptions", {"Axis": 1, "FusedActivationFunction": 0})
        return two(builtin, shapes[0], shapes[1], out, integer, options)
    return build


def _strided_slice(integer):
    return one("STRIDED_SLICE", (3, 6, 5), [(2, 5)], integer,
               [_const("begin", [1, 0, -1]), _const("end", [3, 6, -6]),
                _const("strides", [1, 1, -1])],
               ("StridedSliceOptions", {"BeginMask": 0, "EndMask": 0, "ShrinkAxisMask": 2}))


def _shape(integer):
    tensors = [_t("x", (2, 3, 4), integer), T("s", (3,), "int32"), _t("z", (2, 3, 4), integer)]
    ops = [Op("SHAPE", [0], [1], ("ShapeOptions", {"OutType": 2})), Op("RESHAPE", [0, 1], [2])]
    return Model(tensors, ops, [0], [2]), {"x": (2, 3, 4)}


def _mean(axes, out, keep: bool):
    def build(integer):
        return one("MEAN", (1, 4, 5, 3), [out], integer, [_const("axes", axes)],
                   ("ReducerOptions", {"KeepDims": keep}), out_quant=(0.03, 2))
    return build


def _quantize(integer):
    if integer:
        return one("QUANTIZE", (2, 3, 4), [(2, 3, 4)], True, out_quant=(0.09, 11))
    tensors = [T("x", (2, 3, 4)), T("y", (2, 3, 4), "int8", scale=[0.02], zero_point=[-9])]
    return Model(tensors, [Op("QUANTIZE", [0], [1])], [0], [1]), {"x": (2, 3, 4)}


def _dequantize(integer):
    tensors = [_t("x", (2, 3, 4), True), T("y", (2, 3, 4))]
    return Model(tensors, [Op("DEQUANTIZE", [0], [1])], [0], [1]), {"x": (2, 3, 4)}


EARLIER_CASES = [
    Case("ADD", "", _binary_fused("ADD", 1)), Case("SUB", "", _binary_fused("SUB", 0)),
    Case("MUL", "", _binary_fused("MUL", 3)),
    Case("MINIMUM", "", _binary_fused("MINIMUM", 0)),
    Case("MAXIMUM", "", _binary_fused("MAXIMUM", 0)),
    Case("CONV_2D", "", _layer("CONV_2D")),
    Case("DEPTHWISE_CONV_2D", "", _layer("DEPTHWISE_CONV_2D")),
    Case("FULLY_CONNECTED", "", _layer("FULLY_CONNECTED")),
    Case("AVERAGE_POOL_2D", "", _pool("AVERAGE_POOL_2D")),
    Case("MAX_POOL_2D", "", _pool("MAX_POOL_2D")), Case("SOFTMAX", "", _softmax),
    Case("RELU", "", _fixed_activation("RELU", (0.03, -50))),
    Case("RELU6", "", _fixed_activation("RELU6", (SCALE, ZERO_POINT))),
    Case("LOGISTIC", "", _fixed_activation("LOGISTIC", (1 / 256, -128))),
    Case("TANH", "", _fixed_activation("TANH", (1 / 128, 0))),
    Case("HARD_SWISH", "", _fixed_activation("HARD_SWISH", (0.03, -40))),
    Case("LEAKY_RELU", "", _leaky_relu),
    Case("RESHAPE", "", _reshape_like("RESHAPE", (3, 4))),
    Case("SQUEEZE", "", _reshape_like("SQUEEZE", (2, 6))),
    Case("EXPAND_DIMS", "", _reshape_like("EXPAND_DIMS", (2, 1, 1, 6))),
    Case("TRANSPOSE", "", _transpose), Case("PAD", "", _pad("PAD")),
    Case("PADV2", "", _pad("PADV2")), Case("CONCATENATION", "", _concat("CONCATENATION")),
    Case("PACK", "", _concat("PACK")), Case("STRIDED_SLICE", "", _strided_slice),
    Case("SHAPE", "", _shape), Case("MEAN", "", _mean([1, 2], (1, 1, 1, 3), True)),
    Case("MEAN", "channels", _mean([3], (1, 4, 5), False)),
    Case("MEAN", "rows", _mean([1], (1, 1, 5, 3), True)),
    Case("QUANTIZE", "", _quantize),
    Case("DEQUANTIZE", "", _dequantize, ("int8",)),
]
