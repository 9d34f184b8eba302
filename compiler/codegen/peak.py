"""Measure this core's peak throughput, so benchmarks can say what fraction they reach.

The figure is measured, not looked up: a JIT-compiled loop of independent vector
multiply-accumulates (enough accumulators to cover their latency on every port) runs on one
thread, and its rate is the ceiling no kernel can beat on this core at this clock. Float32
counts fused multiply-adds; int8 counts the dot-product instruction the target's int8 kernels
are built on (`Target.int8_dot`: VPDPBUSD, VPMADDWD or SDOT), so an int8 model is rated
against int8 arithmetic, never against the float peak it may well exceed.
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


def _int8_module(target: Target) -> tuple[str, int]:
    """`void peak(i64 n, float *out)` of independent int8 dot instructions; MACs per round."""
    from compiler.codegen.targets import DotProduct

    i32, i64 = ir.IntType(32), ir.IntType(64)
    lanes = max(4, target.vector_bits // 32)
    vec = ir.VectorType(i32, lanes)
    module = ir.Module("peak")
    module.triple = target.triple
    dot = target.int8_dot
    if dot is DotProduct.VNNI and not target.int8_dot_emulated:
        kind, per_lane = "vnni", 4
        fma = ir.Function(module, ir.FunctionType(vec, [vec, vec, vec]),
                          f"llvm.x86.avx512.vpdpbusd.{32 * lanes}")
    elif dot is DotProduct.SDOT:
        quads = ir.VectorType(ir.IntType(8), 4 * lanes)
        kind, per_lane = "sdot", 4
        fma = ir.Function(module, ir.FunctionType(vec, [vec, quads, quads]),
                          f"llvm.aarch64.neon.sdot.v{lanes}i32.v{4 * lanes}i8")
    else:  # VPMADDWD (and any other core): two int16 products summed per 32-bit lane
        pairs = ir.VectorType(ir.IntType(16), 2 * lanes)
        name = "llvm.x86.avx512.pmaddw.d.512" if lanes == 16 else "llvm.x86.avx2.pmadd.wd"
        kind, per_lane = "pmaddwd", 2
        fma = ir.Function(module, ir.FunctionType(vec, [pairs, pairs]), name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, ir.PointerType(ir.FloatType())]),
                     "peak")
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    x = ir.Constant(vec, [0x01020304] * lanes)
    w = ir.Constant(vec, [0x01FF01FF] * lanes)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(i64(0), entry)
    accs = []
    for a in range(_ACCUMULATORS):
        phi = b.phi(vec)
        phi.add_incoming(ir.Constant(vec, [a] * lanes), entry)
        accs.append(phi)
    if kind == "pmaddwd":
        # The product depends on the accumulator, so no round can be hoisted out of the loop.
        new = [b.add(acc, b.call(fma, [b.bitcast(b.xor(acc, x), pairs), b.bitcast(w, pairs)]))
               for acc in accs]
    elif kind == "sdot":
        quads = fma.function_type.args[1]
        new = [b.call(fma, [acc, b.bitcast(x, quads), b.bitcast(w, quads)]) for acc in accs]
    else:
        new = [b.call(fma, [acc, x, w]) for acc in accs]
    for phi, value in zip(accs, new):
        phi.add_incoming(value, loop)
    nxt = b.add(i, i64(1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = new[0]
    for value in new[1:]:
        total = b.add(total, value)
    b.store(b.sitofp(b.extract_element(total, i32(0)), ir.FloatType()), fn.args[1])
    b.ret_void()
    return str(module), _ACCUMULATORS * lanes * per_lane


def peak_flops(target: Target | None = None, seconds: float = 0.2) -> float:
    """Float32 operations per second one core of this host sustains (an FMA counts as two)."""
    target = target or get_target("host")
    lanes = max(1, target.vector_bits // 32)
    return _rate(_module(target, lanes), target, _ACCUMULATORS * lanes, seconds)


def peak_int8_ops(target: Target | None = None, seconds: float = 0.2) -> float:
    """int8 operations per second of the target's int8 dot instruction (a MAC counts as two).

    The instruction the int8 kernels use on this target (`Target.int8_dot`); the figure an
    int8 model's throughput is a fraction of.
    """
    from compiler.codegen.targets import DotProduct

    target = target or get_target("host")
    if target.int8_dot not in (DotProduct.VNNI, DotProduct.PMADDWD, DotProduct.SDOT):
        return 0.0  # no vector int8 dot on this core: nothing to rate against
    text, macs = _int8_module(target)
    return _rate(text, target, macs, seconds)


def _rate(text: str, target: Target, macs_per_round: int, seconds: float) -> float:
    """Operations per second of `peak` in module `text` (best of three timed runs)."""
    with LLVM_LOCK:
        ref = optimize(text, target)
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
    return rounds * macs_per_round * 2 / best
