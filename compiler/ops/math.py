"""Unary maths: trigonometry, rounding, NaN and infinity tests, and the smooth activations."""

from __future__ import annotations

import math

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops.elementwise import (
    FLOATS,
    NUMERIC,
    erf64,
    infer_unary,
    quiet,
    require_dtype,
    via_float32,
)
from compiler.ops.registry import Attr, OpDef, fail, register

# -- plain functions of one float ---------------------------------------------------------------


def _float_unary(ufunc):
    @quiet
    @via_float32
    def reference(node, x):
        return np.asarray(ufunc(x)).astype(x.dtype, copy=False)
    return reference


def _softplus(x):
    # log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


_FLOAT_UNARY = (
    ("Sin", np.sin, 7, "sine"), ("Cos", np.cos, 7, "cosine"), ("Tan", np.tan, 7, "tangent"),
    ("Asin", np.arcsin, 7, "arcsine"), ("Acos", np.arccos, 7, "arccosine"),
    ("Atan", np.arctan, 7, "arctangent"), ("Sinh", np.sinh, 9, "hyperbolic sine"),
    ("Cosh", np.cosh, 9, "hyperbolic cosine"), ("Asinh", np.arcsinh, 9, "inverse hyperbolic sine"),
    ("Acosh", np.arccosh, 9, "inverse hyperbolic cosine"),
    ("Atanh", np.arctanh, 9, "inverse hyperbolic tangent"),
    ("Ceil", np.ceil, 6, "smallest integer not below x"),
    ("Floor", np.floor, 6, "largest integer not above x"),
    ("Round", np.round, 11, "nearest integer, halves to even"),
    ("Reciprocal", np.reciprocal, 6, "1 / x"),
    ("Softplus", _softplus, 1, "log(1 + e^x)"),
    ("Softsign", lambda x: x / (1 + np.abs(x)), 1, "x / (1 + |x|)"),
    ("Mish", lambda x: x * np.tanh(_softplus(x)), 18, "x * tanh(softplus(x))"),
)
for _name, _fn, _since, _doc in _FLOAT_UNARY:
    _category = "activation" if _name in ("Softplus", "Softsign", "Mish") else "elementwise"
    register(OpDef(_name, _category, infer_unary(FLOATS), _float_unary(_fn), since=_since,
                   doc=_doc))


@quiet
def _sign(node, x):
    return np.sign(x).astype(x.dtype)


register(OpDef("Sign", "elementwise", infer_unary(NUMERIC), _sign, since=9,
               doc="-1, 0 or 1 by the sign of x (0 for NaN: NaN)"))


# -- tests with a bool result -------------------------------------------------------------------

def _infer_test(node, ins, values):
    require_dtype(node, ins[0], FLOATS)
    return [TensorType(ins[0].shape, "bool")]


def _is_nan(node, x):
    return np.isnan(x)


def _is_inf(node, x):
    negative = bool(node.attrs["detect_negative"])
    positive = bool(node.attrs["detect_positive"])
    return np.isinf(x) & (((x < 0) & negative) | ((x > 0) & positive))


register(OpDef("IsNaN", "elementwise", _infer_test, _is_nan, since=9,
               doc="true where x is NaN"))
register(OpDef("IsInf", "elementwise", _infer_test, _is_inf, since=10, attrs={
    "detect_negative": Attr("int", 1, "1: -inf counts"),
    "detect_positive": Attr("int", 1, "1: +inf counts")}, doc="true where x is infinite"))


# -- smooth activations with parameters ---------------------------------------------------------

def _param(node, x, name: str):
    return x.dtype.type(node.attrs[name])


@quiet
@via_float32
def _elu(node, x):
    alpha = _param(node, x, "alpha")
    return np.where(x < 0, alpha * np.expm1(np.minimum(x, 0)), x).astype(x.dtype)


@quiet
@via_float32
def _selu(node, x):
    alpha, gamma = _param(node, x, "alpha"), _param(node, x, "gamma")
    return (gamma * np.where(x <= 0, alpha * np.expm1(np.minimum(x, 0)), x)).astype(x.dtype)


@quiet
@via_float32
def _celu(node, x):
    alpha = _param(node, x, "alpha")
    return (np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha))).astype(x.dtype)


@quiet
@via_float32
def _thresholded_relu(node, x):
    return np.where(x > _param(node, x, "alpha"), x, 0).astype(x.dtype)


@quiet
def _shrink(node, x):
    bias, lambd = node.attrs["bias"], node.attrs["lambd"]
    wide = x.astype(np.float64)
    out = np.where(wide < -lambd, wide + bias, np.where(wide > lambd, wide - bias, 0))
    return out.astype(x.dtype)


@quiet
@via_float32
def _gelu(node, x):
    wide = x.astype(np.float64)
    if node.attrs["approximate"] == "tanh":
        inner = math.sqrt(2 / math.pi) * (wide + 0.044715 * wide ** 3)
        return (0.5 * wide * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * wide * (1 + erf64(wide / math.sqrt(2)))).astype(x.dtype)


@quiet
@via_float32
def _swish(node, x):
    wide = x.astype(np.float64)
    return (wide / (1 + np.exp(-node.attrs["alpha"] * wide))).astype(x.dtype)


def _infer_gelu(node, ins, values):
    if node.attrs["approximate"] not in ("none", "tanh"):
        fail(f"Gelu's approximate must be 'none' or 'tanh', not {node.attrs['approximate']!r}")
    return infer_unary(FLOATS)(node, ins, values)


register(OpDef("Elu", "activation", infer_unary(FLOATS), _elu, since=6,
               attrs={"alpha": Attr("float", 1.0, "scale of the negative part")},
               doc="x for x >= 0, alpha * (e^x - 1) below"))
register(OpDef("Selu", "activation", infer_unary(FLOATS), _selu, since=6, attrs={
    "alpha": Attr("float", 1.67326319217681884765625, "scale of the negative part"),
    "gamma": Attr("float", 1.05070102214813232421875, "scale of the whole")},
    doc="gamma * (x for x > 0, alpha * (e^x - 1) below)"))
register(OpDef("Celu", "activation", infer_unary(FLOATS), _celu, since=12,
               attrs={"alpha": Attr("float", 1.0, "the curve's scale")},
               doc="max(0, x) + min(0, alpha * (e^(x/alpha) - 1))"))
register(OpDef("ThresholdedRelu", "activation", infer_unary(FLOATS), _thresholded_relu, since=10,
               attrs={"alpha": Attr("float", 1.0, "the threshold")},
               doc="x where x > alpha, else 0"))
register(OpDef("Shrink", "activation", infer_unary(NUMERIC), _shrink, since=9, attrs={
    "bias": Attr("float", 0.0, "moved toward zero by this much"),
    "lambd": Attr("float", 0.5, "the half-width of the zero band")},
    doc="x + bias below -lambd, x - bias above lambd, 0 between"))
register(OpDef("Gelu", "activation", _infer_gelu, _gelu, since=20,
               attrs={"approximate": Attr("string", "none", "'none' (erf) or 'tanh'")},
               doc="x * Phi(x), exactly (erf) or by the tanh approximation"))
register(OpDef("Swish", "activation", infer_unary(FLOATS), _swish, since=24,
               attrs={"alpha": Attr("float", 1.0, "the sigmoid's slope")},
               doc="x * sigmoid(alpha * x)"))
