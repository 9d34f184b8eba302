"""exp, log, pow and tanh written in LLVM IR, for scalars and vectors alike.

Kernels call these instead of libm for two reasons. They vectorize: a softmax or sigmoid over a
channel vector stays in SIMD registers instead of calling `expf` once per element. And they
keep objects free of floating-point library calls, whose calling convention llvmlite cannot
make hard-float on Arm: an object that calls nothing can link into soft- and hard-float
firmware alike.

The approximations are Cephes' single-precision ones (range reduction, then a minimax
polynomial), accurate to a few ulps over the normal range, far inside the 1e-4 relative
tolerance bundles are checked at. Only comparisons, selects, integer bit operations and
float arithmetic are used, so no target needs a library call for them.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

F32 = ir.FloatType()
I32 = ir.IntType(32)

_LOG2E = 1.44269504088896341
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
             1.6666665459e-1, 5.0000001201e-1)
_LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
             1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
             3.3333331174e-1)
_TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
              -3.33332819422e-1)
_SQRT_HALF = 0.707106781186547524
# exp saturates here: e^88.37 is the largest power whose 2^n scale stays a normal float.
_EXP_HI, _EXP_LO = 88.3762626647949, -87.3365447505531


class _Math:
    """Builds one function's worth of math on values of one type (float or <n x float>)."""

    def __init__(self, b: ir.IRBuilder, ty: ir.Type):
        self.b, self.ty = b, ty
        self.ity = ir.VectorType(I32, ty.count) if isinstance(ty, ir.VectorType) else I32

    def f(self, value: float) -> ir.Constant:
        if isinstance(self.ty, ir.VectorType):
            return ir.Constant(self.ty, [value] * self.ty.count)
        return ir.Constant(self.ty, value)

    def i(self, value: int) -> ir.Constant:
        if isinstance(self.ty, ir.VectorType):
            return ir.Constant(self.ity, [value] * self.ty.count)
        return ir.Constant(I32, value)

    def poly(self, x: ir.Value, coefficients) -> ir.Value:
        """Horner's rule: c0 x^(n-1) + ... + c(n-1)."""
        b = self.b
        acc = self.f(coefficients[0])
        for c in coefficients[1:]:
            acc = b.fadd(b.fmul(acc, x), self.f(c))
        return acc

    def clamp(self, x: ir.Value, low: float, high: float) -> ir.Value:
        b = self.b
        x = b.select(b.fcmp_ordered("<", x, self.f(low)), self.f(low), x)
        return b.select(b.fcmp_ordered(">", x, self.f(high)), self.f(high), x)

    def round_to_int(self, x: ir.Value) -> ir.Value:
        """Nearest integer (halves away from zero) without a rounding instruction."""
        b = self.b
        half = b.select(b.fcmp_ordered("<", x, self.f(0.0)), self.f(-0.5), self.f(0.5))
        return b.fptosi(b.fadd(x, half), self.ity)

    def exp(self, x: ir.Value) -> ir.Value:
        b = self.b
        original = x
        x = self.clamp(x, _EXP_LO, _EXP_HI)
        n = self.round_to_int(b.fmul(x, self.f(_LOG2E)))
        fn = b.sitofp(n, self.ty)
        r = b.fsub(b.fsub(x, b.fmul(fn, self.f(_LN2_HI))), b.fmul(fn, self.f(_LN2_LO)))
        y = b.fadd(b.fadd(b.fmul(self.poly(r, _EXP_POLY), b.fmul(r, r)), r), self.f(1.0))
        scale = b.bitcast(b.shl(b.add(n, self.i(127)), self.i(23)), self.ty)
        y = b.fmul(y, scale)
        # Past the range: overflow to inf, underflow to 0 (denormals flushed); NaN stays NaN.
        y = b.select(b.fcmp_ordered(">", original, self.f(_EXP_HI)), self.f(float("inf")), y)
        y = b.select(b.fcmp_ordered("<", original, self.f(_EXP_LO)), self.f(0.0), y)
        return b.select(b.fcmp_unordered("uno", original, original), original, y)

    def log(self, x: ir.Value) -> ir.Value:
        b = self.b
        bits = b.bitcast(x, self.ity)
        e = b.sub(b.ashr(bits, self.i(23)), self.i(126))  # x = m * 2^e, m in [0.5, 1)
        m = b.bitcast(b.or_(b.and_(bits, self.i(0x007FFFFF)), self.i(0x3F000000)), self.ty)
        small = b.fcmp_ordered("<", m, self.f(_SQRT_HALF))
        e = b.select(small, b.sub(e, self.i(1)), e)
        m = b.select(small, b.fsub(b.fadd(m, m), self.f(1.0)), b.fsub(m, self.f(1.0)))
        fe = b.sitofp(e, self.ty)
        z = b.fmul(m, m)
        y = b.fmul(b.fmul(self.poly(m, _LOG_POLY), m), z)
        y = b.fadd(y, b.fmul(fe, self.f(_LN2_LO)))
        y = b.fsub(y, b.fmul(z, self.f(0.5)))
        result = b.fadd(b.fadd(m, y), b.fmul(fe, self.f(_LN2_HI)))
        # log(0) = -inf, log(negative) = NaN, log(inf) = inf, log(NaN) = NaN
        result = b.select(b.fcmp_ordered("==", x, self.f(0.0)), self.f(float("-inf")), result)
        result = b.select(b.fcmp_unordered("<", x, self.f(0.0)), self.f(float("nan")), result)
        return b.select(b.fcmp_ordered("==", x, self.f(float("inf"))), x, result)

    def pow(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """x^y as exp(y log|x|), negated for a negative base and an odd integer exponent."""
        b = self.b
        magnitude = self.exp(b.fmul(y, self.log(self.abs(x))))
        whole = b.fptosi(y, self.ity)
        is_int = b.fcmp_ordered("==", b.sitofp(whole, self.ty), y)
        odd = b.icmp_signed("!=", b.and_(whole, self.i(1)), self.i(0))
        negative = b.fcmp_ordered("<", x, self.f(0.0))
        signed = b.select(b.and_(is_int, odd), b.fneg(magnitude), magnitude)
        result = b.select(negative, b.select(is_int, signed, self.f(float("nan"))), magnitude)
        zero_base = b.fcmp_ordered("==", x, self.f(0.0))
        zero_result = b.select(b.fcmp_ordered(">", y, self.f(0.0)), self.f(0.0),
                               b.select(b.fcmp_ordered("==", y, self.f(0.0)), self.f(1.0),
                                        self.f(float("inf"))))
        result = b.select(zero_base, zero_result, result)
        return b.select(b.fcmp_ordered("==", y, self.f(0.0)), self.f(1.0), result)

    def abs(self, x: ir.Value) -> ir.Value:
        b = self.b
        return b.bitcast(b.and_(b.bitcast(x, self.ity), self.i(0x7FFFFFFF)), self.ty)

    def tanh(self, x: ir.Value) -> ir.Value:
        b = self.b
        a = self.abs(x)
        e = self.exp(b.fmul(a, self.f(-2.0)))
        big = b.fdiv(b.fsub(self.f(1.0), e), b.fadd(self.f(1.0), e))
        big = b.select(b.fcmp_ordered("<", x, self.f(0.0)), b.fneg(big), big)
        z = b.fmul(x, x)
        small = b.fadd(b.fmul(b.fmul(self.poly(z, _TANH_POLY), z), x), x)
        return b.select(b.fcmp_ordered("<", a, self.f(0.625)), small, big)


FUNCTIONS: dict[str, Callable] = {
    "exp": _Math.exp, "log": _Math.log, "pow": _Math.pow, "tanh": _Math.tanh,
}


def math_call(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value | None:
    """`name(*args)` computed inline for float32 scalars or vectors.

    None when `name` (or the element type) is not one this module writes out; the caller then
    uses an intrinsic.
    """
    ty = args[0].type
    element = ty.element if isinstance(ty, ir.VectorType) else ty
    if name not in FUNCTIONS or not isinstance(element, ir.FloatType):
        return None
    return FUNCTIONS[name](_Math(b, ty), *args)
