"""Scalar fixed-point functions the 8-bit kernels emit equal their Python references.

The generated cases reach only the values their small models produce; these run the emitted
functions over inputs spread across their whole domain and compare every output:
IntL2Normalize's inverse square root (GetInvSqrtQuantizedMultiplierExp, through the pair of
bits taken off above 2^29) and IntLogSoftmax's log of a sum of exponentials (gemmlowp's
log_x_for_x_greater_than_or_equal_to_1, sums from 1 to the 2^12 an int32 Q12.19 holds).
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel
from compiler.codegen.llvm import new_module, optimize, target_machine
from compiler.codegen.qlogsoftmax import log_of_sum
from compiler.codegen.qnorm import inv_sqrt
from compiler.codegen.targets import get_target
from compiler.qmath import tflite_log_softmax
from compiler.qmath.tflite_tables import inv_sqrt_multiplier


def _run(emit, inputs: np.ndarray, outputs: int) -> list[np.ndarray]:
    """emit(k, value) -> list of int32 values, compiled for the host, over every input."""
    target = get_target("host")
    module = new_module("scalars", target)
    ptr = I32.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (1 + outputs)), "scalars")
    k = Kernel(None, fn, [fn.args[0]], list(fn.args[1:]), target=target)
    with k.loop(len(inputs)) as i:
        for out, value in zip(k.outs, emit(k, k.load(k.args[0], i))):
            k.store(value, out, i)
    k.finish()
    engine = llvm.create_mcjit_compiler(optimize(module, target), target_machine(target))
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (1 + outputs))(
        engine.get_function_address("scalars"))
    data = np.ascontiguousarray(inputs, np.int32)
    results = [np.zeros_like(data) for _ in range(outputs)]
    call(data.ctypes.data, *(r.ctypes.data for r in results))
    del engine
    return results


def test_the_kernel_inverse_square_root_matches_the_reference():
    rng = np.random.default_rng(5)
    totals = np.concatenate([np.arange(0, 4096), rng.integers(0, 1 << 31, 6000),
                             (1 << np.arange(31)) - 1, 1 << np.arange(31),
                             [(1 << 29) - 1, 1 << 29, (1 << 31) - 1]])
    multipliers, shifts = _run(lambda k, v: inv_sqrt(k, v), totals, 2)
    want = np.array([inv_sqrt_multiplier(int(t)) for t in totals], np.int64)
    assert np.array_equal(multipliers, want[:, 0]) and np.array_equal(shifts, want[:, 1])


def test_the_kernel_log_of_a_sum_matches_the_reference():
    rng = np.random.default_rng(6)
    one = 1 << 19  # 1.0 in Q12.19, the smallest sum (the row maximum's own term)
    sums = np.concatenate([one + np.arange(0, 5000), rng.integers(one, 1 << 31, 20000),
                           (1 << np.arange(19, 31)), (1 << np.arange(20, 32)) - 1])
    (logs,) = _run(lambda k, v: [log_of_sum(k, v)], sums, 1)
    assert np.array_equal(logs, tflite_log_softmax.log_of_sum(sums))
