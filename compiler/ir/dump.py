"""A one-line-per-node text dump of a graph (like Glow's -dump-graph), for tests, CLI and diffs."""

from __future__ import annotations

import numpy as np

from compiler.ir.graph import Constant, Graph, Node, Value


def _format_attr(value) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return f"tensor({value.dtype.name}{list(value.shape)}={value.reshape(-1).tolist()})"
        return f"tensor({value.dtype.name}{list(value.shape)})"
    if isinstance(value, tuple):
        return "[" + ",".join(_format_attr(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _ref(value: Value | None) -> str:
    if value is None:
        return "_"
    prefix = "$" if isinstance(value, Constant) else "%"
    return f"{prefix}{value.name}"


def node_line(node: Node) -> str:
    """`#3 conv1 = Conv(%x, $w, $b) {strides=[1,1]} -> %y: float32[1,8,8,8]`."""
    attrs = ", ".join(f"{k}={_format_attr(v)}" for k, v in sorted(node.attrs.items())
                      if v is not None)
    outs = ", ".join(f"%{v.name}: {v.type}" for v in node.outputs)
    ins = ", ".join(_ref(v) for v in node.inputs)
    attr_text = f" {{{attrs}}}" if attrs else ""
    return f"#{node.id} {node.name} = {node.op}({ins}){attr_text} -> {outs}"


def dump(graph: Graph) -> str:
    """The whole graph: inputs, constants (type only), nodes in order, outputs."""
    lines = [f"graph {graph.name} (opset {graph.opset})"]
    lines += [f"input %{v.name}: {v.type}" for v in graph.inputs]
    lines += [f"const ${c.name}: {c.type}" for c in graph.constants.values()]
    lines += [node_line(n) for n in graph.nodes]
    lines += [f"output {_ref(v)}: {v.type}" for v in graph.outputs]
    return "\n".join(lines) + "\n"
