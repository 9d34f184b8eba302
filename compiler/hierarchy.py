"""Groups of a graph's nodes for a collapsible view: QDQ units, known blocks and name scopes.

A quantized ONNX file is a wall of DequantizeLinear / QuantizeLinear pairs around each float
operator; a 50,000-node export is unreadable node by node. The hierarchy folds both: a QDQ unit
(the DequantizeLinear nodes only an operator reads, the operator, its activation and the
QuantizeLinear after them) reads as the integer operator it stands for; a depthwise convolution
feeding a pointwise one reads as a separable pair; the branch and shortcut joined by an Add read
as a residual block; names split on `/`, `.` and `:` give the scopes exporters write. Every group
is convex (no path leaves it and comes back), so a collapsed group is one box with edges in and
out and the picture stays acyclic. Pure data: the canvas draws it, the app keeps which groups
are open.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import igraph

from compiler.ir.graph import Constant, Graph, Node

Item = int | str  # a node id, or a group id ("group:...")

QDQ, SEPARABLE, RESIDUAL, SCOPE = "qdq", "separable", "residual", "scope"
ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"}
MAX_BRANCH = 8  # items on one side of a residual block, at most
SCOPE_SPLIT = re.compile(r"[/.:]")
OPEN_VIEW_ITEMS = 150  # groups open at first, outermost first, while this many items show


@dataclass
class Group:
    """A set of nodes shown as one box when collapsed, or as a frame around its children."""

    id: str
    kind: str  # QDQ, SEPARABLE, RESIDUAL or SCOPE
    title: str
    children: list[Item]
    op: str | None = None  # the operator the group stands for (its colour), if one
    parent: str | None = None


@dataclass
class Hierarchy:
    """The groups of one graph: a forest over its nodes, in graph order."""

    groups: dict[str, Group]
    top: list[Item]  # the items directly under the root
    parent: dict[Item, str | None] = field(default_factory=dict)
    _members: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def children(self, container: str | None) -> list[Item]:
        """The items directly under a group (None: the root)."""
        return self.top if container is None else self.groups[container].children

    def members(self, group: str) -> list[int]:
        """Every node inside `group`, at any depth, in graph order."""
        found = self._members.get(group)
        if found is None:
            found = []
            for child in self.groups[group].children:
                found.extend(self.members(child) if isinstance(child, str) else [child])
            self._members[group] = found
        return found

    def ancestors(self, item: Item) -> list[str]:
        """The groups holding `item`, outermost first."""
        chain = []
        up = self.parent.get(item)
        while up is not None:
            chain.append(up)
            up = self.parent.get(up)
        return chain[::-1]

    def depth(self, group: str) -> int:
        """1 for a group under the root, 2 for one inside it, and so on."""
        return len(self.ancestors(group)) + 1

    def shown_as(self, item: Item, expanded: set[str] | frozenset[str]) -> Item:
        """The item that shows `item`: itself, or its outermost collapsed group."""
        for group in self.ancestors(item):
            if group not in expanded:
                return group
        return item

    def visible_count(self, expanded: set[str] | frozenset[str]) -> int:
        """How many boxes (nodes and collapsed groups) show with `expanded` open."""
        def count(items: list[Item]) -> int:
            return sum(count(self.groups[i].children) if isinstance(i, str) and i in expanded
                       else 1 for i in items)
        return count(self.top)

    def walk(self) -> Iterator[Group]:
        """Every group, parents before children."""
        stack = [i for i in reversed(self.top) if isinstance(i, str)]
        while stack:
            group = self.groups[stack.pop()]
            yield group
            stack.extend(i for i in reversed(group.children) if isinstance(i, str))

    def max_depth(self) -> int:
        """The depth of the deepest group (0 without groups)."""
        return max((self.depth(g.id) for g in self.walk()), default=0)

    def to_depth(self, depth: int) -> frozenset[str]:
        """The groups open when the view is collapsed to `depth` levels."""
        return frozenset(g.id for g in self.walk() if self.depth(g.id) <= depth)

    def opening_view(self, budget: int = OPEN_VIEW_ITEMS) -> frozenset[str]:
        """Groups open when the model opens.

        Scopes open breadth first while the view stays within `budget` boxes (a big model
        opens at its outline); recognised units (QDQ units, separable pairs, residual blocks)
        stay closed, one box each.
        """
        expanded: set[str] = set()
        level = [i for i in self.top if isinstance(i, str)]
        shown = len(self.top)
        while level:
            following = []
            for group_id in level:
                group = self.groups[group_id]
                if group.kind != SCOPE or shown + len(group.children) - 1 > budget:
                    continue
                expanded.add(group_id)
                shown += len(group.children) - 1
                following.extend(i for i in group.children if isinstance(i, str))
            level = following
        return frozenset(expanded)

    def group_of_node(self, node_id: int) -> str | None:
        """The innermost group holding a node."""
        return self.parent.get(node_id)


def build_hierarchy(graph: Graph, *, scopes: bool = True, units: bool = True) -> Hierarchy:
    """Group `graph`'s nodes: QDQ units, then name scopes, then blocks within each scope."""
    builder = _Builder(graph)
    items: list[Item] = builder.qdq_units() if units else [n.id for n in graph.nodes]
    if scopes:
        items = builder.make_convex(builder.scopes(items))
    return builder.finish(builder.blocks(items))


# -- building --------------------------------------------------------------------------------


class _Builder:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.groups: dict[str, Group] = {}
        self._members: dict[str, list[int]] = {}
        self._firsts: dict[str, int] = {}
        self.nodes = {n.id: n for n in graph.nodes}
        self.order = {n.id: i for i, n in enumerate(graph.nodes)}
        producer: dict[int, int] = {}
        for node in graph.nodes:
            for out in node.outputs:
                producer[id(out)] = node.id
        self.preds: dict[int, list[int]] = {}
        self.succs: dict[int, list[int]] = {n.id: [] for n in graph.nodes}
        for node in graph.nodes:
            found = list(dict.fromkeys(producer[id(v)] for v in node.inputs
                                       if v is not None and id(v) in producer))
            self.preds[node.id] = found
            for p in found:
                self.succs[p].append(node.id)
        outputs = {id(v) for v in graph.outputs}
        self.is_output = {n.id for n in graph.nodes if any(id(o) in outputs for o in n.outputs)}

    # Item-level neighbours: the items owning a node's producers / consumers.
    def _item_nodes(self, item: Item) -> list[int]:
        if isinstance(item, int):
            return [item]
        found = self._members.get(item)  # a group keeps its nodes when regrouped inside
        if found is None:
            found = []
            for child in self.groups[item].children:
                found.extend(self._item_nodes(child))
            self._members[item] = found
        return found

    def _item_preds(self, item: Item, local: dict[int, Item]) -> list[Item]:
        """The items (of one container, `local`: node -> item) `item` reads; "out" for others."""
        nodes = set(self._item_nodes(item))
        return list(dict.fromkeys(local.get(p, "out") for n in nodes for p in self.preds[n]
                                  if p not in nodes))

    def _item_succs(self, item: Item, local: dict[int, Item]) -> list[Item]:
        """The items (of one container) that read `item`; "out" for readers elsewhere."""
        nodes = set(self._item_nodes(item))
        found = [local.get(s, "out") for n in nodes for s in self.succs[n] if s not in nodes]
        if any(n in self.is_output for n in nodes):
            found.append("out")
        return list(dict.fromkeys(found))

    def _group(self, kind: str, key: str, title: str, children: list[Item],
               op: str | None = None) -> str:
        group_id = f"group:{kind}:{key}"
        self.groups[group_id] = Group(group_id, kind, title, children, op)
        return group_id

    def _first(self, item: Item) -> int:
        """Where an item comes in the graph: its operator's place.

        A unit's weights come first in files, so its DequantizeLinear nodes would place it
        too early.
        """
        if isinstance(item, int) or item.startswith(f"group:{QDQ}:"):
            return self.order[self._anchor(item)]
        found = self._firsts.get(item)
        if found is None:
            found = self._firsts[item] = min(self._first(c) for c in self.groups[item].children)
        return found

    # QDQ units -----------------------------------------------------------------------------

    def qdq_units(self) -> list[Item]:
        """Each operator read through DequantizeLinear and written through QuantizeLinear."""
        taken: set[int] = set()
        units: dict[int, list[int]] = {}  # anchor node -> unit nodes
        for node in self.graph.nodes:
            if node.op in ("DequantizeLinear", "QuantizeLinear") or node.id in taken:
                continue
            unit = self._unit_of(node, taken)
            if unit:
                units[node.id] = unit
                taken.update(unit)
        anchor_of = {n: anchor for anchor, unit in units.items() for n in unit}
        items: list[Item] = []
        done: set[int] = set()
        for node in self.graph.nodes:
            if node.id in done:
                continue
            anchor = anchor_of.get(node.id)
            if anchor is None:
                items.append(node.id)
                continue
            unit = sorted(units[anchor], key=self.order.__getitem__)
            done.update(unit)
            op = self.nodes[anchor].op
            activation = next((self.nodes[n].op for n in unit
                               if self.nodes[n].op in ACTIVATIONS and n != anchor), None)
            title = f"{op}{'+' + activation if activation else ''} int8"
            items.append(self._group(QDQ, str(anchor), title, unit, op))
        return items

    def _only_reader(self, node: Node, reader: int) -> bool:
        return self.succs[node.id] == [reader] and node.id not in self.is_output

    def _unit_of(self, node: Node, taken: set[int]) -> list[int]:
        """The nodes of `node`'s QDQ unit, or [] when it is not read and written quantized."""
        feeding = [self.nodes[p] for p in self.preds[node.id]]
        if not any(p.op == "DequantizeLinear" for p in feeding):
            return []
        dequants = [p.id for p in feeding if p.op == "DequantizeLinear" and p.id not in taken
                    and self._only_reader(p, node.id)]
        chain = [node.id]
        tail = node
        while len(self.succs[tail.id]) == 1 and tail.id not in self.is_output:
            after = self.nodes[self.succs[tail.id][0]]
            if after.op == "QuantizeLinear":
                chain.append(after.id)
                return dequants + chain
            others = [self.nodes[p] for p in self.preds[after.id] if p != tail.id]
            if after.op == "Add" and others and all(  # a bias added after a MatMul
                    p.op == "DequantizeLinear" and self._only_reader(p, after.id)
                    for p in others):
                dequants += [p.id for p in others]
            elif after.op not in ACTIVATIONS or others:
                break
            chain.append(after.id)
            tail = after
        return []

    # Name scopes ---------------------------------------------------------------------------

    def _scope(self, item: Item) -> tuple[str, ...]:
        node = self.nodes[self._anchor(item)]
        name = node.name.split(";")[0]
        parts = [p for p in SCOPE_SPLIT.split(name) if p]
        return tuple(parts[:-1])

    def _anchor(self, item: Item) -> int:
        if isinstance(item, int):
            return item
        if item.startswith(f"group:{QDQ}:"):
            return int(item.rsplit(":", 1)[1])
        return self._item_nodes(item)[0]

    def scopes(self, items: list[Item]) -> list[Item]:
        """Items grouped by the scope path of their names, one group per scope of 2+ items."""
        paths = [self._scope(i) for i in items]
        common = _common_prefix(paths)
        root = _Trie()
        for item, path in zip(items, paths):
            root.add(path[len(common):], item)
        return self._scope_items(root, common)

    def _scope_items(self, trie: _Trie, path: tuple[str, ...]) -> list[Item]:
        # Entries in the order their first item appears, so groups follow the graph.
        entries: list[tuple[int, list[Item]]] = []
        for item in trie.items:
            entries.append((self._first(item), [item]))
        for part, child in trie.children.items():
            sub_path = path + (part,)
            while len(child.children) == 1 and not child.items:  # a/b/c with nothing at a/b
                (more, child), = child.children.items()
                sub_path += (more,)
            inner = self._scope_items(child, sub_path)
            if len(inner) >= 2:
                title = "/".join(sub_path[len(path):])
                gid = self._group(SCOPE, "/".join(sub_path), title, inner)
                entries.append((self._first(gid), [gid]))
            else:
                entries.append((self._first(inner[0]), inner))
        entries.sort(key=lambda e: e[0])
        return [i for _, group in entries for i in group]

    # Separable pairs and residual blocks ---------------------------------------------------

    def blocks(self, items: list[Item]) -> list[Item]:
        """Separable pairs and residual blocks among `items`, and inside every scope group."""
        for group in list(self.groups.values()):
            if group.kind == SCOPE:
                group.children = self._blocks_among(group.children)
        return self._blocks_among(items)

    def _op(self, item: Item) -> str:
        if isinstance(item, int):
            return self.nodes[item].op
        return self.groups[item].op or ""

    def _conv(self, item: Item) -> Node | None:
        node = self.nodes[self._anchor(item)]
        return node if node.op in ("Conv", "QLinearConv", "ConvInteger") else None

    def _depthwise(self, item: Item) -> bool:
        conv = self._conv(item)
        if conv is None or (conv.attrs.get("group") or 1) <= 1:
            return False
        weight = conv.inputs[3 if conv.op == "QLinearConv" else 1]
        shape = weight.type.shape if weight is not None else ()
        return len(shape) == 4 and shape[1] == 1

    def _pointwise(self, item: Item) -> bool:
        conv = self._conv(item)
        if conv is None or (conv.attrs.get("group") or 1) != 1:
            return False
        kernel = conv.attrs.get("kernel_shape")
        if not kernel:  # not in the file: the weight's spatial size
            weight = conv.inputs[3 if conv.op == "QLinearConv" else 1]
            kernel = weight.type.shape[2:] if weight is not None else ()
        return tuple(kernel) == (1, 1)

    def _blocks_among(self, items: list[Item]) -> list[Item]:
        local = {n: item for item in items for n in self._item_nodes(item)}
        here = set(items)

        def regroup(members: list[Item], gid: str) -> list[Item]:
            for node in self._item_nodes(gid):
                local[node] = gid
            return _replace(items, members, gid)

        for item in list(items):  # separable pairs: depthwise [-> activation] -> pointwise
            if item not in here or not self._depthwise(item):
                continue
            pair = [item]
            nxt = self._item_succs(item, local)
            while len(nxt) == 1 and nxt[0] in here and self._op(nxt[0]) in ACTIVATIONS:
                pair.append(nxt[0])
                nxt = self._item_succs(nxt[0], local)
            if len(nxt) == 1 and nxt[0] in here and self._pointwise(nxt[0]):
                pair.append(nxt[0])
                gid = self._group(SEPARABLE, str(self._anchor(item)), "separable", pair)
                items = regroup(pair, gid)
                here = set(items)
        for item in list(items):  # residual blocks: two short branches from one fork to an Add
            if item not in here or self._op(item) not in ("Add", "QLinearAdd"):
                continue
            block = self._residual(item, here, local)
            if block:
                gid = self._group(RESIDUAL, str(self._anchor(item)), "residual block", block)
                items = regroup(block, gid)
                here = set(items)
        return items

    def _residual(self, add: Item, here: set[Item], local: dict[int, Item]) -> list[Item]:
        preds = self._item_preds(add, local)
        if len(preds) != 2 or not all(p in here for p in preds):
            return []
        walks = [self._walk_up(p, here, local) for p in preds]
        fork = next((i for i in walks[0] if i in walks[1]), None)
        if fork is None:
            return []
        inside = {i for walk in walks for i in walk[:walk.index(fork)]}
        if not inside:
            return []
        for item in inside:  # nothing inside is read from outside the block
            if any(s not in inside and s != add for s in self._item_succs(item, local)):
                return []
        return sorted(inside | {add}, key=self._first)

    def _walk_up(self, item: Item, here: set[Item], local: dict[int, Item]) -> list[Item]:
        walk = [item]
        for _ in range(MAX_BRANCH):
            preds = self._item_preds(walk[-1], local)
            if len(preds) != 1 or preds[0] not in here:
                break
            walk.append(preds[0])
        return walk

    # Convexity -----------------------------------------------------------------------------

    def make_convex(self, top: list[Item]) -> list[Item]:
        """Dissolve groups that a path leaves and re-enters (they would make a cycle)."""
        def fix(container_items: list[Item]) -> list[Item]:
            while True:
                cyclic = self._cyclic_groups(container_items)
                if not cyclic:
                    break
                flat: list[Item] = []
                for item in container_items:
                    if item in cyclic:
                        flat.extend(self.groups.pop(item).children)
                    else:
                        flat.append(item)
                container_items = sorted(flat, key=self._first)
            for item in container_items:
                if isinstance(item, str):
                    group = self.groups[item]
                    group.children = fix(group.children)
            return container_items

        return fix(top)

    def _cyclic_groups(self, items: list[Item]) -> set[str]:
        if not any(isinstance(item, str) for item in items):
            return set()
        index = {}
        for i, item in enumerate(items):
            for node in self._item_nodes(item):
                index[node] = i
        edges = set()
        backward = False  # items come in graph order: only an edge going back can close a cycle
        for node, i in index.items():
            for succ in self.succs[node]:
                j = index.get(succ)
                if j is not None and j != i:
                    edges.add((i, j))
                    backward = backward or j < i
        if not backward:
            return set()
        g = igraph.Graph(n=len(items), edges=sorted(edges), directed=True)
        cyclic = set()
        for component in g.connected_components(mode="strong"):
            if len(component) > 1:
                cyclic.update(items[i] for i in component if isinstance(items[i], str))
        return cyclic

    def finish(self, top: list[Item]) -> Hierarchy:
        """Parents of every item, and groups reachable from the root only."""
        parent: dict[Item, str | None] = {}
        groups: dict[str, Group] = {}

        def visit(items: list[Item], up: str | None) -> None:
            for item in items:
                parent[item] = up
                if isinstance(item, str):
                    group = self.groups[item]
                    group.parent = up
                    groups[item] = group
                    visit(group.children, item)

        visit(top, None)
        return Hierarchy(groups, top, parent)


class _Trie:
    def __init__(self):
        self.items: list[Item] = []
        self.children: dict[str, _Trie] = {}

    def add(self, path: tuple[str, ...], item: Item) -> None:
        node = self
        for part in path:
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = _Trie()
            node = child
        node.items.append(item)


def _common_prefix(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    if not paths:
        return ()
    first = paths[0]
    size = min(len(p) for p in paths)
    for i in range(size):
        if any(p[i] != first[i] for p in paths):
            return first[:i]
    return first[:size]


def _replace(items: list[Item], members: Iterable[Item], group: str) -> list[Item]:
    members = set(members)
    out: list[Item] = []
    placed = False
    for item in items:
        if item in members:
            if not placed:
                out.append(group)
                placed = True
        else:
            out.append(item)
    return out



@dataclass(frozen=True)
class GroupSummary:
    """What a closed group adds up to: its nodes' MACs and weights, and what leaves it."""

    nodes: int
    macs: int
    weight_bytes: int
    outputs: tuple[str, ...]  # values made inside and read outside (or graph outputs)


def summarize(graph: Graph, members: Iterable[int], macs: dict[int, int | None]) -> GroupSummary:
    """Sum a group's members (MACs from `compiler.stats.node_macs`; unknown ones count 0)."""
    inside = set(members)
    nodes = [n for n in graph.nodes if n.id in inside]
    weights = {id(v): v.type.nbytes for n in nodes for v in n.inputs if isinstance(v, Constant)}
    read_outside = {id(v) for n in graph.nodes if n.id not in inside for v in n.inputs
                    if v is not None}
    read_outside |= {id(v) for v in graph.outputs}
    leaving = tuple(v.name for n in nodes for v in n.outputs if id(v) in read_outside)
    return GroupSummary(len(nodes), sum(macs.get(n.id) or 0 for n in nodes),
                        sum(weights.values()), leaving)
