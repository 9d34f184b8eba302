"""Attention: softmax(Q K^T * scale + masks) V per batch, head and query, as compiler/ops/attention.

Keys and values are read where they are, the cache's first (past_key, past_value) and the new
ones after, in either layout (4-D heads, or 3-D with the heads side by side in the hidden axis);
grouped-query attention reads key head h // group for query head h. Each query's scores are
computed three times (maximum, sum of exponentials, weighted sum of values) rather than kept:
no scratch memory. The bias adds the attention mask (bool: 0 or -inf, float: added; a shorter
mask leaves the last keys out), the causal frontier, the sliding window and the padding of
nonpad_kv_seqlen; a query no key may attend gets zeros. The present key and value and the
scores output (raw, soft-capped, biased or the probabilities) are written when asked.
"""

from __future__ import annotations

import math
from contextlib import ExitStack

from llvmlite import ir

from compiler.codegen.elementwise import broadcast_strides, intrinsic, max_of
from compiler.codegen.kernel import I32, Kernel

F32 = ir.FloatType()
NEG_INF = float("-inf")


class _Geometry:
    """Shapes and element indices of one Attention node."""

    def __init__(self, node):
        q, k, v = (node.inputs[i].type for i in range(3))
        a = node.attrs
        self.three_d = q.rank == 3
        if self.three_d:
            self.heads, self.kv_heads = a["q_num_heads"], a["kv_num_heads"]
            self.size, self.vsize = q.shape[2] // self.heads, v.shape[2] // self.kv_heads
            self.q_len, self.kv_len = q.shape[1], k.shape[1]
        else:
            self.heads, self.kv_heads, self.size, self.vsize = (q.shape[1], k.shape[1],
                                                                q.shape[3], v.shape[3])
            self.q_len, self.kv_len = q.shape[2], k.shape[2]
        self.batch = q.shape[0]
        past = node.inputs[4] if len(node.inputs) > 4 else None
        self.past = past.type.shape[2] if past is not None else 0
        self.total = self.past + self.kv_len
        self.group = self.heads // self.kv_heads
        scale = a["scale"] if a["scale"] is not None else 1 / math.sqrt(self.size)
        self.root = float(ir.Constant(F32, math.sqrt(scale)).constant)

    def q_index(self, k: Kernel, b, h, i, d):
        if self.three_d:
            return k.index((b, self.q_len * self.heads * self.size),
                           (i, self.heads * self.size), (h, self.size), (d, 1))
        return k.index((b, self.heads * self.q_len * self.size), (h, self.q_len * self.size),
                       (i, self.size), (d, 1))

    def new_index(self, k: Kernel, b, h, t, d, size: int):
        """Element (b, kv head h, new position t, d) of K (size) or V (vsize) as given."""
        if self.three_d:
            return k.index((b, self.kv_len * self.kv_heads * size),
                           (t, self.kv_heads * size), (h, size), (d, 1))
        return k.index((b, self.kv_heads * self.kv_len * size), (h, self.kv_len * size),
                       (t, size), (d, 1))

    def cache_index(self, k: Kernel, b, h, t, d, size: int, length: int):
        """Element (b, kv head h, t, d) of a (B, kv heads, length, size) cache."""
        return k.index((b, self.kv_heads * length * size), (h, length * size), (t, size),
                       (d, 1))


def _dot(k: Kernel, n: int, term) -> ir.Value:
    b = k.b
    total = k.alloca(F32)
    b.store(F32(0.0), total)
    with k.loop(n) as d:
        b.store(b.fadd(b.load(total), term(d)), total)
    return b.load(total)


def emit_attention(k: Kernel) -> None:
    """Every output of the node (Y, then present key and value, then the scores) asked for."""
    node, b = k.node, k.b
    g = _Geometry(node)
    a = node.attrs
    args = list(k.args) + [None] * (7 - len(k.args))
    q, key, value, mask, past_key, past_value, nonpad = args[:7]
    root = F32(g.root)
    outs = list(k.outs) + [None] * (4 - len(k.outs))
    y, present_key, present_value, scores_out = outs[:4]

    for present, source, past, size in ((present_key, key, past_key, g.size),
                                        (present_value, value, past_value, g.vsize)):
        if present is None:
            continue
        with k.loop(g.batch) as bb, k.loop(g.kv_heads) as h, k.loop(size) as d:
            if g.past:
                with k.loop(g.past) as t:
                    k.store(k.load(past, g.cache_index(k, bb, h, t, d, size, g.past)), present,
                            g.cache_index(k, bb, h, t, d, size, g.total))
            with k.loop(g.kv_len) as t:
                k.store(k.load(source, g.new_index(k, bb, h, t, d, size)), present,
                        g.cache_index(k, bb, h, b.add(t, I32(g.past)), d, size, g.total))

    mask_type = node.inputs[3].type if mask is not None else None
    mask_len = mask_type.shape[-1] if mask_type is not None else 0
    mask_steps = (broadcast_strides(mask_type.shape, (g.batch, g.heads, g.q_len, mask_len))
                  if mask_type is not None else None)
    cap = a["softcap"]
    left, right = a["left_window_size"], a["right_window_size"]

    def allowed_and_bias(bb, h, i, j):
        """(key j may be attended: i1, the additive float bias) for query i of head h."""
        ok = ir.Constant(ir.IntType(1), 1)
        bias = F32(0.0)
        if mask is not None:
            inside = b.icmp_signed("<", j, I32(mask_len))
            at = k.index(*zip((bb, h, i, b.select(inside, j, I32(0))), mask_steps))
            raw = k.load(mask, at)
            if mask_type.dtype == "bool":
                ok = b.and_(ok, b.and_(inside, b.icmp_unsigned("!=", raw, ir.Constant(
                    raw.type, 0))))
            else:
                bias = b.select(inside, raw, F32(NEG_INF))
        if nonpad is not None:
            length = b.trunc(k.load(nonpad, bb), I32)
            offset = b.sub(length, I32(g.q_len)) if g.past == 0 else I32(g.past)
        else:
            offset = I32(g.past)
        distance = b.sub(b.add(i, offset), j)
        if a["is_causal"]:
            ok = b.and_(ok, b.icmp_signed(">=", distance, I32(0)))
        if left >= 0:
            ok = b.and_(ok, b.icmp_signed("<=", distance, I32(left)))
        if right >= 0:
            ok = b.and_(ok, b.icmp_signed("<=", b.sub(I32(0), distance), I32(right)))
        if nonpad is not None:
            ok = b.and_(ok, b.icmp_signed("<", j, b.trunc(k.load(nonpad, bb), I32)))
        return ok, bias

    def each_key(body):
        """body(j, load(d)) for every key position: the cache's, then the new ones."""
        if g.past:
            with k.loop(g.past) as t:
                body(t, lambda bb, kh, d, t=t: k.load(
                    past_key, g.cache_index(k, bb, kh, t, d, g.size, g.past)),
                    lambda bb, kh, d, t=t: k.load(
                        past_value, g.cache_index(k, bb, kh, t, d, g.vsize, g.past)))
        with k.loop(g.kv_len) as t:
            j = b.add(t, I32(g.past)) if g.past else t
            body(j, lambda bb, kh, d, t=t: k.load(key, g.new_index(k, bb, kh, t, d, g.size)),
                 lambda bb, kh, d, t=t: k.load(value, g.new_index(k, bb, kh, t, d, g.vsize)))

    top, total, any_ok = k.alloca(F32), k.alloca(F32), k.alloca(ir.IntType(1))
    with ExitStack() as stack:
        bb = stack.enter_context(k.loop(g.batch))
        h = stack.enter_context(k.loop(g.heads))
        i = stack.enter_context(k.loop(g.q_len))
        kh = b.udiv(h, I32(g.group)) if g.group > 1 else h

        def score(j, load_key):
            """(raw, capped, biased score, allowed) of key j."""
            raw = _dot(k, g.size, lambda d: b.fmul(
                b.fmul(k.load(q, g.q_index(k, bb, h, i, d)), root),
                b.fmul(load_key(bb, kh, d), root)))
            capped = raw
            if cap > 0:
                capped = b.fmul(F32(cap), intrinsic(k, "tanh", b.fdiv(raw, F32(cap))))
            ok, bias = allowed_and_bias(bb, h, i, j)
            biased = b.select(ok, b.fadd(capped, bias), F32(NEG_INF))
            return raw, capped, biased, ok

        b.store(F32(NEG_INF), top)
        b.store(ir.Constant(ir.IntType(1), 0), any_ok)

        def first(j, load_key, load_value):
            _, _, s, ok = score(j, load_key)
            finite_bias = ok
            if mask is not None and mask_type.dtype != "bool":
                _, bias = allowed_and_bias(bb, h, i, j)
                finite_bias = b.and_(ok, b.fcmp_ordered("!=", bias, F32(NEG_INF)))
            b.store(b.or_(b.load(any_ok), finite_bias), any_ok)
            b.store(max_of(k, s, b.load(top)), top)
        each_key(first)
        peak = b.load(top)
        shift = b.select(b.fcmp_ordered("==", peak, F32(NEG_INF)), F32(0.0), peak)
        b.store(F32(0.0), total)

        def second(j, load_key, load_value):
            _, _, s, _ = score(j, load_key)
            b.store(b.fadd(b.load(total), intrinsic(k, "exp", b.fsub(s, shift))), total)
        each_key(second)
        sum_ = b.load(total)
        divisor = b.select(b.fcmp_ordered("==", sum_, F32(0.0)), F32(1.0), sum_)
        empty = b.not_(b.load(any_ok))

        def probability(s):
            p = b.fdiv(intrinsic(k, "exp", b.fsub(s, shift)), divisor)
            return b.select(empty, F32(0.0), p)

        if y is not None:
            with k.loop(g.vsize) as d:
                acc = k.alloca(F32)
                b.store(F32(0.0), acc)

                def third(j, load_key, load_value, d=d, acc=acc):
                    _, _, s, _ = score(j, load_key)
                    b.store(b.fadd(b.load(acc), b.fmul(probability(s),
                                                       load_value(bb, kh, d))), acc)
                each_key(third)
                if g.three_d:
                    at = k.index((bb, g.q_len * g.heads * g.vsize), (i, g.heads * g.vsize),
                                 (h, g.vsize), (d, 1))
                else:
                    at = k.index((bb, g.heads * g.q_len * g.vsize), (h, g.q_len * g.vsize),
                                 (i, g.vsize), (d, 1))
                k.store(b.load(acc), y, at)
        if scores_out is not None:
            mode = a["qk_matmul_output_mode"]

            def fourth(j, load_key, load_value):
                raw, capped, s, _ = score(j, load_key)
                shown = {0: raw, 1: capped, 2: s}.get(mode) if mode != 3 else probability(s)
                k.store(shown, scores_out, k.index((bb, g.heads * g.q_len * g.total),
                                                   (h, g.q_len * g.total), (i, g.total),
                                                   (j, 1)))
            each_key(fourth)
