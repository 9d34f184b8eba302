"""Shape and type inference over a whole graph, with compile-time values where they are small.

Static shapes sometimes depend on values (Reshape's shape input, Slice's starts); those values are
often computed in the graph from constants and `Shape`. Inference therefore carries the value of
every small tensor it can compute, without changing the graph (folding is a pass's job).
"""

from __future__ import annotations

import numpy as np

from compiler.errors import KilnError, ShapeError
from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.ir.types import MAX_ELEMENTS, TensorType
from compiler.limits import check_tensor_bytes, max_tensor_bytes
from compiler.ops.registry import lookup

# Tensors up to this many elements are evaluated during inference when all inputs are known.
KNOWN_VALUE_LIMIT = 1 << 16


def infer_node(node: Node, known: dict[int, np.ndarray],
               limit: int | None = None) -> tuple[list[TensorType], list]:
    """Output types of `node` and, when computable cheaply, their values.

    `known` maps id(value) to the compile-time array of that value; `limit` is the tensor byte
    limit when the caller read it once (a loader, for every node). Raises ShapeError with the
    reason when the node cannot accept its inputs.
    """
    opdef = lookup(node.op)
    in_types = node.input_types()
    in_values = [None if v is None else known.get(id(v)) for v in node.inputs]
    out_types = opdef.infer(node, in_types, in_values)
    if limit is None:
        limit = max_tensor_bytes()  # read once per node: this runs for every node a pass makes
    for t in out_types:
        if t.shape and min(t.shape) < 0:
            raise ShapeError(f"inferred a negative dimension in {list(t.shape)}")
        if t.nbytes > limit:
            check_tensor_bytes(t.nbytes, f"its output {t}")
        if t.numel > MAX_ELEMENTS:
            raise ShapeError(f"output of {t.numel} elements exceeds the limit of 2**31")
    values: list = [None] * len(out_types)
    if opdef.value_from_types is not None:
        values = list(opdef.value_from_types(node, in_types))
    elif (all(v is not None for v, i in zip(in_values, node.inputs) if i is not None)
          and sum(t.numel for t in out_types) <= KNOWN_VALUE_LIMIT
          and all(t.numel <= KNOWN_VALUE_LIMIT for t in in_types if t is not None)):
        values = opdef.run(node, in_values)
    return out_types, values


def known_constants(graph: Graph) -> dict[int, np.ndarray]:
    """The compile-time value table seeded with the graph's constants."""
    return {id(c): c.data for c in graph.constants.values()}


def reinfer(graph: Graph) -> list[tuple[Node, str]]:
    """Recompute every node's output types in place; returns (node, reason) for nodes that fail.

    Nodes downstream of a failed node keep their old types, so one bad edit reports one problem.
    """
    known = known_constants(graph)
    problems: list[tuple[Node, str]] = []
    for node in graph.nodes:
        try:
            types, values = infer_node(node, known)
        except KilnError as exc:
            problems.append((node, str(exc)))
            continue
        if len(types) < len(node.outputs):  # more is fine: unused optional outputs
            problems.append((node, f"expected {len(node.outputs)} outputs, inference gave "
                                   f"{len(types)}"))
            continue
        for out, t, v in zip(node.outputs, types, values):
            out.type = t
            if v is not None:
                known[id(out)] = v
    return problems


def is_constant(value: Value | None) -> bool:
    """True for a Constant value."""
    return isinstance(value, Constant)
