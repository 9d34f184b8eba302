"""Acceptance: every float model compiles for the host, runs, and matches onnxruntime.

The third-party float models (shared models folder) and the nine light models of the onnx
package are compiled through the bundle (written, then loaded from its files alone) and
compared with onnxruntime at rtol 1e-4, atol 1e-5: the shared models in each weights mode, each
light model in one (see `light_cases`). The light models' weights are all 0.02, so their
output is a uniform softmax that hides most kernel errors: four of them (those that need LRN,
Gather and Softmax over channels) also run with seeded random weights. Each case prints its
compile and run times and its largest absolute error.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compiler.cache import OBJECT_CACHE_LIMIT
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
# The slowest cases (about 10-20 s each on two shared cores).
HEAVY = {"light_densenet121", "light_vgg19"}
WEIGHT_MODES = (["embedded", "external"]
                if "weights" in inspect.signature(compile_graph).parameters else ["embedded"])
RTOL, ATOL = 1e-4, 1e-5
# An embedded object carries its weights (LLVM emits the placeholder they are written into):
# one larger than this would push most other objects out of Kiln's object cache (which keeps
# OBJECT_CACHE_LIMIT bytes), so the next run would compile them all again. Such an object is
# compiled without the cache.
UNCACHED_WEIGHT_BYTES = OBJECT_CACHE_LIMIT // 8


def light_cases() -> list[tuple[str, str]]:
    """(light model, weights mode): each light model in one mode.

    The mode only changes where the entry point finds the weights (the object's own placeholder
    or its `constant_weights` argument): every kernel takes them as arguments in both modes
    (`compiler.codegen.build`), so a second mode would run the same kernels again. The four
    RANDOMIZED models run embedded here and external in test_light_model_random_weights; the
    others run external. Either mode still meets a blob of hundreds of megabytes (AlexNet's
    embedded, VGG-19's and ZFNet-512's external), and test_shared_float_model runs every
    shared float model in both modes.
    """
    return [(name, WEIGHT_MODES[0] if name in RANDOMIZED else WEIGHT_MODES[-1])
            for name in LIGHT]


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
    weight_bytes = sum(c.type.nbytes for c in graph.used_constants())
    with pytest.MonkeyPatch.context() as patch:
        if mode == "embedded" and weight_bytes > UNCACHED_WEIGHT_BYTES:
            patch.setenv("KILN_NO_CACHE", "1")
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


def _light_params():
    return [pytest.param(name, mode, id=f"{name}-{mode}",
                         marks=[pytest.mark.slow] if name in HEAVY else [])
            for name, mode in light_cases()]


@pytest.mark.parametrize("mode", WEIGHT_MODES)
@pytest.mark.parametrize("name", SHARED_FLOAT)
def test_shared_float_model(name, mode, tmp_path):
    path = shared_models() / "onnx" / f"{name}.onnx"
    assert path.exists(), f"{path.name} is missing from the shared models folder"
    model = onnx.load(path)
    _check(model, _random_feeds(model), mode, tmp_path, name)


@pytest.mark.parametrize("name,mode", _light_params())
def test_light_model(name, mode, tmp_path):
    model = onnx.load(LIGHT_DIR / f"{name}.onnx")
    _check(model, _light_feeds(model), mode, tmp_path, name)


@pytest.mark.parametrize("name", _params(RANDOMIZED))
def test_light_model_random_weights(name, tmp_path):
    model = randomized(onnx.load(LIGHT_DIR / f"{name}.onnx"))
    _check(model, _light_feeds(model), WEIGHT_MODES[-1], tmp_path, f"{name} (random weights)")


def test_light_cases_cover_each_weights_mode():
    """Every light model runs, each mode compiles some, and the randomized ones (external in
    test_light_model_random_weights) run embedded."""
    modes = dict(light_cases())
    assert sorted(modes) == LIGHT and set(modes.values()) == set(WEIGHT_MODES)
    assert {modes[name] for name in RANDOMIZED} == {WEIGHT_MODES[0]}
