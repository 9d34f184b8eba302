"""exp, log, pow, tanh, sin, cos, rounding and fmod written in LLVM IR, for scalars and vectors.

Kernels call these instead of libm for two reasons. They vectorize: a softmax or sigmoid over a
channel vector stays in SIMD registers instead of calling `expf` once per element. And they
keep objects free of floating-point library calls, whose calling convention llvmlite cannot
make hard-float on Arm: an object that calls nothing can link into soft- and hard-float
firmware alike.

The approximations are Cephes' single-precision ones (range reduction, then a minimax
polynomial), accurate to a few ulps over the normal range, far inside the 1e-4 relative
tolerance bundles are checked at. Rounding (floor, ceil, rint) goes through a 32-bit integer
below 2^23, where every float is a whole number anyway; fmod is one fused multiply-add. Only
comparisons, selects, integer bit operations and float arithmetic are used, so no target needs
a library call for them.
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
_FOUR_OVER_PI = 1.27323954473516
_PI_4 = (0.78515625, 2.4187564849853515625e-4, 3.77489497744594108e-8)  # pi/4 in three parts
_SIN_POLY = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS_POLY = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
_WHOLE = 8388608.0  # 2^23: every float at least this large is a whole number
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

    def trunc(self, x: ir.Value) -> ir.Value:
        """Round toward zero (the sign of a zero result kept); NaN and inf unchanged."""
        b = self.b
        t = b.sitofp(b.fptosi(x, self.ity), self.ty)
        t = self.copysign(t, x)
        return b.select(b.fcmp_ordered("<", self.abs(x), self.f(_WHOLE)), t, x)

    def copysign(self, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
        b = self.b
        bits = b.or_(b.and_(b.bitcast(magnitude, self.ity), self.i(0x7FFFFFFF)),
                     b.and_(b.bitcast(sign, self.ity), self.i(-0x80000000)))
        return b.bitcast(bits, self.ty)

    def floor(self, x: ir.Value) -> ir.Value:
        b = self.b
        t = self.trunc(x)
        return b.select(b.fcmp_ordered(">", t, x), b.fsub(t, self.f(1.0)), t)

    def ceil(self, x: ir.Value) -> ir.Value:
        b = self.b
        t = self.trunc(x)
        return self.copysign(b.select(b.fcmp_ordered("<", t, x), b.fadd(t, self.f(1.0)), t), x)

    def rint(self, x: ir.Value) -> ir.Value:
        """The nearest whole number, halves to the even one (IEEE's default rounding)."""
        b = self.b
        low = self.floor(x)
        d = b.fsub(x, low)  # exact below 2^23
        odd = b.icmp_signed("!=", b.and_(b.fptosi(low, self.ity), self.i(1)), self.i(0))
        up = b.or_(b.fcmp_ordered(">", d, self.f(0.5)),
                   b.and_(b.fcmp_ordered("==", d, self.f(0.5)), odd))
        return self.copysign(b.select(up, b.fadd(low, self.f(1.0)), low), x)

    def _octant(self, a: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(j, z): |x| = j pi/4 + z with j even and |z| <= pi/4 (Cody-Waite in three parts)."""
        b = self.b
        j = b.fptosi(b.fmul(a, self.f(_FOUR_OVER_PI)), self.ity)
        j = b.and_(b.add(j, self.i(1)), self.i(-2))
        y = b.sitofp(j, self.ty)
        z = a
        for part in _PI_4:
            z = b.fsub(z, b.fmul(y, self.f(part)))
        return j, z

    def _sin_cos_poly(self, z: ir.Value, use_cos: ir.Value) -> ir.Value:
        b = self.b
        zz = b.fmul(z, z)
        c = b.fadd(b.fsub(b.fmul(b.fmul(self.poly(zz, _COS_POLY), zz), zz),
                          b.fmul(zz, self.f(0.5))), self.f(1.0))
        s = b.fadd(b.fmul(b.fmul(self.poly(zz, _SIN_POLY), zz), z), z)
        return b.select(use_cos, c, s)

    def _trig(self, x: ir.Value, cosine: bool) -> ir.Value:
        b = self.b
        j, z = self._octant(self.abs(x))
        j = b.and_(j, self.i(7))
        high = b.icmp_signed(">", j, self.i(3))
        j = b.select(high, b.sub(j, self.i(4)), j)
        negate = high
        if cosine:
            negate = b.xor(negate, b.icmp_signed(">", j, self.i(1)))
        else:
            negate = b.xor(negate, b.fcmp_ordered("<", x, self.f(0.0)))
        use_cos = b.or_(b.icmp_signed("==", j, self.i(1)), b.icmp_signed("==", j, self.i(2)))
        if cosine:
            use_cos = b.not_(use_cos)
        y = self._sin_cos_poly(z, use_cos)
        y = b.select(negate, b.fneg(y), y)
        finite = b.fcmp_ordered("<", self.abs(x), self.f(float("inf")))
        return b.select(finite, y, self.f(float("nan")))

    def sin(self, x: ir.Value) -> ir.Value:
        return self._trig(x, cosine=False)

    def cos(self, x: ir.Value) -> ir.Value:
        return self._trig(x, cosine=True)

    def fmod(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """C's fmod: x - trunc(x / y) y by one fused multiply-add, corrected once.

        The correction covers a rounded quotient one too far; the result is exact while the
        quotient stays below 2^24.
        """
        b = self.b
        q = self.trunc(b.fdiv(x, y))
        suffix = f"v{self.ty.count}f32" if isinstance(self.ty, ir.VectorType) else "f32"
        fma = b.module.declare_intrinsic(f"llvm.fma.{suffix}", (),
                                         ir.FunctionType(self.ty, [self.ty] * 3))
        r = b.call(fma, [b.fneg(q), y, x])
        size = self.abs(y)
        step = self.copysign(size, x)
        wrong_side = b.and_(b.fcmp_ordered("!=", r, self.f(0.0)),
                            b.icmp_signed("!=", b.fcmp_ordered("<", r, self.f(0.0)),
                                          b.fcmp_ordered("<", x, self.f(0.0))))
        r = b.select(wrong_side, b.fadd(r, step), r)
        r = b.select(b.fcmp_ordered(">=", self.abs(r), size), b.fsub(r, step), r)
        r = self.copysign(r, x)
        infinite = self.f(float("inf"))
        r = b.select(b.fcmp_ordered("==", size, infinite), x, r)  # x mod inf is x
        bad = b.or_(b.fcmp_unordered("uno", r, r), b.fcmp_ordered("==", y, self.f(0.0)))
        bad = b.or_(bad, b.fcmp_ordered("==", self.abs(x), infinite))
        bad = b.or_(bad, b.fcmp_unordered("uno", y, y))
        return b.select(bad, self.f(float("nan")), r)

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
    "exp": _Math.exp, "log": _Math.log, "pow": _Math.pow, "tanh": _Math.tanh, "sin": _Math.sin,
    "cos": _Math.cos, "floor": _Math.floor, "ceil": _Math.ceil, "rint": _Math.rint,
    "fmod": _Math.fmod,
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
