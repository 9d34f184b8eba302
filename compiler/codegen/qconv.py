"""8-bit NHWC convolution (QLinearConv, grouped and depthwise): exact int32 sums, either rule.

Output-stationary: one output pixel's int32 accumulators start as the bias, every in-bounds
tap adds (x - x_zero_point) * (w - w_zero_point) (taps in the padding are skipped: padding
with the input zero point adds nothing, as TFLite Micro and onnxruntime both assume), then
each accumulator is requantized by the node's rule. The weights are arranged as
[KH, KW, group, I/group, O/group] with the weight zero point already subtracted: int8 when it
is zero (TFLite, symmetric weights), int16 otherwise. Ordinary and depthwise convolutions keep
a vector of accumulators in registers; tiling over pixels is still to come.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input, conv_bias, first, splat
from compiler.codegen.qbinary import add_residual
from compiler.codegen.targets import DotProduct
from compiler.codegen.window import window
from compiler.ir.graph import Node
from compiler.qmath.requant import RANGES

_WEIGHTS, _BIAS = 3, 8
_MULTIPLIERS, _SHIFTS, _SCALES = requant.MULTIPLIERS, requant.SHIFTS, requant.SCALES


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
    bias = conv_bias(node).astype(np.int32)
    arrays = {_WEIGHTS: np.ascontiguousarray(arranged).astype(dtype), _BIAS: bias}
    arrays.update(requant.channel_arrays(node, np.float32(first(node.inputs[1].data)),
                                         node.inputs[4].data,
                                         np.float32(first(node.inputs[6].data)), out_c))
    return arrays


def _lanes(count: int, target=None) -> int:
    """Output channels (or depthwise channels) per vector of accumulators: 32, 16 or 8.

    Helium has eight 128-bit registers: two of accumulators (8 lanes) leave room for the
    operands; wider vectors would spill.
    """
    widths = (8, 4) if target is not None and target.int8_dot is DotProduct.MVE else (32, 16, 8)
    return next((w for w in widths if count % w == 0), 0)


def emit_qconv(k: Kernel) -> None:
    """One output pixel at a time: accumulate every tap in int32, then requantize.

    An ordinary convolution keeps a vector of output channels' accumulators in registers (the
    input value broadcast, the filter row contiguous); a depthwise one (one channel per group)
    a vector of channels (input and filter both contiguous). Other groupings take the scalar
    loops.
    """
    node = k.node
    channels = node.inputs[0].type.shape[3]
    out_c = node.output.type.shape[3]
    groups = int(node.attrs.get("group", 1))
    if groups == 1 and _lanes(out_c, k.target):
        _emit_vector(k, depthwise=False)
    elif groups == channels == out_c and _lanes(channels, k.target):
        _emit_vector(k, depthwise=True)
    else:
        _emit_scalar(k)


def _requantize(k: Kernel, acc, oc, zp: int, low: int, high: int):
    if k.node.attrs.get("requant", "onnx") == "tflite":
        return requant.tflite(k, acc, k.load(k.args[_MULTIPLIERS], oc),
                              k.load(k.args[_SHIFTS], oc), zp, low, high)
    return requant.onnx(k, acc, k.load(k.args[_SCALES], oc), zp, low, high)


def _emit_vector(k: Kernel, depthwise: bool) -> None:
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    lanes = _lanes(out_c, k.target)
    cg = 1 if depthwise else channels
    vec = ir.VectorType(I32, lanes)
    w_ty = k.args[_WEIGHTS].type.pointee
    zx = int(first(constant_input(k, 2, "input zero point")))
    zp = int(first(constant_input(k, 7, "output zero point")))
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    x_signed = node.inputs[0].type.dtype == "int8"
    kw_n = (node.attrs.get("kernel_shape") or node.inputs[3].type.shape[2:])[1]
    tap_stride = channels if depthwise else channels * out_c  # weights per (kh, kw)
    acc_slot = k.alloca(vec)
    zx_vec = ir.Constant(vec, [zx] * lanes)

    def load_vector(ptr, index, element):
        cast = b.bitcast(b.gep(ptr, [index], inbounds=True),
                         ir.PointerType(ir.VectorType(element, lanes)))
        return b.load(cast, align=1)

    with k.loop(batch) as n, k.rows(out_h) as oh, k.loop(out_w) as ow, \
            k.loop(out_c // lanes) as chunk:
        oc0 = k.index((chunk, lanes))
        b.store(load_vector(k.args[_BIAS], oc0, I32), acc_slot)
        with window(k, node, oh, ow) as (ih, iw, kh, kw), k.loop(cg) as c:
            x_base = k.index((n, height * width * channels), (ih, width * channels),
                             (iw, channels))
            w_base = k.index((kh, kw_n * tap_stride), (kw, tap_stride))
            if depthwise:
                xv = load_vector(k.args[0], b.add(x_base, oc0), ir.IntType(8))
                xv = b.sub(b.sext(xv, vec) if x_signed else b.zext(xv, vec), zx_vec)
                w_index = b.add(w_base, oc0)
            else:
                x = k.load(k.args[0], b.add(x_base, c))
                x = b.sub(b.sext(x, I32) if x_signed else b.zext(x, I32), I32(zx))
                xv = splat(k, x, vec)
                w_index = b.add(w_base, b.add(k.index((c, out_c)), oc0))
            wv = b.sext(load_vector(k.args[_WEIGHTS], w_index, w_ty), vec)
            b.store(b.add(b.load(acc_slot), b.mul(xv, wv)), acc_slot)
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        accs = b.load(acc_slot)
        if node.attrs.get("requant", "onnx") == "tflite":
            values = requant.tflite(k, accs, load_vector(k.args[_MULTIPLIERS], oc0, I32),
                                    load_vector(k.args[_SHIFTS], oc0, I32), zp, low, high)
        else:
            values = requant.onnx(k, accs, load_vector(k.args[_SCALES], oc0, ir.FloatType()),
                                  zp, low, high)
        if k.residual is not None:  # a fused QLinearAdd
            values = add_residual(k, values, b.add(pixel, oc0))
        out = b.bitcast(b.gep(k.outs[0], [b.add(pixel, oc0)], inbounds=True),
                        ir.PointerType(ir.VectorType(ir.IntType(8), lanes)))
        b.store(b.trunc(values, ir.VectorType(ir.IntType(8), lanes)), out, align=1)


def _emit_scalar(k: Kernel) -> None:
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    groups = int(node.attrs.get("group", 1))
    cg, og = channels // groups, out_c // groups
    zx = int(first(constant_input(k, 2, "input zero point")))
    zp = int(first(constant_input(k, 7, "output zero point")))
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    widen_x = b.sext if node.inputs[0].type.dtype == "int8" else b.zext
    kw_n = (node.attrs.get("kernel_shape") or node.inputs[3].type.shape[2:])[1]
    accs = k.alloca(ir.ArrayType(I32, out_c))

    def acc_ptr(oc):
        return b.gep(accs, [I32(0), oc], inbounds=True)

    with k.loop(batch) as n, k.rows(out_h) as oh, k.loop(out_w) as ow:
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
            value = _requantize(k, b.load(acc_ptr(oc)), oc, zp, low, high)
            if k.residual is not None:  # a fused QLinearAdd
                value = add_residual(k, value, b.add(pixel, oc))
            k.store(b.trunc(value, ir.IntType(8)), k.outs[0], b.add(pixel, oc))
