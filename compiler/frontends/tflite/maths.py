"""TFLite's arithmetic builtins beyond ADD/SUB/MUL: unary maths, division, norms and sums.

The builtins are the unary maths, DIV, SQUARED_DIFFERENCE, FLOOR_DIV, FLOOR_MOD, PRELU, ELU,
LOG_SOFTMAX, L2_NORMALIZATION, SUM and ADD_N. Float tensors become Kiln's element-wise
operators, each computing what TFLite's float kernel computes (RSQRT is 1 / sqrt(x), FLOOR_MOD
takes the divisor's sign, L2_NORMALIZATION divides by max(norm, 1e-6) over the last axis). For
8 bits TFLite Micro runs ABS, ELU and RSQRT, each a function of one stored value, which become
256-entry tables of its arithmetic; the others are refused for 8 bits by name.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import float_activation, is_integer, output_range
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.qmath import tflite_log_softmax, tflite_tables
from compiler.qmath.requant import quantize_multiplier

_UNARY = {"ABS": "Abs", "EXP": "Exp", "LOG": "Log", "NEG": "Neg", "SQRT": "Sqrt", "SIN": "Sin",
          "COS": "Cos", "CEIL": "Ceil", "FLOOR": "Floor", "ROUND": "Round"}
# Builtins TFLite Micro also runs on int8 tensors, by a table of its arithmetic.
_TABLES = {"ABS": tflite_tables.absolute, "ELU": tflite_tables.elu,
           "RSQRT": tflite_tables.rsqrt}
_L2_EPSILON = 1e-6  # TFLite's L2Normalization floor under the norm


def _float_only(b: Builder, op: Operator) -> None:
    x = b.tensor(op.inputs[0])
    if is_integer(x) or x.dtype != "float32":
        raise ModelError(f"the {x.dtype} {op.builtin} is not supported (TFLite Micro runs it on "
                         "float32 only)")


def _table(b: Builder, op: Operator) -> None:
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    if x.dtype != "int8" or out.dtype != "int8":
        raise ModelError(f"the {x.dtype} {op.builtin} is not supported (8 bits: int8 only)")
    table = _TABLES[op.builtin](float(x.scale[0]), int(x.zero_point[0]), float(out.scale[0]),
                                int(out.zero_point[0]))
    scale, zp = b.scale_and_zero_point(out)
    b.add("IntLookupTable", [b.value(op.inputs[0]), b.constant(f"{op.builtin}_table", table),
                             scale, zp], {"function": op.builtin}, out=op.outputs[0])


def unary(b: Builder, op: Operator) -> None:
    """One-input maths: ABS, EXP, LOG, NEG, SQRT, SIN, COS, CEIL, FLOOR, ROUND, RSQRT, SQUARE, ELU.

    ROUND takes halves to the even neighbour, as TFLite's kernel does.
    """
    if op.builtin in _TABLES and is_integer(b.tensor(op.inputs[0])):
        _table(b, op)
        return
    _float_only(b, op)
    x = b.value(op.inputs[0])
    if op.builtin == "RSQRT":
        b.add("Reciprocal", [b.add("Sqrt", [x])], out=op.outputs[0])
    elif op.builtin == "SQUARE":
        b.add("Mul", [x, x], out=op.outputs[0])
    elif op.builtin == "ELU":
        b.add("Elu", [x], {"alpha": 1.0}, out=op.outputs[0])
    else:
        b.add(_UNARY[op.builtin], [x], out=op.outputs[0])


def _fused(op: Operator) -> bool:
    return op.options is not None and hasattr(op.options, "FusedActivationFunction") and int(
        op.options.FusedActivationFunction()) != 0


def squared_difference_int8(b: Builder, op: Operator) -> None:
    """TFLite Micro's 8-bit SQUARED_DIFFERENCE (IntSquaredDifference)."""
    a, c, out = (b.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    if a.dtype != "int8" or c.dtype != "int8" or out.dtype != "int8":
        raise ModelError("an 8-bit SQUARED_DIFFERENCE takes int8 tensors only")
    scales = [float(np.float32(t.scale[0])) for t in (a, c, out)]
    twice = 2.0 * max(scales[0], scales[1])
    reals = [scales[0] / twice, scales[1] / twice,
             twice * twice / (float(1 << 2 * 7) * scales[2])]
    (ma, sa), (mc, sc), (mo, so) = ((int(v[0]) for v in quantize_multiplier(np.array([r])))
                                    for r in reals)
    b.add("IntSquaredDifference", [b.value(op.inputs[0]), b.value(op.inputs[1])], {
        "a_zero_point": int(a.zero_point[0]), "a_multiplier": ma, "a_shift": sa,
        "b_zero_point": int(c.zero_point[0]), "b_multiplier": mc, "b_shift": sc,
        "output_multiplier": mo, "output_shift": so, "y_scale": scales[2],
        "y_zero_point": int(out.zero_point[0])}, out=op.outputs[0])


def div_int8(b: Builder, op: Operator) -> None:
    """TFLite Micro's 8-bit DIV (IntDiv): multiplier in1 / (in2 out), scales' product in float."""
    a, c, out = (b.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    if c.dtype != "int8" or out.dtype != "int8":
        raise ModelError("an 8-bit DIV takes int8 inputs and output")
    f = np.float32
    real = float(f(a.scale[0]) / (f(c.scale[0]) * f(out.scale[0])))
    multiplier, shift = (int(v[0]) for v in quantize_multiplier(np.array([real])))
    low, high = output_range(op, out) or (-128, 127)
    b.add("IntDiv", [b.value(op.inputs[0]), b.value(op.inputs[1])], {
        "a_zero_point": int(a.zero_point[0]), "b_zero_point": int(c.zero_point[0]),
        "multiplier": multiplier, "shift": shift, "low": int(low), "high": int(high),
        "y_scale": float(out.scale[0]), "y_zero_point": int(out.zero_point[0])},
        out=op.outputs[0])


def binary(b: Builder, op: Operator) -> None:
    """DIV (with a fused activation), SQUARED_DIFFERENCE, FLOOR_DIV, FLOOR_MOD, float."""
    if op.builtin == "SQUARED_DIFFERENCE" and is_integer(b.tensor(op.inputs[0])):
        squared_difference_int8(b, op)
        return
    if op.builtin == "DIV" and is_integer(b.tensor(op.inputs[0])):
        div_int8(b, op)
        return
    _float_only(b, op)
    x, y = b.value(op.inputs[0]), b.value(op.inputs[1])
    if op.builtin == "DIV":
        fused = _fused(op)
        quotient = b.add("Div", [x, y], out=None if fused else op.outputs[0])
        if fused:
            float_activation(b, op, quotient, op.outputs[0])
    elif op.builtin == "SQUARED_DIFFERENCE":
        difference = b.add("Sub", [x, y])
        b.add("Mul", [difference, difference], out=op.outputs[0])
    elif op.builtin == "FLOOR_DIV":
        b.add("Floor", [b.add("Div", [x, y])], out=op.outputs[0])
    else:  # FLOOR_MOD: the remainder takes the divisor's sign
        b.add("Mod", [x, y], {"fmod": 0}, out=op.outputs[0])


def prelu(b: Builder, op: Operator) -> None:
    """PRELU(input, alpha): alpha broadcast over the input.

    For 8 bits with a constant alpha that varies along the channels (the last axis) at most,
    each channel is a 256-entry table of TFLite Micro's arithmetic for its alpha.
    """
    x, alpha, out = (b.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    if not is_integer(x):
        _float_only(b, op)
        b.add("PRelu", [b.value(op.inputs[0]), b.value(op.inputs[1])], out=op.outputs[0])
        return
    if x.dtype != "int8" or alpha.data is None or not alpha.quantized:
        raise ModelError("an 8-bit PRELU needs an int8 input and a constant quantized alpha")
    channels = x.shape[-1]
    codes = np.broadcast_to(np.asarray(alpha.data), x.shape).reshape(-1, channels)
    if np.any(codes != codes[:1]):
        raise ModelError("an 8-bit PRELU whose alpha varies along other axes than the last is "
                         "not supported")
    params = (float(x.scale[0]), int(x.zero_point[0]), float(alpha.scale[0]),
              int(alpha.zero_point[0]), float(out.scale[0]), int(out.zero_point[0]))
    per_channel = [int(a) for a in codes[0]]
    scale, zp = b.scale_and_zero_point(out)

    def lookup(value, code: int, out_index: int | None = None):
        table = tflite_tables.prelu(code, *params)
        return b.add("IntLookupTable", [value, b.constant("prelu_table", table), scale, zp],
                     {"function": "PRELU"}, out=out_index)

    if len(set(per_channel)) == 1:
        lookup(b.value(op.inputs[0]), per_channel[0], op.outputs[0])
        return
    rank = len(x.shape)
    parts = [lookup(b.add("Slice", [b.value(op.inputs[0]), b.constant("starts", np.array([c])),
                                    b.constant("ends", np.array([c + 1])),
                                    b.constant("axes", np.array([rank - 1]))]), code)
             for c, code in enumerate(per_channel)]
    b.add("Concat", parts, {"axis": rank - 1}, out=op.outputs[0])


def log_softmax(b: Builder, op: Operator) -> None:
    """LOG_SOFTMAX over the last axis (int8: TFLite Micro's fixed point, IntLogSoftmax)."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    if is_integer(x):
        if out.dtype != "int8" or not out.quantized or (
                float(out.scale[0]), int(out.zero_point[0])) != (16 / 256, 127):
            raise ModelError(f"its output {out.name} must be int8 at scale 16/256 and zero point "
                             "127, as TFLite Micro's 8-bit LOG_SOFTMAX requires")
        b.add("IntLogSoftmax", [b.value(op.inputs[0])],
              tflite_log_softmax.params(float(np.float32(x.scale[0]))), out=op.outputs[0])
        return
    _float_only(b, op)
    b.add("LogSoftmax", [b.value(op.inputs[0])], {"axis": -1}, out=op.outputs[0])


def l2_normalization(b: Builder, op: Operator) -> None:
    """L2_NORMALIZATION over the last axis: x / max(sqrt(sum x^2), 1e-6); int8 as TFLite Micro."""
    if int(getattr(op.options, "FusedActivationFunction", lambda: 0)()) != 0:
        raise ModelError("an L2_NORMALIZATION with a fused activation is not supported")
    x_tensor = b.tensor(op.inputs[0])
    if is_integer(x_tensor):
        out = b.tensor(op.outputs[0])
        b.add("IntL2Normalize", [b.value(op.inputs[0])], {
            "x_zero_point": int(x_tensor.zero_point[0]), "y_scale": float(out.scale[0]),
            "y_zero_point": int(out.zero_point[0])}, out=op.outputs[0])
        return
    _float_only(b, op)
    x = b.value(op.inputs[0])
    rank = len(b.tensor(op.inputs[0]).shape)
    squares = b.add("ReduceSum", [b.add("Mul", [x, x]), b.constant("axes", np.array(
        [rank - 1]))], {"keepdims": 1})
    norm = b.add("Max", [b.add("Sqrt", [squares]),
                         b.constant("epsilon", np.array(_L2_EPSILON, np.float32))])
    b.add("Div", [x, norm], out=op.outputs[0])


def integer_reduce(b: Builder, op: Operator, axes: list[int], keep: bool, mean: bool) -> None:
    """TFLite Micro's 8-bit SUM or MEAN over `axes`: int32 sums, requantized (IntReduce)."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    real = float(np.float32(x.scale[0])) / float(np.float32(out.scale[0]))
    multiplier, shift = (int(v[0]) for v in quantize_multiplier(np.array([real])))
    b.add("IntReduce", [b.value(op.inputs[0])], {
        "axes": axes, "keepdims": int(keep), "mean": int(mean),
        "x_zero_point": int(x.zero_point[0]), "y_scale": float(out.scale[0]),
        "y_zero_point": int(out.zero_point[0]), "multiplier": multiplier, "shift": shift},
        out=op.outputs[0])


def reduce_sum(b: Builder, op: Operator) -> None:
    """SUM over constant axes (8 bits: TFLite Micro's integer sums)."""
    data = b.tensor(op.inputs[1]).data
    if data is None:
        raise ModelError("its axes must be a constant")
    rank = len(b.tensor(op.inputs[0]).shape)
    axes = sorted({int(a) % max(rank, 1) for a in np.asarray(data).reshape(-1)})
    keep = bool(op.options.KeepDims()) if op.options is not None else False
    if is_integer(b.tensor(op.inputs[0])):
        integer_reduce(b, op, axes, keep, mean=False)
        return
    _float_only(b, op)
    b.add("ReduceSum", [b.value(op.inputs[0]), b.constant("axes", np.array(axes, np.int64))],
          {"keepdims": int(keep)}, out=op.outputs[0])


def rescaled_sum(b: Builder, op: Operator, inputs: list[int], attrs: dict) -> None:
    """TFLite Micro's 8-bit ADD_N or CUMSUM (IntRescaledSum): inputs rescaled as ADD's."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    if x.dtype != "int8" or out.dtype != "int8":
        raise ModelError(f"the {x.dtype} {op.builtin} is not supported (8 bits: int8 only)")
    xs, ys = float(np.float32(x.scale[0])), float(np.float32(out.scale[0]))
    twice = 2 * xs
    (mi, si), (mo, so) = ((int(v[0]) for v in quantize_multiplier(np.array([real])))
                          for real in (xs / twice, twice / ((1 << 20) * ys)))
    b.add("IntRescaledSum", [b.value(i) for i in inputs], {
        **attrs, "x_zero_point": int(x.zero_point[0]), "input_multiplier": mi,
        "input_shift": si, "output_multiplier": mo, "output_shift": so, "y_scale": ys,
        "y_zero_point": int(out.zero_point[0])}, out=op.outputs[0])


def add_n(b: Builder, op: Operator) -> None:
    """ADD_N: the element-wise sum of every input (8 bits: TFLite Micro's rescaled sum)."""
    if is_integer(b.tensor(op.inputs[0])):
        first = b.tensor(op.inputs[0])
        for index in op.inputs[1:]:
            t = b.tensor(index)
            if (np.float32(t.scale[0]), int(t.zero_point[0])) != (
                    np.float32(first.scale[0]), int(first.zero_point[0])):
                raise ModelError("TFLite Micro's 8-bit ADD_N takes inputs of one quantization")
        rescaled_sum(b, op, list(op.inputs), {"mode": "add_n"})
        return
    _float_only(b, op)
    b.add("Sum", [b.value(i) for i in op.inputs], out=op.outputs[0])


MATHS = {
    **{name: unary for name in (*_UNARY, "RSQRT", "SQUARE", "ELU")},
    **{name: binary for name in ("DIV", "SQUARED_DIFFERENCE", "FLOOR_DIV", "FLOOR_MOD")},
    "PRELU": prelu, "LOG_SOFTMAX": log_softmax, "L2_NORMALIZATION": l2_normalization,
    "SUM": reduce_sum, "ADD_N": add_n,
}
