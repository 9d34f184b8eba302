"""Requantization in generated code: an int32 accumulator to an 8-bit output, either rule.

The same arithmetic as compiler/qmath/requant.py, emitted as LLVM integer and float operations:
`tflite` multiplies by a Q31 multiplier with TFLite Micro's double rounding (a 64-bit product,
a nudge, a truncating division by 2**31, then a rounding right shift, ties away from zero);
`onnx` multiplies the accumulator converted to float32 by a float32 scale, clamps and rounds
half to even (llvm.rint in the default rounding mode). On CPUs with wide float64 vectors the
tflite rule has a cheaper exact form, `tflite_float64`: one float64 multiply, a select and a
floor instead of 64-bit integer lanes. Every function takes scalars or vectors
(a vector of output channels requantized at once); the per-channel parameters arrive as weight
arrays, so one kernel serves every layer of one shape.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel
from compiler.codegen.targets import DotProduct
from compiler.qmath.requant import onnx_scale, requantize_tflite, tflite_multiplier

# Weight slots of the per-channel requantization data, after a node's own inputs.
MULTIPLIERS, SHIFTS, SCALES = 10, 11, 12
# The tflite rule's shift split for `tflite_split`: left shift, right shift, rounding addend,
# and whether the addend drops by one for a negative value.
LEFTS, RIGHTS, ROUNDS, NEGATIVE_FIXES = 16, 17, 18, 19
# The tflite rule's float64 form (`tflite_float64`): the multiplier M * 2**-(31 + r) and the
# addends 1/2 + H and 1/2 - H (H = 2**-(1 + r), 0 when r = 0), as float64 bit patterns in
# int64 arrays, and the int32 accumulator below which the lower addend applies.
F64_MULTIPLIERS, F64_UPS, F64_DOWNS, NEGATIVE_BELOW = 20, 21, 22, 23
# The two-step float64 form's 2**-r per channel (its multiplier is M * 2**-31, its addends 1/2
# and 1/2 - 2**-r); present only in that form.
F64_SCALES = 24
# The float64 form is exact for right shifts up to this (see `float64_arrays`); the two-step
# form for any right shift, while the accumulators stay within TWO_STEP_REACH.
FLOAT64_MAX_RIGHT = 13
TWO_STEP_REACH = (1 << 22) - 1

I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()


def channel_arrays(node, x_scale, w_scale, y_scale, channels: int,
                   fully_connected: bool = False, split_for: tuple[int, int] | None = None,
                   float64: bool = False, reach: tuple | None = None,
                   output: tuple[int, int, int] | None = None) -> dict[int, np.ndarray]:
    """The per-channel requantization data of the node's rule, by weight slot.

    The tflite rule's Q31 multipliers and shifts (a per-tensor fully connected layer forms
    in * w in float first, as TFLite Micro does) or the onnx rule's float32 scales. With
    `split_for` (the output zero point and upper clamp), also the split shifts of
    `tflite_split` when they give exact results for this layer; with `float64` (a target with
    wide float64 vectors), the tables of `tflite_float64` where every channel allows it
    (`reach`: each channel's lowest and highest accumulator, and `output` the zero point and
    clamp, when known).
    """
    w_scale = np.asarray(w_scale, np.float32).reshape(-1)
    if node.attrs.get("requant", "onnx") == "tflite":
        multiplier, shift = tflite_multiplier(
            x_scale, w_scale, y_scale, product_in_float=fully_connected and w_scale.size == 1)
        shift = np.broadcast_to(shift, (channels,)).astype(np.int64)
        arrays = {MULTIPLIERS: np.broadcast_to(multiplier, (channels,)).astype(np.int32),
                  SHIFTS: shift.astype(np.int32)}
        right = np.maximum(-shift, 0)
        # A saturated rounding addition is off by one only for values whose result is at
        # least 2**(31 - right) - 1; the clamp hides that when it is above the output range.
        if split_for is not None and np.all((1 << (31 - right)) - 1 + split_for[0]
                                            >= split_for[1]):
            arrays.update({LEFTS: np.maximum(shift, 0).astype(np.int32),
                           RIGHTS: right.astype(np.int32),
                           ROUNDS: np.where(right > 0, 1 << np.maximum(right - 1, 0), 0)
                           .astype(np.int32),
                           NEGATIVE_FIXES: (right > 0).astype(np.int32)})
        if float64:
            arrays.update(float64_arrays(arrays[MULTIPLIERS], shift, reach, output))
        return arrays
    return {SCALES: np.broadcast_to(onnx_scale(x_scale, w_scale, y_scale),
                                    (channels,)).astype(np.float32)}


def float64_arrays(multiplier: np.ndarray, shift: np.ndarray, reach: tuple | None = None,
                   output: tuple[int, int, int] | None = None) -> dict[int, np.ndarray]:
    """The tables of `tflite_float64`, or none when no float64 form is exact for the layer.

    A left shift is done on int32 by TFLite (wrapping), which float64 does not repeat. Past
    FLOAT64_MAX_RIGHT the one-step form's products may round where the result is not yet
    clamped; the two-step form (F64_SCALES present) then serves a layer whose accumulators
    stay within TWO_STEP_REACH. `reach` (each channel's lowest and highest accumulator) and
    `output` (zero point, low, high) let both see a channel whose every reachable accumulator
    gives one output (a dead channel: a huge bias, weights near zero): its tables give that
    output with a zero multiplier, and its shift no longer counts.
    """
    shift = np.asarray(shift, np.int64)
    multiplier = np.asarray(multiplier, np.int64)
    constant = np.zeros(shift.shape, bool)
    if reach is not None:
        lo, hi = (np.broadcast_to(np.asarray(r, np.int64), shift.shape) for r in reach)
        wide = np.maximum(np.abs(lo), np.abs(hi))
        if output is not None:  # the rule is monotonic in the accumulator
            first, last = (requantize_tflite(np.clip(r, -(1 << 31), (1 << 31) - 1),
                                             multiplier, shift, *output) for r in (lo, hi))
            # A range past int32 wraps (as TFLite Micro's sums do): anything is reachable.
            fits = (lo >= -(1 << 31)) & (hi < 1 << 31)
            constant = (first == last) & (shift <= 0) & fits
    live = ~constant
    right = np.where(live, -shift, 0)
    if np.any(shift[live] > 0):
        return {}

    def bits(*pairs) -> dict[int, np.ndarray]:
        return {slot: np.ascontiguousarray(t, np.float64).view(np.int64) for slot, t in pairs}

    # A constant channel: a zero multiplier and addends that floor to its output less zp.
    fixed = (first - output[0] + 0.25) if constant.any() else 0.0
    if np.all(right <= FLOAT64_MAX_RIGHT):
        scaled = np.where(live, multiplier * np.ldexp(1.0, -31 - right), 0.0)
        half = np.where(right > 0, np.ldexp(1.0, -1 - right), 0.0)
        tables = bits((F64_MULTIPLIERS, scaled),
                      (F64_UPS, np.where(live, 0.5 + half, fixed)),
                      (F64_DOWNS, np.where(live, 0.5 - half, fixed)))
        # acc * M < -2**30 from acc = -1 on, unless M is 2**30 (or 0: either addend gives 0)
        tables[NEGATIVE_BELOW] = np.where(multiplier > 1 << 30, 0, -1).astype(np.int32)
        return tables
    if reach is None or np.any(wide[live] > TWO_STEP_REACH):
        return {}
    scale = np.ldexp(1.0, -right)
    return bits((F64_MULTIPLIERS, np.where(live, multiplier * np.ldexp(1.0, -31), 0.0)),
                (F64_SCALES, scale),
                (F64_UPS, np.where(live, np.where(right > 0, 0.5, 0.0), fixed)),
                (F64_DOWNS, np.where(live, np.where(right > 0, 0.5 - scale, 0.0), fixed)))


def _like(value: ir.Value, scalar: ir.Type) -> ir.Type:
    """`scalar`, or a vector of it as wide as `value` is."""
    ty = value.type
    return ir.VectorType(scalar, ty.count) if isinstance(ty, ir.VectorType) else scalar


def const(like: ir.Value, number, scalar: ir.Type = I32) -> ir.Constant:
    """`number` as a constant of `scalar` type, splatted when `like` is a vector."""
    ty = _like(like, scalar)
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [number] * ty.count)
    return ir.Constant(ty, number)


def _select_min(k: Kernel, a: ir.Value, b: ir.Value) -> ir.Value:
    return k.b.select(k.b.icmp_signed("<", a, b), a, b)


def _select_max(k: Kernel, a: ir.Value, b: ir.Value) -> ir.Value:
    return k.b.select(k.b.icmp_signed(">", a, b), a, b)


def rint(k: Kernel, value: ir.Value) -> ir.Value:
    """llvm.rint of a float32 or a vector of them (ties to even in the default mode).

    A hard-float core without VRINT (Cortex-M4's FPv4) would call rintf, a float passed
    across the call standard llvmlite cannot state; there the rounding is done inline.
    """
    if no_vrint(k):
        return rint_inline(k, value)
    ty = value.type
    name = f"llvm.rint.v{ty.count}f32" if isinstance(ty, ir.VectorType) else "llvm.rint.f32"
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ty, [ty]), name)
    return k.b.call(fn, [value])


def no_vrint(k: Kernel) -> bool:
    """True on a hard-float core without VRINT (FPv4): rounding must not call libm."""
    target = k.target
    return (target is not None and target.mcu and target.float_abi == "hard"
            and "fp-armv8" not in target.features and "mve" not in target.features)


def no_float64(k: Kernel) -> bool:
    """True on a microcontroller with a single-precision FPU only (FPv4-SP, FPv5-SP, RISC-V F).

    There float64 arithmetic becomes calls to library helpers: ones that pass doubles, which
    an Arm object's float-ABI marking forbids (compiler/codegen/armattrs.py), or ones a bare
    RISC-V link does not have.
    """
    target = k.target
    if target is None or not target.mcu:
        return False
    features = set(target.features.split(","))
    if target.triple.startswith("riscv"):
        return "+f" in features and "+d" not in features
    return target.float_abi == "hard" and ("+vfp4d16sp" in features or "-fp64" in features)


def round_away(k: Kernel, value: ir.Value) -> ir.Value:
    """llvm.round of a float32 (ties away from zero), inline where `no_vrint`."""
    if not no_vrint(k):
        fn = k.fn.module.declare_intrinsic("llvm.round", [value.type],
                                           ir.FunctionType(value.type, [value.type]))
        return k.b.call(fn, [value])
    b = k.b
    zero = const(value, 0.0, value.type)
    negative = b.fcmp_ordered("<", value, zero)
    size = b.select(negative, b.fsub(zero, value), value)
    nearest = rint_inline(k, size)
    # A tie that went to the even integer below goes one further, away from zero.
    tie_down = b.fcmp_ordered("==", b.fsub(size, nearest), const(value, 0.5, value.type))
    away = b.select(tie_down, b.fadd(nearest, const(value, 1.0, value.type)), nearest)
    return b.select(negative, b.fsub(zero, away), away)


def rint_inline(k: Kernel, value: ir.Value) -> ir.Value:
    """Ties-to-even rounding by adding and taking away 2**23 (2**52 for float64), no libm call.

    Below 2**23 the sum's last place is 1, so the addition rounds to an integer, ties to
    even; from 2**23 on every float32 is an integer already (float64: the same at 2**52).
    Negatives are rounded by their magnitude (rounding to nearest is symmetric).
    """
    b = k.b
    ty = value.type
    scalar = ty.element if isinstance(ty, ir.VectorType) else ty
    exact_from = const(value, 2.0 ** 52 if isinstance(scalar, ir.DoubleType) else 2.0 ** 23, scalar)
    zero = const(value, 0.0, scalar)
    negative = b.fcmp_ordered("<", value, zero)
    size = b.select(negative, b.fsub(zero, value), value)
    rounded = b.fsub(b.fadd(size, exact_from), exact_from)
    rounded = b.select(b.fcmp_ordered("<", size, exact_from), rounded, size)
    return b.select(negative, b.fsub(zero, rounded), rounded)


def srdhm(k: Kernel, a: ir.Value, multiplier: ir.Value, multiplier_safe: bool = False
          ) -> ir.Value:
    """SaturatingRoundingDoublingHighMul of two int32 values (or vectors).

    gemmlowp adds a nudge of 2**30 (1 - 2**30 when the product is negative) and divides by
    2**31 truncating toward zero; for every product that equals (ab + 2**30) >> 31 with an
    arithmetic (flooring) shift, since both round ties up and everything else to the nearest.
    The only saturating case is a = b = INT32_MIN; `multiplier_safe` says the multiplier is
    never INT32_MIN (QuantizeMultiplier's are in [2**30, 2**31) or 0) and drops that check.
    On Helium a vector of four is one VQRDMULH: (2ab + 2**31) >> 32, saturated: the same value.
    """
    b = k.b
    if (isinstance(a.type, ir.VectorType) and a.type.count % 4 == 0 and k.target is not None
            and k.target.int8_dot is DotProduct.MVE):
        return _mve_vqrdmulh(k, a, multiplier)
    wide = _like(a, I64)
    product = b.mul(b.sext(a, wide), b.sext(multiplier, wide))
    high = b.trunc(b.ashr(b.add(product, const(a, 1 << 30, I64)), const(a, 31, I64)),
                   _like(a, I32))
    if multiplier_safe:
        return high
    overflow = b.and_(b.icmp_signed("==", a, const(a, -(1 << 31))),
                      b.icmp_signed("==", multiplier, const(a, -(1 << 31))))
    return b.select(overflow, const(a, (1 << 31) - 1), high)


def _mve_vqrdmulh(k: Kernel, a: ir.Value, multiplier: ir.Value) -> ir.Value:
    """VQRDMULH on each group of four lanes of two int32 vectors, joined again."""
    b, count = k.b, a.type.count
    quad = ir.VectorType(I32, 4)
    module = k.fn.module
    name = "llvm.arm.mve.vqrdmulh.v4i32"
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(quad, [quad, quad]),
                                                 name)
    if count == 4:
        return b.call(fn, [a, multiplier])
    parts = []
    for start in range(0, count, 4):
        pick = ir.Constant(ir.VectorType(I32, 4), list(range(start, start + 4)))
        parts.append(b.call(fn, [b.shuffle_vector(a, a, pick),
                                 b.shuffle_vector(multiplier, multiplier, pick)]))
    return _join(b, parts)


def rounding_divide_by_pot(k: Kernel, x: ir.Value, exponent: ir.Value) -> ir.Value:
    """The int32 quotient x / 2**exponent rounded half away from zero (RoundingDivideByPOT)."""
    b = k.b
    mask = b.sub(b.shl(const(x, 1), exponent), const(x, 1))
    remainder = b.and_(x, mask)
    threshold = b.add(b.ashr(mask, const(x, 1)),
                      b.zext(b.icmp_signed("<", x, const(x, 0)), _like(x, I32)))
    return b.add(b.ashr(x, exponent),
                 b.zext(b.icmp_signed(">", remainder, threshold), _like(x, I32)))


def mbqm(k: Kernel, x: ir.Value, multiplier: ir.Value, shift: ir.Value) -> ir.Value:
    """MultiplyByQuantizedMultiplier: x * 2**max(shift, 0), SRDHM, rounding right shift."""
    b = k.b
    zero = const(x, 0)
    left = _select_max(k, shift, zero)
    right = _select_max(k, b.sub(zero, shift), zero)
    return rounding_divide_by_pot(k, srdhm(k, b.shl(x, left), multiplier, True), right)


def tflite_split(k: Kernel, acc: ir.Value, multiplier: ir.Value, left: ir.Value | None,
                 right: ir.Value, rounding: ir.Value, negative_fix: ir.Value | None,
                 zero_point: int, low: int, high: int) -> ir.Value:
    """The tflite rule with the shift pre-split, the rounding right shift in two steps.

    (acc << left), SRDHM, then one saturating add and an arithmetic shift:
    RoundingDivideByPOT(x, e) = (x + 2**(e-1) - [x < 0]) >> e for e >= 1 (ties away from
    zero), x for e = 0; `channel_arrays` provides the split only where the saturation cannot
    reach the clamped result. Scalars or vectors alike (QADD / VQADD on Arm). `left` None:
    no channel shifts left; `negative_fix` None: every channel's shift is right (e >= 1).
    """
    b = k.b
    x = srdhm(k, acc if left is None else b.shl(acc, left), multiplier, True)
    negative = b.lshr(x, const(x, 31))
    addend = b.sub(rounding, negative if negative_fix is None else b.and_(negative,
                                                                         negative_fix))
    ty = x.type
    name = (f"llvm.sadd.sat.v{ty.count}i32" if isinstance(ty, ir.VectorType)
            else "llvm.sadd.sat.i32")
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ty, [ty, ty]), name)
    x = b.ashr(b.call(fn, [x, addend]), right)
    return clamp(k, b.add(x, const(x, zero_point)), low, high)


def tflite_float64(k: Kernel, acc: ir.Value, multiplier: ir.Value, up: ir.Value,
                   down: ir.Value, negative_below: ir.Value | None, zero_point: int, low: int,
                   high: int, scale: ir.Value | None = None) -> ir.Value:
    """The tflite rule in float64: floor(acc * M * 2**-(31+r) + 1/2 +- H), + zp, clamped.

    TFLite's two roundings are one: SRDHM gives y = floor((p + 2**30) / 2**31) for p =
    acc * M, and the rounding right shift floor((y + 2**(r-1) - [y < 0]) / 2**r); the floor
    of an integer plus an integer, divided, is the floor of the whole, so the result is
    floor(q + 1/2 + H - 2H[y < 0]) with q = p * 2**-(31+r) and H = 2**-(1+r) (for r = 0:
    floor(q + 1/2), H = 0). y < 0 exactly when p < -2**30: for M in (2**30, 2**31) when
    acc < 0, for M = 2**30 when acc < -1 (`negative_below`). In float64 every step is exact
    while |p| + 2**(31+r) <= 2**53: q and the sum are multiples of 2**-(31+r) below 2**53 of
    them (so a fused multiply-add gives the same). Beyond, |q| >= 2**(22-r) - 1 >= 511 for
    r <= FLOAT64_MAX_RIGHT, and the computed value, within two roundings of it, clamps to
    the same bound. Tables by `float64_arrays`.

    With `scale` (2**-r), the two steps are kept: y = floor(acc * M * 2**-31 + 1/2), exact
    while |acc| <= TWO_STEP_REACH (|p| + 2**30 < 2**53), then floor(y * 2**-r + 1/2, less
    2**-r for y < 0): y * 2**-r and the sum are multiples of 2**-r below 2**22, exact for
    every r up to 31 (`up` and `down` are then 1/2 and 1/2 - 2**-r, 0 for r = 0).
    """
    b = k.b
    wide = _like(acc, F64)
    x = b.sitofp(acc, wide)
    if scale is not None:
        y = _floor(k, b.fadd(b.fmul(x, multiplier, flags=("contract",)),
                             const(acc, 0.5, F64), flags=("contract",)))
        negative = b.fcmp_ordered("<", y, const(acc, 0.0, F64))
        value = b.fadd(b.fmul(y, scale, flags=("contract",)),
                       b.select(negative, down, up), flags=("contract",))
    else:
        addend = b.select(b.icmp_signed("<", acc, negative_below), down, up)
        value = b.fadd(b.fmul(x, multiplier, flags=("contract",)), addend,
                       flags=("contract",))
    # Clamped before the zero point is added, which then cannot wrap (acc = INT32_MIN).
    whole = clamp(k, _floor_to_int32(k, value), low - zero_point, high - zero_point)
    return b.add(whole, const(acc, zero_point))


def _floor(k: Kernel, value: ir.Value) -> ir.Value:
    """llvm.floor of a float64 (or a vector of them)."""
    ty = value.type
    name = f"llvm.floor.v{ty.count}f64" if isinstance(ty, ir.VectorType) else "llvm.floor.f64"
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ty, [ty]), name)
    return k.b.call(fn, [value])


def _floor_to_int32(k: Kernel, value: ir.Value) -> ir.Value:
    """floor(value) as int32 lanes: one conversion rounding down on AVX-512, else two steps."""
    b = k.b
    ty = value.type
    if (isinstance(ty, ir.VectorType) and ty.count in (8, 16, 32, 64) and k.target is not None
            and k.target.vector_bits >= 512 and k.target.triple.startswith("x86_64")):
        eight, i32x8 = ir.VectorType(F64, 8), ir.VectorType(I32, 8)
        name = "llvm.x86.avx512.mask.cvtpd2dq.512"
        module = k.fn.module
        fn = module.globals.get(name) or ir.Function(
            module, ir.FunctionType(i32x8, [eight, i32x8, ir.IntType(8), I32]), name)
        parts = []
        for start in range(0, ty.count, 8):
            pick = ir.Constant(ir.VectorType(I32, 8), list(range(start, start + 8)))
            part = b.shuffle_vector(value, value, pick) if ty.count > 8 else value
            # Rounding 9: toward negative infinity, exceptions suppressed.
            parts.append(b.call(fn, [part, ir.Constant(i32x8, None), ir.IntType(8)(-1),
                                     I32(9)]))
        return _join(b, parts)
    return b.fptosi(_floor(k, value), _like(value, I32))


def _join(b: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    """Equal vectors concatenated, pairwise."""
    while len(parts) > 1:
        width = parts[0].type.count
        join = ir.Constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
        parts = [b.shuffle_vector(parts[i], parts[i + 1], join)
                 for i in range(0, len(parts), 2)]
    return parts[0]


def clamp(k: Kernel, value: ir.Value, low: int, high: int) -> ir.Value:
    """An int32 (or vector) clamped to [low, high]."""
    return _select_min(k, _select_max(k, value, const(value, low)), const(value, high))


def tflite(k: Kernel, acc: ir.Value, multiplier: ir.Value, shift: ir.Value, zero_point: int,
           low: int, high: int) -> ir.Value:
    """MultiplyByQuantizedMultiplier(acc) + zero point, clamped: an int32 in [low, high]."""
    value = k.b.add(mbqm(k, acc, multiplier, shift), const(acc, zero_point))
    return clamp(k, value, low, high)


def onnx(k: Kernel, acc: ir.Value, scale: ir.Value, zero_point: int, low: int, high: int
         ) -> ir.Value:
    """As MlasRequantizeOutput: float32(acc) * scale, clamped, rounded half to even, + zp."""
    b = k.b
    fty = _like(acc, F32)
    value = b.fmul(b.sitofp(acc, fty), scale)
    lo = const(acc, float(low - zero_point), F32)
    hi = const(acc, float(high - zero_point), F32)
    value = b.select(b.fcmp_ordered("<", value, lo), lo, value)
    value = b.select(b.fcmp_ordered(">", value, hi), hi, value)
    value = b.add(b.fptosi(rint(k, value), _like(acc, I32)), const(acc, zero_point))
    return clamp(k, value, low, high)


def ctlz(k: Kernel, x: ir.Value) -> ir.Value:
    """CountLeadingZeros of an int32 (32 for 0), as llvm.ctlz."""
    module = k.fn.module
    fn = module.globals.get("llvm.ctlz.i32") or ir.Function(
        module, ir.FunctionType(I32, [I32, ir.IntType(1)]), "llvm.ctlz.i32")
    return k.b.call(fn, [x, ir.Constant(ir.IntType(1), 0)])
