"""The last rewrite before float code generation, recorded like every pass.

The pipeline keeps `DequantizeLinear` of constant int8 weights on purpose: an int8 kernel needs
the integers and their scales. A float32 kernel needs the float weight instead, so the compile
driver runs this pass after the pipeline, as its own stage: the Passes panel shows it, and
`kiln memory`, the Memory Timeline and the bundle all plan the graph it leaves.
"""

from __future__ import annotations

from compiler import ops
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph
from compiler.passes.base import register_pass
from compiler.passes.cleanup import dce
from compiler.passes.rewrite import Rewriter

PREPARE_PASS = "prepare_for_codegen"


@register_pass(PREPARE_PASS, "codegen")
def prepare_for_codegen(graph: Graph) -> bool:
    """Fold every DequantizeLinear of constant weights into a float constant for float kernels.

    A float kernel reads float weights, so each such node is computed once by the reference
    interpreter and its readers read the result. A model output keeps its node and name, and a
    DequantizeLinear of a runtime tensor is left to the int8 kernels.
    """
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
    return folded
