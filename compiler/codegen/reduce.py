"""The Reduce family over constant axes: sums, means, extremes (8-bit too), products, norms."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.elementwise import intrinsic, max_of, min_of
from compiler.codegen.kernel import FAST, Kernel, constant_input, llvm_type, strides
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
