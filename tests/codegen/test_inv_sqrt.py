"""The emitted 1 / sqrt of IntL2Normalize equals GetInvSqrtQuantizedMultiplierExp's arithmetic.

The L2_NORMALIZATION cases only reach sums of a few thousand; this runs the kernel's inverse
square root over sums spread across the whole int32 range (through the normalizing pair of
bits above 2^29) and compares both outputs with the Python reference, value for value.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel
from compiler.codegen.llvm import new_module, optimize, target_machine
from compiler.codegen.qnorm import inv_sqrt
from compiler.codegen.targets import get_target
from compiler.qmath.tflite_tables import inv_sqrt_multiplier


def _compiled(count: int):
    target = get_target("host")
    module = new_module("inv_sqrt", target)
    ptr = I32.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr]), "inv_sqrt")
    k = Kernel(None, fn, [fn.args[0]], [fn.args[1], fn.args[2]], target=target)
    with k.loop(count) as i:
        multiplier, shift = inv_sqrt(k, k.load(k.args[0], i))
        k.store(multiplier, k.outs[0], i)
        k.store(shift, k.outs[1], i)
    k.finish()
    engine = llvm.create_mcjit_compiler(optimize(module, target), target_machine(target))
    engine.finalize_object()
    address = engine.get_function_address("inv_sqrt")
    return engine, ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3)(address)


def test_the_kernel_inverse_square_root_matches_the_reference():
    rng = np.random.default_rng(5)
    totals = np.concatenate([np.arange(0, 4096), rng.integers(0, 1 << 31, 6000),
                             (1 << np.arange(31)) - 1, 1 << np.arange(31),
                             [(1 << 29) - 1, 1 << 29, (1 << 31) - 1]]).astype(np.int32)
    engine, fn = _compiled(len(totals))
    multipliers, shifts = np.zeros_like(totals), np.zeros_like(totals)
    fn(totals.ctypes.data, multipliers.ctypes.data, shifts.ctypes.data)
    want = np.array([inv_sqrt_multiplier(int(t)) for t in totals], np.int64)
    assert np.array_equal(multipliers, want[:, 0]) and np.array_equal(shifts, want[:, 1])
    del engine
