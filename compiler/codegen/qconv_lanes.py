"""8-bit convolution on the hosts' lane dot products: VPDPBUSD, VPMADDWD or SDOT.

Lanes are output channels and each int32 lane adds a short dot product per instruction:
- VPDPBUSD: four products of unsigned bytes by signed bytes. The weights are stored
  [O/L, KH, KW, C/4, L, 4], so one load holds four consecutive input channels' weights for L
  output channels, and the input's four bytes of those channels, broadcast to every lane,
  multiply them all. The input is made unsigned by flipping each byte's sign bit (x + 128);
  the extra 128 * sum(w) is folded with the input zero point.
- VPMADDWD: two products of int16 values, summed exactly. The weights are stored as int16
  [O/L, KH, KW, C/2, L, 2] and the input's two bytes of a channel pair are sign-extended to
  one pair of int16, broadcast to every lane.
- SDOT (AArch64): as VPDPBUSD, with signed input bytes (nothing flipped), four lanes a
  register.
The input zero point is folded into the accumulator starts per border class (`borders`), so
the loop is loads and dot products only (`lanedot`). A shallow input (the first layer) has each
pixel's window gathered into a column first and taken as one deep tap. One pixel keeps up to
four (VPDPBUSD) or eight vectors of output channels in registers, in independent chains where
the instruction accumulates in place (`vectors_and_chains`), and each is requantized as one
vector. Used for int8 inputs and symmetric int8 weights; other
convolutions take `qconv`'s kernels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.borders import STARTS, border_offset
from compiler.codegen.int8dot import conv_dot_arrays, load_vector, store_vector
from compiler.codegen.kernel import I32, Kernel, constant_input, first
from compiler.codegen.lanedot import (
    LANE_DOTS,
    input_word,
    lane_dot,
    lanes_for,
    padding_byte,
    sign_shift,
    step,
    stored_weights,
    vectors_and_chains,
)
from compiler.codegen.targets import Target
from compiler.codegen.window import each_tap
from compiler.ir.graph import Node


def lane_dot_eligible(node: Node, target: Target | None) -> bool:
    """Whether this convolution runs on `target`'s lane dot products."""
    if target is None or target.int8_dot not in LANE_DOTS or \
            int(node.attrs.get("group", 1)) != 1:
        return False
    if node.inputs[0].type.dtype != "int8" or node.inputs[3].type.dtype != "int8":
        return False
    if node.inputs[5] is not None and np.asarray(node.inputs[5].data).any():
        return False
    return node.output.type.shape[3] % 8 == 0 and (
        node.inputs[0].type.shape[3] % step(target) == 0
        or _column_depth(node) <= _COLUMN_LIMIT)


_COLUMN_LIMIT = 1024  # bytes of one pixel's gathered window


def _column_depth(node: Node) -> int:
    """A shallow input's gathered window, KH * KW * C, rounded up to 16 bytes.

    At least four words of four bytes (eight of two), so up to four chains divide it.
    """
    kh_n, kw_n = node.inputs[3].type.shape[2:]
    return -(-kh_n * kw_n * node.inputs[0].type.shape[3] // 16) * 16


def _gathered(node: Node, target: Target | None) -> bool:
    """Whether the input is too shallow for the dot product's words: its window is gathered."""
    return node.inputs[0].type.shape[3] % step(target) != 0


def qconv_lanes_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """Weights [O/L, KH, KW, C/S, L, S] (S channels a word), the starts, the rule's data.

    A gathered window is one tap of KH * KW * C channels (zero weights pad it to words).
    """
    w = np.asarray(node.inputs[3].data, np.int64)  # [O, C, KH, KW]
    out_c, channels, kh_n, kw_n = w.shape
    lanes, words = lanes_for(out_c, target), step(target)
    if _gathered(node, target):
        rows = np.zeros((out_c, _column_depth(node)), np.int64)
        rows[:, :kh_n * kw_n * channels] = w.transpose(0, 2, 3, 1).reshape(out_c, -1)
        arranged = rows.reshape(out_c // lanes, lanes, -1, words).transpose(0, 2, 1, 3)
    else:
        arranged = w.reshape(out_c // lanes, lanes, channels // words, words, kh_n,
                             kw_n).transpose(0, 4, 5, 2, 1, 3)
    return conv_dot_arrays(node, target, stored_weights(arranged, target), w.sum(axis=1),
                           sign_shift(target))


def emit_qconv_lanes(k: Kernel) -> None:
    """Per output pixel and group of channel vectors: starts, every inside tap, requantize."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    kw_n = node.inputs[3].type.shape[3]
    taps = node.inputs[3].type.shape[2] * kw_n
    lanes, size = lanes_for(out_c, k.target), step(k.target)
    vec = ir.VectorType(I32, lanes)
    blocks = out_c // lanes
    most, least = vectors_and_chains(k.target)
    most = k.knob("vectors", most)  # the schedule's, else the core's
    group = max(g for g in range(1, most + 1) if blocks % g == 0)
    zp = int(first(constant_input(k, 7, "output zero point")))
    gathered = _gathered(node, k.target)
    words = (_column_depth(node) if gathered else channels) // size
    # Independent accumulator chains per output vector, summed before requantizing: one
    # chain would wait on each VPDPBUSD's latency. The schedule may ask for a number.
    wanted = k.knob("chains", max(least // group, 1))
    chains = next(c for c in (8, 4, 2, 1) if c <= wanted and words % c == 0)
    accs = [[k.alloca(vec) for _ in range(chains)] for _ in range(group)]
    column, column_bytes = None, _column_depth(node)
    block_bytes = (column_bytes if gathered else taps * channels) * lanes  # weights' elements
    if gathered:
        column = k.alloca(ir.ArrayType(ir.IntType(8), column_bytes))
        column.align = 16
        column = b.gep(column, [I32(0), I32(0)], inbounds=True)
    with k.loop(batch) as n, k.rows(out_h) as oh, k.loop(out_w) as ow:
        if column is not None:
            _gather(k, column, column_bytes, n, oh, ow)
        border = border_offset(k, oh, ow)
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        with k.loop(blocks // group) as gb:
            oc0 = k.index((gb, group * lanes))
            for j, slots in enumerate(accs):
                b.store(load_vector(k, k.args[STARTS], b.add(border, b.add(oc0, I32(j * lanes))),
                                    lanes, I32), slots[0])
                for slot in slots[1:]:
                    b.store(ir.Constant(vec, [0] * lanes), slot)

            def accumulate(x_ptr, x_at, tap_at, depth: int, gb=gb):
                """The dot products of `depth` bytes at x_ptr[x_at:] with one tap's weights."""
                with k.loop(depth // size // chains) as trip:
                    for c in range(chains):
                        g = k.index((trip, chains), base=c)
                        x = input_word(k, x_ptr, b.add(x_at, k.index((g, size))), lanes)
                        for j, slots in enumerate(accs):
                            w_at = k.index((gb, group * block_bytes), (tap_at, depth * lanes),
                                           (g, size * lanes), base=j * block_bytes)
                            b.store(lane_dot(k, b.load(slots[c]), x, w_at, lanes), slots[c])

            if column is not None:
                accumulate(column, I32(0), I32(0), column_bytes)
            else:
                def tap(ih, iw, kh, kw, n=n):
                    x_at = k.index((n, height * width * channels), (ih, width * channels),
                                   (iw, channels))
                    accumulate(k.args[0], x_at, k.index((kh, kw_n), (kw, 1)), channels)

                each_tap(k, node, oh, ow, tap)
            for j, slots in enumerate(accs):
                total = b.load(slots[0])
                for slot in slots[1:]:
                    total = b.add(total, b.load(slot))
                first_channel = b.add(oc0, I32(j * lanes))
                store_vector(k, total, first_channel, b.add(pixel, first_channel), zp)


def _gather(k: Kernel, column: ir.Value, column_bytes: int, n, oh, ow) -> None:
    """One pixel's window into the column.

    A tap in the padding holds `padding_byte`, whose product adds nothing (-128, which the
    sign flip makes 0, before VPDPBUSD; 0 before VPMADDWD).
    """
    node, b = k.node, k.b
    _, height, width, channels = node.inputs[0].type.shape
    kw_n = node.inputs[3].type.shape[3]
    words = b.bitcast(column, ir.PointerType(I32))
    fill = padding_byte(k.target) & 0xFF
    for i in range(column_bytes // 4):
        b.store(I32(fill * 0x01010101 - (1 << 32 if fill >= 0x80 else 0)),
                b.gep(words, [I32(i)], inbounds=True), align=4)

    def gather(ih, iw, kh, kw):
        x_at = k.index((n, height * width * channels), (ih, width * channels), (iw, channels))
        to = k.index((kh, kw_n * channels), (kw, channels))
        for c in range(channels):
            b.store(k.load(k.args[0], b.add(x_at, I32(c))),
                    b.gep(column, [b.add(to, I32(c))], inbounds=True))

    each_tap(k, node, oh, ow, gather)
