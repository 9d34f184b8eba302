"""The tflite rule's float64 form in generated code equals TFLite's fixed-point rule exactly.

`requant.tflite_float64` rests on a proof (its docstring): TFLite's two roundings are one
floor, every float64 step is exact while |acc * M| + 2**(31+r) <= 2**53, and beyond that the
result clamps either way for right shifts up to FLOAT64_MAX_RIGHT. These tests check the code,
compiled for each x86 level, on 10**7 random (accumulator, multiplier, shift) triples against
the scalar rule of compiler/qmath/requant.py: uniform triples, triples aimed at the ties of
the final rounding, and the saturating edges (INT32_MIN and INT32_MAX accumulators, the
multipliers 0, 2**30 and 2**31 - 1, shifts 0 and -13). The two-step form, for layers with
larger shifts, is checked the same way on shifts to -31 and accumulators within its reach. A
level this CPU lacks is compiled and named in the terminal summary.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.inprocess import LoadedObject
from compiler.codegen.kernel import I32, Kernel
from compiler.codegen.llvm import emit_object
from compiler.codegen.targets import get_target, missing_on_this_cpu
from compiler.qmath.requant import requantize_tflite

LANES = 16
TRIPLES = 10_000_000
CHUNK = 1 << 20  # triples per call
# (zero point, low, high): int8 outputs, a fused ReLU's range, and a zero point at each end.
OUTPUTS = ((0, -128, 127), (-128, -128, 127), (127, -128, 127), (-7, -7, 127))
I64 = ir.IntType(64)


def _module(target) -> ir.Module:
    """void rq_Z(i32 *acc, i64 *m, i64 *up, i64 *down, i32 *below, i8 *out) per output
    range Z: out[i] = tflite_float64(acc[i]) with lane i's own tables, for CHUNK lanes; and
    rq2_Z, the two-step form, with the 2**-r table in place of `below`."""
    module = ir.Module("requant_float64")
    module.triple = target.triple
    p32, p64, p8 = (ir.PointerType(t) for t in (I32, I64, ir.IntType(8)))
    for (z, (zp, low, high)), two_step in itertools.product(enumerate(OUTPUTS), (False, True)):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [
            p32, p64, p64, p64, p64 if two_step else p32, p8]),
            f"rq{'2' if two_step else ''}_{z}")
        k = Kernel(None, fn, [], [], target=target)
        b = k.b
        acc, m, up, down, last, out = fn.args
        with k.loop(CHUNK // LANES) as i:
            at = b.mul(i, I32(LANES))

            def vector(ptr, ty, at=at, b=b):
                cast = b.bitcast(b.gep(ptr, [at]), ir.PointerType(ir.VectorType(ty, LANES)))
                return b.load(cast, align=4)

            def doubles(ptr, b=b, vector=vector):
                return vector(b.bitcast(ptr, ir.PointerType(requant.F64)), requant.F64)

            tables = [doubles(p) for p in (m, up, down)]
            if two_step:
                value = requant.tflite_float64(k, vector(acc, I32), *tables, None, zp, low,
                                               high, scale=doubles(last))
            else:
                value = requant.tflite_float64(k, vector(acc, I32), *tables,
                                               vector(last, I32), zp, low, high)
            target_ptr = b.bitcast(b.gep(out, [at]),
                                   ir.PointerType(ir.VectorType(ir.IntType(8), LANES)))
            b.store(b.trunc(value, ir.VectorType(ir.IntType(8), LANES)), target_ptr, align=1)
        k.finish()
    return module


def _triples(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Accumulators, multipliers and shifts: a third uniform, a third at ties, edges."""
    shift = rng.integers(-requant.FLOAT64_MAX_RIGHT, 1, n)
    multiplier = rng.integers(1 << 30, 1 << 31, n)
    acc = rng.integers(-(1 << 31), 1 << 31, n)
    small = rng.random(n) < 0.5  # reachable accumulators: well inside int32
    acc[small] >>= rng.integers(4, 24, small.sum())
    # Aim at the ties: the accumulator nearest to (z + 1/2) * 2**(31+r) / M, for outputs z
    # around the int8 range, then up to two steps either side.
    ties = rng.random(n) < 0.35
    z = rng.integers(-300, 300, ties.sum()) + 0.5
    aimed = np.rint(z * np.ldexp(1.0, 31 + shift[ties] * -1) / multiplier[ties])
    acc[ties] = np.clip(aimed + rng.integers(-2, 3, ties.sum()), -(1 << 31), (1 << 31) - 1)
    edges = rng.random(n) < 0.02
    acc[edges] = rng.choice([-(1 << 31), (1 << 31) - 1, 0, 1, -1, -2, 2], edges.sum())
    odd = rng.random(n) < 0.02
    multiplier[odd] = rng.choice([0, 1 << 30, (1 << 31) - 1], odd.sum())
    shift[multiplier == 0] = 0  # QuantizeMultiplier's form of a zero scale
    return acc.astype(np.int32), multiplier.astype(np.int32), shift.astype(np.int32)


def _two_step_triples(rng: np.random.Generator, n: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Triples for the two-step form: any right shift, accumulators within its reach."""
    acc, multiplier, _ = _triples(rng, n)
    reach = requant.TWO_STEP_REACH
    acc = np.clip(acc.astype(np.int64), -reach, reach)
    acc[rng.random(n) < 0.5] >>= 10
    edges = rng.random(n) < 0.02
    acc[edges] = rng.choice([-reach, reach, 0, 1, -1, -2, 2], edges.sum())
    shift = rng.integers(-31, 1, n)
    shift[multiplier == 0] = 0
    return acc.astype(np.int32), multiplier, shift.astype(np.int32)


def _loaded(level: str, record_property):
    """The test kernels loaded for `level`, or None (recorded) where this CPU lacks it."""
    target = get_target(level)
    obj = emit_object(str(_module(target)), target)
    missing = missing_on_this_cpu(target)
    if missing:
        record_property("kernels", f"this CPU lacks {', '.join(missing)}")
        assert obj[:4] == b"\x7fELF"
        return None
    record_property("kernels", f"ran {level}")
    return LoadedObject(obj, "requant.o", [f"rq{s}_{z}" for z in range(len(OUTPUTS))
                                           for s in ("", "2")])


def _check(fn, acc, multiplier, shift, tables, last_slot, output) -> None:
    zp, low, high = output
    out = np.empty(acc.size, np.int8)
    fn(acc.ctypes.data, *(tables[s].ctypes.data for s in (
        requant.F64_MULTIPLIERS, requant.F64_UPS, requant.F64_DOWNS, last_slot)),
       out.ctypes.data)
    want = requantize_tflite(acc, multiplier, shift, zp, low, high)
    bad = np.flatnonzero(out != want)
    assert bad.size == 0, (
        f"{bad.size} differ, first acc={acc[bad[0]]} M={multiplier[bad[0]]} "
        f"shift={shift[bad[0]]}: {out[bad[0]]} != {want[bad[0]]}")


# Per float64 form: its kernels' prefix, seed, triples, the reach its tables are built with,
# and the table its kernels take last.
FORMS = {
    "one-step": ("rq", 33, _triples, None, requant.NEGATIVE_BELOW),
    # Shifts to -31 (channels with tiny multipliers), accumulators within the form's reach.
    "two-step": ("rq2", 34, _two_step_triples,
                 (-requant.TWO_STEP_REACH, requant.TWO_STEP_REACH), requant.F64_SCALES),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("level", ["x86-64-v3", "icelake-server"])
def test_float64_requantization_equals_the_fixed_point_rule(level, form, record_property):
    """10**7 triples per form give the scalar rule's bytes, 0 differing."""
    loaded = _loaded(level, record_property)
    if loaded is None:
        return
    prefix, seed, triples, reach, last_slot = FORMS[form]
    rng = np.random.default_rng(seed)
    signature = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 6)
    for z, output in enumerate(OUTPUTS):
        fn = signature(loaded.address(f"{prefix}_{z}"))
        for _ in range(0, TRIPLES // len(OUTPUTS), CHUNK):
            acc, multiplier, shift = triples(rng, CHUNK)
            tables = requant.float64_arrays(multiplier, shift, reach)
            assert last_slot in tables, f"the {form} form serves these triples"
            _check(fn, acc, multiplier, shift, tables, last_slot, output)


def test_float64_tables_refuse_what_the_proof_does_not_cover():
    """A left shift (int32 wrapping in TFLite), or a right shift past the bound without a
    reach the two-step form covers, keeps the fixed-point form: no tables for the layer."""
    m = np.array([1 << 30, 1 << 30], np.int32)
    far = np.array([0, -requant.FLOAT64_MAX_RIGHT - 1])
    reach = requant.TWO_STEP_REACH
    assert requant.float64_arrays(m, np.array([0, 1]), (-100, 100)) == {}
    assert requant.float64_arrays(m, far) == {}
    assert requant.float64_arrays(m, far, (-reach - 1, reach)) == {}
    assert requant.F64_SCALES in requant.float64_arrays(m, far, (-reach, reach))
    # A range past int32 wraps in TFLite Micro's sums: never folded to one output.
    wrapping = (np.array([0, (1 << 31) - 10]), np.array([0, (1 << 31) + 10]))
    assert requant.float64_arrays(m, far, wrapping, (0, -128, 127)) == {}
    assert set(requant.float64_arrays(m, np.array([0, -requant.FLOAT64_MAX_RIGHT]))) == {
        requant.F64_MULTIPLIERS, requant.F64_UPS, requant.F64_DOWNS, requant.NEGATIVE_BELOW}


@pytest.mark.parametrize("level", ["x86-64-v3", "icelake-server"])
def test_dead_channels_give_their_one_output(level, record_property):
    """Channels whose every reachable accumulator gives one output (VWW's: biases near 2**30,
    weights near 0, shifts to -31) take the float64 form with a zero multiplier, beside live
    channels: every accumulator of their ranges, ends included, gives the scalar rule's
    output."""
    loaded = _loaded(level, record_property)
    if loaded is None:
        return
    rng = np.random.default_rng(35)
    signature = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 6)
    n = CHUNK
    multiplier = rng.integers(1 << 30, 1 << 31, n)
    dead = rng.random(n) < 0.5
    shift = np.where(dead, rng.integers(-31, -13, n), rng.integers(-13, 1, n))
    center = np.where(dead, rng.choice([-1, 1], n) * rng.integers(1 << 29, 1 << 30, n),
                      rng.integers(-50_000, 50_000, n))
    half = np.where(dead, rng.integers(0, 1 << 12, n), rng.integers(0, 1 << 16, n))
    lo, hi = center - half, center + half
    for z, output in enumerate(OUTPUTS):
        ends = [requantize_tflite(r, multiplier, shift, *output) for r in (lo, hi)]
        keep = ~dead | (ends[0] == ends[1])  # the dead channels are constant over their range
        tables = requant.float64_arrays(multiplier[keep], shift[keep],
                                        (lo[keep], hi[keep]), output)
        assert requant.NEGATIVE_BELOW in tables, "the one-step form, dead channels folded"
        count = keep.sum() // LANES * LANES
        fn = signature(loaded.address(f"rq_{z}"))
        for pick in (lambda a, b: a, lambda a, b: b,
                     lambda a, b: rng.integers(a, b + 1)):  # both ends, then inside
            acc = pick(lo[keep], hi[keep])[:count].astype(np.int32)
            cut = {s: t[:count] for s, t in tables.items()}
            padded = {s: np.concatenate([t, np.zeros(CHUNK - count, t.dtype)])
                      for s, t in cut.items()}
            full = np.concatenate([acc, np.zeros(CHUNK - count, np.int32)])
            out = np.empty(CHUNK, np.int8)
            fn(full.ctypes.data, *(padded[s].ctypes.data for s in (
                requant.F64_MULTIPLIERS, requant.F64_UPS, requant.F64_DOWNS,
                requant.NEGATIVE_BELOW)), out.ctypes.data)
            want = requantize_tflite(acc, multiplier[keep][:count], shift[keep][:count],
                                     *output)
            assert np.array_equal(out[:count], want)
