"""Fused activations of TFLite builtins: a float node after the layer, or an 8-bit output range.

TFLite Micro clamps an 8-bit output to CalculateActivationRangeQuantized's bounds, zp +
round(bound / scale) computed in float and rounded half away from zero.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator, Tensor
from compiler.ir.graph import Value
from compiler.qmath.requant import RANGES
from compiler.qmath.tflite_tables import round_away

_ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
_REAL_BOUNDS = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def activation_name(op: Operator) -> str:
    """The fused activation of `op` (NONE when its options have none)."""
    fused = getattr(op.options, "FusedActivationFunction", None)
    code = int(fused()) if fused is not None else 0
    return _ACTIVATIONS.get(code, f"activation {code}")


def float_activation(b: Builder, op: Operator, value: Value, out: int | None) -> Value:
    """The fused activation of a float builtin as its own node (fuse_activations folds it)."""
    name = activation_name(op)
    if name == "NONE":
        return value
    if name == "RELU":
        return b.add("Relu", [value], out=out)
    if name == "TANH":
        return b.add("Tanh", [value], out=out)
    if name in _REAL_BOUNDS:
        low, high = _REAL_BOUNDS[name]
        return b.add("Clip", [value, b.constant("low", np.array(low, np.float32)),
                              b.constant("high", np.array(high, np.float32))], out=out)
    raise ModelError(f"the fused activation {name} is not supported")


def output_range(op: Operator, out: Tensor) -> list[int] | None:
    """TFLite Micro's CalculateActivationRangeQuantized: zp + round(x / scale) in float."""
    name = activation_name(op)
    if name == "NONE":
        return None
    if name not in _REAL_BOUNDS:
        raise ModelError(f"the fused activation {name} has no 8-bit form")
    qmin, qmax = RANGES[out.dtype]
    scale, zp = np.float32(out.scale[0]), int(out.zero_point[0])

    def q(x: float) -> int:
        return zp + round_away(np.float32(x) / scale)

    low, high = _REAL_BOUNDS[name]
    bounds = [max(qmin, q(low)), qmax if high is None else min(qmax, q(high))]
    return None if bounds == [qmin, qmax] else bounds  # the type clamps there anyway


def is_integer(t: Tensor) -> bool:
    """Whether `t` is an 8-bit quantized tensor (it takes the integer operators)."""
    return t.dtype in ("int8", "uint8") and t.quantized


