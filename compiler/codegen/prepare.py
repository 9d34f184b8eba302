"""Last graph rewrites before float code generation.

The pass pipeline keeps `DequantizeLinear` of constant int8 weights on purpose: an int8 kernel
needs the integers and their scales. A float32 kernel needs the float weight instead, so here,
just before code generation, each such node is computed once by the reference interpreter and
replaced by its float result.
"""

from __future__ import annotations

from compiler import ops
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph
from compiler.passes.cleanup import dce
from compiler.passes.rewrite import Rewriter


def prepare_for_codegen(graph: Graph) -> Graph:
    """A snapshot of `graph` with every constant-only DequantizeLinear folded to a float constant.

    The input graph is left untouched (it may be a pipeline snapshot the GUI still shows).
    """
    graph = graph.snapshot()
    rw = Rewriter(graph)
    folded = False
    for node in rw.nodes():
        if node.op != "DequantizeLinear":
            continue
        if not all(v is None or isinstance(v, Constant) for v in node.inputs):
            continue  # dequantizes a runtime tensor: an int8 kernel's business
        if rw.is_output(node.output):
            continue  # a model output keeps its node (and name)
        arrays = [None if v is None else v.data for v in node.inputs]
        try:
            (result,) = ops.lookup(node.op).run(node, arrays)
        except KilnError as error:
            raise KilnError(f"cannot dequantize weight {node.name}: {error}") from None
        rw.replace(node.output, rw.constant(node.output.name, result, node.output.type))
        folded = True
    rw.finish()
    if folded:
        dce(graph)
    return graph
