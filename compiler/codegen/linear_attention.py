"""LinearAttention: a recurrent state per key/value head, updated and read at every step.

The state S (key size x value size per batch and kv head) starts from past_state (or zeros) in
the present_state output itself, or in stack memory when the node does not give it. At step t
every kv head decays S by exp(decay) (gated rules, per key feature or per head), then adds
k outer v, where the delta rules replace v by beta (v - S^T k), column by column (a column's
correction reads only that column); each query head then reads scale q^T S of its kv head,
as compiler/ops/decoding.py's reference does.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.elementwise import intrinsic
from compiler.codegen.kernel import I32, Kernel

F32 = ir.FloatType()


def emit_linear_attention(k: Kernel) -> None:
    """Every step's output and the final state."""
    node, b = k.node, k.b
    a = node.attrs
    batch, steps, q_width = node.inputs[0].type.shape
    hq, hkv = a["q_num_heads"], a["kv_num_heads"]
    dk, dv = q_width // hq, node.inputs[2].type.shape[2] // hkv
    group = hq // hkv
    scale = a["scale"] or 1 / float(np.sqrt(dk))
    rule = a["update_rule"]
    args = list(k.args) + [None] * (6 - len(k.args))
    q, key, value, past, decay, beta = args[:6]
    state_size = batch * hkv * dk * dv
    if len(k.outs) > 1 and k.outs[1] is not None:
        state = k.outs[1]
    else:
        state = k.alloca_array(F32, state_size)
    with k.loop(state_size) as i:
        k.store(k.load(past, i) if past is not None else F32(0.0), state, i)

    def s_at(bb, h, kk, vv):
        return k.index((bb, hkv * dk * dv), (h, dk * dv), (kk, dv), (vv, 1))

    def packed(pointer, bb, t, h, d, size, heads):
        return k.load(pointer, k.index((bb, steps * heads * size), (t, heads * size),
                                       (h, size), (d, 1)))

    decay_width = node.inputs[4].type.shape[2] if decay is not None else 0
    beta_width = node.inputs[5].type.shape[-1] if beta is not None else 0
    total = k.alloca(F32)
    with k.loop(steps) as t:
        with k.loop(batch) as bb, k.loop(hkv) as h:
            if "gated" in rule:
                with k.loop(dk) as kk:
                    column = kk if decay_width == hkv * dk else I32(0)
                    size = dk if decay_width == hkv * dk else 1
                    gate = intrinsic(k, "exp", packed(decay, bb, t, h, column, size, hkv))
                    with k.loop(dv) as vv:
                        at = s_at(bb, h, kk, vv)
                        k.store(b.fmul(k.load(state, at), gate), state, at)
            if "delta" in rule:
                head = h if beta_width == hkv else I32(0)
                rate = k.load(beta, k.index((bb, steps * beta_width), (t, beta_width),
                                            (head, 1)))
            with k.loop(dv) as vv:
                v = packed(value, bb, t, h, vv, dv, hkv)
                if "delta" in rule:
                    b.store(F32(0.0), total)
                    with k.loop(dk) as kk:
                        b.store(b.fadd(b.load(total), b.fmul(
                            k.load(state, s_at(bb, h, kk, vv)),
                            packed(key, bb, t, h, kk, dk, hkv))), total)
                    v = b.fmul(rate, b.fsub(v, b.load(total)))
                with k.loop(dk) as kk:
                    at = s_at(bb, h, kk, vv)
                    k.store(b.fadd(k.load(state, at), b.fmul(packed(key, bb, t, h, kk, dk, hkv),
                                                             v)), state, at)
        with k.loop(batch) as bb, k.loop(hq) as h, k.loop(dv) as vv:
            kv_head = b.udiv(h, I32(group)) if group > 1 else h
            b.store(F32(0.0), total)
            with k.loop(dk) as kk:
                b.store(b.fadd(b.load(total), b.fmul(packed(q, bb, t, h, kk, dk, hq), k.load(
                    state, s_at(bb, kv_head, kk, vv)))), total)
            k.store(b.fmul(b.load(total), F32(scale)), k.outs[0],
                    k.index((bb, steps * hq * dv), (t, hq * dv), (h, dv), (vv, 1)))
