"""A QDQ unit's ends: the DequantizeLinear it reads through and the QuantizeLinear it ends in.

`to_integer` fuses DequantizeLinear -> operator (-> Relu or Clip) -> QuantizeLinear into one
integer operator; these functions find the two ends, with constant parameters, and turn a
folded Relu or Clip into the integer range the output is clamped to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.ir.graph import Constant, Node, Value
from compiler.passes.rewrite import Rewriter, const
from compiler.qmath.requant import RANGES

INTEGER_SCALES = ("float32", "float16")  # the scale types integer operators take


@dataclass(frozen=True)
class Dequantized:
    """A value read through a DequantizeLinear: the integers and how they map to reals.

    `node` is None for a float bias quantized here (`float_bias`): no DequantizeLinear.
    """

    node: Node | None
    integers: Value
    scale: Constant
    zero_point: Value | None

    @property
    def per_tensor(self) -> bool:
        """One scale for the whole tensor."""
        return self.scale.data.size == 1


def dequantized(rw: Rewriter, value: Value | None) -> Dequantized | None:
    """`value` as the output of a DequantizeLinear with constant parameters, else None."""
    node = rw.producer(value, "DequantizeLinear")
    if node is None or node.attrs.get("block_size"):
        return None
    scale = node.inputs[1]
    zp = node.inputs[2] if len(node.inputs) > 2 else None
    if not isinstance(scale, Constant) or (zp is not None and not isinstance(zp, Constant)):
        return None
    if scale.type.dtype not in INTEGER_SCALES or node.inputs[0].type.numel == 0:
        return None  # integer operators take float32 or float16 scales, and data
    return Dequantized(node, node.inputs[0], scale, zp)


def float_bias(rw: Rewriter, value: Value | None, x: Dequantized, w: Dequantized
               ) -> Dequantized | None:
    """A float constant bias as the int32 integers it stands for at input x weight scale.

    NNCF's QDQ files leave the bias float; an int8 kernel adds it to the accumulator, rounded
    to that scale as TFLite's converter rounds it. None when it is not a float constant, a
    value needs more than int32, or a scale is zero under a nonzero bias.
    """
    data = const(value)
    if data is None or value.type.dtype != "float32" or data.ndim != 1:
        return None
    scale = np.float32(x.scale.data.reshape(-1)[0]) * w.scale.data.reshape(-1).astype(
        np.float32)
    if scale.size not in (1, data.size):
        return None
    wide = np.broadcast_to(scale, data.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(wide == 0, 0.0, np.rint(data.astype(np.float64) / wide))
    if np.any((wide == 0) & (data != 0)) or np.any(np.abs(q) > 2 ** 31 - 1):
        return None
    integers = rw.constant(f"{value.name}_int32", q.astype(np.int32))
    return Dequantized(None, integers, rw.constant(f"{value.name}_scale", scale), None)


def quantizer(rw: Rewriter, value: Value) -> tuple[Node | None, tuple[float, float] | None]:
    """The QuantizeLinear that is the only reader of `value`, through one Relu or Clip.

    Returns it and the real range the activation between clamps to (None without one).
    """
    reader = rw.sole_user(value)
    bounds = None
    if reader is not None and reader.op == "Relu":
        bounds, value, reader = (0.0, np.inf), reader.output, rw.sole_user(reader.output)
    elif reader is not None and reader.op == "Clip":
        low = const(reader.inputs[1]) if len(reader.inputs) > 1 and reader.inputs[1] else None
        high = const(reader.inputs[2]) if len(reader.inputs) > 2 and reader.inputs[2] else None
        given = [v for v in reader.inputs[1:] if v is not None]
        if any(const(v) is None for v in given):
            return None, None  # bounds computed at run time
        bounds = (-np.inf if low is None else float(low.reshape(-1)[0]),
                  np.inf if high is None else float(high.reshape(-1)[0]))
        value, reader = reader.output, rw.sole_user(reader.output)
    if reader is None or reader.op != "QuantizeLinear" or reader.inputs[0] is not value:
        return None, None
    scale = reader.inputs[1]
    zp = reader.inputs[2] if len(reader.inputs) > 2 else None
    if not isinstance(scale, Constant) or scale.data.size != 1 or \
            scale.type.dtype not in INTEGER_SCALES:
        return None, None
    if zp is not None and (not isinstance(zp, Constant) or zp.data.size != 1):
        return None, None
    if reader.output.type.dtype not in RANGES:
        return None, None
    return reader, bounds


def integer_range(quant: Node, bounds: tuple[float, float] | None) -> tuple[int, int] | None:
    """[low, high] in the output's integers that a folded Relu or Clip clamps to."""
    if bounds is None:
        return None
    qmin, qmax = RANGES[quant.output.type.dtype]
    scale = np.float32(quant.inputs[1].data.reshape(-1)[0])
    zp = int(quant.inputs[2].data.reshape(-1)[0]) if len(quant.inputs) > 2 and \
        quant.inputs[2] is not None else 0

    def q(real: float, unbounded: int) -> int:  # QuantizeLinear's rule, ties to even
        if np.isnan(real):  # std::max(x, NaN) is x: no bound
            return unbounded
        with np.errstate(over="ignore"):
            return int(np.clip(np.rint(np.float32(real) / scale) + zp, qmin, qmax))

    # Clip(x, min, max) is min(max(x, min), max): a lower bound above the upper one gives max.
    high = q(bounds[1], qmax)
    low = min(q(bounds[0], qmin), high)
    return None if (low, high) == (qmin, qmax) else (low, high)  # the type clamps anyway


def zero_point_input(rw: Rewriter, d: Dequantized, like: Value) -> Value:
    """The zero point of `d`, or an explicit zero of the integers' type."""
    if d.zero_point is not None:
        return d.zero_point
    return rw.constant(f"{d.node.name}_zero_point", np.zeros((), like.type.dtype))


def output_params(rw: Rewriter, quant: Node) -> tuple[Value, Value]:
    """The output scale and zero point `quant` gives, the zero point made explicit."""
    zp = quant.inputs[2] if len(quant.inputs) > 2 else None
    if zp is None:
        zp = rw.constant(f"{quant.name}_zero_point", np.zeros((), quant.output.type.dtype))
    return quant.inputs[1], zp
