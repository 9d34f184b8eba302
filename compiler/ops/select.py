"""Operators whose output size depends on values: Compress, NonZero and Unique.

Kiln compiles static shapes, so the values that decide the size must be known when the model
loads (a constant, or computed from constants): Compress's condition, and the whole input of
NonZero and Unique, which then fold to constants.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops._util import normalize_axis, require_known
from compiler.ops.registry import Attr, OpDef, fail, register


def _kept(condition: np.ndarray, length: int) -> np.ndarray:
    """Positions along the axis the condition keeps (a short condition keeps no more)."""
    flat = np.asarray(condition).reshape(-1).astype(bool)[:length]
    return np.nonzero(flat)[0]


def _infer_compress(node, ins, values):
    if ins[1].dtype != "bool" or ins[1].rank != 1:
        fail("Compress's condition must be a 1-D bool tensor")
    condition = require_known(values, 1, "Compress's condition")
    axis = node.attrs["axis"]
    if axis is None:
        return [TensorType((len(_kept(condition, ins[0].numel)),), ins[0].dtype)]
    axis = normalize_axis(axis, ins[0].rank)
    shape = list(ins[0].shape)
    shape[axis] = len(_kept(condition, shape[axis]))
    return [TensorType(tuple(shape), ins[0].dtype)]


def _compress(node, x, condition):
    axis = node.attrs["axis"]
    if axis is None:
        return x.reshape(-1)[_kept(condition, x.size)]
    axis = normalize_axis(axis, x.ndim)
    return np.take(x, _kept(condition, x.shape[axis]), axis=axis)


register(OpDef("Compress", "shape", _infer_compress, _compress, inputs=(2, 2), since=9,
               attrs={"axis": Attr("int", None, "the axis selected along (default: the "
                                                "flattened input)")},
               doc="the slices along an axis where a known condition holds"))


def _infer_non_zero(node, ins, values):
    x = require_known(values, 0, "NonZero's input (it decides the output's size)")
    return [TensorType((ins[0].rank, int(np.count_nonzero(x))), "int64")]


register(OpDef("NonZero", "shape", _infer_non_zero,
               lambda node, x: np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1), since=9,
               doc="the indices of the nonzero elements of a known tensor"))


def _unique(node, x):
    axis = node.attrs["axis"]
    axis = None if axis is None else normalize_axis(axis, x.ndim)
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not node.attrs["sorted"]:  # in order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = values[order] if axis is None else np.take(values, order, axis=axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return (values, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64))


def _infer_unique(node, ins, values):
    x = require_known(values, 0, "Unique's input (it decides the output's size)")
    axis = node.attrs["axis"]
    if axis is not None:
        normalize_axis(axis, ins[0].rank)
    out = _unique(node, np.asarray(x))
    return [TensorType(out[0].shape, ins[0].dtype)] + [TensorType(a.shape, "int64")
                                                        for a in out[1:]]


register(OpDef("Unique", "shape", _infer_unique, _unique, outputs=(1, 4), since=11,
               attrs={"axis": Attr("int", None, "slices along this axis are compared (default: "
                                                "elements)"),
                      "sorted": Attr("int", 1, "1: ascending, 0: in order of first occurrence")},
               doc="the distinct elements or slices of a known tensor, with indices and counts"))
