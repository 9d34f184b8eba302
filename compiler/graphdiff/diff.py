"""The comparison of two graphs: correspondence, changes, per-layer metrics and their deltas.

`diff_graphs` is what `kiln diff` prints and the Compare window shows. Metrics are per layer
(a unit of `match.Units`): MACs, weight bytes, and, when a memory plan is given, the arena bytes
of the layer's outputs; any other per-node figure (instructions on a target, SQNR) plugs in
through `extra`, a metric name -> node id -> value map per side, summed over a layer's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.graphdiff.changes import Change, pair_changes, weight_bytes
from compiler.graphdiff.match import Correspondence, Side, Units, correspond
from compiler.ir.graph import Graph
from compiler.stats import node_macs

Metrics = dict[str, dict[int, float]]  # metric -> node id -> value


@dataclass(frozen=True)
class Difference:
    """One row of the list a user steps through: a changed pair, a removed or an added layer.

    A pair alike in structure whose metrics differ (one layer planned for two targets) is a
    "metrics" row.
    """

    status: str  # "changed", "metrics", "removed" or "added"
    a: int | None  # anchor id in A
    b: int | None  # anchor id in B
    title: str


@dataclass
class GraphDiff:
    """Everything a comparison found; `to_json` is `kiln diff --json`."""

    a: Side
    b: Side
    correspondence: Correspondence
    changes: dict[int, list[Change]]  # anchor of A -> its pair's changes
    metrics_a: Metrics
    metrics_b: Metrics
    stage: str = ""
    differences: list[Difference] = field(default_factory=list)
    arena_sizes: tuple[int | None, int | None] = (None, None)  # each side's planned arena

    @property
    def units_a(self) -> Units:
        """A's layers."""
        return self.correspondence.units_a

    @property
    def units_b(self) -> Units:
        """B's layers."""
        return self.correspondence.units_b

    def changed(self) -> list[int]:
        """Anchors of A whose pair differs in something."""
        return [x for x in self.correspondence.pairs if self.changes.get(x)]

    def metric_names(self) -> list[str]:
        """Metrics known on either side, in a stable order."""
        return list(dict.fromkeys([*self.metrics_a, *self.metrics_b]))

    def deltas(self, x: int | None, y: int | None) -> dict[str, tuple]:
        """Metric -> (A's value, B's value, B - A) of layer `x` of A and layer `y` of B."""
        out = {}
        for name in self.metric_names():
            p = self.metrics_a.get(name, {}).get(x) if x is not None else None
            q = self.metrics_b.get(name, {}).get(y) if y is not None else None
            out[name] = (p, q, None if p is None or q is None else q - p)
        return out

    def totals(self) -> dict[str, tuple]:
        """Metric -> (sum over A, sum over B, B - A); the worst instead of the sum for SQNR.

        The whole graph's arena is its plan's arena, not the sum of its layers' outputs: the
        plan reuses a buffer once its readers are done.
        """
        out = {}
        for name in self.metric_names():
            p = _total(self.metrics_a.get(name), name)
            q = _total(self.metrics_b.get(name), name)
            if name == "arena_bytes":
                p, q = self.arena_sizes
            out[name] = (p, q, None if p is None or q is None else q - p)
        return out

    def counts(self) -> dict:
        """The correspondence's counts, with matched pairs split into changed and unchanged."""
        counts = self.correspondence.counts()
        changed = len(self.changed())
        return {**counts, "changed": changed, "unchanged": counts["matched"] - changed}

    def to_json(self) -> dict:
        """The `kiln diff --json` document."""
        ua, ub, c = self.units_a, self.units_b, self.correspondence

        def node(units: Units, i: int) -> dict:
            n = units.nodes[i]
            return {"id": n.id, "name": n.name, "op": n.op}

        pairs = []
        for x in ua.order:
            y = c.pairs.get(x)
            if y is None:
                continue
            changes = self.changes.get(x, [])
            pairs.append({"a": node(ua, x), "b": node(ub, y), "how": c.how[x],
                          "status": "changed" if changes else "unchanged",
                          "changes": [ch.to_json() for ch in changes],
                          "metrics": {k: list(v) for k, v in self.deltas(x, y).items()}})
        return {
            "a": {"label": self.a.label, "nodes": len(self.a.graph.nodes)},
            "b": {"label": self.b.label, "nodes": len(self.b.graph.nodes)},
            "stage": self.stage,
            "counts": self.counts(),
            "totals": {k: list(v) for k, v in self.totals().items()},
            "pairs": pairs,
            "removed": [{**node(ua, i), "layer": ua.anchor[i]} for i in c.removed],
            "added": [{**node(ub, i), "layer": ub.anchor[i]} for i in c.added],
            "folded": {"a": [{**node(ua, i), "into": j} for i, j in c.folded_a.items()],
                       "b": [{**node(ub, i), "into": j} for i, j in c.folded_b.items()]},
        }


# Metrics a layer (and a whole graph) takes the worst of, not the sum: quality figures.
WORST = {"sqnr": min}


def _total(values: dict[int, float] | None, name: str = ""):
    if not values:
        return None
    known = [v for v in values.values() if v is not None]
    return WORST.get(name, sum)(known) if known else None


def layer_metrics(units: Units, arena: dict[int, int] | None = None,
                  extra: Metrics | None = None) -> Metrics:
    """Per-layer metrics of one side, keyed by anchor id (see the module docstring)."""
    macs = node_macs(units.graph)
    out: Metrics = {"macs": {a: macs.get(a) for a in units.order},
                    "weight_bytes": {a: weight_bytes(units, a) for a in units.order}}
    for name, values in [*([("arena_bytes", arena)] if arena is not None else []),
                         *(extra or {}).items()]:
        per = {}
        combine = WORST.get(name, sum)
        for a in units.order:
            known = [values[m] for m in units.members[a] if values.get(m) is not None]
            per[a] = combine(known) if known else None
        out[name] = per
    return out


def arena_by_node(graph: Graph, prepared: Graph, plan) -> dict[int, int]:
    """Arena bytes of each node's outputs in `plan`, the plan of `prepared` (a later stage).

    A buffer's node is one of `prepared`; it counts for the node of `graph` with its id, else
    for the node of `graph` it came from (shared provenance, the same operator first).
    """
    ids = {n.id: n for n in graph.nodes}
    by_source: dict[int, list] = {}
    for n in graph.nodes:
        for i in n.provenance:
            by_source.setdefault(i, []).append(n)
    named = {n.name: n for n in prepared.nodes}
    out: dict[int, int] = {}
    for buffer in plan.arena.buffers:
        source = named.get(buffer.node)
        if source is None:
            continue
        target = ids.get(source.id)
        if target is None:
            found = [n for i in source.provenance for n in by_source.get(i, ())]
            same = [n for n in found if n.op == source.op]
            target = (same or found or [None])[0]
        if target is not None:
            out[target.id] = out.get(target.id, 0) + buffer.size
    return out


def diff_graphs(a: Side, b: Side, *, same_origin: bool = False, stage: str = "",
                arena: tuple[dict[int, int] | None, dict[int, int] | None] = (None, None),
                extra: tuple[Metrics | None, Metrics | None] = (None, None),
                arena_sizes: tuple[int | None, int | None] = (None, None)) -> GraphDiff:
    """Compare `a` with `b` (see `match.correspond` for how layers are paired).

    `arena` holds each side's per-node output bytes in its plan, `arena_sizes` the plans'
    whole arenas (what the totals show).
    """
    c = correspond(a, b, same_origin)
    changes = {x: pair_changes(c.units_a, x, c.units_b, y) for x, y in c.pairs.items()}
    result = GraphDiff(a, b, c, changes, layer_metrics(c.units_a, arena[0], extra[0]),
                       layer_metrics(c.units_b, arena[1], extra[1]), stage,
                       arena_sizes=arena_sizes)
    result.differences = _differences(result)
    return result


def _differences(d: GraphDiff) -> list[Difference]:
    """The rows to step through: pairs and removed layers in A's order, added ones by B's."""
    ua, ub, c = d.units_a, d.units_b, d.correspondence
    rows: list[tuple[float, int, Difference]] = []
    removed = {ua.anchor[i] for i in c.removed}
    for x in ua.order:
        y = c.pairs.get(x)
        if y is not None and d.changes.get(x):
            title = f"{ua.nodes[x].name} ↔ {ub.nodes[y].name}: " + "; ".join(
                str(ch) for ch in d.changes[x][:3])
            rows.append((ua.position[x], 0, Difference("changed", x, y, title)))
        elif y is not None and any(delta for *_, delta in d.deltas(x, y).values()):
            moved = ", ".join(f"{name} {delta:+,}" for name, (*_, delta) in d.deltas(x, y).items()
                              if delta)
            rows.append((ua.position[x], 0, Difference(
                "metrics", x, y, f"{ua.nodes[x].name} ↔ {ub.nodes[y].name}: {moved}")))
        elif x in removed:
            rows.append((ua.position[x], 0,
                         Difference("removed", x, None, f"{ua.nodes[x].name} ({ua.nodes[x].op})")))
    for y in dict.fromkeys(ub.anchor[i] for i in c.added):
        rows.append((ub.position[y], 1,
                     Difference("added", None, y, f"{ub.nodes[y].name} ({ub.nodes[y].op})")))
    return [row for *_, row in sorted(rows, key=lambda r: (r[0], r[1]))]
