"""Per-layer figures of a compiled graph, mapped onto the nodes of the graph a user sees.

One mechanism serves every metric: a `MetricSet` is a list of rows, each a unit the figure was
measured on (a node of the prepared graph, a kernel, a tensor, or work outside any layer), with
the ids of the shown graph's nodes it stands for (through `Node.provenance`). A shown node's
value is the sum of the rows it belongs to; a group of nodes aggregates its rows once each,
summed, or the worst of them for figures that do not add up (`aggregate`). Rows outside any
layer (an entry point's calls, a row-chain's driver) keep the rows' sum equal to the
whole-network figure measured the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from compiler import ops
from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node

SUM, PEAK, WORST = "sum", "peak", "worst"  # how rows combine over a group of nodes


@dataclass(frozen=True)
class Row:
    """One measured unit.

    Attributes:
        label: What was measured (a node's name, a kernel's symbol, a tensor's name).
        op: Its operator, or a description for work outside layers.
        nodes: Ids of the shown graph's nodes it stands for (`primary_node` of each node it
            covers); () for work outside any layer.
        value: The figure.
        peer: The same figure by a peer (CMSIS-NN's instructions), None when it has none.
        parts: Names of the prepared graph's nodes it covers.
        covers: Every shown node those came from (a fused Relu, a folded Flatten).
    """

    label: str
    op: str
    nodes: tuple[int, ...]
    value: float
    peer: float | None = None
    parts: tuple[str, ...] = ()
    covers: tuple[int, ...] = ()


@dataclass(frozen=True)
class MetricSet:
    """One metric over one graph (and target): its rows and how to read them.

    Attributes:
        name: Metric key ("macs", "weight_bytes", "arena_bytes", "instructions", "sqnr").
        title: What a legend or a column header calls it.
        unit: Unit of the values ("" for counts).
        higher_is_worse: True when a larger value is the bad end of the colour scale.
        combine: SUM, PEAK or WORST: how rows aggregate over a group of nodes.
        rows: The measured units, in graph or schedule order.
        total: The whole-network figure measured on its own (the shipped network's count), or
            None when it is just the rows combined.
        peer_title: What the peer column is called ("" without a peer).
        note: A sentence on how the figure was measured.
    """

    name: str
    title: str
    unit: str
    higher_is_worse: bool
    combine: str
    rows: tuple[Row, ...]
    total: float | None = None
    peer_title: str = ""
    note: str = ""
    _values: dict[int, float] = field(default_factory=dict, compare=False, repr=False)
    _index: dict[int, list[Row]] | None = field(default=None, compare=False, repr=False)

    def values(self) -> dict[int, float]:
        """Shown node id -> its value: its rows combined (a fused kernel colours each node)."""
        if not self._values:
            for node, rows in self._rows_of().items():
                self._values[node] = _combine(self.combine, [r.value for r in rows])
        return self._values

    def _rows_of(self) -> dict[int, list[Row]]:
        if self._index is not None:  # built once: groups ask for many nodes per repaint
            return self._index
        rows: dict[int, list[Row]] = {}
        for row in self.rows:
            for node in row.nodes:
                rows.setdefault(node, []).append(row)
        object.__setattr__(self, "_index", rows)  # the dataclass may be frozen
        return rows

    def rows_of(self, node_id: int) -> list[Row]:
        """The rows a shown node belongs to."""
        return self._rows_of().get(node_id, [])

    def whole(self) -> float | None:
        """The figure of the whole network: the measured total, else the rows combined."""
        if self.total is not None:
            return self.total
        return _combine(self.combine, [r.value for r in self.rows]) if self.rows else None


def _combine(how: str, values: list[float]) -> float:
    if how == SUM:
        return sum(values)
    if how == PEAK:
        return max(values)
    return min(values)  # WORST: the lowest SQNR


def aggregate(metric: MetricSet, node_ids: Iterable[int]) -> float | None:
    """The figure of a group of shown nodes (a collapsed block): each row counted once.

    Rows touching any node of the group take part: summed for counts and bytes, the largest
    for live arena bytes, the worst (lowest) for SQNR. None when no row touches the group.
    """
    index = metric._rows_of()
    rows = list({id(r): r for n in node_ids for r in index.get(n, ())}.values())
    return _combine(metric.combine, [r.value for r in rows]) if rows else None


def values_by_name(metric: MetricSet, graph: Graph) -> dict[int, float]:
    """The rows' values on the nodes of `graph` named like their prepared nodes.

    For a graph at a stage before code generation (the final graph keeps its nodes' names
    through the prepare stage): each row lands on the first of its nodes `graph` has; rows
    outside every layer land nowhere.
    """
    by_name = {n.name: n.id for n in graph.nodes}
    out: dict[int, float] = {}
    for r in metric.rows:
        node = next((by_name[p] for p in r.parts if p in by_name), None)
        if node is not None:
            out[node] = out.get(node, 0.0) + r.value
    return out


def primary_node(node: Node, ops_of: dict[int, str], order: dict[int, int]) -> int | None:
    """The shown node a compiled node stands for (`ops_of`, `order`: the shown graph's).

    Among its sources, the first of its own operator, else the last: a Conv+Relu is its Conv,
    a Flatten folded into a Gemm is the Gemm.
    """
    sources = sorted((i for i in node.provenance if i in order), key=order.get)
    if not sources:
        return None
    same = [i for i in sources if ops_of[i] == node.op]
    return same[0] if same else sources[-1]


def _mapper(compiled: Compilation, shown: Graph | None
            ) -> Callable[[Iterable[str]], tuple[tuple[int, ...], tuple[int, ...]]]:
    """Prepared node names -> (their primary shown node ids, every shown id they came from)."""
    graph = shown if shown is not None else compiled.graph
    order = {n.id: i for i, n in enumerate(graph.nodes)}
    ops_of = {n.id: n.op for n in graph.nodes}
    by_name = {n.name: n for n in compiled.prepared.nodes}

    def nodes_of(names: Iterable[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        primary: list[int] = []
        covers: set[int] = set()
        for name in names:
            node = by_name.get(name)
            if node is None:
                continue
            key = primary_node(node, ops_of, order)
            if key is not None and key not in primary:
                primary.append(key)
            covers.update(i for i in node.provenance if i in order)
        return tuple(primary), tuple(sorted(covers, key=order.get))

    return nodes_of


def row(label: str, op: str, nodes_of, parts: Iterable[str], value: float,
        peer: float | None = None) -> Row:
    """A row measured on the prepared nodes `parts`, placed on the shown graph's nodes."""
    parts = tuple(parts)
    nodes, covers = nodes_of(parts)
    return Row(label, op, nodes, value, peer, parts, covers)


def macs(compiled: Compilation, shown: Graph | None = None) -> MetricSet:
    """Multiply-accumulates per prepared node (what the compiled kernels execute)."""
    nodes_of = _mapper(compiled, shown)
    rows = []
    for node in compiled.prepared.nodes:
        try:
            count = ops.lookup(node.op).count_macs(node)
        except KilnError:
            continue
        if count:
            rows.append(row(node.name, node.op, nodes_of, [node.name], count))
    return MetricSet("macs", "MACs", "", True, SUM, tuple(rows),
                     note="multiply-accumulates of the compiled graph's nodes")


def weight_bytes(compiled: Compilation, shown: Graph | None = None) -> MetricSet:
    """Bytes of the constant inputs each prepared node reads (a shared weight in each reader)."""
    nodes_of = _mapper(compiled, shown)
    rows = []
    for node in compiled.prepared.nodes:
        size = sum(v.data.nbytes for v in node.inputs if isinstance(v, Constant))
        if size:
            rows.append(row(node.name, node.op, nodes_of, [node.name], size))
    return MetricSet("weight_bytes", "Weight bytes", "B", True, SUM, tuple(rows),
                     note="constant bytes each node of the compiled graph reads")


def arena_bytes(compiled: Compilation, shown: Graph | None = None,
                options: Options | None = None) -> MetricSet:
    """Activation bytes live in the arena while each kernel runs (the memory plan's curve).

    `options` say how memory is planned (the host's defaults when None).
    """
    options = options or Options()
    nodes_of = _mapper(compiled, shown)
    plan = compiled.plan(options)
    live = plan.arena.live_bytes()
    rows: list[Row] = []
    for instr in plan.lowir.instrs:
        if instr.kind != "op" or not 0 <= instr.step < len(live):
            continue
        parts = instr.nodes or (instr.name,)
        rows.append(row(instr.name, instr.op, nodes_of, parts, live[instr.step]))
    return MetricSet("arena_bytes", "Live arena bytes", "B", True, PEAK, tuple(rows),
                     note="aligned activation bytes live while the kernel runs "
                          f"({options.resolved_target().name} plan)")


def sqnr(graph: Graph, by_tensor: dict[str, float], keys: dict[str, object]) -> MetricSet:
    """SQNR (dB) of each node's output, from a quantization evaluation of `graph`.

    `keys` maps a tensor to the canvas key of the node making it (ids only become rows' nodes).
    """
    producers = {v.name: n for n in graph.nodes for v in n.outputs}
    rows = []
    for name, db in by_tensor.items():
        key = keys.get(name)
        node = producers.get(name)
        nodes = (key,) if isinstance(key, int) else ()
        value = db if not math.isnan(db) else -math.inf
        rows.append(Row(name, node.op if node is not None else "Input", nodes, value,
                        parts=(node.name,) if node is not None else ()))
    return MetricSet("sqnr", "SQNR", "dB", False, WORST, tuple(rows),
                     note="signal-to-quantization-noise ratio of each node's output against "
                          "float")
