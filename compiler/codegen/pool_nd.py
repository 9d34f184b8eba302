"""Pooling in any spatial rank and either layout: MaxPool, AveragePool, LpPool, GlobalMaxPool.

The 2-D channels-last pools have their own kernels (compiler/codegen/pool.py); this one takes
the others, 1-D to 3-D, with the window geometry of compiler/ops (pads, auto_pad, ceil_mode,
dilations). Each output position visits its taps; taps outside the input count for nothing
(the maximum skips them, sums add nothing), and the average divides by the compile-time count
of window_counts (pads counted or not, as count_include_pad says). MaxPool's optional indices
count in the NCHW input flattened per storage_order, the first maximum winning.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.codetables import table
from compiler.codegen.elementwise import intrinsic, max_of
from compiler.codegen.kernel import I32, Kernel, strides
from compiler.codegen.window import tap_positions
from compiler.ops._spatial import Window, layout_of, nchw_shape
from compiler.ops.pool import pool_window, spatial_strides, window_counts

F32 = ir.FloatType()
GLOBAL = ("GlobalMaxPool", "GlobalLpPool")


def _window(node, shape) -> Window:
    if node.op in GLOBAL:
        spatial = tuple(shape[2:])
        ones = (1,) * len(spatial)
        return Window(spatial, ones, ones, (0,) * len(spatial), (0,) * len(spatial), ones)
    return pool_window(node, shape)


def emit_pool_nd(k: Kernel) -> None:
    """One reduction of its window per output element."""
    node, b = k.node, k.b
    layout = layout_of(node)
    shape = nchw_shape(node.inputs[0].type.shape, layout)
    batch, channels, *spatial = shape
    win = _window(node, shape)
    maximum = node.op in ("MaxPool", "GlobalMaxPool")
    p = float(node.attrs.get("p", 2)) if "Lp" in node.op else None
    x_dims = list(node.inputs[0].type.shape)
    y_dims = list(node.output.type.shape)
    x_st, y_st = strides(x_dims), strides(y_dims)

    def at(n, c, pos, st):
        dims = [n, *pos, c] if layout == "NHWC" else [n, c, *pos]
        return k.index(*zip(dims, st))

    counts = None
    if node.op == "AveragePool":
        counts = table(k, "counts", np.maximum(window_counts(
            win, spatial, node.attrs["count_include_pad"] == 1), 1).astype(np.float32).reshape(-1),
            F32)
    acc = k.alloca(F32)
    indices = k.outs[1] if maximum and len(k.outs) > 1 and k.outs[1] is not None else None
    best = k.alloca(ir.IntType(64))
    # Indices count in the NCHW input flattened row- or column-major (storage_order).
    spatial_st = spatial_strides(shape, node.attrs.get("storage_order", 0) == 1)
    plane = int(np.prod(spatial, dtype=np.int64))
    with ExitStack() as stack:
        n = stack.enter_context(k.loop(batch))
        c = stack.enter_context(k.loop(channels))
        out = [stack.enter_context(k.loop(size)) for size in win.out]
        b.store(F32(float("-inf")) if maximum else F32(0.0), acc)
        b.store(ir.Constant(ir.IntType(64), 0), best)
        with ExitStack() as taps_stack:
            taps = [taps_stack.enter_context(k.loop(size)) for size in win.kernel]
            inside, pos = tap_positions(k, out, taps, win, spatial)
            v = k.load(k.args[0], at(n, c, pos, x_st))
            old = b.load(acc)
            if maximum:
                new = max_of(k, v, old)
                if indices is not None:
                    offset = b.add(b.mul(b.add(b.mul(n, I32(channels)), c), I32(plane)),
                                   k.index(*zip(pos, spatial_st)))
                    better = b.and_(inside, b.fcmp_ordered(">", v, old))
                    b.store(b.select(better, b.sext(offset, ir.IntType(64)), b.load(best)),
                            best)
            elif p is not None:
                magnitude = intrinsic(k, "fabs", v)
                power = b.fmul(magnitude, magnitude) if p == 2 else intrinsic(
                    k, "pow", magnitude, F32(p))
                new = b.fadd(old, power)
            else:
                new = b.fadd(old, v)
            b.store(b.select(inside, new, old), acc)
        result = b.load(acc)
        if counts is not None:
            flat = k.index(*zip(out, strides(list(win.out))))
            result = b.fdiv(result, k.load(counts, flat))
        elif p is not None:
            result = intrinsic(k, "sqrt", result) if p == 2 else intrinsic(
                k, "pow", result, F32(1.0 / p))
        k.store(result, k.outs[0], at(n, c, out, y_st))
        if indices is not None:
            k.store(b.load(best), indices, at(n, c, out, y_st))
