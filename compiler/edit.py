"""Graph edits a user makes by hand: each returns a new graph and leaves its argument untouched.

Every edit works on a snapshot (constant payloads are shared, so this is cheap), checks its
preconditions first and raises KilnError with one sentence when the edit is not allowed, then
re-runs shape inference. An edit that inference rejects is still made: the nodes that fail stay
in the graph and `problems(graph)` names them, so the GUI can paint them red and the user can undo
or fix them. Keeping the old graph intact is what makes undo exact.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler import ops
from compiler.errors import KilnError, one_line
from compiler.ir.graph import Constant, Graph, Node, Placeholder, Value
from compiler.ir.types import MAX_ELEMENTS
from compiler.ops.infer import reinfer
from compiler.ops.registry import REQUIRED

# `insert_operator(..., consumer=GRAPH_OUTPUT)` inserts on the edge into the graph output only.
GRAPH_OUTPUT = "output"

# Operators the palette offers first; any other single-input operator without required
# attributes can be inserted too (see `insertable_ops`).
PALETTE = ("Relu", "Clip", "Identity", "Transpose", "Reshape")

# Problems found by the inference that ended each edit, so the document does not run it twice.
# Graphs returned by edits are never mutated afterwards, which keeps these entries valid.
_PROBLEMS: weakref.WeakKeyDictionary[Graph, dict[int, str]] = weakref.WeakKeyDictionary()


class EditError(KilnError):
    """An edit the graph does not allow (the message says why, in one sentence)."""


# -- problems -----------------------------------------------------------------------------------


def problems(graph: Graph) -> dict[int, str]:
    """Node id -> reason for every node shape inference rejects (empty for a sound graph).

    Runs inference on `graph` unless an edit already did; inference only refreshes output types,
    which for a graph that came out of an edit or the loader are already current.
    """
    found = _PROBLEMS.get(graph)
    if found is None:
        found = {node.id: one_line(reason) for node, reason in reinfer(graph)}
        _PROBLEMS[graph] = found
    return dict(found)


def _finish(graph: Graph) -> Graph:
    graph.sort()
    _PROBLEMS[graph] = {node.id: one_line(reason) for node, reason in reinfer(graph)}
    return graph


# -- lookups --------------------------------------------------------------------------------------


def _node(graph: Graph, node_id: int) -> Node:
    try:
        return graph.node(node_id)
    except KeyError:
        raise EditError(f"there is no node with id {node_id}") from None


def _value(graph: Graph, name: str) -> Value:
    try:
        return graph.value(name)
    except KeyError:
        raise EditError(f"there is no tensor named {name!r}") from None


def _describe(node: Node) -> str:
    return one_line(f"{node.op} node {node.name!r}")


def _check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise EditError(f"a {what} name cannot be empty")
    if not name.isprintable():
        raise EditError(f"the {what} name {one_line(name)!r} holds control characters")
    return name


# -- static values ------------------------------------------------------------------------------


def _static_values(graph: Graph) -> set[int]:
    """Python ids of the values known at compile time: constants, what is computed from them.

    These are a node's parameters (weights, a Reshape's target shape); the other inputs carry
    data, and only a node with one data input can be bypassed.
    """
    static = {id(c) for c in graph.constants.values()}
    for node in graph.nodes:
        opdef = ops.get(node.op)
        from_types = opdef is not None and opdef.value_from_types is not None
        if from_types or all(v is None or id(v) in static for v in node.inputs):
            static.update(id(v) for v in node.outputs)
    return static


def data_inputs(graph: Graph, node: Node) -> list[Value]:
    """The inputs of `node` that carry run-time data (not weights or compile-time shapes)."""
    static = _static_values(graph)
    return [v for v in node.inputs if v is not None and id(v) not in static]


def _is_used(graph: Graph, value: Value, ignore: Node | None = None) -> bool:
    if any(v is value for v in graph.outputs):
        return True
    return any(v is value for n in graph.nodes if n is not ignore for v in n.inputs)


def _remove_dead_feeders(graph: Graph, values: Sequence[Value | None], static: set[int]) -> None:
    """Remove the weights and constant sub-graphs that only fed a deleted node, transitively.

    A Conv's weights may come from a small constant sub-graph; once the Conv is gone those nodes
    compute nothing anyone reads, and leaving them would clutter the canvas. Data producers stay:
    deleting a node never deletes work upstream of it that the user can see.
    """
    pending = [v for v in values if v is not None and id(v) in static]
    while pending:
        value = pending.pop()
        if _is_used(graph, value):
            continue
        if isinstance(value, Constant):
            if graph.constants.get(value.name) is value:
                del graph.constants[value.name]
            continue
        producer = value.producer
        if producer is None or producer not in graph.nodes:
            continue
        if any(_is_used(graph, out) for out in producer.outputs):
            continue
        graph.remove_node(producer)
        pending.extend(v for v in producer.inputs if v is not None and id(v) in static)


# -- the edits ----------------------------------------------------------------------------------


def delete_node(graph: Graph, node_id: int) -> Graph:
    """Delete a node; with one data input it is bypassed, otherwise its outputs must be unused.

    Bypassing means the data input takes the place of the node's output for every user. When that
    output was a model output, the input tensor takes over its name so the model's interface stays
    the same. Weights and constant sub-graphs that only fed the node go with it.
    """
    new = graph.snapshot()
    node = _node(new, node_id)
    static = _static_values(new)
    used = [out for out in node.outputs if _is_used(new, out, ignore=node)]
    if used:
        inputs = [v for v in node.inputs if v is not None and id(v) not in static]
        if len(inputs) != 1:
            raise EditError(f"cannot delete {_describe(node)}: it has {len(inputs)} data inputs "
                            "and its output is used; delete or rewire its users first")
        if any(out is not node.outputs[0] for out in used):
            raise EditError(f"cannot delete {_describe(node)}: more than one of its outputs is "
                            "used")
        _bypass(new, node, inputs[0])
    new.remove_node(node)
    _remove_dead_feeders(new, node.inputs, static)
    return _finish(new)


def delete_nodes(graph: Graph, node_ids: Sequence[int], what: str = "the group") -> Graph:
    """Delete several nodes at once (a group): bypassed like one node when they are read.

    The group's one data input takes the place of its one output read outside it; with no
    output read outside, the nodes just go. Weights only they read go with them.
    """
    new = graph.snapshot()
    inside = set(node_ids)
    nodes = [n for n in new.nodes if n.id in inside]
    if len(nodes) != len(inside):
        raise EditError(f"cannot delete {what}: some of its nodes are no longer in the graph")
    static = _static_values(new)
    made = {id(out) for n in nodes for out in n.outputs}
    inputs = list(dict.fromkeys(v for n in nodes for v in n.inputs if v is not None
                                and id(v) not in static and id(v) not in made))
    read = {id(v) for n in new.nodes if n.id not in inside for v in n.inputs if v is not None}
    read |= {id(v) for v in new.outputs}
    used = [out for n in nodes for out in n.outputs if id(out) in read]
    if used:
        if len(inputs) != 1 or len(used) != 1:
            raise EditError(f"cannot delete {what}: it has {len(inputs)} data inputs and "
                            f"{len(used)} outputs read outside it; delete or rewire its users "
                            "first")
        _bypass(new, used[0].producer, inputs[0], used[0])
    for node in reversed(nodes):
        new.remove_node(node)
    _remove_dead_feeders(new, [v for n in nodes for v in n.inputs], static)
    return _finish(new)


def _bypass(graph: Graph, node: Node, source: Value, out: Value | None = None) -> None:
    out = out if out is not None else node.output
    is_model_output = any(v is out for v in graph.outputs)
    graph.replace_uses(out, source)
    keeps_name = (is_model_output and source.producer is not None
                  and sum(v is source for v in graph.outputs) == 1)
    if keeps_name:
        # The deleted output's name is free once its node is gone; the model keeps its interface.
        source.name = out.name


def set_attribute(graph: Graph, node_id: int, name: str, value: Any) -> Graph:
    """Set one attribute, checked against the operator's schema kind; inference then re-runs.

    None resets an optional attribute to its default. A value of the right kind that the operator
    cannot accept (a kernel that does not match the weights) is made anyway: the node is reported
    by `problems` until the user fixes or undoes it.
    """
    new = graph.snapshot()
    node = _node(new, node_id)
    opdef = ops.lookup(node.op)
    spec = opdef.attrs.get(name)
    if spec is None:
        raise EditError(f"{node.op} has no attribute {name!r}")
    if not spec.onnx:  # Kiln's own (layout, fused activation): set by passes, not by hand
        raise EditError(f"the {name!r} attribute is set by the compiler and cannot be edited")
    if value is None:
        if spec.default is REQUIRED:
            raise EditError(f"{node.op}'s {name!r} attribute is required and cannot be unset")
        value = spec.default
    else:
        value = coerce_attribute(spec.kind, value, name)
    node.attrs[name] = value
    return _finish(new)


def rename_node(graph: Graph, node_id: int, new_name: str) -> Graph:
    """Give a node another name, unique among node names."""
    new = graph.snapshot()
    node = _node(new, node_id)
    _check_name(new_name, "node")
    if new_name != node.name and any(n.name == new_name for n in new.nodes):
        raise EditError(f"another node is already named {one_line(new_name)!r}")
    node.name = new_name
    return _finish(new)


def rename_value(graph: Graph, old_name: str, new_name: str) -> Graph:
    """Give a tensor (graph input, constant or node output) another name, unique among tensors."""
    new = graph.snapshot()
    value = _value(new, old_name)
    _check_name(new_name, "tensor")
    if new_name != old_name and any(v.name == new_name for v in new.values()):
        raise EditError(f"another tensor is already named {one_line(new_name)!r}")
    value.name = new_name
    if isinstance(value, Constant):
        # Keep the declaration order, which the dump and the saved file follow.
        new.constants = {(new_name if k == old_name else k): c for k, c in new.constants.items()}
    new.reserve_names([new_name])
    return _finish(new)


def set_input_shape(graph: Graph, input_name: str, shape: Sequence[int]) -> Graph:
    """Change a graph input's static shape; every downstream shape is inferred again."""
    new = graph.snapshot()
    value = _value(new, input_name)
    if not isinstance(value, Placeholder):
        raise EditError(f"{one_line(input_name)!r} is not a graph input")
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise EditError(f"the shape {shape!r} is not a list of integers") from None
    if any(d < 0 for d in dims):
        raise EditError(f"the shape {list(dims)} has a negative dimension")
    if math.prod(dims) > MAX_ELEMENTS:
        raise EditError(f"the shape {list(dims)} exceeds the limit of 2**31 elements")
    value.type = value.type.with_shape(dims)
    return _finish(new)


def insertable_ops() -> list[str]:
    """Operators `insert_operator` can place on an edge: the palette's, then other unary ones."""
    extra = sorted(op.name for op in ops.all_ops()
                   if op.inputs == (1, 1) and op.outputs[0] == 1 and op.name not in PALETTE
                   and op.category not in ("constant", "quant") and op.value_from_types is None
                   and all(a.default is not REQUIRED for a in op.attrs.values()))
    return list(PALETTE) + extra


def insert_operator(graph: Graph, value_name: str, op: str, attrs: dict[str, Any] | None = None,
                    consumer: int | str | None = None) -> Graph:
    """Insert a single-input operator on the edge carrying `value_name`.

    Args:
        graph: The graph (unchanged).
        value_name: The tensor on the edge.
        op: The operator (see `insertable_ops`).
        attrs: Attributes of the new node. Beside schema attributes, Clip accepts `min` and `max`
            (default 0 and 6) and Reshape `shape` (default: the tensor's own shape); they become
            constant inputs. Transpose defaults to the identity permutation, so the insertion
            itself never breaks a shape.
        consumer: None to feed every user of the tensor, a node id to feed only that node, or
            GRAPH_OUTPUT for the model output only.
    """
    new = graph.snapshot()
    value = _value(new, value_name)
    opdef = ops.get(op)
    if opdef is None or op not in insertable_ops():
        raise EditError(f"{one_line(op)!r} cannot be inserted on an edge")
    attrs = dict(attrs or {})
    extra_inputs = _extra_inputs(new, value, op, attrs)
    node_attrs = {k: a.default for k, a in opdef.attrs.items()}
    if op == "Transpose" and attrs.get("perm") is None:
        attrs["perm"] = tuple(range(value.type.rank))
    for key, raw in attrs.items():
        spec = opdef.attrs.get(key)
        if spec is None:
            raise EditError(f"{op} has no attribute {key!r}")
        node_attrs[key] = spec.default if raw is None else coerce_attribute(spec.kind, raw, key)

    users = _users_to_rewire(new, value, consumer)
    node = new.add_node(op, [value, *extra_inputs], [value.type], node_attrs)
    out = node.output
    for user, index in users:
        if user is GRAPH_OUTPUT:
            new.outputs[index] = out
        else:
            user.inputs[index] = out
    feeds_output = any(user is GRAPH_OUTPUT for user, _ in users)
    if feeds_output and not isinstance(value, (Placeholder, Constant)):
        # The model output keeps its name: the inserted node takes it over.
        value.name, out.name = new.unique_name(f"{value.name}_pre"), value.name
    return _finish(new)


def _extra_inputs(graph: Graph, value: Value, op: str, attrs: dict[str, Any]) -> list[Value]:
    dtype = value.type.dtype
    if op == "Clip":
        low, high = attrs.pop("min", 0.0), attrs.pop("max", 6.0)
        try:
            bounds = [np.array(low, dtype), np.array(high, dtype)]
        except (TypeError, ValueError):
            raise EditError(f"Clip bounds {low!r} and {high!r} must be numbers") from None
        return [graph.add_constant(f"{value.name}_clip_min", bounds[0]),
                graph.add_constant(f"{value.name}_clip_max", bounds[1])]
    if op == "Reshape":
        shape = attrs.pop("shape", value.type.shape)
        try:
            target = np.array([int(d) for d in shape], np.int64)
        except (TypeError, ValueError):
            raise EditError(f"the Reshape target {shape!r} is not a list of integers") from None
        return [graph.add_constant(f"{value.name}_shape", target)]
    return []


def _users_to_rewire(graph: Graph, value: Value, consumer: int | str | None) -> list:
    node_users: list[tuple[Any, int]] = graph.users(value)
    output_users: list[tuple[Any, int]] = [(GRAPH_OUTPUT, i) for i, v in enumerate(graph.outputs)
                                          if v is value]
    if consumer is None:
        users = node_users + output_users
    elif consumer == GRAPH_OUTPUT:
        users = output_users
    else:
        users = [(n, i) for n, i in node_users if n.id == consumer]
    if not users:
        where = "any user" if consumer is None else (
            "the model output" if consumer == GRAPH_OUTPUT else f"node {consumer}")
        raise EditError(f"tensor {one_line(value.name)!r} does not feed {where}")
    return users


# -- attribute values -----------------------------------------------------------------------------


def coerce_attribute(kind: str, value: Any, name: str = "attribute") -> Any:
    """`value` as the schema kind stores it (ints as int, lists as tuples); EditError otherwise."""
    def bad() -> EditError:
        return EditError(f"{name} should be {_KIND_WORDS[kind]}, not {one_line(repr(value))}")

    try:
        if kind == "int":
            if isinstance(value, (bool, np.bool_)) or float(value) != int(value):
                raise bad()
            return int(value)
        if kind == "float":
            if isinstance(value, (bool, np.bool_, str)):
                raise bad()
            return float(value)
        if kind == "string":
            if not isinstance(value, str):
                raise bad()
            return value
        if kind == "tensor":
            return np.asarray(value)
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
            raise bad()
        items = list(value)
        if kind == "ints":
            return tuple(coerce_attribute("int", v, name) for v in items)
        if kind == "floats":
            return tuple(coerce_attribute("float", v, name) for v in items)
        if not all(isinstance(v, str) for v in items):
            raise bad()
        return tuple(items)
    except (TypeError, ValueError, OverflowError):
        raise bad() from None


_KIND_WORDS = {"int": "an integer", "float": "a number", "string": "a string",
               "tensor": "a tensor", "ints": "a list of integers", "floats": "a list of numbers",
               "strings": "a list of strings"}


def parse_attribute(kind: str, text: str, name: str = "attribute") -> Any:
    """Parse what a user typed for an attribute of `kind`: `3`, `1.5`, `[1, 2]` or `1,2`.

    An empty text means "unset" (None) for the optional attributes that allow it.
    """
    text = text.strip()
    if not text:
        return None
    if kind == "string":
        return text
    if kind == "tensor":
        raise EditError(f"{name} is a tensor and cannot be typed in")
    if kind in ("int", "float"):
        try:
            number = float(text) if kind == "float" else int(text)
        except ValueError:
            raise EditError(f"{name} should be {_KIND_WORDS[kind]}, not {one_line(text)!r}") \
                from None
        return number
    inner = text[1:-1] if text[:1] in "[(" and text[-1:] in "])" else text
    parts = [p.strip() for p in inner.split(",") if p.strip()]
    if kind == "strings":
        return tuple(p.strip("'\"") for p in parts)
    item = "int" if kind == "ints" else "float"
    return tuple(parse_attribute(item, p, name) for p in parts)


def format_attribute(value: Any) -> str:
    """The text `parse_attribute` reads back: lists as `[1, 2]`, tensors as their shape."""
    if value is None:
        return ""
    if isinstance(value, np.ndarray):
        return f"tensor {value.dtype.name}{list(value.shape)}"
    if isinstance(value, tuple):
        return "[" + ", ".join(format_attribute(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_insert_parameters(op: str, text: str) -> dict[str, Any]:
    """The `attrs` of `insert_operator` from the one parameter a user types for `op`.

    Clip takes `min, max`; Reshape a shape; Transpose a permutation; LeakyRelu its alpha. Empty
    text keeps the defaults.
    """
    if not text.strip():
        return {}
    if op == "Clip":
        bounds = parse_attribute("floats", text, "Clip's bounds")
        if len(bounds) != 2:
            raise EditError("Clip's bounds should be two numbers: min, max")
        return {"min": bounds[0], "max": bounds[1]}
    if op == "Reshape":
        return {"shape": parse_attribute("ints", text, "the Reshape target")}
    if op == "Transpose":
        return {"perm": parse_attribute("ints", text, "perm")}
    if op == "LeakyRelu":
        return {"alpha": parse_attribute("float", text, "alpha")}
    raise EditError(f"{op} takes no parameter when inserted; edit its attributes afterwards")
