"""IntResizeBilinear: TFLite's 8-bit bilinear resize, exact in 32-bit integers.

Per output row and column the compiler tabulates the two input indices and the upper weight
(compiler.ops.qresize, the reference's own function). A term is a stored value times two
weights of at most 1024 (2^7 * 2^10 * 2^10), so the four-term sum fits 32 bits on every target,
and its rounding (half away from zero, over 2^20) is a shift of the magnitude.
"""

from __future__ import annotations

from compiler.codegen.codetables import table
from compiler.codegen.kernel import I32, Kernel
from compiler.ops.qresize import HALF_OUTPUT, ONE, bilinear_taps


def emit_int_resize_bilinear(k: Kernel) -> None:
    """Each output: its four neighbours times their tabulated weights, rounded over 2^20."""
    """Each output: its four neighbours times their tabulated weights, rounded over 2^20."""
    node = k.node
    n, h, w, c = node.inputs[0].type.shape
    oh, ow = node.attrs["size"]
    align, half = bool(node.attrs["align_corners"]), bool(node.attrs["half_pixel_centers"])
    rows, cols = bilinear_taps(h, oh, align, half), bilinear_taps(w, ow, align, half)
    y0, y1, wy = (table(k, f"y{i}", v) for i, v in enumerate(rows))
    x0, x1, wx = (table(k, f"x{i}", v) for i, v in enumerate(cols))
    b = k.b
    signed = node.output.type.dtype == "int8"

    def wide(v):
        return b.sext(v, I32) if signed else b.zext(v, I32)

    with k.loop(n) as i, k.loop(oh) as y:
        top, bottom, down = k.load(y0, y), k.load(y1, y), k.load(wy, y)
        up = b.sub(I32(ONE), down)
        with k.loop(ow) as x:
            left, right, across = k.load(x0, x), k.load(x1, x), k.load(wx, x)
            back = b.sub(I32(ONE), across)
            with k.loop(c) as ch:
                def at(row, col):
                    return wide(k.load(k.args[0], k.index((i, h * w * c), (row, w * c),
                                                          (col, c), (ch, 1))))
                total = b.add(
                    b.add(b.mul(b.mul(at(top, left), up), back),
                          b.mul(b.mul(at(bottom, left), down), back)),
                    b.add(b.mul(b.mul(at(top, right), up), across),
                          b.mul(b.mul(at(bottom, right), down), across)))
                negative = b.icmp_signed("<", total, I32(0))
                magnitude = b.select(negative, b.neg(total), total)
                rounded = b.lshr(b.add(magnitude, I32(HALF_OUTPUT)), I32(20))
                value = b.select(negative, b.neg(rounded), rounded)
                k.store(b.trunc(value, k.outs[0].type.pointee), k.outs[0],
                        k.index((i, oh * ow * c), (y, ow * c), (x, c), (ch, 1)))
