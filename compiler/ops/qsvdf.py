"""IntSVDF (Kiln only): one inference of TFLite Micro's 8-bit SVDF, state in and state out.

SVDF keeps, per batch row and filter, the last `memory` feature values (its activation state,
int8 or int16 with a zero point). Each inference drops the oldest, appends the frame's feature
(an int8 dot product requantized by input x feature / state scale, clamped to the state's
type before its zero point is added, as TFLite Micro does), weights the memory by the time
weights (int32), sums each unit's `rank` filters with the bias, and requantizes by state x time
/ output into int8.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.requant import multiply_by_quantized_multiplier as mbqm

STATE_TYPES = ("int8", "int16")


def _wrap(values: np.ndarray, dtype: str) -> np.ndarray:
    """C's conversion to a narrower signed type (wrapping)."""
    bits = np.iinfo(dtype).bits
    return ((values + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))).astype(dtype)


def svdf(node, x, features, times, bias, state) -> tuple[np.ndarray, np.ndarray]:
    """(int8 output, new state), TFLite Micro's EvalIntegerSvdfReference."""
    a = node.attrs
    batch = x.shape[0]
    filters, memory = times.shape
    info = np.iinfo(state.dtype)
    dots = (x.astype(np.int64) - a["x_zero_point"]) @ features.astype(np.int64).T  # [B, F]
    fresh = np.clip(mbqm(dots, a["multiplier_1"], a["shift_1"]), info.min, info.max)
    fresh = _wrap(fresh + a["state_zero_point"], state.dtype.name)
    kept = state.reshape(batch, filters, memory)
    new = np.concatenate([kept[:, :, 1:], fresh[:, :, None]], axis=2)
    weighted = ((new.astype(np.int64) - a["state_zero_point"]) * times.astype(np.int64)).sum(2)
    units = filters // a["rank"]
    total = weighted.reshape(batch, units, a["rank"]).sum(2) + bias.astype(np.int64)
    y = mbqm(total, a["multiplier_2"], a["shift_2"]) + a["y_zero_point"]
    return np.clip(y, -128, 127).astype(np.int8), new.reshape(state.shape)


def _infer(node, ins, values):
    x, features, times, bias, state = ins
    rank = node.attrs["rank"]
    if x.dtype != "int8" or features.dtype != "int8" or bias.dtype != "int32":
        fail("IntSVDF takes an int8 input and feature weights and an int32 bias")
    if times.dtype not in STATE_TYPES or state.dtype != times.dtype:
        fail(f"IntSVDF's time weights and state must be both int8 or both int16, got "
             f"{times.dtype} and {state.dtype}")
    if x.rank != 2 or features.rank != 2 or times.rank != 2 or features.shape[1] != x.shape[1]:
        fail(f"shapes {x}, {features}, {times} are not SVDF's [batch, input], [filters, input], "
             "[filters, memory]")
    filters, memory = times.shape
    if features.shape[0] != filters or rank < 1 or filters % rank:
        fail(f"{filters} filters do not split into units of rank {rank}")
    if state.shape != (x.shape[0], filters * memory) or bias.shape != (filters // rank,):
        fail(f"the state must be [{x.shape[0]}, {filters * memory}] and the bias "
             f"[{filters // rank}], got {state} and {bias}")
    out = QuantParams((float(node.attrs["y_scale"]),), (int(node.attrs["y_zero_point"]),))
    return [TensorType((x.shape[0], filters // rank), "int8", out),
            TensorType(state.shape, state.dtype, state.quant)]


def _macs(node) -> int:
    x, features, times = (v.type for v in node.inputs[:3])
    return x.shape[0] * (features.numel + times.numel)


_K = "Kiln only: "
register(OpDef("IntSVDF", "matmul", _infer, svdf, inputs=(5, 5), outputs=(2, 2), macs=_macs,
               onnx=False, attrs={
                   "rank": Attr("int", 1, _K + "filters per unit"),
                   "x_zero_point": Attr("int", 0, _K + "the input's zero point"),
                   "state_zero_point": Attr("int", 0, _K + "the state's zero point"),
                   "multiplier_1": Attr("int", 0, _K + "input x feature / state, Q31"),
                   "shift_1": Attr("int", 0, _K + "its shift"),
                   "multiplier_2": Attr("int", 0, _K + "state x time / output, Q31"),
                   "shift_2": Attr("int", 0, _K + "its shift"),
                   "y_scale": Attr("float", 1.0, _K + "the output's scale"),
                   "y_zero_point": Attr("int", 0, _K + "the output's zero point")},
               doc="Kiln only: one inference of TFLite's 8-bit SVDF (its state in and out)"))
