"""8-bit average pooling, global and sliding (QLinearGlobalAveragePool, QLinearAveragePool).

Both NHWC, either rule. Global: the int32 sum of each channel over the image, then the onnx
rule multiplies (sum - zp * count) by the float32 in_scale / (out_scale * count) and rounds half
to even; the tflite rule divides the raw sum by the count rounding half away from zero when the
two quantizations are equal (AVERAGE_POOL_2D), else applies MEAN's multiplier with 1/count
folded in. Every constant is derived at compile time exactly as the reference
(compiler/ops/qpool.py) derives it.

A sliding window follows the same two rules tap by tap: tflite sums the stored integers of the
taps inside the image and divides by their count rounding half away from zero
(AVERAGE_POOL_2D); onnx dequantizes each tap in float32, adds them in window order, divides by
the pixel's divisor, then by the output scale, adds the zero point and rounds half to even.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input, vector_ptr
from compiler.codegen.pool import as_2d, avg_divisors, emit_as_2d
from compiler.codegen.window import window
from compiler.errors import KilnError
from compiler.ir.graph import Node
from compiler.ops.geometry import spatial
from compiler.qmath.requant import RANGES, quantize_multiplier

F32 = ir.FloatType()


def _scalar(k: Kernel, slot: int):
    data = constant_input(k, slot, "scale and zero point")
    return 0 if data is None else np.asarray(data).reshape(-1)[0]


def emit_qglobal_average_pool(k: Kernel) -> None:
    """Per (image, channel): sum the pixels in int32, then requantize by the rule."""
    node, b = k.node, k.b
    batch, height, width, channels = _gap_shape(node)
    count = height * width
    widen = b.sext if node.inputs[0].type.dtype == "int8" else b.zext
    lanes = _lanes(k, channels) if node.inputs[0].type.dtype == "int8" else 0
    if lanes:  # a vector of channels at a time: each pixel adds one contiguous run of them
        vec = ir.VectorType(I32, lanes)
        total = k.alloca(vec)
        with k.loop(batch) as n, k.loop(channels // lanes) as cb:
            b.store(ir.Constant(vec, [0] * lanes), total)
            with k.loop(count) as p:
                at = k.index((n, count * channels), (p, channels), (cb, lanes))
                b.store(b.add(b.load(total), _bytes(k, k.args[0], at, lanes)), total)
            value = _gap_requantize(k, b.load(total), count)
            out = b.bitcast(b.gep(k.outs[0], [k.index((n, channels), (cb, lanes))],
                                  inbounds=True), ir.PointerType(ir.VectorType(
                                      ir.IntType(8), lanes)))
            b.store(b.trunc(value, ir.VectorType(ir.IntType(8), lanes)), out, align=1)
        return
    total_slot = k.alloca(I32)
    with k.loop(batch) as n, k.loop(channels) as c:
        b.store(I32(0), total_slot)
        with k.loop(count) as p:
            x = widen(k.load(k.args[0], k.index((n, count * channels), (p, channels),
                                                (c, 1))), I32)
            b.store(b.add(b.load(total_slot), x), total_slot)
        value = _gap_requantize(k, b.load(total_slot), count)
        k.store(b.trunc(value, ir.IntType(8)), k.outs[0], k.index((n, channels), (c, 1)))


_UNROLLED_PIXELS = 16  # a row this short adds up unrolled on scalar cores


def emit_qgap_row_sums(k: Kernel, first: bool) -> None:
    """One image row added into int32 sums per channel (`k.outs[0]`); the first row sets them.

    With `emit_qgap_finish`, the pool of a row-streamed chain: the sums are the very totals
    the whole-tensor kernel makes (integer addition in any order), so the result is the same.
    With vectors, pixels outermost and channels innermost (each pixel adds one contiguous
    vector of sums); without, each channel's pixels add up in a register first.
    """
    node, b = k.node, k.b
    _, _, width, channels = _gap_shape(node)
    if (k.target is None or not k.target.vector_bits) and width <= _UNROLLED_PIXELS:
        with k.loop(channels) as c:
            total = I32(0) if first else k.load(k.outs[0], c)
            for p in range(width):  # a short row: its pixels unrolled, the sum in a register
                x = b.sext(k.load(k.args[0], k.index((c, 1), base=p * channels)), I32)
                total = b.add(total, x)
            k.store(total, k.outs[0], c)
        return
    lanes = _lanes(k, channels)
    if lanes:  # a vector of channels' sums in registers across the row's pixels
        with k.loop(channels // lanes) as cb:
            at = k.index((cb, lanes))
            total = (ir.Constant(ir.VectorType(I32, lanes), [0] * lanes) if first
                     else b.load(vector_ptr(k, k.outs[0], at, ir.VectorType(I32, lanes)),
                                 align=4))
            with _vector_slot(k, total) as (slot, add):
                with k.loop(width) as p:
                    add(_bytes(k, k.args[0], k.index((p, channels), (cb, lanes)), lanes))
            b.store(b.load(slot), vector_ptr(k, k.outs[0], at, ir.VectorType(I32, lanes)),
                    align=4)
        return
    with k.loop(channels) as c:
        x = b.sext(k.load(k.args[0], c), I32)
        k.store(x if first else b.add(k.load(k.outs[0], c), x), k.outs[0], c)
    with k.loop(width - 1) as p, k.loop(channels) as c:
        x = b.sext(k.load(k.args[0], k.index((p, channels), (c, 1), base=channels)), I32)
        k.store(b.add(k.load(k.outs[0], c), x), k.outs[0], c)


def emit_qgap_finish(k: Kernel) -> None:
    """The pool's output from its int32 sums (`k.args[0]`), by the rule."""
    node, b = k.node, k.b
    _, height, width, channels = _gap_shape(node)
    lanes = _lanes(k, channels)
    if lanes:
        with k.loop(channels // lanes) as cb:
            at = k.index((cb, lanes))
            sums = b.load(vector_ptr(k, k.args[0], at, ir.VectorType(I32, lanes)), align=4)
            value = _gap_requantize(k, sums, height * width)
            b.store(b.trunc(value, ir.VectorType(ir.IntType(8), lanes)),
                    vector_ptr(k, k.outs[0], at, ir.VectorType(ir.IntType(8), lanes)), align=1)
        return
    with k.loop(channels) as c:
        value = _gap_requantize(k, k.load(k.args[0], c), height * width)
        k.store(b.trunc(value, ir.IntType(8)), k.outs[0], c)


def _lanes(k: Kernel, channels: int) -> int:
    """Channels per vector on a core with vectors (0: none, or no width divides them)."""
    if k.target is None or not k.target.vector_bits:
        return 0
    return next((n for n in (16, 8, 4) if channels % n == 0), 0)


def _bytes(k: Kernel, ptr: ir.Value, at: ir.Value, lanes: int) -> ir.Value:
    """`lanes` int8 values from ptr[at] widened to int32."""
    vec = ir.VectorType(ir.IntType(8), lanes)
    return k.b.sext(k.b.load(vector_ptr(k, ptr, at, vec), align=1), ir.VectorType(I32, lanes))


@contextmanager
def _vector_slot(k: Kernel, start: ir.Value):
    """A vector accumulator starting at `start`: yields (its slot, a function adding to it)."""
    slot = k.alloca(start.type)
    k.b.store(start, slot)
    yield slot, lambda x: k.b.store(k.b.add(k.b.load(slot), x), slot)


def _gap_shape(node: Node) -> tuple[int, ...]:
    if node.attrs.get("layout") != "NHWC" or node.inputs[0].type.rank != 4:
        raise KilnError(f"cannot generate {node.op} {node.name}: only 2-D NHWC is supported")
    return node.inputs[0].type.shape


def _gap_requantize(k: Kernel, raw: ir.Value, count: int) -> ir.Value:
    """The int32 output value of a channel whose pixels sum to `raw`."""
    node, b = k.node, k.b
    xs, xz, ys, yz = (_scalar(k, i) for i in range(1, 5))
    xz, yz = int(xz), int(yz)
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    def num(value):  # a constant as wide as `raw` (a vector of channels, or one)
        return requant.const(raw, value)

    total = b.sub(raw, num(xz * count))
    if node.attrs.get("requant", "onnx") != "tflite":
        scale = np.float32(xs) / (np.float32(ys) * np.float32(count))
        return requant.onnx(k, total, requant.const(raw, float(scale), F32), yz, low, high)
    if np.float32(xs) == np.float32(ys) and xz == yz:
        half = num(count // 2)
        up = b.sdiv(b.add(raw, half), num(count))
        down = b.sub(num(0), b.sdiv(b.add(b.sub(num(0), raw), half), num(count)))
        return requant.clamp(k, b.select(b.icmp_signed(">", raw, num(0)), up, down), low, high)
    multiplier, shift = (int(v[0]) for v in quantize_multiplier(
        np.array([float(np.float32(xs)) / float(np.float32(ys))])))
    fold = min(count.bit_length() - 1, 32, 31 + shift)
    multiplier = (multiplier << fold) // count
    return requant.tflite(k, total, num(multiplier), num(shift - fold), yz, low, high)


_DIVISORS = 5  # the slot of the per-pixel divisors, after the node's five inputs


def qaverage_divisors(node: Node) -> dict[int, np.ndarray]:
    """Per output pixel, the count the mean divides by.

    int32 taps inside the image (tflite), or float32 by count_include_pad (onnx: the whole
    kernel, else the taps inside).
    """
    flat = as_2d(node)
    if node.attrs.get("requant", "onnx") == "tflite":
        return {_DIVISORS: np.maximum(avg_divisors(flat, include=False), 1).astype(np.int32)}
    if node.attrs.get("count_include_pad", 0):
        kernel = spatial(flat)[0]
        counts = np.full(flat.output.type.shape[1:3], kernel[0] * kernel[1], np.float32)
        return {_DIVISORS: counts}
    return {_DIVISORS: np.maximum(avg_divisors(flat, include=False), 1).astype(np.float32)}


def emit_qaverage_pool(k: Kernel) -> None:
    """QLinearAveragePool of 1-D or 2-D NHWC tensors."""
    emit_as_2d(k, _emit_qaverage_pool_2d)


def _emit_qaverage_pool_2d(k: Kernel) -> None:
    """Per output pixel and channel: the window's total, then the rule's division."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    xs, xz, ys, yz = (_scalar(k, i) for i in range(1, 5))
    xz, yz = int(xz), int(yz)
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    widen = b.sext if node.inputs[0].type.dtype == "int8" else b.zext
    tflite = node.attrs.get("requant", "onnx") == "tflite"
    acc_type = I32 if tflite else F32
    total_slot = k.alloca(acc_type)
    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow, \
            k.loop(channels) as c:
        b.store(ir.Constant(acc_type, 0), total_slot)
        with window(k, node, oh, ow) as (ih, iw, _, _):
            x = widen(k.load(k.args[0], k.index((n, height * width * channels),
                                                (ih, width * channels), (iw, channels),
                                                (c, 1))), I32)
            if not tflite:  # the tap dequantized: float32(x - zp) * scale
                x = b.fmul(ir.Constant(F32, float(np.float32(xs))),
                           b.sitofp(b.sub(x, I32(xz)), F32))
            add = b.add if tflite else b.fadd
            b.store(add(b.load(total_slot), x), total_slot)
        total = b.load(total_slot)
        divisor = k.load(k.args[_DIVISORS], k.index((oh, out_w), (ow, 1)))
        if tflite:
            half = b.sdiv(divisor, I32(2))
            up = b.sdiv(b.add(total, half), divisor)
            down = b.sub(I32(0), b.sdiv(b.add(b.sub(I32(0), total), half), divisor))
            value = requant.clamp(k, b.select(b.icmp_signed(">", total, I32(0)), up, down),
                                  low, high)
        else:
            scaled = b.fadd(b.fdiv(b.fdiv(total, divisor), ir.Constant(F32, float(
                np.float32(ys)))), ir.Constant(F32, float(np.float32(yz))))
            lo, hi = ir.Constant(F32, float(low)), ir.Constant(F32, float(high))
            scaled = b.select(b.fcmp_ordered("<", scaled, lo), lo, scaled)
            scaled = b.select(b.fcmp_ordered(">", scaled, hi), hi, scaled)
            value = b.fptosi(requant.rint(k, scaled), I32)
        k.store(b.trunc(value, ir.IntType(8)), k.outs[0],
                k.index((n, out_h * out_w * channels), (oh, out_w * channels),
                        (ow, channels), (c, 1)))
