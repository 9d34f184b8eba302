"""Host time per layer: the timed build's counters, per kernel call, mapped to nodes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from compiler.codegen.host import HostNet
from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.inputs import random_inputs
from compiler.layer_host_time import OUTSIDE, time_layers
from tests.conftest import SAMPLE_MODEL
from tests.deep_models import residual_chain


@pytest.fixture(autouse=True)
def _x86_only():
    if not Options("host").resolved_target().triple.startswith("x86_64"):
        pytest.skip("host time per layer reads the x86 time-stamp counter")


def test_timed_build_computes_the_same_outputs_and_counts_every_call():
    compiled = compilation(load_onnx(residual_chain(12)))  # its blocks loop over a table
    feeds = random_inputs(compiled.prepared, 3)
    plain, timed = (HostNet(compiled.net(Options("host", timed_kernels=t))) for t in (0, 1))
    for runner in (plain, timed):
        runner.set_inputs(feeds)
        runner.call()
    for name, view in plain.output_views().items():
        np.testing.assert_array_equal(view, timed.output_views()[name])
    assert "llvm.readcyclecounter" in timed.net.llvm_ir
    assert "loop" in timed.net.llvm_ir or "repeat" in timed.net.llvm_ir
    ticks = timed.ticks()
    assert len(ticks) == len(timed.net.timed) + 1 and len(timed.net.timed) >= 12
    assert (ticks[:-1] > 0).all()  # every call, looped ones too, got its own slot
    assert ticks[:-1].sum() <= ticks[-1]
    timed.reset_ticks()
    assert not timed.ticks().any()
    with pytest.raises(Exception, match="timed kernels"):
        plain.ticks()


def test_rows_cover_every_kernel_and_add_up_to_one_inference():
    graph = load_model(SAMPLE_MODEL)
    compiled = compilation(graph)
    metric = time_layers(compiled, graph, seconds=0.1)
    net = compiled.net(Options("host", timed_kernels=True))
    kernels = [r for r in metric.rows if r.label != OUTSIDE]
    assert [r.label for r in kernels] == [net.kernels[i].symbol for i in net.timed]
    assert all(r.value > 0 and r.nodes for r in kernels)
    assert {n for r in kernels for n in r.nodes} <= {n.id for n in graph.nodes}
    assert sum(r.value for r in metric.rows) == pytest.approx(metric.total)
    # Against the untimed network's own time: the counters add little.
    runner = HostNet(compiled.net(Options("host")))
    runner.set_inputs(random_inputs(compiled.prepared, 0))
    runner.call()
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.1:
        runner.call()
        runs += 1
    plain_ms = 1000 * (time.perf_counter() - start) / runs
    assert 0.2 < metric.total / plain_ms < 5


def test_graph_without_kernels_is_measured_too():
    from onnx import TensorProto, helper

    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load_onnx(model)
    metric = time_layers(compilation(graph), graph, seconds=0.02)
    assert metric.total > 0 and metric.rows[-1].label == OUTSIDE
