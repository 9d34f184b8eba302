"""Which node of one graph is which node of another: by provenance, then names, then structure.

Layers are matched, not raw nodes: in a QDQ graph a QuantizeLinear belongs to the layer that
produces its input and a DequantizeLinear to the layer that reads its output, so a float Conv
and its QDQ-wrapped Conv are one pair and the wrappers fold into it. Two graphs of one origin (a
graph and a pass stage of it, one model compiled for two targets, a model and its own
quantization) share node ids and provenance, which decides first; any two graphs are then
matched by the names converters give layers (with their suffixes taken off) and by structure
(same kind of operator next to layers already matched).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from compiler.graphdiff.names import QDQ, kind, name_forms
from compiler.ir.graph import Graph, Node

Neighbour = int | tuple[str, int]  # an anchor id, or ("in", i) / ("out", i) for graph I/O


@dataclass(frozen=True)
class Side:
    """One graph of a comparison.

    Attributes:
        graph: The graph compared.
        origin: The graph its nodes' provenance refers to (the loaded graph, for a pass
            stage): its node names name the stage's nodes too. None for a loaded graph.
        label: How reports call it (a file name, "final, cortex-m7").
    """

    graph: Graph
    origin: Graph | None = None
    label: str = ""


class Units:
    """A graph's layers: every node belongs to one anchor, most nodes to themselves."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes = {n.id: n for n in graph.nodes}
        producer = {id(v): n for n in graph.nodes for v in n.outputs}
        readers: dict[int, list[Node]] = {}
        for node in graph.nodes:
            for value in node.inputs:
                if value is not None:
                    readers.setdefault(id(value), []).append(node)
        self.anchor: dict[int, int] = {}
        for node in graph.nodes:
            wrapped = _wrapped(node, producer, readers)
            self.anchor[node.id] = node.id if wrapped is None else wrapped
        for node in graph.nodes:  # a Q-DQ pair at a graph input or output: one wrapper
            if node.op in QDQ and self.anchor[node.id] == node.id:
                pair = [producer.get(id(node.inputs[0]))] if node.op == "DequantizeLinear" \
                    else readers.get(id(node.output), [])
                joined = [self.anchor[p.id] for p in pair if p is not None and p.op in QDQ
                          and self.anchor[p.id] != p.id]
                if joined:
                    self.anchor[node.id] = joined[0]
        self.members: dict[int, list[int]] = {}
        for node in graph.nodes:
            self.members.setdefault(self.anchor[node.id], []).append(node.id)
        self.order = [n.id for n in graph.nodes if self.anchor[n.id] == n.id]
        self.position = {a: k / max(1, len(self.order) - 1) for k, a in enumerate(self.order)}
        inputs = {id(v): ("in", i) for i, v in enumerate(graph.inputs)}
        self.preds: dict[int, set[Neighbour]] = {a: set() for a in self.order}
        self.succs: dict[int, set[Neighbour]] = {a: set() for a in self.order}
        for node in graph.nodes:
            mine = self.anchor[node.id]
            for value in node.inputs:
                if value is None:
                    continue
                if id(value) in inputs:
                    self.preds[mine].add(inputs[id(value)])
                elif id(value) in producer:
                    theirs = self.anchor[producer[id(value)].id]
                    if theirs != mine:
                        self.preds[mine].add(theirs)
                        self.succs[theirs].add(mine)
        for i, value in enumerate(graph.outputs):
            if id(value) in producer:
                self.succs[self.anchor[producer[id(value)].id]].add(("out", i))

    def kind(self, anchor: int) -> str:
        """The operator kind of a layer."""
        return kind(self.nodes[anchor].op)

    def provenance(self, anchor: int) -> set[int]:
        """Source-model node ids every node of the layer came from."""
        return {i for m in self.members[anchor] for i in self.nodes[m].provenance}


def _wrapped(node: Node, producer: dict, readers: dict) -> int | None:
    """The layer a Quantize/DequantizeLinear wraps, or None when it stands alone."""
    if node.op == "DequantizeLinear":
        users = readers.get(id(node.output), [])
        layers = [u for u in users if u.op not in QDQ]
        return layers[0].id if layers and len(layers) == len(users) else None
    if node.op == "QuantizeLinear" and node.inputs and node.inputs[0] is not None:
        source = producer.get(id(node.inputs[0]))
        return source.id if source is not None and source.op not in QDQ else None
    return None


@dataclass
class Correspondence:
    """Pairs of layers, and what each side has that the other lacks.

    Attributes:
        pairs: Anchor id in A -> anchor id in B.
        how: Anchor id in A -> "provenance", "name" or "structure": what matched it.
        removed: Node ids of A with no counterpart (every node of an unmatched layer).
        added: Node ids of B with no counterpart.
        folded_a: Node id of A -> the node of B it became part of (a QDQ wrapper of a matched
            layer, an activation a pass fused into the convolution before it).
        folded_b: Node id of B -> the node of A it is part of.
    """

    units_a: Units
    units_b: Units
    pairs: dict[int, int] = field(default_factory=dict)
    how: dict[int, str] = field(default_factory=dict)
    removed: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    folded_a: dict[int, int] = field(default_factory=dict)
    folded_b: dict[int, int] = field(default_factory=dict)

    def counterpart(self, side: str, node_id: int) -> int | None:
        """The node of the other graph that stands for node `node_id` of side "a" or "b"."""
        if side == "a":
            return self.pairs.get(node_id, self.folded_a.get(node_id))
        back = {b: a for a, b in self.pairs.items()}
        return back.get(node_id, self.folded_b.get(node_id))

    def counts(self) -> dict[str, int]:
        """Matched layers (and by what), nodes only in A or B, nodes folded on each side."""
        by = Counter(self.how.values())
        return {"matched": len(self.pairs), "removed": len(self.removed),
                "added": len(self.added), "folded_a": len(self.folded_a),
                "folded_b": len(self.folded_b),
                "by": {k: by.get(k, 0) for k in ("provenance", "name", "structure")}}


def correspond(a: Side, b: Side, same_origin: bool = False) -> Correspondence:
    """Match the layers of `a` and `b`; provenance only counts when `same_origin`."""
    ua, ub = Units(a.graph), Units(b.graph)
    result = Correspondence(ua, ub)
    if same_origin:
        _by_provenance(result)
    _by_names(result, _name_keys(a, ua), _name_keys(b, ub))
    _by_structure(result)
    _fold(result, same_origin)
    return result


def _pair(result: Correspondence, x: int, y: int, how: str) -> None:
    result.pairs[x] = y
    result.how[x] = how


def _greedy(result: Correspondence, candidates: list[tuple[tuple, int, int]], how: str) -> None:
    """Take candidate pairs best score first, each layer at most once."""
    taken_b = set(result.pairs.values())
    for _, x, y in sorted(candidates, key=lambda c: c[0], reverse=True):
        if x not in result.pairs and y not in taken_b:
            _pair(result, x, y, how)
            taken_b.add(y)


def _by_provenance(result: Correspondence) -> None:
    """Same node id, else the most shared source nodes (same operator kind first)."""
    ua, ub = result.units_a, result.units_b
    anchors_b = set(ub.order)
    for x in ua.order:
        if x in anchors_b and ua.kind(x) == ub.kind(x):
            _pair(result, x, x, "provenance")
    sources: dict[int, list[int]] = {}
    prov_b = {y: ub.provenance(y) for y in ub.order}
    for y, prov in prov_b.items():
        for i in prov:
            sources.setdefault(i, []).append(y)
    candidates = []
    for x in ua.order:
        prov = ua.provenance(x)
        for y in {y for i in prov for y in sources.get(i, ())}:
            shared = len(prov & prov_b[y])
            # Ties go to the last source: a node a pass makes of several stands for the last.
            score = (ua.kind(x) == ub.kind(y), shared, -len(prov ^ prov_b[y]),
                     max(prov) == max(prov_b[y]))
            candidates.append((score, x, y))
    _greedy(result, candidates, "provenance")


def _name_keys(side: Side, units: Units) -> dict[int, set[tuple[str, str]]]:
    """(kind, name form) keys of each layer that no other layer of its kind shares."""
    origin = {n.id: n for n in side.origin.nodes} if side.origin is not None else {}
    keys: dict[int, set[tuple[str, str]]] = {}
    for anchor in units.order:
        names = {units.nodes[m].name for m in units.members[anchor]}
        names.update(origin[i].name for i in units.provenance(anchor) if i in origin)
        family = units.kind(anchor)
        keys[anchor] = {(family, form) for name in names for form in name_forms(name)}
    count = Counter(k for ks in keys.values() for k in ks)
    return {a: {k for k in ks if count[k] == 1} for a, ks in keys.items()}


def _by_names(result: Correspondence, keys_a: dict, keys_b: dict) -> None:
    """Layers of one kind that share a name form; the longest shared form wins."""
    owner = {k: y for y, ks in keys_b.items() if y not in result.pairs.values() for k in ks}
    candidates = []
    for x, ks in keys_a.items():
        if x in result.pairs:
            continue
        best: dict[int, int] = {}
        for k in ks:
            y = owner.get(k)
            if y is not None:
                best[y] = max(best.get(y, 0), len(k[1]))
        ua, ub = result.units_a, result.units_b
        candidates += [((length, -abs(ua.position[x] - ub.position[y])), x, y)
                       for y, length in best.items()]
    _greedy(result, candidates, "name")


def _by_structure(result: Correspondence) -> None:
    """Layers of one kind whose neighbours are already matched to each other's neighbours.

    Repeated until nothing new matches, so matches spread along chains from the graph's
    inputs and outputs (which match by position) and from layers matched by name.
    """
    ua, ub = result.units_a, result.units_b
    io = {("in", i): ("in", i) for i in range(min(len(ua.graph.inputs), len(ub.graph.inputs)))}
    io.update({("out", i): ("out", i)
               for i in range(min(len(ua.graph.outputs), len(ub.graph.outputs)))})
    free_b: dict[str, list[int]] = {}
    taken = set(result.pairs.values())
    for y in ub.order:
        if y not in taken:
            free_b.setdefault(ub.kind(y), []).append(y)
    changed = True
    while changed:
        changed = False
        for x in ua.order:
            if x in result.pairs:
                continue
            mapped_preds = {result.pairs.get(p, io.get(p)) for p in ua.preds[x]} - {None}
            mapped_succs = {result.pairs.get(s, io.get(s)) for s in ua.succs[x]} - {None}
            scored = []
            for y in free_b.get(ua.kind(x), ()):
                score = len(mapped_preds & ub.preds[y]) + len(mapped_succs & ub.succs[y])
                if score:
                    scored.append((score, -abs(ua.position[x] - ub.position[y]), y))
            if scored:
                y = max(scored)[2]
                _pair(result, x, y, "structure")
                free_b[ub.kind(y)].remove(y)
                changed = True


def _fold(result: Correspondence, same_origin: bool) -> None:
    """Fill folded/removed/added: wrappers follow their layer; shared sources fold a layer."""
    ua, ub = result.units_a, result.units_b
    back = {y: x for x, y in result.pairs.items()}
    for units, matched, folded in ((ua, result.pairs, result.folded_a),
                                   (ub, back, result.folded_b)):
        for anchor, members in units.members.items():
            if anchor in matched:
                folded.update({m: matched[anchor] for m in members if m != anchor})
    if same_origin:
        for units, other, matched, folded in ((ua, ub, result.pairs, result.folded_a),
                                              (ub, ua, back, result.folded_b)):
            owners: dict[int, list[int]] = {}
            for anchor in matched.values():
                for i in other.provenance(anchor):
                    owners.setdefault(i, []).append(anchor)
            for anchor in units.order:
                if anchor in matched:
                    continue
                shared = Counter(o for i in units.provenance(anchor) for o in owners.get(i, ()))
                if shared:
                    into = shared.most_common(1)[0][0]
                    folded.update({m: into for m in units.members[anchor]})
    result.removed = [n.id for n in ua.graph.nodes
                      if ua.anchor[n.id] not in result.pairs and n.id not in result.folded_a]
    result.added = [n.id for n in ub.graph.nodes
                    if ub.anchor[n.id] not in back and n.id not in result.folded_b]
