"""IntLSTMStep (Kiln only): one time step of TFLite Micro's 8-bit LSTM (int8 x int8 -> int16).

TFLite Micro's integer UNIDIRECTIONAL_SEQUENCE_LSTM keeps its hidden state in int8 and its
cell state in int16 with a power-of-two scale. Each gate is two fully connected layers (input
frame with the gate's bias, hidden state without) requantized to int16 at 2^-12 and added with
saturation, then the 16-bit sigmoid (tanh for the cell gate) gives Q0.15. The cell becomes
f*c + i*g (each product requantized to the cell's scale, clamped to int16, added with
saturation, clipped when asked) and the hidden state o * tanh(c), requantized to int8.
Gates are packed input, forget, cell, output in W, R and the bias, as the float unrolling
packs them. The first step (four inputs) starts from TFLite Micro's reset state: the hidden
state at its zero point, the cell at 0.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath import int16_activations as act16
from compiler.qmath.requant import multiply_by_quantized_multiplier as mbqm

INT16 = (-32768, 32767)
GATES = ("input", "forget", "cell", "output")


def _clamp(x: np.ndarray, low: int, high: int) -> np.ndarray:
    return np.clip(x, low, high)


def _gate_products(node, x, h, w, r, bias) -> list[np.ndarray]:
    """Each gate's int16 pre-activation: FC(x) and FC(h), each at 2^-12, added saturating."""
    a = node.attrs
    cells = w.shape[0] // 4
    xs = x.astype(np.int64) - a["x_zero_point"]
    hs = None if h is None else h.astype(np.int64) - a["h_zero_point"]
    gates = []
    for k in range(4):
        rows = slice(k * cells, (k + 1) * cells)
        acc = xs @ w[rows].astype(np.int64).T + bias[rows].astype(np.int64)
        value = _clamp(mbqm(acc, a["input_multipliers"][k], a["input_shifts"][k]), *INT16)
        recurrent = np.zeros_like(value) if hs is None else hs @ r[rows].astype(np.int64).T
        value = value + _clamp(mbqm(recurrent, a["recurrent_multipliers"][k],
                                    a["recurrent_shifts"][k]), *INT16)
        gates.append(_clamp(value, *INT16))
    return gates


def step(node, x, w, r, bias, h=None, c=None) -> tuple[np.ndarray, np.ndarray]:
    """(new hidden state int8, new cell state int16), TFLite Micro's arithmetic."""
    a = node.attrs
    i, f, g, o = _gate_products(node, x, h, w, r, bias)
    i, f, o = (act16.sigmoid(v).astype(np.int64) for v in (i, f, o))
    g = act16.tanh(g, -12).astype(np.int64)
    cell = np.zeros_like(i) if c is None else c.astype(np.int64)
    kept = _clamp(mbqm(f * cell, a["forget_multiplier"], a["forget_shift"]), *INT16)
    added = _clamp(mbqm(i * g, a["update_multiplier"], a["update_shift"]), *INT16)
    cell = _clamp(kept + added, *INT16)
    clip = a["cell_clip"]
    if clip > 0:
        cell = _clamp(cell, -clip, clip)
    squashed = act16.tanh(cell, a["cell_scale_power"]).astype(np.int64)
    hidden = a["h_zero_point"] + mbqm(squashed * o, a["output_multiplier"], a["output_shift"])
    return _clamp(hidden, -128, 127).astype(np.int8), cell.astype(np.int16)


def _infer(node, ins, values):
    x, w, r, bias = ins[:4]
    if x.dtype != "int8" or w.dtype != "int8" or r.dtype != "int8" or bias.dtype != "int32":
        fail("IntLSTMStep takes an int8 frame, int8 weights and an int32 bias, got "
             f"{x.dtype}, {w.dtype}, {r.dtype}, {bias.dtype}")
    if x.rank != 2 or w.rank != 2 or w.shape[1] != x.shape[1] or w.shape[0] % 4:
        fail(f"weights {list(w.shape)} must be [4 cells, {x.shape[-1]}] for a frame of shape "
             f"{list(x.shape)}")
    cells = w.shape[0] // 4
    state = (x.shape[0], cells)
    if r.shape != (4 * cells, cells) or bias.shape != (4 * cells,):
        fail(f"recurrent weights must be [{4 * cells}, {cells}] and the bias [{4 * cells}], got "
             f"{list(r.shape)} and {list(bias.shape)}")
    if len(ins) == 6 and (ins[4].shape != state or ins[4].dtype != "int8"
                          or ins[5].shape != state or ins[5].dtype != "int16"):
        fail(f"the states must be int8 and int16 of shape {list(state)}, got {ins[4]} and "
             f"{ins[5]}")
    if len(ins) == 5:
        fail("IntLSTMStep takes both states or neither")
    for name in ("input_multipliers", "input_shifts", "recurrent_multipliers",
                 "recurrent_shifts"):
        if len(node.attrs[name] or ()) != 4:
            fail(f"{name} must hold one value per gate (input, forget, cell, output)")
    hidden = QuantParams((float(node.attrs["h_scale"]),), (int(node.attrs["h_zero_point"]),))
    cell = QuantParams((float(2.0 ** node.attrs["cell_scale_power"]),), (0,))
    return [TensorType(state, "int8", hidden), TensorType(state, "int16", cell)]


def _macs(node) -> int:
    x, w, r = (v.type for v in node.inputs[:3])
    return x.shape[0] * (w.numel + r.numel)


_INT = "Kiln only: "
register(OpDef(
    "IntLSTMStep", "matmul", _infer, step, inputs=(4, 6), outputs=(2, 2), macs=_macs, onnx=False,
    attrs={
        "x_zero_point": Attr("int", 0, _INT + "the frame's zero point"),
        "h_zero_point": Attr("int", 0, _INT + "the hidden state's zero point"),
        "h_scale": Attr("float", 1.0, _INT + "the hidden state's scale"),
        "input_multipliers": Attr("ints", None, _INT + "Q31 multipliers of the frame's FC, per "
                                                       "gate"),
        "input_shifts": Attr("ints", None, _INT + "their shifts"),
        "recurrent_multipliers": Attr("ints", None, _INT + "Q31 multipliers of the hidden "
                                                           "state's FC, per gate"),
        "recurrent_shifts": Attr("ints", None, _INT + "their shifts"),
        "forget_multiplier": Attr("int", 0, _INT + "f * c to the cell's scale"),
        "forget_shift": Attr("int", 0, _INT + "its shift"),
        "update_multiplier": Attr("int", 0, _INT + "i * g to the cell's scale"),
        "update_shift": Attr("int", 0, _INT + "its shift"),
        "output_multiplier": Attr("int", 0, _INT + "o * tanh(c) to the hidden state's scale"),
        "output_shift": Attr("int", 0, _INT + "its shift"),
        "cell_scale_power": Attr("int", -15, _INT + "the cell state's scale, 2^power"),
        "cell_clip": Attr("int", 0, _INT + "the quantized cell clip (0: none)")},
    doc="Kiln only: one step of TFLite Micro's 8-bit LSTM (int16 gates and cell state)"))
