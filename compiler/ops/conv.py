"""Convolutions: Conv and ConvTranspose, 1-D to 3-D, grouped, dilated, strided and padded."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType, is_float
from compiler.ops._spatial import (
    WINDOW_ATTRS,
    Window,
    activation_shape,
    explicit_pads,
    from_nchw,
    layout_of,
    layout_shape,
    padded_input,
    per_axis,
    to_nchw,
    window,
)
from compiler.ops.kiln import ACTIVATION_ATTRS, apply_activation, check_activation
from compiler.ops.registry import Attr, OpDef, fail, register

CONV_ATTRS = {
    **WINDOW_ATTRS,
    "group": Attr("int", 1, "input and output channels split into this many groups"),
    "kernel_shape": Attr("ints", None, "spatial kernel size (default: from the weights)"),
}


def _work_dtype(dtype) -> np.dtype:
    """float16 is computed in float32 (as onnxruntime does), float32 in float64.

    float32 sums in float64, rounded once, do not depend on how the BLAS splits the work:
    output channels with equal weights get equal results (a softmax over logits near 1e10
    otherwise turns one ulp of difference into a wrong distribution).
    """
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype == np.float16 else (
        np.dtype(np.float64) if dtype == np.float32 else dtype)


def _check_operands(node, ins) -> tuple[tuple[int, ...], int]:
    """Common checks of Conv and ConvTranspose; returns the NCHW input shape and the group."""
    x, w, b = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    shape = activation_shape(node, x)
    if not is_float(x.dtype) or w.dtype != x.dtype:
        fail(f"input and weights must have the same float element type, got {x.dtype} and "
             f"{w.dtype}")
    if w.rank != len(shape):
        fail(f"weights of shape {list(w.shape)} must have the rank of the input "
             f"{list(shape)}")
    group = node.attrs["group"]
    if group < 1 or shape[1] % group:
        fail(f"group {group} must be positive and divide the {shape[1]} input channels")
    kernel = node.attrs.get("kernel_shape")
    if kernel is not None and tuple(kernel) != tuple(w.shape[2:]):
        fail(f"kernel_shape {list(kernel)} does not match the weights' spatial shape "
             f"{list(w.shape[2:])}")
    outputs = w.shape[1] * group if node.op == "ConvTranspose" else w.shape[0]
    if b is not None and (b.shape != (outputs,) or b.dtype != x.dtype):
        fail(f"bias must be {x.dtype}[{outputs}] (one per output channel), got {b}")
    return shape, group


# -- Conv ---------------------------------------------------------------------------------------

def conv_window(node, x_shape, w_shape) -> Window:
    """The window of a convolution of an NCHW input shape by weights of `w_shape`."""
    return window(node, x_shape[2:], tuple(w_shape[2:]))


def _conv_infer(node, ins, values):
    shape, group = _check_operands(node, ins)
    w = ins[1]
    if w.shape[1] * group != shape[1]:
        fail(f"weights of shape {list(w.shape)} with group {group} expect "
             f"{w.shape[1] * group} input channels, the input has {shape[1]}")
    if w.shape[0] % group:
        fail(f"group {group} must divide the {w.shape[0]} output channels")
    win = conv_window(node, shape, w.shape)
    out = (shape[0], w.shape[0], *win.out)
    check_activation(node, ins[0].dtype)
    return [TensorType(layout_shape(out, layout_of(node)), ins[0].dtype)]


def patches(x: np.ndarray, win: Window) -> np.ndarray:
    """View [N, C, *out, *kernel] of the padded input: what each tap reads at each output."""
    rank = len(win.kernel)
    view = np.lib.stride_tricks.sliding_window_view(x, win.extent, axis=tuple(range(2, 2 + rank)))
    steps = tuple(slice(None, None, s) for s in win.strides)
    taps = tuple(slice(None, None, d) for d in win.dilations)
    return view[(slice(None), slice(None), *steps, *taps)]


def convolve(node, x, w, b=None, work=None):
    """im2col (one copy of the patches) and one batched matmul over the groups.

    `work` is the element type the sums are made in (by default float64 for float32, for
    results that do not depend on the BLAS; the quantization workbench trades that for speed).
    """
    layout = layout_of(node)
    x = to_nchw(x, layout)
    work = _work_dtype(x.dtype) if work is None else np.dtype(work)
    win = conv_window(node, x.shape, w.shape)
    group = node.attrs["group"]
    n, c = x.shape[:2]
    rank = len(win.kernel)
    cols = patches(padded_input(x.astype(work, copy=False), win, 0), win)
    cols = cols.reshape(n, group, c // group, *cols.shape[2:])
    # [G, N, *out, Cg, *kernel] -> [G, N*P, Cg*K]
    order = (1, 0, *range(3, 3 + rank), 2, *range(3 + rank, 3 + 2 * rank))
    cols = cols.transpose(order).reshape(group, n * int(np.prod(win.out)), -1)
    m = w.shape[0]
    kernels = w.astype(work, copy=False).reshape(group, m // group, -1).transpose(0, 2, 1)
    with np.errstate(all="ignore"):  # inf and NaN products are IEEE semantics here
        y = np.matmul(cols, kernels)  # [G, N*P, Mg]
    y = y.reshape(group, n, *win.out, m // group).transpose(1, 0, 2 + rank, *range(2, 2 + rank))
    y = y.reshape(n, m, *win.out)
    if b is not None:
        y = y + b.astype(work).reshape(m, *([1] * rank))
    return apply_activation(node, from_nchw(y.astype(x.dtype, copy=False), layout))


def _conv_macs(node) -> int:
    w = node.inputs[1].type
    return node.outputs[0].type.numel * int(np.prod(w.shape[1:]))


register(OpDef("Conv", "conv", _conv_infer, convolve, attrs={**CONV_ATTRS, **ACTIVATION_ATTRS},
               inputs=(2, 3), macs=_conv_macs, spatial=True,
               doc="N-D convolution (grouped, dilated, strided, padded) with optional bias"))


# -- ConvTranspose ------------------------------------------------------------------------------

def transpose_geometry(node, in_spatial, kernel) -> tuple[list[int], list[int], list[int]]:
    """(begin crop, output size, full size) per spatial axis of a ConvTranspose.

    The full output is where every input position's kernel lands; the output is the part of it
    from `begin` (negative begins and oversized outputs read zeros).
    """
    rank = len(in_spatial)
    strides = per_axis(node, "strides", rank, 1)
    dilations = per_axis(node, "dilations", rank, 1)
    extra = per_axis(node, "output_padding", rank, 0, minimum=0)
    if any(p >= max(s, d) for p, s, d in zip(extra, strides, dilations)):
        fail(f"output_padding {list(extra)} must be smaller than the strides {list(strides)} or "
             f"dilations {list(dilations)}")
    full = [s * (n - 1) + (k - 1) * d + 1 + p
            for n, k, s, d, p in zip(in_spatial, kernel, strides, dilations, extra)]
    auto_pad = node.attrs["auto_pad"]
    output_shape = node.attrs.get("output_shape")
    if output_shape is not None:
        out = list(output_shape[-rank:]) if len(output_shape) in (rank, rank + 2) else None
        if out is None or any(o < 1 for o in out):
            fail(f"output_shape {list(output_shape)} must give {rank} positive spatial sizes")
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [n * s for n, s in zip(in_spatial, strides)]
    else:
        if auto_pad not in ("NOTSET", "VALID"):
            fail(f"auto_pad {auto_pad!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
        begin, end = explicit_pads(node, rank) if auto_pad == "NOTSET" else ([0] * rank,) * 2
        out = [f - b - e for f, b, e in zip(full, begin, end)]
        if any(o < 1 for o in out):
            fail(f"pads {list(node.attrs['pads'])} leave no output of the full size {full}")
        return begin, out, full
    total = [f - o for f, o in zip(full, out)]
    if auto_pad == "SAME_UPPER":
        begin = [t // 2 for t in total]
    else:
        begin = [t - t // 2 for t in total]
    return begin, out, full


def _transpose_infer(node, ins, values):
    shape, group = _check_operands(node, ins)
    w = ins[1]
    if w.shape[0] != shape[1]:
        fail(f"weights of shape {list(w.shape)} expect {w.shape[0]} input channels, the input "
             f"has {shape[1]}")
    _, out, _ = transpose_geometry(node, shape[2:], w.shape[2:])
    y = (shape[0], w.shape[1] * group, *out)
    return [TensorType(layout_shape(y, layout_of(node)), ins[0].dtype)]


def _conv_transpose(node, x, w, b=None):
    """One batched matmul per group gives every tap's contribution; taps are then scattered."""
    layout = layout_of(node)
    x = to_nchw(x, layout)
    work = _work_dtype(x.dtype)
    group = node.attrs["group"]
    n, c, *in_spatial = x.shape
    rank = len(in_spatial)
    kernel = w.shape[2:]
    mg = w.shape[1]
    begin, out, full = transpose_geometry(node, in_spatial, kernel)
    strides = per_axis(node, "strides", rank, 1)
    dilations = per_axis(node, "dilations", rank, 1)
    xs = x.astype(work, copy=False).reshape(n, group, c // group, -1).transpose(1, 0, 3, 2)
    ws = w.astype(work, copy=False).reshape(group, 1, c // group, -1)
    cols = np.matmul(xs, ws)  # [G, N, P, Mg*K]
    cols = cols.reshape(group, n, *in_spatial, mg, *kernel)
    cols = np.moveaxis(cols, 2 + rank, 2).transpose(1, 0, 2, *range(3, 3 + 2 * rank))
    # cols: [N, G, Mg, *in, *kernel]; the buffer covers the full output and the requested one.
    low = [min(0, first) for first in begin]
    size = [max(f, first + o) - lo for f, first, o, lo in zip(full, begin, out, low)]
    buf = np.zeros((n, group, mg, *size), work)
    for tap in np.ndindex(*kernel):
        index = tuple(slice(t * d - lo, t * d - lo + (i - 1) * s + 1, s)
                      for t, d, lo, i, s in zip(tap, dilations, low, in_spatial, strides))
        buf[(slice(None), slice(None), slice(None), *index)] += cols[(Ellipsis, *tap)]
    crop = tuple(slice(first - lo, first - lo + o) for first, lo, o in zip(begin, low, out))
    y = buf[(slice(None), slice(None), slice(None), *crop)].reshape(n, group * mg, *out)
    if b is not None:
        y = y + b.astype(work).reshape(-1, *([1] * rank))
    return from_nchw(y.astype(x.dtype, copy=False), layout)


def _transpose_macs(node) -> int:
    w = node.inputs[1].type
    return node.inputs[0].type.numel * int(np.prod(w.shape[1:]))


register(OpDef("ConvTranspose", "conv", _transpose_infer, _conv_transpose,
               attrs={**CONV_ATTRS,
                      "output_padding": Attr("ints", None, "extra size at the end of each axis"),
                      "output_shape": Attr("ints", None, "spatial output size (pads derived)")},
               inputs=(2, 3), macs=_transpose_macs, spatial=True,
               doc="N-D transposed convolution (grouped, dilated, strided, padded)"))
