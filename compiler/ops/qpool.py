"""Integer pooling: QLinearGlobalAveragePool (onnxruntime's com.microsoft operator).

The `onnx` rule is onnxruntime's (MLAS): the int32 sum minus zero point x count, times the
float32 scale in_scale / (out_scale x count), rounded half to even. The `tflite` rule is TFLite
Micro's: with equal input and output parameters AVERAGE_POOL_2D's rounded integer division,
otherwise MEAN's fixed-point multiplier with 1/count folded in.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.ops._spatial import (
    activation_shape,
    from_nchw,
    layout_of,
    layout_shape,
    padded_input,
    taps,
    to_nchw,
)
from compiler.ops.pool import POOL_ATTRS, pool_window, window_counts
from compiler.ops.qlinear import (
    REQUANT_ATTRS,
    check_range,
    check_unary_params,
    first,
    quantized_output_type,
    requant_rule,
)
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.requant import (
    RANGES,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    requantize_onnx,
)


def _spatial_axes(node, rank: int) -> tuple[int, ...]:
    return tuple(range(2, rank)) if layout_of(node) == "NCHW" else tuple(range(1, rank - 1))


def _check_operands(node, ins, values) -> None:
    """What both pooling operators require of their inputs and attributes."""
    if node.attrs.get("channels_last"):
        fail("channels_last=1 is not supported: Kiln reads NCHW and moves layouts itself")
    check_unary_params(node, ins, values)
    if ins[0].rank < 3:
        fail(f"{node.op} needs an input of rank 3 or more, got {list(ins[0].shape)}")
    if requant_rule(node) == "onnx" and values[1] is not None and values[3] is not None:
        ratio = float(np.float32(first(values[1]))) / float(np.float32(first(values[3])))
        if not 255.0 * ratio + 255.0 < 2.0**31:  # onnxruntime converts before it saturates
            fail(f"{node.op}'s scale ratio input/output = {ratio:g} requantizes 8-bit inputs "
                 "beyond int32, where onnxruntime's result is undefined")


def _infer(node, ins, values):
    x, yz = ins[0], ins[4]
    _check_operands(node, ins, values)
    axes = _spatial_axes(node, x.rank)
    if any(x.shape[a] == 0 for a in axes):
        fail(f"{node.op} averages an empty image {list(x.shape)}: the mean of nothing")
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    out = quantized_output_type(shape, yz, values, 3, 4)
    check_range(node, out.dtype)
    return [out]


def _mean_tflite(total, count: int, xs, xz, ys, yz, low: int, high: int) -> np.ndarray:
    if np.float32(xs) == np.float32(ys) and int(xz) == int(yz):
        # AVERAGE_POOL_2D: sums raw values, rounds half away from zero (C division).
        raw = total + int(xz) * count  # the sum of the stored integers
        half = count // 2
        rounded = np.where(raw > 0, (raw + half) // count, -((-raw + half) // count))
        return np.clip(rounded, low, high)
    # MEAN: QuantizeMultiplier(in/out), then 1/count folded into the multiplier and shift.
    multiplier, shift = (int(v) for v in quantize_multiplier(float(np.float32(xs))
                                                              / float(np.float32(ys))))
    fold = min(count.bit_length() - 1, 32, 31 + shift)
    multiplier = (multiplier << fold) // count
    shift -= fold
    value = multiply_by_quantized_multiplier(total, multiplier, shift) + int(yz)
    return np.clip(value, low, high)


def _global_average_pool(node, x, xs, xz, ys, yz):
    axes = _spatial_axes(node, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    total = x.astype(np.int64).sum(axis=axes, keepdims=True) - int(first(xz)) * count
    low, high = node.attrs.get("output_range") or RANGES[x.dtype.name]
    if requant_rule(node) == "tflite":
        out = _mean_tflite(total, count, first(xs), first(xz), first(ys), first(yz), low,
                           high)
    else:
        scale = np.float32(first(xs)) / (np.float32(first(ys)) * np.float32(count))
        out = np.clip(requantize_onnx(total, np.float32(scale), int(first(yz)), low, high),
                      low, high)
    return out.astype(x.dtype)


register(OpDef(
    "QLinearGlobalAveragePool", "pool", _infer, _global_average_pool, inputs=(5, 5),
    spatial=True, domain="com.microsoft",
    attrs={**REQUANT_ATTRS, "channels_last": Attr("int", 0, "1: the input is NHWC (Kiln reads "
                                                            "0 and tracks layout itself)")},
    doc="mean over the spatial axes of an 8-bit tensor, requantized to 8 bits "
        "(onnxruntime's com.microsoft QLinearGlobalAveragePool)"))


# -- QLinearAveragePool ---------------------------------------------------------------------------

def _infer_average(node, ins, values):
    x, yz = ins[0], ins[4]
    _check_operands(node, ins, values)
    if any(d != 1 for d in node.attrs.get("dilations") or ()):
        fail("QLinearAveragePool has no dilations")
    if requant_rule(node) == "tflite" and values[1] is not None and values[3] is not None and (
            np.float32(first(values[1])) != np.float32(first(values[3]))):
        fail("TFLite Micro's AVERAGE_POOL_2D needs equal input and output scales")
    shape = activation_shape(node, x)
    win = pool_window(node, shape)
    out = quantized_output_type(layout_shape((*shape[:2], *win.out), layout_of(node)), yz,
                                values, 3, 4)
    check_range(node, out.dtype)
    return [out]


def _average_onnx(node, x, win, valid, xs, zp_in: int, ys, zp_out: int, low: int, high: int):
    """Onnxruntime's average: dequantize, float32 sums tap by tap, divide, quantize.

    Sums beyond float32 are infinite and saturate, as in C.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        real = (np.float32(xs) * (x.astype(np.int64) - zp_in).astype(np.float32))
        total = np.zeros((*x.shape[:2], *win.out), np.float32)
        for _, view in taps(padded_input(real.astype(np.float32), win, 0), win):
            total = (total + view).astype(np.float32)
        count = (np.float32(math.prod(win.kernel)) if node.attrs["count_include_pad"]
                 else valid.astype(np.float32))
        mean = (total / count).astype(np.float32)
        scaled = ((mean / np.float32(ys)).astype(np.float32) + np.float32(zp_out))
        return np.rint(np.clip(scaled, low, high)).astype(np.int64)


def _average_pool(node, x, xs, xz, ys, yz):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    win = pool_window(node, x.shape)
    zp_in, zp_out = int(first(xz)) if xz is not None else 0, int(first(yz))
    low, high = node.attrs.get("output_range") or RANGES[x.dtype.name]
    valid = np.maximum(window_counts(win, x.shape[2:], False), 1)
    if requant_rule(node) == "tflite":  # AVERAGE_POOL_2D: raw integers, valid taps only
        total = np.zeros((*x.shape[:2], *win.out), np.int64)
        for _, view in taps(padded_input(x.astype(np.int64), win, 0), win):
            total += view
        half = valid // 2
        out = np.where(total > 0, (total + half) // valid, -((-total + half) // valid))
    else:  # onnxruntime: dequantize, float32 sums tap by tap, divide, quantize
        out = _average_onnx(node, x, win, valid, first(xs), zp_in, first(ys), zp_out, low, high)
    return from_nchw(np.clip(out, low, high).astype(x.dtype), layout)


register(OpDef(
    "QLinearAveragePool", "pool", _infer_average, _average_pool, inputs=(5, 5), spatial=True,
    domain="com.microsoft",
    attrs={**POOL_ATTRS, **REQUANT_ATTRS,
           "count_include_pad": Attr("int", 0, "1: pads count in the divisor"),
           "channels_last": Attr("int", 0, "1: the input is NHWC (Kiln reads 0)")},
    doc="mean over sliding windows of an 8-bit tensor, requantized to 8 bits (onnxruntime's "
        "com.microsoft QLinearAveragePool)"))
