"""Figures of the report and of Compare, each against an answer worked out here.

The report's float weight bytes and estimated time, a fused layer's SQNR, Compare's per-layer
SQNR and weight bytes, and which layers Compare pairs by name.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.graphdiff.changes import weight_bytes
from compiler.graphdiff.diff import diff_graphs, layer_metrics
from compiler.graphdiff.match import Side, Units
from compiler.ir.graph import Constant
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.profiler import profile_model
from compiler.quant.recipe import QuantRecipe, quantize_with
from compiler.report import collect_report
from compiler.report.figures import Layer, _with_sqnr
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model


@pytest.fixture(scope="module")
def digits():
    """(float graph, its int8 QDQ graph) of the sample, calibrated on 24 seeded samples."""
    graph = load_model(SAMPLE_MODEL)
    shape = graph.inputs[0].type.shape
    data = np.random.default_rng(2).uniform(0, 1, (24, *shape)).astype(np.float32)
    profile = profile_model(graph, CalibrationData(graph.inputs[0].name, data, "drawn"),
                            "digits")
    return graph, quantize_with(graph, QuantRecipe.of_profile(profile, graph))


def test_the_reports_float_weight_bytes_are_four_bytes_an_element(digits):
    graph, _ = digits
    report = collect_report(compilation(graph), "digits_cnn.onnx", "host", count=False)
    convs = [la for la in report.layers if la.weight_bytes]
    assert convs
    for layer in convs:
        # A float model: its weights are float32 already, so "as float32" is the same bytes.
        assert layer.float_weight_bytes == layer.weight_bytes
    total = sum(4 * v.data.size for n in compilation(graph).prepared.nodes for v in n.inputs
                if isinstance(v, Constant) and v.type.dtype == "float32")
    assert sum(la.float_weight_bytes for la in report.layers) <= total


def test_the_estimated_time_is_instructions_over_the_clock():
    layer = Layer("conv", "Conv", ("conv",), (), (), "int8", 0, 0, 0, 0, instructions=250_000)
    assert layer.time_us(100.0) == pytest.approx(2500.0)  # 250 k cycles at 100 MHz: 2.5 ms
    assert layer.time_us(250.0) == pytest.approx(1000.0)


def test_a_fused_layers_sqnr_is_its_last_nodes_output():
    layer = Layer("conv", "Conv+Relu", ("conv", "relu"), (), (), "int8", 0, 0, 0, 0)
    assert _with_sqnr(layer, {"conv": 12.0, "relu": 31.5}).sqnr_db == 31.5
    assert _with_sqnr(layer, {"conv": 12.0}).sqnr_db == 12.0


def test_compares_layer_sqnr_is_its_worst_node(digits):
    _, qdq = digits
    units = Units(qdq)
    wrapped = [a for a in units.order if len(units.members[a]) >= 3]
    assert wrapped, "quantized layers are wrapped in their Q and DQ nodes"
    values = {m: float(10 + k) for k, m in enumerate(n.id for n in qdq.nodes)}
    metrics = layer_metrics(units, extra={"sqnr": values})["sqnr"]
    for anchor in wrapped:
        assert metrics[anchor] == min(values[m] for m in units.members[anchor])
    d = diff_graphs(Side(qdq), Side(qdq), same_origin=True, extra=({"sqnr": values},
                                                                   {"sqnr": values}))
    assert d.totals()["sqnr"][0] == min(values.values())


def test_compares_weight_bytes_are_the_weights_and_biases_as_stored(digits):
    graph, qdq = digits
    units = Units(qdq)
    by_source = {i: a for a in units.order for i in units.provenance(a)}
    for conv in (n for n in graph.nodes if n.op in ("Conv", "Gemm")):
        weights, bias = conv.inputs[1], conv.inputs[2]
        # int8 weights at a byte each, the int32 bias at four: no scale or zero point.
        assert weight_bytes(units, by_source[conv.id]) == weights.data.size + 4 * bias.data.size


def _named_convs(names: list[str], channels: list[int]):
    rng = np.random.default_rng(len(names))
    nodes, inits, x, cin = [], {}, "x", 3
    for i, (name, cout) in enumerate(zip(names, channels)):
        inits[f"w{i}"] = rng.normal(0, 0.3, (cout, cin, 3, 3)).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1],
                                      name=name))
        x, cin = f"c{i}", cout
    return load_onnx(make_model(nodes, [("x", np.float32, [1, 3, 8, 8])],
                                [(x, np.float32, None)], inits))


def test_a_name_two_layers_share_pairs_neither():
    # A's two convolutions are both "Conv" once tf2onnx's counters go; B has one "Conv".
    a = _named_convs(["Conv__5", "Conv__8", "head"], [4, 6, 5])
    b = _named_convs(["stem", "Conv", "head"], [7, 9, 5])
    d = diff_graphs(Side(a), Side(b))
    how = d.correspondence.how
    named = {d.units_a.nodes[x].name for x, h in how.items() if h == "name"}
    assert named == {"head"}  # the one name each side holds once
