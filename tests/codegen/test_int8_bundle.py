"""An int8 bundle's header and example program: scale and zero point macros, and `--float`.

The example program quantizes float32 inputs as the model's runtime does (half away from zero
for TFLite, half to even for ONNX) and prints outputs dequantized; its bytes must equal the
interpreter on the same quantized input.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from compiler.codegen.bundle import write_bundle
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.qmath.requant import REQUANT_KEY
from tests.codegen.test_int8_kernels import _conv_tflite


def _quantize(x: np.ndarray, scale: float, zero_point: int, rule: str) -> np.ndarray:
    scaled = x.astype(np.float32) / np.float32(scale)
    rounded = (np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5)) if rule == "tflite"
               else np.rint(scaled))
    return np.clip(rounded + zero_point, -128, 127).astype(np.int8)


@pytest.mark.usefixtures("c_compiler")
@pytest.mark.parametrize("rule", ["tflite", "onnx"])
def test_the_example_quantizes_float_inputs_and_dequantizes_outputs(rule, tmp_path):
    graph = load_model(_conv_tflite(False, 2, 1, 3))
    graph.metadata[REQUANT_KEY] = rule
    prepared = compilation(graph).prepared
    net = compile_graph(prepared, get_target("host"), name="net")
    folder = tmp_path / "bundle"
    write_bundle(net, folder)
    header = (folder / "net.h").read_text()
    (x_value,), (y_value,) = prepared.inputs, prepared.outputs
    x_quant, y_quant = x_value.type.quant, y_value.type.quant
    assert f"#define NET_INPUT_X_ZERO_POINT {x_quant.zero_point[0]}" in header
    assert "_SCALE" in header
    subprocess.run(["make", "-s", "-C", str(folder)], check=True, capture_output=True)
    # Values at exact halves of a step test the rounding rule.
    rng = np.random.default_rng(2)
    steps = rng.integers(-140, 140, x_value.type.shape) + rng.choice([0.0, 0.5, 0.25],
                                                                     x_value.type.shape)
    real = (steps * np.float64(x_quant.scale[0])).astype(np.float32)
    real.tofile(tmp_path / "in.bin")
    printed = subprocess.run([str(folder / "net_example"), "--float", str(tmp_path / "in.bin")],
                             check=True, capture_output=True, text=True).stdout
    got = np.array(printed.splitlines()[1].split(), np.float32)
    q = _quantize(real, x_quant.scale[0], x_quant.zero_point[0], rule)
    want_q = run(prepared, {x_value.name: q})[y_value.name].astype(np.float32).ravel()
    want = (want_q - np.float32(y_quant.zero_point[0])) * np.float32(y_quant.scale[0])
    assert np.array_equal(got, want)
    # Without --float the same bytes come back as integers.
    q.tofile(tmp_path / "in8.bin")
    raw = subprocess.run([str(folder / "net_example"), str(tmp_path / "in8.bin")],
                         check=True, capture_output=True, text=True).stdout
    assert np.array_equal(np.array(raw.splitlines()[1].split(), np.int64), want_q)
