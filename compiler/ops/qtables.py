"""Integer operators computed through 256-entry tables, as onnxruntime computes them.

QLinearSoftmax: onnxruntime builds a float32 table of exp((i - 255 + shift) * x_scale) (the
shift, from logf(FLT_MAX / length) in float32, keeps a row's sum finite), looks every element up
after moving the row's maximum to the top entry, sums the row in float32 in order, and writes
round_half_even(entry * floor(1 / y_scale) / sum), computed in float64, plus y_zero_point,
saturated to the output type; a row whose sum is 0 is left as it was.
QLinearLeakyRelu, QLinearSigmoid and Kiln's IntLookupTable (Tanh, HardSwish): every input value
dequantized, the float32 function (onnxruntime's own, compiler/qmath/ort_float.py), quantized
back (compiler/qmath/tables.py). QLinearConcat requantizes an input whose parameters differ from
the output's by the same kind of table. With the tflite rule QLinearSoftmax is TFLite Micro's
fixed-point softmax (compiler/qmath/tflite_softmax.py).
"""

from __future__ import annotations

import math

import numpy as np

from compiler.ops._util import normalize_axis
from compiler.ops.activation import check_alpha
from compiler.ops.qlinear import (
    INTEGERS,
    check_scale,
    check_unary_params,
    check_zero_point,
    first,
    quantized_output_type,
    requant_rule,
    require_integer,
)
from compiler.ops.registry import REQUIRED, Attr, OpDef, fail, register
from compiler.qmath import ort_float
from compiler.qmath.requant import RANGES
from compiler.qmath.tables import TABLE_SIZE, look_up, onnx_table
from compiler.qmath.tflite_softmax import softmax_int8

_F32 = np.float32
_FLOAT_MAX = float(np.finfo(np.float32).max)


def _infer(node, ins, values):
    x, yz = ins[0], ins[4]
    check_unary_params(node, ins, values)
    if node.attrs["opset"] < 13:
        fail("QLinearSoftmax of opset < 13 (softmax over all trailing axes) is not supported")
    axis = normalize_axis(node.attrs["axis"], x.rank)
    if requant_rule(node) == "tflite":
        if axis != x.rank - 1:
            fail("TFLite Micro's softmax normalizes the last axis only")
        scale, zp = values[3], values[4]
        low = RANGES[x.dtype][0]
        if scale is not None and (np.float32(first(scale)) != np.float32(1 / 256)
                                  or (zp is not None and int(first(zp)) != low)):
            fail(f"TFLite Micro's softmax writes scale 1/256 and zero point {low}; the output "
                 f"has scale {float(first(scale))} and zero point {int(first(zp, 0))}")
    elif node.attrs["beta"] != 1.0:
        fail("onnxruntime's QLinearSoftmax has no beta; only the tflite rule takes one")
    return [quantized_output_type(x.shape, yz, values, 3, 4)]


def _shift(x_scale: float, length: int) -> float:
    """Onnxruntime's bit_shift: what keeps a row's sum of table entries finite.

    Its logf takes FLT_MAX / length divided in float32; the rest is float64.
    """
    log = float(ort_float.logf(_F32(_FLOAT_MAX) / _F32(length)))
    return max(0.0, log - 5.0) / x_scale


def _table(x_scale: float, length: int, signed: bool) -> np.ndarray:
    """The lookup table onnxruntime builds, indexed by the uint8 pattern of the shifted input.

    Each entry is the C library's float64 exp (math.exp calls it, as onnxruntime does) rounded
    to float32; numpy's own exp may differ from it in the last bit.
    """
    shift = _shift(x_scale, length)
    values = np.array([math.exp((i - 255.0 + shift) * x_scale) for i in range(256)])
    table = np.empty(256, np.float32)
    index = (np.arange(256) - 128) & 0xFF if signed else np.arange(256)
    table[index] = values.astype(np.float32)
    return table


def output_multiplier(y_scale) -> float:
    """floor(1 / y_scale): float32 when finite (onnxruntime's floorf), else float64."""
    with np.errstate(over="ignore", divide="ignore"):
        inverse = np.float32(1.0) / np.float32(y_scale)
    if np.isfinite(inverse):
        return float(np.floor(inverse))
    return float(math.floor(1.0 / float(np.float32(y_scale))))


def _softmax(node, x, xs, xz, ys, yz):
    if requant_rule(node) == "tflite":
        low, high = RANGES[str(x.dtype)]
        return softmax_int8(x, first(xs), node.attrs["beta"], low, high)
    axis = normalize_axis(node.attrs["axis"], x.ndim)
    moved = np.moveaxis(x, axis, -1)
    signed = x.dtype == np.int8
    table = _table(float(np.float32(first(xs))), moved.shape[-1], signed)
    top = 127 if signed else 255
    shifted = (moved.astype(np.int64) + (top - moved.max(axis=-1, keepdims=True))) & 0xFF
    entries = table[shifted]
    sums = np.cumsum(entries, axis=-1, dtype=np.float32)[..., -1:]  # in order, in float32
    low, high = RANGES[str(x.dtype)]
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = entries.astype(np.float64) * output_multiplier(first(ys)) / sums
        q = np.clip(np.rint(quotient) + int(first(yz)), low, high)
    out = np.where(sums == 0, moved, q).astype(x.dtype)
    return np.moveaxis(out, -1, axis)


register(OpDef(
    "QLinearSoftmax", "activation", _infer, _softmax, inputs=(5, 5), domain="com.microsoft",
    attrs={"axis": Attr("int", -1, "the axis the softmax normalizes"),
           "opset": Attr("int", 13, "the Softmax opset it replaces (13 or later: one axis)"),
           "requant": Attr("string", "onnx", "Kiln only: onnx (onnxruntime's table) or tflite "
                                             "(TFLite Micro's fixed point)", onnx=False),
           "beta": Attr("float", 1.0, "Kiln only: TFLite's input scaling (tflite rule)",
                        onnx=False)},
    doc="softmax of an 8-bit tensor by onnxruntime's lookup table, requantized to 8 bits "
        "(onnxruntime's com.microsoft QLinearSoftmax)"))


# -- one-input tables: LeakyRelu, Sigmoid, and Kiln's IntLookupTable -----------------------------

def _infer_lut(node, ins, values):
    x, yz = ins[0], ins[4]
    check_unary_params(node, ins, values)
    if node.op == "QLinearLeakyRelu":
        check_alpha(node)
    return [quantized_output_type(x.shape, yz, values, 3, 4)]


def _leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    """Onnxruntime's float32 LeakyRelu."""
    with np.errstate(over="ignore", invalid="ignore"):  # an infinite alpha: IEEE, as in C
        negative = (np.float32(alpha) * x).astype(np.float32)
    return np.where(x >= 0, x, negative).astype(np.float32)


def _unary_table(fn):
    """A reference that builds onnxruntime's table of `fn(x, node)` and looks `x` up in it."""
    def reference(node, x, xs, xz, ys, yz):
        table = onnx_table(lambda v: fn(v, node), str(x.dtype), first(xs), int(first(xz)),
                           first(ys), int(first(yz)))
        return look_up(table, x)
    return reference


register(OpDef(
    "QLinearLeakyRelu", "activation", _infer_lut,
    _unary_table(lambda v, node: _leaky_relu(v, node.attrs["alpha"])), inputs=(5, 5),
    domain="com.microsoft", attrs={"alpha": Attr("float", 0.01, "slope below zero")},
    doc="LeakyRelu of an 8-bit tensor by a 256-entry table (onnxruntime's com.microsoft "
        "QLinearLeakyRelu)"))

register(OpDef(
    "QLinearSigmoid", "activation", _infer_lut,
    _unary_table(lambda v, node: ort_float.sigmoid(v)), inputs=(5, 5), domain="com.microsoft",
    doc="Sigmoid of an 8-bit tensor by a 256-entry table of onnxruntime's float32 Sigmoid "
        "(onnxruntime's com.microsoft QLinearSigmoid)"))


def _infer_table(node, ins, values):
    x, table, ys, yz = ins
    require_integer(node, x, "input")
    if table.numel != TABLE_SIZE or table.dtype not in INTEGERS:
        fail(f"the table is {table.dtype} {list(table.shape)}; it must hold {TABLE_SIZE} 8-bit "
             "values")
    check_scale(node, ys, values[2], "output scale")
    check_zero_point(node, yz, table.dtype, "output zero point")
    return [quantized_output_type(x.shape, yz, values, 2, 3)]


register(OpDef(
    "IntLookupTable", "activation", _infer_table,
    lambda node, x, table, ys, yz: look_up(table.reshape(-1), x), inputs=(4, 4), onnx=False,
    attrs={"function": Attr("string", "", "Kiln only: the float function the table holds "
                                          "(Tanh, HardSwish, ...)")},
    doc="Kiln only: each 8-bit input replaced by its entry in a 256-entry table (built by "
        "to_integer from the float function between the two quantizations)"))


# -- QLinearConcat: inputs with other parameters requantized by a table -------------------------

def _concat_triples(node, items):
    """[(x, scale, zero_point), ...] of (y_scale, y_zero_point, x0, s0, z0, x1, ...)."""
    if len(items) < 5 or (len(items) - 2) % 3:
        fail(f"QLinearConcat takes y_scale, y_zero_point and (x, scale, zero_point) triples; "
             f"it has {len(items)} inputs")
    return [tuple(items[i:i + 3]) for i in range(2, len(items), 3)]


def _infer_concat(node, ins, values):
    triples = _concat_triples(node, ins)
    value_triples = _concat_triples(node, values)
    ys, yz = ins[0], ins[1]
    check_scale(node, ys, values[0], "output scale")
    for k, ((x, xs, xz), (_, xsv, _)) in enumerate(zip(triples, value_triples)):
        require_integer(node, x, f"input {k}")
        check_scale(node, xs, xsv, f"input {k}'s scale")
        check_zero_point(node, xz, yz.dtype, f"input {k}'s zero point")
    rank = triples[0][0].rank
    axis = normalize_axis(node.attrs["axis"], rank)
    shapes = [x.shape for x, _, _ in triples]
    for k, shape in enumerate(shapes):
        if len(shape) != rank or any(a != b for i, (a, b) in enumerate(zip(shape, shapes[0]))
                                     if i != axis):
            fail(f"input {k} has shape {list(shape)}; all must match {list(shapes[0])} "
                 f"except on axis {axis}")
    shape = list(shapes[0])
    shape[axis] = sum(s[axis] for s in shapes)
    return [quantized_output_type(tuple(shape), yz, values, 0, 1)]


def _concat(node, *items):
    ys, yz = np.float32(first(items[0])), int(first(items[1]))
    parts = []
    for x, xs, xz in _concat_triples(node, items):
        xs, xz = np.float32(first(xs)), int(first(xz))
        if xs == ys and xz == yz:
            parts.append(x)
        else:
            dtype = str(x.dtype)
            parts.append(look_up(onnx_table(lambda v: v, dtype, xs, xz, ys, yz), x))
    return np.concatenate(parts, axis=normalize_axis(node.attrs["axis"], items[2].ndim))


register(OpDef(
    "QLinearConcat", "shape", _infer_concat, _concat, inputs=(5, -1), domain="com.microsoft",
    attrs={"axis": Attr("int", REQUIRED, "the axis the inputs are joined on")},
    doc="Concat of 8-bit tensors, each requantized to the output's parameters by a 256-entry "
        "table unless they are equal (onnxruntime's com.microsoft QLinearConcat)"))
