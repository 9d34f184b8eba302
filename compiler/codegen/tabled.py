"""Operators whose work is a table made at compile time by the operator's own reference.

Two kinds. Outputs that do not depend on any run-time value (Range, ConstantOfShape and
Unique with constant operands, Constant, EyeLike, which reads only its input's shape): the
reference's result is stored in the code and copied out. Pure rearrangements (SpaceToDepth,
DepthToSpace, Tile with constant repeats, ReverseSequence with constant lengths): the
reference applied to the element numbers 0..n-1 of the input gives, for every output element,
the input element it copies, so the kernel is one indexed load per element.
"""

from __future__ import annotations

import numpy as np

from compiler.codegen.codetables import table
from compiler.codegen.kernel import Kernel, llvm_type
from compiler.errors import KilnError
from compiler.ir.graph import Constant
from compiler.ops.registry import lookup

# Operators whose output is a rearrangement of input 0 (the others' slots must be constants).
REARRANGING = ("SpaceToDepth", "DepthToSpace", "Tile", "ReverseSequence")
# Operators whose output is known once their constant operands and input shapes are.
SHAPE_ONLY = {"EyeLike": (0,)}  # slots read for their shape only
CONSTANT_OPERANDS = ("Range", "ConstantOfShape", "Unique", "Constant")


def _constant(node, slot: int) -> np.ndarray:
    value = node.inputs[slot]
    if not isinstance(value, Constant):
        raise KilnError(f"cannot generate {node.op} {node.name}: input {slot} must be known at "
                        "compile time")
    return value.data


def emit_known_output(k: Kernel) -> None:
    """An output computed now by the reference, copied out at run time."""
    node = k.node
    shape_only = SHAPE_ONLY.get(node.op, ())
    arrays = [np.zeros(v.type.shape, v.type.dtype) if i in shape_only else _constant(node, i)
              for i, v in enumerate(node.inputs) if v is not None]
    results = lookup(node.op).reference(node, *arrays)
    results = results if isinstance(results, tuple) else (results,)
    for value, result, out in zip(node.outputs, results, k.outs):
        if value is None or out is None:
            continue
        flat = np.asarray(result).reshape(-1)
        if flat.dtype == np.bool_:
            flat = flat.astype(np.uint8)
        data = table(k, "value", flat, llvm_type(value.type.dtype))
        with k.loop(flat.size) as i:
            k.store(k.load(data, i), out, i)


def source_indices(node) -> np.ndarray:
    """For every output element, the element of input 0 it copies (the reference on 0..n-1)."""
    x = node.inputs[0].type
    numbers = np.arange(x.numel, dtype=np.int64).reshape(x.shape)
    others = [None if v is None else _constant(node, i)
              for i, v in enumerate(node.inputs) if i > 0]
    result = lookup(node.op).reference(node, numbers, *[o for o in others if o is not None])
    return np.asarray(result, np.int64).reshape(-1)


def emit_rearranged(k: Kernel) -> None:
    """out[i] = x[source[i]] with the source table of source_indices."""
    sources = source_indices(k.node)
    if sources.size and sources.max() >= 2 ** 31:
        raise KilnError(f"cannot generate {k.node.op} {k.node.name}: its input is too large "
                        "for a 32-bit index table")
    data = table(k, "source", sources.astype(np.int32))
    with k.loop(sources.size) as i:
        k.store(k.load(k.args[0], k.load(data, i)), k.outs[0], i)
