"""The Reduce family over constant axes, and the row-wise normalizations.

Reductions: sums, means, extremes (8-bit too), products, norms, log-sums. Row-wise:
LayerNormalization, RMSNormalization, LpNormalization and Hardmax.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.elementwise import broadcast_strides, intrinsic, max_of, min_of
from compiler.codegen.kernel import FAST, I32, Kernel, constant_input, llvm_type, strides
from compiler.errors import KilnError


def _add(k, a, x):
    return k.b.fadd(a, x, flags=FAST)


# op -> (start value, combine(k, accumulated, x)).
_REDUCERS = {
    "ReduceSum": (0.0, _add),
    "ReduceMean": (0.0, _add),
    "ReduceMax": (float("-inf"), max_of),
    "ReduceMin": (float("inf"), min_of),
    "ReduceProd": (1.0, lambda k, a, x: k.b.fmul(a, x, flags=FAST)),
    "ReduceL1": (0.0, lambda k, a, x: _add(k, a, intrinsic(k, "fabs", x))),
    "ReduceL2": (0.0, lambda k, a, x: _add(k, a, k.b.fmul(x, x))),
    "ReduceSumSquare": (0.0, lambda k, a, x: _add(k, a, k.b.fmul(x, x))),
    "ReduceLogSum": (0.0, _add),
    "ReduceLogSumExp": (0.0, lambda k, a, x: _add(k, a, intrinsic(k, "exp", x))),
}
# What the reductions with a last step apply to each output once the fold is done.
_FINISH = {"ReduceL2": "sqrt", "ReduceLogSum": "log", "ReduceLogSumExp": "log"}


# 8-bit extremes compare stored integers (the input's quantization is the output's).
_INTEGER_EXTREMES = {"ReduceMax": (">", lambda info: info.min),
                     "ReduceMin": ("<", lambda info: info.max)}


def _integer_reducer(node) -> tuple[int, object]:
    """(start value, combine) of an integer ReduceMax or ReduceMin."""
    dtype = np.dtype("uint8" if node.output.type.dtype == "bool" else node.output.type.dtype)
    if node.op not in _INTEGER_EXTREMES or dtype.kind not in "iu":
        raise KilnError(f"cannot generate {node.op} {node.name} for {dtype.name}")
    sign, start = _INTEGER_EXTREMES[node.op]
    if node.output.type.dtype == "bool":  # bytes of 0 and 1: all (min) starts true, any false
        return int(node.op == "ReduceMin"), _integer_combine(sign, False)
    return start(np.iinfo(dtype)), _integer_combine(sign, dtype.kind == "i")


def _integer_combine(sign: str, signed: bool):
    def combine(k, a, x):
        better = k.b.icmp_signed(sign, x, a) if signed else k.b.icmp_unsigned(sign, x, a)
        return k.b.select(better, x, a)
    return combine


def reduced_axes(k: Kernel) -> tuple[int, ...]:
    """The normalized axes reduced (all of them when none are given, or none for a no-op)."""
    node = k.node
    rank = len(node.inputs[0].type.shape)
    given = node.attrs.get("axes")
    axes = constant_input(k, 1, "axes")
    if axes is not None:
        given = axes.reshape(-1).tolist()
    if not given:
        return () if node.attrs.get("noop_with_empty_axes") else tuple(range(rank))
    return tuple(sorted({int(a) % rank for a in given}))


def emit_reduce(k: Kernel) -> None:
    """One pass over x in memory order, folding each element into its output element.

    The output starts at the reduction's identity; the loops follow x's layout, so the
    innermost one is contiguous in x (and in y when the last axis is kept, as for the
    spatial mean of an NHWC tensor): it vectorizes. A mean divides once at the end.
    """
    node = k.node
    if node.op not in _REDUCERS:
        raise KilnError(f"cannot generate {node.op} {node.name}")
    shape = node.inputs[0].type.shape
    axes = reduced_axes(k)
    ty = llvm_type(node.output.type.dtype)
    if node.output.type.dtype == "float32":
        start, combine = _REDUCERS[node.op]
    else:
        start, combine = _integer_reducer(node)
    kept = [1 if a in axes else d for a, d in enumerate(shape)]
    total = int(np.prod(kept, dtype=np.int64))
    if total == 0:
        return
    x_strides = strides(shape)
    y_strides = [0 if a in axes else int(np.prod(kept[a + 1:], dtype=np.int64))
                 for a in range(len(shape))]
    with k.loop(total) as i:
        k.store(ir.Constant(ty, start), k.outs[0], i)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(d)) for d in shape]
        yi = k.index(*zip(idx, y_strides))
        x = k.load(k.args[0], k.index(*zip(idx, x_strides)))
        k.store(combine(k, k.load(k.outs[0], yi), x), k.outs[0], yi)
    if node.op == "ReduceMean":
        count = ir.Constant(ty, float(np.prod([shape[a] for a in axes], dtype=np.int64)))
        with k.loop(total) as i:
            k.store(k.b.fdiv(k.load(k.outs[0], i), count), k.outs[0], i)
    if node.op in _FINISH:
        with k.loop(total) as i:
            k.store(intrinsic(k, _FINISH[node.op], k.load(k.outs[0], i)), k.outs[0], i)


def emit_layer_norm(k: Kernel) -> None:
    """LayerNormalization and RMSNormalization over the trailing axes, row by row.

    Each row's mean (LayerNormalization only) and mean square are summed in float, then every
    element is normalized, scaled and shifted; LayerNormalization's optional Mean and
    InvStdDev outputs get each row's two statistics.
    """
    node = k.node
    shape = node.inputs[0].type.shape
    axis = int(node.attrs["axis"]) % len(shape)
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    width = int(np.prod(shape[axis:], dtype=np.int64))
    ty = llvm_type("float32")
    b = k.b
    centred = node.op == "LayerNormalization"
    epsilon = ir.Constant(ty, float(np.float32(node.attrs["epsilon"])))
    count = ir.Constant(ty, float(width))

    def broadcast(slot: int, j):
        value = node.inputs[slot] if slot < len(node.inputs) else None
        if value is None:
            return None
        steps = broadcast_strides(value.type.shape, tuple(shape[axis:]))
        return k.load(k.args[slot], k.index(*zip(j, steps)))

    mean, square = k.alloca(ty), k.alloca(ty)
    inner = list(shape[axis:])
    with k.loop(rows) as r:
        b.store(ir.Constant(ty, 0.0), mean)
        with k.loop(width) as i:
            b.store(b.fadd(b.load(mean), k.load(k.args[0], k.index((r, width), (i, 1)))), mean)
        average = b.fdiv(b.load(mean), count) if centred else ir.Constant(ty, 0.0)
        b.store(ir.Constant(ty, 0.0), square)
        with k.loop(width) as i:
            d = b.fsub(k.load(k.args[0], k.index((r, width), (i, 1))), average)
            b.store(b.fadd(b.load(square), b.fmul(d, d)), square)
        scale = b.fdiv(ir.Constant(ty, 1.0),
                       intrinsic(k, "sqrt", b.fadd(b.fdiv(b.load(square), count), epsilon)))
        for slot, statistic in ((1, average), (2, scale)):
            if slot < len(k.outs) and k.outs[slot] is not None:
                k.store(statistic, k.outs[slot], r)
        with ExitStack() as stack:
            j = [stack.enter_context(k.loop(n)) for n in inner]
            at = k.index((r, width), *zip(j, strides(inner)))
            y = b.fmul(b.fsub(k.load(k.args[0], at), average), scale)
            y = b.fmul(y, broadcast(1, j))
            shift = broadcast(2, j)
            k.store(y if shift is None else b.fadd(y, shift), k.outs[0], at)


def _rows(node) -> tuple[int, int, int]:
    """(outer, length, inner) of the axis a row-wise operator works along.

    Hardmax's 2-D coercion (opsets before 13) takes the axis and all later ones as one row.
    """
    shape = node.inputs[0].type.shape
    axis = int(node.attrs["axis"]) % len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    if node.attrs.get("coerce_2d"):
        return outer, int(np.prod(shape[axis:], dtype=np.int64)), 1
    return outer, shape[axis], int(np.prod(shape[axis + 1:], dtype=np.int64))


def emit_lp_normalization(k: Kernel) -> None:
    """Divide x by its L1 or L2 norm along the axis (0 where the norm is 0)."""
    node = k.node
    outer, length, inner = _rows(node)
    ty = llvm_type("float32")
    b = k.b
    norm = k.alloca(ty)
    zero = ir.Constant(ty, 0.0)
    with k.loop(outer) as o, k.loop(inner) as i:
        b.store(zero, norm)
        with k.loop(length) as j:
            x = k.load(k.args[0], k.index((o, length * inner), (j, inner), (i, 1)))
            term = intrinsic(k, "fabs", x) if node.attrs["p"] == 1 else b.fmul(x, x)
            b.store(b.fadd(b.load(norm), term), norm)
        total = b.load(norm)
        total = total if node.attrs["p"] == 1 else intrinsic(k, "sqrt", total)
        empty = b.fcmp_ordered("==", total, zero)
        with k.loop(length) as j:
            at = k.index((o, length * inner), (j, inner), (i, 1))
            y = b.fdiv(k.load(k.args[0], at), b.select(empty, ir.Constant(ty, 1.0), total))
            k.store(b.select(empty, zero, y), k.outs[0], at)


def emit_hardmax(k: Kernel) -> None:
    """1 at the first largest element of each row along the axis, 0 elsewhere."""
    node = k.node
    outer, length, inner = _rows(node)
    ty = llvm_type("float32")
    b = k.b
    best, where = k.alloca(ty), k.alloca(I32)
    with k.loop(outer) as o, k.loop(inner) as i:
        b.store(k.load(k.args[0], k.index((o, length * inner), (i, 1))), best)
        b.store(I32(0), where)
        with k.loop(length) as j:
            x = k.load(k.args[0], k.index((o, length * inner), (j, inner), (i, 1)))
            larger = b.fcmp_ordered(">", x, b.load(best))
            b.store(b.select(larger, x, b.load(best)), best)
            b.store(b.select(larger, j, b.load(where)), where)
        with k.loop(length) as j:
            hot = b.icmp_signed("==", j, b.load(where))
            k.store(b.select(hot, ir.Constant(ty, 1.0), ir.Constant(ty, 0.0)), k.outs[0],
                    k.index((o, length * inner), (j, inner), (i, 1)))


def emit_channel_norm(k: Kernel) -> None:
    """InstanceNormalization and GroupNormalization on (N, C, ...).

    Each item's channel (or group of channels, contiguous) is standardized by its own mean and
    variance, then scaled and shifted per channel (per group before opset 21).
    """
    node, b = k.node, k.b
    shape = node.inputs[0].type.shape
    batch, channels = shape[0], shape[1]
    spatial = int(np.prod(shape[2:], dtype=np.int64))
    groups = node.attrs["num_groups"] if node.op == "GroupNormalization" else channels
    per_group = channels // groups
    span = per_group * spatial
    per_scale_group = node.op == "GroupNormalization" and node.attrs["scale_per_group"]
    f32 = ir.FloatType()
    total, mean_slot = k.alloca(f32), k.alloca(f32)
    with k.loop(batch) as n, k.loop(groups) as g:
        base = k.index((n, channels * spatial), (g, span))
        b.store(f32(0.0), total)
        with k.loop(span) as i:
            b.store(b.fadd(b.load(total), k.load(k.args[0], b.add(base, i))), total)
        b.store(b.fdiv(b.load(total), f32(float(span))), mean_slot)
        mean = b.load(mean_slot)
        b.store(f32(0.0), total)
        with k.loop(span) as i:
            d = b.fsub(k.load(k.args[0], b.add(base, i)), mean)
            b.store(b.fadd(b.load(total), b.fmul(d, d)), total)
        variance = b.fdiv(b.load(total), f32(float(span)))
        inverse = b.fdiv(f32(1.0), intrinsic(k, "sqrt", b.fadd(
            variance, f32(float(node.attrs["epsilon"])))))
        with k.loop(span) as i:
            if per_scale_group:
                c = g
            else:
                c = b.add(b.mul(g, I32(per_group)), b.udiv(i, I32(spatial))) \
                    if per_group > 1 else g
            at = b.add(base, i)
            y = b.fmul(b.fsub(k.load(k.args[0], at), mean), inverse)
            y = b.fadd(b.fmul(y, k.load(k.args[1], c)), k.load(k.args[2], c))
            k.store(y, k.outs[0], at)


def emit_det(k: Kernel) -> None:
    """Det: each square matrix's determinant by Gaussian elimination with partial pivoting.

    A copy of the matrix is reduced in stack scratch; a row swap flips the sign, the product of
    the pivots is the determinant (0 once a pivot is 0).
    """
    node, b = k.node, k.b
    shape = node.inputs[0].type.shape
    n = shape[-1]
    count = int(np.prod(shape[:-2], dtype=np.int64))
    f32 = ir.FloatType()
    a = k.alloca_array(f32, n * n)
    det, best, best_row, factor = k.alloca(f32), k.alloca(f32), k.alloca(I32), k.alloca(f32)
    with k.loop(count) as m:
        with k.loop(n * n) as i:
            k.store(k.load(k.args[0], b.add(b.mul(m, I32(n * n)), i)), a, i)
        b.store(f32(1.0), det)
        with k.loop(n) as col:
            b.store(f32(-1.0), best)
            b.store(col, best_row)
            with k.loop(n) as r:
                size = intrinsic(k, "fabs", k.load(a, k.index((r, n), (col, 1))))
                better = b.and_(b.icmp_signed(">=", r, col),
                                b.fcmp_ordered(">", size, b.load(best)))
                b.store(b.select(better, size, b.load(best)), best)
                b.store(b.select(better, r, b.load(best_row)), best_row)
            pivot_row = b.load(best_row)
            with k.loop(n) as c:
                here, there = k.index((col, n), (c, 1)), k.index((pivot_row, n), (c, 1))
                top, other = k.load(a, here), k.load(a, there)
                k.store(other, a, here)
                k.store(top, a, there)
            swapped = b.icmp_signed("!=", pivot_row, col)
            b.store(b.select(swapped, b.fneg(b.load(det)), b.load(det)), det)
            pivot = k.load(a, k.index((col, n), (col, 1)))
            b.store(b.fmul(b.load(det), pivot), det)
            zero = b.fcmp_ordered("==", pivot, f32(0.0))
            safe = b.select(zero, f32(1.0), pivot)
            with k.loop(n) as r:
                below = b.and_(b.icmp_signed(">", r, col), b.not_(zero))
                b.store(b.select(below, b.fdiv(k.load(a, k.index((r, n), (col, 1))), safe),
                                 f32(0.0)), factor)
                with k.loop(n) as c:
                    at = k.index((r, n), (c, 1))
                    k.store(b.fsub(k.load(a, at), b.fmul(b.load(factor),
                                                         k.load(a, k.index((col, n), (c, 1))))),
                            a, at)
        k.store(b.load(det), k.outs[0], m)
