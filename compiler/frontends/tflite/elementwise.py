"""TFLite's element-wise builtins: arithmetic, activations, QUANTIZE and DEQUANTIZE.

8-bit ADD, SUB and MUL follow TFLite Micro's fixed point (QLinearAdd, QLinearSub, QLinearMul
with the tflite rule); MINIMUM and MAXIMUM compare the stored integers as TFLite Micro does;
8-bit RELU, RELU6, LEAKY_RELU, LOGISTIC, TANH, HARD_SWISH and 8-bit-to-8-bit QUANTIZE are
256-entry tables computed with TFLite Micro's arithmetic (compiler/qmath/tflite_tables.py).
QUANTIZE from float rounds half away from zero as TFLite Micro's does.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import (
    activation_name,
    float_activation,
    is_integer,
    output_range,
)
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator, Tensor
from compiler.qmath import tflite_tables

_INTEGER_BINARY = {"ADD": "QLinearAdd", "SUB": "QLinearSub", "MUL": "QLinearMul"}
_FLOAT_BINARY = {"ADD": "Add", "SUB": "Sub", "MUL": "Mul", "MINIMUM": "Min", "MAXIMUM": "Max"}


def binary(b: Builder, op: Operator) -> None:
    """ADD, SUB, MUL (with a fused activation), MINIMUM and MAXIMUM, broadcasting."""
    a, c, out = (b.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    if is_integer(a) and op.builtin in _INTEGER_BINARY:
        inputs = [b.value(op.inputs[0]), *b.scale_and_zero_point(a), b.value(op.inputs[1]),
                  *b.scale_and_zero_point(c), *b.scale_and_zero_point(out)]
        b.add(_INTEGER_BINARY[op.builtin], inputs,
              {"requant": "tflite", "output_range": output_range(op, out)}, out=op.outputs[0])
        return
    fused = op.builtin in _INTEGER_BINARY and activation_name(op) != "NONE"
    y = b.add(_FLOAT_BINARY[op.builtin], [b.value(op.inputs[0]), b.value(op.inputs[1])],
              out=None if fused else op.outputs[0])
    if fused:
        float_activation(b, op, y, op.outputs[0])


def _table(b: Builder, op: Operator, table: np.ndarray, function: str) -> None:
    out = b.tensor(op.outputs[0])
    scale, zp = b.scale_and_zero_point(out)
    b.add("IntLookupTable", [b.value(op.inputs[0]), b.constant(f"{function}_table", table),
                             scale, zp], {"function": function}, out=op.outputs[0])


def _params(t: Tensor) -> tuple[float, int]:
    return float(t.scale[0]), int(t.zero_point[0])


_FLOAT_ACTIVATIONS = {"RELU": ("Relu", None), "RELU6": ("Clip", (0.0, 6.0)),
                      "RELU_N1_TO_1": ("Clip", (-1.0, 1.0)), "LOGISTIC": ("Sigmoid", None),
                      "TANH": ("Tanh", None), "HARD_SWISH": ("HardSwish", None),
                      "LEAKY_RELU": ("LeakyRelu", None)}


def activation(b: Builder, op: Operator) -> None:
    """RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU (tables for 8 bits), LOGISTIC, TANH, HARD_SWISH."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    alpha = float(op.options.Alpha()) if op.builtin == "LEAKY_RELU" and op.options else 0.2
    if is_integer(x):
        (xs, xz), (ys, yz) = _params(x), _params(out)
        if op.builtin == "RELU":
            table = tflite_tables.relu(x.dtype, xs, xz, ys, yz)
        elif op.builtin == "RELU6":
            table = tflite_tables.clamp(x.dtype, xs, xz, 0.0, 6.0)
        elif op.builtin == "LEAKY_RELU":
            table = tflite_tables.leaky_relu(x.dtype, alpha, xs, xz, ys, yz)
        elif op.builtin in ("LOGISTIC", "TANH") and x.dtype == "int8":
            fixed = (1 / 256, -128) if op.builtin == "LOGISTIC" else (1 / 128, 0)
            if np.float32(ys) != np.float32(fixed[0]) or yz != fixed[1]:
                raise ModelError(f"TFLite Micro's 8-bit {op.builtin} writes scale "
                                 f"1/{round(1 / fixed[0])} and zero point {fixed[1]}; the "
                                 f"output has {ys} and {yz}")
            table = getattr(tflite_tables, op.builtin.lower())(x.dtype, xs, xz)
        elif op.builtin == "HARD_SWISH":
            table = tflite_tables.hard_swish(x.dtype, xs, xz, ys, yz)
        else:  # TFLite Micro has no 8-bit RELU_N1_TO_1 (nor uint8 LOGISTIC or TANH)
            raise ModelError(f"the {x.dtype} {op.builtin} is not supported")
        _table(b, op, table, op.builtin)
        return
    name, bounds = _FLOAT_ACTIVATIONS[op.builtin]
    inputs = [b.value(op.inputs[0])]
    if bounds is not None:
        inputs += [b.constant("low", np.array(bounds[0], np.float32)),
                   b.constant("high", np.array(bounds[1], np.float32))]
    b.add(name, inputs, {"alpha": alpha} if name == "LeakyRelu" else None, out=op.outputs[0])


def quantize(b: Builder, op: Operator) -> None:
    """QUANTIZE: float to 8 bits (half away from zero), or 8 bits to 8 bits by a table."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    if out.dtype not in ("int8", "uint8") or not out.quantized:
        raise ModelError(f"QUANTIZE to {out.dtype} is not supported; Kiln quantizes to 8 bits")
    if is_integer(x):
        if x.dtype != out.dtype:
            raise ModelError(f"QUANTIZE from {x.dtype} to {out.dtype} is not supported")
        _table(b, op, tflite_tables.requantize(x.dtype, *_params(x), *_params(out)), "QUANTIZE")
        return
    if x.dtype != "float32":
        raise ModelError(f"QUANTIZE from {x.dtype} is not supported")
    b.add("QuantizeLinear", [b.value(op.inputs[0]), *b.scale_and_zero_point(out)],
          {"requant": "tflite"}, out=op.outputs[0])


def dequantize(b: Builder, op: Operator) -> None:
    """DEQUANTIZE: float(scale * (q - zero_point)), the same float32 product as ONNX's."""
    x = b.tensor(op.inputs[0])
    if x.dtype == "float16":  # float16 weights of a float model
        b.add("Cast", [b.value(op.inputs[0])], {"to": 1}, out=op.outputs[0])
        return
    if not is_integer(x):
        raise ModelError(f"DEQUANTIZE of {x.dtype} is not supported (8-bit inputs only)")
    b.add("DequantizeLinear", [b.value(op.inputs[0]), *b.scale_and_zero_point(x)],
          out=op.outputs[0])


ELEMENTWISE = {
    **{name: binary for name in ("ADD", "SUB", "MUL", "MINIMUM", "MAXIMUM")},
    **{name: activation for name in _FLOAT_ACTIVATIONS},
    "QUANTIZE": quantize, "DEQUANTIZE": dequantize,
}
