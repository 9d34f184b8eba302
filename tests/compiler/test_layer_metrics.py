"""Per-layer metrics: each against its compiler oracle, mapped onto the loaded graph's nodes."""

from __future__ import annotations

import math

from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.layer_metrics import aggregate, arena_bytes, macs, sqnr, weight_bytes
from compiler.stats import compute_stats, node_macs
from tests.conftest import SAMPLE_MODEL


def _sample():
    graph = load_model(SAMPLE_MODEL, {})
    return graph, compilation(graph)


def _names(graph, ids):
    by_id = {n.id: n.name for n in graph.nodes}
    return [by_id[i] for i in ids]


def test_macs_add_up_to_the_compiled_graphs_total_and_sit_on_their_source_nodes():
    graph, compiled = _sample()
    metric = macs(compiled, graph)
    assert sum(r.value for r in metric.rows) == compute_stats(compiled.prepared).macs
    # The digits CNN keeps every MAC through the pipeline: the loaded graph counts the same.
    assert metric.whole() == compute_stats(graph).macs
    values = metric.values()
    loaded = node_macs(graph)
    # Each convolution's own MACs land on it, not on the Relu fused into its kernel.
    for name in ("conv1", "conv2", "conv3"):
        node = next(n for n in graph.nodes if n.name == name)
        assert values[node.id] == loaded[node.id]
    relu = next(n for n in graph.nodes if n.name == "relu1")
    assert relu.id not in values
    conv1 = next(r for r in metric.rows if _names(graph, r.nodes) == ["conv1"])
    assert relu.id in conv1.covers


def test_weight_bytes_add_up_to_the_parameters_bytes():
    graph, compiled = _sample()
    metric = weight_bytes(compiled, graph)
    assert metric.whole() == compute_stats(compiled.prepared).param_bytes
    fc = next(r for r in metric.rows if r.op == "FullyConnected")
    node = next(n for n in compiled.prepared.nodes if n.name == fc.label)
    # A 128x... float weight and its bias: 4 bytes an element.
    assert fc.value == 4 * sum(v.data.size for v in node.inputs[1:] if v is not None)


def test_arena_bytes_follow_the_memory_plans_live_curve():
    graph, compiled = _sample()
    options = Options("cortex-m7")
    metric = arena_bytes(compiled, graph, options)
    plan = compiled.plan(options)
    live = plan.to_json()["live_bytes"]
    steps = [i for i in plan.lowir.instrs if i.kind == "op"]
    assert [r.value for r in metric.rows] == [live[i.step] for i in steps]
    everything = [n.id for n in graph.nodes]
    assert aggregate(metric, everything) == max(live) == metric.whole()
    assert max(live) <= plan.arena.size


def test_a_group_counts_each_row_once_and_sqnr_takes_the_worst():
    graph, compiled = _sample()
    metric = macs(compiled, graph)
    ids = {n.name: n.id for n in graph.nodes}
    conv = metric.values()[ids["conv2"]]
    assert aggregate(metric, [ids["conv2"], ids["relu2"]]) == conv
    assert aggregate(metric, [ids["conv1"], ids["conv2"]]) == \
        metric.values()[ids["conv1"]] + conv
    assert aggregate(metric, [ids["pool1"]]) is None  # no MACs of its own
    producers = {n.output.name: n for n in graph.nodes}
    names = [n.output.name for n in graph.nodes[:3]]
    keys = {name: producers[name].id for name in names}
    figures = dict(zip(names, (31.5, 12.25, math.nan)))
    quality = sqnr(graph, figures, keys)
    first_two = [keys[names[0]], keys[names[1]]]
    assert aggregate(quality, first_two) == 12.25
    assert quality.values()[keys[names[2]]] == -math.inf  # an undefined SQNR counts as worst
    assert not quality.higher_is_worse
