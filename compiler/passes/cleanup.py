"""Cleanup passes: identity and no-op removal, dead-code and common-subexpression elimination."""

from __future__ import annotations

import numpy as np

from compiler.ir.graph import Graph, Node
from compiler.passes.base import register_pass
from compiler.passes.rewrite import Rewriter, const, live_nodes, perm_of

# Constants up to this many elements are compared by content in CSE (shape vectors, scalars);
# hashing big weights would cost more than it could save.
_CSE_CONSTANT_LIMIT = 1024


@register_pass("remove_identity", "simplify")
def remove_identity(graph: Graph) -> bool:
    """Remove Identity and inference-time Dropout nodes: both hand their input on unchanged.

    Their readers read the input directly instead. A Dropout whose mask output is read stays,
    and so does a node whose removal would rename a model output to a model input.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Identity", "Dropout"):
        if any(rw.is_used(out) for out in node.outputs[1:]):
            continue  # Dropout's mask is read: the node still computes something
        changed |= _bypass(rw, node)
    rw.finish()
    return changed


def _bypass(rw: Rewriter, node: Node) -> bool:
    """Let the readers of `node`'s output read its first input instead, when that is allowed."""
    if not rw.can_replace(node.output, node.inputs[0]):
        return False  # a model output would lose its name
    rw.replace(node.output, node.inputs[0])
    return True


def _is_noop(node: Node) -> bool:
    x, y = node.inputs[0], node.output
    if node.op == "Transpose":
        return perm_of(node) == tuple(range(x.type.rank))
    if node.op in ("Reshape", "Cast"):
        return y.type == x.type
    if node.op == "Pad":
        pads = const(node.inputs[1])
        return pads is not None and not pads.any()
    if node.op == "Slice":
        given = node.inputs[4] if len(node.inputs) > 4 else None
        steps = const(given)
        if given is not None and steps is None:
            return False
        # Same shape with forward steps means every axis is taken whole.
        return y.type.shape == x.type.shape and (steps is None or bool((steps > 0).all()))
    if node.op in ("Concat", "Sum", "Mean", "Max", "Min"):
        return len(node.inputs) == 1 and y.type == x.type
    return False


@register_pass("remove_noops", "simplify")
def remove_noops(graph: Graph) -> bool:
    """Remove nodes that return their input unchanged.

    A Reshape or Cast to the same type, a Transpose by the identity permutation, a Pad of zeros,
    a Slice of everything and a Concat or Sum of one tensor all qualify. Exporters and earlier
    passes leave such nodes behind, and each would still cost a copy.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes():
        if not node.inputs or node.inputs[0] is None or not _is_noop(node):
            continue
        changed |= _bypass(rw, node)
    rw.finish()
    return changed


@register_pass("dce", "simplify")
def dce(graph: Graph) -> bool:
    """Dead-code elimination: delete nodes no model output depends on, and unread constants.

    Other passes only rewire readers and leave the nodes they replaced behind; this pass is
    where those nodes disappear.
    """
    live = live_nodes(graph)
    kept = [n for n in graph.nodes if id(n) in live]
    removed = len(kept) != len(graph.nodes)
    graph.nodes = kept
    used = {id(v) for n in kept for v in n.inputs if v is not None}
    used.update(id(v) for v in graph.outputs)
    unused = [name for name, c in graph.constants.items() if id(c) not in used]
    for name in unused:
        del graph.constants[name]
    return removed or bool(unused)


def _freeze(value):
    """A hashable stand-in for an attribute value; None for arrays too big to compare."""
    if isinstance(value, np.ndarray):
        if value.size > _CSE_CONSTANT_LIMIT:
            raise ValueError("too big to compare")
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float) and value != value:
        return ("nan",)
    return value


@register_pass("cse", "simplify")
def cse(graph: Graph) -> bool:
    """Common-subexpression elimination: equal nodes on equal inputs are computed once.

    Two nodes applying the same operator with the same attributes to the same inputs compute the
    same values, so readers of the later one read the earlier one instead. Small constants with
    equal contents (shape vectors, scalars) are merged first, so that nodes reading copies of one
    constant count as equal too.
    """
    rw = Rewriter(graph)
    changed = False
    first_const: dict[tuple, object] = {}
    for value in list(graph.constants.values()):
        data = value.data
        if data.size > _CSE_CONSTANT_LIMIT or not rw.is_used(value):
            continue
        key = (data.dtype.str, data.shape, data.tobytes(), value.type)
        kept = first_const.setdefault(key, value)
        if kept is not value and rw.can_replace(value, kept):
            rw.replace(value, kept)
            changed = True
    first: dict[tuple, Node] = {}
    for node in rw.nodes():
        try:
            attrs = tuple(sorted((k, _freeze(v)) for k, v in node.attrs.items()))
        except ValueError:
            continue  # a big tensor attribute: not worth comparing
        key = (node.op, tuple(id(v) for v in node.inputs), attrs, len(node.outputs))
        kept = first.setdefault(key, node)
        if kept is node:
            continue
        pairs = list(zip(node.outputs, kept.outputs))
        if not all(rw.can_replace(old, new) for old, new in pairs):
            continue  # both are model outputs: each keeps its name
        for old, new in pairs:
            rw.replace(old, new)
        changed = True
    rw.finish()
    return changed
