"""8-bit convolution as dot products over the input depth, for cores with int8 dot products.

With the weights arranged by output channel, tap and input channel, one output channel's filter
at one tap and one input pixel's channels are both contiguous, so the sum over C is a dot
product (`int8dot`: Helium VMLADAVA, or DSP SMLAD on prepared pairs). The input zero point
leaves the loop through the accumulator starts of `borders`. A block of output channels shares
each input load, and their accumulators are requantized as one vector. Used for symmetric int8
weights (zero point 0) and a depth that is a multiple of the core's step; other convolutions
take `qconv`'s kernels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.borders import STARTS, border_offset
from compiler.codegen.int8dot import (
    BLOCK,
    DEPTH_STEP,
    conv_dot_arrays,
    dots,
    dsp_weights,
    store_block,
)
from compiler.codegen.kernel import I32, Kernel, constant_input, first, prepared_knob
from compiler.codegen.targets import DotProduct, Target
from compiler.codegen.window import each_tap
from compiler.ir.graph import Node

_WEIGHTS = 3


def dot_eligible(node: Node, target: Target | None) -> bool:
    """Whether this convolution runs as depth dot products on `target`."""
    if target is None or target.int8_dot not in DEPTH_STEP or int(node.attrs.get("group",
                                                                                    1)) != 1:
        return False
    if node.inputs[0].type.dtype != "int8" or node.inputs[3].type.dtype != "int8":
        return False
    zw = node.inputs[5]
    if zw is not None and np.asarray(zw.data).any():
        return False
    channels, out_c = node.inputs[0].type.shape[3], node.output.type.shape[3]
    return channels % DEPTH_STEP[target.int8_dot] == 0 and out_c % BLOCK == 0


def channel_block(node: Node, asked) -> int:
    """Output channels per block: the schedule's `block` where it divides them, else BLOCK.

    A block shares each input word's unpacking (or load) among its filters; wider blocks
    amortize it further at the cost of registers.
    """
    out_c = node.output.type.shape[3]
    return asked if asked in (2, 4, 8) and out_c % asked == 0 else BLOCK


def qconv_dot_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """The arranged weights, the accumulator starts per border class, the rule's data.

    Weights are [O/B, KH, KW, B, C]: a block's rows of one tap side by side, so one pointer
    with constant offsets reads them; on DSP cores as widened pairs unless lean (`dsp_weights`).
    """
    w = np.asarray(node.inputs[3].data, np.int64)
    out_c, _, kh_n, kw_n = w.shape
    block = channel_block(node, prepared_knob("block", BLOCK))
    blocked = w.reshape(out_c // block, block, -1, kh_n, kw_n).transpose(0, 3, 4, 1, 2)
    stored = dsp_weights(np.ascontiguousarray(blocked).astype(np.int8), target)
    return conv_dot_arrays(node, target, stored, w.sum(axis=1))


def _one_chunk(k: Kernel, channels: int) -> bool:
    """Whether the window's taps are emitted one by one (`each_tap`'s `unrolled`).

    On Helium, for a pixel of at most 16 channels (one VMLADAVA per filter and tap): LLVM's
    tap loops then spill (ResNet-8's 16-channel layers on Cortex-M55: 8 % fewer
    instructions in the network unrolled); deeper pixels loop better (32 channels: 1 % more).
    """
    return k.target.int8_dot is DotProduct.MVE and channels <= 16


def _start(k: Kernel, accs: list, at) -> None:
    """Each accumulator of a block from its start (bias and zero-point correction)."""
    for j, slot in enumerate(accs):
        k.b.store(k.load(k.args[STARTS], k.b.add(at, I32(j))), slot)


def emit_qconv_dot(k: Kernel) -> None:
    """Per output pixel and block of output channels: the taps' dot products, requantized."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    kw_n = node.inputs[3].type.shape[3]
    taps = node.inputs[3].type.shape[2] * kw_n
    zp = int(first(constant_input(k, 7, "output zero point")))
    block = channel_block(node, k.knob("block", BLOCK))
    accs = [k.alloca(I32) for _ in range(block)]
    with k.loop(batch) as n, k.rows(out_h) as oh, k.loop(out_w) as ow:
        border = border_offset(k, oh, ow)
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        with k.loop(out_c // block) as ob:
            oc0 = k.index((ob, block))
            _start(k, accs, b.add(border, oc0))

            def tap(ih, iw, kh, kw, n=n, ob=ob):
                x_base = k.index((n, height * width * channels), (ih, width * channels),
                                 (iw, channels))
                at = k.index((kh, kw_n), (kw, 1))
                w_bases = [k.index((ob, block * taps * channels), (at, block * channels),
                                   base=j * channels) for j in range(block)]
                dots(k, x_base, w_bases, accs, channels, taps=taps)

            each_tap(k, node, oh, ow, tap, unrolled=_one_chunk(k, channels))
            store_block(k, [b.load(slot) for slot in accs], oc0, b.add(pixel, oc0), zp)


# -- shallow inputs: the window gathered into a column first --------------------------------

_COLUMN_LIMIT = 1024  # bytes of one pixel's gathered window on the stack


def _column_depth(node: Node, target: Target) -> int:
    """The gathered window's length, KH * KW * C, rounded up to the core's step."""
    kh_n, kw_n = node.inputs[3].type.shape[2:]
    step = DEPTH_STEP[target.int8_dot]
    return -(-kh_n * kw_n * node.inputs[0].type.shape[3] // step) * step


def im2col_eligible(node: Node, target: Target | None) -> bool:
    """Whether a convolution too shallow for depth dot products gathers its window instead.

    C is not a multiple of the core's step (the first layer of an image model) and the
    gathered window fits a small column.
    """
    if target is None or target.int8_dot not in DEPTH_STEP or dot_eligible(node, target):
        return False
    if int(node.attrs.get("group", 1)) != 1 or node.output.type.shape[3] % BLOCK:
        return False
    if node.inputs[0].type.dtype != "int8" or node.inputs[3].type.dtype != "int8":
        return False
    if node.inputs[5] is not None and np.asarray(node.inputs[5].data).any():
        return False
    return _column_depth(node, target) <= _COLUMN_LIMIT


def qconv_im2col_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """Filter rows [O, KH * KW * C], the accumulator starts, the rule's data.

    Each row is padded with zeros to the column's length (pairs on DSP cores).
    """
    w = np.asarray(node.inputs[3].data, np.int64)
    out_c = w.shape[0]
    rows = np.zeros((out_c, _column_depth(node, target)), np.int8)  # any block reads rows
    flat = w.transpose(0, 2, 3, 1).reshape(out_c, -1)
    rows[:, :flat.shape[1]] = flat
    return conv_dot_arrays(node, target, dsp_weights(rows, target), w.sum(axis=1))


def emit_qconv_im2col(k: Kernel) -> None:
    """Per output pixel: the window gathered into a column, then one dot product per channel.

    A tap in the padding stays 0 in the zeroed column and adds nothing; each block of output
    channels takes the dot products of the column with its filter rows.
    """
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, out_c = node.output.type.shape
    kw_n = node.inputs[3].type.shape[3]
    depth = _column_depth(node, k.target)
    zp = int(first(constant_input(k, 7, "output zero point")))
    column = k.alloca(ir.ArrayType(ir.IntType(8), depth))
    column.align = 16
    base = b.gep(column, [I32(0), I32(0)], inbounds=True)
    words = b.bitcast(base, ir.PointerType(I32))
    block = channel_block(node, k.knob("block", BLOCK))
    accs = [k.alloca(I32) for _ in range(block)]
    with k.loop(batch) as n, k.rows(out_h) as oh, k.loop(out_w) as ow:
        for i in range(depth // 4):
            b.store(I32(0), b.gep(words, [I32(i)], inbounds=True), align=4)

        def gather(ih, iw, kh, kw, n=n):
            x_at = k.index((n, height * width * channels), (ih, width * channels),
                           (iw, channels))
            to = k.index((kh, kw_n * channels), (kw, channels))
            for c in range(channels):
                value = k.load(k.args[0], b.add(x_at, I32(c)))
                b.store(value, b.gep(base, [b.add(to, I32(c))], inbounds=True))

        each_tap(k, node, oh, ow, gather)
        border = border_offset(k, oh, ow)
        pixel = k.index((n, out_h * out_w * out_c), (oh, out_w * out_c), (ow, out_c))
        with k.loop(out_c // block) as ob:
            oc0 = k.index((ob, block))
            _start(k, accs, b.add(border, oc0))
            w_bases = [k.index((ob, block * depth), base=j * depth) for j in range(block)]
            dots(k, I32(0), w_bases, accs, depth, x=base,
                 taps=kw_n * node.inputs[3].type.shape[2])
            store_block(k, [b.load(slot) for slot in accs], oc0, b.add(pixel, oc0), zp)
