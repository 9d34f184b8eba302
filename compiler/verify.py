"""The graph verifier: the invariants every pass must keep, checked between passes in tests."""

from __future__ import annotations

from compiler import ops
from compiler.errors import KilnError, VerifyError
from compiler.ir.graph import Constant, Graph, Placeholder
from compiler.ir.types import TensorType
from compiler.ops.infer import infer_node, known_constants


def problems(graph: Graph) -> list[str]:
    """Every broken invariant, one sentence each (empty when the graph is sound)."""
    found: list[str] = []
    defined: set[int] = {id(v) for v in graph.inputs} | {id(c) for c in graph.constants.values()}
    names: dict[str, str] = {}
    ids: set[int] = set()
    for value in graph.values():
        if value.name in names:
            found.append(f"value name {value.name!r} is used twice")
        names[value.name] = value.name
    for name, const in graph.constants.items():
        if name != const.name:
            found.append(f"constant {const.name!r} is filed under {name!r}")
        if const.data.flags.writeable:
            found.append(f"constant {const.name!r} has a writeable payload")
        if TensorType.of(const.data).shape != const.type.shape:
            found.append(f"constant {const.name!r} payload does not match its type")
    known = known_constants(graph)
    for node in graph.nodes:
        where = f"node {node.name} ({node.op})"
        if node.id in ids:
            found.append(f"{where}: id {node.id} is used twice")
        ids.add(node.id)
        if node.id >= graph.next_id:
            found.append(f"{where}: id {node.id} is not below next_id {graph.next_id}")
        opdef = ops.get(node.op)
        if opdef is None:
            found.append(f"{where}: unknown operator")
            continue
        for i, value in enumerate(node.inputs):
            if value is not None and id(value) not in defined:
                found.append(f"{where}: input {i} ({value.name}) is not defined before use")
        low, high = opdef.inputs
        if not low <= len(node.inputs) <= (high if high >= 0 else len(node.inputs)):
            found.append(f"{where}: {len(node.inputs)} inputs, the operator takes {opdef.inputs}")
        for name in node.attrs:
            if name not in opdef.attrs:
                found.append(f"{where}: attribute {name!r} is not in the schema")
        for i, out in enumerate(node.outputs):
            if out.producer is not node or out.index != i:
                found.append(f"{where}: output {out.name} does not point back to its node")
            defined.add(id(out))
        try:
            types, values = infer_node(node, known)
        except KilnError as exc:
            found.append(f"{where}: {exc}")
            continue
        for out, t, v in zip(node.outputs, types, values):
            if (t.shape, t.dtype) != (out.type.shape, out.type.dtype):
                found.append(f"{where}: output {out.name} is typed {out.type}, inference says {t}")
            if v is not None:
                known[id(out)] = v
    for value in graph.outputs:
        if id(value) not in defined:
            found.append(f"graph output {value.name} is not defined")
    for value in graph.inputs:
        if not isinstance(value, Placeholder):
            found.append(f"graph input {value.name} is not a placeholder")
    for const in graph.constants.values():
        if not isinstance(const, Constant):
            found.append(f"constant table holds a non-constant {const.name}")
    return found


def verify(graph: Graph) -> None:
    """Raise VerifyError listing every problem, or return quietly."""
    found = problems(graph)
    if found:
        raise VerifyError(f"{len(found)} problem(s): " + "; ".join(found))
