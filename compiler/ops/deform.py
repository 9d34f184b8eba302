"""DeformConv: a 2-D convolution whose taps move by learned offsets (and scale by a mask).

Each tap reads the input bilinearly at its shifted position; positions outside the image read
zero, as in torchvision's deform_conv2d, which ONNX follows.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops._spatial import WINDOW_ATTRS, tap_positions, window
from compiler.ops.elementwise import FLOATS, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register


def _geometry(node, x, w):
    kernel = tuple(node.attrs["kernel_shape"] or w[2:])
    return window(node, x[2:], kernel)


def _infer(node, ins, values):
    x, w, offset = ins[:3]
    require_dtype(node, x, FLOATS)
    if x.rank != 4 or w.rank != 4:
        fail("DeformConv needs a 4-D input and 4-D weights (2-D images)")
    group, offset_group = node.attrs["group"], node.attrs["offset_group"]
    win = _geometry(node, x.shape, w.shape)
    taps = win.kernel[0] * win.kernel[1]
    if x.shape[1] % group or w.shape[0] % group or w.shape[1] * group != x.shape[1] or \
            x.shape[1] % offset_group:
        fail(f"DeformConv's groups ({group}, offset groups {offset_group}) do not divide the "
             f"{x.shape[1]} input channels and {w.shape[0]} outputs")
    want = (x.shape[0], offset_group * 2 * taps, *win.out)
    if offset.shape != want:
        fail(f"DeformConv's offset must be {list(want)}, got {list(offset.shape)}")
    return [TensorType((x.shape[0], w.shape[0], *win.out), x.dtype)]


def _bilinear(image: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Image (N, C, H, W) read at (N, ...) positions; corners outside the image read zero."""
    n, c, h, w = image.shape
    batch = np.arange(n).reshape((n,) + (1,) * (y.ndim - 1))
    y0, x0 = np.floor(y), np.floor(x)
    total = np.zeros(y.shape + (c,))
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yy, xx = y0 + dy, x0 + dx
        weight = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        picked = np.moveaxis(image, 1, -1)[batch, np.clip(yy, 0, h - 1).astype(np.int64),
                                           np.clip(xx, 0, w - 1).astype(np.int64)]
        total += np.where(inside[..., None], picked * weight[..., None], 0)
    return np.moveaxis(total, -1, 1)


@quiet
def _deform_conv(node, x, w, offset, bias=None, mask=None):
    win = _geometry(node, x.shape, w.shape)
    n, c = x.shape[:2]
    kh, kw = win.kernel
    oh, ow = win.out
    groups, offset_groups = node.attrs["group"], node.attrs["offset_group"]
    per_offset = c // offset_groups
    offsets = offset.astype(np.float64).reshape(n, offset_groups, kh * kw, 2, oh, ow)
    masks = (np.ones((n, offset_groups, kh * kw, oh, ow)) if mask is None
             else mask.astype(np.float64).reshape(n, offset_groups, kh * kw, oh, ow))
    image = x.astype(np.float64)
    columns = np.zeros((n, c, kh * kw, oh, ow))
    for i in range(kh):
        rows = tap_positions(win, 0, i).reshape(-1, 1)
        for j in range(kw):
            cols = tap_positions(win, 1, j).reshape(1, -1)
            t = i * kw + j
            for g in range(offset_groups):
                y = rows + offsets[:, g, t, 0]
                xx = cols + offsets[:, g, t, 1]
                part = image[:, g * per_offset:(g + 1) * per_offset]
                columns[:, g * per_offset:(g + 1) * per_offset, t] = (
                    _bilinear(part, y, xx) * masks[:, g, t][:, None])
    out = np.zeros((n, w.shape[0], oh, ow))
    cin, cout = c // groups, w.shape[0] // groups
    weights = w.astype(np.float64).reshape(w.shape[0], w.shape[1], kh * kw)
    for g in range(groups):
        out[:, g * cout:(g + 1) * cout] = np.einsum(
            "nctyx,oct->noyx", columns[:, g * cin:(g + 1) * cin], weights[g * cout:(g + 1) * cout])
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out.astype(x.dtype)


register(OpDef("DeformConv", "conv", _infer, _deform_conv, inputs=(3, 5), since=19, attrs={
    **{k: v for k, v in WINDOW_ATTRS.items() if k != "auto_pad"},
    "group": Attr("int", 1, "groups of input and output channels"),
    "kernel_shape": Attr("ints", None, "kernel size (default: the weights')"),
    "offset_group": Attr("int", 1, "groups of input channels sharing offsets")},
    doc="2-D convolution whose taps move by per-position offsets, scaled by a mask"))
