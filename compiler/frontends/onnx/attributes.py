"""ONNX node attributes to Kiln's typed attribute values, checked against the operator schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx

from compiler.errors import ModelError, UnsupportedError
from compiler.frontends.onnx.tensors import tensor_to_array
from compiler.ops.registry import REQUIRED, OpDef

_KIND_OF = {
    onnx.AttributeProto.FLOAT: "float",
    onnx.AttributeProto.INT: "int",
    onnx.AttributeProto.STRING: "string",
    onnx.AttributeProto.TENSOR: "tensor",
    onnx.AttributeProto.FLOATS: "floats",
    onnx.AttributeProto.INTS: "ints",
    onnx.AttributeProto.STRINGS: "strings",
}


def decode_attributes(proto: onnx.NodeProto, opdef: OpDef, base_dir: Path | None) -> dict:
    """Every schema attribute of `opdef` for this node: the file's value or the default.

    Attributes the schema does not know (often those of older opsets) are kept as the file has
    them, for the operator's `from_onnx` hook to translate; the loader refuses any that is left
    after the hook, since silently dropping one would compute something else than the model asks.
    """
    found: dict[str, Any] = {}
    for attr in proto.attribute:
        if attr.ref_attr_name:
            raise UnsupportedError(f"attribute {attr.name!r} refers to a function attribute")
        kind = _KIND_OF.get(attr.type)
        if kind is None:
            raise UnsupportedError(f"attribute {attr.name!r} has a kind (graph, sparse tensor or "
                                   "type) that Kiln does not support")
        spec = opdef.attrs.get(attr.name)
        if spec is not None and not spec.onnx:
            raise UnsupportedError(f"attribute {attr.name!r} is Kiln's own, not an ONNX attribute "
                                   f"of {opdef.name}")
        wanted = spec.kind if spec is not None else kind
        found[attr.name] = _convert(attr, kind, wanted, base_dir, tensor_to_array)
    attrs: dict[str, Any] = dict(found)
    for name, spec in opdef.attrs.items():
        if name not in attrs and spec.default is not REQUIRED:
            attrs[name] = spec.default
    return attrs


def check_attributes(attrs: dict, opdef: OpDef) -> None:
    """After translation, every attribute must be in the schema and every required one present."""
    for name in attrs:
        if name not in opdef.attrs:
            raise UnsupportedError(f"attribute {name!r} is not supported by Kiln's {opdef.name}")
    for name, spec in opdef.attrs.items():
        if spec.default is REQUIRED and name not in attrs:
            raise ModelError(f"required attribute {name!r} is missing")


def _convert(attr: onnx.AttributeProto, kind: str, wanted: str, base_dir, tensor_to_array):
    if kind == "float":
        value: Any = float(attr.f)
    elif kind == "int":
        value = int(attr.i)
    elif kind == "string":
        value = attr.s.decode("utf-8", errors="replace")
    elif kind == "tensor":
        value = tensor_to_array(attr.t, base_dir)
    elif kind == "floats":
        value = tuple(float(v) for v in attr.floats)
    elif kind == "ints":
        value = tuple(int(v) for v in attr.ints)
    else:
        value = tuple(s.decode("utf-8", errors="replace") for s in attr.strings)
    if kind == wanted:
        return value
    # Exporters are loose about int vs float and scalar vs list; accept the lossless cases.
    if wanted == "float" and kind == "int":
        return float(value)
    if wanted == "floats" and kind == "ints":
        return tuple(float(v) for v in value)
    if wanted == "ints" and kind == "int":
        return (value,)
    if wanted == "floats" and kind in ("float", "int"):
        return (float(value),)
    raise ModelError(f"attribute {attr.name!r} should be of kind {wanted}, the file has {kind}")


def encode_attribute(name: str, value: Any, kind: str) -> onnx.AttributeProto:
    """Kiln attribute value back to an AttributeProto of the schema's kind."""
    from onnx import helper, numpy_helper

    if kind == "tensor":
        return helper.make_attribute(name, numpy_helper.from_array(np.asarray(value)))
    if kind in ("ints", "floats", "strings"):
        attr = onnx.AttributeProto(name=name, type=getattr(onnx.AttributeProto, kind.upper()))
        if kind == "ints":
            attr.ints.extend(int(v) for v in value)
        elif kind == "floats":
            attr.floats.extend(float(v) for v in value)
        else:
            attr.strings.extend(str(v).encode() for v in value)
        return attr
    if kind == "float":
        return helper.make_attribute(name, float(value))
    if kind == "int":
        return helper.make_attribute(name, int(value))
    return helper.make_attribute(name, str(value))
