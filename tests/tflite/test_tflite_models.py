"""The MLPerf Tiny .tflite models: int8 bit for bit with TFLite Micro, float with LiteRT.

The int8 ones run on their real sample input and 50 seeded random inputs; the hybrid KWS model
(int8 weights, float activations; TFLite Micro refuses it) is compared with onnxruntime on its
ONNX twin, and each int8 model's ONNX twin with the tflite rule must give the .tflite's bytes.
"""

from collections import Counter

import numpy as np
import pytest

from compiler.driver import compilation
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.qmath.requant import REQUANT_KEY
from tests.conftest import require_module, shared_models
from tests.helpers import assert_close, ort_run
from tests.samples import int8_sample

INT8 = ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"]
FLOAT = ["ad01_fp32", "pretrainedResnet", "vww_96_float"]
SEEDS = range(50)


def tflm(path):
    """TFLite Micro's interpreter on `path` (the tflite-micro wheel: Linux x86-64 only)."""
    runtime = require_module("tflite_micro.python.tflite_micro.runtime",
                             "the tflite-micro wheel exists for Linux x86-64 only")
    interpreter = runtime.Interpreter.from_file(str(path), arena_size=1 << 21)

    def call(x):
        interpreter.set_input(x, 0)
        interpreter.invoke()
        return interpreter.get_output(0)
    return call


def _sample(name, graph, folder):
    """The model's real sample input as the int8 tensor it takes."""
    quant = graph.inputs[0].type.quant
    return int8_sample(name, graph.inputs[0].type.shape, folder,
                       lambda: (quant.scale[0], quant.zero_point[0]))


def _feeds(name, graph, folder):
    shape = graph.inputs[0].type.shape
    return [_sample(name, graph, folder)] + [
        np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8) for seed in SEEDS]


@pytest.mark.slow
@pytest.mark.parametrize("name", INT8)
def test_int8_tflite_equals_tflite_micro(name):
    folder = shared_models()
    path = folder / "tflite" / f"{name}.tflite"
    oracle = tflm(path)
    final = compilation(load_model(path)).final
    floats = [n.name for n in final.nodes for v in n.outputs if v.type.dtype == "float32"]
    assert not floats, f"{name}: float nodes {floats}"
    total = 0
    for x in _feeds(name, final, folder):
        ours = run(final, {final.inputs[0].name: x})[final.outputs[0].name]
        want = oracle(x)
        assert ours.dtype == want.dtype and ours.shape == want.shape
        total += int(np.count_nonzero(ours.astype(np.int64) != want.astype(np.int64)))
    assert total == 0, f"{name}: {total} elements differ from TFLite Micro"


@pytest.mark.slow
@pytest.mark.parametrize("name", INT8)
def test_the_onnx_twin_with_the_tflite_rule_gives_the_same_bytes(name):
    folder = shared_models()
    twin = load_model(folder / "onnx" / f"{name}.onnx")
    twin.metadata[REQUANT_KEY] = "tflite"
    twin_final = compilation(twin).final
    final = compilation(load_model(folder / "tflite" / f"{name}.tflite")).final
    kinds = ("QLinearConv", "QGemm", "QLinearAdd", "QLinearGlobalAveragePool", "QLinearSoftmax")
    shape = lambda g: Counter(n.op for n in g.nodes if n.op in kinds)  # noqa: E731
    assert shape(twin_final) == shape(final)
    assert not [n for n in twin_final.nodes if n.output.type.dtype == "float32"]
    for x in _feeds(name, final, folder)[:11]:
        ours = run(twin_final, {twin_final.inputs[0].name: x.reshape(
            twin_final.inputs[0].type.shape)})[twin_final.outputs[0].name]
        want = run(final, {final.inputs[0].name: x})[final.outputs[0].name]
        assert np.array_equal(ours.reshape(-1), want.reshape(-1))


@pytest.mark.parametrize("name", FLOAT)
def test_float_tflite_matches_litert(name):
    folder = shared_models()
    path = folder / "tflite" / f"{name}.tflite"
    litert = require_module("ai_edge_litert.interpreter", "LiteRT ships for Linux x86-64 here")
    interpreter = litert.Interpreter(model_path=str(path), num_threads=1)
    interpreter.allocate_tensors()
    final = compilation(load_model(path)).final
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal(final.inputs[0].type.shape).astype(np.float32)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        want = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        ours = run(final, {final.inputs[0].name: x})[final.outputs[0].name]
        assert_close(ours, want, rtol=1e-4, atol=1e-5, what=name)


def test_the_hybrid_kws_model_matches_its_onnx_twin():
    folder = shared_models()
    graph = load_model(folder / "tflite" / "kws_ref_model_float32.tflite")
    assert all(n.output.type.dtype == "float32" for n in graph.nodes)
    twin = load_model(folder / "onnx" / "kws_ref_model_float32.onnx")
    import onnx

    model = onnx.load(folder / "onnx" / "kws_ref_model_float32.onnx")
    final = compilation(graph).final
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(final.inputs[0].type.shape)
        x = x.astype(np.float32)
        want = ort_run(model, {twin.inputs[0].name: x.reshape(twin.inputs[0].type.shape)})[0]
        ours = run(final, {final.inputs[0].name: x})[final.outputs[0].name]
        assert_close(ours, want.reshape(ours.shape), rtol=1e-4, atol=1e-5)
