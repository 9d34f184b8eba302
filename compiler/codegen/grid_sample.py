"""GridSample: X sampled at a grid of normalized positions, in any spatial rank.

Per output position, each spatial axis turns its grid value into taps (index, weight) as
compiler/ops/image.py does: unnormalized by align_corners, clamped or reflected by the padding
mode, then one nearest tap (rounded half to even), two linear ones or four cubic ones (A =
-0.75; with a padding mode each cubic tap is padded on its own). Every combination of the
axes' taps adds weight x X at its position, taps outside the image adding nothing.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.codetables import table
from compiler.codegen.elementwise import intrinsic
from compiler.codegen.kernel import I32, Kernel, strides

F32 = ir.FloatType()
_A = -0.75
_MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic",
          "bicubic": "cubic"}


def _reflect(k: Kernel, v, low: float, high: float):
    b = k.b
    span = high - low
    if span <= 0:
        return F32(0.0)
    d = intrinsic(k, "fabs", b.fsub(v, F32(low)))
    flips = intrinsic(k, "floor", b.fdiv(d, F32(span)))
    extra = b.fsub(d, b.fmul(flips, F32(span)))
    even = b.fcmp_ordered("==", intrinsic(k, "fmod", flips, F32(2.0)), F32(0.0))
    return b.select(even, b.fadd(F32(low), extra), b.fsub(F32(high), extra))


def _clamp(k: Kernel, v, low: float, high: float):
    b = k.b
    v = b.select(b.fcmp_ordered("<", v, F32(low)), F32(low), v)
    return b.select(b.fcmp_ordered(">", v, F32(high)), F32(high), v)


def _pad(k: Kernel, v, size: int, padding: str, align: bool):
    if padding == "border":
        return _clamp(k, v, 0.0, size - 1.0)
    if padding == "reflection":
        v = _reflect(k, v, 0.0, size - 1.0) if align else _reflect(k, v, -0.5, size - 0.5)
        return _clamp(k, v, 0.0, size - 1.0)
    return v


def _cubic_weights(k: Kernel, t):
    b = k.b

    def near(d):
        return b.fadd(b.fmul(b.fmul(b.fsub(b.fmul(F32(_A + 2), d), F32(_A + 3)), d), d),
                      F32(1.0))

    def far(d):
        inner = b.fadd(b.fmul(b.fsub(b.fmul(F32(_A), d), F32(5 * _A)), d), F32(8 * _A))
        return b.fsub(b.fmul(inner, d), F32(4 * _A))
    one = F32(1.0)
    return [far(b.fadd(t, one)), near(t), near(b.fsub(one, t)), far(b.fsub(F32(2.0), t))]


def _taps(k: Kernel, v, size: int, mode: str, padding: str, align: bool):
    """[(index as int32, weight)] of one axis; an index may fall outside the image."""
    b = k.b
    if mode == "cubic":
        base = intrinsic(k, "floor", v)
        taps = []
        for offset, w in zip(range(-1, 3), _cubic_weights(k, b.fsub(v, base))):
            index = b.fadd(base, F32(float(offset)))
            if padding != "zeros":
                index = intrinsic(k, "rint", _pad(k, index, size, padding, align))
            taps.append((b.fptosi(index, I32), w))
        return taps
    v = _pad(k, v, size, padding, align)
    if mode == "nearest":
        return [(b.fptosi(intrinsic(k, "rint", v), I32), F32(1.0))]
    base = intrinsic(k, "floor", v)
    frac = b.fsub(v, base)
    index = b.fptosi(base, I32)
    return [(index, b.fsub(F32(1.0), frac)), (b.add(index, I32(1)), frac)]


def emit_grid_sample(k: Kernel) -> None:
    """Y[n, c, p...] = sum over tap combinations of weight x X[n, c, taps...]."""
    node, b = k.node, k.b
    x_shape = node.inputs[0].type.shape
    grid_shape = node.inputs[1].type.shape
    batch, channels, sizes = x_shape[0], x_shape[1], list(x_shape[2:])
    rank = len(sizes)
    out_spatial = list(grid_shape[1:-1])
    mode = _MODES[node.attrs["mode"]]
    padding, align = node.attrs["padding_mode"], bool(node.attrs["align_corners"])
    x_strides = strides(x_shape)
    g_strides = strides(grid_shape)
    y_shape = node.output.type.shape
    y_strides = strides(y_shape)
    total = k.alloca(F32)
    with ExitStack() as stack:
        n = stack.enter_context(k.loop(batch))
        pos = [stack.enter_context(k.loop(size)) for size in out_spatial]
        per_axis = []
        for axis, size in enumerate(sizes):
            at = k.index(*zip([n, *pos, I32(rank - 1 - axis)], g_strides))
            g = k.load(k.args[1], at)  # the grid lists x (the last axis) first
            if align:
                v = b.fmul(b.fmul(b.fadd(g, F32(1.0)), F32(0.5)), F32(size - 1.0))
            else:
                v = b.fmul(b.fsub(b.fmul(b.fadd(g, F32(1.0)), F32(float(size))), F32(1.0)),
                           F32(0.5))
            per_axis.append(_taps(k, v, size, mode, padding, align))
        with k.loop(channels) as c:
            b.store(F32(0.0), total)
            for combo in itertools.product(*per_axis):
                inside = ir.Constant(ir.IntType(1), 1)
                weight = F32(1.0)
                index = []
                for (i, w), size in zip(combo, sizes):
                    ok = b.and_(b.icmp_signed(">=", i, I32(0)), b.icmp_signed("<", i, I32(size)))
                    inside = b.and_(inside, ok)
                    weight = b.fmul(weight, w)
                    index.append(b.select(ok, i, I32(0)))
                value = k.load(k.args[0], k.index(*zip([n, c, *index], x_strides)))
                term = b.select(inside, b.fmul(value, weight), F32(0.0))
                b.store(b.fadd(b.load(total), term), total)
            k.store(b.load(total), k.outs[0], k.index(*zip([n, c, *pos], y_strides)))


def emit_affine_grid(k: Kernel) -> None:
    """AffineGrid: each output position's normalized coordinates (x, y[, z], 1) times theta^T.

    The coordinates are a compile-time table (linspace(-1, 1) with align_corners, pixel
    centres without), as compiler/ops/image.py builds them.
    """
    node, b = k.node, k.b
    size = [int(v) for v in node.inputs[1].data]
    spatial = size[2:]
    rank = len(spatial)
    align = bool(node.attrs["align_corners"])
    axes = [np.linspace(-1, 1, s) if align else (np.arange(s) * 2 + 1) / s - 1 for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1).reshape(-1, rank + 1)
    points = base.shape[0]
    coords = table(k, "coords", base.astype(np.float32), F32)
    total = k.alloca(F32)
    with k.loop(size[0]) as n, k.loop(points) as p, k.loop(rank) as r:
        b.store(F32(0.0), total)
        with k.loop(rank + 1) as j:
            theta = k.load(k.args[0], k.index((n, rank * (rank + 1)), (r, rank + 1), (j, 1)))
            b.store(b.fadd(b.load(total), b.fmul(k.load(coords, k.index((p, rank + 1), (j, 1))),
                                                  theta)), total)
        k.store(b.load(total), k.outs[0], k.index((n, points * rank), (p, rank), (r, 1)))
