"""RotaryEmbedding: each pair of leading features turned by its position's angle.

For batch b, position s and head h, pair i (neighbours 2i, 2i+1 when interleaved, else i and
i + dim/2) becomes (cos x1 - sin x2, sin x1 + cos x2) with cos and sin read at s (or at the
position ids' entry for s); features past rotary_embedding_dim are copied. 4-D inputs are
(batch, heads, sequence, size), 3-D ones (batch, sequence, heads x size).
"""

from __future__ import annotations

from compiler.codegen.kernel import I32, Kernel


def emit_rotary(k: Kernel) -> None:
    """The rotated pairs and the copied rest, element by element."""
    node, b = k.node, k.b
    shape = node.inputs[0].type.shape
    four_d = len(shape) == 4
    if four_d:
        batch, heads, length, size = shape
    else:
        batch, length = shape[:2]
        heads = node.attrs["num_heads"]
        size = shape[2] // heads
    dim = node.attrs["rotary_embedding_dim"] or size
    half = dim // 2
    interleaved = bool(node.attrs["interleaved"])
    x, cos, sin = k.args[:3]
    positions = k.args[3] if len(k.args) > 3 else None

    def at(bb, s, h, d):
        if four_d:
            return k.index((bb, heads * length * size), (h, length * size), (s, size), (d, 1))
        return k.index((bb, length * heads * size), (s, heads * size), (h, size), (d, 1))

    with k.loop(batch) as bb, k.loop(length) as s, k.loop(heads) as h:
        if positions is not None:
            raw = k.load(positions, k.index((bb, length), (s, 1)))
            row = b.trunc(raw, I32) if raw.type.width > 32 else raw
        else:
            row = k.index((bb, length), (s, 1))
        with k.loop(half) as i:
            first = b.mul(i, I32(2)) if interleaved else i
            second = b.add(first, I32(1)) if interleaved else b.add(i, I32(half))
            x1, x2 = k.load(x, at(bb, s, h, first)), k.load(x, at(bb, s, h, second))
            where = k.index((row, half), (i, 1))
            c, n = k.load(cos, where), k.load(sin, where)
            k.store(b.fsub(b.fmul(c, x1), b.fmul(n, x2)), k.outs[0], at(bb, s, h, first))
            k.store(b.fadd(b.fmul(n, x1), b.fmul(c, x2)), k.outs[0], at(bb, s, h, second))
        if dim < size:
            with k.loop(size - dim) as d:
                place = at(bb, s, h, b.add(d, I32(dim)))
                k.store(k.load(x, place), k.outs[0], place)
