"""Constant operators: Constant and ConstantOfShape (values known at compile time)."""

from __future__ import annotations

import numpy as np

from compiler.errors import UnsupportedError
from compiler.ir.types import TensorType
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.ops.shape import known_ints

# Constant's typed shorthand attributes (opset 12+), canonicalized to the `value` tensor.
_SHORTHANDS = {"value_float": np.float32, "value_floats": np.float32,
               "value_int": np.int64, "value_ints": np.int64}
_UNSUPPORTED = ("value_string", "value_strings")


def _constant_from_onnx(ctx, attrs, names, opset):
    for name in _UNSUPPORTED:
        if name in attrs:
            raise UnsupportedError(f"Constant {name}: string tensors are not supported by Kiln")
    given = [name for name in ("value", *_SHORTHANDS) if attrs.get(name) is not None]
    if len(given) != 1:
        fail(f"Constant needs exactly one value attribute, it has {len(given) or 'none'}"
             + (f" ({', '.join(given)})" if given else ""))
    for name, dtype in _SHORTHANDS.items():
        value = attrs.pop(name, None)
        if value is not None:
            attrs["value"] = np.asarray(value, dtype)
    return attrs, names


register(OpDef(
    "Constant", "constant",
    lambda node, ins, values: [TensorType.of(node.attrs["value"])],
    lambda node: node.attrs["value"],
    attrs={"value": Attr("tensor", doc="the constant (value_float/_floats/_int/_ints are read "
                                       "into it)")},
    inputs=(0, 0), from_onnx=_constant_from_onnx, doc="A tensor known at compile time"))


def _fill(node) -> np.ndarray:
    value = node.attrs["value"]
    if value is None:
        return np.zeros((), np.float32)
    if value.size != 1:
        fail(f"ConstantOfShape's value must hold one element, it has shape {list(value.shape)}")
    return value.reshape(())


def _constant_of_shape_infer(node, ins, values):
    shape = known_ints(values, 0, "ConstantOfShape's shape input")
    if any(d < 0 for d in shape):
        fail(f"ConstantOfShape's shape {shape} has a negative dimension")
    return [TensorType(shape, _fill(node).dtype.name)]


register(OpDef(
    "ConstantOfShape", "constant", _constant_of_shape_infer,
    lambda node, shape: np.full([int(d) for d in shape.reshape(-1)], _fill(node)),
    attrs={"value": Attr("tensor", None, "the one-element fill value; default float32 0")},
    doc="A tensor of the given (compile-time) shape filled with one value"))
