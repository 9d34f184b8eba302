"""Operators about positions: arg-extremes, TopK, running sums, gathers, scatters, OneHot."""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import TensorType
from compiler.ops._util import normalize_axis
from compiler.ops.elementwise import NUMERIC, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.ops.shape import known_ints, optional_ints

INDICES = ("int32", "int64")

# -- ArgMax, ArgMin ------------------------------------------------------------------------------


def _infer_arg(node, ins, values):
    t = ins[0]
    require_dtype(node, t, NUMERIC)
    axis = normalize_axis(node.attrs["axis"], t.rank)
    shape = list(t.shape)
    if node.attrs["keepdims"]:
        shape[axis] = 1
    else:
        del shape[axis]
    if t.shape[axis] == 0:
        fail(f"{node.op} over an empty axis has no answer")
    return [TensorType(tuple(shape), "int64")]


def _arg(pick):
    def reference(node, x):
        axis = normalize_axis(node.attrs["axis"], x.ndim)
        if node.attrs["select_last_index"]:
            flipped = pick(np.flip(x, axis), axis=axis)
            index = x.shape[axis] - 1 - flipped
        else:
            index = pick(x, axis=axis)
        index = index.astype(np.int64)
        return np.expand_dims(index, axis) if node.attrs["keepdims"] else index
    return reference


_ARG_ATTRS = {"axis": Attr("int", 0, "the axis searched"),
              "keepdims": Attr("int", 1, "1: the searched axis stays, with size 1"),
              "select_last_index": Attr("int", 0, "1: the last of equal extremes, 0: the first")}
register(OpDef("ArgMax", "reduce", _infer_arg, _arg(np.argmax), attrs=dict(_ARG_ATTRS),
               doc="index of the largest element along an axis (int64)"))
register(OpDef("ArgMin", "reduce", _infer_arg, _arg(np.argmin), attrs=dict(_ARG_ATTRS),
               doc="index of the smallest element along an axis (int64)"))


# -- TopK ----------------------------------------------------------------------------------------

def _infer_topk(node, ins, values):
    t = ins[0]
    require_dtype(node, t, NUMERIC)
    axis = normalize_axis(node.attrs["axis"], t.rank)
    k = known_ints(values, 1, "TopK's K")
    if len(k) != 1 or not 0 <= k[0] <= t.shape[axis]:
        fail(f"TopK's K must be one number from 0 to {t.shape[axis]}, got {k}")
    shape = t.shape[:axis] + (k[0],) + t.shape[axis + 1:]
    return [TensorType(shape, t.dtype), TensorType(shape, "int64")]


def _topk(node, x, k):
    axis = normalize_axis(node.attrs["axis"], x.ndim)
    k = int(np.asarray(k).reshape(-1)[0])
    n = x.shape[axis]
    if node.attrs["largest"]:
        # Descending, equal values by ascending index: sort the reversed axis ascending,
        # stable, then read it backwards.
        order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        order = n - 1 - np.flip(order, axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    index = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, index, axis=axis), index


register(OpDef("TopK", "reduce", _infer_topk, _topk, inputs=(2, 2), outputs=(2, 2), since=10,
               attrs={"axis": Attr("int", -1, "the axis searched"),
                      "largest": Attr("int", 1, "1: the largest K, 0: the smallest"),
                      "sorted": Attr("int", 1, "1: in order (Kiln always sorts)")},
               doc="the K largest (or smallest) values along an axis and their indices"))


# -- CumSum, CumProd -----------------------------------------------------------------------------

def _infer_cumulative(node, ins, values):
    require_dtype(node, ins[0], NUMERIC)
    axis = known_ints(values, 1, f"{node.op}'s axis")
    if len(axis) != 1:
        fail(f"{node.op}'s axis must be one number, got {axis}")
    normalize_axis(axis[0], ins[0].rank)
    return [TensorType(ins[0].shape, ins[0].dtype)]


def _cumulative(ufunc, identity):
    @quiet
    def reference(node, x, axis):
        axis = normalize_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
        work = np.flip(x, axis) if node.attrs["reverse"] else x
        out = ufunc.accumulate(work, axis=axis, dtype=x.dtype)
        if node.attrs["exclusive"]:
            pad = np.full_like(np.take(out, [0], axis=axis), identity)
            out = np.concatenate([pad, np.take(out, np.arange(x.shape[axis] - 1), axis=axis)],
                                 axis=axis)
        return np.flip(out, axis) if node.attrs["reverse"] else out
    return reference


_CUMULATIVE_ATTRS = {"exclusive": Attr("int", 0, "1: each element leaves itself out"),
                     "reverse": Attr("int", 0, "1: from the end of the axis")}
register(OpDef("CumSum", "reduce", _infer_cumulative, _cumulative(np.add, 0), inputs=(2, 2),
               since=11, attrs=dict(_CUMULATIVE_ATTRS), doc="running sum along an axis"))
register(OpDef("CumProd", "reduce", _infer_cumulative, _cumulative(np.multiply, 1),
               inputs=(2, 2), since=26, attrs=dict(_CUMULATIVE_ATTRS),
               doc="running product along an axis"))


# -- Trilu ---------------------------------------------------------------------------------------

def _infer_trilu(node, ins, values):
    if ins[0].rank < 2:
        fail(f"Trilu needs a tensor of rank 2 or more, got rank {ins[0].rank}")
    k = optional_ints(values, ins, 1, "Trilu's k")
    if k is not None and len(k) != 1:
        fail(f"Trilu's k must be one number, got {k}")
    return [TensorType(ins[0].shape, ins[0].dtype)]


def _trilu(node, x, k=None):
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    keep = np.triu if node.attrs["upper"] else np.tril
    return keep(x, k)


register(OpDef("Trilu", "shape", _infer_trilu, _trilu, inputs=(1, 2), since=14,
               attrs={"upper": Attr("int", 1, "1: keep the upper triangle, 0: the lower")},
               doc="the upper or lower triangle of the last two axes, the rest zero"))


# -- GatherElements, GatherND --------------------------------------------------------------------

def _checked_indices(indices: np.ndarray, size, what: str) -> np.ndarray:
    """Indices with negatives counted from the end; ModelError when one is out of range."""
    indices = indices.astype(np.int64)
    if np.any(indices >= size) or np.any(indices < -np.asarray(size)):
        raise ModelError(f"{what} has an index out of range")
    return np.where(indices < 0, indices + size, indices)


def _infer_gather_elements(node, ins, values):
    require_dtype(node, ins[1], INDICES, "index")
    if ins[0].rank != ins[1].rank:
        fail(f"GatherElements needs data and indices of one rank, got {ins[0].rank} and "
             f"{ins[1].rank}")
    normalize_axis(node.attrs["axis"], ins[0].rank)
    return [TensorType(ins[1].shape, ins[0].dtype)]


def _gather_elements(node, data, indices):
    axis = normalize_axis(node.attrs["axis"], data.ndim)
    index = _checked_indices(indices, data.shape[axis], "GatherElements")
    return np.take_along_axis(data, index, axis=axis)


register(OpDef("GatherElements", "shape", _infer_gather_elements, _gather_elements,
               inputs=(2, 2), since=11, attrs={"axis": Attr("int", 0, "the axis indexed")},
               doc="data[..., indices[i], ...] element by element along an axis"))


def _infer_gather_nd(node, ins, values):
    data, indices = ins
    require_dtype(node, indices, ("int64",), "index")
    b = node.attrs["batch_dims"]
    depth = indices.shape[-1] if indices.rank else 0
    if indices.rank < 1 or not 0 <= b < min(data.rank, indices.rank) or b + depth > data.rank:
        fail(f"GatherND cannot index rank {data.rank} with indices {list(indices.shape)} and "
             f"batch_dims {b}")
    if data.shape[:b] != indices.shape[:b]:
        fail(f"GatherND's batch axes differ: {list(data.shape[:b])} and {list(indices.shape[:b])}")
    return [TensorType(indices.shape[:-1] + data.shape[b + depth:], data.dtype)]


def _gather_nd(node, data, indices):
    b = node.attrs["batch_dims"]
    depth = indices.shape[-1]
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_index = indices.reshape((batch, -1, depth))
    index = _checked_indices(flat_index, np.array(data.shape[b:b + depth]), "GatherND")
    rows = [flat_data[i][tuple(index[i].T)] for i in range(batch)]
    return np.stack(rows).reshape(indices.shape[:-1] + data.shape[b + depth:])


register(OpDef("GatherND", "shape", _infer_gather_nd, _gather_nd, inputs=(2, 2), since=11,
               attrs={"batch_dims": Attr("int", 0, "leading axes shared by data and indices")},
               doc="slices of data addressed by the last axis of indices"))


# -- ScatterElements, Scatter, ScatterND ---------------------------------------------------------

_REDUCTIONS = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum,
               "min": np.minimum}


def _reduction(node):
    name = node.attrs["reduction"]
    if name not in _REDUCTIONS:
        fail(f"{node.op}'s reduction must be one of {', '.join(_REDUCTIONS)}, not {name!r}")
    return _REDUCTIONS[name]


def _infer_scatter_elements(node, ins, values):
    data, indices, updates = ins
    require_dtype(node, indices, INDICES, "index")
    _reduction(node)
    if indices.shape != updates.shape or indices.rank != data.rank:
        fail(f"{node.op} needs indices and updates of one shape and data's rank, got "
             f"{list(indices.shape)} and {list(updates.shape)} for rank {data.rank}")
    normalize_axis(node.attrs["axis"], data.rank)
    return [TensorType(data.shape, data.dtype)]


def _scatter_elements(node, data, indices, updates):
    axis = normalize_axis(node.attrs["axis"], data.ndim)
    index = _checked_indices(indices, data.shape[axis], node.op)
    out = data.copy()
    combine = _reduction(node)
    for position in np.ndindex(*index.shape):
        target = list(position)
        target[axis] = index[position]
        target = tuple(target)
        out[target] = updates[position] if combine is None else combine(out[target],
                                                                          updates[position])
    return out


_SCATTER_ATTRS = {"axis": Attr("int", 0, "the axis indexed"),
                  "reduction": Attr("string", "none", "none, add, mul, max or min: how an "
                                                      "update combines with what is there")}
register(OpDef("ScatterElements", "shape", _infer_scatter_elements, _scatter_elements,
               inputs=(3, 3), since=11, attrs=dict(_SCATTER_ATTRS),
               doc="data with updates written at indices along an axis"))
register(OpDef("Scatter", "shape", _infer_scatter_elements, _scatter_elements, inputs=(3, 3),
               since=9, attrs={**_SCATTER_ATTRS, "reduction": Attr(
                   "string", "none", "Kiln only: always none", onnx=False)},
               doc="ScatterElements of opsets 9 and 10"))


def _infer_scatter_nd(node, ins, values):
    data, indices, updates = ins
    require_dtype(node, indices, ("int64",), "index")
    _reduction(node)
    depth = indices.shape[-1] if indices.rank else 0
    want = indices.shape[:-1] + data.shape[depth:]
    if indices.rank < 1 or depth > data.rank or updates.shape != want:
        fail(f"ScatterND needs updates of shape {list(want)}, got {list(updates.shape)}")
    return [TensorType(data.shape, data.dtype)]


def _scatter_nd(node, data, indices, updates):
    depth = indices.shape[-1]
    index = _checked_indices(indices.reshape(-1, depth), np.array(data.shape[:depth]), "ScatterND")
    rows = updates.reshape((index.shape[0],) + data.shape[depth:])
    out = data.copy()
    combine = _reduction(node)
    for where, row in zip(index, rows):
        at = tuple(where)
        out[at] = row if combine is None else combine(out[at], row)
    return out


register(OpDef("ScatterND", "shape", _infer_scatter_nd, _scatter_nd, inputs=(3, 3), since=11,
               attrs={"reduction": _SCATTER_ATTRS["reduction"]},
               doc="data with updates written at the slices indices address"))


# -- OneHot --------------------------------------------------------------------------------------

def _infer_one_hot(node, ins, values):
    indices, depth, pair = ins
    require_dtype(node, indices, NUMERIC, "index")
    value = values[1]
    if value is None or np.asarray(value).size != 1:
        fail("OneHot's depth must be one number known at compile time")
    if pair.shape not in ((2,),):
        fail(f"OneHot's values must be [off, on], got shape {list(pair.shape)}")
    n = int(np.asarray(value).reshape(-1)[0])
    if n < 1:
        fail(f"OneHot's depth must be positive, got {n}")
    rank = indices.rank + 1
    axis = normalize_axis(node.attrs["axis"], rank)
    return [TensorType(indices.shape[:axis] + (n,) + indices.shape[axis:], pair.dtype)]


def _one_hot(node, indices, depth, pair):
    n = int(np.asarray(depth).reshape(-1)[0])
    axis = normalize_axis(node.attrs["axis"], indices.ndim + 1)
    index = indices.astype(np.float64) if indices.dtype.kind == "f" else indices
    index = np.where(index < 0, index + n, index).astype(np.int64)
    hot = index[..., None] == np.arange(n)
    out = np.where(hot, pair[1], pair[0]).astype(pair.dtype)
    return np.moveaxis(out, -1, axis)


register(OpDef("OneHot", "shape", _infer_one_hot, _one_hot, inputs=(3, 3), since=9,
               attrs={"axis": Attr("int", -1, "where the new axis goes")},
               doc="on where the position equals the index, off elsewhere"))


# -- TensorScatter -------------------------------------------------------------------------------

def _infer_tensor_scatter(node, ins, values):
    cache, update = ins[:2]
    axis = normalize_axis(node.attrs["axis"], cache.rank)
    if node.attrs["mode"] not in ("linear", "circular"):
        fail(f"TensorScatter's mode must be linear or circular, not {node.attrs['mode']!r}")
    if axis == 0 or update.rank != cache.rank or any(
            a != b for i, (a, b) in enumerate(zip(cache.shape, update.shape)) if i != axis) \
            or update.shape[axis] > cache.shape[axis]:
        fail(f"TensorScatter cannot write an update {list(update.shape)} into a cache "
             f"{list(cache.shape)} along axis {node.attrs['axis']}")
    return [TensorType(cache.shape, cache.dtype)]


def _tensor_scatter(node, cache, update, write=None):
    axis = normalize_axis(node.attrs["axis"], cache.ndim)
    size, steps = cache.shape[axis], update.shape[axis]
    write = np.zeros(cache.shape[0], np.int64) if write is None else write.astype(np.int64)
    out = cache.copy()
    for b in range(cache.shape[0]):
        where = write[b] + np.arange(steps)
        if node.attrs["mode"] == "circular":
            where = where % size
        elif where.size and (where[0] < 0 or where[-1] >= size):
            raise ModelError(f"TensorScatter writes past the cache's {size} positions")
        target = np.moveaxis(out[b], axis - 1, 0)
        target[where] = np.moveaxis(update[b], axis - 1, 0)
    return out


register(OpDef("TensorScatter", "shape", _infer_tensor_scatter, _tensor_scatter, inputs=(2, 3),
               since=24, attrs={"axis": Attr("int", -2, "the sequence axis (not the batch)"),
                                "mode": Attr("string", "linear", "linear or circular writes")},
               doc="a cache with each batch item's update written at its index"))
