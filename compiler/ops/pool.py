"""Pooling: MaxPool (with its optional Indices), AveragePool, LpPool and their global forms."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType, is_float
from compiler.ops._spatial import (
    WINDOW_ATTRS,
    Window,
    activation_shape,
    from_nchw,
    layout_of,
    layout_shape,
    padded_input,
    tap_positions,
    taps,
    to_nchw,
    window,
)
from compiler.ops.registry import Attr, OpDef, fail, register

POOL_ATTRS = {
    **WINDOW_ATTRS,
    "ceil_mode": Attr("int", 0, "1: output sizes round up (the last window may be partial)"),
    "kernel_shape": Attr("ints", doc="spatial window size"),
}

_MAX_TYPES = ("float16", "float32", "float64", "int8", "uint8")


def pool_window(node, shape) -> Window:
    """The window of a pooling node over an NCHW input shape, its attributes checked."""
    kernel = tuple(node.attrs["kernel_shape"])
    if len(kernel) != len(shape) - 2 or any(k < 1 for k in kernel):
        fail(f"kernel_shape {list(kernel)} must give a positive size for each of the "
             f"{len(shape) - 2} spatial axes")
    if node.attrs["ceil_mode"] not in (0, 1):
        fail(f"ceil_mode {node.attrs['ceil_mode']} must be 0 or 1")
    return window(node, shape[2:], kernel, bool(node.attrs["ceil_mode"]))


def _pool_infer(node, ins, values):
    shape = activation_shape(node, ins[0])
    win = pool_window(node, shape)
    # Pooling keeps values on the input's grid, hence its quantization.
    return TensorType(layout_shape((*shape[:2], *win.out), layout_of(node)), ins[0].dtype,
                      ins[0].quant)


# -- MaxPool ------------------------------------------------------------------------------------

def _max_infer(node, ins, values):
    if ins[0].dtype not in _MAX_TYPES:
        fail(f"MaxPool takes {', '.join(_MAX_TYPES)} inputs, got {ins[0].dtype}")
    if node.attrs["storage_order"] not in (0, 1):
        fail(f"storage_order {node.attrs['storage_order']} must be 0 (row major) or 1 (column "
             "major)")
    out = _pool_infer(node, ins, values)
    return [out, out.with_dtype("int64")]  # Y and the optional Indices


def _lowest(dtype: np.dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def spatial_strides(shape, column_major: bool) -> list[int]:
    """Element strides of the spatial axes in a flattened [N, C, *spatial] tensor."""
    axes = list(shape[2:])
    order = range(len(axes)) if column_major else reversed(range(len(axes)))
    strides, step = [0] * len(axes), 1
    for axis in order:
        strides[axis] = step
        step *= axes[axis]
    return strides


def _max_pool(node, x):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    win = pool_window(node, x.shape)
    want_indices = len(node.outputs) > 1
    padded = padded_input(x, win, _lowest(x.dtype))
    best = index = None
    strides = spatial_strides(x.shape, node.attrs["storage_order"] == 1)
    for tap, view in taps(padded, win):
        if best is None:
            best = view.copy()
            index = np.zeros(best.shape, np.int64) if want_indices else None
            better = np.ones(best.shape, bool)
        else:
            better = view > best
            np.maximum(best, view, out=best)
        if want_indices:
            index = np.where(better, _tap_offsets(win, tap, strides), index)
    result = from_nchw(best, layout)
    if not want_indices:
        return result
    # Indices count in the NCHW input flattened (per storage_order), whatever the layout.
    plane = int(np.prod(x.shape[2:]))
    base = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2]) * plane
    index = index + base.reshape(*x.shape[:2], *([1] * (x.ndim - 2)))
    return result, from_nchw(index, layout)


def _tap_offsets(win: Window, tap, strides) -> np.ndarray:
    """Flattened spatial offset of the input element `tap` reads, per output position."""
    offset = np.zeros((), np.int64)
    for axis, t in enumerate(tap):
        pos = tap_positions(win, axis, t) * strides[axis]
        offset = np.add.outer(offset, pos) if offset.ndim else pos
    return offset


register(OpDef("MaxPool", "pool", _max_infer, _max_pool,
               attrs={**POOL_ATTRS,
                      "storage_order": Attr("int", 0, "order of the flattened Indices output")},
               outputs=(1, 2), spatial=True,
               doc="maximum over sliding windows, optionally with the flat index of each maximum"))


# -- AveragePool --------------------------------------------------------------------------------

def _avg_infer(node, ins, values):
    if not is_float(ins[0].dtype):
        fail(f"AveragePool takes float inputs, got {ins[0].dtype}")
    if node.attrs["count_include_pad"] not in (0, 1):
        fail(f"count_include_pad {node.attrs['count_include_pad']} must be 0 or 1")
    return [_pool_infer(node, ins, values)]


def window_counts(win: Window, in_spatial, include_pad: bool) -> np.ndarray:
    """Elements averaged per output position: taps inside the input (or its explicit pads)."""
    count = np.ones((), np.int64)
    for axis, n in enumerate(in_spatial):
        low, high = (-win.begin[axis], n + win.end[axis]) if include_pad else (0, n)
        pos = np.stack([tap_positions(win, axis, t) for t in range(win.kernel[axis])])
        per_axis = ((pos >= low) & (pos < high)).sum(axis=0)
        count = np.multiply.outer(count, per_axis) if count.ndim else per_axis
    return count


def _average_pool(node, x):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    win = pool_window(node, x.shape)
    work = np.float32 if x.dtype == np.float16 else x.dtype
    total = np.zeros((*x.shape[:2], *win.out), work)
    count = window_counts(win, x.shape[2:], node.attrs["count_include_pad"] == 1)
    with np.errstate(over="ignore", invalid="ignore"):  # sums beyond float: IEEE infinity
        for _, view in taps(padded_input(x.astype(work, copy=False), win, 0), win):
            total += view
        return from_nchw((total / np.maximum(count, 1).astype(work)).astype(x.dtype), layout)


register(OpDef("AveragePool", "pool", _avg_infer, _average_pool,
               attrs={**POOL_ATTRS,
                      "count_include_pad": Attr("int", 0, "1: pads count in the divisor")},
               spatial=True, doc="mean over sliding windows"))


# -- LpPool -------------------------------------------------------------------------------------

def _lp_infer(node, ins, values):
    if not is_float(ins[0].dtype):
        fail(f"{node.op} takes float inputs, got {ins[0].dtype}")
    if node.attrs["p"] < 1:
        fail(f"{node.op}'s p must be 1 or more, got {node.attrs['p']}")
    if node.op == "GlobalLpPool":
        return _global_infer(node, ins, values)
    return [_pool_infer(node, ins, values)]


def _lp_pool(node, x):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    win = pool_window(node, x.shape)
    p = node.attrs["p"]
    powers = np.abs(x.astype(np.float64)) ** p
    total = np.zeros((*x.shape[:2], *win.out))
    for _, view in taps(padded_input(powers, win, 0), win):  # pads hold 0: they add nothing
        total += view
    return from_nchw((total ** (1 / p)).astype(x.dtype), layout)


def _global_lp(node, x):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    p = node.attrs["p"]
    total = np.sum(np.abs(x.astype(np.float64)) ** p, axis=tuple(range(2, x.ndim)), keepdims=True)
    return from_nchw((total ** (1 / p)).astype(x.dtype), layout)


_P = {"p": Attr("int", 2, "the norm's exponent")}
register(OpDef("LpPool", "pool", _lp_infer, _lp_pool, attrs={**POOL_ATTRS, **_P}, spatial=True,
               since=11, doc="p-norm over sliding windows"))
register(OpDef("GlobalLpPool", "pool", _lp_infer, _global_lp, attrs=dict(_P), spatial=True,
               since=2, doc="p-norm over all spatial positions"))


# -- global pooling -----------------------------------------------------------------------------

def _global_infer(node, ins, values):
    shape = activation_shape(node, ins[0])
    if node.op == "GlobalMaxPool" and ins[0].dtype not in _MAX_TYPES:
        fail(f"GlobalMaxPool takes {', '.join(_MAX_TYPES)} inputs, got {ins[0].dtype}")
    if node.op == "GlobalAveragePool" and not is_float(ins[0].dtype):
        fail(f"GlobalAveragePool takes float inputs, got {ins[0].dtype}")
    out = (*shape[:2], *([1] * (len(shape) - 2)))
    return [TensorType(layout_shape(out, layout_of(node)), ins[0].dtype, ins[0].quant)]


def _global_average(node, x):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    work = np.float32 if x.dtype == np.float16 else x.dtype
    y = x.mean(axis=tuple(range(2, x.ndim)), dtype=work, keepdims=True)
    return from_nchw(y.astype(x.dtype), layout)


def _global_max(node, x):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    return from_nchw(x.max(axis=tuple(range(2, x.ndim)), keepdims=True), layout)


register(OpDef("GlobalAveragePool", "pool", _global_infer, _global_average, spatial=True,
               doc="mean over all spatial positions"))
register(OpDef("GlobalMaxPool", "pool", _global_infer, _global_max, spatial=True,
               doc="maximum over all spatial positions"))
