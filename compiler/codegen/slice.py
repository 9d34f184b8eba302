"""Slice and Split with compile-time parameters: strided copies out of the input."""

from __future__ import annotations

from contextlib import ExitStack

from compiler.codegen.kernel import Kernel, constant_input, strides
from compiler.ops.gather import _slices, _split_sizes


def _ints(k: Kernel, slot: int) -> list[int] | None:
    data = constant_input(k, slot, f"input {slot}")
    return None if data is None else [int(v) for v in data.reshape(-1)]


def _copy(k: Kernel, out_index: int, starts: list[int], steps: list[int]) -> None:
    """outs[out_index][i] = x[starts + i * steps], every axis, output in memory order."""
    shape = k.node.inputs[0].type.shape
    out = k.node.outputs[out_index].type.shape
    if 0 in out:
        return
    x_strides, y_strides = strides(shape), strides(out)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        src = k.index(*((i, step * s) for i, step, s in zip(idx, steps, x_strides)),
                      base=sum(a * s for a, s in zip(starts, x_strides)))
        k.store(k.load(k.args[0], src), k.outs[out_index], k.index(*zip(idx, y_strides)))


def emit_slice(k: Kernel) -> None:
    """A strided window (steps may be negative) copied out with constant strides."""
    shape = k.node.inputs[0].type.shape
    params = [_ints(k, slot) for slot in (1, 2, 3, 4)]
    slices = _slices(shape, *params)
    starts = [s.indices(d)[0] for s, d in zip(slices, shape)]
    steps = [s.indices(d)[2] for s, d in zip(slices, shape)]
    _copy(k, 0, starts, steps)


def emit_split(k: Kernel) -> None:
    """Each output is the next block along the axis; one copy loop per output."""
    node = k.node
    shape = node.inputs[0].type.shape
    axis = int(node.attrs.get("axis", 0)) % len(shape)
    sizes = _split_sizes(node, shape, _ints(k, 1))
    start = 0
    for j, size in enumerate(sizes):
        starts = [start if a == axis else 0 for a in range(len(shape))]
        _copy(k, j, starts, [1] * len(shape))
        start += size
