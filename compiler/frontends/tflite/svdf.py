"""SVDF: a rank-decomposed filter over the last `memory` frames, its history kept as state.

TFLite Micro's SVDF keeps an activation state [batch, filters x memory] in a variable tensor:
each inference shifts every filter's memory by one, appends the frame's feature (the frame
times the feature weights), weights the memory by the time weights, and sums each unit's `rank`
filters with the bias. The state becomes a state input and output (compiler.ir.state). In float
the step is ordinary operators (a product, a slice and a concatenation along the memory, a
weighted sum); in int8 it is one IntSVDF node, TFLite Micro's integer arithmetic.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import activation_name, float_activation, is_integer
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.frontends.tflite.variables import set_tensor_state, tensor_state
from compiler.ir.graph import Value
from compiler.qmath.requant import quantize_multiplier

_STATE = 4


def _shape(b: Builder, value: Value, shape) -> Value:
    return b.add("Reshape", [value, b.constant("shape", np.array(shape))])


def _float_svdf(b: Builder, op: Operator, rank: int) -> None:
    x = b.value(op.inputs[0])
    times = b.tensor(op.inputs[2])
    batch = b.tensor(op.inputs[0]).shape[0]
    filters, memory = times.shape
    state = _shape(b, tensor_state(b, op.inputs[_STATE], "activation state"),
                   (batch, filters, memory))
    fresh = b.add("Gemm", [x, b.value(op.inputs[1])], {"transB": 1})  # [batch, filters]
    kept = b.add("Slice", [state, b.constant("starts", np.array([1])),
                           b.constant("ends", np.array([memory])),
                           b.constant("axes", np.array([2]))])
    new = b.add("Concat", [kept, _shape(b, fresh, (batch, filters, 1))], {"axis": 2})
    weighted = b.add("ReduceSum", [b.add("Mul", [new, b.value(op.inputs[2])]),
                                   b.constant("axes", np.array([2]))], {"keepdims": 0})
    fused = activation_name(op) != "NONE"
    biased = len(op.inputs) > 3 and op.inputs[3] >= 0
    last = None if fused else op.outputs[0]
    units = b.add("ReduceSum", [_shape(b, weighted, (batch, filters // rank, rank)),
                                b.constant("axes", np.array([2]))], {"keepdims": 0},
                  out=None if biased else last)
    if biased:
        units = b.add("Add", [units, b.value(op.inputs[3])], out=last)
    if fused:
        float_activation(b, op, units, op.outputs[0])
    set_tensor_state(b, op.inputs[_STATE], new)


def _multiplier(real) -> tuple[int, int]:
    q, shift = quantize_multiplier(np.array([float(real)]))
    return int(q[0]), int(shift[0])


def _integer_svdf(b: Builder, op: Operator, rank: int) -> None:
    x, features, times, out = (b.tensor(i) for i in (*op.inputs[:3], op.outputs[0]))
    state_t = b.tensor(op.inputs[_STATE])
    if len(op.inputs) < 4 or op.inputs[3] < 0:
        raise ModelError("an 8-bit SVDF needs its bias (TFLite Micro reads its scale)")
    f = np.float32
    real_1 = f(f(f(x.scale[0]) * f(features.scale[0])) / f(state_t.scale[0]))
    real_2 = f(f(f(state_t.scale[0]) * f(times.scale[0])) / f(out.scale[0]))
    (m1, s1), (m2, s2) = _multiplier(real_1), _multiplier(real_2)
    state = tensor_state(b, op.inputs[_STATE], "activation state")
    y, new = b.add_many("IntSVDF", [b.value(i) for i in op.inputs[:4]] + [state], {
        "rank": rank, "x_zero_point": int(x.zero_point[0]),
        "state_zero_point": int(state_t.zero_point[0]), "multiplier_1": m1, "shift_1": s1,
        "multiplier_2": m2, "shift_2": s2, "y_scale": float(out.scale[0]),
        "y_zero_point": int(out.zero_point[0])}, 2)
    if tuple(y.type.shape) != tuple(out.shape):
        raise ModelError(f"its output {out.name} is stated as {list(out.shape)} but SVDF gives "
                         f"{list(y.type.shape)}")
    b.values[op.outputs[0]] = y
    set_tensor_state(b, op.inputs[_STATE], new)


def svdf(b: Builder, op: Operator) -> None:
    """SVDF(input, feature weights, time weights, bias, activation state)."""
    if len(op.inputs) < 5 or op.inputs[_STATE] < 0:
        raise ModelError("it has no activation state (input 4)")
    rank = int(op.options.Rank()) if op.options is not None else 1
    times = b.tensor(op.inputs[2])
    if len(times.shape) != 2 or rank < 1 or times.shape[0] % rank:
        raise ModelError(f"its time weights {list(times.shape)} do not split into units of rank "
                         f"{rank}")
    for i in (1, 2):
        if b.tensor(op.inputs[i]).data is None:
            raise ModelError(f"its weights {b.tensor(op.inputs[i]).name} must be constants")
    if is_integer(b.tensor(op.inputs[0])):
        if int(getattr(op.options, "FusedActivationFunction", lambda: 0)()) != 0:
            raise ModelError("an 8-bit SVDF with a fused activation is not TFLite Micro's")
        _integer_svdf(b, op, rank)
    else:
        _float_svdf(b, op, rank)


SVDF = {"SVDF": svdf}
