"""Device ticks per layer: a validation's rows on the shown graph's nodes, named by their unit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compiler.device.validate import LayerTime, Validation, layer_rows, runner_net
from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.layer_device_time import OUTSIDE, device_metric, device_title
from tests.conftest import SAMPLE_MODEL


@pytest.fixture(scope="module")
def measured():
    """The sample's timed Cortex-M7 build with made-up ticks per call (no board needed)."""
    graph = load_model(SAMPLE_MODEL)
    compiled = compilation(graph)
    net = runner_net(compiled, "cortex-m7")
    ticks = [100 * (slot + 1) for slot in range(len(net.timed))]
    layers = layer_rows(compiled, net, ticks, None)
    result = Validation("digits_cnn.onnx", "cortex-m7", "mps2-an500", "qemu (mps2-an500)",
                        "5 seeded random inputs", 5, "0" * 32, tick_unit="SysTick ticks",
                        ticks_per_second=25_000_000, layers=layers,
                        total_ticks=sum(ticks) + 77)
    return graph, compiled, result


def test_each_layer_lands_on_its_shown_node_and_rows_add_up_to_the_inference(measured):
    graph, compiled, result = measured
    metric = device_metric(result, compiled, graph)
    assert metric.name == "device" and metric.total == result.total_ticks
    assert sum(r.value for r in metric.rows) == result.total_ticks
    outside = [r for r in metric.rows if r.label == OUTSIDE]
    assert len(outside) == 1 and outside[0].value == 77 and outside[0].nodes == ()
    prepared = {n.name: n for n in compiled.prepared.nodes}
    for layer, r in zip(result.layers, metric.rows):
        assert r.value == layer.ticks and r.label == layer.symbol
        assert r.nodes, f"{layer.symbol} is on no shown node"
        came_from = {i for name in layer.nodes for i in prepared[name].provenance}
        assert set(r.nodes) <= came_from
    # Each shown Conv gets its own layer's ticks, in order.
    convs = [n.id for n in graph.nodes if n.op == "Conv"]
    ticks = [la.ticks for la in result.layers if la.op == "Conv"]
    assert len(convs) == 3 and [metric.values()[c] for c in convs] == ticks


def test_the_title_names_the_counter_not_cycles(measured):
    _, compiled, result = measured
    metric = device_metric(result, compiled)
    assert metric.title == "SysTick ticks on cortex-m7 (QEMU mps2-an500)"
    assert "cycle" not in (metric.title + metric.note).lower()
    assert "25,000,000 a second" in metric.note and "emulated" in metric.note
    board = replace(result, board="stm32f746g-disco", port="/dev/ttyACM0", tick_unit="cycles")
    assert device_title(board) == "Cycles on cortex-m7 (stm32f746g-disco on /dev/ttyACM0)"
    assert "emulated" not in device_metric(board, compiled).note


def test_a_driver_row_without_nodes_is_named_as_one(measured):
    _, compiled, result = measured
    chain = replace(result, layers=[LayerTime("net_chain", "Conv", (), 10, None, 0)],
                    total_ticks=10)
    (driver, outside) = device_metric(chain, compiled).rows
    assert driver.op == "Conv driver" and driver.nodes == () and outside.value == 0
