"""Reshape passes and the algebra of moving a Transpose across a Reshape."""

import numpy as np
import pytest

from compiler.passes.reshape import (
    hoist_through_reshape,
    moves_only_unit_axes,
    sink_through_reshape,
)
from tests.passes.util import Builder, apply, op_counts


def _random_case(rng):
    rank = int(rng.integers(1, 5))
    s = tuple(int(d) for d in rng.choice([1, 2, 3, 4, 6], rank))
    perm = tuple(int(p) for p in rng.permutation(rank))
    a = [s[p] for p in perm]
    b, i = [], 0
    while i < len(a):  # merge runs of one or two axes, sometimes add a unit axis
        k = int(rng.integers(1, 3))
        b.append(int(np.prod(a[i:i + k])))
        i += k
    if rng.random() < 0.5:
        b.insert(int(rng.integers(0, len(b) + 1)), 1)
    return s, perm, tuple(b)


def test_sink_and_hoist_through_reshape_are_exact_whenever_they_answer():
    rng = np.random.default_rng(0)
    answered = 0
    for _ in range(500):
        s, perm, b = _random_case(rng)
        x = rng.standard_normal(s)
        found = sink_through_reshape(s, perm, b)
        if found is not None:
            answered += 1
            shape, perm2 = found
            np.testing.assert_array_equal(np.transpose(x.reshape(shape), perm2),
                                          np.transpose(x, perm).reshape(b))
        a = tuple(s[p] for p in perm)
        z = rng.standard_normal(a)
        q = tuple(int(p) for p in rng.permutation(len(b)))
        hoisted = hoist_through_reshape(a, b, q)
        if hoisted is not None:
            perm2, c = hoisted
            np.testing.assert_array_equal(np.transpose(z, perm2).reshape(c),
                                          np.transpose(z.reshape(b), q))
    assert answered > 300


@pytest.mark.parametrize(("s", "perm", "b", "legal"), [
    ((1, 56, 56, 112), (0, 3, 1, 2), (1, 4, 28, 56, 56), True),  # a channel split
    ((1, 1, 1, 64), (0, 3, 1, 2), (1, 64), True),  # flatten of a 1x1 image
    ((1, 7, 7, 512), (0, 3, 1, 2), (1, 25088), False),  # flatten of a 7x7 image
])
def test_sink_through_reshape_knows_when_it_is_legal(s, perm, b, legal):
    assert (sink_through_reshape(s, perm, b) is not None) is legal


def test_moves_only_unit_axes():
    assert moves_only_unit_axes((1, 1, 28, 28), (0, 2, 3, 1))
    assert not moves_only_unit_axes((1, 3, 28, 28), (0, 2, 3, 1))


def test_transpose_to_reshape_only_for_unit_axis_moves():
    b = Builder()
    x = b.input("x", (1, 1, 5, 7))
    y = b.node("Transpose", [x], perm=(0, 2, 3, 1))
    z = b.node("Transpose", [b.node("Relu", [y])], perm=(0, 2, 1, 3))  # really moves data
    g = apply(b.build(z), "transpose_to_reshape")
    assert op_counts(g) == {"Reshape": 1, "Relu": 1, "Transpose": 1}


def test_merge_reshapes_collapses_a_chain_and_keeps_a_single_one():
    b = Builder()
    x = b.input("x", (2, 3, 4))
    y = b.node("Reshape", [b.node("Reshape", [x, b.ints([6, 4])]), b.ints([4, 6])])
    g = apply(b.build(b.node("Relu", [y])), "merge_reshapes")
    assert op_counts(g) == {"Reshape": 1, "Relu": 1}
    apply(g, "merge_reshapes", changed=False)
