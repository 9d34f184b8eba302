"""Groups of a graph: QDQ units, separable pairs, residual blocks, name scopes, convexity."""

from __future__ import annotations

import igraph
import pytest

from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.hierarchy import QDQ, RESIDUAL, SCOPE, SEPARABLE, build_hierarchy, summarize
from compiler.stats import node_macs
from tests.conftest import shared_models
from tests.deep_models import residual_chain
from tests.views.graphs import scoped_model


def _kinds(h):
    out: dict[str, int] = {}
    for group in h.walk():
        out[group.kind] = out.get(group.kind, 0) + 1
    return out


def _acyclic_at_every_level(graph, h) -> None:
    """Every container's children, as a quotient graph, have no cycle (groups are convex)."""
    producer = {id(o): n.id for n in graph.nodes for o in n.outputs}
    for container in [None, *h.groups]:
        children = h.children(container)
        owner = {}
        for i, child in enumerate(children):
            for node in (h.members(child) if isinstance(child, str) else [child]):
                owner[node] = i
        edges = {(owner[producer[id(v)]], owner[n.id]) for n in graph.nodes if n.id in owner
                 for v in n.inputs if v is not None and id(v) in producer
                 and producer[id(v)] in owner and owner[producer[id(v)]] != owner[n.id]}
        quotient = igraph.Graph(n=len(children), edges=sorted(edges), directed=True)
        assert quotient.is_dag(), f"a cycle among the children of {container}"


def _partition(graph, h) -> None:
    """Every node is in exactly one place of the tree."""
    placed = []
    for item in h.top:
        placed += h.members(item) if isinstance(item, str) else [item]
    assert sorted(placed) == sorted(n.id for n in graph.nodes)


def test_scoped_model_groups_by_scope():
    graph = load_onnx(scoped_model(stages=2, blocks=3, layers=4))
    h = build_hierarchy(graph)
    _partition(graph, h)
    _acyclic_at_every_level(graph, h)
    kinds = _kinds(h)
    assert kinds == {SCOPE: 2 + 2 * 3 + 2 * 3 * 4}  # stages, blocks, layers
    titles = {h.groups[i].title for i in h.top if isinstance(i, str)}
    assert titles == {"stage_0", "stage_1"}
    # Opening view: within budget, recognised units closed.
    opened = h.opening_view()
    assert all(h.groups[g].kind == SCOPE for g in opened)
    assert h.visible_count(opened) <= 150
    assert h.visible_count(frozenset()) == 2
    assert h.to_depth(1) == frozenset(i for i in h.top if isinstance(i, str))


def test_residual_chain_blocks():
    graph = load_onnx(residual_chain(5))
    h = build_hierarchy(graph)
    _partition(graph, h)
    assert _kinds(h) == {RESIDUAL: 4}  # the first block forks at the graph input, not a node
    block = next(g for g in h.walk())
    assert [graph.node(n).op for n in h.members(block.id)] == ["Conv", "Relu", "Add"]


def test_shown_as_and_ancestors():
    graph = load_onnx(scoped_model(stages=2, blocks=2, layers=2))
    h = build_hierarchy(graph)
    node = graph.nodes[5].id
    chain = h.ancestors(node)
    assert chain and h.parent[chain[0]] is None
    assert h.shown_as(node, frozenset()) == chain[0]
    assert h.shown_as(node, frozenset(chain)) == node
    assert h.shown_as(node, frozenset(chain[:1])) == chain[1]


def test_summary_sums_members():
    graph = load_onnx(scoped_model(stages=1, blocks=1, layers=3))
    h = build_hierarchy(graph)
    macs = node_macs(graph)
    members = [n for i in h.top for n in (h.members(i) if isinstance(i, str) else [i])]
    summary = summarize(graph, members, macs)
    assert summary.nodes == len(graph.nodes)
    assert summary.macs == sum(m or 0 for m in macs.values())
    assert summary.weight_bytes == sum(c.type.nbytes for c in graph.constants.values())
    assert summary.outputs == (graph.outputs[0].name,)


def test_a_non_convex_scope_is_dissolved():
    """a/x -> b/y -> a/z: scope a would contain a path leaving it and coming back."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["in"], ["t1"], name="a/x"),
             helper.make_node("Relu", ["t1"], ["t2"], name="b/y"),
             helper.make_node("Relu", ["t2"], ["t3"], name="a/z"),
             helper.make_node("Relu", ["t3"], ["out"], name="b/w")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("in", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load_onnx(model)
    h = build_hierarchy(graph)
    _partition(graph, h)
    _acyclic_at_every_level(graph, h)
    assert not h.groups


@pytest.mark.parametrize("name", ["vww_96_int8", "kws_ref_model", "pretrainedResnet_quant"])
def test_qdq_models_fold_into_units(name):
    graph = load_model(shared_models() / "onnx" / f"{name}.onnx", {})
    h = build_hierarchy(graph)
    _partition(graph, h)
    _acyclic_at_every_level(graph, h)
    quantize = sum(1 for n in graph.nodes if n.op == "QuantizeLinear")
    units = [g for g in h.walk() if g.kind == QDQ]
    assert len(units) == quantize  # every QuantizeLinear closes a unit
    for unit in units:
        ops = [graph.node(n).op for n in h.members(unit.id)]
        assert ops.count("QuantizeLinear") == 1 and "DequantizeLinear" in ops
        assert unit.title.endswith(" int8")
    inside = {n for u in units for n in h.members(u.id)}
    # Left between units: DequantizeLinear nodes read by two of them (a residual's shortcut),
    # and the output's.
    for node in graph.nodes:
        if node.id not in inside and node.op == "DequantizeLinear" and not any(
                v is node.output for v in graph.outputs):
            assert len(graph.users(node.output)) >= 2
    if name == "vww_96_int8":
        assert _kinds(h)[SEPARABLE] == 13
        assert h.visible_count(h.opening_view()) < 40 < len(graph.nodes)


def test_int8_tflite_blocks():
    graph = load_model(shared_models() / "tflite" / "pretrainedResnet_quant.tflite", {})
    h = build_hierarchy(graph)
    _acyclic_at_every_level(graph, h)
    assert _kinds(h) == {RESIDUAL: 3}


def test_convolutions_without_kernel_shape_still_pair():
    """kernel_shape is optional in ONNX: the weight's spatial size stands for it."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    dw = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "dw")
    pw = numpy_helper.from_array(np.ones((8, 4, 1, 1), np.float32), "pw")
    nodes = [helper.make_node("Conv", ["x", "dw"], ["d"], name="depthwise", group=4,
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "pw"], ["y"], name="pointwise")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])], [dw, pw]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load_onnx(model)
    h = build_hierarchy(graph)
    assert _kinds(h) == {SEPARABLE: 1}
    assert [graph.node(n).name for n in h.members(h.top[0])] == ["depthwise", "relu",
                                                                 "pointwise"]
