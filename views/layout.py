"""Qt-free layered layout of a graph: boxes top to bottom, few crossings, edges around boxes.

The steps are the Sugiyama framework's. Layers come from longest-path layering, then each node
slides toward the side where most of its edges go (so a weight-producing node sits just above
its consumer instead of at the top). python-igraph's `layout_sugiyama` orders every layer to
reduce crossings and inserts dummy vertices on long edges. Horizontal positions are then ours,
because igraph treats every vertex as one unit wide: boxes of different widths are packed
without overlap by weighted isotonic regression around the median of their neighbours, a few
sweeps down and up. Edges run through their dummies' slots, vertically inside a layer and
diagonally only in the gaps between layers, so they never pass through a box.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import igraph

from compiler.frontends.source import short_text, source_of
from compiler.ir.graph import Constant, Graph, Placeholder
from views.labels import NodeLabel, node_label, value_label

__all__ = ["Box", "Edge", "GraphLayout", "Key", "NodeLabel", "Vertices", "compute_layout",
           "layout_vertices", "node_label"]

Key = int | str  # node id, or "in:<name>", "out:<name>", "const:<name>"

NODE_GAP = 28.0  # horizontal space between two boxes of a layer
EDGE_GAP = 10.0  # horizontal space between an edge passing through a layer and its neighbours
LAYER_GAP = 44.0  # vertical space between layers, where edges change column
MARGIN = 24.0
PORT_STEP = 16.0  # distance between the attachment points of edges on a box side
SWEEPS = 6


@dataclass(frozen=True)
class Box:
    """A rectangle in scene units: top-left corner, width and height (y grows downward)."""

    x: float
    y: float
    w: float
    h: float

    @property
    def right(self) -> float:
        """Right edge."""
        return self.x + self.w

    @property
    def bottom(self) -> float:
        """Bottom edge."""
        return self.y + self.h

    @property
    def center(self) -> tuple[float, float]:
        """Centre point."""
        return self.x + self.w / 2, self.y + self.h / 2

    def overlaps(self, other: Box) -> bool:
        """True when the two rectangles share interior points."""
        return (self.x < other.right and other.x < self.right
                and self.y < other.bottom and other.y < self.bottom)


@dataclass
class Edge:
    """One drawn edge: a value flowing from a box to a consumer box along a polyline."""

    src: Key
    dst: Key
    value: str
    points: list[tuple[float, float]]


@dataclass
class GraphLayout:
    """Where everything goes: boxes by key, edges as polylines, and the scene size."""

    boxes: dict[Key, Box]
    edges: list[Edge]
    width: float
    height: float
    labels: dict[Key, NodeLabel] = field(default_factory=dict)
    layers: dict[Key, int] = field(default_factory=dict)
    values: dict[Key, str] = field(default_factory=dict)  # value name of in/out/const boxes
    show_constants: bool = False
    frames: dict[Key, Box] = field(default_factory=dict)  # open groups, drawn around members
    groups: dict[Key, tuple[str, int]] = field(default_factory=dict)  # group: (op, node count)
    grouping: Any = None  # the GroupedLayout this came from (None: a flat layout)
    expanded: frozenset = frozenset()  # the groups open in it

    def crossings(self) -> int:
        """Number of pairs of edge segments that cross.

        Every segment runs either inside one layer (vertically) or across one gap between two
        layers; segments spanning the same vertical range cross exactly when their end points
        come in opposite orders, so the count is a sum of inversions per range.
        """
        groups: dict[tuple[float, float], list[tuple[float, float]]] = {}
        for edge in self.edges:
            for (x0, y0), (x1, y1) in zip(edge.points, edge.points[1:]):
                if y1 > y0:
                    groups.setdefault((y0, y1), []).append((x0, x1))
        return sum(_inversions(segments) for segments in groups.values())


def _inversions(segments: list[tuple[float, float]]) -> int:
    """Pairs (a, b) with a.x0 < b.x0 and a.x1 > b.x1 (strictly: shared ends do not cross)."""
    segments = sorted(segments)
    ranks = {x: i + 1 for i, x in enumerate(sorted({x1 for _, x1 in segments}))}
    tree = [0] * (len(ranks) + 1)
    count = 0
    i = 0
    while i < len(segments):
        j = i
        while j < len(segments) and segments[j][0] == segments[i][0]:
            j += 1
        seen = _prefix(tree, len(ranks))
        for _, x1 in segments[i:j]:  # a shared start point is not a crossing either
            count += seen - _prefix(tree, ranks[x1])
        for _, x1 in segments[i:j]:
            r = ranks[x1]
            while r < len(tree):
                tree[r] += 1
                r += r & -r
        i = j
    return count


def _prefix(tree: list[int], r: int) -> int:
    total = 0
    while r > 0:
        total += tree[r]
        r -= r & -r
    return total


# -- the graph to lay out ---------------------------------------------------------------------


@dataclass
class Vertices:
    """What a layout places: keyed vertices with labels, and edges between them."""

    keys: list[Key] = field(default_factory=list)
    labels: list[NodeLabel] = field(default_factory=list)
    edges: list[tuple[int, int, str, int]] = field(default_factory=list)  # src, dst, value, port
    const_cone: list[bool] = field(default_factory=list)  # computable from constants alone
    values: dict[Key, str] = field(default_factory=dict)  # value name of in/out/const boxes

    def add(self, key: Key, label: NodeLabel, const_cone: bool) -> int:
        """Append a vertex; returns its index."""
        self.keys.append(key)
        self.labels.append(label)
        self.const_cone.append(const_cone)
        return len(self.keys) - 1


def _collect(graph: Graph, show_constants: bool) -> Vertices:
    """Vertices (inputs, constants when shown, nodes, outputs) and the edges between them.

    A constant shown as a box gets one box per consumer: a shared constant (Unsqueeze's axes
    read by hundreds of nodes) would otherwise pull hundreds of edges across the whole graph.
    The first box is keyed `const:<name>`, the others `const:<name>@<consumer id>`.
    """
    vs = Vertices()
    producer: dict[int, tuple[int, int]] = {}  # id(value) -> (vertex, output port)
    for value in graph.inputs:
        producer[id(value)] = (vs.add(f"in:{value.name}", value_label(value), False), 0)
        vs.values[vs.keys[-1]] = value.name
    boxed: set[str] = set()
    seen: set[tuple[int, int, str]] = set()

    def connect(value, dst: int, user: str) -> bool:
        """Add the edge feeding `dst`; returns whether `value` is computable from constants."""
        if isinstance(value, Constant) and show_constants:
            key = f"const:{value.name}" if value.name not in boxed else \
                f"const:{value.name}@{user}"
            boxed.add(value.name)
            vs.add(key, value_label(value), True)
            vs.values[key] = value.name
            vs.edges.append((len(vs.keys) - 1, dst, value.name, 0))
            return True
        if id(value) not in producer:
            return isinstance(value, Constant) or not isinstance(value, Placeholder)
        src, port = producer[id(value)]
        if (src, dst, value.name) not in seen:
            seen.add((src, dst, value.name))
            vs.edges.append((src, dst, value.name, port))
        return vs.const_cone[src]

    for node in graph.nodes:
        source = source_of(graph, node)
        v = vs.add(node.id, node_label(node, inline_constants=not show_constants,
                                       source=short_text(source) if source else None), True)
        cone = True
        for value in dict.fromkeys(value for value in node.inputs if value is not None):
            cone = connect(value, v, str(node.id)) and cone
        vs.const_cone[v] = cone
        for i, out in enumerate(node.outputs):
            producer[id(out)] = (v, i)
    for value in graph.outputs:
        key = f"out:{value.name}"
        if key in vs.values:
            continue
        v = vs.add(key, value_label(value), False)
        vs.values[key] = value.name
        connect(value, v, key)
    return vs


# -- layering ---------------------------------------------------------------------------------


def _topological(n: int, succ: list[list[int]], pred: list[list[int]]) -> list[int]:
    """Kahn's order; vertices left on a cycle (never in a valid graph) go last, as they come."""
    indegree = [len(p) for p in pred]
    order = [v for v in range(n) if indegree[v] == 0]
    for v in order:
        for w in succ[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                order.append(w)
    if len(order) < n:
        placed = set(order)
        order += [v for v in range(n) if v not in placed]
    return order


def assign_layers(n: int, edges: Sequence[tuple[int, int]],
                  const_cone: Sequence[bool] | None = None) -> list[int]:
    """Layer of each vertex: every edge goes at least one layer down, edges kept short.

    Longest-path layering puts every source at the top, which stretches the edge from a weight
    computation to its consumer across the whole graph. Each vertex therefore moves, within the
    range its neighbours allow, toward the side holding more of its edges (the move that
    shortens the total edge length); on a tie, vertices computed from constants alone move down
    to their consumer while the others stay up.
    """
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges:
        succ[s].append(d)
        pred[d].append(s)
    order = _topological(n, succ, pred)
    layer = [0] * n
    for v in order:
        for w in succ[v]:
            layer[w] = max(layer[w], layer[v] + 1)
    cone = const_cone or [False] * n
    # A source feeding one vertex always ends up right above it, so it does not hold that
    # vertex up: only the other predecessors count.
    follower = [not pred[v] and len(succ[v]) == 1 for v in range(n)]
    anchored = [sum(1 for p in pred[v] if not follower[p]) for v in range(n)]
    for _ in range(4):
        changed = False
        for v in reversed(order):
            if not succ[v]:
                continue
            lo = max((layer[p] + 1 for p in pred[v]), default=0)
            hi = min(layer[s] for s in succ[v]) - 1
            balance = anchored[v] - len(succ[v])
            target = layer[v]
            if balance < 0 or (balance == 0 and cone[v]):
                target = hi
            elif balance > 0:
                target = lo
            target = max(lo, min(hi, target))
            if target != layer[v]:
                layer[v] = target
                changed = True
        if not changed:
            break
    low = min(layer, default=0)
    return [x - low for x in layer]


# -- ordering and horizontal placement ---------------------------------------------------------


def _order_layers(n: int, edges: list[tuple[int, int]], layers: list[int]):
    """Crossing reduction by igraph: the x of every vertex and of every edge's dummy vertex."""
    g = igraph.Graph(n=n, edges=edges, directed=True)
    result = g.layout_sugiyama(layers=layers, hgap=1, vgap=1, maxiter=100)
    xs = [c[0] for c in result.coords[:n]]
    routes = [[p[0] for p in route] for route in result.edge_routing]
    return xs, routes


def _isotonic(targets: list[float], weights: list[float], seps: list[float]) -> list[float]:
    """Positions closest to `targets` (weighted least squares) keeping consecutive gaps >= seps.

    Subtracting the cumulative separations turns the constraints into plain monotonicity, which
    pool-adjacent-violators solves exactly in linear time.
    """
    offsets = [0.0]
    for s in seps:
        offsets.append(offsets[-1] + s)
    blocks: list[list[float]] = []  # [weighted sum, weight, count]
    for t, w, off in zip(targets, weights, offsets):
        blocks.append([(t - off) * w, w, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            top = blocks.pop()
            blocks[-1][0] += top[0]
            blocks[-1][1] += top[1]
            blocks[-1][2] += top[2]
    out: list[float] = []
    for total, weight, count in blocks:
        out.extend([total / weight] * int(count))
    return [y + off for y, off in zip(out, offsets)]


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


class _Placement:
    """The items of every layer (boxes and edge dummies) and their x positions."""

    def __init__(self, widths: list[float], layer_of: list[int], start_x: list[float],
                 chains: list[list[int]], minor: set[int]):
        self.widths = widths
        self.is_dummy = [w == 0.0 for w in widths]
        self.x = start_x
        self.up: list[list[int]] = [[] for _ in widths]
        self.down: list[list[int]] = [[] for _ in widths]
        for chain in chains:
            for a, b in zip(chain, chain[1:]):
                self.down[a].append(b)
                self.up[b].append(a)
        self.dummy_runs = [chain[1:-1] for chain in chains if len(chain) > 3]
        # A box's position follows the boxes it connects to directly, not the weights hanging
        # beside it nor long edges passing by: those make room instead. Without this, every
        # DenseNet block would drift sideways toward its skip connection.
        self.up_pref = [self._preferred(i, self.up[i], minor) for i in range(len(widths))]
        self.down_pref = [self._preferred(i, self.down[i], minor) for i in range(len(widths))]
        count = max(layer_of, default=-1) + 1
        self.rows: list[list[int]] = [[] for _ in range(count)]
        for item in sorted(range(len(widths)), key=lambda i: start_x[i]):
            self.rows[layer_of[item]].append(item)
        self._layer = layer_of
        self.weight = [0.2 if d else 1.0 + 0.25 * (len(self.up[i]) + len(self.down[i]))
                       for i, d in enumerate(self.is_dummy)]
        for i in minor:  # weights make way rather than push the data flow aside
            self.weight[i] = 1e-4

    def _preferred(self, item: int, links: list[int], minor: set[int]) -> list[int]:
        if self.is_dummy[item]:
            return links
        for keep in (lambda j: j not in minor and not self.is_dummy[j],
                     lambda j: j not in minor):
            chosen = [j for j in links if keep(j)]
            if chosen:
                return chosen
        return links

    def _seps(self, row: list[int]) -> list[float]:
        out = []
        for a, b in zip(row, row[1:]):
            gap = EDGE_GAP if self.is_dummy[a] or self.is_dummy[b] else NODE_GAP
            out.append((self.widths[a] + self.widths[b]) / 2 + gap)
        return out

    def pack(self) -> None:
        """Remove overlaps in each layer, moving items as little as possible."""
        for row in self.rows:
            self._place(row, [self.x[i] for i in row])

    def _place(self, row: list[int], targets: list[float]) -> None:
        if row:
            placed = _isotonic(targets, [self.weight[i] for i in row], self._seps(row))
            for i, x in zip(row, placed):
                self.x[i] = x

    def sweep(self, downward: bool) -> None:
        """Pull every item toward the median of its neighbours in the previous layer."""
        rows = self.rows if downward else self.rows[::-1]
        links = self.up_pref if downward else self.down_pref
        for row in rows[1:]:
            targets = [_median([self.x[j] for j in links[i]]) if links[i] else self.x[i]
                       for i in row]
            self._place(row, targets)

    def balance(self) -> None:
        """Pull every item toward the median of all its neighbours, both layers at once."""
        for row in self.rows:
            targets = [_median([self.x[j] for j in self.up_pref[i] + self.down_pref[i]])
                       if self.up_pref[i] or self.down_pref[i] else self.x[i] for i in row]
            self._place(row, targets)

    def straighten(self) -> None:
        """Put the dummies of each long edge in one column, beside the boxes it passes.

        The column is the point nearest the dummies' median that clears every box the edge
        passes in every layer; the boxes do not move. When no such point exists (the edge
        threads between boxes that are not aligned), the dummies go as near as they can.
        """
        slot = {item: k for row in self.rows for k, item in enumerate(row)}
        targets = list(self.x)
        for run in self.dummy_runs:
            lo, hi = float("-inf"), float("inf")
            for i in run:
                row, k = self.rows[self._layer[i]], slot[i]
                left = next((j for j in reversed(row[:k]) if not self.is_dummy[j]), None)
                right = next((j for j in row[k + 1:] if not self.is_dummy[j]), None)
                if left is not None:
                    lo = max(lo, self.x[left] + self.widths[left] / 2 + EDGE_GAP)
                if right is not None:
                    hi = min(hi, self.x[right] - self.widths[right] / 2 - EDGE_GAP)
            column = _median([self.x[i] for i in run])
            if lo <= hi:
                column = min(max(column, lo), hi)
            for i in run:
                targets[i] = column
        saved = self.weight
        self.weight = [1.0 if d else 1e3 for d in self.is_dummy]
        for row in self.rows:
            self._place(row, [targets[i] for i in row])
        self.weight = saved


# -- the whole layout -------------------------------------------------------------------------


def compute_layout(graph: Graph, *, show_constants: bool = False,
                   progress: Callable[[float], None] | None = None) -> GraphLayout:
    """Lay `graph` out top to bottom; a pure function of the graph (no Qt, no global state).

    Args:
        graph: The graph; it is only read.
        show_constants: Draw used constants as boxes of their own instead of lines inside
            their consumers.
        progress: Optional callback receiving the fraction done (0 to 1), for a progress bar.
    """
    layout = layout_vertices(_collect(graph, show_constants), progress)
    layout.show_constants = show_constants
    return layout


def layout_vertices(vs: Vertices, progress: Callable[[float], None] | None = None,
                    sizes: dict[int, tuple[float, float]] | None = None) -> GraphLayout:
    """Lay out vertices and edges collected from a graph (or from one group of it).

    `sizes` overrides the size of some vertices (an open group is as big as its contents).
    """
    report = progress or (lambda _fraction: None)
    n = len(vs.keys)
    sizes_of = [label.size() for label in vs.labels]
    for v, size in (sizes or {}).items():
        sizes_of[v] = size
    sizes = sizes_of
    pairs = [(s, d) for s, d, _, _ in vs.edges]
    layer = assign_layers(n, pairs, vs.const_cone)
    report(0.1)
    xs, routes = _order_layers(n, pairs, layer) if n else ([], [])
    report(0.6)

    # Items: the n boxes, then one zero-width item per dummy vertex of each long edge.
    unit = NODE_GAP + (sum(w for w, _ in sizes) / n if n else 0.0)
    widths = [w for w, _ in sizes]
    layer_of = list(layer)
    start = [x * unit for x in xs]
    chains: list[list[int]] = []
    for (s, d), route in zip(pairs, routes):
        chain = [s]
        for k, rx in enumerate(route):
            widths.append(0.0)
            layer_of.append(layer[s] + 1 + k)
            start.append(rx * unit)
            chain.append(len(widths) - 1)
        chain.append(d)
        chains.append(chain)
    # Weights and everything computed from them alone stand aside for the data flow.
    minor = {v for v in range(n) if vs.const_cone[v]}
    place = _Placement(widths, layer_of, start, chains, minor)
    place.pack()
    for i in range(SWEEPS):
        place.sweep(downward=i % 2 == 0)
    place.balance()
    place.straighten()
    report(0.9)

    # Vertical bands: each layer as tall as its tallest box, boxes centred in their band.
    count = max(layer, default=-1) + 1
    band_h = [0.0] * count
    for v in range(n):
        band_h[layer[v]] = max(band_h[layer[v]], sizes[v][1])
    band_top = []
    y = MARGIN
    for h in band_h:
        band_top.append(y)
        y += h + LAYER_GAP
    height = y - LAYER_GAP + MARGIN if count else 2 * MARGIN
    left = min((place.x[i] - widths[i] / 2 for i in range(len(widths))), default=0.0)
    shift = MARGIN - left
    boxes: dict[Key, Box] = {}
    for v, key in enumerate(vs.keys):
        w, h = sizes[v]
        top = band_top[layer[v]] + (band_h[layer[v]] - h) / 2
        boxes[key] = Box(round(place.x[v] + shift - w / 2, 1), round(top, 1), w, h)
    width = max((b.right for b in boxes.values()), default=0.0) + MARGIN

    edges = _route(vs, chains, place, shift, layer, band_top, band_h, boxes)
    report(1.0)
    return GraphLayout(boxes, edges, width, height,
                       labels=dict(zip(vs.keys, vs.labels)),
                       layers=dict(zip(vs.keys, layer)), values=vs.values)


def _ports(box: Box, count: int) -> list[float]:
    """Where `count` edges attach along a box side: centred, evenly spaced within its width."""
    if count <= 1:
        return [box.x + box.w / 2]
    step = min(PORT_STEP, box.w * 0.8 / (count - 1))
    first = box.x + box.w / 2 - step * (count - 1) / 2
    return [first + i * step for i in range(count)]


def _route(vs: Vertices, chains: list[list[int]], place: _Placement, shift: float,
           layer: list[int], band_top: list[float], band_h: list[float],
           boxes: dict[Key, Box]) -> list[Edge]:
    """Polylines: down from the source's port, through each dummy's slot, into the target."""
    def next_x(chain: list[int]) -> float:
        return place.x[chain[1]]

    def prev_x(chain: list[int]) -> float:
        return place.x[chain[-2]]

    # Output ports: one per output index of a box (users of one value fan out from one point),
    # ordered by where their edges head so that they do not cross right under the box.
    out_port: dict[tuple[int, int], float] = {}
    by_src: dict[int, dict[int, list[float]]] = {}
    for (s, _, _, port), chain in zip(vs.edges, chains):
        by_src.setdefault(s, {}).setdefault(port, []).append(next_x(chain))
    for s, ports in by_src.items():
        order = sorted(ports, key=lambda p: (_median(ports[p]), p))
        for p, x in zip(order, _ports(boxes[vs.keys[s]], len(order))):
            out_port[(s, p)] = x
    # Input ports: one per incoming edge, ordered by where the edges come from.
    in_port: dict[int, float] = {}
    by_dst: dict[int, list[int]] = {}
    for e, chain in enumerate(chains):
        by_dst.setdefault(chain[-1], []).append(e)
    for d, incoming in by_dst.items():
        incoming.sort(key=lambda e: (prev_x(chains[e]), e))
        for e, x in zip(incoming, _ports(boxes[vs.keys[d]], len(incoming))):
            in_port[e] = x

    edges: list[Edge] = []
    for e, ((s, d, name, port), chain) in enumerate(zip(vs.edges, chains)):
        src, dst = boxes[vs.keys[s]], boxes[vs.keys[d]]
        sx = round(out_port[(s, port)], 1)
        points = [(sx, src.bottom)]
        band_bottom = band_top[layer[s]] + band_h[layer[s]]
        if band_bottom > src.bottom:
            points.append((sx, band_bottom))
        for k, item in enumerate(chain[1:-1], start=1):
            x = round(place.x[item] + shift, 1)
            lay = layer[s] + k
            points.append((x, band_top[lay]))
            points.append((x, band_top[lay] + band_h[lay]))
        tx = round(in_port[e], 1)
        if band_top[layer[d]] < dst.y:
            points.append((tx, band_top[layer[d]]))
        points.append((tx, dst.y))
        edges.append(Edge(vs.keys[s], vs.keys[d], name, points))
    return edges
