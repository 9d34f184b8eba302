"""IntLSTMStep: one step of TFLite Micro's 8-bit LSTM, one cell at a time.

A cell's four gates read only the frame, the previous hidden state and its own cell value, so
the kernel computes them per cell and writes that cell's new state at once: no gate buffers.
The zero points are folded into per-gate bias tables at compile time (sum((x - zp) w) =
sum(x w) - zp sum(w), exact in wrapping int32), the 16-bit sigmoid and tanh interpolate
TFLite's 256-entry table (compiler.qmath.int16_activations, whose arithmetic this mirrors).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.codetables import table
from compiler.codegen.kernel import I32, Kernel
from compiler.qmath.int16_activations import SIGMOID_TABLE, tanh_shift

I16 = ir.IntType(16)
INT16 = (-32768, 32767)
_TABLE_BIAS = 32768


def _abs(k: Kernel, v: ir.Value) -> ir.Value:
    b = k.b
    return b.select(b.icmp_signed("<", v, I32(0)), b.sub(I32(0), v), v)


def _interpolate(k: Kernel, lookup: ir.Value, magnitude: ir.Value, bits: int, saturated: int
                 ) -> ir.Value:
    """The table at magnitude / 2**bits, linear between entries; `saturated` beyond 255."""
    b = k.b
    whole = b.lshr(magnitude, I32(bits))
    inside = b.icmp_unsigned("<", whole, I32(255))
    index = b.select(inside, whole, I32(254))
    low = b.add(k.load(lookup, index), I32(_TABLE_BIAS))
    high = b.add(k.load(lookup, b.add(index, I32(1))), I32(_TABLE_BIAS))
    part = b.and_(magnitude, I32((1 << bits) - 1))
    value = b.add(b.shl(low, I32(bits)), b.mul(part, b.sub(high, low)))
    return b.select(inside, value, I32(saturated))


def _sigmoid(k: Kernel, lookup: ir.Value, x: ir.Value) -> ir.Value:
    """reference_integer_ops::Logistic of a Q3.12 int32: Q0.15 in an int32."""
    b = k.b
    value = b.mul(x, I32(3))
    result = _interpolate(k, lookup, _abs(k, value), 9, 0x7FFF << 10)
    positive = b.add(result, I32(1 << 9))
    negative = b.sub(I32((1 << 25) + (1 << 9) - 1), result)
    return b.lshr(b.select(b.icmp_signed(">=", value, I32(0)), positive, negative), I32(10))


def _tanh(k: Kernel, lookup: ir.Value, x: ir.Value, power: int) -> ir.Value:
    """reference_integer_ops::Tanh of an int16 of scale 2**power: Q0.15 in an int32."""
    b = k.b
    multiplier, shift = tanh_shift(power)
    if multiplier == 0:
        multiplier, shift = 3 << shift, 0
    value = b.mul(x, I32(multiplier))
    if shift:
        value = b.ashr(b.add(value, I32(1 << (shift - 1))), I32(shift))
    result = _interpolate(k, lookup, _abs(k, value), 8, 0xFFFF << 8)
    positive = b.add(result, I32(-(1 << 23) + (1 << 7)))
    negative = b.sub(I32((1 << 23) + (1 << 7) - 1), result)
    return b.ashr(b.select(b.icmp_signed(">=", value, I32(0)), positive, negative), I32(8))


def _folded_bias(node, slot: int | None, weights: np.ndarray, zero_point: int) -> np.ndarray:
    """Bias - zp * (sum of each weight row), per gate row, in int64 wrapped to int32."""
    sums = weights.astype(np.int64).sum(axis=1)
    bias = np.zeros(len(sums), np.int64) if slot is None else \
        node.inputs[slot].data.astype(np.int64)
    folded = bias - zero_point * sums
    return ((folded + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def _dot(k: Kernel, a: ir.Value, a_base: ir.Value, w: ir.Value, w_base: ir.Value, n: int,
         start: ir.Value) -> ir.Value:
    """Start + sum a[a_base + i] * w[w_base + i] over i < n, int8 by int8 in int32."""
    b = k.b
    total = k.alloca(I32)
    b.store(start, total)
    with k.loop(n) as i:
        x = b.sext(k.load(a, b.add(a_base, i)), I32)
        y = b.sext(k.load(w, b.add(w_base, i)), I32)
        b.store(b.add(b.load(total), b.mul(x, y)), total)
    return b.load(total)


def emit_int_lstm_step(k: Kernel) -> None:
    """New hidden (int8) and cell (int16) states of every batch row, cell by cell."""
    node, b = k.node, k.b
    # Kept out of line: inlined into a network's entry point at -O3 for x86-64 with AVX-512,
    # LLVM's vectorized code flipped the sign of a cell update (reproduced on a two-step
    # model; alone, or at -O1, the same function is exact). One call per step costs nothing
    # next to its eight dot products.
    k.fn.attributes.add("noinline")
    a = node.attrs
    x_type, w_type = node.inputs[0].type, node.inputs[1].type
    batch, features = x_type.shape
    cells = w_type.shape[0] // 4
    stateful = len(node.inputs) == 6
    lookup = table(k, "sigmoid", SIGMOID_TABLE - _TABLE_BIAS)
    w_data, r_data = node.inputs[1].data, node.inputs[2].data
    input_bias = table(k, "input_bias", _folded_bias(node, 3, w_data, a["x_zero_point"]))
    recurrent_bias = table(k, "recurrent_bias", _folded_bias(node, None, r_data,
                                                             a["h_zero_point"]))
    with k.loop(batch) as row, k.loop(cells) as j:
        gates = []
        for g in range(4):
            unit = b.add(j, I32(g * cells))
            acc = _dot(k, k.args[0], b.mul(row, I32(features)), k.args[1],
                       b.mul(unit, I32(features)), features, k.load(input_bias, unit))
            value = requant.tflite(k, acc, I32(a["input_multipliers"][g]),
                                   I32(a["input_shifts"][g]), 0, *INT16)
            if stateful:
                acc = _dot(k, k.args[4], b.mul(row, I32(cells)), k.args[2],
                           b.mul(unit, I32(cells)), cells, k.load(recurrent_bias, unit))
                recurrent = requant.tflite(k, acc, I32(a["recurrent_multipliers"][g]),
                                           I32(a["recurrent_shifts"][g]), 0, *INT16)
                value = requant.clamp(k, b.add(value, recurrent), *INT16)
            gates.append(value)
        i, f, o = (_sigmoid(k, lookup, gates[n]) for n in (0, 1, 3))
        g = _tanh(k, lookup, gates[2], -12)
        at = k.index((row, cells), (j, 1))
        update = requant.tflite(k, b.mul(i, g), I32(a["update_multiplier"]),
                                I32(a["update_shift"]), 0, *INT16)
        if stateful:
            old = b.sext(k.load(k.args[5], at), I32)
            kept = requant.tflite(k, b.mul(f, old), I32(a["forget_multiplier"]),
                                  I32(a["forget_shift"]), 0, *INT16)
            cell = requant.clamp(k, b.add(kept, update), *INT16)
        else:
            cell = update  # f times a zero cell requantizes to 0
        if a["cell_clip"] > 0:
            cell = requant.clamp(k, cell, -a["cell_clip"], a["cell_clip"])
        k.store(b.trunc(cell, I16), k.outs[1], at)
        squashed = _tanh(k, lookup, cell, a["cell_scale_power"])
        hidden = requant.tflite(k, b.mul(squashed, o), I32(a["output_multiplier"]),
                                I32(a["output_shift"]), a["h_zero_point"], -128, 127)
        k.store(b.trunc(hidden, ir.IntType(8)), k.outs[0], at)
