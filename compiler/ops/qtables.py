"""Integer operators computed through 256-entry tables, as onnxruntime computes them.

QLinearSoftmax: onnxruntime builds a float32 table of exp((i - 255 + shift) * x_scale) (the
shift keeps a row's sum finite), looks every element up after moving the row's maximum to the
top entry, sums the row in float32 in order, and writes round_half_even(entry * floor(1 /
y_scale) / sum) + y_zero_point, saturated at the top; a row whose sum is 0 is left as it was.
QLinearLeakyRelu: every input value dequantized, LeakyRelu in float32, quantized back.
TFLite Micro's fixed-point softmax is not here yet.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.ops._util import normalize_axis
from compiler.ops.qlinear import check_unary_params, first, quantized_output_type
from compiler.ops.registry import Attr, OpDef, fail, register

_FLOAT_MAX = float(np.finfo(np.float32).max)


def _infer(node, ins, values):
    x, yz = ins[0], ins[4]
    check_unary_params(node, ins, values)
    if node.attrs.get("requant", "onnx") != "onnx":
        fail("QLinearSoftmax follows onnxruntime's rule only; TFLite Micro's is not supported")
    if node.attrs["opset"] < 13:
        fail("QLinearSoftmax of opset < 13 (softmax over all trailing axes) is not supported")
    normalize_axis(node.attrs["axis"], x.rank)
    return [quantized_output_type(x.shape, yz, values, 3, 4)]


def _table(x_scale: float, length: int, signed: bool) -> np.ndarray:
    """The lookup table onnxruntime builds, indexed by the uint8 pattern of the shifted input."""
    shift = max(0.0, math.log(_FLOAT_MAX / length) - 5.0) / x_scale
    i = np.arange(256, dtype=np.float64)
    values = np.exp((i - 255 + shift) * x_scale).astype(np.float32)
    table = np.empty(256, np.float32)
    index = ((i.astype(np.int64) - 128) & 0xFF) if signed else i.astype(np.int64)
    table[index] = values
    return table


def _softmax(node, x, xs, xz, ys, yz):
    axis = normalize_axis(node.attrs["axis"], x.ndim)
    moved = np.moveaxis(x, axis, -1)
    signed = x.dtype == np.int8
    length = moved.shape[-1]
    table = _table(float(np.float32(first(xs))), length, signed)
    top = 127 if signed else 255
    shifted = (moved.astype(np.int64) + (top - moved.max(axis=-1, keepdims=True))) & 0xFF
    entries = table[shifted]
    sums = np.cumsum(entries, axis=-1, dtype=np.float32)[..., -1:]  # in order, in float32
    y_scale = np.float32(math.floor(np.float32(1.0) / np.float32(first(ys))))
    zp = int(first(yz))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((entries * y_scale) / sums).astype(np.int64) + zp
    out = np.minimum(q, 127 if signed else 255)  # the quotient is never negative
    out = np.where(sums == 0, moved, out).astype(x.dtype)
    return np.moveaxis(out, -1, axis)


register(OpDef(
    "QLinearSoftmax", "activation", _infer, _softmax, inputs=(5, 5), domain="com.microsoft",
    attrs={"axis": Attr("int", -1, "the axis the softmax normalizes"),
           "opset": Attr("int", 13, "the Softmax opset it replaces (13 or later: one axis)"),
           "requant": Attr("string", "onnx", "Kiln only: the rule (onnxruntime's only)",
                           onnx=False)},
    doc="softmax of an 8-bit tensor by onnxruntime's lookup table, requantized to 8 bits "
        "(onnxruntime's com.microsoft QLinearSoftmax)"))


# -- QLinearLeakyRelu: a 256-entry table, as onnxruntime builds it ------------------------------

def _infer_lut(node, ins, values):
    x, yz = ins[0], ins[4]
    check_unary_params(node, ins, values)
    return [quantized_output_type(x.shape, yz, values, 3, 4)]


def _leaky_relu(node, x, xs, xz, ys, yz):
    """Every input value dequantized in float32, LeakyRelu, quantized back (ties to even)."""
    codes = np.arange(256, dtype=np.int64)
    integers = codes - 256 * (codes > 127) if x.dtype == np.int8 else codes
    zp_in = int(first(xz))
    zp_out = int(first(yz))
    real = np.float32(first(xs)) * (integers - zp_in).astype(np.float32)
    alpha = np.float32(node.attrs["alpha"])
    real = np.where(real >= 0, real, (alpha * real).astype(np.float32)).astype(np.float32)
    low, high = (-128, 127) if x.dtype == np.int8 else (0, 255)
    q = np.rint(real / np.float32(first(ys))) + zp_out
    table = np.clip(q, low, high).astype(x.dtype)
    return table[x.astype(np.int64) & 0xFF]


register(OpDef(
    "QLinearLeakyRelu", "activation", _infer_lut, _leaky_relu, inputs=(5, 5),
    domain="com.microsoft", attrs={"alpha": Attr("float", 0.01, "slope below zero")},
    doc="LeakyRelu of an 8-bit tensor by a 256-entry table (onnxruntime's com.microsoft "
        "QLinearLeakyRelu)"))
