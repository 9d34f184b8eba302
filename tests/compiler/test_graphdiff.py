"""Comparing two graphs: which layer is which, what changed, by how much (no Qt)."""

from __future__ import annotations

import onnx
import pytest

from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.graphdiff import Side, diff_graphs
from compiler.graphdiff.names import kind, name_forms
from compiler.graphdiff.stages import Operand, compare
from compiler.quant.calibration_data import load_calibration
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import quantize
from compiler.stats import node_macs
from tests.conftest import SAMPLE_MODEL, shared_models


def _load(model: onnx.ModelProto, tmp_path, name: str):
    path = tmp_path / name
    onnx.save(model, path)
    return load_model(path)


def _ops(graph) -> dict[int, str]:
    return {n.id: n.op for n in graph.nodes}


def test_name_forms_take_quantizer_and_converter_suffixes_off_one_at_a_time():
    assert name_forms("a/Conv2D1_prequant__77_DequantizeLinear__192") == [
        "a/Conv2D1_prequant__77_DequantizeLinear__192",
        "a/Conv2D1_prequant__77_DequantizeLinear", "a/Conv2D1_prequant__77",
        "a/Conv2D1_prequant", "a/Conv2D1"]
    assert name_forms("Relu__5") == ["Relu__5", "Relu"]
    assert kind("QLinearConv") == kind("ConvInteger") == "Conv"
    assert kind("QGemm") == kind("FullyConnected") == kind("MatMul") == "Dense"
    assert kind("QuantizeLinear") == "QuantizeLinear"


def test_a_model_against_another_load_of_itself_is_all_unchanged():
    a, b = load_model(SAMPLE_MODEL), load_model(SAMPLE_MODEL)
    d = diff_graphs(Side(a), Side(b))
    counts = d.counts()
    assert counts["matched"] == len(a.nodes) == 9
    assert counts["unchanged"] == 9 and counts["changed"] == 0
    assert counts["removed"] == counts["added"] == 0 and d.differences == []
    assert all(how == "name" for how in d.correspondence.how.values())
    assert all(delta == 0 for *_, delta in d.totals().values())


def test_one_edited_attribute_changes_exactly_that_node(tmp_path):
    model = onnx.load(SAMPLE_MODEL)
    fc = next(n for n in model.graph.node if n.op_type == "Gemm")
    for attr in fc.attribute:
        if attr.name == "alpha":
            attr.f = 0.5
    a, b = load_model(SAMPLE_MODEL), _load(model, tmp_path, "edited.onnx")
    d = diff_graphs(Side(a), Side(b))
    assert d.counts()["matched"] == 9
    assert [d.units_a.nodes[x].name for x in d.changed()] == ["fc"]
    (change,) = d.changes[d.changed()[0]]
    assert (change.what, change.name, change.before, change.after) == ("attribute", "alpha",
                                                                       "1", "0.5")
    assert [(r.status, r.a, r.b) for r in d.differences] == [("changed", 8, 8)]


def test_renamed_layers_match_by_structure(tmp_path):
    model = onnx.load(SAMPLE_MODEL)
    for k, node in enumerate(model.graph.node):
        node.name = f"layer{k * 7 % 9}"
    a, b = load_model(SAMPLE_MODEL), _load(model, tmp_path, "renamed.onnx")
    d = diff_graphs(Side(a), Side(b))
    pairs = d.correspondence.pairs
    assert {(a.node(x).op, b.node(y).op) for x, y in pairs.items()} == {
        (op, op) for op in _ops(a).values()}
    assert pairs == {n.id: n.id for n in a.nodes}  # the same positions in the file
    assert d.counts()["by"]["structure"] > 0 and d.counts()["changed"] == 0


def test_a_removed_and_an_added_layer(tmp_path):
    """A model with relu3 dropped: relu3 removed, nothing else changed, nothing added."""
    model = onnx.load(SAMPLE_MODEL)
    nodes = list(model.graph.node)
    relu3 = next(n for n in nodes if n.name == "relu3")
    flatten = next(n for n in nodes if n.op_type == "Flatten")
    flatten.input[0] = relu3.input[0]
    model.graph.node.remove(relu3)
    a, b = load_model(SAMPLE_MODEL), _load(model, tmp_path, "cut.onnx")
    d = diff_graphs(Side(a), Side(b))
    assert [a.node(i).name for i in d.correspondence.removed] == ["relu3"]
    assert d.correspondence.added == [] and d.counts()["changed"] == 0
    back = diff_graphs(Side(b), Side(a))
    assert [a.node(i).name for i in back.correspondence.added] == ["relu3"]
    assert [r.status for r in back.differences] == ["added"]


def test_a_graph_against_its_final_stage_matches_by_provenance():
    graph = load_model(SAMPLE_MODEL)
    d = compare(Operand(graph, "loaded"), Operand(graph, "final"))
    final = compilation(graph).final
    c = d.correspondence
    assert c.how and set(c.how.values()) == {"provenance"}
    # Every convolution and the classifier survive, fused: their ReLUs fold into them.
    by_name = {graph.node(x).name: final.node(y).op for x, y in c.pairs.items()}
    assert by_name == {"conv1": "Conv", "conv2": "Conv", "conv3": "Conv", "pool1": "MaxPool",
                       "fc": "FullyConnected", "flatten": "Reshape"}
    folded = {graph.node(i).name: final.node(j).op for i, j in c.folded_a.items()}
    assert folded == {"relu1": "Conv", "relu2": "Conv", "relu3": "Conv"}
    # The input's layout Reshape came of conv1 (its provenance): it folds into conv1.
    assert c.added == c.removed == []
    assert {final.node(i).op: graph.node(j).name for i, j in c.folded_b.items()} == {
        "Reshape": "conv1"}
    conv1 = next(x for x in c.pairs if graph.node(x).name == "conv1")
    changes = {(ch.what, ch.name) for ch in d.changes[conv1]}
    assert ("attribute", "activation") in changes and ("attribute", "layout") in changes
    macs = node_macs(graph)
    assert d.deltas(conv1, c.pairs[conv1])["macs"] == (macs[conv1], macs[conv1], 0)


def test_two_targets_of_one_model_differ_only_in_arena_bytes_where_plans_differ():
    graph = load_model(SAMPLE_MODEL)
    d = compare(Operand(graph, options=Options("host")), Operand(graph, options=Options(
        "cortex-m7")))
    counts = d.counts()
    assert counts["matched"] == len(compilation(graph).final.nodes)
    assert counts["changed"] == 0 and counts["removed"] == counts["added"] == 0
    plan_a = compilation(graph).plan(Options("host"))
    plan_b = compilation(graph).plan(Options("cortex-m7"))
    # Per layer, the bytes of its outputs; for the whole graph, the plan's arena, which
    # reuses buffers (its peak, under the sum of every buffer).
    assert sum(v for v in d.metrics_a["arena_bytes"].values() if v) == sum(
        buf.size for buf in plan_a.arena.buffers)
    a, b, delta = d.totals()["arena_bytes"]
    assert (a, b, delta) == (plan_a.arena.size, plan_b.arena.size,
                             plan_b.arena.size - plan_a.arena.size)
    ends = [plan_a.arena.offsets[buf.name] + buf.size for buf in plan_a.arena.buffers]
    assert max(ends) <= a < max(ends) + plan_a.alignment


def test_extra_metrics_plug_in_per_node():
    graph = load_model(SAMPLE_MODEL)
    ids = [n.id for n in graph.nodes]
    d = compare(Operand(graph, "loaded", extra={"sqnr": {i: 10.0 for i in ids}}),
                Operand(graph, "loaded", extra={"sqnr": {i: 12.5 for i in ids}}))
    assert d.deltas(ids[0], ids[0])["sqnr"] == (10.0, 12.5, 2.5)
    assert d.to_json()["pairs"][0]["metrics"]["sqnr"] == [10.0, 12.5, 2.5]


@pytest.fixture(scope="module")
def digits_int8():
    graph = load_model(SAMPLE_MODEL)
    profile = profile_model(graph, load_calibration("digits:train", graph), bins=64)
    return graph, quantize(graph, profile)


def test_a_float_model_against_its_own_quantization(digits_int8):
    graph, qdq = digits_int8
    d = compare(Operand(graph, "loaded"), Operand(qdq, "loaded"), same_origin=True)
    c = d.correspondence
    assert c.removed == [] and c.added == []
    assert {qdq.node(i).op for i in c.folded_b} == {"QuantizeLinear", "DequantizeLinear"}
    names = {graph.node(x).name: x for x in c.pairs}
    weights = {(ch.what, ch.before, ch.after) for ch in d.changes[names["conv1"]]}
    assert ("weights", "float32[8, 1, 3, 3]", "int8[8, 1, 3, 3]") in weights
    quant = [ch for ch in d.changes[names["relu1"]] if ch.what == "quantization"]
    assert quant and quant[0].before == "none" and quant[0].after.startswith("scale=")
    # The final graphs: every float layer has an integer counterpart.
    final = compare(Operand(graph), Operand(qdq), same_origin=True)
    pairs = final.correspondence.pairs
    ua, ub = final.units_a, final.units_b
    # Only the float model's boundary is new: its input quantized, its output dequantized.
    assert final.correspondence.removed == []
    assert sorted(ub.nodes[i].op for i in final.correspondence.added) == [
        "DequantizeLinear", "QuantizeLinear"]
    assert {(ua.nodes[x].op, ub.nodes[y].op) for x, y in pairs.items()} >= {
        ("Conv", "QLinearConv"), ("FullyConnected", "QGemm")}


def _kws(stage: str, reverse: bool = False):
    onnx_dir = shared_models() / "onnx"
    a = load_model(onnx_dir / "kws_ref_model_float32.onnx")
    b = load_model(onnx_dir / "kws_ref_model.onnx")
    if reverse:
        a, b = b, a
    return compare(Operand(a, stage), Operand(b, stage))


@pytest.mark.parametrize("reverse", [False, True])
def test_kws_float_and_int8_final_graphs_match_layer_for_layer(reverse):
    d = _kws("final", reverse)
    counts = d.counts()
    ua, ub = (d.units_b, d.units_a) if reverse else (d.units_a, d.units_b)
    pairs = {(y, x) if reverse else (x, y) for x, y in d.correspondence.pairs.items()}
    float_layers = [a for a in ua.order]
    assert counts["matched"] == len(float_layers) == 13
    assert counts["removed"] == counts["added"] == 0
    assert counts["by"]["name"] == 13
    kinds = sorted((ua.nodes[x].op, ub.nodes[y].op) for x, y in pairs)
    assert kinds.count(("Conv", "QLinearConv")) == 9
    assert ("FullyConnected", "QGemm") in kinds and ("Softmax", "QLinearSoftmax") in kinds
    assert ("AveragePool", "QLinearGlobalAveragePool") in kinds
    # The five weight DequantizeLinear nodes of the hybrid float model fold into their Conv.
    folded = d.correspondence.folded_b if reverse else d.correspondence.folded_a
    assert len(folded) == 5


def test_kws_loaded_graphs_match_every_float_layer_to_its_qdq_unit():
    d = _kws("loaded")
    c = d.correspondence
    assert d.counts()["matched"] == 24 and c.removed == [] and c.added == []
    # Every QuantizeLinear / DequantizeLinear of the int8 file belongs to a matched layer.
    assert {d.units_b.nodes[i].op for i in c.folded_b} == {"QuantizeLinear", "DequantizeLinear"}
    assert len(c.folded_b) == len(d.b.graph.nodes) - 24
