"""The instruction overlay against `kiln bench --target`: layer by layer, and in total.

The CLI's JSON is computed in the same test; the overlay's rows must carry its per-layer counts
on the right nodes, and with the rows outside any layer (the entry point and its calls in the
separate build, the difference inlining makes as shipped) add up to its whole-network count.
"""

from __future__ import annotations

import json

import pytest

from app.cli import main
from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.layer_instructions import INLINED, OUTSIDE, count_instructions
from compiler.layer_metrics import aggregate
from tests.codegen import firmware as test_firmware
from tests.codegen.test_int8_kernels import _conv_tflite
from tests.conftest import shared_models


def _bench_json(model, capsys, *extra) -> dict:
    assert main(["bench", str(model), "--target", "cortex-m7", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _check_against_cli(model, doc: dict, peer: bool) -> None:
    graph = load_model(model, {})
    stages = []
    metric = count_instructions(compilation(graph), "cortex-m7", graph,
                                lambda fraction, text: stages.append(fraction), peer=peer)
    assert stages[0] == 0.0 and stages[-1] == 1.0 and stages == sorted(stages)
    layers = [r for r in metric.rows if r.label not in (OUTSIDE, INLINED)]
    assert [(r.label, r.parts, r.value) for r in layers] == \
        [(la["kernel"], tuple(la["nodes"]), la["instructions"]) for la in doc["layers"]]
    assert metric.total == doc["instructions"]
    assert sum(r.value for r in metric.rows) == doc["instructions"]
    names = {n.id: n.name for n in graph.nodes}
    for row in layers:  # each layer sits on the loaded nodes its kernel runs
        assert sorted(names[i] for i in row.nodes) == sorted(row.parts)
    everything = [n.id for n in graph.nodes]
    outside = sum(r.value for r in metric.rows if not r.nodes)
    assert aggregate(metric, everything) == doc["instructions"] - outside
    if peer:
        theirs = {la["node"]: la["instructions"] for la in doc["cmsis_nn"]["layers"]}
        for row in layers:
            counted = [theirs[n] for n in row.parts if n in theirs]
            assert row.peer == (sum(counted) if counted else None)


def test_the_overlay_counts_what_bench_counts_on_a_small_network(tmp_path, capsys):
    test_firmware.require_tools()
    model = tmp_path / "conv.tflite"
    model.write_bytes(_conv_tflite(False, 2, 1, 3))
    doc = _bench_json(model, capsys, "--no-peer")
    _check_against_cli(model, doc, peer=False)


@pytest.mark.slow  # two counts of ResNet-8 under QEMU, about 14 s; the test above is the fast one
def test_the_resnet8_overlay_equals_bench_layer_by_layer_and_in_total(capsys):
    model = shared_models() / "tflite" / "pretrainedResnet_quant.tflite"
    test_firmware.require_tools()
    doc = _bench_json(model, capsys)
    assert len(doc["layers"]) >= 10 and doc["cmsis_nn"] is not None
    _check_against_cli(model, doc, peer=True)
