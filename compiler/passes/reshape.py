"""Reshape passes, and the algebra of moving a Transpose across a Reshape.

A Reshape keeps the elements in row-major order, so it can always be read as: merge runs of
consecutive axes, then split them again. A Transpose commutes with it when every run it merges
comes from consecutive axes, in order, on the other side of the Transpose.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.graph import Graph
from compiler.passes.base import register_pass
from compiler.passes.rewrite import Rewriter, inverse, perm_of, reshape_attrs, shape_constant

Shape = tuple[int, ...]


def axis_groups(a: Sequence[int], b: Sequence[int]) -> list[tuple[list[int], list[int]]] | None:
    """Pair the non-unit axes of shapes `a` and `b` into runs with equal products.

    Each pair (axes of a, axes of b) is one merge-then-split of a reshape from a to b. None when
    a dimension is zero (nothing to reason about).
    """
    if 0 in a or 0 in b:
        return None
    xs = [i for i, d in enumerate(a) if d != 1]
    ys = [j for j, d in enumerate(b) if d != 1]
    groups, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        ga, gb = [xs[i]], [ys[j]]
        pa, pb = a[xs[i]], b[ys[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb and i < len(xs):
                ga.append(xs[i])
                pa *= a[xs[i]]
                i += 1
            elif pb < pa and j < len(ys):
                gb.append(ys[j])
                pb *= b[ys[j]]
                j += 1
            else:
                return None
        groups.append((ga, gb))
    return groups if i == len(xs) and j == len(ys) else None


def sink_through_reshape(s: Shape, perm: Sequence[int], b: Shape) -> tuple[Shape, Shape] | None:
    """(s2, perm2) with reshape(transpose(x, perm), b) == transpose(reshape(x, s2), perm2).

    `x` has shape `s`. None when the Reshape merges axes that the Transpose took from
    non-adjacent places (then no such pair exists).
    """
    a = tuple(s[p] for p in perm)
    groups = axis_groups(a, b)
    if groups is None:
        return None
    nonunit = [k for k, d in enumerate(s) if d != 1]
    rank_of = {k: r for r, k in enumerate(nonunit)}
    group_at: dict[int, int] = {}  # axis of x where a group starts -> group index
    for g, (ga, _) in enumerate(groups):
        src = [rank_of[perm[axis]] for axis in ga]
        if src != list(range(src[0], src[0] + len(src))):
            return None
        group_at[nonunit[src[0]]] = g
    # x's axes in order: a unit axis is a slot for one of b's unit axes, the first axis of a group
    # becomes that group's axes of b.
    b_units = [j for j, d in enumerate(b) if d == 1]
    order: list[int] = []
    for k, d in enumerate(s):
        if d == 1:
            if b_units:
                order.append(b_units.pop(0))
        elif k in group_at:
            order.extend(groups[group_at[k]][1])
    order.extend(b_units)
    position = {axis: i for i, axis in enumerate(order)}
    return tuple(b[axis] for axis in order), tuple(position[j] for j in range(len(b)))


def hoist_through_reshape(a: Shape, b: Shape, perm: Sequence[int]) -> tuple[Shape, Shape] | None:
    """(perm2, c) with transpose(reshape(z, b), perm) == reshape(transpose(z, perm2), c).

    `z` has shape `a`; `c` is the final shape. This is sink_through_reshape run backwards.
    """
    c = tuple(b[p] for p in perm)
    found = sink_through_reshape(c, inverse(perm), a)
    if found is None:
        return None
    return inverse(found[1]), c


def moves_only_unit_axes(shape: Shape, perm: Sequence[int]) -> bool:
    """True when a Transpose keeps the order of the non-unit axes: it is then a Reshape."""
    kept = [p for p in perm if shape[p] != 1]
    return kept == sorted(kept)


@register_pass("transpose_to_reshape", "layout")
def transpose_to_reshape(graph: Graph) -> bool:
    """Turn a Transpose that only moves axes of size 1 into a Reshape.

    Such a Transpose leaves the elements in memory order, so it is a Reshape, which costs
    nothing (a view) where a Transpose copies; it typically sits between a 1x1 pooled image and
    a classifier, or on a one-channel input.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Transpose"):
        x, y = node.inputs[0], node.output
        if not moves_only_unit_axes(x.type.shape, perm_of(node)) or perm_of(node) == tuple(
                range(x.type.rank)):
            continue  # really moves data (the identity is remove_noops' job)
        shape = shape_constant(graph, f"{node.name}_shape", y.type.shape)
        new = rw.add("Reshape", [x, shape], reshape_attrs(y.type.shape), replaces=[node])
        rw.replace(y, new.output)
        changed = True
    rw.finish()
    return changed


@register_pass("merge_reshapes", "simplify")
def merge_reshapes(graph: Graph) -> bool:
    """Replace a Reshape of a Reshape by one Reshape of the original tensor.

    Only the final shape matters for row-major data, so the intermediate shape is dropped (and
    a chain that ends where it began becomes a no-op for remove_noops).
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Reshape"):
        inner = rw.producer(node.inputs[0], "Reshape")
        if inner is None:
            continue
        shape = node.output.type.shape
        target = shape_constant(graph, f"{node.name}_shape", shape)
        new = rw.add("Reshape", [inner.inputs[0], target], reshape_attrs(shape),
                     replaces=[node, inner])
        rw.replace(node.output, new.output)
        changed = True
    rw.finish()
    return changed
