"""broadcast_shape follows numpy's rule exactly (it is plain Python for speed)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import KilnError
from compiler.ops._util import broadcast_shape


def _numpy(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _ours(*shapes):
    try:
        return broadcast_shape(*shapes)
    except KilnError:
        return None


def test_random_shapes_agree_with_numpy():
    rng = np.random.default_rng(0)
    dims = [0, 1, 1, 2, 3, 4]
    agreed = refused = 0
    for _ in range(5000):
        count = int(rng.integers(1, 4))
        shapes = [tuple(int(rng.choice(dims)) for _ in range(int(rng.integers(0, 5))))
                  for _ in range(count)]
        expected = _numpy(*shapes)
        assert _ours(*shapes) == expected, shapes
        agreed += expected is not None
        refused += expected is None
    assert agreed > 1000 and refused > 1000  # both outcomes were exercised


@pytest.mark.parametrize("shapes", [((1,), (-1,)), ((2, -3),), ((-1,), (1,))])
def test_negative_dimensions_are_refused(shapes):
    assert _numpy(*shapes) is None
    with pytest.raises(KilnError, match="negative"):
        broadcast_shape(*shapes)
