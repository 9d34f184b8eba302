"""Small helpers shared by operator definitions (broadcasting, axes, attribute access)."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops.registry import fail


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """Numpy-style multidirectional broadcasting of shapes, as ONNX defines it.

    Plain Python: every element-wise node of a graph asks, and numpy's version costs more
    than the whole rule on the short tuples shapes are.
    """
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for shape in shapes:
        offset = rank - len(shape)
        for i, d in enumerate(shape):
            d = int(d)
            have = out[offset + i]
            if d < 0:
                fail(f"shape {list(shape)} has a negative dimension")
            if d == have or d == 1:
                continue
            if have == 1:
                out[offset + i] = d
            else:
                fail(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
    return tuple(out)


def normalize_axis(axis: int, rank: int) -> int:
    """A possibly negative axis turned into 0..rank-1, rejecting out-of-range values."""
    if not -rank <= axis < max(rank, 1):
        fail(f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def normalize_axes(axes, rank: int) -> tuple[int, ...]:
    """Several axes normalized (see normalize_axis), order kept, duplicates rejected."""
    out = tuple(normalize_axis(int(a), rank) for a in axes)
    if len(set(out)) != len(out):
        fail(f"axes {list(axes)} repeat an axis")
    return out


def same_as_input(node, ins, values) -> list[TensorType]:
    """Inference for operators whose single output has the type of their first input."""
    return [TensorType(ins[0].shape, ins[0].dtype)]


def require_known(values, index: int, what: str) -> np.ndarray:
    """The compile-time value of input `index`; static shapes need it known."""
    value = values[index] if index < len(values) else None
    if value is None:
        fail(f"{what} must be known at compile time (a constant or computed from shapes)")
    return value
