"""The tflite rule's float64 form in generated code equals TFLite's fixed-point rule exactly.

`requant.tflite_float64` rests on a proof (its docstring): TFLite's two roundings are one
floor, every float64 step is exact while |acc * M| + 2**(31+r) <= 2**53, and beyond that the
result clamps either way for right shifts up to FLOAT64_MAX_RIGHT. These tests check the code,
compiled for each x86 level, on 10**7 random (accumulator, multiplier, shift) triples against
the scalar rule of compiler/qmath/requant.py: uniform triples, triples aimed at the ties of
the final rounding, and the saturating edges (INT32_MIN and INT32_MAX accumulators, the
multipliers 0, 2**30 and 2**31 - 1, shifts 0 and -13). A level this CPU lacks is compiled
and named in the terminal summary.
"""

from __future__ import annotations

import ctypes

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
    range Z: out[i] = tflite_float64(acc[i]) with lane i's own tables, for CHUNK lanes."""
    module = ir.Module("requant_float64")
    module.triple = target.triple
    p32, p64, p8 = (ir.PointerType(t) for t in (I32, I64, ir.IntType(8)))
    for z, (zp, low, high) in enumerate(OUTPUTS):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [p32, p64, p64, p64, p32, p8]),
                         f"rq_{z}")
        k = Kernel(None, fn, [], [], target=target)
        b = k.b
        acc, m, up, down, below, out = fn.args
        with k.loop(CHUNK // LANES) as i:
            at = b.mul(i, I32(LANES))

            def vector(ptr, ty, at=at, b=b):
                cast = b.bitcast(b.gep(ptr, [at]), ir.PointerType(ir.VectorType(ty, LANES)))
                return b.load(cast, align=4)

            tables = [vector(b.bitcast(p, ir.PointerType(requant.F64)), requant.F64)
                      for p in (m, up, down)]
            value = requant.tflite_float64(k, vector(acc, I32), *tables, vector(below, I32),
                                           zp, low, high)
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


@pytest.mark.parametrize("level", ["x86-64-v3", "icelake-server"])
def test_float64_requantization_equals_the_fixed_point_rule(level, record_property):
    """10**7 triples per output range give the scalar rule's bytes, 0 differing."""
    target = get_target(level)
    obj = emit_object(str(_module(target)), target)
    missing = missing_on_this_cpu(target)
    if missing:
        record_property("kernels", f"this CPU lacks {', '.join(missing)}")
        assert obj[:4] == b"\x7fELF"
        return
    record_property("kernels", f"ran {level}")
    loaded = LoadedObject(obj, "requant.o", [f"rq_{z}" for z in range(len(OUTPUTS))])
    rng = np.random.default_rng(33)
    signature = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 6)
    chunk = CHUNK
    for z, (zp, low, high) in enumerate(OUTPUTS):
        fn = signature(loaded.address(f"rq_{z}"))
        for _ in range(0, TRIPLES // len(OUTPUTS), chunk):
            acc, multiplier, shift = _triples(rng, chunk)
            tables = requant.float64_arrays(multiplier, shift)
            assert tables, "every triple is in the float64 form's domain"
            out = np.empty(chunk, np.int8)
            fn(acc.ctypes.data, *(tables[s].ctypes.data for s in (
                requant.F64_MULTIPLIERS, requant.F64_UPS, requant.F64_DOWNS,
                requant.NEGATIVE_BELOW)), out.ctypes.data)
            want = requantize_tflite(acc, multiplier, shift, zp, low, high)
            bad = np.flatnonzero(out != want)
            assert bad.size == 0, (
                f"{bad.size} differ, first acc={acc[bad[0]]} M={multiplier[bad[0]]} "
                f"shift={shift[bad[0]]}: {out[bad[0]]} != {want[bad[0]]}")


def test_float64_tables_refuse_what_the_proof_does_not_cover():
    """A left shift (int32 wrapping in TFLite) or a right shift past the bound keeps the
    fixed-point form: `float64_arrays` gives no tables for the layer."""
    m = np.array([1 << 30, 1 << 30], np.int32)
    assert requant.float64_arrays(m, np.array([0, 1])) == {}
    assert requant.float64_arrays(m, np.array([0, -requant.FLOAT64_MAX_RIGHT - 1])) == {}
    assert set(requant.float64_arrays(m, np.array([0, -requant.FLOAT64_MAX_RIGHT]))) == {
        requant.F64_MULTIPLIERS, requant.F64_UPS, requant.F64_DOWNS, requant.NEGATIVE_BELOW}
