"""8-bit global average pooling (QLinearGlobalAveragePool, NHWC), either rule.

The int32 sum of each channel over the image, then: the onnx rule multiplies (sum - zp * count)
by the float32 in_scale / (out_scale * count) and rounds half to even; the tflite rule divides
the raw sum by the count rounding half away from zero when the two quantizations are equal
(AVERAGE_POOL_2D), else applies MEAN's multiplier with 1/count folded in. Every constant is
derived at compile time exactly as the reference (compiler/ops/qpool.py) derives it.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.errors import KilnError
from compiler.quant.requant import RANGES, quantize_multiplier

F32 = ir.FloatType()


def _scalar(k: Kernel, slot: int):
    data = constant_input(k, slot, "scale and zero point")
    return 0 if data is None else np.asarray(data).reshape(-1)[0]


def emit_qglobal_average_pool(k: Kernel) -> None:
    """Per (image, channel): sum the pixels in int32, then requantize by the rule."""
    node, b = k.node, k.b
    if node.attrs.get("layout") != "NHWC" or node.inputs[0].type.rank != 4:
        raise KilnError(f"cannot generate {node.op} {node.name}: only 2-D NHWC is supported")
    batch, height, width, channels = node.inputs[0].type.shape
    count = height * width
    xs, xz, ys, yz = (_scalar(k, i) for i in range(1, 5))
    xz, yz = int(xz), int(yz)
    low, high = node.attrs.get("output_range") or RANGES[node.output.type.dtype]
    widen = b.sext if node.inputs[0].type.dtype == "int8" else b.zext
    total_slot = k.alloca(I32)
    with k.loop(batch) as n, k.loop(channels) as c:
        b.store(I32(0), total_slot)
        with k.loop(count) as p:
            x = widen(k.load(k.args[0], k.index((n, count * channels), (p, channels),
                                                (c, 1))), I32)
            b.store(b.add(b.load(total_slot), x), total_slot)
        raw = b.load(total_slot)
        total = b.sub(raw, I32(xz * count))
        if node.attrs.get("requant", "onnx") != "tflite":
            scale = np.float32(xs) / (np.float32(ys) * np.float32(count))
            value = requant.onnx(k, total, ir.Constant(F32, float(scale)), yz, low, high)
        elif np.float32(xs) == np.float32(ys) and xz == yz:
            half = I32(count // 2)
            up = b.sdiv(b.add(raw, half), I32(count))
            down = b.sub(I32(0), b.sdiv(b.add(b.sub(I32(0), raw), half), I32(count)))
            value = requant.clamp(k, b.select(b.icmp_signed(">", raw, I32(0)), up, down),
                                  low, high)
        else:
            multiplier, shift = (int(v[0]) for v in quantize_multiplier(
                np.array([float(np.float32(xs)) / float(np.float32(ys))])))
            fold = min(count.bit_length() - 1, 32, 31 + shift)
            multiplier = (multiplier << fold) // count
            value = requant.tflite(k, total, I32(multiplier), I32(shift - fold), yz, low, high)
        k.store(b.trunc(value, ir.IntType(8)), k.outs[0], k.index((n, channels), (c, 1)))
