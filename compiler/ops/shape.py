"""Shape operators: reshaping, transposing, squeezing, Shape itself, Identity and Dropout."""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError, UnsupportedError
from compiler.ir.types import QuantParams, TensorType
from compiler.ops._util import normalize_axes, require_known
from compiler.ops.registry import Attr, OpDef, fail, register

# -- encodings shared with the other shape, constant and reduce modules ---------------------------


def attr_to_input(ctx, attrs: dict, names: list[str], attr: str, index: int, hint: str,
                  dtype="int64") -> list[str]:
    """Move attribute `attr` of an older opset to constant input `index` (no-op when absent)."""
    value = attrs.pop(attr, None)
    if value is None:
        return names
    names = list(names) + [""] * (index + 1 - len(names))
    names[index] = ctx.constant(hint, np.asarray(value, dtype))
    return names


def input_to_attr(ctx, attrs: dict, names: list[str], index: int, attr: str, op: str,
                  opset: int, scalar: bool = False) -> list[str]:
    """Move constant input `index` back to attribute `attr` for an older opset.

    Raises ModelError when the input is computed, since an attribute can only hold a constant.
    """
    if index >= len(names) or not names[index]:
        return names
    value = ctx.constant_value(names[index])
    if value is None:
        raise ModelError(f"{op} cannot be saved at opset {opset} because its {attr} input is not "
                         "a constant (that opset takes it as an attribute)")
    flat = np.asarray(value).reshape(-1)
    if scalar:
        attrs[attr] = float(flat[0]) if flat.dtype.kind == "f" else int(flat[0])
    else:
        attrs[attr] = tuple(int(v) for v in flat)
    names = list(names)
    names[index] = ""
    return names


def known_ints(values, index: int, what: str) -> list[int]:
    """The compile-time integer list of input `index`, which static shapes need."""
    value = np.asarray(require_known(values, index, what))
    if value.dtype.kind not in "iu":
        fail(f"{what} must be an integer tensor, not {value.dtype.name}")
    return [int(v) for v in value.reshape(-1)]


def optional_ints(values, types, index: int, what: str) -> list[int] | None:
    """Like known_ints for an optional input: None when the input is omitted."""
    if index >= len(types) or types[index] is None:
        return None
    return known_ints(values, index, what)


# -- Reshape and Flatten ------------------------------------------------------------------------


def _reshape_target(in_shape: tuple[int, ...], spec: list[int], allowzero: int) -> tuple:
    """Resolve Reshape's shape input: 0 copies the input dim (unless allowzero), -1 infers."""
    if allowzero and 0 in spec and -1 in spec:
        fail(f"shape {spec} has both 0 and -1, which allowzero=1 forbids")
    if spec.count(-1) > 1:
        fail(f"shape {spec} has more than one -1")
    out = []
    for i, d in enumerate(spec):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                fail(f"shape {spec} copies dimension {i} (0), which input shape "
                     f"{list(in_shape)} does not have")
            d = in_shape[i]
        elif d < -1:
            fail(f"shape {spec} has an invalid dimension {d}")
        out.append(d)
    total = int(np.prod(in_shape, dtype=np.int64))
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if rest == 0 or total % rest:
            fail(f"cannot reshape {list(in_shape)} to {spec}: the -1 dimension is undetermined")
        out[out.index(-1)] = total // rest
    if int(np.prod(out, dtype=np.int64)) != total:
        fail(f"cannot reshape {list(in_shape)} ({total} elements) to {spec}")
    return tuple(out)


def _reshape_infer(node, ins, values):
    spec = known_ints(values, 1, "Reshape's shape input")
    return [ins[0].with_shape(_reshape_target(ins[0].shape, spec, node.attrs["allowzero"]))]


def _reshape(node, x, shape):
    spec = [int(v) for v in shape.reshape(-1)]
    return x.reshape(_reshape_target(x.shape, spec, node.attrs["allowzero"]))


register(OpDef("Reshape", "shape", _reshape_infer, _reshape,
               attrs={"allowzero": Attr("int", 0, "1: a 0 in shape means a zero-sized dim")},
               inputs=(2, 2), doc="Same data, another shape (shape known at compile time)"))


def _flatten_shape(shape: tuple[int, ...], axis: int) -> tuple[int, int]:
    rank = len(shape)
    if not -rank <= axis <= rank:
        fail(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64)))


register(OpDef(
    "Flatten", "shape",
    lambda node, ins, values: [ins[0].with_shape(_flatten_shape(ins[0].shape,
                                                                node.attrs["axis"]))],
    lambda node, x: x.reshape(_flatten_shape(x.shape, node.attrs["axis"])),
    attrs={"axis": Attr("int", 1, "dims before it form the rows, the rest the columns")},
    doc="To 2-D: [prod(dims before axis), prod(dims from axis)]"))


# -- Transpose ----------------------------------------------------------------------------------


def _perm(node, rank: int) -> tuple[int, ...]:
    perm = node.attrs["perm"]
    if perm is None:
        return tuple(reversed(range(rank)))
    if sorted(perm) != list(range(rank)):
        fail(f"perm {list(perm)} is not a permutation of the {rank} axes")
    return tuple(perm)


def _transpose_infer(node, ins, values):
    t = ins[0]
    perm = _perm(node, t.rank)
    quant = t.quant
    if quant is not None and quant.axis is not None:
        quant = QuantParams(quant.scale, quant.zero_point, perm.index(quant.axis))
    return [TensorType(tuple(t.shape[p] for p in perm), t.dtype, quant)]


register(OpDef("Transpose", "shape", _transpose_infer,
               lambda node, x: np.ascontiguousarray(np.transpose(x, _perm(node, x.ndim))),
               attrs={"perm": Attr("ints", None, "output axis i is input axis perm[i]; "
                                                 "default: reversed")},
               doc="Permute the axes"))


# -- Squeeze and Unsqueeze (axes: attribute before opset 13, input since) -------------------------


def _axes_from_onnx(op: str):
    def hook(ctx, attrs, names, opset):
        if opset < 13:
            names = attr_to_input(ctx, attrs, names, "axes", 1, f"{op.lower()}_axes")
        return attrs, names
    return hook


def _axes_to_onnx(op: str):
    def hook(ctx, attrs, names, opset):
        if opset < 13:
            names = input_to_attr(ctx, attrs, names, 1, "axes", op, opset)
        return attrs, names
    return hook


def _squeeze_shape(shape: tuple[int, ...], axes: list[int] | None) -> tuple[int, ...]:
    if not axes:
        return tuple(d for d in shape if d != 1)
    axes = normalize_axes(axes, len(shape))
    for a in axes:
        if shape[a] != 1:
            fail(f"cannot squeeze axis {a} of shape {list(shape)}: its size is not 1")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _squeeze_infer(node, ins, values):
    axes = optional_ints(values, ins, 1, "Squeeze's axes")
    return [ins[0].with_shape(_squeeze_shape(ins[0].shape, axes))]


def _squeeze(node, x, axes=None):
    return x.reshape(_squeeze_shape(x.shape, None if axes is None else list(axes.reshape(-1))))


register(OpDef("Squeeze", "shape", _squeeze_infer, _squeeze, inputs=(1, 2),
               from_onnx=_axes_from_onnx("Squeeze"), to_onnx=_axes_to_onnx("Squeeze"),
               doc="Remove size-1 axes (all of them when axes is omitted)"))


def _unsqueeze_shape(shape: tuple[int, ...], axes: list[int]) -> tuple[int, ...]:
    rank = len(shape) + len(axes)
    axes = normalize_axes(axes, rank)
    dims = iter(shape)
    return tuple(1 if i in axes else next(dims) for i in range(rank))


def _unsqueeze_infer(node, ins, values):
    axes = known_ints(values, 1, "Unsqueeze's axes")
    return [ins[0].with_shape(_unsqueeze_shape(ins[0].shape, axes))]


register(OpDef("Unsqueeze", "shape", _unsqueeze_infer,
               lambda node, x, axes: x.reshape(_unsqueeze_shape(x.shape,
                                                                list(axes.reshape(-1)))),
               inputs=(2, 2), from_onnx=_axes_from_onnx("Unsqueeze"),
               to_onnx=_axes_to_onnx("Unsqueeze"), doc="Insert size-1 axes"))


# -- Shape and Identity -----------------------------------------------------------------------


def _shape_value(node, shape: tuple[int, ...]) -> np.ndarray:
    # Python slicing clamps start and end exactly as ONNX specifies.
    return np.array(shape[node.attrs["start"]:node.attrs["end"]], np.int64)


register(OpDef(
    "Shape", "shape",
    lambda node, ins, values: [TensorType(_shape_value(node, ins[0].shape).shape, "int64")],
    lambda node, x: _shape_value(node, x.shape),
    attrs={"start": Attr("int", 0, "first axis reported"),
           "end": Attr("int", None, "axis after the last one reported; default: the rank")},
    value_from_types=lambda node, ins: [_shape_value(node, ins[0].shape)],
    doc="The input's shape as an int64 vector (known at compile time)"))

register(OpDef("Identity", "shape", lambda node, ins, values: [ins[0]], lambda node, x: x,
               doc="Output = input (quantization included)"))


# -- Dropout: the identity at inference --------------------------------------------------------

# The mask of inference dropout by ONNX Dropout version, as onnxruntime computes it: opsets 7 to 9
# type it like the data, and before opset 12 it is all zeros.
_MASKS = {7: (None, 0), 10: ("bool", False), 12: ("bool", True)}


def _mask_version(opset: int) -> int:
    return max(v for v in _MASKS if v <= opset)


def _dropout_from_onnx(ctx, attrs, names, opset):
    if attrs.pop("is_test", 1) == 0:
        raise UnsupportedError("Dropout with is_test=0 asks for training-mode dropout, which "
                               "Kiln (an inference compiler) does not support")
    if opset < 12:
        names = attr_to_input(ctx, attrs, names, "ratio", 1, "dropout_ratio", "float32")
    attrs["mask_version"] = _mask_version(opset)
    return attrs, names


def _dropout_to_onnx(ctx, attrs, names, opset):
    if attrs.pop("mask_version") != _mask_version(opset):
        raise ModelError(f"Dropout cannot be saved at opset {opset} because its mask follows "
                         "another opset's convention")
    if opset < 12:
        if len(names) > 2 and names[2]:
            mode = ctx.constant_value(names[2])
            if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
                raise ModelError(f"Dropout cannot be saved at opset {opset} because its "
                                 "training_mode input is not a constant false")
            names = names[:2]
        names = input_to_attr(ctx, attrs, names, 1, "ratio", "Dropout", opset, scalar=True)
    return attrs, names


def _dropout_check(ins, values) -> None:
    """Training-mode dropout draws random masks: refuse it unless the ratio is 0."""
    if len(ins) < 3 or ins[2] is None:
        return
    if not bool(np.asarray(require_known(values, 2, "Dropout's training_mode")).reshape(-1)[0]):
        return
    ratio = 0.5 if ins[1] is None else float(
        np.asarray(require_known(values, 1, "Dropout's ratio in training mode")).reshape(-1)[0])
    if ratio != 0:
        fail(f"Dropout in training mode (training_mode=true) with ratio {ratio} draws random "
             "masks; Kiln only supports inference (training_mode false, or ratio 0)")


def _dropout_infer(node, ins, values):
    _dropout_check(ins, values)
    dtype = _MASKS[node.attrs["mask_version"]][0] or ins[0].dtype
    # The mask is an optional output: a node without it gets exactly one type.
    return [ins[0], ins[0].with_dtype(dtype)][:len(node.outputs) or 2]


def _dropout(node, x, ratio=None, training_mode=None):
    if training_mode is not None and bool(training_mode.reshape(-1)[0]):
        if ratio is None or float(ratio.reshape(-1)[0]) != 0:
            fail("Dropout in training mode with a nonzero ratio is not supported")
    dtype, fill = _MASKS[node.attrs["mask_version"]]
    return x, np.full(x.shape, fill, dtype or x.dtype)


register(OpDef(
    "Dropout", "shape", _dropout_infer, _dropout, inputs=(1, 3), outputs=(1, 2),
    attrs={"seed": Attr("int", None, "random seed (unused: no randomness at inference)"),
           "mask_version": Attr("int", 12, "Kiln only: the Dropout version whose inference mask "
                                           "the node computes (7, 10 or 12, see _MASKS)",
                                onnx=False)},
    from_onnx=_dropout_from_onnx, to_onnx=_dropout_to_onnx,
    doc="Inference dropout: output = input (and a constant mask)"))
