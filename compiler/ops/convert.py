"""Element type conversion: Cast, and CastLike (to the type of another tensor)."""

from __future__ import annotations

import numpy as np
import onnx

from compiler.ir.types import DTYPE_OF_ONNX, TensorType
from compiler.ops.registry import Attr, OpDef, fail, register


def _target(node) -> str:
    code = node.attrs["to"]
    dtype = DTYPE_OF_ONNX.get(code)
    if dtype is None:
        try:
            name = onnx.TensorProto.DataType.Name(code)
        except ValueError:
            name = f"#{code}"
        fail(f"Cast to={code} ({name}) is not supported: Kiln handles "
             f"{', '.join(DTYPE_OF_ONNX.values())}")
    return dtype


def _infer_cast(node, ins, values):
    # Both attributes only shape conversions to float8 types; onnxruntime refuses them elsewhere.
    if node.attrs["saturate"] != 1:
        fail(f"Cast saturate={node.attrs['saturate']} only applies to float8 targets, which Kiln "
             "does not support")
    if node.attrs["round_mode"] != "up":
        fail(f"Cast round_mode={node.attrs['round_mode']!r} only applies to float8e8m0 targets, "
             "which Kiln does not support")
    return [TensorType(ins[0].shape, _target(node))]


def _cast(node, x):
    # numpy's casts are C's, as onnxruntime's: floats truncate toward zero, integers wrap,
    # anything nonzero (NaN too) is True. Out-of-range float to integer is undefined in ONNX.
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(_target(node))


register(OpDef(
    "Cast", "misc", _infer_cast, _cast,
    attrs={
        "to": Attr("int", doc="ONNX element type (TensorProto enum) of the output"),
        "saturate": Attr("int", 1, "float8 targets only: must keep its default"),
        "round_mode": Attr("string", "up", "float8e8m0 targets only: must keep its default"),
    },
    doc="convert to another element type (C semantics: truncation toward zero, wrapping)"))


def _infer_cast_like(node, ins, values):
    if node.attrs["saturate"] != 1:
        fail(f"CastLike saturate={node.attrs['saturate']} only applies to float8 targets, which "
             "Kiln does not support")
    return [TensorType(ins[0].shape, ins[1].dtype)]


def _cast_like(node, x, like):
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(like.dtype)


register(OpDef(
    "CastLike", "misc", _infer_cast_like, _cast_like, inputs=(2, 2), since=15,
    attrs={"saturate": Attr("int", 1, "float8 targets only: must keep its default"),
           "round_mode": Attr("string", "up", "float8e8m0 targets only: must keep its default")},
    doc="convert to the element type of the second input"))


def _infer_bit_cast(node, ins, values):
    target = _target(node)
    if np.dtype(target).itemsize != np.dtype(ins[0].dtype).itemsize:
        fail(f"BitCast from {ins[0].dtype} to {target} changes the width of an element")
    return [TensorType(ins[0].shape, target)]


register(OpDef(
    "BitCast", "misc", _infer_bit_cast,
    lambda node, x: np.array(x).view(_target(node)), since=26,
    attrs={"to": Attr("int", doc="ONNX element type (TensorProto enum) of the output")},
    doc="the same bits read as another element type of the same width"))
