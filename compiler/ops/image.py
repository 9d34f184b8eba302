"""Image geometry on NCHW tensors: GridSample, AffineGrid, CenterCropPad and Col2Im.

GridSample follows PyTorch's grid_sample, which ONNX adopted: normalized positions in [-1, 1],
unnormalized by align_corners, taps outside the image read as zeros, the border value, or a
reflection; bicubic uses the convolution kernel with A = -0.75.
"""

from __future__ import annotations

import itertools

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops._util import normalize_axes
from compiler.ops.elementwise import FLOATS, NUMERIC, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.ops.shape import known_ints

_MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic",
          "bicubic": "cubic"}
_CUBIC_A = -0.75


def _infer_grid_sample(node, ins, values):
    x, grid = ins
    require_dtype(node, x, FLOATS)
    require_dtype(node, grid, FLOATS, "grid")
    r = x.rank - 2
    if r < 1 or grid.rank != r + 2 or grid.shape[0] != x.shape[0] or grid.shape[-1] != r:
        fail(f"GridSample needs X (N, C, {r} spatial axes) and a grid (N, ..., {r}), got "
             f"{list(x.shape)} and {list(grid.shape)}")
    if _MODES.get(node.attrs["mode"]) is None:
        fail(f"GridSample's mode must be linear, nearest or cubic, not {node.attrs['mode']!r}")
    if node.attrs["padding_mode"] not in ("zeros", "border", "reflection"):
        fail(f"GridSample's padding_mode must be zeros, border or reflection, not "
             f"{node.attrs['padding_mode']!r}")
    if _MODES[node.attrs["mode"]] == "cubic" and r != 2:
        fail("GridSample's cubic mode samples 2-D images only")
    return [TensorType(x.shape[:2] + grid.shape[1:-1], x.dtype)]


def _reflect(v: np.ndarray, low: float, high: float) -> np.ndarray:
    """V mirrored back and forth into [low, high]."""
    span = high - low
    if span <= 0:
        return np.zeros_like(v)
    d = np.abs(v - low)
    flips = np.floor(d / span)
    extra = d - flips * span
    return np.where(flips % 2 == 0, low + extra, high - extra)


def _pad_coordinate(v: np.ndarray, size: int, padding: str, align: bool) -> np.ndarray:
    if padding == "border":
        return np.clip(v, 0, size - 1)
    if padding == "reflection":
        v = _reflect(v, 0, size - 1) if align else _reflect(v, -0.5, size - 0.5)
        return np.clip(v, 0, size - 1)
    return v


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = _CUBIC_A

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(v: np.ndarray, size: int, mode: str, padding: str, align: bool):
    """(index, weight) pairs of one axis; an index may fall outside the image."""
    if mode == "cubic":
        base = np.floor(v)
        taps = []
        for k, w in zip(range(-1, 3), _cubic_weights(v - base)):
            index = base + k
            if padding != "zeros":  # each tap is clipped or reflected on its own
                index = np.round(_pad_coordinate(index, size, padding, align))
            taps.append((index.astype(np.int64), w))
        return taps
    v = _pad_coordinate(v, size, padding, align)
    if mode == "nearest":
        return [(np.rint(v).astype(np.int64), np.ones_like(v))]
    base = np.floor(v)
    frac = v - base
    return [(base.astype(np.int64), 1 - frac), (base.astype(np.int64) + 1, frac)]


@quiet
def _grid_sample(node, x, grid):
    mode, padding = _MODES[node.attrs["mode"]], node.attrs["padding_mode"]
    align = bool(node.attrs["align_corners"])
    sizes = x.shape[2:]
    r = len(sizes)
    per_axis = []
    for axis, size in enumerate(sizes):
        g = grid[..., r - 1 - axis].astype(np.float64)  # the grid lists x (width) first
        v = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
        per_axis.append(_taps(v, size, mode, padding, align))
    batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    out = np.zeros(x.shape[:1] + grid.shape[1:-1] + x.shape[1:2])
    channels_last = np.moveaxis(x.astype(np.float64), 1, -1)
    for combo in itertools.product(*per_axis):
        inside = np.ones(grid.shape[:-1], bool)
        weight = np.ones(grid.shape[:-1])
        index = []
        for (i, w), size in zip(combo, sizes):
            inside &= (i >= 0) & (i < size)
            weight = weight * w
            index.append(np.clip(i, 0, size - 1))
        picked = channels_last[(batch, *index)]
        out += np.where(inside[..., None], picked * weight[..., None], 0)
    return np.moveaxis(out, -1, 1).astype(x.dtype)


register(OpDef("GridSample", "misc", _infer_grid_sample, _grid_sample, inputs=(2, 2), since=16,
               attrs={"align_corners": Attr("int", 0, "1: -1 and 1 are the corner pixels' "
                                                      "centres, 0: their outer edges"),
                      "mode": Attr("string", "linear", "linear, nearest or cubic"),
                      "padding_mode": Attr("string", "zeros", "outside the image: zeros, border "
                                                              "or reflection")},
               doc="X sampled at the normalized positions of a grid"))


def _infer_affine_grid(node, ins, values):
    theta = ins[0]
    require_dtype(node, theta, FLOATS)
    size = known_ints(values, 1, "AffineGrid's size")
    r = len(size) - 2
    if r not in (2, 3) or theta.shape != (size[0], r, r + 1):
        fail(f"AffineGrid needs theta (N, {r}, {r + 1}) for size {size}, got "
             f"{list(theta.shape)}")
    return [TensorType((size[0], *size[2:], r), theta.dtype)]


def _affine_grid(node, theta, size):
    spatial = [int(s) for s in size[2:]]
    align = bool(node.attrs["align_corners"])
    axes = [np.linspace(-1, 1, s) if align else (np.arange(s) * 2 + 1) / s - 1 for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial axis, depth first
    base = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1)  # (x, y[, z], 1)
    points = base.reshape(-1, len(spatial) + 1) @ np.swapaxes(theta.astype(np.float64), 1, 2)
    return points.reshape((theta.shape[0], *spatial, len(spatial))).astype(theta.dtype)


register(OpDef("AffineGrid", "misc", _infer_affine_grid, _affine_grid, inputs=(2, 2), since=20,
               attrs={"align_corners": Attr("int", 0, "1: -1 and 1 are the corner pixels' "
                                                      "centres")},
               doc="the sampling grid of a batch of affine transforms"))


def _crop_axes(node, rank: int, count: int) -> tuple[int, ...]:
    axes = node.attrs["axes"]
    axes = normalize_axes(axes, rank) if axes is not None else tuple(range(rank))
    if len(axes) != count:
        fail(f"CenterCropPad has {count} sizes for {len(axes)} axes")
    return axes


def _infer_center_crop_pad(node, ins, values):
    sizes = known_ints(values, 1, "CenterCropPad's shape")
    axes = _crop_axes(node, ins[0].rank, len(sizes))
    shape = list(ins[0].shape)
    for axis, size in zip(axes, sizes):
        shape[axis] = size
    return [TensorType(tuple(shape), ins[0].dtype)]


def _center_crop_pad(node, x, sizes):
    axes = _crop_axes(node, x.ndim, len(sizes))
    crop, pads = [slice(None)] * x.ndim, [(0, 0)] * x.ndim
    for axis, size in zip(axes, (int(s) for s in sizes)):
        n = x.shape[axis]
        if n > size:  # the window's start rounds down
            start = (n - size) // 2
            crop[axis] = slice(start, start + size)
        elif n < size:  # the odd pad goes to the end
            pads[axis] = ((size - n) // 2, size - n - (size - n) // 2)
    return np.pad(x[tuple(crop)], pads)


register(OpDef("CenterCropPad", "shape", _infer_center_crop_pad, _center_crop_pad,
               inputs=(2, 2), since=18, attrs={"axes": Attr("ints", None, "the axes sized "
                                                                          "(default all)")},
               doc="a centred crop or zero pad to the given sizes"))


def _col2im_geometry(node, image, block):
    r = len(image)
    strides = list(node.attrs["strides"] or [1] * r)
    dilations = list(node.attrs["dilations"] or [1] * r)
    pads = list(node.attrs["pads"] or [0] * (2 * r))
    if len(strides) != r or len(dilations) != r or len(pads) != 2 * r or len(block) != r:
        fail(f"Col2Im's image, block, strides, dilations and pads disagree on {r} axes")
    counts = [(image[i] + pads[i] + pads[i + r] - dilations[i] * (block[i] - 1) - 1)
              // strides[i] + 1 for i in range(r)]
    return strides, dilations, pads, counts


def _infer_col2im(node, ins, values):
    require_dtype(node, ins[0], NUMERIC)
    image = known_ints(values, 1, "Col2Im's image_shape")
    block = known_ints(values, 2, "Col2Im's block_shape")
    *_, counts = _col2im_geometry(node, image, block)
    x = ins[0]
    per = int(np.prod(block))
    if x.rank != 3 or x.shape[1] % per or x.shape[2] != int(np.prod(counts)):
        fail(f"Col2Im's input {list(x.shape)} does not hold blocks {block} at "
             f"{int(np.prod(counts))} positions")
    return [TensorType((x.shape[0], x.shape[1] // per, *image), x.dtype)]


def _col2im(node, x, image, block):
    image, block = [int(v) for v in image], [int(v) for v in block]
    strides, dilations, pads, counts = _col2im_geometry(node, image, block)
    r = len(image)
    n, columns = x.shape[0], x.shape[1] // int(np.prod(block))
    padded = np.zeros((n, columns, *[image[i] + pads[i] + pads[i + r] for i in range(r)]),
                      np.float64)
    blocks = x.astype(np.float64).reshape(n, columns, *block, *counts)
    for offset in itertools.product(*(range(b) for b in block)):
        where = tuple(slice(offset[i] * dilations[i],
                            offset[i] * dilations[i] + (counts[i] - 1) * strides[i] + 1,
                            strides[i]) for i in range(r))
        padded[(slice(None), slice(None), *where)] += blocks[(slice(None), slice(None),
                                                              *offset)]
    inner = tuple(slice(pads[i], pads[i] + image[i]) for i in range(r))
    return padded[(slice(None), slice(None), *inner)].astype(x.dtype)


register(OpDef("Col2Im", "shape", _infer_col2im, _col2im, inputs=(3, 3), since=18, attrs={
    "dilations": Attr("ints", None, "spacing of a block's taps (default 1)"),
    "pads": Attr("ints", None, "begin pads of every axis, then end pads (default 0)"),
    "strides": Attr("ints", None, "step between blocks (default 1)")},
    doc="column blocks summed back into an image (the inverse of im2col)"))
