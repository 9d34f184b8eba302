"""Resize (nearest, linear, cubic) with constant scales or sizes, on any axes.

Interpolation is separable: along each resized axis an output position reads a few input
positions with fixed weights. The compiler computes those taps with the reference
implementation's own coordinate maths (so the two cannot drift apart) and stores them as
tables; the kernel sums the product of the per-axis weights over every tap combination.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.codetables import table
from compiler.codegen.kernel import FAST, Kernel, constant_input, llvm_type, strides
from compiler.errors import KilnError
from compiler.ops.resize import _axis_taps, _is_identity, _plan, _source_coordinates

# Beyond this many taps per output element (antialiased shrinking) the unrolled sum is too big.
MAX_TAPS = 64


def _rois(k: Kernel, plan) -> dict[int, tuple[float, float]]:
    """tf_crop_and_resize's region per resized axis (start, end), from its constant roi."""
    node = k.node
    if node.attrs["coordinate_transformation_mode"] != "tf_crop_and_resize":
        return {}
    roi = constant_input(k, 1, "roi")
    if roi is None:
        raise KilnError(f"cannot generate Resize {node.name}: tf_crop_and_resize needs a "
                        "constant roi")
    roi = np.asarray(roi, np.float32).reshape(2, -1)
    return {axis: (roi[0, i], roi[1, i]) for i, axis in enumerate(plan.axes)}


def axis_taps(k: Kernel) -> list[tuple[np.ndarray, np.ndarray | None, np.ndarray | None]
                                  | None]:
    """Per axis: None when left alone, else (indices, weights, outside).

    Indices [out, taps] are clamped into the axis; weights are None for nearest; outside marks
    the positions beyond the input (tf_crop_and_resize only, else None).
    """
    node = k.node
    mode = node.attrs["coordinate_transformation_mode"]
    shape = node.inputs[0].type.shape
    plan = _plan(node, shape, constant_input(k, 2, "scales"), constant_input(k, 3, "sizes"))
    rois = _rois(k, plan)
    taps: list = [None] * len(shape)
    for axis in plan.axes:
        roi = rois.get(axis)
        if _is_identity(node, plan, shape, axis, roi if roi is not None else (0.0, 1.0)):
            continue
        x = _source_coordinates(mode, plan.out[axis], shape[axis], plan.scales[axis], roi)
        index, weights = _axis_taps(node, x, shape[axis], plan.scales[axis])
        outside = ((x < 0) | (x > shape[axis] - 1)).astype(np.int32) if roi is not None \
            else None
        taps[axis] = (np.clip(index, 0, max(shape[axis] - 1, 0)), weights, outside)
    return taps


def emit_resize(k: Kernel) -> None:
    """y[o] = sum over tap combinations of prod(weight) * x[tap indices], o in output order."""
    node = k.node
    shape, out = node.inputs[0].type.shape, node.output.type.shape
    ty = llvm_type(node.output.type.dtype)
    taps = axis_taps(k)
    counts = [1 if t is None else t[0].shape[1] for t in taps]
    if int(np.prod(counts)) > MAX_TAPS:
        raise KilnError(f"cannot generate Resize {node.name}: more than {MAX_TAPS} taps per "
                        "output element")
    if 0 in out:
        return
    x_strides, y_strides = strides(shape), strides(out)
    index_tables = [None if t is None else table(k, f"idx{a}", t[0] * x_strides[a])
                    for a, t in enumerate(taps)]
    weight_tables = [None if t is None or t[1] is None else table(k, f"w{a}", t[1], ty)
                     for a, t in enumerate(taps)]
    outside_tables = [None if t is None or t[2] is None else table(k, f"out{a}", t[2])
                      for a, t in enumerate(taps)]
    b = k.b
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        base: ir.Value = ir.Constant(idx[0].type, 0)
        for a, i in enumerate(idx):
            if taps[a] is None:
                base = b.add(base, b.mul(i, ir.Constant(i.type, x_strides[a])))
        total = None
        for combo in itertools.product(*(range(n) for n in counts)):
            src, weight = base, None
            for a, t in enumerate(combo):
                if taps[a] is None:
                    continue
                slot = k.index((idx[a], counts[a]), base=t)
                src = b.add(src, k.load(index_tables[a], slot))
                if weight_tables[a] is not None:
                    w = k.load(weight_tables[a], slot)
                    weight = w if weight is None else b.fmul(weight, w, flags=FAST)
            x = k.load(k.args[0], src)
            term = x if weight is None else b.fmul(x, weight, flags=FAST)
            total = term if total is None else b.fadd(total, term, flags=FAST)
        for a, outside in enumerate(outside_tables):
            if outside is not None:  # tf_crop_and_resize: beyond the input, the fill value
                beyond = b.icmp_signed("!=", k.load(outside, idx[a]), ir.Constant(idx[a].type, 0))
                fill = ir.Constant(ty, float(node.attrs["extrapolation_value"]))
                total = b.select(beyond, fill, total)
        k.store(total, k.outs[0], k.index(*zip(idx, y_strides)))
