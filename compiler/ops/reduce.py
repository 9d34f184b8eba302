"""Reduce operators (sums, means, extremes, products, norms, log-sums) over compile-time axes."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops._util import normalize_axes
from compiler.ops.registry import Attr, OpDef, register
from compiler.ops.shape import attr_to_input, input_to_attr, optional_ints

_ATTRS = {
    "keepdims": Attr("int", 1, "1: reduced axes stay, with size 1"),
    "noop_with_empty_axes": Attr("int", 0, "1: empty or omitted axes leave the input unchanged"),
}


def _axes(node, rank: int, axes: list[int] | None) -> tuple[int, ...] | None:
    """The normalized axes to reduce; None when the node is the identity."""
    if not axes:
        return None if node.attrs["noop_with_empty_axes"] else tuple(range(rank))
    return normalize_axes(axes, rank)


def _out_shape(node, shape: tuple[int, ...], axes: tuple[int, ...] | None) -> tuple[int, ...]:
    if axes is None:
        return shape
    if node.attrs["keepdims"]:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _infer(node, ins, values):
    t = ins[0]
    axes = _axes(node, t.rank, optional_ints(values, ins, 1, f"{node.op}'s axes"))
    shape = _out_shape(node, t.shape, axes)
    if node.op in ("ReduceMax", "ReduceMin"):
        return [t.with_shape(shape)]
    return [TensorType(shape, t.dtype)]


def _accumulator(dtype: np.dtype):
    """Wider float accumulation so that float32 results match onnxruntime closely."""
    return np.float64 if dtype.kind == "f" else dtype


def _sum(x, axes, keepdims):
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=_accumulator(x.dtype)).astype(x.dtype)


def _mean(x, axes, keepdims):
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    total = np.sum(x, axis=axes, keepdims=keepdims, dtype=_accumulator(x.dtype))
    if x.dtype.kind != "f":  # integer division truncating toward zero, as onnxruntime does
        return (np.sign(total) * (np.abs(total) // max(count, 1))).astype(x.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (total / count).astype(x.dtype)  # an empty reduction gives nan, as in ONNX


def _lowest(dtype: np.dtype):
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _max(x, axes, keepdims):
    # An empty reduction gives the lowest value of the type (-inf for floats).
    return np.max(x, axis=axes, keepdims=keepdims, initial=_lowest(x.dtype))


def _highest(dtype: np.dtype):
    if dtype.kind == "f":
        return np.inf
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def _min(x, axes, keepdims):
    # An empty reduction gives the highest value of the type (inf for floats).
    return np.min(x, axis=axes, keepdims=keepdims, initial=_highest(x.dtype))


def _wide(fn):
    """`fn` computed in the accumulator type, returned in the input's."""
    def reduce(x, axes, keepdims):
        with np.errstate(all="ignore"):
            return np.asarray(fn(x.astype(_accumulator(x.dtype)), axes, keepdims)).astype(x.dtype)
    return reduce


def _log_sum_exp(x, axes, keepdims):
    top = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0)
    total = np.log(np.sum(np.exp(x - top), axis=axes, keepdims=True)) + top
    return total if keepdims else np.squeeze(total, axis=axes)


_MORE = (
    ("ReduceMin", _min, "Minimum over axes"),
    ("ReduceProd", _wide(lambda x, a, k: np.prod(x, axis=a, keepdims=k)), "Product over axes"),
    ("ReduceL1", _wide(lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k)),
     "Sum of absolute values over axes"),
    ("ReduceL2", _wide(lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k))),
     "Euclidean norm over axes"),
    ("ReduceSumSquare", _wide(lambda x, a, k: np.sum(x * x, axis=a, keepdims=k)),
     "Sum of squares over axes"),
    ("ReduceLogSum", _wide(lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k))),
     "Logarithm of the sum over axes"),
    ("ReduceLogSumExp", _wide(_log_sum_exp), "Logarithm of the sum of exponentials over axes"),
)


def _reference(fn):
    def reference(node, x, axes=None):
        axes = _axes(node, x.ndim, None if axes is None else [int(a) for a in axes.reshape(-1)])
        if axes is None:
            return x
        return np.asarray(fn(x, axes, bool(node.attrs["keepdims"])))
    return reference


def _hooks(op: str, since: int):
    """Encoding hooks: `axes` was an attribute before opset `since`, an input after."""
    def from_onnx(ctx, attrs, names, opset):
        if opset < since:
            names = attr_to_input(ctx, attrs, names, "axes", 1, f"{op.lower()}_axes")
        return attrs, names

    def to_onnx(ctx, attrs, names, opset):
        if opset < since:
            names = input_to_attr(ctx, attrs, names, 1, "axes", op, opset)
        return attrs, names
    return from_onnx, to_onnx


for _op, _fn, _since, _doc in (
        ("ReduceMean", _mean, 18, "Mean over axes"),
        ("ReduceMax", _max, 18, "Maximum over axes"),
        ("ReduceSum", _sum, 13, "Sum over axes"),
        *((_op, _fn, 18, _doc) for _op, _fn, _doc in _MORE)):
    _from, _to = _hooks(_op, _since)
    register(OpDef(_op, "reduce", _infer, _reference(_fn), attrs=dict(_ATTRS), inputs=(1, 2),
                   from_onnx=_from, to_onnx=_to, doc=f"{_doc} (all axes when omitted)"))
