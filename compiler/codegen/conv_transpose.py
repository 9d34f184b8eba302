"""ConvTranspose in any spatial rank: each output element gathers the taps that land on it.

An input position i reaches output position o through tap t when o = i s + t d - begin
(compiler/ops/conv.py's geometry: stride s, dilation d, the crop `begin` that auto_pad, pads
or output_shape give), so o gathers, per input channel of its group and per tap, x[i] w[t] for
every t with (o + begin - t d) divisible by s and the quotient inside the input. No scatter,
no scratch; channels-first or channels-last as the node's layout says.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel, strides
from compiler.codegen.window import landing_positions
from compiler.ops._spatial import layout_of, per_axis
from compiler.ops.conv import transpose_geometry

F32 = ir.FloatType()


def emit_conv_transpose(k: Kernel) -> None:
    """Y = b + sum over the group's input channels and the taps landing on each output."""
    node, b = k.node, k.b
    nhwc = layout_of(node) == "NHWC"
    x_shape = node.inputs[0].type.shape
    y_shape = node.output.type.shape
    w_shape = node.inputs[1].type.shape  # [C_in, C_out / group, *kernel]
    if nhwc:
        batch, *in_spatial, channels = x_shape
        out_spatial, out_channels = list(y_shape[1:-1]), y_shape[-1]
    else:
        batch, channels, *in_spatial = x_shape
        out_spatial, out_channels = list(y_shape[2:]), y_shape[1]
    rank = len(in_spatial)
    kernel = list(w_shape[2:])
    group = node.attrs["group"]
    per_group_in, per_group_out = channels // group, w_shape[1]
    begin, _, _ = transpose_geometry(node, in_spatial, kernel)
    axis_strides = per_axis(node, "strides", rank, 1)
    dilations = per_axis(node, "dilations", rank, 1)
    x_st, y_st, w_st = strides(x_shape), strides(y_shape), strides(w_shape)
    bias = k.args[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    total = k.alloca(F32)

    def x_at(n, c, pos):
        dims = [n, *pos, c] if nhwc else [n, c, *pos]
        return k.index(*zip(dims, x_st))

    with ExitStack() as stack:
        n = stack.enter_context(k.loop(batch))
        oc = stack.enter_context(k.loop(out_channels))
        out = [stack.enter_context(k.loop(size)) for size in out_spatial]
        g = b.udiv(oc, I32(per_group_out)) if group > 1 else I32(0)
        m = b.urem(oc, I32(per_group_out)) if group > 1 else oc
        b.store(k.load(bias, oc) if bias is not None else F32(0.0), total)
        with ExitStack() as inner:
            ic = inner.enter_context(k.loop(per_group_in))
            taps = [inner.enter_context(k.loop(size)) for size in kernel]
            reach, positions = landing_positions(k, out, taps, axis_strides, dilations, begin,
                                                 in_spatial)
            channel = b.add(b.mul(g, I32(per_group_in)), ic)
            xv = k.load(k.args[0], x_at(n, channel, positions))
            wv = k.load(k.args[1], k.index(*zip([channel, m, *taps], w_st)))
            term = b.select(reach, b.fmul(xv, wv), F32(0.0))
            b.store(b.fadd(b.load(total), term), total)
        dims = [n, *out, oc] if nhwc else [n, oc, *out]
        k.store(b.load(total), k.outs[0], k.index(*zip(dims, y_st)))


def emit_col2im(k: Kernel) -> None:
    """Col2Im: each image position gathers the block entries that land on it.

    As in a transposed convolution, block offset t at position q lands on t d + q s - pad.
    """
    node, b = k.node, k.b
    image = [int(v) for v in node.inputs[1].data]
    block = [int(v) for v in node.inputs[2].data]
    rank = len(image)
    axis_strides = list(node.attrs["strides"] or [1] * rank)
    dilations = list(node.attrs["dilations"] or [1] * rank)
    pads = list(node.attrs["pads"] or [0] * (2 * rank))
    counts = [(image[i] + pads[i] + pads[i + rank] - dilations[i] * (block[i] - 1) - 1)
              // axis_strides[i] + 1 for i in range(rank)]
    batch, columns = node.output.type.shape[:2]
    per_block = int(np.prod(block))
    x_shape = node.inputs[0].type.shape
    block_st = strides(block)
    count_st = strides(counts)
    total = k.alloca(F32)
    with ExitStack() as stack:
        n = stack.enter_context(k.loop(batch))
        c = stack.enter_context(k.loop(columns))
        pos = [stack.enter_context(k.loop(size)) for size in image]
        b.store(F32(0.0), total)
        with ExitStack() as inner:
            taps = [inner.enter_context(k.loop(size)) for size in block]
            reach, where = landing_positions(k, pos, taps, axis_strides, dilations, pads, counts)
            row = b.add(b.mul(c, I32(per_block)), k.index(*zip(taps, block_st)))
            at = k.index((n, x_shape[1] * x_shape[2]), (row, x_shape[2]),
                         *zip(where, count_st))
            value = b.select(reach, k.load(k.args[0], at), F32(0.0))
            b.store(b.fadd(b.load(total), value), total)
        plane = int(np.prod(image))
        k.store(b.load(total), k.outs[0], k.index((n, columns * plane), (c, plane),
                                                  *zip(pos, strides(image))))
