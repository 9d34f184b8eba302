"""Operators that build or rearrange whole tensors: Expand, Tile, blocks, Range and friends.

Shapes they take as inputs must be known when the
model loads, since Kiln compiles static shapes.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops._util import broadcast_shape
from compiler.ops.elementwise import NUMERIC, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.ops.shape import known_ints


def _infer_expand(node, ins, values):
    shape = known_ints(values, 1, "Expand's shape")
    return [TensorType(broadcast_shape(ins[0].shape, tuple(shape)), ins[0].dtype)]


def _expand(node, x, shape):
    return np.broadcast_to(x, broadcast_shape(x.shape, tuple(int(d) for d in shape))).copy()


register(OpDef("Expand", "shape", _infer_expand, _expand, inputs=(2, 2), since=8,
               doc="broadcast to a shape (numpy rules, either side may be 1)"))


def _infer_tile(node, ins, values):
    repeats = known_ints(values, 1, "Tile's repeats")
    if len(repeats) != ins[0].rank or min(repeats, default=0) < 0:
        fail(f"Tile needs {ins[0].rank} non-negative repeats, got {repeats}")
    return [TensorType(tuple(d * r for d, r in zip(ins[0].shape, repeats)), ins[0].dtype)]


register(OpDef("Tile", "shape", _infer_tile,
               lambda node, x, repeats: np.tile(x, [int(r) for r in repeats]), inputs=(2, 2),
               since=6, doc="the input repeated along each axis"))


def _check_blocks(node, t: TensorType, space_to_depth: bool) -> int:
    block = node.attrs["blocksize"]
    if t.rank != 4 or block < 1:
        fail(f"{node.op} needs a 4-D NCHW tensor and a positive blocksize")
    n, c, h, w = t.shape
    if space_to_depth and (h % block or w % block):
        fail(f"SpaceToDepth's blocksize {block} does not divide {h}x{w}")
    if not space_to_depth and c % (block * block):
        fail(f"DepthToSpace's blocksize {block} squared does not divide {c} channels")
    if node.attrs["mode"] not in ("DCR", "CRD"):
        fail(f"{node.op}'s mode must be DCR or CRD, not {node.attrs['mode']!r}")
    return block


def _infer_depth_to_space(node, ins, values):
    b = _check_blocks(node, ins[0], False)
    n, c, h, w = ins[0].shape
    return [TensorType((n, c // (b * b), h * b, w * b), ins[0].dtype)]


def _depth_to_space(node, x):
    b = node.attrs["blocksize"]
    n, c, h, w = x.shape
    if node.attrs["mode"] == "DCR":  # channel = (block row, block column, depth)
        blocks = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # CRD: channel = (depth, block row, block column)
        blocks = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return blocks.reshape(n, c // (b * b), h * b, w * b)


def _infer_space_to_depth(node, ins, values):
    b = _check_blocks(node, ins[0], True)
    n, c, h, w = ins[0].shape
    return [TensorType((n, c * b * b, h // b, w // b), ins[0].dtype)]


def _space_to_depth(node, x):
    b = node.attrs["blocksize"]
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // b, b, w // b, b)
    if node.attrs["mode"] == "DCR":  # channel = (block row, block column, depth)
        blocks = blocks.transpose(0, 3, 5, 1, 2, 4)
    else:  # CRD: channel = (depth, block row, block column)
        blocks = blocks.transpose(0, 1, 3, 5, 2, 4)
    return blocks.reshape(n, c * b * b, h // b, w // b)


register(OpDef("DepthToSpace", "shape", _infer_depth_to_space, _depth_to_space, attrs={
    "blocksize": Attr("int", doc="the side of each block"),
    "mode": Attr("string", "DCR", "DCR (depth, column, row) or CRD")},
    doc="channels moved into blocks of the image"))
register(OpDef("SpaceToDepth", "shape", _infer_space_to_depth, _space_to_depth, attrs={
    "blocksize": Attr("int", doc="the side of each block"),
    "mode": Attr("string", "DCR", "DCR (depth, column, row) or CRD")},
               doc="blocks of the image moved into channels"))


def _infer_reverse_sequence(node, ins, values):
    x, lengths = ins
    require_dtype(node, lengths, ("int64",), "length")
    batch, time = node.attrs["batch_axis"], node.attrs["time_axis"]
    if x.rank < 2 or {batch, time} not in ({0, 1},) or lengths.shape != (x.shape[batch],):
        fail(f"ReverseSequence needs batch and time axes 0 and 1 and one length per batch, "
             f"got axes {batch}, {time} and lengths {list(lengths.shape)}")
    return [TensorType(x.shape, x.dtype)]


def _reverse_sequence(node, x, lengths):
    batch, time = node.attrs["batch_axis"], node.attrs["time_axis"]
    out = x.copy()
    for i, n in enumerate(lengths):
        n = int(np.clip(n, 0, x.shape[time]))
        where = [slice(None)] * x.ndim
        where[batch], where[time] = i, slice(0, n)
        out[tuple(where)] = np.flip(x[tuple(where)], axis=0 if time < batch else time - 1)
    return out


register(OpDef("ReverseSequence", "shape", _infer_reverse_sequence, _reverse_sequence,
               inputs=(2, 2), since=10, attrs={
                   "batch_axis": Attr("int", 1, "the batch axis (0 or 1)"),
                   "time_axis": Attr("int", 0, "the time axis (1 or 0)")},
               doc="each batch item's first `length` steps reversed"))


_ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
                7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


def _eye_dtype(node, t: TensorType) -> str:
    code = node.attrs["dtype"]
    if code == 0:
        return t.dtype
    if code not in _ONNX_DTYPES:
        fail(f"EyeLike's dtype {code} is not an element type Kiln supports")
    return _ONNX_DTYPES[code]


def _infer_eye_like(node, ins, values):
    if ins[0].rank != 2:
        fail(f"EyeLike needs a 2-D input, got rank {ins[0].rank}")
    return [TensorType(ins[0].shape, _eye_dtype(node, ins[0]))]


def _eye_like(node, x):
    return np.eye(*x.shape, k=node.attrs["k"], dtype=_eye_dtype(node, TensorType.of(x)))


register(OpDef("EyeLike", "constant", _infer_eye_like, _eye_like, since=9, attrs={
    "dtype": Attr("int", 0, "ONNX element type of the output (0: the input's)"),
    "k": Attr("int", 0, "which diagonal holds the ones")},
    doc="ones on a diagonal, zeros elsewhere, in the input's shape"))


def _infer_size(node, ins, values):
    return [TensorType((), "int64")]


register(OpDef("Size", "shape", _infer_size, lambda node, x: np.array(x.size, np.int64),
               value_from_types=lambda node, ins: [np.array(ins[0].numel, np.int64)],
               doc="the number of elements (int64 scalar)"))


def _range_count(start, limit, delta) -> int:
    return max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)


def _infer_range(node, ins, values):
    for i, name in enumerate(("start", "limit", "delta")):
        if values[i] is None or np.asarray(values[i]).size != 1:
            fail(f"Range's {name} must be one number known at compile time")
    require_dtype(node, ins[0], NUMERIC)
    if float(np.asarray(values[2]).reshape(-1)[0]) == 0:
        fail("Range's delta is zero")
    count = _range_count(*(np.asarray(v).reshape(-1)[0] for v in values[:3]))
    return [TensorType((count,), ins[0].dtype)]


def _range(node, start, limit, delta):
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    count = _range_count(start, limit, delta)
    return (start + np.arange(count, dtype=np.asarray(start).dtype) * delta).astype(start.dtype)


register(OpDef("Range", "constant", _infer_range, _range, inputs=(3, 3), since=11,
               doc="start, start + delta, ... below limit"))
