"""The grouped layout: closed groups as boxes, open ones as frames around their members."""

from __future__ import annotations

from compiler.frontends.onnx import load_onnx
from compiler.hierarchy import build_hierarchy
from tests.deep_models import conv_relu_chain
from tests.views.graphs import scoped_model
from views.group_layout import GroupedLayout, lay_out_view


def _inside(inner, outer) -> bool:
    return (outer.x <= inner.x and inner.right <= outer.right
            and outer.y <= inner.y and inner.bottom <= outer.bottom)


def _check(layout, hierarchy, expanded) -> None:
    """Every shown item placed once, inside its open groups, apart from its siblings."""
    shown = {k for k in layout.boxes if isinstance(k, int) or k.startswith("group:")}
    assert len(shown) == hierarchy.visible_count(expanded)
    assert set(layout.frames) == set(expanded) & set(hierarchy.groups) - {
        g for g in expanded if any(a not in expanded for a in hierarchy.ancestors(g))}
    places = {**layout.boxes, **layout.frames}
    for key, box in places.items():
        up = hierarchy.parent.get(key) if not (isinstance(key, str)
                                                and key.startswith("port:")) else None
        if up is not None:
            assert _inside(box, layout.frames[up]), (key, up)
    siblings: dict = {}
    for key in places:
        if isinstance(key, int) or key.startswith("group:"):
            siblings.setdefault(hierarchy.parent.get(key), []).append(places[key])
    for boxes in siblings.values():
        for i, a in enumerate(boxes):
            assert not any(a.overlaps(b) for b in boxes[i + 1:])
    ends = set(places)
    seen = set()
    for edge in layout.edges:
        assert edge.src in ends and edge.dst in ends
        assert (edge.src, edge.dst, edge.value) not in seen  # one edge per value and pair
        seen.add((edge.src, edge.dst, edge.value))


def test_open_and_closed_groups_nest_without_overlaps():
    graph = load_onnx(scoped_model(stages=3, blocks=3, layers=3))
    hierarchy = build_hierarchy(graph)
    grouped = GroupedLayout(graph, hierarchy)
    stages = [i for i in hierarchy.top if isinstance(i, str)]
    block = hierarchy.groups[stages[1]].children[2]
    for expanded in (frozenset(), frozenset(stages[:1]), frozenset({stages[1], block}),
                     frozenset(hierarchy.groups), hierarchy.opening_view()):
        _check(grouped.layout(expanded), hierarchy, expanded)


def test_opening_a_group_reuses_every_other_groups_layout():
    graph = load_onnx(scoped_model(stages=3, blocks=3, layers=3))
    hierarchy = build_hierarchy(graph)
    grouped = GroupedLayout(graph, hierarchy)
    stages = [i for i in hierarchy.top if isinstance(i, str)]
    base = frozenset(stages)
    grouped.layout(base)
    before = dict(grouped._cache)
    block = hierarchy.groups[stages[2]].children[0]
    grouped.layout(base | {block})
    added = [key for key in grouped._cache if key not in before]
    # The block, the stage holding it and the root: nothing else is laid out again.
    assert sorted(str(key[0]) for key in added) == sorted([block, stages[2], "None"])
    again = grouped.layout(base | {block})
    assert len(grouped._cache) == len(before) + 3 and again.boxes


def test_a_graph_without_groups_gets_the_flat_layout():
    graph = load_onnx(conv_relu_chain(6))
    assert not build_hierarchy(graph).groups
    layout = lay_out_view(graph)
    assert layout.grouping is None and not layout.frames
    assert set(k for k in layout.boxes if isinstance(k, int)) == {n.id for n in graph.nodes}


def test_edges_enter_open_groups_through_ports():
    graph = load_onnx(scoped_model(stages=2, blocks=1, layers=2))
    hierarchy = build_hierarchy(graph)
    layout = GroupedLayout(graph, hierarchy).layout(frozenset(hierarchy.groups))
    ports = [k for k in layout.boxes if isinstance(k, str) and k.startswith("port:")]
    assert ports
    for port in ports:
        group = port.split("@", 1)[1]
        assert _inside(layout.boxes[port], layout.frames[group])
        assert layout.values[port] == port[len("port:"):].split("@", 1)[0]
        assert any(e.src == port for e in layout.edges)
