"""Acceptance: every float model compiles for the host, runs, and matches onnxruntime.

The third-party float models (shared models folder) and the eight light models of the onnx
package are compiled through the bundle (written, then loaded from its files alone), in each
weights mode, and compared with onnxruntime at rtol 1e-4, atol 1e-5. The light models' weights
are all 0.02, so their output is a uniform softmax that hides most kernel errors: three of them
(those that need LRN, Gather and Softmax over channels) also run with seeded random weights.
Each case prints its compile and run times and its largest absolute error.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compiler.codegen import host
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.onnx import load_onnx
from tests.conftest import shared_models
from tests.helpers import assert_close, ort_run

SHARED_FLOAT = ["ad01_fp32", "kws_ref_model_float32", "mnist-8", "pretrainedResnet",
                "vww_96_float"]
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem for p in LIGHT_DIR.glob("light_*.onnx"))
RANDOMIZED = ["light_bvlc_alexnet", "light_inception_v1", "light_shufflenet", "light_squeezenet"]
# The slowest cases (about 15-25 s each on two shared cores; the whole file takes about 4 min).
HEAVY = {"light_densenet121", "light_vgg19"}
WEIGHT_MODES = (["embedded", "external"]
                if "weights" in inspect.signature(compile_graph).parameters else ["embedded"])
RTOL, ATOL = 1e-4, 1e-5


def _light_feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The inputs onnx.backend.test (and tests/test_real_models.py) use: arange(n) / n."""
    graph = load_onnx(model)
    return {v.name: (np.arange(v.type.numel).reshape(v.type.shape) / v.type.numel).astype(
        np.float32) for v in graph.inputs}


def _random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.type.shape).astype(np.float32)
            for v in load_onnx(model).inputs}


def randomized(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """The model with every ConstantOfShape weight of a Conv or Gemm made seeded random.

    He-scaled normal weights keep activations of a deep ReLU network in a sane range, and
    unlike the uniform 0.02 they give every channel and class a different value.
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in graph.initializer}
    # weight name -> True when its fan-in is its first axis (a Gemm's B without transB).
    weight_of = {}
    for node in graph.node:
        if node.op_type in ("Conv", "Gemm") and len(node.input) > 1:
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            weight_of[node.input[1]] = node.op_type == "Gemm" and not trans_b
    for node in graph.node:  # a weight reshaped before use (inception_v1's classifier)
        if node.op_type == "Reshape" and node.output[0] in weight_of:
            weight_of[node.input[0]] = False
    keep = []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.output[0] in weight_of:
            shape = numpy_helper.to_array(inits[node.input[0]]).tolist()
            fan_in = shape[0] if weight_of[node.output[0]] else int(np.prod(shape[1:]))
            w = rng.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(2 / fan_in))
            graph.initializer.append(numpy_helper.from_array(w, node.output[0]))
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)
    return model


def _run_compiled(graph, mode: str, folder: Path, feeds: dict) -> dict[str, np.ndarray]:
    """Compile, write the bundle, load it from its files and run it (the bundle path when the
    runner can load bundles, else the in-memory object)."""
    kwargs = {"weights": mode} if "weights" in inspect.signature(compile_graph).parameters else {}
    net = compile_graph(graph, get_target("host"), **kwargs)
    if hasattr(host.HostNet, "from_bundle"):
        from compiler.codegen.bundle import write_bundle

        write_bundle(net, folder)
        runner = host.HostNet.from_bundle(folder)
    else:
        runner = host.HostNet(net)
    try:
        return runner.run(feeds)
    finally:
        runner.close()


def _check(model: onnx.ModelProto, feeds: dict, mode: str, folder: Path, what: str) -> None:
    start = time.perf_counter()
    graph = compilation(load_onnx(model)).prepared
    compiled = time.perf_counter()
    got = _run_compiled(graph, mode, folder, feeds)
    ran = time.perf_counter()
    want = ort_run(model, feeds)
    worst = 0.0
    for value, expected in zip(graph.outputs, want):
        assert_close(got[value.name], expected, RTOL, ATOL, what=f"{what}:{value.name}")
        worst = max(worst, float(np.abs(got[value.name] - expected).max()))
    print(f"{what} [{mode}]: pipeline {compiled - start:.1f} s, compile+bundle+run "
          f"{ran - compiled:.1f} s, max abs error {worst:.3g}")


def _params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in names]


@pytest.mark.parametrize("mode", WEIGHT_MODES)
@pytest.mark.parametrize("name", SHARED_FLOAT)
def test_shared_float_model(name, mode, tmp_path):
    path = shared_models() / "onnx" / f"{name}.onnx"
    assert path.exists(), f"{path.name} is missing from the shared models folder"
    model = onnx.load(path)
    _check(model, _random_feeds(model), mode, tmp_path, name)


@pytest.mark.parametrize("mode", WEIGHT_MODES)
@pytest.mark.parametrize("name", _params(LIGHT))
def test_light_model(name, mode, tmp_path):
    model = onnx.load(LIGHT_DIR / f"{name}.onnx")
    _check(model, _light_feeds(model), mode, tmp_path, name)


@pytest.mark.parametrize("name", _params(RANDOMIZED))
def test_light_model_random_weights(name, tmp_path):
    model = randomized(onnx.load(LIGHT_DIR / f"{name}.onnx"))
    _check(model, _light_feeds(model), WEIGHT_MODES[-1], tmp_path, f"{name} (random weights)")
