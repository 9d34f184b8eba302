"""The inline maths agree with float64 numpy (to a few ulps, or exactly for rounding and fmod),
scalar and vector."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen.inprocess import LoadedObject
from compiler.codegen.llvm import emit_object
from compiler.codegen.mathfn import math_call
from compiler.codegen.targets import get_target

F32 = ir.FloatType()
I32 = ir.IntType(32)
ARITY = {"exp": 1, "log": 1, "tanh": 1, "pow": 2, "sin": 1, "cos": 1, "floor": 1, "ceil": 1,
         "rint": 1, "fmod": 2}
LANES = 8


def _kernel(module: ir.Module, name: str, lanes: int) -> None:
    """void name_k(float *x..., float *out, int n): out[i] = name(x[i]...), `lanes` at a time."""
    nargs = ARITY[name]
    ptr = ir.PointerType(F32)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (nargs + 1) + [I32]),
                     f"{name}_{lanes}")
    ty = ir.VectorType(F32, lanes) if lanes > 1 else F32
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I32)
    i.add_incoming(I32(0), entry)

    def at(arg):
        return b.bitcast(b.gep(arg, [b.mul(i, I32(lanes))]), ir.PointerType(ty))

    values = [b.load(at(fn.args[j]), align=4) for j in range(nargs)]
    b.store(math_call(b, name, *values), at(fn.args[nargs]), align=4)
    step = b.add(i, I32(1))
    i.add_incoming(step, loop)
    b.cbranch(b.icmp_signed("<", step, fn.args[-1]), loop, done)
    b.position_at_end(done)
    b.ret_void()


@pytest.fixture(scope="module")
def engine():
    """The kernels compiled for this host and linked into this process as Kiln links a network.

    Not with MCJIT: its loader places sections apart, which aborts the process once its memory
    is spread out (compiler/codegen/inprocess.py), as in a test worker that ran big networks.
    """
    target = get_target("host")
    module = ir.Module("mathfn")
    module.triple = target.triple
    kernels = []
    for name in ARITY:
        for lanes in (1, LANES):
            _kernel(module, name, lanes)
            kernels.append(f"{name}_{lanes}")
    return LoadedObject(emit_object(str(module), target), "mathfn.o", kernels)


def _run(engine, name: str, lanes: int, *arrays: np.ndarray) -> np.ndarray:
    arrays = [np.ascontiguousarray(a, np.float32) for a in arrays]
    out = np.empty_like(arrays[0])
    assert len(out) % LANES == 0
    ctype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (len(arrays) + 1), ctypes.c_int)
    fn = ctype(engine.address(f"{name}_{lanes}"))
    fn(*[a.ctypes.data for a in arrays], out.ctypes.data, len(out) // lanes)
    return out


def _close(got, want, rtol, atol=0.0):
    want = np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))  # infinities, NaN
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got.astype(np.float64) - want))
    assert np.all(same | (err <= atol + rtol * np.abs(want))), f"max error {np.nanmax(err)}"


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("lanes", [1, LANES])
def test_exp(engine, lanes):
    x = np.concatenate([RNG.uniform(-87, 88, 4000), RNG.uniform(-3, 3, 4000)]).astype(np.float32)
    _close(_run(engine, "exp", lanes, x), np.exp(x.astype(np.float64)), 1e-6)
    special = np.array([np.inf, -np.inf, np.nan, 100, -100, 0, -0.0, 1e-9], np.float32)
    _close(_run(engine, "exp", lanes, special), [np.inf, 0, np.nan, np.inf, 0, 1, 1, 1], 1e-6)


@pytest.mark.parametrize("lanes", [1, LANES])
def test_log(engine, lanes):
    x = np.concatenate([RNG.uniform(0, 1e6, 4000), RNG.uniform(1e-6, 3, 4000)]).astype(np.float32)
    _close(_run(engine, "log", lanes, x), np.log(x.astype(np.float64)), 1e-6, 1e-6)
    special = np.array([0, -1, np.inf, np.nan, 1, 2, 0.5, 1e-30], np.float32)
    _close(_run(engine, "log", lanes, special),
           [-np.inf, np.nan, np.inf, np.nan, 0, np.log(2), np.log(0.5), np.log(1e-30)], 1e-6,
           1e-7)


@pytest.mark.parametrize("lanes", [1, LANES])
def test_tanh(engine, lanes):
    x = np.concatenate([RNG.uniform(-12, 12, 4000), RNG.uniform(-0.7, 0.7, 4000)]).astype(
        np.float32)
    _close(_run(engine, "tanh", lanes, x), np.tanh(x.astype(np.float64)), 1e-6, 1e-7)


@pytest.mark.parametrize("lanes", [1, LANES])
def test_pow(engine, lanes):
    base = RNG.uniform(-4, 4, 4000).astype(np.float32)
    whole = np.round(RNG.uniform(-3, 3, 4000)).astype(np.float32)
    _close(_run(engine, "pow", lanes, base, whole), np.power(base.astype(np.float64), whole), 1e-6)
    base = RNG.uniform(1e-3, 8, 4000).astype(np.float32)
    exponent = RNG.uniform(-3, 3, 4000).astype(np.float32)
    _close(_run(engine, "pow", lanes, base, exponent),
           np.power(base.astype(np.float64), exponent), 2e-6)
    special_x = np.array([0, 0, 0, -2, -2, 2, -8, 3], np.float32)
    special_y = np.array([2, 0, -1, 0.5, 3, 0, 1 / 3, 2], np.float32)
    _close(_run(engine, "pow", lanes, special_x, special_y),
           [0, 1, np.inf, np.nan, -8, 1, np.nan, 9], 1e-6)


@pytest.mark.parametrize("lanes", [1, LANES])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_and_cos(engine, lanes, name):
    x = np.concatenate([RNG.uniform(-100, 100, 4000), RNG.uniform(-4, 4, 4000)]).astype(
        np.float32)
    _close(_run(engine, name, lanes, x), getattr(np, name)(x.astype(np.float64)), 0, 3e-7)
    special = np.array([0, -0.0, np.pi / 2, np.pi, np.inf, -np.inf, np.nan, 1e-20], np.float32)
    want = getattr(np, name)(special.astype(np.float64))
    _close(_run(engine, name, lanes, special), want, 0, 3e-7)


@pytest.mark.parametrize("lanes", [1, LANES])
@pytest.mark.parametrize("name", ["floor", "ceil", "rint"])
def test_rounding_is_exact(engine, lanes, name):
    halves = np.arange(-40, 40, dtype=np.float32) / 2  # every half, to check ties to even
    x = np.concatenate([RNG.uniform(-1e7, 1e7, 4000), RNG.uniform(-3, 3, 4000), halves,
                        [0, -0.0, 0.49999997, -0.49999997, 8388607.5, 1e10, -1e10, np.inf,
                         -np.inf, np.nan] + [0.0] * 6]).astype(np.float32)
    got = _run(engine, name, lanes, x)
    want = getattr(np, name)(x)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("lanes", [1, LANES])
def test_fmod_is_exact(engine, lanes):
    a = np.concatenate([RNG.uniform(-1000, 1000, 4000), RNG.integers(-50, 50, 4000) * 0.25])
    b = np.concatenate([RNG.uniform(-7, 7, 4000), RNG.choice([-0.5, 0.25, 3.0], 4000)])
    a, b = a.astype(np.float32), b.astype(np.float32)
    got = _run(engine, "fmod", lanes, a, b)
    assert np.array_equal(got, np.fmod(a, b))
    special_a = np.array([5, -5, 0, -0.0, np.inf, 3, np.nan, 7], np.float32)
    special_b = np.array([3, 3, 2, 2, 2, 0, 1, np.inf], np.float32)
    with np.errstate(invalid="ignore"):
        want = np.fmod(special_a, special_b)
    got = _run(engine, "fmod", lanes, special_a, special_b)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got[:4]), np.signbit(want[:4]))


def test_unknown_function_is_left_to_the_caller():
    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(F32, [F32]), "f")
                     .append_basic_block())
    assert math_call(b, "erf", b.function.args[0]) is None
