"""Conv with weights computed at run time, in any spatial rank and either layout.

The tuned convolution kernels arrange their weights at compile time; when a graph computes its
weights (a depthwise filter made from an input, an expanded function's reshaped parameters),
this kernel reads them as they are: per output element, the sum over its group's input
channels and the taps inside the input of x times w, plus the bias. The window geometry
(pads, auto_pad, strides, dilations) is compiler/ops' own.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.codetables import table
from compiler.codegen.elementwise import intrinsic
from compiler.codegen.kernel import I32, Kernel, activate, strides
from compiler.codegen.window import tap_positions
from compiler.errors import KilnError
from compiler.ir.graph import Constant
from compiler.ops._spatial import layout_of, nchw_shape, window
from compiler.ops.qlinear import requant_rule
from compiler.qmath.requant import RANGES, onnx_scale

F32 = ir.FloatType()


def runtime_weights(node) -> bool:
    """A float Conv whose weights (input 1) are computed at run time."""
    return (node.op == "Conv" and node.output.type.dtype == "float32"
            and not isinstance(node.inputs[1], Constant))



@contextmanager
def _window_sums(k: Kernel, w_slot: int, start, term, zero, add):
    """Loop over every output element, summing term over its group's channels and taps.

    start(oc) is the sum's first value, term(x_at, w_at, oc) one tap's product (taps outside
    the input count zero); yields (oc, sum, y_at) inside the output loops, for the caller to
    finish and store. The float and the integer direct convolutions differ only there.
    """
    node, b = k.node, k.b
    layout = layout_of(node)
    batch, _, *spatial = nchw_shape(node.inputs[0].type.shape, layout)
    w_shape = node.inputs[w_slot].type.shape  # [C_out, C_in / group, *kernel]
    out_channels, per_group_in, kernel = w_shape[0], w_shape[1], list(w_shape[2:])
    group = node.attrs["group"]
    per_group_out = out_channels // group
    win = window(node, spatial, kernel)
    x_st = strides(list(node.inputs[0].type.shape))
    y_st = strides(list(node.output.type.shape))
    w_st = strides(list(w_shape))
    total = k.alloca(zero.type)

    def at(n, c, pos, st):
        dims = [n, *pos, c] if layout == "NHWC" else [n, c, *pos]
        return k.index(*zip(dims, st))

    with ExitStack() as stack:
        n = stack.enter_context(k.loop(batch))
        oc = stack.enter_context(k.loop(out_channels))
        out = [stack.enter_context(k.loop(size)) for size in win.out]
        g = b.udiv(oc, I32(per_group_out)) if group > 1 else I32(0)
        b.store(start(oc), total)
        with ExitStack() as inner:
            ic = inner.enter_context(k.loop(per_group_in))
            taps = [inner.enter_context(k.loop(size)) for size in kernel]
            inside, pos = tap_positions(k, out, taps, win, spatial)
            channel = b.add(b.mul(g, I32(per_group_in)), ic)
            x_at = at(n, channel, pos, x_st)
            w_at = k.index(*zip([oc, ic, *taps], w_st))
            b.store(add(b.load(total), b.select(inside, term(x_at, w_at, oc), zero)), total)
        yield oc, b.load(total), at(n, oc, out, y_st)


def emit_conv_direct(k: Kernel) -> None:
    """Y = b + sum over the group's input channels and in-bounds taps of x w, activated."""
    node, b = k.node, k.b
    bias = k.args[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None

    def start(oc):
        return k.load(bias, oc) if bias is not None else F32(0.0)

    def term(x_at, w_at, oc):
        return b.fmul(k.load(k.args[0], x_at), k.load(k.args[1], w_at))

    with _window_sums(k, 1, start, term, F32(0.0), b.fadd) as (_, value, y_at):
        k.store(activate(k, value), k.outs[0], y_at)


def emit_causal_conv(k: Kernel) -> None:
    """CausalConvWithState: the depthwise causal convolution over [past, x], and its new state.

    Position p of the joined sequence is the past's when p < k - 1, the input's after; a missing
    past is zeros. The state output is the joined sequence's last k - 1 positions.
    """
    node, b = k.node, k.b
    batch, channels, length = node.inputs[0].type.shape
    taps = node.inputs[1].type.shape[2]
    keep = taps - 1
    args = list(k.args) + [None] * (4 - len(k.args))
    x, w, bias, past = args[:4]

    def joined(n, c, p):
        from_x = k.load(x, k.index((n, channels * length), (c, length),
                                   (b.select(b.icmp_signed(">=", p, I32(keep)),
                                             b.sub(p, I32(keep)), I32(0)), 1)))
        if past is None or keep == 0:
            old = F32(0.0)
        else:
            old = k.load(past, k.index((n, channels * keep), (c, keep),
                                       (b.select(b.icmp_signed("<", p, I32(keep)), p, I32(0)),
                                        1)))
        return b.select(b.icmp_signed("<", p, I32(keep)), old, from_x)

    total = k.alloca(F32)
    with k.loop(batch) as n, k.loop(channels) as c:
        with k.loop(length) as t:
            b.store(k.load(bias, c) if bias is not None else F32(0.0), total)
            with k.loop(taps) as j:
                term = b.fmul(k.load(w, k.index((c, taps), (j, 1))), joined(n, c, b.add(t, j)))
                b.store(b.fadd(b.load(total), term), total)
            out = b.load(total)
            if node.attrs["activation"] in ("silu", "swish"):
                out = b.fdiv(out, b.fadd(F32(1.0), intrinsic(k, "exp", b.fneg(out))))
            k.store(out, k.outs[0], k.index((n, channels * length), (c, length), (t, 1)))
        if len(k.outs) > 1 and k.outs[1] is not None and keep:
            with k.loop(keep) as s:
                k.store(joined(n, c, b.add(s, I32(length))), k.outs[1],
                        k.index((n, channels * keep), (c, keep), (s, 1)))


def runtime_integer_weights(node) -> bool:
    """A ConvInteger or QLinearConv (onnx rule) whose weights are computed at run time."""
    slot = {"ConvInteger": 1, "QLinearConv": 3}.get(node.op)
    if slot is None or isinstance(node.inputs[slot], Constant):
        return False
    return node.op == "ConvInteger" or requant_rule(node) == "onnx"


def _first(node, slot: int) -> float:
    value = node.inputs[slot] if slot < len(node.inputs) else None
    if value is None:
        return 0
    if not isinstance(value, Constant) or value.data.size != 1:
        raise KilnError(f"cannot generate {node.op} {node.name}: input {slot} must be one "
                        "constant")
    return value.data.reshape(-1)[0]


def emit_conv_integer_direct(k: Kernel) -> None:
    """Sum (x - zx)(w - zw) over the window, stored (ConvInteger) or requantized.

    QLinearConv adds its bias to the sum and requantizes it by the onnx rule.
    """
    node, b = k.node, k.b
    q = node.op == "QLinearConv"
    x_slot, w_slot = (0, 3) if q else (0, 1)
    zx = int(_first(node, 2))
    zw_slot = 5 if q else 3
    zw_value = node.inputs[zw_slot] if zw_slot < len(node.inputs) else None
    bias = k.args[8] if q and len(node.inputs) > 8 and node.inputs[8] is not None else None

    def widen(value, dtype):
        return b.zext(value, I32) if dtype == "uint8" else b.sext(value, I32)

    def weight_zero(oc):
        """The weights' zero point: none, one, or one per output channel (run time or not)."""
        if zw_value is None:
            return I32(0)
        per_channel = zw_value.type.numel > 1
        return widen(k.load(k.args[zw_slot], oc if per_channel else I32(0)),
                     zw_value.type.dtype)

    def start(oc):
        return k.load(bias, oc) if bias is not None else I32(0)

    def term(x_at, w_at, oc):
        xv = b.sub(widen(k.load(k.args[x_slot], x_at), node.inputs[x_slot].type.dtype), I32(zx))
        wv = b.sub(widen(k.load(k.args[w_slot], w_at), node.inputs[w_slot].type.dtype),
                   weight_zero(oc))
        return b.mul(xv, wv)

    with _window_sums(k, w_slot, start, term, I32(0), b.add) as (oc, value, y_at):
        if q:
            w_scale = node.inputs[4]
            if isinstance(w_scale, Constant) and w_scale.data.size > 1:  # per output channel
                scales = onnx_scale(_first(node, 1), w_scale.data.reshape(-1), _first(node, 6))
                scale = k.load(table(k, "scales", np.asarray(scales, np.float32), F32), oc)
            else:
                scale = ir.Constant(F32, float(onnx_scale(_first(node, 1), _first(node, 4),
                                                          _first(node, 6)).reshape(-1)[0]))
            low, high = RANGES[node.output.type.dtype]
            value = b.trunc(requant.onnx(k, value, scale, int(_first(node, 7)), low, high),
                            ir.IntType(8))
        k.store(value, k.outs[0], y_at)


def emit_deform_conv(k: Kernel) -> None:
    """DeformConv (2-D, NCHW): each tap read bilinearly at its offset position, masked.

    Per output position, tap (i, j) of input channel c reads the image at its window position
    plus the offset of c's offset group (corners outside the image read zero), times the
    mask when given, times the weight; the group's channels and taps are summed with the bias.
    """
    node, b = k.node, k.b
    batch, channels, height, width = node.inputs[0].type.shape
    w_shape = node.inputs[1].type.shape
    out_channels, per_group_in = w_shape[0], w_shape[1]
    kernel = tuple(node.attrs["kernel_shape"] or w_shape[2:])
    kh, kw = kernel
    win = window(node, (height, width), kernel)
    oh, ow = win.out
    group, offset_groups = node.attrs["group"], node.attrs["offset_group"]
    per_group_out = out_channels // group
    per_offset = channels // offset_groups
    taps = kh * kw
    args = list(k.args) + [None] * (5 - len(k.args))
    x, w, offset, bias, mask = args[:5]
    total = k.alloca(F32)

    def plane(n, c, y, xx):
        return k.index((n, channels * height * width), (c, height * width), (y, width), (xx, 1))

    def bilinear(n, c, y, xx):
        y0, x0 = intrinsic(k, "floor", y), intrinsic(k, "floor", xx)
        value = F32(0.0)
        for dy in (0.0, 1.0):
            for dx in (0.0, 1.0):
                yy, xc = b.fadd(y0, F32(dy)), b.fadd(x0, F32(dx))
                weight = b.fmul(b.fsub(F32(1.0), intrinsic(k, "fabs", b.fsub(y, yy))),
                                b.fsub(F32(1.0), intrinsic(k, "fabs", b.fsub(xx, xc))))
                iy, ix = b.fptosi(yy, I32), b.fptosi(xc, I32)
                inside = b.and_(b.and_(b.fcmp_ordered(">=", yy, F32(0.0)),
                                       b.fcmp_ordered("<", yy, F32(float(height)))),
                                b.and_(b.fcmp_ordered(">=", xc, F32(0.0)),
                                       b.fcmp_ordered("<", xc, F32(float(width)))))
                iy = b.select(inside, iy, I32(0))
                ix = b.select(inside, ix, I32(0))
                pixel = k.load(x, plane(n, c, iy, ix))
                value = b.fadd(value, b.select(inside, b.fmul(pixel, weight), F32(0.0)))
        return value

    with k.loop(batch) as n, k.loop(out_channels) as oc, k.loop(oh) as oy, k.loop(ow) as ox:
        g = b.udiv(oc, I32(per_group_out)) if group > 1 else I32(0)
        b.store(k.load(bias, oc) if bias is not None else F32(0.0), total)
        with k.loop(per_group_in) as ic, k.loop(kh) as i, k.loop(kw) as j:
            c = b.add(b.mul(g, I32(per_group_in)), ic)
            og = b.udiv(c, I32(per_offset)) if offset_groups > 1 else I32(0)
            t = b.add(b.mul(i, I32(kw)), j)
            row = b.add(b.mul(og, I32(2 * taps)), b.mul(t, I32(2)))
            dy = k.load(offset, k.index((n, offset_groups * 2 * taps * oh * ow), (row, oh * ow),
                                        (oy, ow), (ox, 1)))
            dx = k.load(offset, k.index((n, offset_groups * 2 * taps * oh * ow),
                                        (b.add(row, I32(1)), oh * ow), (oy, ow), (ox, 1)))
            y = b.fadd(b.sitofp(b.add(b.sub(b.mul(oy, I32(win.strides[0])), I32(win.begin[0])),
                                      b.mul(i, I32(win.dilations[0]))), F32), dy)
            xx = b.fadd(b.sitofp(b.add(b.sub(b.mul(ox, I32(win.strides[1])), I32(win.begin[1])),
                                       b.mul(j, I32(win.dilations[1]))), F32), dx)
            value = bilinear(n, c, y, xx)
            if mask is not None:
                m = k.load(mask, k.index((n, offset_groups * taps * oh * ow),
                                         (b.add(b.mul(og, I32(taps)), t), oh * ow), (oy, ow),
                                         (ox, 1)))
                value = b.fmul(value, m)
            weight = k.load(w, k.index((oc, per_group_in * kh * kw), (ic, kh * kw), (i, kw),
                                       (j, 1)))
            b.store(b.fadd(b.load(total), b.fmul(weight, value)), total)
        k.store(b.load(total), k.outs[0], k.index((n, out_channels * oh * ow), (oc, oh * ow),
                                                  (oy, ow), (ox, 1)))
