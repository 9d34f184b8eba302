"""Element-wise arithmetic: binary operators with broadcasting, variadic reductions, unary maths."""

from __future__ import annotations

import functools
import math

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import TensorType
from compiler.ops._util import broadcast_shape
from compiler.ops.kiln import ACTIVATION_ATTRS, apply_activation, check_activation
from compiler.ops.registry import OpDef, fail, register

FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
NUMERIC = FLOATS + SIGNED + UNSIGNED


def require_dtype(node, t: TensorType, allowed: tuple[str, ...], what: str = "input") -> None:
    """Reject an element type outside the operator's ONNX type constraint."""
    if t.dtype not in allowed:
        fail(f"{node.op} does not accept {t.dtype} {what}s (it takes {', '.join(allowed)})")


def same_dtype(node, types) -> str:
    """The one element type shared by all (present) inputs."""
    dtypes = [t.dtype for t in types if t is not None]
    if len(set(dtypes)) > 1:
        fail(f"{node.op} needs inputs of one element type, got {' and '.join(dtypes)}")
    return dtypes[0]


def via_float32(fn):
    """Run a float function in float32 for float16 inputs (as onnxruntime does), else as is."""
    @functools.wraps(fn)
    def wrapper(node, x, *rest):
        if x.dtype == np.float16:
            return fn(node, x.astype(np.float32), *rest).astype(np.float16)
        return fn(node, x, *rest)
    return wrapper


def quiet(fn):
    """Silence numpy's floating-point warnings: inf and NaN results are ONNX semantics here."""
    @functools.wraps(fn)
    def wrapper(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return wrapper


# -- binary operators with multidirectional broadcasting ------------------------------------------

def _infer_binary(node, ins, values):
    dtype = same_dtype(node, ins)
    require_dtype(node, ins[0], NUMERIC)
    check_activation(node, dtype)
    return [TensorType(broadcast_shape(ins[0].shape, ins[1].shape), dtype)]


def _binary(ufunc):
    @quiet
    def reference(node, a, b):
        return apply_activation(node, np.asarray(ufunc(a, b)).astype(a.dtype, copy=False))
    return reference


@quiet
def _div(node, a, b):
    if a.dtype.kind == "f":
        return np.asarray(np.divide(a, b))
    if not np.all(b):
        raise ModelError("integer division by zero (its result is undefined)")
    q = np.floor_divide(a, b)
    # ONNX (like C) truncates toward zero; floor division rounds down: fix inexact negatives.
    return np.asarray(q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))).astype(a.dtype)


def _infer_pow(node, ins, values):
    require_dtype(node, ins[0], ("float16", "float32", "float64", "int32", "int64"), "base")
    require_dtype(node, ins[1], NUMERIC, "exponent")
    return [TensorType(broadcast_shape(ins[0].shape, ins[1].shape), ins[0].dtype)]


@quiet
def _pow(node, x, y):
    # The output has the base's type. Integer bases are computed in float64 and truncated, as
    # onnxruntime does (std::pow on doubles); float16 goes through float32.
    if x.dtype.kind != "f":
        wide = np.power(x.astype(np.float64), y.astype(np.float64))
        return np.asarray(wide).astype(x.dtype)
    work = np.float32 if x.dtype == np.float16 else x.dtype
    return np.asarray(np.power(x.astype(work), y.astype(work))).astype(x.dtype)


for _name, _ufunc, _doc in (("Add", np.add, "a + b"), ("Sub", np.subtract, "a - b"),
                            ("Mul", np.multiply, "a * b")):
    # Add takes a fused activation (Kiln only, see compiler.ops.kiln); Sub and Mul do not.
    register(OpDef(_name, "elementwise", _infer_binary, _binary(_ufunc), inputs=(2, 2),
                   attrs=dict(ACTIVATION_ATTRS) if _name == "Add" else {},
                   doc=f"{_doc}, numpy-style broadcasting; integers wrap"))
register(OpDef("Div", "elementwise", _infer_binary, _div, inputs=(2, 2),
               doc="a / b, numpy-style broadcasting; integer division truncates toward zero"))
register(OpDef("Pow", "elementwise", _infer_pow, _pow, inputs=(2, 2),
               doc="x ** y, numpy-style broadcasting; the output has the base's type"))


# -- variadic operators ---------------------------------------------------------------------------

def _infer_variadic(allowed):
    def infer(node, ins, values):
        dtype = same_dtype(node, ins)
        require_dtype(node, ins[0], allowed)
        return [TensorType(broadcast_shape(*(t.shape for t in ins)), dtype)]
    return infer


def _fold(ufunc):
    @quiet
    def reference(node, *arrays):
        return np.array(functools.reduce(ufunc, arrays))
    return reference


@quiet
def _mean(node, *arrays):
    total = _fold(np.add)(node, *arrays)
    return (total / np.asarray(len(arrays), total.dtype)).astype(total.dtype)


register(OpDef("Sum", "elementwise", _infer_variadic(FLOATS), _fold(np.add), inputs=(1, -1),
               doc="element-wise sum of any number of inputs, broadcasting"))
register(OpDef("Mean", "elementwise", _infer_variadic(FLOATS), _mean, inputs=(1, -1),
               doc="element-wise mean of any number of inputs, broadcasting"))
register(OpDef("Max", "elementwise", _infer_variadic(NUMERIC), _fold(np.maximum), inputs=(1, -1),
               doc="element-wise maximum of any number of inputs, broadcasting; NaN wins"))
register(OpDef("Min", "elementwise", _infer_variadic(NUMERIC), _fold(np.minimum), inputs=(1, -1),
               doc="element-wise minimum of any number of inputs, broadcasting; NaN wins"))


# -- unary operators ------------------------------------------------------------------------------

def infer_unary(allowed):
    """Inference of an element-wise operator whose output has its input's type."""
    def infer(node, ins, values):
        require_dtype(node, ins[0], allowed)
        return [TensorType(ins[0].shape, ins[0].dtype)]
    return infer


def _unary(ufunc):
    @quiet
    def reference(node, x):
        return np.asarray(ufunc(x)).astype(x.dtype, copy=False)
    return reference


_ERF_SERIES_LIMIT = 2.5  # below: power series; above: continued fraction of erfc
_ERFC_CF_DEPTH = 60


def erf64(x: np.ndarray) -> np.ndarray:
    """The error function in float64, within 2e-15 of math.erf (numpy has none).

    Small arguments use the series erf(a) = 2/sqrt(pi) e^(-a^2) sum 2^n a^(2n+1) / (2n+1)!!,
    whose terms are all positive (no cancellation); larger ones the continued fraction of erfc.
    """
    x = np.asarray(x, np.float64)
    a = np.abs(x)
    out = np.empty_like(a)
    small = a < _ERF_SERIES_LIMIT
    s = a[small]
    term, total, ratio = s.copy(), s.copy(), 2 * s * s
    n = 0
    while term.size and np.any(term > 1e-17 * total):
        n += 1
        term = term * ratio / (2 * n + 1)
        total += term
    out[small] = 2 / math.sqrt(math.pi) * np.exp(-s * s) * total
    b = a[~small]
    fraction = np.zeros_like(b)
    for k in range(_ERFC_CF_DEPTH, 0, -1):
        fraction = (k / 2) / (b + fraction)
    out[~small] = 1 - np.exp(-b * b) / math.sqrt(math.pi) / (b + fraction)
    return np.copysign(out, x)


@quiet
def _erf(node, x):
    return erf64(x).astype(x.dtype)


_UNARY = (
    ("Sqrt", np.sqrt, FLOATS, "square root"),
    ("Exp", np.exp, FLOATS, "e ** x"),
    ("Log", np.log, FLOATS, "natural logarithm"),
    ("Neg", np.negative, FLOATS + SIGNED, "-x"),
    ("Abs", np.abs, NUMERIC, "|x|"),
)
for _name, _ufunc, _allowed, _doc in _UNARY:
    register(OpDef(_name, "elementwise", infer_unary(_allowed), _unary(_ufunc), doc=_doc))
register(OpDef("Erf", "elementwise", infer_unary(FLOATS), _erf, since=9, doc="error function"))
