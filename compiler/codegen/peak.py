"""Measure this core's peak float32 throughput, so benchmarks can say what fraction they reach.

The figure is measured, not looked up: a JIT-compiled loop of independent vector fused
multiply-adds (enough accumulators to cover the FMA latency on every port) runs on one thread,
and its rate is the ceiling no kernel can beat on this core at this clock.
"""

from __future__ import annotations

import ctypes
import time

import llvmlite.binding as llvm
from llvmlite import ir

from compiler.codegen.llvm import LLVM_LOCK, optimize, target_machine
from compiler.codegen.targets import Target, get_target

_ACCUMULATORS = 16


def _module(target: Target, lanes: int) -> str:
    """`void peak(i64 n, float *out)`: n rounds of `_ACCUMULATORS` independent vector FMAs."""
    f32 = ir.FloatType()
    vec = ir.VectorType(f32, lanes)
    i64 = ir.IntType(64)
    module = ir.Module("peak")
    module.triple = target.triple
    fma = ir.Function(module, ir.FunctionType(vec, [vec, vec, vec]),
                      f"llvm.fma.v{lanes}f32")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, ir.PointerType(f32)]),
                     "peak")
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    scale = ir.Constant(vec, [0.999999] * lanes)
    shift = ir.Constant(vec, [1e-7] * lanes)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(i64(0), entry)
    accs = []
    for a in range(_ACCUMULATORS):
        phi = b.phi(vec)
        phi.add_incoming(ir.Constant(vec, [1.0 + a * 1e-3] * lanes), entry)
        accs.append(phi)
    new = [b.call(fma, [acc, scale, shift]) for acc in accs]
    for phi, value in zip(accs, new):
        phi.add_incoming(value, loop)
    nxt = b.add(i, i64(1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = new[0]
    for value in new[1:]:
        total = b.fadd(total, value)
    b.store(b.extract_element(total, ir.IntType(32)(0)), fn.args[1])
    b.ret_void()
    return str(module)


def peak_flops(target: Target | None = None, seconds: float = 0.2) -> float:
    """Float32 operations per second one core of this host sustains (an FMA counts as two)."""
    target = target or get_target("host")
    lanes = max(1, target.vector_bits // 32)
    with LLVM_LOCK:
        ref = optimize(_module(target, lanes), target)
        engine = llvm.create_mcjit_compiler(ref, target_machine(target))
        engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_float))(
        engine.get_function_address("peak"))
    out = ctypes.c_float()
    rounds = 1000
    while True:
        start = time.perf_counter()
        fn(rounds, ctypes.byref(out))
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
        rounds *= 4 if elapsed < seconds / 10 else 2
    best = elapsed
    for _ in range(2):  # the best of three: interruptions only ever slow a run down
        start = time.perf_counter()
        fn(rounds, ctypes.byref(out))
        best = min(best, time.perf_counter() - start)
    return rounds * _ACCUMULATORS * lanes * 2 / best
