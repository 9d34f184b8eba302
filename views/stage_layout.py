"""Qt-free placement of the pipeline's stages, so that stepping looks like one graph changing.

A full re-layout of every snapshot would move every box at each pass. Instead, each stage keeps
the horizontal place its nodes had in the stage before (the loaded graph's layout to begin
with); a node a pass created starts where its source nodes were (the centroid of its
provenance). Rows come from the snapshot's own layering, and each row is packed without
overlap as close as possible to those places (the same isotonic fit the main layout uses).
Removed nodes become ghosts at the place they had in the previous stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiler.ir.graph import Graph
from views.layout import (
    EDGE_GAP,
    LAYER_GAP,
    MARGIN,
    NODE_GAP,
    Box,
    Edge,
    GraphLayout,
    Key,
    NodeLabel,
    _collect,
    _isotonic,
    _ports,
    assign_layers,
)


@dataclass
class Ghost:
    """A node removed by a pass, drawn where it was in the stage before."""

    box: Box
    label: NodeLabel
    op: str


@dataclass
class StageLayout:
    """A stage's layout, the world x of every box (for the next stage) and the ghosts."""

    layout: GraphLayout
    world_x: dict[Key, float]
    shift: float  # scene x = world x + shift
    ghosts: dict[int, Ghost] = field(default_factory=dict)
    dead: set[int] = field(default_factory=set)  # nodes no output depends on (until a dce)


def dead_nodes(graph: Graph) -> set[int]:
    """Ids of nodes whose results reach no graph output (a fusion leaves them to dce)."""
    producer = {id(out): node for node in graph.nodes for out in node.outputs}
    live: set[int] = set()
    todo = [producer[id(v)] for v in graph.outputs if id(v) in producer]
    while todo:
        node = todo.pop()
        if node.id in live:
            continue
        live.add(node.id)
        todo.extend(producer[id(v)] for v in node.inputs
                    if v is not None and id(v) in producer)
    return {node.id for node in graph.nodes} - live


def _targets(graph: Graph, keys: list[Key], memory: dict[Key, float],
             edges: list[tuple[int, int]]) -> list[float]:
    """Desired world x of each vertex: where it was, else where its sources or neighbours are."""
    nodes = {n.id: n for n in graph.nodes}
    want: list[float | None] = [memory.get(k) for k in keys]
    for v, key in enumerate(keys):
        if want[v] is None and key in nodes:
            known = [memory[p] for p in nodes[key].provenance if p in memory]
            if known:
                want[v] = sum(known) / len(known)
    neighbours: list[list[int]] = [[] for _ in keys]
    for s, d in edges:
        neighbours[s].append(d)
        neighbours[d].append(s)
    for _ in range(3):  # whatever is left sits among its neighbours
        for v in range(len(keys)):
            if want[v] is None:
                known = [want[u] for u in neighbours[v] if want[u] is not None]
                if known:
                    want[v] = sum(known) / len(known)
    return [w if w is not None else 0.0 for w in want]


def place_stage(graph: Graph, memory: dict[Key, float]) -> StageLayout:
    """Lay out `graph` with every box as close as possible to its remembered world x."""
    vs = _collect(graph, False)
    n = len(vs.keys)
    sizes = [label.size() for label in vs.labels]
    pairs = [(s, d) for s, d, _, _ in vs.edges]
    layer = assign_layers(n, pairs, vs.const_cone)
    want = _targets(graph, vs.keys, memory, pairs)
    rows: dict[int, list[int]] = {}
    for v in sorted(range(n), key=lambda v: (want[v], v)):
        rows.setdefault(layer[v], []).append(v)
    x = [0.0] * n
    for row in rows.values():
        seps = [(sizes[a][0] + sizes[b][0]) / 2 + NODE_GAP for a, b in zip(row, row[1:])]
        for v, placed in zip(row, _isotonic([want[v] for v in row], [1.0] * len(row), seps)):
            x[v] = placed
    count = max(layer, default=-1) + 1
    band_h = [0.0] * count
    for v in range(n):
        band_h[layer[v]] = max(band_h[layer[v]], sizes[v][1])
    band_top, y = [], MARGIN
    for h in band_h:
        band_top.append(y)
        y += h + LAYER_GAP
    height = y - LAYER_GAP + MARGIN if count else 2 * MARGIN
    shift = MARGIN - min((x[v] - sizes[v][0] / 2 for v in range(n)), default=0.0)
    boxes: dict[Key, Box] = {}
    for v, key in enumerate(vs.keys):
        w, h = sizes[v]
        top = band_top[layer[v]] + (band_h[layer[v]] - h) / 2
        boxes[key] = Box(round(x[v] + shift - w / 2, 1), round(top, 1), w, h)
    bands = [(top, top + h) for top, h in zip(band_top, band_h)]
    edges = _edges(vs.keys, vs.edges, boxes, layer, bands)
    width = max((b.right for b in boxes.values()), default=0.0) + MARGIN
    layout = GraphLayout(boxes, edges, width, height, labels=dict(zip(vs.keys, vs.labels)),
                         layers=dict(zip(vs.keys, layer)), values=vs.values)
    return StageLayout(layout, dict(zip(vs.keys, x)), shift, dead=dead_nodes(graph))


def _detour(x: float, row: list[Box]) -> float:
    """`x`, or the nearest gap beside the box of `row` it would run through."""
    for box in row:
        if box.x - EDGE_GAP / 2 < x < box.right + EDGE_GAP / 2:
            left, right = box.x - NODE_GAP / 2, box.right + NODE_GAP / 2
            return left if x - left < right - x else right
    return x


def _edges(keys: list[Key], pairs, boxes: dict[Key, Box], layer: list[int],
           bands: list[tuple[float, float]]) -> list[Edge]:
    """Edges from box bottoms to box tops, spread along each side in the order of the far ends.

    An edge across several rows runs down the gap nearest its straight line in each row it
    passes, so it never crosses a box (rows are packed with NODE_GAP between boxes).
    """
    rows: dict[int, list[Box]] = {}
    for v, key in enumerate(keys):
        rows.setdefault(layer[v], []).append(boxes[key])
    centre = [boxes[k].x + boxes[k].w / 2 for k in keys]
    outgoing: dict[int, list[int]] = {}
    incoming: dict[int, list[int]] = {}
    for index, (s, d, _value, _port) in enumerate(pairs):
        outgoing.setdefault(s, []).append(index)
        incoming.setdefault(d, []).append(index)
    start: dict[int, float] = {}
    end: dict[int, float] = {}
    for ends, table, far in ((outgoing, start, 1), (incoming, end, 0)):
        for v, indices in ends.items():
            indices.sort(key=lambda i: centre[pairs[i][far]])
            for i, x in zip(indices, _ports(boxes[keys[v]], len(indices))):
                table[i] = x
    edges = []
    for i, (s, d, value, _port) in enumerate(pairs):
        points = [(start[i], boxes[keys[s]].bottom)]
        span = layer[d] - layer[s]
        for step in range(1, span):
            row = layer[s] + step
            x = _detour(start[i] + (end[i] - start[i]) * step / span, rows.get(row, []))
            points += [(x, bands[row][0]), (x, bands[row][1])]
        points.append((end[i], boxes[keys[d]].y))
        edges.append(Edge(keys[s], keys[d], value, points))
    return edges


def place_stages(graphs: list[Graph], start: GraphLayout | None = None) -> list[StageLayout]:
    """Layouts of consecutive snapshots (the loaded graph first), each kept close to the last.

    `start` (the loaded graph's own layout) seeds the places; consecutive identical snapshots
    share one layout. A stage's ghosts are the nodes of the previous snapshot it lacks.
    """
    memory: dict[Key, float] = {}
    if start is not None:
        memory = {k: b.x + b.w / 2 for k, b in start.boxes.items()}
    out: list[StageLayout] = []
    for graph in graphs:
        if out and graph is graphs[len(out) - 1]:
            same = out[-1]
            out.append(StageLayout(same.layout, same.world_x, same.shift, dead=same.dead))
            continue
        stage = place_stage(graph, memory)
        if out:
            before, previous = graphs[len(out) - 1], out[-1]
            present = {node.id for node in graph.nodes}
            for node in before.nodes:
                box = previous.layout.boxes.get(node.id)
                if node.id not in present and box is not None:
                    moved = Box(box.x - previous.shift + stage.shift, box.y, box.w, box.h)
                    stage.ghosts[node.id] = Ghost(moved, previous.layout.labels[node.id],
                                                  node.op)
        memory = {**memory, **stage.world_x}
        out.append(stage)
    return out
