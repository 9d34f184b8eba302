"""The four MLPerf Tiny int8 models: integer operators, bit for bit with onnxruntime.

Each runs on its real sample input and on 50 seeded random int8 inputs; Kiln's final stage (after
every pass) must give exactly what onnxruntime gives on the same integer operators.
"""

from collections import Counter

import numpy as np
import pytest

from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from tests.conftest import shared_models
from tests.quant.int8_oracle import differing, integer_stage, ort_session
from tests.samples import int8_sample

MODELS = ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"]
SEEDS = range(50)


def _input_quantizer(graph):
    """(scale, zero point) of the DequantizeLinear reading the model input (maybe via layout)."""
    value = graph.inputs[0]
    for _ in range(3):
        readers = [n for n in graph.nodes if any(v is value for v in n.inputs)]
        if not readers:
            break
        if readers[0].op == "DequantizeLinear":
            scale, zp = readers[0].inputs[1].data, readers[0].inputs[2].data
            return float(scale.reshape(-1)[0]), int(zp.reshape(-1)[0])
        value = readers[0].outputs[0]
    raise AssertionError("no DequantizeLinear reads the input")


def _sample(name, graph, folder):
    """The model's real sample input, as the int8 tensor the model takes."""
    return int8_sample(name, graph.inputs[0].type.shape, folder,
                       lambda: _input_quantizer(graph))


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_int8_model_is_integer_and_bit_exact_with_onnxruntime(name):
    folder = shared_models()
    graph = load_onnx(folder / "onnx" / f"{name}.onnx")
    compiled = compilation(graph)
    final = compiled.final
    counts = Counter(n.op for n in final.nodes)
    assert counts["Conv"] == counts["MatMul"] == counts["Gemm"] == counts["Add"] == 0, counts
    assert counts["FullyConnected"] == counts["AveragePool"] == counts["GlobalAveragePool"] == 0, \
        counts
    assert counts["QLinearConv"] + counts["QGemm"] >= 9, counts
    floats = [n.name for n in final.nodes for v in n.outputs if v.type.dtype == "float32"]
    assert not floats, f"{name}: still float: {floats}"
    session = ort_session(integer_stage(compiled))
    x_name = final.inputs[0].name
    feeds = [_sample(name, graph, folder)] + [
        np.random.default_rng(seed).integers(-128, 128, final.inputs[0].type.shape)
        .astype(np.int8) for seed in SEEDS]
    total = 0
    for x in feeds:
        ours = run(final, {x_name: x})[final.outputs[0].name]
        total += differing(ours, session.run(None, {x_name: x})[0])
    assert total == 0, f"{name}: {total} elements differ from onnxruntime"
