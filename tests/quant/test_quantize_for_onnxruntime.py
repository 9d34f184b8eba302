"""`kiln quantize` writes QDQ files onnxruntime runs on its integer kernels, clamps included.

onnxruntime fuses DequantizeLinear -> operator -> QuantizeLinear into an integer kernel only when
the QuantizeLinear follows the operator itself; a Relu or Clip in between stays, unless the
QuantizeLinear's range makes it redundant (a Relu before a zero point at the type's lowest
value), and then the operator runs in float. Its float sums round apart from integer arithmetic
on near ties, so under symmetric schemas (zero point 0) a file without the pair before each
clamp was no integer oracle at all. With it, onnxruntime runs every unit on its integer kernels,
and Kiln's integer graph is the one it compiled before the pair existed.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.frontends.onnx.export import to_onnx
from compiler.interpreter import run
from compiler.quant import quantize as quantize_module
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import Options, quantize
from tests.helpers import make_model
from tests.quant.int8_oracle import differing, qdq_session, u8s8_inexact_reason

# Nodes onnxruntime may leave in float without rounding anything: clamps and moves between
# equal parameters.
EXACT_IN_FLOAT = {"Relu", "Clip", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze"}
QDQ = {"QuantizeLinear", "DequantizeLinear"}


def _clamps_model() -> onnx.ModelProto:
    """Conv -> Relu, Conv -> Clip(0, 6), a residual Add -> Relu and Gemm -> Relu."""
    rng = np.random.default_rng(7)
    inits = {"w1": rng.normal(0, 0.4, (8, 3, 3, 3)).astype(np.float32),
             "b1": rng.normal(0, 0.1, 8).astype(np.float32),
             "w2": rng.normal(0, 0.3, (8, 8, 3, 3)).astype(np.float32),
             "b2": rng.normal(0, 0.1, 8).astype(np.float32),
             "lo": np.float32(0.0), "hi": np.float32(6.0),
             "wg": rng.normal(0, 0.3, (10, 8)).astype(np.float32),
             "bg": rng.normal(0, 0.1, 10).astype(np.float32)}
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["r1"]),
             n("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             n("Clip", ["c2", "lo", "hi"], ["k2"]),
             n("Add", ["r1", "k2"], ["a3"]),
             n("Relu", ["a3"], ["r3"]),
             n("GlobalAveragePool", ["r3"], ["g"]),
             n("Flatten", ["g"], ["f"]),
             n("Gemm", ["f", "wg", "bg"], ["h"], transB=1),
             n("Relu", ["h"], ["y"])]
    return make_model(nodes, [("x", np.float32, [1, 3, 8, 8])], [("y", np.float32, None)],
                      inits)


def _quantized(schema: str):
    graph = load_onnx(_clamps_model())
    rng = np.random.default_rng(1)
    calib = rng.uniform(-1, 1, (16, 1, 3, 8, 8)).astype(np.float32)
    profile = profile_model(graph, CalibrationData("x", calib, "drawn"))
    return quantize(graph, profile, Options(schema=schema, requant="onnx")), profile, graph


def _float_units(path, tmp_path) -> list[str]:
    """The nodes onnxruntime's optimizer leaves computing in float (Relu, moves aside)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.qdqisint8allowed", "1")
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(tmp_path / "optimized.onnx")
    return [node.op_type for node in optimized.graph.node
            if node.op_type not in EXACT_IN_FLOAT | QDQ and not node.op_type.startswith("QLinear")
            and node.op_type != "QGemm"]


@pytest.mark.parametrize("schema", ["symmetric", "symmetric-pow2", "tflite", "uint8"])
def test_every_unit_runs_on_onnxruntimes_integer_kernels_and_equals_kiln(schema, tmp_path):
    if schema == "uint8" and u8s8_inexact_reason():
        pytest.skip(u8s8_inexact_reason())
    qdq, _, _ = _quantized(schema)
    path = tmp_path / "quantized.onnx"
    onnx.save(to_onnx(qdq), path)
    assert _float_units(path, tmp_path) == []
    reference = compilation(qdq).reference
    session = qdq_session(path)
    rng = np.random.default_rng(2)
    for scale in (1.0, 10.0):  # inside the calibrated range, and far beyond it
        x = (rng.uniform(-1, 1, (1, 3, 8, 8)) * scale).astype(np.float32)
        want = session.run(None, {"x": x})[0]
        assert differing(run(reference, {"x": x})["y"], want) == 0, f"x{scale}"


def test_the_pair_before_a_clamp_changes_no_integer_operator(monkeypatch):
    """Kiln's integer graph from the new file is the one from a file without the pairs."""
    qdq, profile, graph = _quantized("symmetric")
    with_pairs = compilation(qdq).final
    monkeypatch.setattr(quantize_module, "_before_clamp", lambda *args: None)
    without = quantize(graph, profile, Options(schema="symmetric", requant="onnx"))
    assert sum(n.op == "QuantizeLinear" for n in qdq.nodes) == \
        sum(n.op == "QuantizeLinear" for n in without.nodes) + 4  # r1, k2, r3, y
    assert [n.op for n in with_pairs.nodes] == [n.op for n in compilation(without).final.nodes]
    x = np.random.default_rng(3).uniform(-3, 3, (1, 3, 8, 8)).astype(np.float32)
    assert differing(run(with_pairs, {"x": x})["y"],
                     run(compilation(without).final, {"x": x})["y"]) == 0
