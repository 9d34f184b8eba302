"""Folding passes: work whose inputs are all known at compile time is done once, by the compiler."""

from __future__ import annotations

import numpy as np

from compiler import ops
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node
from compiler.passes.base import register_pass
from compiler.passes.rewrite import Rewriter, const, is_splat, splat

# Operators that only rearrange their input: folded as numpy views, never copied.
LAYOUT_OPS = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten")

# A folded result may always take this much; beyond it, at most 4x its inputs (a dequantized
# int8 weight is exactly 4x), so folding never turns a small model into a huge one.
FOLD_ALWAYS_BYTES = 1 << 20


def rearranged(node: Node, data: np.ndarray) -> np.ndarray:
    """A layout operator applied to a constant, as a view where numpy can (splats stay splats)."""
    shape = node.output.type.shape
    if is_splat(data):
        return splat(data.flat[0], shape, data.dtype)
    if node.op == "Transpose":
        return np.transpose(data, node.attrs.get("perm"))
    return data.reshape(shape)


def _fold_outputs(rw: Rewriter, node: Node, arrays) -> None:
    for out, array in zip(node.outputs, arrays):
        if rw.is_used(out):
            rw.replace(out, rw.constant(out.name, array, out.type))


def _foldable(rw: Rewriter, node: Node) -> bool:
    """Every output that is read can become a constant (a model output keeps its node)."""
    return not any(rw.is_output(out) for out in node.outputs) and any(
        rw.is_used(out) for out in node.outputs)


@register_pass("fold_constant_layout", "simplify")
def fold_constant_layout(graph: Graph) -> bool:
    """Fold Transpose, Reshape, Squeeze, Unsqueeze and Flatten of constants into new constants.

    Weights often arrive transposed or reshaped by a node; the compiler does that once instead
    of every run. The new constant is a numpy view of the old one, so even a huge weight costs no
    copy.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes(*LAYOUT_OPS):
        if not _foldable(rw, node):
            continue
        if not all(v is None or isinstance(v, Constant) for v in node.inputs):
            continue  # the data or the shape is only known at run time
        _fold_outputs(rw, node, [rearranged(node, node.inputs[0].data)])
        changed = True
    rw.finish()
    return changed


def _evaluate(node: Node, requantized: bool = False) -> list[np.ndarray] | None:
    """The node's outputs computed now, or None when it must wait for run time."""
    opdef = ops.lookup(node.op)
    if node.op == "DequantizeLinear" and not requantized:
        return None  # an int8 weight and its scales are how a quantized model stores it
    if opdef.value_from_types is not None:  # Shape: the static types decide it
        return [np.asarray(v) for v in opdef.value_from_types(node, node.input_types())]
    arrays = [const(v) for v in node.inputs]
    if any(a is None and v is not None for a, v in zip(arrays, node.inputs)):
        return None  # an input is computed at run time
    if node.op == "ConstantOfShape":  # a splat: one element, whatever its shape
        fill = node.attrs["value"]
        out = node.output.type
        return [splat(0 if fill is None else fill.reshape(-1)[0], out.shape, out.dtype)]
    if node.op in LAYOUT_OPS:
        return [rearranged(node, arrays[0])]
    size = sum(out.type.nbytes for out in node.outputs)
    inputs = sum(a.nbytes for a in arrays if a is not None)
    if node.inputs and size > max(FOLD_ALWAYS_BYTES, 4 * inputs):
        return None  # the result would be much bigger than what it is computed from
    try:
        return opdef.run(node, arrays)
    except KilnError:
        return None  # e.g. an integer division by zero: leave the error to run time


@register_pass("fold_constants", "simplify")
def fold_constants(graph: Graph) -> bool:
    """Constant folding: a node whose inputs are all constants runs once, at compile time.

    The reference interpreter computes it and its outputs become constants: exported models build
    weights this way (ConstantOfShape, Shape arithmetic). A DequantizeLinear stays, since folding
    it would store a quantized weight in 4x the bytes and lose the scales its kernel needs;
    unless only QuantizeLinear nodes read it (a quantizer's QDQ on a model's int8 weights, as
    NNCF writes): the weight then folds to the integers of the outer quantization.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes():
        if not _foldable(rw, node):
            continue
        requantized = node.op == "DequantizeLinear" and all(
            user.op == "QuantizeLinear" for out in node.outputs for user in rw.users(out))
        arrays = _evaluate(node, requantized)
        if arrays is None:
            continue
        _fold_outputs(rw, node, arrays)
        changed = True
    rw.finish()
    return changed
