"""8-bit depthwise convolution in channel blocks, for DSP, Helium and x86 (AVX2, AVX-512).

One channel per group: each output channel sums its own input channel over the window, so
there is no depth to take dot products over; instead a block of neighbouring channels is
worked at once. The input zero point is folded into the accumulator starts (`borders`), so the
taps multiply stored values only:
- DSP (M4/M7/M33): four channels at a time; a word of four input bytes becomes its (0, 2) and
  (1, 3) int16 pairs (two SXTB16), the weights are stored as the same pairs, and SMLABB /
  SMLATT multiply-accumulate each channel's half-word.
- Helium (M55): eight channels at a time as int32 lanes (two vector registers). An int8 by
  int8 product fits 16 bits, so lanes multiply narrow and accumulate in int32.
- Hosts with lane dot products (AVX2, AVX-512, AArch64's SDOT): thirty-two channels
  (sixteen or eight where those divide the channels) as int16 products, two taps' summed in
  int16 before they are widened (`_host_tap`).
The block is requantized as one vector. Used for symmetric int8 weights and a channel count
that is a multiple of the block; other depthwise layers take `qconv`'s kernels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.borders import STARTS, border_offset
from compiler.codegen.int8dot import (
    WEIGHTS,
    arm_intrinsic,
    conv_dot_arrays,
    dsp_weights,
    load_vector,
    store_block,
    store_vector,
    sxtb16_pairs,
    weight_quad,
    weight_words,
)
from compiler.codegen.kernel import I32, Kernel, constant_input, first
from compiler.codegen.targets import DotProduct, Target
from compiler.codegen.window import each_tap
from compiler.ir.graph import Node

_BLOCK = {DotProduct.DSP: 4, DotProduct.MVE: 8, DotProduct.VNNI: 32, DotProduct.SCALAR: 4,
          DotProduct.PMADDWD: 32, DotProduct.SDOT: 32}
# Microcontroller cores emit an inside window's taps one by one, each tap its own registers: as
# LLVM's loops, the accumulators rotate through copies and spills (KWS's depthwise layers on
# Cortex-M55: 1.00 of CMSIS-NN as loops, 0.85 unrolled; Cortex-M7 VWW 5 % and Cortex-M3 4 %
# fewer instructions in all).
UNROLLED_TAPS = {DotProduct.MVE, DotProduct.DSP, DotProduct.SCALAR}


def _block(channels: int, target: Target) -> int:
    """Channels per block: the core's, or on Helium and hosts the widest dividing the channels.

    Helium takes sixteen where it can, hosts 32, 16 or 8. On Helium four vectors of int32
    lanes per tap share the tap's address arithmetic and border test (VWW's 128-channel
    depthwise layers on Cortex-M55: 0.90 of CMSIS-NN, 1.23 with eight).
    """
    if target.int8_dot is DotProduct.MVE and channels % 16 == 0:
        return 16
    if not target.mcu:  # hosts: the widest block of 32, 16 or 8 dividing the channels
        return next((b for b in (32, 16, 8) if channels % b == 0), _BLOCK[target.int8_dot])
    return _BLOCK[target.int8_dot]


def depthwise_dot_eligible(node: Node, target: Target | None) -> bool:
    """Whether this convolution is depthwise and runs in channel blocks on `target`."""
    if target is None or target.int8_dot not in _BLOCK:
        return False
    channels, out_c = node.inputs[0].type.shape[3], node.output.type.shape[3]
    if int(node.attrs.get("group", 1)) != channels or out_c != channels:
        return False
    if node.inputs[0].type.dtype != "int8" or node.inputs[3].type.dtype != "int8":
        return False
    if node.inputs[5] is not None and np.asarray(node.inputs[5].data).any():
        return False
    return channels % _block(channels, target) == 0


def qdepthwise_dot_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """Weights [C/B, KH, KW, B] (int16 pairs on DSP cores), starts, the rule's data."""
    w = np.asarray(node.inputs[3].data, np.int64)  # [C, 1, KH, KW]
    channels, _, kh_n, kw_n = w.shape
    block = _block(node.inputs[0].type.shape[3], target)
    blocked = np.ascontiguousarray(
        w.reshape(channels // block, block, kh_n, kw_n).transpose(0, 2, 3, 1)).astype(np.int8)
    # Hosts read int16 weights straight into VPMULLW (one widening less per tap).
    stored = blocked.astype(np.int16) if _host(target) else dsp_weights(blocked, target)
    return conv_dot_arrays(node, target, stored, w[:, 0])


def emit_qdepthwise_dot(k: Kernel) -> None:
    """Per output pixel and block of channels: the starts, every inside tap, requantize."""
    node, b = k.node, k.b
    batch, height, width, channels = node.inputs[0].type.shape
    _, out_h, out_w, _ = node.output.type.shape
    kh_n, kw_n = node.inputs[3].type.shape[2:]
    taps = kh_n * kw_n
    pairs = _pairs_fit(node)
    dsp = k.target.int8_dot is DotProduct.DSP
    host = _host(k.target)
    block = _block(channels, k.target)
    zp = int(first(constant_input(k, 7, "output zero point")))
    accs = [k.alloca(I32) for _ in range(block)] if dsp else None
    vec = ir.VectorType(I32, block)
    acc_vec = None if dsp else k.alloca(vec)
    with k.loop(batch) as n, k.rows(out_h) as oh, k.loop(out_w) as ow:
        border = border_offset(k, oh, ow)
        pixel = k.index((n, out_h * out_w * channels), (oh, out_w * channels), (ow, channels))
        with k.loop(channels // block) as cb:
            c0 = k.index((cb, block))
            if dsp:
                for j, slot in enumerate(accs):
                    b.store(k.load(k.args[STARTS], b.add(border, b.add(c0, I32(j)))), slot)
            else:
                b.store(load_vector(k, k.args[STARTS], b.add(border, c0), block, I32), acc_vec)

            pending: list[ir.Value] = []  # a host's product waiting for its pair

            def tap(ih, iw, kh, kw, n=n, cb=cb, c0=c0, pending=pending):
                x_at = b.add(k.index((n, height * width * channels), (ih, width * channels),
                                     (iw, channels)), c0)
                w_at = k.index((cb, taps * block), (kh, kw_n * block), (kw, block))
                if dsp:
                    _dsp_taps(k, x_at, w_at, accs)
                elif host:
                    unrolled = isinstance(kh, ir.Constant)  # the inside window's copy
                    last = unrolled and (kh.constant, kw.constant) == (kh_n - 1, kw_n - 1)
                    _host_tap(k, x_at, w_at, acc_vec, pending, pairs and unrolled, last)
                else:  # int8 widened to int32 as loaded (VLDRB.S32), multiply-accumulated
                    x = b.sext(load_vector(k, k.args[0], x_at, block), vec)
                    w = b.sext(load_vector(k, k.args[WEIGHTS], w_at, block), vec)
                    b.store(b.add(b.load(acc_vec), b.mul(x, w)), acc_vec)

            each_tap(k, node, oh, ow, tap, unrolled=k.target.int8_dot in UNROLLED_TAPS or host)
            if dsp:
                store_block(k, [b.load(slot) for slot in accs], c0, b.add(pixel, c0), zp)
            else:
                store_vector(k, b.load(acc_vec), c0, b.add(pixel, c0), zp)


def _host(target: Target | None) -> bool:
    """Whether the depthwise blocks are a host's (`_host_tap`), not a microcontroller's."""
    return target is not None and not target.mcu


def _pairs_fit(node: Node) -> bool:
    """Whether two taps' products may be summed in int16: no weight is -128.

    Then |x * w| <= 128 * 127 and two such sums stay within int16 (32,512).
    """
    return bool(np.asarray(node.inputs[3].data).min() > -128)


def _host_tap(k: Kernel, x_at, w_at, acc: ir.Value, pending: list, paired: bool,
              last: bool) -> None:
    """One tap of a block on a host: int16 products, two taps summed before widening.

    An int8 product fits int16 (VPMULLW, one instruction, where an int32 product takes
    VPMULLD's two); with `paired` (an unrolled inside window whose weights allow it) the
    product waits in `pending` for the next tap's, so two taps cost one widening and one
    int32 add. `last`: the window's last tap, which adds whatever waits.
    """
    b = k.b
    lanes = acc.type.pointee.count
    narrow = ir.VectorType(ir.IntType(16), lanes)
    x = b.sext(load_vector(k, k.args[0], x_at, lanes), narrow)
    w = load_vector(k, k.args[WEIGHTS], w_at, lanes, ir.IntType(16))
    product = b.mul(x, w, flags=["nsw"])
    if paired and not pending and not last:
        pending.append(product)
        return
    if paired and pending:
        product = b.add(pending.pop(), product, flags=["nsw"])
    b.store(b.add(b.load(acc), b.sext(product, acc.type.pointee)), acc)


def _dsp_taps(k: Kernel, x_at, w_at, accs) -> None:
    """Four channels of one tap: SXTB16 pairs of the input word times the stored pairs."""
    b = k.b
    word = b.load(b.bitcast(b.gep(k.args[0], [x_at], inbounds=True), ir.PointerType(I32)),
                  align=1)
    x_even, x_odd = sxtb16_pairs(k, word)
    w_even, w_odd = weight_quad(k, weight_words(k, w_at), I32(0))
    # Channel 0 and 2 are the bottom and top halves of the even pair; 1 and 3 of the odd one.
    for slot, name, xs, ws in ((accs[0], "smlabb", x_even, w_even),
                               (accs[2], "smlatt", x_even, w_even),
                               (accs[1], "smlabb", x_odd, w_odd),
                               (accs[3], "smlatt", x_odd, w_odd)):
        b.store(arm_intrinsic(k, name, xs, ws, b.load(slot)), slot)
