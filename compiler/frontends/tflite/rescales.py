"""Refuse 8-bit operators whose scales TFLite Micro refuses, or turns into undefined shifts.

TFLite Micro's Prepare turns ratios of scales into a Q31 multiplier and an exponent
(QuantizeMultiplier), and MultiplyByQuantizedMultiplier first multiplies the int32 value by
`1 << exponent`. From an exponent of 32 on (a multiplier of 2**31 or more) that shift is
undefined in C: x86 shifts by the exponent modulo 32, Arm by all of it, so the model's outputs
depend on the machine, and Kiln's kernels could match neither. LOGISTIC and TANH divide by
`1LL << exponent` in 64 bits instead, undefined from 63 on and below 0 (an input scale under
2**-28: x86 shifts by the exponent modulo 64 and takes the radius as about 0, so the output
jumps from its lowest to its highest code). ADD and SUB take an output
multiplier below 1 only (QuantizeMultiplierSmallerThanOneExp aborts otherwise). No converter
writes such scales; each operator holding them is refused at load, in one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.flatbuffer import Model, Operator, Tensor
from compiler.qmath.requant import quantize_multiplier

_LAYERS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
_UNDEFINED = "TFLite Micro would shift integers by that many bits, which C leaves undefined"


@dataclass(frozen=True)
class Bound:
    """The exponents TFLite Micro's use of a multiplier defines, by the kind of multiplier.

    At most `largest` (`why` says why no more); with `lowest` (LOGISTIC's and TANH's input
    radius, whose exponent is frexp's: QuantizeMultiplier would clamp a tiny one to 0) at
    least that.
    """

    largest: int
    why: str
    lowest: int | None = None


_SHIFT = Bound(31, _UNDEFINED)  # `1 << exponent` on int32 values
# LOGISTIC's and TANH's input radius divides by 1LL << exponent: undefined from 63 on and
# below 0.
_SIGMOID = Bound(62, _UNDEFINED, lowest=0)
_BELOW_ONE = Bound(0, "TFLite Micro's 8-bit {op} takes an output multiplier below 1 only (it "
                      "aborts otherwise)")

# (what the multiplier is, its value(s), its bound)
Rescale = tuple[str, np.ndarray, Bound]


def check_rescales(model: Model, op: Operator, x: Tensor, out: Tensor) -> None:
    """Refuse `op` when a multiplier needs an exponent TFLite Micro refuses or C leaves open."""
    for what, real, bound in _rescales(model, op, x, out):
        exponents = np.frexp(real)[1] if bound.lowest is not None else \
            quantize_multiplier(real)[1]
        exponent = int(np.max(exponents))
        if exponent > bound.largest:
            raise ModelError(
                f"its multiplier {what} = {float(np.max(real)):.9g} needs an exponent of "
                f"{exponent}, above {bound.largest}: {bound.why.format(op=op.builtin)}")
        lowest = int(np.min(exponents))
        if bound.lowest is not None and lowest < bound.lowest:
            raise ModelError(
                f"its multiplier {what} = {float(np.min(real)):.9g} needs an exponent of "
                f"{lowest}, below {bound.lowest}: TFLite Micro's input radius divides by "
                "1LL << exponent, which C leaves undefined for a negative one")


def _rescales(model: Model, op: Operator, x: Tensor, out: Tensor) -> list[Rescale]:
    """The multipliers TFLite Micro's Prepare of `op` derives from scales."""
    xs, ys = _scale(x), _scale(out)
    if op.builtin in ("MUL", "ADD", "SUB"):
        other = _input(model, op, 1)
        if other is None:
            return []
        if op.builtin == "MUL":
            return [("the input scales' product / output scale",
                     np.float64(xs * _scale(other) / ys), _SHIFT)]
        twice = 2.0 * max(xs, _scale(other))  # the inputs' own multipliers are at most 1/2
        return [("2 x larger input scale / (2**20 x output scale)",
                 np.float64(twice / ((1 << 20) * ys)), _BELOW_ONE)]
    if op.builtin in _LAYERS:
        return _layer_rescales(model, op, x, ys)
    if op.builtin in ("RELU", "QUANTIZE"):
        return [("input scale / output scale", np.float64(xs / ys), _SHIFT)]
    if op.builtin == "LEAKY_RELU":
        alpha = float(op.options.Alpha()) if op.options else 0.2
        scale_in, scale_out = np.float64(np.float32(xs)), np.float64(np.float32(ys))
        return [("input scale / output scale", scale_in / scale_out, _SHIFT),
                ("input scale x alpha / output scale",
                 scale_in * np.float64(np.float32(alpha)) / scale_out, _SHIFT)]
    if op.builtin in ("LOGISTIC", "TANH"):
        return [("input scale x 2**27", np.float64(xs * 2.0**27), _SIGMOID)]
    if op.builtin == "HARD_SWISH":
        hires = np.float32(1.0 / 128.0) * np.float32(xs)
        return [("input scale / 128 / (3 / 32768)",
                 np.float64(hires / np.float32(3.0 / 32768.0)), _SHIFT)]
    if op.builtin == "MEAN":
        return _mean_rescales(model, op, x, out)
    return []


def _layer_rescales(model: Model, op: Operator, x: Tensor, ys: float) -> list[Rescale]:
    """Per output channel, input x weight / output scale (a per-tensor FC's product in float)."""
    w = _input(model, op, 1)
    if w is None:
        return []
    w_scale = np.asarray(w.scale, np.float32)
    if op.builtin == "FULLY_CONNECTED" and w_scale.size == 1:
        real = (np.float32(_scale(x)) * w_scale).astype(np.float64) / ys
    else:
        real = _scale(x) * w_scale.astype(np.float64) / ys
    return [("input scale x weight scale / output scale", real, _SHIFT)]


def _mean_rescales(model: Model, op: Operator, x: Tensor, out: Tensor) -> list[Rescale]:
    """MEAN's input / output scale, of which it folds up to 32 bits of 1 / count into the shift.

    Equal quantizations average as AVERAGE_POOL_2D does, with no multiplier.
    """
    axes = _input(model, op, 1, quantized=False)
    if axes is None or axes.data is None or not x.shape:
        return []  # the converter refuses these
    if _scale(x) == _scale(out) and int(x.zero_point[0]) == int(out.zero_point[0]):
        return []
    count = int(np.prod([x.shape[int(a) % len(x.shape)] for a in axes.data.reshape(-1)]))
    fold = min(max(count, 1).bit_length() - 1, 32)
    return [("input scale / output scale", np.float64(_scale(x) / _scale(out)),
             Bound(_SHIFT.largest + fold, _UNDEFINED))]


def _input(model: Model, op: Operator, slot: int, quantized: bool = True) -> Tensor | None:
    """Input `slot` of `op`, when present (and 8-bit quantized if `quantized`)."""
    index = op.inputs[slot] if len(op.inputs) > slot else -1
    if not 0 <= index < len(model.tensors):
        return None
    t = model.tensors[index]
    return t if not quantized or (t.quantized and t.dtype in ("int8", "uint8")) else None


def _scale(t: Tensor) -> float:
    """The tensor's first scale, a float32 widened to double as TFLite Micro's Prepare reads it."""
    return float(np.float32(t.scale[0]))
