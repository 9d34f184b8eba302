"""Max and average pooling, NHWC, and 1-D pooling run as an image of height 1.

The pipeline lowers a ReduceMean over one axis of a 3-D tensor (and 1-D models pool) to a
1-D AveragePool. Its memory layout is exactly that of [N, 1, L, C], so the 2-D NHWC kernel
serves it unchanged once it sees the node with a unit height.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.elementwise import max_of
from compiler.codegen.kernel import FAST, Kernel, llvm_type
from compiler.codegen.window import window
from compiler.ir.graph import Node, Value
from compiler.ir.types import TensorType
from compiler.ops.geometry import spatial


def avg_divisors(node: Node, include: bool | None = None) -> np.ndarray:
    """Per output pixel, how many taps the average divides by (ONNX count_include_pad rules).

    `include` overrides the node's count_include_pad (False: only taps inside the image).
    """
    (kh_n, kw_n), (sh, sw), (dh, dw), (pt, pl, pb, pr) = spatial(node)
    _, height, width, _ = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    if include is None:
        include = bool(node.attrs.get("count_include_pad", 0))
    lo_h, hi_h = (-pt, height + pb) if include else (0, height)
    lo_w, hi_w = (-pl, width + pr) if include else (0, width)
    counts = np.zeros((out_h, out_w), np.float32)
    for oh in range(out_h):
        rows = sum(lo_h <= oh * sh - pt + i * dh < hi_h for i in range(kh_n))
        for ow in range(out_w):
            counts[oh, ow] = rows * sum(lo_w <= ow * sw - pl + i * dw < hi_w
                                        for i in range(kw_n))
    return counts


def emit_pool(k: Kernel) -> None:
    """NHWC max or average pooling, the loop over channels innermost at every tap.

    Each output pixel's channels start at -inf (max) or 0 (average) in the output itself; every
    tap of the window then updates all channels with one contiguous, vectorized loop, and an
    average divides them by the pixel's tap count at the end.
    """
    node = k.node
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    dtype = node.output.type.dtype
    ty = llvm_type(dtype)
    is_max = node.op == "MaxPool"
    b = k.b
    integer = isinstance(ty, ir.IntType)  # an 8-bit MaxPool compares the stored integers
    lowest = ir.Constant(ty, -128 if dtype == "int8" else 0) if integer else \
        ir.Constant(ty, float("-inf"))
    compare = b.icmp_signed if dtype == "int8" else b.icmp_unsigned

    def larger(old, x):
        return b.select(compare(">", x, old), x, old) if integer else max_of(k, old, x)

    with k.loop(batch) as n, k.loop(out_h) as oh, k.loop(out_w) as ow:
        y0 = k.index((n, out_h * out_w * channels), (oh, out_w * channels), (ow, channels))
        with k.loop(channels) as c:
            k.store(lowest if is_max else ir.Constant(ty, 0.0), k.outs[0], b.add(y0, c))
        with window(k, node, oh, ow) as (ih, iw, _, _):
            x0 = k.index((n, height * width * channels), (ih, width * channels),
                         (iw, channels))
            with k.loop(channels) as c:
                yi = b.add(y0, c)
                x, old = k.load(k.args[0], b.add(x0, c)), k.load(k.outs[0], yi)
                k.store(larger(old, x) if is_max else b.fadd(old, x, flags=FAST),
                        k.outs[0], yi)
        if not is_max:
            divisor = k.load(k.args[1], k.index((oh, out_w), (ow, 1)))
            with k.loop(channels) as c:
                yi = b.add(y0, c)
                k.store(b.fdiv(k.load(k.outs[0], yi), divisor), k.outs[0], yi)


def _taller(value: Value | None) -> Value | None:
    """A 3-D tensor seen with height 1; any other input (a scale, a zero point) as it is."""
    if value is None or value.type.rank != 3:
        return value
    t = value.type
    return Value(value.name, TensorType((t.shape[0], 1, *t.shape[1:]), t.dtype, t.quant))


def as_2d(node: Node) -> Node:
    """`node` itself when it is 2-D, else a stand-in of height 1 with 2-D attributes."""
    if len(node.inputs[0].type.shape) != 3 or node.attrs.get("layout") != "NHWC":
        return node
    attrs = dict(node.attrs)
    attrs["kernel_shape"] = (1, *attrs["kernel_shape"])
    attrs["strides"] = (1, *(attrs.get("strides") or (1,)))
    attrs["dilations"] = (1, *(attrs.get("dilations") or (1,)))
    begin, end = attrs.get("pads") or (0, 0)
    attrs["pads"] = (0, begin, 0, end)
    return Node(node.id, node.op, node.name, [_taller(v) for v in node.inputs],
                [_taller(v) for v in node.outputs], attrs, node.provenance)


def emit_as_2d(k: Kernel, emit) -> None:
    """Run the 2-D emitter `emit` on a 1-D or 2-D NHWC node (a 1-D one seen with height 1)."""
    node = k.node
    k.node = as_2d(node)
    try:
        emit(k)
    finally:
        k.node = node


def emit_pool_any(k: Kernel) -> None:
    """MaxPool / AveragePool of 1-D or 2-D NHWC tensors."""
    emit_as_2d(k, emit_pool)


def avg_divisors_any(node: Node) -> dict[int, np.ndarray]:
    """The average pool's per-pixel divisors (slot 1), for 1-D or 2-D NHWC."""
    return {1: avg_divisors(as_2d(node))}
