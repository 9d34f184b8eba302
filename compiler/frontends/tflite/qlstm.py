"""The fixed-point parameters of TFLite Micro's 8-bit LSTM, as its Prepare computes them.

Gate FC outputs are int16 at 2^-12 (Q3.12, the 16-bit sigmoid's input); sigmoid and tanh give
Q0.15. Each FC multiplier is double(input scale) * double(weight scale) / 2^-12; the cell
update multiplies Q0.15 by the cell (back to the cell's scale) and Q0.15 by Q0.15 (to the
cell's scale); the hidden state is Q0.15 times Q0.15 at the hidden state's scale and zero
point. The cell's scale must be a power of two (its tanh shifts by the power) and the clip
is the cell clip over that scale, truncated to int16.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator, Tensor
from compiler.qmath.requant import quantize_multiplier

GATE_INPUT_SCALE = 2.0 ** -12  # TFLite Micro's nonlinear_input_scale
GATE_OUTPUT_SCALE = 2.0 ** -15  # nonlinear_output_scale
_INPUT_WEIGHTS = (1, 2, 3, 4)  # input, forget, cell, output
_RECURRENT_WEIGHTS = (5, 6, 7, 8)
_HIDDEN, _CELL = 18, 19


def _multiplier(real: float) -> tuple[int, int]:
    q, shift = quantize_multiplier(np.array([real]))
    return int(q[0]), int(shift[0])


def _scale(t: Tensor, what: str) -> float:
    if not t.quantized:
        raise ModelError(f"its {what} {t.name} has no quantization parameters")
    if len(t.scale) != 1:
        raise ModelError(f"its {what} {t.name} is quantized per channel; TFLite Micro's "
                         "integer LSTM reads one scale per weight tensor")
    return float(np.float32(t.scale[0]))


def _fc(b: Builder, op: Operator, x_scale: float, slots) -> tuple[list[int], list[int]]:
    pairs = [_multiplier(x_scale * _scale(b.tensor(op.inputs[s]), "weights") / GATE_INPUT_SCALE)
             for s in slots]
    for s in slots:
        t = b.tensor(op.inputs[s])
        if t.dtype != "int8" or int(t.zero_point[0]) != 0:
            raise ModelError(f"its weights {t.name} must be int8 with zero point 0")
    return [p[0] for p in pairs], [p[1] for p in pairs]


def cell_power(t: Tensor) -> int:
    """The exponent of the cell state's power-of-two scale (CheckedLog2's rounding)."""
    if t.dtype != "int16":
        raise ModelError(f"its cell state {t.name} is {t.dtype}; TFLite Micro's integer LSTM "
                         "keeps it in int16")
    exponent = math.log2(_scale(t, "cell state"))
    power = round(exponent)
    if abs(exponent - power) >= 1e-3:
        raise ModelError(f"its cell state {t.name} has scale {t.scale[0]}, not a power of two")
    return power


def step_attributes(b: Builder, op: Operator, clip: float, code: int) -> dict:
    """IntLSTMStep's attributes for this operator's tensors, refusing what TFLite Micro does."""
    if code != 4:
        raise ModelError("an 8-bit LSTM's cell gate must use tanh (TFLite Micro's integer LSTM "
                         "applies only sigmoid and tanh)")
    x = b.tensor(op.inputs[0])
    hidden, cell, out = (b.tensor(op.inputs[_HIDDEN]), b.tensor(op.inputs[_CELL]),
                         b.tensor(op.outputs[0]))
    if hidden.dtype != "int8" or out.dtype != "int8":
        raise ModelError(f"its hidden state {hidden.name} and output {out.name} must be int8 as "
                         "its input is")
    h_scale = _scale(hidden, "hidden state")
    if (_scale(out, "output") != h_scale
            or int(out.zero_point[0]) != int(hidden.zero_point[0])):
        raise ModelError(f"its output {out.name} must carry the hidden state's quantization "
                         "(TFLite Micro copies the hidden state's bytes into it)")
    for s in range(12, 16):
        if b.tensor(op.inputs[s]).dtype != "int32":
            raise ModelError(f"its bias {b.tensor(op.inputs[s]).name} must be int32")
    x_scale = _scale(x, "input")
    power = cell_power(cell)
    c_scale = _scale(cell, "cell state")  # its stated float, as Prepare reads it
    input_m, input_s = _fc(b, op, x_scale, _INPUT_WEIGHTS)
    recurrent_m, recurrent_s = _fc(b, op, h_scale, _RECURRENT_WEIGHTS)
    forget = _multiplier(GATE_OUTPUT_SCALE * c_scale / c_scale)
    update = _multiplier(GATE_OUTPUT_SCALE * GATE_OUTPUT_SCALE / c_scale)
    output = _multiplier(GATE_OUTPUT_SCALE * GATE_OUTPUT_SCALE / h_scale)
    quantized_clip = int(min(max(float(np.float32(clip)) / c_scale, -32768.0), 32767.0))
    return {"x_zero_point": int(x.zero_point[0]), "h_zero_point": int(hidden.zero_point[0]),
            "h_scale": h_scale, "input_multipliers": input_m, "input_shifts": input_s,
            "recurrent_multipliers": recurrent_m, "recurrent_shifts": recurrent_s,
            "forget_multiplier": forget[0], "forget_shift": forget[1],
            "update_multiplier": update[0], "update_shift": update[1],
            "output_multiplier": output[0], "output_shift": output[1],
            "cell_scale_power": power, "cell_clip": quantized_clip if clip > 0 else 0}
