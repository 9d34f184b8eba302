"""What the generated TFLite cases are made of: the Case record and one-operator builders.

`one` writes a model of one operator on one runtime input and constants, `two` one on several
runtime inputs; 8-bit tensors take SCALE and ZERO_POINT unless a case says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.tflite.writer import Model, Op, T

SCALE, ZERO_POINT = 0.05, 3  # 8-bit tensors of the movement cases share these


@dataclass(frozen=True)
class Case:
    """A builtin's model in one configuration, for the element types it is checked in."""

    builtin: str
    label: str
    build: Callable[[bool], tuple[Model, dict]]
    dtypes: tuple[str, ...] = ("float32", "int8")
    # (rng, shape) -> float (or int32) inputs inside the builtin's domain (default: standard
    # normal), and int8 inputs likewise (default: every code).
    domain: Callable | None = None
    int8_domain: Callable | None = None

    @property
    def id(self) -> str:
        return f"{self.builtin}-{self.label}" if self.label else self.builtin


def tensor(name: str, shape, integer: bool, quant=(SCALE, ZERO_POINT)) -> T:
    if integer:
        return T(name, tuple(shape), "int8", scale=[quant[0]], zero_point=[quant[1]])
    return T(name, tuple(shape))


def const(name: str, values, dtype: str = "int32") -> T:
    values = np.asarray(values)
    return T(name, values.shape, dtype, data=values)


def one(builtin: str, x_shape, out_shapes, integer: bool, consts=(), options=None,
        data_last: bool = False, out_quant=(SCALE, ZERO_POINT)) -> tuple[Model, dict]:
    """x, then the constants (before x when `data_last`), into one operator with outputs."""
    x = tensor("x", x_shape, integer)
    consts = list(consts)
    tensors = ([*consts, x] if data_last else [x, *consts])
    outs = [tensor(f"y{i}", s, integer, out_quant) for i, s in enumerate(out_shapes)]
    tensors += outs
    inputs = list(range(len(consts) + 1))
    x_index = len(consts) if data_last else 0
    out_index = list(range(len(consts) + 1, len(tensors)))
    op = Op(builtin, inputs, out_index, options)
    return Model(tensors, [op], [x_index], out_index), {"x": tuple(x_shape)}


def two(builtin: str, a_shape, b_shape, out_shape, integer: bool, options=None,
        count: int = 2) -> tuple[Model, dict]:
    """`count` runtime inputs (a, b, then more of a's shape) into one operator."""
    shapes = [tuple(a_shape), tuple(b_shape)] + [tuple(a_shape)] * (count - 2)
    names = [f"in{i}" for i in range(count)]
    tensors = [tensor(n, s, integer) for n, s in zip(names, shapes)]
    tensors.append(tensor("y", out_shape, integer))
    op = Op(builtin, list(range(count)), [count], options)
    return Model(tensors, [op], list(range(count)), [count]), dict(zip(names, shapes))
