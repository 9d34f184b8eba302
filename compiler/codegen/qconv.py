"""8-bit NHWC convolution (QLinearConv, grouped and depthwise): exact int32 sums, either rule.

Output-stationary: one output pixel's int32 accumulators start as the bias, every in-bounds
tap adds (x - x_zero_point) * (w - w_zero_point) (taps in the padding are skipped: padding
with the input zero point adds nothing, as TFLite Micro and onnxruntime both assume), then
each accumulator is requantized by the node's rule. The weights are arranged as
[KH, KW, group, I/group, O/group] with the weight zero point already subtracted: int8 when it
is zero (TFLite, symmetric weights), int16 otherwise. The first correct form; tiling and
SIMD come with the speed work.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.codegen.window import window
from compiler.ir.graph import Node
from compiler.quant.requant import RANGES, onnx_scale, tflite_multiplier

_WEIGHTS, _BIAS = 3, 8
_MULTIPLIERS, _SHIFTS, _SCALES = 10, 11, 12


def _first(array, default=0):
    return default if array is None else np.asarray(array).reshape(-1)[0]


def qconv_weights(node: Node) -> dict[int, np.ndarray]:
    """Arranged weights minus their zero point, the int32 bias, the per-channel requant data."""
    w = np.asarray(node.inputs[3].data, np.int64)
    groups = int(node.attrs.get("group", 1))
    out_c, cg, kh, kw = w.shape
    zw_value = node.inputs[5]
    zw = np.zeros(out_c, np.int64) if zw_value is None else np.broadcast_to(
        np.asarray(zw_value.data, np.int64).reshape(-1), (out_c,))
    shifted = w - zw.reshape(-1, 1, 1, 1)
    arranged = np.transpose(shifted.reshape(groups, out_c // groups, cg, kh, kw), (3, 4, 0, 2, 1))
    fits = node.inputs[3].type.dtype == "int8" and not zw.any()
    dtype = np.int8 if fits else np.int16  # read with a sign extension either way
    bias_value = node.inputs[8] if len(node.inputs) > 8 else None
    bias = np.zeros(out_c, np.int32) if bias_value is None else np.asarray(bias_value.data,
                                                                            np.int32)
    arrays = {_WEIGHTS: np.ascontiguousarray(arranged).astype(dtype), _BIAS: bias}
    x_scale = np.float32(_first(node.inputs[1].data))
    w_scale = np.asarray(node.inputs[4].data, np.float32).reshape(-1)
    y_scale = np.float32(_first(node.inputs[6].data))
    if node.attrs.get("requant", "onnx") == "tflite":
        multiplier, shift = tflite_multiplier(x_scale, w_scale, y_scale)
        arrays[_MULTIPLIERS] = np.broadcast_to(multiplier, (out_c,)).astype(np.int32)
        arrays[_SHIFTS] = np.broadcast_to(shift, (out_c,)).astype(np.int32)
    else:
        arrays[_SCALES] = np.broadcast_to(onnx_scale(x_scale, w_scale, y_scale),
                                          (out_c,)).astype(np.float32)
    return arrays


def emit_qconv(k: Kernel) -> None:
    """One output pixel at a time: accumulate every tap in int32, then requantize."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    groups = int(node.attrs.get("group", 1))
    cg, og = channels // groups, out_c // groups
    zx = int(_first(constant_input(k, 2, "input zero point")))
    zp = int(_first(constant_input(k, 7, "output zero point")))
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    widen_x = b.sext if node.inputs[0].type.dtype == "int8" else b.zext
    kw_n = (node.attrs.get("kernel_shape") or node.inputs[3].type.shape[2:])[1]
    accs = k.alloca(ir.ArrayType(I32, out_c))

    def acc_ptr(oc):
        return b.gep(accs, [I32(0), oc], inbounds=True)

    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow:
        with k.loop(out_c) as oc:
            b.store(k.load(k.args[_BIAS], oc), acc_ptr(oc))
        with window(k, node, oh, ow) as (ih, iw, kh, kw), k.loop(groups) as g, \
                k.loop(cg) as c:
            xi = k.index((n, height * width * channels), (ih, width * channels),
                         (iw, channels), (g, cg), (c, 1))
            xv = b.sub(widen_x(k.load(k.args[0], xi), I32), I32(zx))
            tap = k.index((kh, kw_n * channels * og), (kw, channels * og), (g, cg * og),
                          (c, og))
            with k.loop(og) as j:
                w = b.sext(k.load(k.args[_WEIGHTS], b.add(tap, j)), I32)
                ptr = acc_ptr(k.index((g, og), (j, 1)))
                b.store(b.add(b.load(ptr), b.mul(xv, w)), ptr)
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        with k.loop(out_c) as oc:
            acc = b.load(acc_ptr(oc))
            if node.attrs.get("requant", "onnx") == "tflite":
                value = requant.tflite(k, acc, k.load(k.args[_MULTIPLIERS], oc),
                                       k.load(k.args[_SHIFTS], oc), zp, low, high)
            else:
                value = requant.onnx(k, acc, k.load(k.args[_SCALES], oc), zp, low, high)
            k.store(b.trunc(value, ir.IntType(8)), k.outs[0], b.add(pixel, oc))
