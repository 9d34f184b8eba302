"""Deep graphs: a 1,000-block residual chain and a 2,000-node chain, end to end.

Nothing may recurse over graph depth (loading, verifier, passes, schedule, lowering, memory
plan, code generation), the layout passes must leave no Transpose inside a residual chain fed
from an NCHW input, and the compiled bundle must match onnxruntime.
"""

import json
import sys

import numpy as np
import pytest

from app import cli
from compiler.codegen.host import HostNet
from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.verify import verify
from tests.deep_models import conv_relu_chain, residual_chain
from tests.helpers import assert_close, ort_run

MODELS = {"residual_1000": lambda: residual_chain(1000),
          "chain_2000": lambda: conv_relu_chain(2000)}


@pytest.fixture(scope="module", params=sorted(MODELS))
def deep(request, tmp_path_factory):
    """(name, model proto, its path)."""
    import onnx

    model = MODELS[request.param]()
    path = tmp_path_factory.mktemp("deep") / f"{request.param}.onnx"
    onnx.save(model, path)
    return request.param, model, path


def test_far_deeper_than_the_recursion_limit(deep):
    _, model, _ = deep
    assert len(model.graph.node) > 2 * sys.getrecursionlimit()


@pytest.mark.slow
def test_loads_runs_and_compiles_like_onnxruntime(deep, tmp_path):
    name, model, path = deep
    graph = load_onnx(path)
    verify(graph)
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    want = ort_run(model, {"x": x})[0]
    assert np.isfinite(want).all() and np.abs(want).max() > 0.1
    assert_close(run(graph, {"x": x})["y"], want, what=f"{name}: interpreter")
    compiled = compilation(graph)
    final = compiled.final
    verify(final)
    # Channels-last from the first Transpose to the last: none inside the chain.
    assert [n.op for n in final.nodes].count("Transpose") == 2
    plan = compiled.plan()
    assert plan.arena.efficiency == 1.0
    compiled.bundle(tmp_path / "bundle")
    net = HostNet.from_bundle(tmp_path / "bundle")
    try:
        assert_close(net.run({"x": x})["y"], want, what=f"{name}: compiled")
    finally:
        net.close()


@pytest.mark.slow
def test_the_cli_plans_and_compiles_it(deep, tmp_path, capsys):
    _, _, path = deep
    assert cli.main(["memory", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["efficiency"] == 1.0 and len(doc["buffers"]) > 500
    assert cli.main(["compile", str(path), "--target", "host", "-o", str(tmp_path / "b"),
                     "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # Identical blocks share one kernel function: the object stays small.
    assert report["sections"]["text"] < 100_000
    assert len(report["layers"]) > 500
