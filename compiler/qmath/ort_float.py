"""onnxruntime's float32 Sigmoid, Tanh, HardSwish and logf, bit for bit: what its int8 tables hold.

An 8-bit Sigmoid is a 256-entry table built from the float function, so a table entry moves
whenever the float result crosses a rounding boundary: only the exact float32 arithmetic gives
onnxruntime's tables. Its Sigmoid and Tanh are MLAS's rational approximations (the polynomials of
Eigen), evaluated with fused multiply-adds in the order of MLAS's FMA3 kernels (the x86-64 path
on every CPU since 2013); HardSwish is x * clamp(x * (1/6) + 1/2, 0, 1) in float32 without
fusion. The tests compare all three with onnxruntime on millions of inputs. Its QLinearSoftmax
table starts from the C library's logf, which is not correctly rounded everywhere.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

_F32 = np.float32


def fma(a, b, c) -> np.ndarray:
    """float32 a * b + c rounded once, as the FMA instruction does.

    a * b is exact in float64; the sum is rounded to float64 and then to float32. The second
    rounding is wrong only when the first lands exactly halfway between two float32 values
    while the exact sum is not there; the exact residual of the sum (TwoSum) says which way to
    step in that case.
    """
    a, b, c = (np.asarray(v, _F32).astype(np.float64) for v in (a, b, c))
    product = a * b
    total = product + c
    part = total - product
    residual = (product - (total - part)) + (c - part)
    rounded = total.astype(_F32)
    near = rounded.astype(np.float64)
    other = np.nextafter(rounded, np.where(total > near, np.inf, -np.inf).astype(_F32))
    halfway = (total != near) & (total == (near + other.astype(np.float64)) / 2)
    fix = halfway & (residual != 0)
    total = np.where(fix, np.nextafter(total, np.where(residual > 0, np.inf, -np.inf)), total)
    return total.astype(_F32)


def _horner(x2: np.ndarray, coefficients) -> np.ndarray:
    """c0 * x2**n + ... by fused multiply-adds, highest power first, as MLAS evaluates it."""
    acc = fma(x2, _F32(coefficients[0]), _F32(coefficients[1]))
    for c in coefficients[2:]:
        acc = fma(x2, acc, _F32(c))
    return acc


_LOGISTIC_P = (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
               8.51377133304701e-03, 2.48287947061529e-01)
_LOGISTIC_Q = (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
               1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01)
_TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
           5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
           4.89352455891786e-03)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
           4.89352518554385e-03)


def _odd_rational(x, bound: float, p, q) -> np.ndarray:
    """X * P(x^2) / Q(x^2) with x clamped to [-bound, bound]."""
    x = np.clip(np.asarray(x, _F32), _F32(-bound), _F32(bound))
    x2 = x * x
    return (x * _horner(x2, p)) / _horner(x2, q)


def sigmoid(x) -> np.ndarray:
    """Onnxruntime's Sigmoid (MlasComputeLogistic)."""
    return np.maximum(_odd_rational(x, 18.0, _LOGISTIC_P, _LOGISTIC_Q) + _F32(0.5), _F32(0))


def tanh(x) -> np.ndarray:
    """Onnxruntime's Tanh (MlasComputeTanh)."""
    return _odd_rational(x, 9.0, _TANH_P, _TANH_Q)


def hard_swish(x) -> np.ndarray:
    """Onnxruntime's HardSwish: x * clamp(x * float32(1/6) + 0.5, 0, 1), no fused multiply-add."""
    x = np.asarray(x, _F32)
    return x * np.clip(x * _F32(1 / 6) + _F32(0.5), _F32(0), _F32(1))


FUNCTIONS = {"Sigmoid": sigmoid, "Tanh": tanh, "HardSwish": hard_swish}


@functools.cache
def _c_logf():
    """The C library's logf, or None where there is no libm.so.6 to load."""
    try:
        fn = ctypes.CDLL("libm.so.6").logf
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


def logf(x) -> np.float32:
    """The C library's float32 logarithm of x, which onnxruntime calls.

    glibc's logf misses the correct rounding on a few arguments that lie almost halfway between
    two float32 values (FLT_MAX / 60594, say); calling it is the only way to agree on those.
    Without it, the float64 logarithm rounded to float32 (glibc's answer everywhere else).
    """
    fn = _c_logf()
    x = float(_F32(x))
    return _F32(fn(x)) if fn is not None else _F32(math.log(x))
