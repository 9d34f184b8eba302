"""Float kernels for what the tuned ones do not take: pooling of any rank, checked against
onnxruntime (compiler/codegen/pool_nd.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler.codegen.host import HostNet
from compiler.driver import compilation, compile_graph
from compiler.frontends.onnx import load_onnx
from tests.helpers import assert_close, make_model, ort_run


def _feeds(graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {p.name: rng.standard_normal(p.type.shape).astype(np.float32) for p in graph.inputs}


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_float_3d_pooling_compiles_as_onnxruntime_pools(op):
    """Float pooling of any rank has the general kernel (compiler/codegen/pool_nd.py)."""
    node = helper.make_node(op, ["x"], ["y"], name="pool3d", kernel_shape=[1, 2, 2],
                            pads=[0, 1, 0, 0, 0, 1], strides=[1, 2, 1])
    model = make_model([node], [("x", np.float32, [1, 2, 3, 4, 4])], [("y", np.float32, None)])
    graph = compilation(load_onnx(model)).final
    feeds = _feeds(graph)
    runner = HostNet(compile_graph(graph, "host"))
    got = runner.run(feeds)[graph.outputs[0].name]
    runner.close()
    assert_close(got, ort_run(model, feeds)[0], rtol=1e-6, atol=1e-6)
