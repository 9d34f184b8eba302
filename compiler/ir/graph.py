"""The typed graph: nodes joined by values, with constants, placeholders and explicit outputs.

A value is one output of one node (or a graph input, or a constant). Every node carries a stable
integer id and its provenance: the ids of the source-model nodes it came from, so that the GUI
can keep layouts stable across passes and a fused node can say what it replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from compiler.errors import VerifyError
from compiler.ir.types import TensorType
from compiler.ir.walk import CycleError, post_order


def _claim(taken: set[str], base: str) -> str:
    name, i = base, 1
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    taken.add(name)
    return name


class Value:
    """An edge of the graph: a named, typed tensor produced by at most one node."""

    __slots__ = ("name", "type", "producer", "index")

    def __init__(self, name: str, type: TensorType, producer: Node | None = None, index: int = 0):
        self.name = name
        self.type = type
        self.producer = producer
        self.index = index

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.type})"


class Placeholder(Value):
    """A graph input: its contents arrive at run time and the compiler never inspects them."""

    __slots__ = ()


class Constant(Value):
    """A tensor known at compile time (a weight). Its payload is an immutable numpy array.

    Payloads are shared between snapshots, never copied: passes that change a weight make a new
    Constant instead of writing into the array.
    """

    __slots__ = ("data",)

    def __init__(self, name: str, data: np.ndarray, type: TensorType | None = None):
        data = np.asarray(data)
        if data.flags.writeable:
            data = data.view()
            data.flags.writeable = False
        self.data = data
        super().__init__(name, type or TensorType.of(data))


class Node:
    """One operator application. `attrs` follow the operator's schema in `compiler.ops`."""

    __slots__ = ("id", "op", "name", "inputs", "outputs", "attrs", "provenance")

    def __init__(self, id: int, op: str, name: str, inputs: list[Value | None],
                 outputs: list[Value], attrs: dict[str, Any], provenance: tuple[int, ...]):
        self.id = id
        self.op = op
        self.name = name
        self.inputs = inputs  # None marks an omitted optional input
        self.outputs = outputs
        self.attrs = attrs
        self.provenance = provenance

    @property
    def output(self) -> Value:
        """The first (usually only) output."""
        return self.outputs[0]

    def input_types(self) -> list[TensorType | None]:
        """Types of the inputs, None for omitted optional ones."""
        return [v.type if v is not None else None for v in self.inputs]

    def runtime_inputs(self) -> list[Value]:
        """The inputs computed at run time: buffers, not constants (which live in flash)."""
        return [v for v in self.inputs if v is not None and not isinstance(v, Constant)]

    def __repr__(self) -> str:
        return f"Node(#{self.id} {self.op} {self.name!r})"


class Graph:
    """A model as the compiler sees it: inputs and constants, ordered nodes, explicit outputs.

    Nodes are kept in topological order. The graph also keeps what it needs to save itself back
    to ONNX faithfully: the opset it was loaded at and the model's metadata.
    """

    def __init__(self, name: str = "graph", opset: int = 17):
        self.name = name
        self.opset = opset
        self.inputs: list[Placeholder] = []
        self.constants: dict[str, Constant] = {}
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.metadata: dict[str, Any] = {}
        # When set, an output's elements may come in any order (layout passes may leave it
        # channels-last): what a profile of ranges and histograms needs, and nothing else.
        self.free_output_order = False
        self.next_id = 0
        self._names: set[str] | None = None  # caches of taken names, built on first use
        self._nodes_named: set[str] | None = None

    # -- building -----------------------------------------------------------------------------

    def add_input(self, name: str, type: TensorType) -> Placeholder:
        """Add a graph input."""
        value = Placeholder(name, type)
        self.inputs.append(value)
        self.reserve_names([name])
        return value

    def add_constant(self, name: str, data: np.ndarray, type: TensorType | None = None) -> Constant:
        """Add a constant, renaming it if the name is taken; returns the new value."""
        name = self.unique_name(name)
        value = Constant(name, data, type)
        self.constants[name] = value
        return value

    def add_node(self, op: str, inputs: Iterable[Value | None], output_types: Iterable[TensorType],
                 attrs: dict[str, Any] | None = None, name: str | None = None,
                 output_names: Iterable[str] | None = None, provenance: Iterable[int] | None = None,
                 node_id: int | None = None) -> Node:
        """Append a node; names default to unique ones derived from the op, provenance to itself.

        The node goes at the end of `nodes`; callers that insert mid-graph call `sort()` after.
        """
        if node_id is None:
            node_id = self.next_id
        self.next_id = max(self.next_id, node_id + 1)
        name = name if name is not None else self.unique_node_name(f"{op}_{node_id}")
        output_types = list(output_types)
        names = list(output_names) if output_names is not None else [
            self.unique_name(f"{name}_out{i}" if len(output_types) > 1 else f"{name}_out")
            for i in range(len(output_types))]
        prov = tuple(provenance) if provenance is not None else (node_id,)
        node = Node(node_id, op, name, list(inputs), [], dict(attrs or {}), prov)
        node.outputs = [Value(n, t, node, i) for i, (n, t) in enumerate(zip(names, output_types))]
        self.nodes.append(node)
        self.reserve_names(names)
        self._node_names().add(name)
        return node

    def reserve_names(self, names: Iterable[str]) -> None:
        """Mark names as taken (for callers that create values themselves, like the loader)."""
        self._taken_names().update(names)

    def unique_name(self, base: str) -> str:
        """A value name not used yet in this graph, derived from `base`, and now reserved."""
        return _claim(self._taken_names(), base)

    def unique_node_name(self, base: str) -> str:
        """A node name not used yet (node and value names are separate, as in ONNX)."""
        return _claim(self._node_names(), base)

    def _taken_names(self) -> set[str]:
        if self._names is None:
            self._names = {v.name for v in self.values()}
        return self._names

    def _node_names(self) -> set[str]:
        if self._nodes_named is None:
            self._nodes_named = {n.name for n in self.nodes}
        return self._nodes_named

    # -- editing ------------------------------------------------------------------------------

    def remove_node(self, node: Node) -> None:
        """Remove a node; its outputs must no longer be used (callers rewire uses first).

        Its names stay reserved, so a later node never takes a name a snapshot still shows.
        """
        self.nodes.remove(node)

    def replace_uses(self, old: Value, new: Value) -> int:
        """Make every user of `old` (nodes and graph outputs) use `new`; returns the count."""
        count = 0
        for node in self.nodes:
            for i, value in enumerate(node.inputs):
                if value is old:
                    node.inputs[i] = new
                    count += 1
        for i, value in enumerate(self.outputs):
            if value is old:
                self.outputs[i] = new
                count += 1
        return count

    def users(self, value: Value) -> list[tuple[Node, int]]:
        """(node, input index) pairs that read `value`."""
        return [(n, i) for n in self.nodes for i, v in enumerate(n.inputs) if v is value]

    def sort(self) -> None:
        """Reorder nodes topologically, keeping the current order where it is already valid."""
        producers = {id(out): k for k, n in enumerate(self.nodes) for out in n.outputs}
        nodes = self.nodes

        def preds(k: int) -> list[int]:
            return [producers[id(v)] for v in nodes[k].inputs
                    if v is not None and id(v) in producers]

        try:
            order = post_order(range(len(nodes)), preds)
        except CycleError as cycle:
            raise VerifyError(f"the graph has a cycle through node {nodes[cycle.key].name}") \
                from None
        self.nodes = [nodes[k] for k in order]

    # -- queries ------------------------------------------------------------------------------

    def values(self) -> Iterator[Value]:
        """Every value: inputs, constants, then node outputs in order."""
        yield from self.inputs
        yield from self.constants.values()
        for node in self.nodes:
            yield from node.outputs

    def value(self, name: str) -> Value:
        """Look a value up by name (KeyError when absent)."""
        for value in self.values():
            if value.name == name:
                return value
        raise KeyError(name)

    def node(self, node_id: int) -> Node:
        """Look a node up by its stable id."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def used_constants(self) -> list[Constant]:
        """Constants some node or output reads, in declaration order."""
        used = {id(v) for n in self.nodes for v in n.inputs if v is not None}
        used.update(id(v) for v in self.outputs)
        return [c for c in self.constants.values() if id(c) in used]

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> Graph:
        """An independent copy of the structure that shares constant payloads (they are immutable).

        Node ids and provenance are kept, so a snapshot can be diffed against its origin.
        """
        copy = Graph(self.name, self.opset)
        copy.metadata = dict(self.metadata)
        copy.free_output_order = self.free_output_order
        copy.next_id = self.next_id
        mapping: dict[int, Value] = {}
        for value in self.inputs:
            mapping[id(value)] = copy.add_input(value.name, value.type)
        for name, const in self.constants.items():
            new = Constant(name, const.data, const.type)
            copy.constants[name] = new
            mapping[id(const)] = new
        get, nodes = mapping.get, copy.nodes
        for node in self.nodes:  # tight: a deep graph is copied once per kept stage
            new = Node(node.id, node.op, node.name,
                       [v if v is None else get(id(v), v) for v in node.inputs], [],
                       dict(node.attrs), node.provenance)
            outputs = new.outputs
            for v in node.outputs:
                out = Value(v.name, v.type, new, v.index)
                mapping[id(v)] = out
                outputs.append(out)
            nodes.append(new)
        copy.outputs = [mapping[id(v)] for v in self.outputs]
        copy._names = copy._nodes_named = None  # built while copying: rebuild on next use
        return copy

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes)"
