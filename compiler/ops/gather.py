"""Shape operators that cut and join tensors: Concat, Split, Slice, Pad and Gather."""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import TensorType
from compiler.ops._util import normalize_axes, normalize_axis
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.ops.shape import attr_to_input, input_to_attr, known_ints, optional_ints

# -- Concat -------------------------------------------------------------------------------------


def _concat_infer(node, ins, values):
    first = ins[0]
    axis = normalize_axis(node.attrs["axis"], first.rank)
    total = 0
    for t in ins:
        if t.dtype != first.dtype:
            fail(f"inputs have different element types ({first.dtype} and {t.dtype})")
        if t.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if i != axis):
            fail(f"shapes {list(first.shape)} and {list(t.shape)} differ outside axis {axis}")
        total += t.shape[axis]
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]
    same_quant = all(t.quant == first.quant for t in ins)
    return [TensorType(shape, first.dtype, first.quant if same_quant else None)]


register(OpDef("Concat", "shape", _concat_infer,
               lambda node, *xs: np.concatenate(xs, axis=normalize_axis(node.attrs["axis"],
                                                                        xs[0].ndim)),
               attrs={"axis": Attr("int", doc="axis to join along")}, inputs=(1, -1),
               doc="Join tensors along an axis"))


# -- Split (split: attribute before opset 13; num_outputs since 18) -------------------------------


def _split_from_onnx(ctx, attrs, names, opset):
    if opset < 13:
        names = attr_to_input(ctx, attrs, names, "split", 1, "split_sizes")
    if attrs["num_outputs"] is None and (len(names) < 2 or not names[1]):
        # Without split sizes (the only way before opset 18) the outputs make equal parts.
        attrs["num_outputs"] = len(ctx.outputs)
    return attrs, names


def _split_to_onnx(ctx, attrs, names, opset):
    if opset < 18:
        attrs.pop("num_outputs")  # implied by the number of outputs (equal parts only)
    if opset < 13:
        names = input_to_attr(ctx, attrs, names, 1, "split", "Split", opset)
    return attrs, names


def _split_sizes(node, shape: tuple[int, ...], split: list[int] | None) -> list[int]:
    axis = normalize_axis(node.attrs["axis"], len(shape))
    dim = shape[axis]
    count = node.attrs["num_outputs"]
    if split is not None:
        if count is not None:
            fail("Split takes either the split input or the num_outputs attribute, not both")
        if any(s < 0 for s in split) or sum(split) != dim:
            fail(f"split sizes {split} do not add up to the size {dim} of axis {axis}")
        return split
    if count is None or count < 1:
        fail("Split needs the split input or a positive num_outputs attribute")
    chunk = -(-dim // count)  # ceil: the last part is smaller when the size does not divide
    last = dim - chunk * (count - 1)
    if last < 0:
        fail(f"cannot split size {dim} of axis {axis} into {count} parts of {chunk}")
    return [chunk] * (count - 1) + [last]


def _split_infer(node, ins, values):
    sizes = _split_sizes(node, ins[0].shape, optional_ints(values, ins, 1, "Split's split"))
    axis = normalize_axis(node.attrs["axis"], ins[0].rank)
    shape = ins[0].shape
    return [ins[0].with_shape(shape[:axis] + (s,) + shape[axis + 1:]) for s in sizes]


def _split(node, x, split=None):
    sizes = _split_sizes(node, x.shape, None if split is None else [int(v) for v in split])
    axis = normalize_axis(node.attrs["axis"], x.ndim)
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


register(OpDef(
    "Split", "shape", _split_infer, _split, inputs=(1, 2), outputs=(1, -1),
    attrs={"axis": Attr("int", 0, "axis to cut"),
           "num_outputs": Attr("int", None, "equal parts (the last may be smaller) when split "
                                            "is omitted")},
    from_onnx=_split_from_onnx, to_onnx=_split_to_onnx,
    doc="Cut a tensor into parts along an axis"))


# -- Slice (attributes before opset 10, inputs since) ------------------------------------------


def _slice_from_onnx(ctx, attrs, names, opset):
    if opset < 10:
        for index, attr in ((1, "starts"), (2, "ends"), (3, "axes")):
            names = attr_to_input(ctx, attrs, names, attr, index, f"slice_{attr}")
    return attrs, names


def _slice_to_onnx(ctx, attrs, names, opset):
    if opset < 10:
        if len(names) > 4 and names[4]:
            steps = ctx.constant_value(names[4])
            if steps is None or np.any(np.asarray(steps) != 1):
                raise ModelError(f"Slice cannot be saved at opset {opset} because it has steps "
                                 "other than 1, which that opset cannot express")
            names = names[:4]
        for index, attr in ((3, "axes"), (2, "ends"), (1, "starts")):
            names = input_to_attr(ctx, attrs, names, index, attr, "Slice", opset)
    return attrs, names


def _slices(shape: tuple[int, ...], starts, ends, axes, steps) -> tuple[slice, ...]:
    """Python slices for ONNX Slice's parameters, with its clamping rules."""
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    result = [slice(None)] * rank
    for axis, start, end, step in zip(normalize_axes(axes, rank), starts, ends, steps):
        dim = shape[axis]
        if step == 0:
            fail("Slice's steps cannot be 0")
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        result[axis] = slice(start, None if end < 0 else end, step)
    return tuple(result)


def _slice_params(ins, values):
    return (known_ints(values, 1, "Slice's starts"), known_ints(values, 2, "Slice's ends"),
            optional_ints(values, ins, 3, "Slice's axes"),
            optional_ints(values, ins, 4, "Slice's steps"))


def _slice_infer(node, ins, values):
    slices = _slices(ins[0].shape, *_slice_params(ins, values))
    shape = tuple(len(range(*s.indices(d))) for s, d in zip(slices, ins[0].shape))
    return [ins[0].with_shape(shape)]


def _slice(node, x, starts, ends, axes=None, steps=None):
    params = [None if a is None else [int(v) for v in a.reshape(-1)]
              for a in (starts, ends, axes, steps)]
    return np.ascontiguousarray(x[_slices(x.shape, *params)])


register(OpDef("Slice", "shape", _slice_infer, _slice, inputs=(3, 5),
               from_onnx=_slice_from_onnx, to_onnx=_slice_to_onnx,
               doc="A strided window of a tensor (parameters known at compile time)"))


# -- Pad (pads and value: attributes before opset 11; axes input since 18) ------------------------

# numpy's np.pad names them alike; symmetric (the edge mirrored too) is TFLite's MIRROR_PAD
# SYMMETRIC, which ONNX cannot express.
_PAD_MODES = ("constant", "reflect", "edge", "wrap", "symmetric")


def _pad_from_onnx(ctx, attrs, names, opset):
    if opset < 11:
        names = attr_to_input(ctx, attrs, names, "pads", 1, "pad_pads")
        dtype = ctx.type_of(names[0]).dtype
        names = attr_to_input(ctx, attrs, names, "value", 2, "pad_value", dtype)
    return attrs, names


def _pad_to_onnx(ctx, attrs, names, opset):
    if attrs["mode"] == "symmetric":
        raise ModelError("Pad mode 'symmetric' (TFLite's MIRROR_PAD SYMMETRIC) has no ONNX form")
    if opset < 19 and attrs["mode"] == "wrap":
        raise ModelError(f"Pad cannot be saved at opset {opset} because mode 'wrap' needs 19")
    if opset < 18 and len(names) > 3 and names[3]:
        raise ModelError(f"Pad cannot be saved at opset {opset} because its axes input needs 18")
    if opset < 11:
        names = input_to_attr(ctx, attrs, names, 2, "value", "Pad", opset, scalar=True)
        names = input_to_attr(ctx, attrs, names, 1, "pads", "Pad", opset)
        if "value" in attrs:
            attrs["value"] = float(attrs["value"])
    return attrs, names


def _full_pads(rank: int, pads: list[int], axes: list[int] | None) -> list[tuple[int, int]]:
    """(before, after) for every axis from ONNX's [begins..., ends...] over `axes`."""
    axes = list(range(rank)) if axes is None else list(normalize_axes(axes, rank))
    if len(pads) != 2 * len(axes):
        fail(f"pads {pads} should hold 2 values per padded axis ({2 * len(axes)})")
    full = [(0, 0)] * rank
    for i, axis in enumerate(axes):
        full[axis] = (pads[i], pads[i + len(axes)])
    return full


def _pad_shape(node, shape: tuple[int, ...], full: list[tuple[int, int]]) -> tuple[int, ...]:
    mode = node.attrs["mode"]
    if mode not in _PAD_MODES:
        fail(f"Pad mode {mode!r} is not one of {', '.join(_PAD_MODES)}")
    out = tuple(d + b + e for d, (b, e) in zip(shape, full))
    if any(d < 0 for d in out):
        fail(f"pads {full} remove more than the shape {list(shape)} has")
    for d, (b, e) in zip(shape, full):
        if mode == "reflect" and max(b, e) > d - 1 and max(b, e) > 0:
            fail(f"reflect padding of {max(b, e)} needs an axis longer than {d}")
        if mode == "symmetric" and max(b, e) > d:
            fail(f"symmetric padding of {max(b, e)} needs an axis of at least {max(b, e)}")
        if mode in ("edge", "wrap") and max(b, e) > 0 and d == 0:
            fail(f"{mode} padding cannot extend an empty axis")
    return out


def _pad_infer(node, ins, values):
    full = _full_pads(ins[0].rank, known_ints(values, 1, "Pad's pads"),
                      optional_ints(values, ins, 3, "Pad's axes"))
    value = ins[2] if len(ins) > 2 else None
    if value is not None and (value.numel != 1 or value.dtype != ins[0].dtype):
        fail(f"Pad's constant_value must be one {ins[0].dtype} value, not {value}")
    return [ins[0].with_shape(_pad_shape(node, ins[0].shape, full))]


def _pad(node, x, pads, constant_value=None, axes=None):
    full = _full_pads(x.ndim, [int(v) for v in pads.reshape(-1)],
                      None if axes is None else [int(v) for v in axes.reshape(-1)])
    _pad_shape(node, x.shape, full)
    # Negative pads crop; crop first, then pad what is left.
    x = x[tuple(slice(max(-b, 0), d - max(-e, 0)) for d, (b, e) in zip(x.shape, full))]
    widths = [(max(b, 0), max(e, 0)) for b, e in full]
    mode = node.attrs["mode"]
    if mode == "constant":
        fill = 0 if constant_value is None else constant_value.reshape(-1)[0]
        return np.pad(x, widths, mode="constant", constant_values=fill)
    return np.pad(x, widths, mode=mode)


register(OpDef("Pad", "shape", _pad_infer, _pad, inputs=(2, 4),
               attrs={"mode": Attr("string", "constant", "constant, reflect, edge or wrap "
                                                         "(Kiln also: symmetric)")},
               from_onnx=_pad_from_onnx, to_onnx=_pad_to_onnx,
               doc="Pad (or crop, with negative pads) the borders of a tensor"))


# -- Gather -------------------------------------------------------------------------------------


def _gather_infer(node, ins, values):
    data, indices = ins
    if data.rank == 0:
        fail("Gather's data must have at least one dimension")
    if indices.dtype not in ("int32", "int64"):
        fail(f"Gather's indices must be int32 or int64, not {indices.dtype}")
    axis = normalize_axis(node.attrs["axis"], data.rank)
    known = values[1] if len(values) > 1 else None
    dim = data.shape[axis]
    if known is not None and known.size and (known.min() < -dim or known.max() >= dim):
        bad = int(known[(known < -dim) | (known >= dim)].reshape(-1)[0])
        fail(f"Gather's index {bad} is outside [{-dim}, {dim - 1}] for axis {axis}")
    return [data.with_shape(data.shape[:axis] + indices.shape + data.shape[axis + 1:])]


def _gather(node, data, indices):
    axis = normalize_axis(node.attrs["axis"], data.ndim)
    dim = data.shape[axis]
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        fail(f"Gather's indices must lie in [{-dim}, {dim - 1}] for axis {axis}")
    return np.take(data, np.where(indices < 0, indices + dim, indices), axis=axis)


register(OpDef("Gather", "shape", _gather_infer, _gather, inputs=(2, 2),
               attrs={"axis": Attr("int", 0, "axis the indices select along")},
               doc="Select slices along an axis by index (negative indices count from the end)"))
