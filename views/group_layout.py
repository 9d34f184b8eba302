"""Qt-free layout of a graph with groups: each open group laid out on its own, once.

An open group is a frame around its children; a closed one is a box. Every group's contents are
laid out by `views.layout` as a small graph of their own (its children, plus one port box per
value entering it from outside), and the result is cached by the group and by which of its
descendants are open. Opening one group therefore lays out that group and the chain of groups
holding it (each as small as its direct children), never the whole graph: a 50,000-node model
opens at its outline in well under a second and opens a group in milliseconds.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from compiler.bulk import collector_paused
from compiler.frontends.source import short_text, source_of
from compiler.hierarchy import QDQ, Group, Hierarchy, Item, build_hierarchy
from compiler.ir.graph import Constant, Graph
from views.labels import ATTR, SHAPE, NodeLabel, elide, node_label, type_text, value_label
from views.layout import (
    MARGIN,
    Box,
    Edge,
    GraphLayout,
    Key,
    Vertices,
    compute_layout,
    layout_vertices,
)

FRAME_PAD = 12.0  # space between a frame's sides and its contents
FRAME_HEADER = 26.0  # height of a frame's title band

Container = str | None  # a group id, or None for the root

# (source key, its groups outermost first, destination key, its groups, value name, port)
_Link = tuple[Key, tuple[str, ...], Key, tuple[str, ...], str, int]


@dataclass
class _Inner:
    """One container's own layout, in its own coordinates, and the open groups inside it."""

    layout: GraphLayout
    opened: dict[str, _Inner] = field(default_factory=dict)


class GroupedLayout:
    """Layouts of one graph under any set of open groups, sharing every group's layout."""

    def __init__(self, graph: Graph, hierarchy: Hierarchy, show_constants: bool = False):
        # Weak: the window caches layouts in a WeakKeyDictionary keyed by their graph, and a
        # value holding its key would keep every graph ever shown alive.
        self._graph = weakref.ref(graph)
        self.hierarchy = hierarchy
        self.show_constants = show_constants
        self._nodes = {n.id: n for n in graph.nodes}
        self._chains: dict[Item, tuple[str, ...]] = {}
        self._edges: dict[Container, list[tuple[Key, Key, str, int]]] = {}
        self._ports: dict[Container, list[tuple[str, Key]]] = {}
        self._consts: dict[Container, list[tuple[str, int]]] = {}  # (constant, node reading it)
        self._cache: dict[tuple, _Inner] = {}
        self._links()

    @property
    def graph(self) -> Graph:
        """The graph laid out (alive as long as anything shows it)."""
        graph = self._graph()
        if graph is None:
            raise ReferenceError("the graph of this layout is gone")
        return graph

    # -- where every edge is drawn -----------------------------------------------------------

    def chain(self, item: Item) -> tuple[str, ...]:
        """The groups holding `item`, outermost first (memoised: edges ask once per end)."""
        found = self._chains.get(item)
        if found is None:
            up = self.hierarchy.parent.get(item)
            found = () if up is None else self.chain(up) + (up,)
            self._chains[item] = found
        return found

    def _links(self) -> None:
        """File every value edge under the container where it is drawn.

        An edge between two nodes is drawn in their innermost common group, between the
        children of that group holding them; inside every open group it enters on the way
        down, it starts again at a port box.
        """
        producer: dict[int, tuple[Key, int]] = {}
        for value in self.graph.inputs:
            producer[id(value)] = (f"in:{value.name}", 0)
        seen: set[tuple[Key, Key, str]] = set()
        links: list[_Link] = []
        for node in self.graph.nodes:
            for value in dict.fromkeys(v for v in node.inputs if v is not None):
                if isinstance(value, Constant):
                    if self.show_constants:
                        self._consts.setdefault(self._parent(node.id), []).append(
                            (value.name, node.id))
                    continue
                if id(value) not in producer:
                    continue
                src, port = producer[id(value)]
                if (src, node.id, value.name) not in seen:
                    seen.add((src, node.id, value.name))
                    links.append((src, self._chain_of(src), node.id, self.chain(node.id),
                                  value.name, port))
            for i, out in enumerate(node.outputs):
                producer[id(out)] = (node.id, i)
        for value in self.graph.outputs:
            if id(value) in producer:
                src, port = producer[id(value)]
                links.append((src, self._chain_of(src), f"out:{value.name}", (),
                              value.name, port))
        out_ports: dict[tuple[Container, Key], dict[str, int]] = {}
        drawn: set[tuple[Container, Key, Key, str]] = set()
        for src, s_chain, dst, d_chain, value, port in links:
            depth = 0
            while (depth < len(s_chain) and depth < len(d_chain)
                   and s_chain[depth] == d_chain[depth]):
                depth += 1
            container = d_chain[depth - 1] if depth else None
            s_item = s_chain[depth] if len(s_chain) > depth else src
            d_item = d_chain[depth] if len(d_chain) > depth else dst
            if isinstance(s_item, str) and s_item.startswith("group:"):
                ports = out_ports.setdefault((container, s_item), {})
                port = ports.setdefault(value, len(ports))
            if (container, s_item, d_item, value) not in drawn:  # one edge per value and pair
                drawn.add((container, s_item, d_item, value))
                self._edges.setdefault(container, []).append((s_item, d_item, value, port))
            for k in range(depth, len(d_chain)):
                inner = d_chain[k + 1] if k + 1 < len(d_chain) else dst
                self._ports.setdefault(d_chain[k], []).append((value, inner))
        for container, ports in self._ports.items():
            self._ports[container] = list(dict.fromkeys(ports))

    def _parent(self, item: Item) -> Container:
        return self.hierarchy.parent.get(item)

    def _chain_of(self, key: Key) -> tuple[str, ...]:
        return self.chain(key) if isinstance(key, int) else ()

    # -- labels ------------------------------------------------------------------------------

    def group_label(self, group: Group) -> NodeLabel:
        """A closed group's box: its title, what it holds, and its output's type."""
        members = self.hierarchy.members(group.id)
        kinds = {QDQ: "QDQ unit", "separable": "depthwise + pointwise",
                 "residual": "residual block", "scope": "scope"}
        lines = [f"{kinds.get(group.kind, group.kind)} · {len(members)} nodes"]
        line_kinds = [ATTR]
        last = self._nodes[members[-1]] if group.kind == QDQ else None
        if last is not None and last.outputs:
            lines.append(elide(type_text(last.output.type)))
            line_kinds.append(SHAPE)
        return NodeLabel(elide(group.title), tuple(lines), tuple(line_kinds))

    def _node_label(self, node_id: int) -> NodeLabel:
        node = self._nodes[node_id]
        source = source_of(self.graph, node)
        return node_label(node, inline_constants=not self.show_constants,
                          source=short_text(source) if source else None)

    # -- layouts -----------------------------------------------------------------------------

    def layout(self, expanded: set[str] | frozenset[str],
               progress: Callable[[float], None] | None = None) -> GraphLayout:
        """The whole picture with the groups in `expanded` open (the others closed)."""
        inner = self._inner(None, frozenset(expanded))
        if progress is not None:
            progress(1.0)
        out = GraphLayout({}, [], inner.layout.width, inner.layout.height,
                          show_constants=self.show_constants, grouping=self,
                          expanded=frozenset(expanded))
        self._compose(inner, 0.0, 0.0, out)
        for key in (*out.frames, *out.boxes):
            group = self.hierarchy.groups.get(key) if isinstance(key, str) else None
            if group is not None:
                out.groups[key] = (group.op or "", len(self.hierarchy.members(key)))
        return out

    def _inner(self, container: Container, expanded: frozenset[str]) -> _Inner:
        children = self.hierarchy.children(container)
        opened = {c: self._inner(c, expanded) for c in children
                  if isinstance(c, str) and c in expanded}
        key = (container, self.show_constants,
               tuple((c, id(inner)) for c, inner in opened.items()))
        found = self._cache.get(key)
        if found is None:
            found = _Inner(self._lay_out(container, opened), opened)
            self._cache[key] = found
        return found

    def _lay_out(self, container: Container, opened: dict[str, _Inner]) -> GraphLayout:
        vs = Vertices()
        index: dict[Key, int] = {}
        sizes: dict[int, tuple[float, float]] = {}

        def add(key: Key, label: NodeLabel, cone: bool = False) -> int:
            index[key] = vs.add(key, label, cone)
            return index[key]

        if container is None:
            for value in self.graph.inputs:
                add(f"in:{value.name}", value_label(value))
                vs.values[f"in:{value.name}"] = value.name
        else:
            for value, _ in self._ports.get(container, []):
                key = f"port:{value}@{container}"
                if key not in index:
                    add(key, NodeLabel(elide(value, 24)))
                    vs.values[key] = value
        for child in self.hierarchy.children(container):
            if isinstance(child, int):
                add(child, self._node_label(child))
            elif child in opened:
                inside = opened[child].layout
                v = add(child, NodeLabel(elide(self.hierarchy.groups[child].title)))
                sizes[v] = (inside.width - 2 * MARGIN + 2 * FRAME_PAD,
                            inside.height - 2 * MARGIN + FRAME_HEADER + FRAME_PAD)
            else:
                add(child, self.group_label(self.hierarchy.groups[child]))
        for name, reader in self._consts.get(container, []):
            key = f"const:{name}@{reader}"
            add(key, value_label(self.graph.constants[name]), True)
            vs.values[key] = name
            vs.edges.append((index[key], index[reader], name, 0))
        if container is None:
            for value in self.graph.outputs:
                key = f"out:{value.name}"
                if key not in index:
                    add(key, value_label(value))
                    vs.values[key] = value.name
        for value, inner in self._ports.get(container, []):
            vs.edges.append((index[f"port:{value}@{container}"], index[inner], value, 0))
        for src, dst, value, port in self._edges.get(container, []):
            if src in index and dst in index:
                vs.edges.append((index[src], index[dst], value, port))
        return layout_vertices(vs, sizes=sizes)

    def _compose(self, inner: _Inner, dx: float, dy: float, out: GraphLayout) -> None:
        """Copy one container's layout into the whole picture, shifted, and its open groups."""
        layout = inner.layout
        for key, box in layout.boxes.items():
            moved = Box(round(box.x + dx, 1), round(box.y + dy, 1), box.w, box.h)
            out.labels[key] = layout.labels[key]
            if key in inner.opened:
                out.frames[key] = moved
                self._compose(inner.opened[key], moved.x + FRAME_PAD - MARGIN,
                              moved.y + FRAME_HEADER - MARGIN, out)
            else:
                out.boxes[key] = moved
            out.layers[key] = layout.layers.get(key, 0)
        out.values.update(layout.values)
        for edge in layout.edges:
            out.edges.append(Edge(edge.src, edge.dst, edge.value,
                                  [(round(x + dx, 1), round(y + dy, 1)) for x, y in edge.points]))


def lay_out_view(graph: Graph, *, show_constants: bool = False,
                 expanded: frozenset[str] | None = None,
                 progress: Callable[[float], None] | None = None) -> GraphLayout:
    """The canvas's layout of `graph`: grouped when it has groups, else the flat one.

    `expanded` names the open groups (None: the hierarchy's opening view); names of groups
    the graph no longer has are ignored.
    """
    with collector_paused():
        hierarchy = build_hierarchy(graph)
        if not hierarchy.groups:
            return compute_layout(graph, show_constants=show_constants, progress=progress)
        opened = hierarchy.opening_view() if expanded is None else \
            frozenset(g for g in expanded if g in hierarchy.groups)
        return GroupedLayout(graph, hierarchy, show_constants).layout(opened, progress)
