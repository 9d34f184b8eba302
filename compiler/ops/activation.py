"""Activation functions: element-wise nonlinearities, Clip, and the (log-)softmax normalizers."""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import TensorType
from compiler.ops._util import broadcast_shape, normalize_axis, same_as_input
from compiler.ops.elementwise import (
    FLOATS,
    NUMERIC,
    infer_unary,
    quiet,
    require_dtype,
    via_float32,
)
from compiler.ops.registry import Attr, OpDef, fail, register


def _relu(node, x):
    return np.maximum(x, np.zeros((), x.dtype))


register(OpDef("Relu", "activation", same_as_input, _relu, doc="max(x, 0)"))


@quiet
@via_float32
def _leaky_relu(node, x):
    return np.where(x < 0, x * x.dtype.type(node.attrs["alpha"]), x)


@quiet
@via_float32
def _sigmoid(node, x):
    # Two branches so that exp never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


@quiet
@via_float32
def _tanh(node, x):
    return np.tanh(x)


@quiet
@via_float32
def _hard_sigmoid(node, x):
    alpha, beta = (x.dtype.type(node.attrs[k]) for k in ("alpha", "beta"))
    return np.clip(alpha * x + beta, 0, 1).astype(x.dtype)


@quiet
@via_float32
def _hard_swish(node, x):
    return (x * np.clip(x * x.dtype.type(1 / 6) + x.dtype.type(0.5), 0, 1)).astype(x.dtype)


def check_alpha(node) -> None:
    """Refuse a NaN alpha.

    Every negative input would be NaN, which the runtimes quantize differently (onnxruntime's
    vector loop to the lowest code, its scalar tail to 0).
    """
    if np.isnan(node.attrs["alpha"]):
        fail(f"{node.op}'s alpha is NaN; it must be a number")


def _infer_leaky_relu(node, ins, values):
    check_alpha(node)
    return infer_unary(FLOATS)(node, ins, values)


register(OpDef("LeakyRelu", "activation", _infer_leaky_relu, _leaky_relu,
               attrs={"alpha": Attr("float", 0.01, "slope for x < 0")},
               doc="x for x >= 0, alpha * x below"))
register(OpDef("Sigmoid", "activation", infer_unary(FLOATS), _sigmoid, doc="1 / (1 + e^-x)"))
register(OpDef("Tanh", "activation", infer_unary(FLOATS), _tanh, doc="hyperbolic tangent"))
register(OpDef("HardSigmoid", "activation", infer_unary(FLOATS), _hard_sigmoid,
               attrs={"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)},
               doc="clip(alpha * x + beta, 0, 1)"))
register(OpDef("HardSwish", "activation", infer_unary(FLOATS), _hard_swish, since=14,
               doc="x * clip(x / 6 + 1/2, 0, 1)"))


# -- PRelu ----------------------------------------------------------------------------------------

def _infer_prelu(node, ins, values):
    x, slope = ins
    require_dtype(node, x, FLOATS + ("int32", "int64", "uint32", "uint64"))
    if slope.dtype != x.dtype:
        fail(f"PRelu's slope is {slope.dtype}, its input {x.dtype}; they must match")
    if broadcast_shape(x.shape, slope.shape) != x.shape:
        fail(f"PRelu's slope of shape {list(slope.shape)} does not broadcast to the input's "
             f"shape {list(x.shape)}")
    return [TensorType(x.shape, x.dtype)]


@quiet
def _prelu(node, x, slope):
    return np.where(x < 0, x * slope, x).astype(x.dtype)


register(OpDef("PRelu", "activation", _infer_prelu, _prelu, inputs=(2, 2),
               doc="x for x >= 0, slope * x below; slope broadcasts to x"))


# -- Clip -----------------------------------------------------------------------------------------

def _infer_clip(node, ins, values):
    x = ins[0]
    require_dtype(node, x, NUMERIC)
    for name, t in zip(("min", "max"), ins[1:]):
        if t is None:
            continue
        if t.dtype != x.dtype:
            fail(f"Clip's {name} is {t.dtype}, its input {x.dtype}; they must match")
        if t.numel != 1:
            fail(f"Clip's {name} must be a scalar, it has shape {list(t.shape)}")
    return [TensorType(x.shape, x.dtype)]


@quiet
def _clip(node, x, low=None, high=None):
    # Min(max, Max(x, min)): when min > max every element becomes max, as ONNX specifies.
    if low is not None:
        x = np.maximum(x, low.reshape(()))
    if high is not None:
        x = np.minimum(x, high.reshape(()))
    return np.array(x)


def _clip_from_onnx(ctx, attrs, inputs, opset):
    """Before opset 11 the bounds were float attributes; they become scalar constant inputs."""
    if opset >= 11:
        return attrs, inputs
    dtype = ctx.type_of(inputs[0]).dtype
    bounds = ["", ""]
    for i, key in enumerate(("min", "max")):
        if key in attrs:
            with np.errstate(over="ignore"):  # FLT_MAX in float16 is inf, as intended
                bound = np.array(attrs.pop(key), dtype)
            bounds[i] = ctx.constant(f"clip_{key}", bound)
    return attrs, inputs[:1] + bounds


def _clip_to_onnx(ctx, attrs, inputs, opset):
    """Before opset 11 the bounds must be written as attributes, so they must be constants."""
    if opset >= 11:
        return attrs, inputs
    attrs = dict(attrs)
    for key, name in zip(("min", "max"), inputs[1:3]):
        if not name:
            continue
        value = ctx.constant_value(name)
        if value is None:
            raise ModelError(f"Clip cannot be saved at opset {opset} because its {key} input "
                             f"{name!r} is not a constant (opsets before 11 take an attribute)")
        attrs[key] = float(np.asarray(value).reshape(()))
    return attrs, inputs[:1]


register(OpDef("Clip", "activation", _infer_clip, _clip, inputs=(1, 3),
               from_onnx=_clip_from_onnx, to_onnx=_clip_to_onnx,
               doc="min(max(x, min), max), optional scalar bounds"))


# -- Softmax, LogSoftmax --------------------------------------------------------------------------

def _softmax_axes(node, shape) -> tuple[int, ...]:
    """The axes normalized over: one axis, or (coerce_2d) the axis and all those after it."""
    if not shape:
        fail(f"{node.op} needs an input of rank 1 or more, got a scalar")
    axis = normalize_axis(node.attrs["axis"], len(shape))
    return tuple(range(axis, len(shape))) if node.attrs["coerce_2d"] else (axis,)


def _infer_softmax(node, ins, values):
    require_dtype(node, ins[0], FLOATS)
    _softmax_axes(node, ins[0].shape)
    return [TensorType(ins[0].shape, ins[0].dtype)]


@quiet
@via_float32
def _softmax(node, x):
    axes = _softmax_axes(node, x.shape)
    e = np.exp(x - np.max(x, axis=axes, keepdims=True))
    return (e / np.sum(e, axis=axes, keepdims=True)).astype(x.dtype)


@quiet
@via_float32
def _log_softmax(node, x):
    axes = _softmax_axes(node, x.shape)
    shifted = x - np.max(x, axis=axes, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axes, keepdims=True))).astype(x.dtype)


def _softmax_from_onnx(ctx, attrs, inputs, opset):
    """Before opset 13 the input was coerced to 2-D at `axis` (default 1): keep that meaning."""
    if opset < 13:
        attrs = {**attrs, "axis": attrs["axis"] if "axis" in ctx.present else 1, "coerce_2d": 1}
    return attrs, inputs


def _softmax_to_onnx(op: str):
    def to_onnx(ctx, attrs, inputs, opset):
        """Write `axis`; refuse when the target opset cannot express the normalization.

        Opsets before 13 coerce to 2-D at `axis`, later ones take one axis: the two agree when
        every axis after `axis` has size 1.
        """
        attrs = dict(attrs)
        coerce = attrs.pop("coerce_2d")
        shape = ctx.node.inputs[0].type.shape
        axis = attrs["axis"]
        if all(d == 1 for d in shape[normalize_axis(axis, len(shape)) + 1:]):
            return attrs, inputs
        if opset >= 13 and coerce:
            raise ModelError(f"{op} cannot be saved at opset {opset} because it normalizes over "
                             f"axis {axis} and all later axes together (the 2-D coercion of "
                             "opsets before 13), which later opsets express only with Reshapes")
        if opset < 13 and not coerce:
            raise ModelError(f"{op} cannot be saved at opset {opset} because it normalizes over "
                             f"axis {axis} of {list(shape)} alone, which opsets before 13 express "
                             "only for the last axis")
        return attrs, inputs
    return to_onnx


_SOFTMAX_ATTRS = {
    "axis": Attr("int", -1, "the axis normalized over"),
    "coerce_2d": Attr("int", 0, "Kiln only: 1 normalizes over axis and all later axes together "
                                "(the 2-D coercion of opsets before 13)", onnx=False),
}
register(OpDef("Softmax", "activation", _infer_softmax, _softmax, attrs=_SOFTMAX_ATTRS,
               from_onnx=_softmax_from_onnx, to_onnx=_softmax_to_onnx("Softmax"),
               doc="e^x / sum(e^x) over an axis"))
register(OpDef("LogSoftmax", "activation", _infer_softmax, _log_softmax, attrs=_SOFTMAX_ATTRS,
               from_onnx=_softmax_from_onnx, to_onnx=_softmax_to_onnx("LogSoftmax"),
               doc="x - log(sum(e^x)) over an axis"))


@quiet
def _hardmax(node, x):
    # 1 at the first maximum along the axes (flattened together when coerced), 0 elsewhere.
    axes = _softmax_axes(node, x.shape)
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    hot = np.zeros_like(flat)
    np.put_along_axis(hot, np.argmax(flat, axis=-1)[..., None], 1, axis=-1)
    return np.moveaxis(hot.reshape(moved.shape), range(x.ndim - len(axes), x.ndim), axes)


register(OpDef("Hardmax", "activation", _infer_softmax, _hardmax, attrs=_SOFTMAX_ATTRS,
               from_onnx=_softmax_from_onnx, to_onnx=_softmax_to_onnx("Hardmax"),
               doc="1 at the first maximum over an axis, 0 elsewhere"))
