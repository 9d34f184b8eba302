"""The memory model a scheduler optimizes: storages, who makes them and who reads them.

Views (Reshape, Flatten, Squeeze, Unsqueeze) allocate nothing: their output is the storage of
their input, which then lives until the view's last reader. Constants live in flash and never
count. Graph inputs are live from the start, graph outputs until the end.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.graph import Constant, Graph, Node, Value

VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def is_view(node: Node) -> bool:
    """True for nodes that only reinterpret the shape of one dense buffer."""
    return (node.op in VIEW_OPS and node.inputs and node.inputs[0] is not None
            and not isinstance(node.inputs[0], Constant)
            and node.inputs[0].type.nbytes == node.output.type.nbytes)


class MemoryModel:
    """Storages of a graph with their producer node and reader nodes, indexed for search.

    Attributes:
        nodes: The graph's nodes (indices below refer to this list).
        root: id(value) -> storage index.
        sizes: Bytes per storage.
        producer: Node index that writes each storage (-1 for graph inputs).
        readers: Node indices that read each storage (directly or through views).
        reads: Per node, the storages it reads (the inverse of `readers`).
        pinned: Storages live to the end (graph outputs).
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes: list[Node] = list(graph.nodes)
        self.root: dict[int, int] = {}
        self.sizes: list[int] = []
        self.producer: list[int] = []
        self.readers: list[set[int]] = []
        self.names: list[str] = []
        for value in graph.inputs:
            self._new(value, -1)
        for i, node in enumerate(self.nodes):
            for value in node.inputs:
                if value is not None and id(value) in self.root:
                    self.readers[self.root[id(value)]].add(i)
            if is_view(node):
                self.root[id(node.output)] = self.root.get(id(node.inputs[0]), -1)
                continue
            for value in node.outputs:
                self._new(value, i)
        self.pinned = {self.root[id(v)] for v in graph.outputs if id(v) in self.root}
        self.index = {id(n): i for i, n in enumerate(self.nodes)}
        self.preds: list[set[int]] = []
        makers = {id(o): i for i, n in enumerate(self.nodes) for o in n.outputs}
        for node in self.nodes:
            self.preds.append({makers[id(v)] for v in node.inputs
                               if v is not None and id(v) in makers})
        self.makes: list[list[int]] = [[] for _ in self.nodes]
        for s, p in enumerate(self.producer):
            if p >= 0:
                self.makes[p].append(s)
        self.reads: list[list[int]] = [[] for _ in self.nodes]
        for s, readers in enumerate(self.readers):
            for r in readers:
                self.reads[r].append(s)

    def _new(self, value: Value, producer: int) -> None:
        self.root[id(value)] = len(self.sizes)
        self.sizes.append(value.type.nbytes)
        self.producer.append(producer)
        self.readers.append(set())
        self.names.append(value.name)

    def peak(self, order: Sequence[int]) -> int:
        """Peak live bytes when nodes run in `order` (indices into `nodes`)."""
        return max(self.live_per_step(order), default=0)

    def live_per_step(self, order: Sequence[int]) -> list[int]:
        """Live bytes while each step runs: what is still needed plus what the step writes."""
        if not order:
            return []
        position = {n: k for k, n in enumerate(order)}
        end = len(order) - 1
        delta = [0] * (len(order) + 1)
        for s, size in enumerate(self.sizes):
            first = position[self.producer[s]] if self.producer[s] >= 0 else 0
            last = end if s in self.pinned else max(
                (position[r] for r in self.readers[s]), default=first)
            delta[first] += size
            delta[max(last, first) + 1] -= size
        curve, running = [], 0
        for k in range(len(order)):
            running += delta[k]
            curve.append(running)
        return curve
