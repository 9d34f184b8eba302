"""BATCH_MATMUL: float as MatMul; int8 with constant 2-D weights as a fully connected layer.

Adjoints become transposes. TFLite Micro's int8 BATCH_MATMUL sums (lhs - zp) * (rhs - zp) and
requantizes by lhs scale x rhs scale / output scale with the product formed in float, as
FULLY_CONNECTED does, so a constant right-hand side of zero point 0 makes it exactly a QGemm
under TFLite's rule. Two run-time 8-bit operands have no kernel yet and are refused by name.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import is_integer, output_range
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.ir.graph import Value


def _adjoint(b: Builder, value: Value, rank: int) -> Value:
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return b.add("Transpose", [value], {"perm": perm})


def batch_matmul(b: Builder, op: Operator) -> None:
    """BATCH_MATMUL(lhs, rhs) with adj_x / adj_y, broadcasting the batch axes."""
    lhs, rhs, out = (b.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    o = op.options
    adj_x = bool(o.AdjX()) if o is not None else False
    adj_y = bool(o.AdjY()) if o is not None else False
    if not is_integer(lhs):
        x, y = b.value(op.inputs[0]), b.value(op.inputs[1])
        if adj_x:
            x = _adjoint(b, x, len(lhs.shape))
        if adj_y:
            y = _adjoint(b, y, len(rhs.shape))
        b.add("MatMul", [x, y], out=op.outputs[0])
        return
    if rhs.data is None or len(rhs.shape) != 2:
        raise ModelError("an 8-bit BATCH_MATMUL needs a constant 2-D right-hand side (two run-"
                         "time 8-bit operands have no kernel yet)")
    if adj_x or np.any(rhs.zero_point != 0) or rhs.scale.size != 1:
        raise ModelError("an 8-bit BATCH_MATMUL needs an unadjointed left-hand side and a "
                         "right-hand side of one scale and zero point 0")
    weights = np.asarray(rhs.data)  # (K, N), or (N, K) when adjointed
    if not adj_y:
        weights = weights.T
    depth = weights.shape[1]
    rows = int(np.prod(lhs.shape)) // depth
    x = b.add("Reshape", [b.value(op.inputs[0]), b.constant("shape", np.array([rows, depth]))])
    inputs = [x, *b.scale_and_zero_point(lhs), b.constant(rhs.name, weights.copy()),
              b.constant(f"{rhs.name}_scale", rhs.scale.astype(np.float32)),
              b.constant(f"{rhs.name}_zero_point", np.zeros(1, np.int8)), None,
              *b.scale_and_zero_point(out)]
    y = b.add("QGemm", inputs, {"transB": 1, "requant": "tflite",
                                "output_range": output_range(op, out)})
    b.add("Reshape", [y, b.constant("shape", np.array(out.shape))], out=op.outputs[0])


BATCH_MATMUL = {"BATCH_MATMUL": batch_matmul}
