"""UNIDIRECTIONAL_SEQUENCE_LSTM, float and int8, unrolled over its static number of steps.

TFLite Micro runs the Keras LSTM (input, forget, cell and output gates; no peepholes,
projection or layer normalization): per step each gate is sigmoid(W x + R h + b) (the cell
gate takes the fused activation, usually tanh), c = f c + i g (clipped to cell_clip when set)
and h = o tanh(c). Unrolled in float, each step multiplies its own input frame and the
previous hidden state by the four gates' weights at once, then runs the gates: only one
step's products are alive at a time, so the arena holds a few state vectors. In int8 each step
is one IntLSTMStep node, TFLite Micro's integer arithmetic (int16 gates and cell state; its
parameters in compiler.frontends.tflite.qlstm). Every node is one the code generator compiles,
and the memory planner sees each step's hidden and cell state as ordinary tensors. The hidden
and cell state are TFLite Micro's variable tensors: the first step reads them as state inputs
(from its reset: zeros, the zero point in int8) and the last step's become the state the next
inference starts from (compiler.ir.state), as TFLite Micro carries them over.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import is_integer
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.frontends.tflite.qlstm import step_attributes
from compiler.frontends.tflite.variables import set_tensor_state, tensor_state
from compiler.ir.graph import Value

_INPUT_WEIGHTS = (1, 2, 3, 4)  # input to input, forget, cell, output
_RECURRENT_WEIGHTS = (5, 6, 7, 8)
_BIASES = (12, 13, 14, 15)
_PEEPHOLES = (9, 10, 11)
_PROJECTION = (16, 17)
_LAYER_NORM = (20, 21, 22, 23)
_HIDDEN, _CELL = 18, 19  # the variable tensors it keeps between inferences
_CELL_ACTIVATIONS = {0: None, 1: "Relu", 3: "Relu6", 4: "Tanh"}


def _present(op: Operator, index: int) -> bool:
    return index < len(op.inputs) and op.inputs[index] >= 0


def _weights(b: Builder, op: Operator, slots, dtype) -> np.ndarray:
    arrays = []
    for slot in slots:
        t = b.tensor(op.inputs[slot])
        if t.data is None:
            raise ModelError(f"its weights {t.name} must be constants")
        arrays.append(np.asarray(t.data).astype(dtype, copy=False))
    return np.concatenate(arrays, axis=0)


def _check(b: Builder, op: Operator) -> None:
    x = b.tensor(op.inputs[0])
    if x.dtype not in ("float32", "int8"):
        raise ModelError(f"the {x.dtype} UNIDIRECTIONAL_SEQUENCE_LSTM is not supported (float32 "
                         "and int8, as TFLite Micro runs it with int8 weights)")
    if len(op.inputs) < 20:
        raise ModelError(f"it has {len(op.inputs)} inputs; TFLite's LSTM has 24")
    for slots, what in ((_PEEPHOLES, "peephole"), (_PROJECTION, "projection"),
                        (_LAYER_NORM, "layer-normalization")):
        if any(_present(op, s) for s in slots):
            raise ModelError(f"an LSTM with {what} weights is not supported (TFLite Micro runs "
                             "the Keras LSTM without them)")
    if not all(_present(op, s) for s in (*_INPUT_WEIGHTS, *_RECURRENT_WEIGHTS, *_BIASES)):
        raise ModelError("an LSTM without input-gate weights or biases (CIFG) is not supported")


def _slice(b: Builder, value: Value, start: int, stop: int, axis: int) -> Value:
    return b.add("Slice", [value, b.constant("starts", np.array([start])),
                           b.constant("ends", np.array([stop])),
                           b.constant("axes", np.array([axis]))])


def _activate(b: Builder, name: str | None, value: Value) -> Value:
    if name is None:
        return value
    if name == "Relu6":
        return b.add("Clip", [value, b.constant("low", np.array(0.0, np.float32)),
                              b.constant("high", np.array(6.0, np.float32))])
    return b.add(name, [value])


def unidirectional_sequence_lstm(b: Builder, op: Operator) -> None:
    """UNIDIRECTIONAL_SEQUENCE_LSTM: every step's hidden state, in the input's time order.

    Inputs are the sequence, four input and four recurrent weights, four biases and the state
    tensors (peephole, projection and normalization slots empty).
    """
    _check(b, op)
    o = op.options
    time_major = bool(o.TimeMajor()) if o is not None else False
    clip = float(o.CellClip()) if o is not None else 0.0
    code = int(o.FusedActivationFunction()) if o is not None else 4
    if code not in _CELL_ACTIVATIONS:
        raise ModelError(f"its cell activation {code} is not one TFLite's LSTM applies")
    x = b.tensor(op.inputs[0])
    if len(x.shape) != 3:
        raise ModelError(f"its input {list(x.shape)} is not (batch, time, features)")
    steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    integer = is_integer(x)
    dtype = np.int8 if integer else np.float32
    w, r = _weights(b, op, _INPUT_WEIGHTS, dtype), _weights(b, op, _RECURRENT_WEIGHTS, dtype)
    bias = _weights(b, op, _BIASES, np.int32 if integer else np.float32)
    cells = w.shape[0] // 4
    if r.shape[0] != 4 * cells or bias.shape != (4 * cells,) or w.shape[1] != x.shape[2]:
        raise ModelError("its gate weights and biases disagree on the number of cells")
    time_axis = 0 if time_major else 1
    sequence = b.value(op.inputs[0])
    weights, biases = b.constant("lstm_w", w), b.constant("lstm_b", bias)
    recurrent = b.constant("lstm_r", r)
    step = _integer_step(b, op, clip, code, weights, recurrent, biases) if integer else \
        _float_step(b, code, clip, weights, recurrent, biases, cells)
    state = tuple(_state(b, op.inputs[slot], what, (batch, cells))
                  for slot, what in ((_HIDDEN, "hidden state"), (_CELL, "cell state")))
    outputs = []
    for t in range(steps):
        frame = b.add("Reshape", [_slice(b, sequence, t, t + 1, time_axis),
                                  b.constant("shape", np.array([batch, x.shape[2]]))])
        state = step(frame, state)
        shape = [1, batch, cells] if time_major else [batch, 1, cells]
        outputs.append(b.add("Reshape", [state[0], b.constant("shape", np.array(shape))]))
    b.add("Concat", outputs, {"axis": time_axis}, out=op.outputs[0])
    set_tensor_state(b, op.inputs[_HIDDEN], state[0])
    set_tensor_state(b, op.inputs[_CELL], state[1])


def _state(b: Builder, index: int, what: str, shape: tuple[int, int]) -> Value:
    """A state tensor's value at the start, as (batch, cells) (TFLite lets it be flat)."""
    value = tensor_state(b, index, what)
    if tuple(value.type.shape) != shape:
        if value.type.numel != shape[0] * shape[1]:
            raise ModelError(f"its {what} {b.tensor(index).name} holds {value.type.numel} "
                             f"values, not batch x cells = {shape[0] * shape[1]}")
        value = b.add("Reshape", [value, b.constant("shape", np.array(shape))])
    return value


def _float_step(b: Builder, code: int, clip: float, weights: Value, recurrent: Value,
                biases: Value, cells: int):
    """(frame, (hidden, cell) or ()) -> (hidden, cell): one step in float operators."""
    activation = _CELL_ACTIVATIONS[code]

    def step(frame: Value, state: tuple) -> tuple:
        z = b.add("Gemm", [frame, weights, biases], {"transB": 1})
        if state:
            z = b.add("Add", [z, b.add("Gemm", [state[0], recurrent], {"transB": 1})])
        i, f, g, out = (_slice(b, z, k * cells, (k + 1) * cells, 1) for k in range(4))
        i, f, out = (b.add("Sigmoid", [v]) for v in (i, f, out))
        update = b.add("Mul", [i, _activate(b, activation, g)])
        cell = update if not state else b.add("Add", [b.add("Mul", [f, state[1]]), update])
        if clip > 0:
            cell = b.add("Clip", [cell, b.constant("low", np.array(-clip, np.float32)),
                                  b.constant("high", np.array(clip, np.float32))])
        return b.add("Mul", [out, b.add("Tanh", [cell])]), cell
    return step


def _integer_step(b: Builder, op: Operator, clip: float, code: int, weights: Value,
                  recurrent: Value, biases: Value):
    """(frame, (hidden, cell) or ()) -> (hidden, cell): one IntLSTMStep node."""
    attrs = step_attributes(b, op, clip, code)

    def step(frame: Value, state: tuple) -> tuple:
        return tuple(b.add_many("IntLSTMStep", [frame, weights, recurrent, biases, *state],
                                attrs, 2))
    return step


LSTM = {"UNIDIRECTIONAL_SEQUENCE_LSTM": unidirectional_sequence_lstm}
