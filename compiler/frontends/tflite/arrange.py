"""TFLite's builtins that rearrange values: slices, splits, gathers, blocks, mirrors, resizing.

Also the extremes REDUCE_MAX and REDUCE_MIN. TFLite Micro copies 8-bit values as they are
stored for all of them (REDUCE_MAX and REDUCE_MIN require the input's scale and zero point on
the output and compare stored integers), so each becomes Kiln's data-movement operators on the
stored integers, float or 8-bit alike. Nearest resizing picks its rows and columns with
TFLite's own float32 arithmetic, computed here into index tables: the result is TFLite's for
every size, not a formula that agrees on most.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import is_integer
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.ir.graph import Value

_BIG = np.iinfo(np.int64).max


def _constant(b: Builder, op: Operator, i: int, what: str) -> np.ndarray:
    if i >= len(op.inputs) or op.inputs[i] < 0 or b.tensor(op.inputs[i]).data is None:
        raise ModelError(f"its {what} must be a constant")
    return np.asarray(b.tensor(op.inputs[i]).data)


def _option(op: Operator, name: str, default):
    return default if op.options is None else getattr(op.options, name)()


def _slice(b: Builder, x: Value, starts, ends, axes, steps=None) -> Value:
    inputs = [x, b.constant("starts", np.asarray(starts, np.int64)),
              b.constant("ends", np.asarray(ends, np.int64)),
              b.constant("axes", np.asarray(axes, np.int64))]
    if steps is not None:
        inputs.append(b.constant("steps", np.asarray(steps, np.int64)))
    return b.add("Slice", inputs)


def _reshape(b: Builder, x: Value, shape, out: int | None = None) -> Value:
    return b.add("Reshape", [x, b.constant("shape", np.asarray(shape, np.int64))], out=out)


def _finish(b: Builder, y: Value, out: int) -> None:
    """Make `y` the value of tensor `out`, reshaped when its shape differs in form only."""
    want = b.tensor(out).shape
    if tuple(y.type.shape) != tuple(want):
        if int(np.prod(want, dtype=np.int64)) != y.type.numel:
            raise ModelError(f"its output {b.tensor(out).name} is stated as {list(want)} but "
                             f"the operator gives {list(y.type.shape)}")
        _reshape(b, y, want, out=out)
        return
    b.values[out] = y


def slice_(b: Builder, op: Operator) -> None:
    """SLICE(input, begin, size): a size of -1 runs to the end of its axis."""
    shape = b.tensor(op.inputs[0]).shape
    begin = _constant(b, op, 1, "begin").astype(np.int64).reshape(-1)
    size = _constant(b, op, 2, "size").astype(np.int64).reshape(-1)
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ModelError(f"its begin and size must give one value per axis of {list(shape)}")
    ends = [n if s == -1 else a + s for a, s, n in zip(begin, size, shape)]
    y = _slice(b, b.value(op.inputs[0]), begin, ends, range(len(shape)))
    _finish(b, y, op.outputs[0])


def _split_along(b: Builder, op: Operator, data: int, axis: int, sizes: list[int]) -> None:
    x = b.value(op.inputs[data])
    rank = len(b.tensor(op.inputs[data]).shape)
    axis = axis % rank
    if len(sizes) != len(op.outputs):
        raise ModelError(f"it splits into {len(sizes)} parts but has {len(op.outputs)} outputs")
    start = 0
    for size, out in zip(sizes, op.outputs):
        part = _slice(b, x, [start], [start + size], [axis])
        start += size
        if out >= 0:
            _finish(b, part, out)


def split(b: Builder, op: Operator) -> None:
    """SPLIT(axis, input): equal parts (TFLite's input order puts the axis first)."""
    axis = int(_constant(b, op, 0, "axis").reshape(-1)[0])
    shape = b.tensor(op.inputs[1]).shape
    parts = int(_option(op, "NumSplits", len(op.outputs)))
    if parts < 1 or shape[axis % len(shape)] % parts:
        raise ModelError(f"{parts} equal parts do not divide axis {axis} of {list(shape)}")
    _split_along(b, op, 1, axis, [shape[axis % len(shape)] // parts] * parts)


def split_v(b: Builder, op: Operator) -> None:
    """SPLIT_V(input, size_splits, axis): given sizes, one of which may be -1 (the rest)."""
    shape = b.tensor(op.inputs[0]).shape
    axis = int(_constant(b, op, 2, "axis").reshape(-1)[0])
    sizes = [int(s) for s in _constant(b, op, 1, "size_splits").reshape(-1)]
    length = shape[axis % len(shape)]
    if sizes.count(-1) > 1:
        raise ModelError("at most one of its size_splits may be -1")
    if -1 in sizes:
        sizes[sizes.index(-1)] = length - (sum(sizes) + 1)
    if sum(sizes) != length or min(sizes) < 0:
        raise ModelError(f"its size_splits {sizes} do not add up to {length}")
    _split_along(b, op, 0, axis, sizes)


def unpack(b: Builder, op: Operator) -> None:
    """UNPACK: one output per position along an axis, without that axis."""
    shape = b.tensor(op.inputs[0]).shape
    axis = int(_option(op, "Axis", 0)) % len(shape)
    _split_along(b, op, 0, axis, [1] * shape[axis])


def gather(b: Builder, op: Operator) -> None:
    """GATHER(params, indices) along an axis (batch_dims 0)."""
    if int(_option(op, "BatchDims", 0)) != 0:
        raise ModelError("a GATHER with batch_dims is not supported")
    axis = int(_option(op, "Axis", 0))
    y = b.add("Gather", [b.value(op.inputs[0]), b.value(op.inputs[1])], {"axis": axis})
    _finish(b, y, op.outputs[0])


def _blocks(b: Builder, x: Value, shape, perm, final, out: int) -> None:
    y = b.add("Transpose", [_reshape(b, x, shape)], {"perm": list(perm)})
    _reshape(b, y, final, out=out)


def depth_to_space(b: Builder, op: Operator) -> None:
    """DEPTH_TO_SPACE (NHWC): channel (i * block + j) * C' + c goes to row i, column j."""
    n, h, w, c = b.tensor(op.inputs[0]).shape
    k = int(_option(op, "BlockSize", 0))
    if k < 1 or c % (k * k):
        raise ModelError(f"its block size {k} squared does not divide {c} channels")
    depth = c // (k * k)
    _blocks(b, b.value(op.inputs[0]), (n, h, w, k, k, depth), (0, 1, 3, 2, 4, 5),
            (n, h * k, w * k, depth), op.outputs[0])


def space_to_depth(b: Builder, op: Operator) -> None:
    """SPACE_TO_DEPTH (NHWC): the inverse of DEPTH_TO_SPACE."""
    n, h, w, c = b.tensor(op.inputs[0]).shape
    k = int(_option(op, "BlockSize", 0))
    if k < 1 or h % k or w % k:
        raise ModelError(f"its block size {k} does not divide the image {h}x{w}")
    _blocks(b, b.value(op.inputs[0]), (n, h // k, k, w // k, k, c), (0, 1, 3, 2, 4, 5),
            (n, h // k, w // k, k * k * c), op.outputs[0])


def _block_shape(b: Builder, op: Operator, rank: int) -> list[int]:
    block = [int(v) for v in _constant(b, op, 1, "block shape").reshape(-1)]
    if not block or len(block) > rank - 1 or min(block) < 1:
        raise ModelError(f"its block shape {block} does not fit a rank-{rank} input")
    return block


def batch_to_space_nd(b: Builder, op: Operator) -> None:
    """BATCH_TO_SPACE_ND(input, block_shape, crops): batch blocks interleaved into space."""
    shape = b.tensor(op.inputs[0]).shape
    block = _block_shape(b, op, len(shape))
    crops = _constant(b, op, 2, "crops").astype(np.int64).reshape(-1, 2)
    m, total = len(block), int(np.prod(block))
    if shape[0] % total or crops.shape[0] != m:
        raise ModelError(f"its batch {shape[0]} is not a multiple of the block {block}")
    batch, spatial, rest = shape[0] // total, list(shape[1:1 + m]), list(shape[1 + m:])
    y = _reshape(b, b.value(op.inputs[0]), block + [batch] + spatial + rest)
    perm = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + list(range(2 * m + 1,
                                                                           2 * m + 1 + len(rest)))
    y = b.add("Transpose", [y], {"perm": perm})
    full = [batch] + [s * k for s, k in zip(spatial, block)] + rest
    y = _reshape(b, y, full)
    if crops.any():
        y = _slice(b, y, crops[:, 0], [f - c for f, c in zip(full[1:], crops[:, 1])],
                   range(1, 1 + m))
    _finish(b, y, op.outputs[0])


def space_to_batch_nd(b: Builder, op: Operator) -> None:
    """SPACE_TO_BATCH_ND(input, block_shape, paddings): space blocks moved into the batch.

    The padding holds 0: for 8 bits the output's zero point, as LiteRT pads. (TFLite Micro's
    kernel reads a pad value it never sets, whatever its arena held; without padding the two
    agree exactly.)
    """
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    shape = x.shape
    block = _block_shape(b, op, len(shape))
    m = len(block)
    paddings = _constant(b, op, 2, "paddings").astype(np.int64).reshape(-1, 2)
    if paddings.shape[0] != m:
        raise ModelError(f"its paddings must give {m} pairs")
    pads = np.zeros((len(shape), 2), np.int64)
    pads[1:1 + m] = paddings
    value = np.array(out.zero_point[0] if is_integer(out) else 0, x.dtype)
    y = b.add("Pad", [b.value(op.inputs[0]), b.constant("pads", pads.T.reshape(-1)),
                      b.constant("pad_value", value)])
    spatial = [s + p0 + p1 for s, (p0, p1) in zip(shape[1:1 + m], paddings)]
    if any(s % k for s, k in zip(spatial, block)):
        raise ModelError(f"the padded space {spatial} is not a multiple of the block {block}")
    rest = list(shape[1 + m:])
    split_shape = [shape[0]] + [v for s, k in zip(spatial, block) for v in (s // k, k)] + rest
    y = _reshape(b, y, split_shape)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(
        range(1 + 2 * m, 1 + 2 * m + len(rest)))
    y = b.add("Transpose", [y], {"perm": perm})
    _reshape(b, y, [shape[0] * int(np.prod(block))] + [s // k for s, k in zip(spatial, block)]
             + rest, out=op.outputs[0])


def reverse_v2(b: Builder, op: Operator) -> None:
    """REVERSE_V2(input, axes): a slice with step -1 along each axis."""
    rank = len(b.tensor(op.inputs[0]).shape)
    axes = sorted({int(a) % rank for a in _constant(b, op, 1, "axis").reshape(-1)})
    y = _slice(b, b.value(op.inputs[0]), [-1] * len(axes), [-_BIG] * len(axes), axes,
               [-1] * len(axes))
    _finish(b, y, op.outputs[0])


def mirror_pad(b: Builder, op: Operator) -> None:
    """MIRROR_PAD: REFLECT leaves the edge out of the mirror, SYMMETRIC repeats it."""
    paddings = _constant(b, op, 1, "paddings").astype(np.int64).reshape(-1, 2)
    mode = "reflect" if int(_option(op, "Mode", 0)) == 0 else "symmetric"
    y = b.add("Pad", [b.value(op.inputs[0]), b.constant("pads", paddings.T.reshape(-1))],
              {"mode": mode})
    _finish(b, y, op.outputs[0])


def nearest_indices(in_size: int, out_size: int, align_corners: bool,
                    half_pixel_centers: bool) -> np.ndarray:
    """The input position TFLite's RESIZE_NEAREST_NEIGHBOR reads per output position.

    In float32 as TFLite computes it: scale = in / out (or (in - 1) / (out - 1) with
    align_corners), then floor((o + offset) * scale), or its rounding half away from zero with
    align_corners, clamped to the input.
    """
    f = np.float32
    if align_corners and out_size > 1:
        scale = f(in_size - 1) / f(out_size - 1)
    else:
        scale = f(in_size) / f(out_size)
    offset = f(0.5) if half_pixel_centers else f(0.0)
    position = (np.arange(out_size, dtype=f) + offset) * scale
    if align_corners:
        index = np.sign(position) * np.floor(np.abs(position) + f(0.5))
    else:
        index = np.floor(position)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if half_pixel_centers else index


def resize_nearest_neighbor(b: Builder, op: Operator) -> None:
    """RESIZE_NEAREST_NEIGHBOR (NHWC): rows, then columns, picked by TFLite's index tables."""
    n, h, w, c = b.tensor(op.inputs[0]).shape
    size = [int(v) for v in _constant(b, op, 1, "size").reshape(-1)]
    if len(size) != 2 or min(size) < 1:
        raise ModelError(f"its size must be two positive numbers, got {size}")
    align = bool(_option(op, "AlignCorners", False))
    half = bool(_option(op, "HalfPixelCenters", False))
    y = b.value(op.inputs[0])
    for axis, (before, after) in ((1, (h, size[0])), (2, (w, size[1]))):
        rows = nearest_indices(before, after, align, half)
        y = b.add("Gather", [y, b.constant("rows", rows)], {"axis": axis})
    _finish(b, y, op.outputs[0])


def resize_bilinear(b: Builder, op: Operator) -> None:
    """RESIZE_BILINEAR (NHWC), float or 8-bit.

    Float becomes Resize's linear mode with TFLite's coordinates; 8 bits TFLite Micro's 10-bit
    fixed-point integer resize.
    """
    x = b.tensor(op.inputs[0])
    size = [int(v) for v in _constant(b, op, 1, "size").reshape(-1)]
    if len(size) != 2 or min(size) < 1:
        raise ModelError(f"its size must be two positive numbers, got {size}")
    align = bool(_option(op, "AlignCorners", False))
    half = bool(_option(op, "HalfPixelCenters", False))
    if is_integer(x):
        b.add("IntResizeBilinear", [b.value(op.inputs[0])],
              {"size": size, "align_corners": int(align), "half_pixel_centers": int(half)},
              out=op.outputs[0])
        return
    mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
    sizes = np.array([x.shape[0], *size, x.shape[3]], np.int64)
    b.add("Resize", [b.value(op.inputs[0]), None, None, b.constant("sizes", sizes)],
          {"mode": "linear", "coordinate_transformation_mode": mode}, out=op.outputs[0])


def reduce_extreme(b: Builder, op: Operator) -> None:
    """REDUCE_MAX / REDUCE_MIN over constant axes (8 bits: the stored integers compared)."""
    rank = len(b.tensor(op.inputs[0]).shape)
    axes = sorted({int(a) % max(rank, 1) for a in _constant(b, op, 1, "axes").reshape(-1)})
    keep = bool(_option(op, "KeepDims", False))
    kind = "ReduceMax" if op.builtin == "REDUCE_MAX" else "ReduceMin"
    y = b.add(kind, [b.value(op.inputs[0]), b.constant("axes", np.array(axes, np.int64))],
              {"keepdims": int(keep)})
    _finish(b, y, op.outputs[0])


ARRANGE = {
    "SLICE": slice_, "SPLIT": split, "SPLIT_V": split_v, "UNPACK": unpack, "GATHER": gather,
    "DEPTH_TO_SPACE": depth_to_space, "SPACE_TO_DEPTH": space_to_depth,
    "BATCH_TO_SPACE_ND": batch_to_space_nd, "SPACE_TO_BATCH_ND": space_to_batch_nd,
    "REVERSE_V2": reverse_v2, "MIRROR_PAD": mirror_pad,
    "RESIZE_NEAREST_NEIGHBOR": resize_nearest_neighbor, "RESIZE_BILINEAR": resize_bilinear,
    "REDUCE_MAX": reduce_extreme,
    "REDUCE_MIN": reduce_extreme,
}
