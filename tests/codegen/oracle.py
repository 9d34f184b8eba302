"""Compile a model for the host and hold its outputs against both oracles."""

from __future__ import annotations

import numpy as np
import onnx

from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from tests.helpers import assert_close, ort_run


def check_host(model: onnx.ModelProto, op: str | tuple[str, ...] | None = None,
               seed: int = 0) -> HostNet:
    """Run `model` compiled for the host on seeded inputs; compare with both oracles.

    Tolerance rtol 1e-4, atol 1e-5. With `op`, that operator (or one of several) must survive
    the pipeline, else the kernel meant to be tested is not what ran.
    """
    loaded = load_onnx(model)
    graph = compilation(loaded).prepared
    if op is not None:
        wanted = {op} if isinstance(op, str) else set(op)
        assert wanted & {n.op for n in graph.nodes}, f"the pipeline removed {op}: nothing to test"
    net = HostNet(compile_graph(graph, get_target("host")))
    rng = np.random.default_rng(seed)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(np.float32)
             for v in loaded.inputs}
    got = net.run(feeds)
    want = run(graph, feeds)
    for (name, ref), value in zip(want.items(), ort_run(model, feeds)):
        assert_close(got[name], ref, what=f"{name} vs interpreter")
        assert_close(got[name], value, what=f"{name} vs onnxruntime")
    net.close()
    return net
