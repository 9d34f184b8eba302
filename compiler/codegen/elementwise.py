"""Element-wise kernels: single operators and fused chains in one loop, plus (Log)Softmax.

A fused chain's steps (`Mul $0 $1`, `Add x $2`, `Relu x`) become scalar code inside one loop
over the output; inputs broadcast numpy-style through zero strides, all known at compile time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import FAST, Kernel, activate, llvm_type, strides
from compiler.codegen.mathfn import math_call
from compiler.errors import KilnError
from compiler.ops.kiln import parse_step


def intrinsic(k: Kernel, name: str, *args: ir.Value) -> ir.Value:
    """`name(*args)` on floats.

    exp, log, pow, tanh, sin, cos, floor, ceil, rint and fmod are inline code (`mathfn`: it
    vectorizes and calls no library), the rest llvm.<name> (an instruction on every FPU target).
    """
    inline = math_call(k.b, name, *args)
    if inline is not None:
        return inline
    ty = args[0].type
    fn = k.fn.module.declare_intrinsic(f"llvm.{name}", [ty],
                                       ir.FunctionType(ty, [ty] * len(args)))
    return k.b.call(fn, list(args))


def _const(x: ir.Value, value: float) -> ir.Constant:
    return ir.Constant(x.type, value)


def max_of(k, a, b):
    """The larger of two floats; a NaN in either propagates (as numpy's maximum does)."""
    larger = k.b.select(k.b.fcmp_ordered("<", a, b), b, a)  # `a` when either is NaN
    return k.b.select(k.b.fcmp_unordered("uno", b, b), b, larger)


def min_of(k, a, b):
    """The smaller of two floats; a NaN in either propagates (as numpy's minimum does)."""
    smaller = k.b.select(k.b.fcmp_ordered(">", a, b), b, a)  # `a` when either is NaN
    return k.b.select(k.b.fcmp_unordered("uno", b, b), b, smaller)


def _sigmoid(k, x):
    e = intrinsic(k, "exp", k.b.fneg(x))
    return k.b.fdiv(_const(x, 1.0), k.b.fadd(_const(x, 1.0), e))


def _clip(k, x, low=None, high=None):
    if low is not None:
        x = max_of(k, x, low)
    return x if high is None else min_of(k, x, high)


def _mod(k, a, b, fmod: bool):
    """The remainder of a / b: C's fmod (the dividend's sign), or with fmod=0 the divisor's.

    The divisor's sign adds b to a nonzero C remainder whose sign differs from b's.
    """
    r = intrinsic(k, "fmod", a, b)
    if fmod:
        return r
    zero = _const(a, 0.0)
    differ = k.b.icmp_unsigned("!=", k.b.fcmp_ordered("<", r, zero), k.b.fcmp_ordered("<", b, zero))
    return k.b.select(k.b.and_(k.b.fcmp_ordered("!=", r, zero), differ), k.b.fadd(r, b), r)


def _softplus(k, x):
    """log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|)."""
    e = intrinsic(k, "exp", k.b.fneg(intrinsic(k, "fabs", x)))
    return k.b.fadd(max_of(k, x, _const(x, 0.0)),
                    intrinsic(k, "log", k.b.fadd(_const(x, 1.0), e)))


def _expm1_scaled(k, x, scale):
    """The scale times e^x - 1."""
    return k.b.fmul(_const(x, scale), k.b.fsub(intrinsic(k, "exp", x), _const(x, 1.0)))


def _hyperbolic(k, x, sign: float):
    """(e^x + sign e^-x) / 2: cosh (sign 1) or sinh (sign -1)."""
    a, b = intrinsic(k, "exp", x), intrinsic(k, "exp", k.b.fneg(x))
    return k.b.fmul(k.b.fadd(a, k.b.fmul(_const(x, sign), b)), _const(x, 0.5))


def _below_zero(k, x):
    return k.b.fcmp_ordered("<", x, _const(x, 0.0))


# Smooth activations and hyperbolic functions from exp, log, sqrt and tanh.
SMOOTH_OPS: dict[str, tuple[Callable, tuple[tuple[str, float], ...]]] = {
    "Softplus": (_softplus, ()),
    "Softsign": (lambda k, x: k.b.fdiv(x, k.b.fadd(_const(x, 1.0), intrinsic(k, "fabs", x))),
                 ()),
    "Mish": (lambda k, x: k.b.fmul(x, intrinsic(k, "tanh", _softplus(k, x))), ()),
    "Sign": (lambda k, x: k.b.select(_below_zero(k, x), _const(x, -1.0), k.b.select(
        k.b.fcmp_ordered(">", x, _const(x, 0.0)), _const(x, 1.0), x)), ()),
    "Selu": (lambda k, x, alpha, gamma: k.b.fmul(_const(x, gamma), k.b.select(
        k.b.fcmp_ordered("<=", x, _const(x, 0.0)), _expm1_scaled(k, x, alpha), x)),
        (("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875))),
    "Celu": (lambda k, x, alpha: k.b.fadd(max_of(k, x, _const(x, 0.0)), min_of(
        k, _const(x, 0.0), _expm1_scaled(k, k.b.fdiv(x, _const(x, alpha)), alpha))),
        (("alpha", 1.0),)),
    "ThresholdedRelu": (lambda k, x, alpha: k.b.select(
        k.b.fcmp_ordered(">", x, _const(x, alpha)), x, _const(x, 0.0)), (("alpha", 1.0),)),
    "Sinh": (lambda k, x: _hyperbolic(k, x, -1.0), ()),
    "Cosh": (lambda k, x: _hyperbolic(k, x, 1.0), ()),
    "Tan": (lambda k, x: k.b.fdiv(intrinsic(k, "sin", x), intrinsic(k, "cos", x)), ()),
    "Asinh": (lambda k, x: intrinsic(k, "log", k.b.fadd(x, intrinsic(k, "sqrt", k.b.fadd(
        k.b.fmul(x, x), _const(x, 1.0))))), ()),
    "Acosh": (lambda k, x: intrinsic(k, "log", k.b.fadd(x, intrinsic(k, "sqrt", k.b.fsub(
        k.b.fmul(x, x), _const(x, 1.0))))), ()),
    "Atanh": (lambda k, x: k.b.fmul(_const(x, 0.5), intrinsic(k, "log", k.b.fdiv(
        k.b.fadd(_const(x, 1.0), x), k.b.fsub(_const(x, 1.0), x)))), ()),
    "Asin": (lambda k, x: _asin(k, x), ()),
    "Acos": (lambda k, x: _acos(k, x), ()),
    "Atan": (lambda k, x: _atan(k, x), ()),
    "Erf": (lambda k, x: _erf(k, x), ()),
    "Gelu": (lambda k, x: _gelu(k, x), ()),
    "Swish": (lambda k, x, alpha: k.b.fmul(x, _sigmoid(k, k.b.fmul(_const(x, alpha), x))),
              (("alpha", 1.0),)),
    "Shrink": (lambda k, x, lambd, bias: k.b.select(
        k.b.fcmp_ordered("<", x, _const(x, -lambd)), k.b.fadd(x, _const(x, bias)),
        k.b.select(k.b.fcmp_ordered(">", x, _const(x, lambd)), k.b.fsub(x, _const(x, bias)),
                   _const(x, 0.0))), (("lambd", 0.5), ("bias", 0.0))),
}


def _atan(k, x):
    """Arctangent, inline, by Cephes' atanf polynomial on |x| <= tan(pi/8).

    Larger arguments are reduced first: atan(x) = pi/2 - atan(1/x) above tan(3pi/8), and
    pi/4 + atan((x - 1) / (x + 1)) above tan(pi/8).
    """
    b = k.b
    a = intrinsic(k, "fabs", x)
    big = b.fcmp_ordered(">", a, _const(x, 2.414213562373095))
    mid = b.fcmp_ordered(">", a, _const(x, 0.4142135623730950))
    reduced = b.select(big, b.fdiv(_const(x, -1.0), a), b.select(
        mid, b.fdiv(b.fsub(a, _const(x, 1.0)), b.fadd(a, _const(x, 1.0))), a))
    base = b.select(big, _const(x, math.pi / 2), b.select(mid, _const(x, math.pi / 4),
                                                          _const(x, 0.0)))
    z = b.fmul(reduced, reduced)
    poly = _const(x, 8.05374449538e-2)
    for c in (-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1):
        poly = b.fadd(b.fmul(poly, z), _const(x, c))
    y = b.fadd(base, b.fadd(b.fmul(b.fmul(poly, z), reduced), reduced))
    return b.select(_below_zero(k, x), b.fneg(y), y)


def _asin(k, x):
    """Asin x = atan(x / sqrt((1 - x)(1 + x))): pi/2 at 1, NaN beyond."""
    b = k.b
    one = _const(x, 1.0)
    root = intrinsic(k, "sqrt", b.fmul(b.fsub(one, x), b.fadd(one, x)))
    return _atan(k, b.fdiv(x, root))


def _acos(k, x):
    """Acos x = 2 atan(sqrt((1 - x) / (1 + x))), accurate near 1 where pi/2 - asin is not."""
    b = k.b
    one = _const(x, 1.0)
    ratio = intrinsic(k, "sqrt", b.fdiv(b.fsub(one, x), b.fadd(one, x)))
    return b.fmul(_const(x, 2.0), _atan(k, ratio))


def _erf(k, x):
    """erf, inline: Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7)."""
    b = k.b
    a = intrinsic(k, "fabs", x)
    t = b.fdiv(_const(x, 1.0), b.fadd(_const(x, 1.0), b.fmul(_const(x, 0.3275911), a)))
    poly = _const(x, 1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = b.fadd(b.fmul(poly, t), _const(x, c))
    tail = b.fmul(b.fmul(poly, t), intrinsic(k, "exp", b.fneg(b.fmul(a, a))))
    y = b.fsub(_const(x, 1.0), tail)
    return b.select(_below_zero(k, x), b.fneg(y), y)


def _gelu(k, x):
    """0.5 x (1 + erf(x / sqrt 2)), or with approximate=tanh its tanh form (ONNX Gelu)."""
    if k.node.attrs.get("approximate") == "tanh":
        cube = k.b.fmul(k.b.fmul(x, x), x)
        inner = k.b.fmul(_const(x, math.sqrt(2 / math.pi)),
                         k.b.fadd(x, k.b.fmul(_const(x, 0.044715), cube)))
        shape = intrinsic(k, "tanh", inner)
    else:
        shape = _erf(k, k.b.fmul(x, _const(x, 1 / math.sqrt(2))))
    return k.b.fmul(k.b.fmul(_const(x, 0.5), x), k.b.fadd(_const(x, 1.0), shape))


def _hard_sigmoid(k, x, alpha=0.2, beta=0.5):
    y = k.b.fadd(k.b.fmul(x, _const(x, alpha)), _const(x, beta))
    return min_of(k, max_of(k, y, _const(x, 0.0)), _const(x, 1.0))


# op -> (scalar emitter, attribute names passed after the operands, with defaults).
SCALAR_OPS: dict[str, tuple[Callable, tuple[tuple[str, float], ...]]] = {
    "Add": (lambda k, a, b: k.b.fadd(a, b), ()),
    "Sub": (lambda k, a, b: k.b.fsub(a, b), ()),
    "Mul": (lambda k, a, b: k.b.fmul(a, b), ()),
    "Div": (lambda k, a, b: k.b.fdiv(a, b), ()),
    "Max": (lambda k, *xs: _fold(k, max_of, xs), ()),
    "Min": (lambda k, *xs: _fold(k, min_of, xs), ()),
    "Neg": (lambda k, x: k.b.fneg(x), ()),
    "Abs": (lambda k, x: intrinsic(k, "fabs", x), ()),
    "Sqrt": (lambda k, x: intrinsic(k, "sqrt", x), ()),
    "Exp": (lambda k, x: intrinsic(k, "exp", x), ()),
    "Log": (lambda k, x: intrinsic(k, "log", x), ()),
    "Ceil": (lambda k, x: intrinsic(k, "ceil", x), ()),
    "Floor": (lambda k, x: intrinsic(k, "floor", x), ()),
    "Round": (lambda k, x: intrinsic(k, "rint", x), ()),  # halves to even, as ONNX rounds
    "Sin": (lambda k, x: intrinsic(k, "sin", x), ()),
    "Cos": (lambda k, x: intrinsic(k, "cos", x), ()),
    "Reciprocal": (lambda k, x: k.b.fdiv(_const(x, 1.0), x), ()),
    "Mod": (lambda k, a, b, fmod: _mod(k, a, b, bool(fmod)), (("fmod", 0.0),)),
    **SMOOTH_OPS,
    "Elu": (lambda k, x, alpha: k.b.select(
        k.b.fcmp_ordered("<", x, _const(x, 0.0)),
        k.b.fmul(_const(x, alpha), k.b.fsub(intrinsic(k, "exp", x), _const(x, 1.0))), x),
        (("alpha", 1.0),)),
    "Pow": (lambda k, a, b: intrinsic(k, "pow", a, b), ()),
    "Relu": (lambda k, x: max_of(k, x, _const(x, 0.0)), ()),
    "LeakyRelu": (lambda k, x, alpha: k.b.select(k.b.fcmp_ordered(">=", x, _const(x, 0.0)), x,
                                                 k.b.fmul(x, _const(x, alpha))),
                  (("alpha", 0.01),)),
    "PRelu": (lambda k, x, s: k.b.select(k.b.fcmp_ordered(">=", x, _const(x, 0.0)), x,
                                         k.b.fmul(x, s)), ()),
    "Sigmoid": (_sigmoid, ()),
    "Clip": (_clip, ()),
    "HardSigmoid": (_hard_sigmoid, (("alpha", 0.2), ("beta", 0.5))),
    "HardSwish": (lambda k, x: k.b.fmul(x, _hard_sigmoid(k, x, 1 / 6, 0.5)), ()),
    "Tanh": (lambda k, x: intrinsic(k, "tanh", x), ()),
    "Sum": (lambda k, *xs: _fold(k, lambda k, a, b: k.b.fadd(a, b), xs), ()),
    "Mean": (lambda k, *xs: k.b.fdiv(_fold(k, lambda k, a, b: k.b.fadd(a, b), xs),
                                     _const(xs[0], float(len(xs)))), ()),
}


def _fold(k, fn, xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = fn(k, acc, x)
    return acc


def broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of `shape` seen as `out` (numpy broadcasting; 0 where repeated)."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    return [0 if d == 1 and o != 1 else s for d, s, o in zip(shape, strides(shape), out)]


def _steps(node) -> list[tuple[str, list[str], dict[str, float]]]:
    """The node as a chain of steps: its own `steps`, or one step for a plain operator."""
    if node.op == "FusedElementwise":
        return [parse_step(text) for text in node.attrs["steps"]]
    refs = ["_" if v is None else f"${i}" for i, v in enumerate(node.inputs)]
    attrs = {a: float(node.attrs[a]) for a, _ in SCALAR_OPS[node.op][1] if a in node.attrs}
    return [(node.op, refs, attrs)]


def emit_elementwise(k: Kernel) -> None:
    """One loop over the output computing every step per element (in place when planned so)."""
    node = k.node
    out = tuple(node.output.type.shape)
    out_strides = broadcast_strides(out, out)
    steps = _steps(node)
    for op, _, _ in steps:
        if op not in SCALAR_OPS:
            raise KilnError(f"cannot generate element-wise {op} in {node.name}")
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        loaded: dict[int, ir.Value] = {}

        def operand(i: int) -> ir.Value:
            if i not in loaded:
                steps = broadcast_strides(node.inputs[i].type.shape, out)
                loaded[i] = k.load(k.args[i], k.index(*zip(idx, steps)))
            return loaded[i]

        # Every input is read before the first store, so an in-place output is safe.
        for i, v in enumerate(node.inputs):
            if v is not None:
                operand(i)
        x = None
        for op, refs, attrs in steps:
            fn, names = SCALAR_OPS[op]
            args = [x if r == "x" else None if r == "_" else operand(int(r[1:])) for r in refs]
            x = fn(k, *args, *(attrs.get(a, d) for a, d in names))
        k.store(activate(k, x), k.outs[0], k.index(*zip(idx, out_strides)))


def _softmax_span(node) -> tuple[int, int, int]:
    """(outer, depth, inner): the sizes of the axes before, across and after the normalized ones.

    One axis is normalized, or (the 2-D coercion of opsets before 13) `axis` and all after it.
    """
    shape = node.output.type.shape
    axis = int(node.attrs.get("axis", -1)) % len(shape)
    end = len(shape) if node.attrs.get("coerce_2d") else axis + 1
    size = [int(np.prod(shape[a:b], dtype=np.int64)) for a, b in
            ((0, axis), (axis, end), (end, len(shape)))]
    return size[0], size[1], size[2]


def emit_softmax(k: Kernel) -> None:
    """Softmax or LogSoftmax over any axis: max, exp and sum per row, then one scaling pass.

    Rows are `depth` elements `inner` apart; with the last axis (the usual case) they are
    contiguous. Softmax keeps the exponentials in the output; LogSoftmax recomputes x - max.
    """
    node = k.node
    outer, depth, inner = _softmax_span(node)
    log = node.op == "LogSoftmax"
    ty = llvm_type(node.output.type.dtype)
    top, total = k.alloca(ty), k.alloca(ty)
    b = k.b
    with k.loop(outer) as o, k.loop(inner) as r:
        def at(d):
            return k.index((o, depth * inner), (d, inner), (r, 1))

        b.store(ir.Constant(ty, float("-inf")), top)
        with k.loop(depth) as d:
            b.store(max_of(k, k.load(k.args[0], at(d)), b.load(top)), top)
        b.store(ir.Constant(ty, 0.0), total)
        with k.loop(depth) as d:
            i = at(d)
            e = intrinsic(k, "exp", b.fsub(k.load(k.args[0], i), b.load(top)))
            if not log:
                k.store(e, k.outs[0], i)
            b.store(b.fadd(b.load(total), e, flags=FAST), total)
        if log:
            shift = b.fadd(b.load(top), intrinsic(k, "log", b.load(total)))
        with k.loop(depth) as d:
            i = at(d)
            if log:
                k.store(b.fsub(k.load(k.args[0], i), shift), k.outs[0], i)
            else:
                k.store(b.fdiv(k.load(k.outs[0], i), b.load(total)), k.outs[0], i)
