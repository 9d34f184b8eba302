"""Cross-layer equalization and bias correction, the quantizer's options beyond the peers.

Equalization must leave the float model's outputs as they were while evening out the weight
ranges of each pair of convolutions; bias correction must take the mean error out of every
layer it corrects. Both reach the profile, `kiln quantize` and its report.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

from app.cli import main
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.quant.bias_correction import bias_corrections
from compiler.quant.calibration_data import CalibrationData, load_calibration
from compiler.quant.equalize import MAX_SCALE, equalization_pairs, equalize
from compiler.quant.glow_yaml import write_profile
from compiler.quant.incremental import IncrementalEvaluator
from compiler.quant.profile import load_profile
from compiler.quant.profiler import calibration_graph, profile_model
from compiler.quant.quantize import Options, quantize
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model


def _mobile_block(dead_channel: bool = False):
    """conv 3x3 -> relu -> depthwise 3x3 -> relu -> conv 1x1, channel ranges far apart."""
    rng = np.random.default_rng(3)
    spread = np.array([0.01, 0.1, 1.0, 10.0], np.float32)
    w1 = rng.standard_normal((4, 2, 3, 3)).astype(np.float32) * spread[:, None, None, None]
    if dead_channel:
        w1[0] = 1e-30  # a channel whose output is its bias
    w2 = rng.standard_normal((4, 1, 3, 3)).astype(np.float32) / spread[::-1, None, None, None]
    w3 = rng.standard_normal((3, 4, 1, 1)).astype(np.float32)
    b1, b2 = np.full(4, 0.5, np.float32), rng.standard_normal(4).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["y"])]
    model = make_model(nodes, [("x", "float32", [1, 2, 6, 6])], [("y", "float32", [1, 3, 6, 6])],
                       {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "w3": w3})
    return load_onnx(model)


def _ranges(graph, name, axis):
    w = np.abs(next(n for n in graph.nodes if n.name == name).inputs[1].data)
    return np.max(w, axis=tuple(i for i in range(w.ndim) if i != axis))


def test_equalization_keeps_the_outputs_and_evens_the_ranges():
    graph = calibration_graph(_mobile_block())
    equalized, pairs = equalize(graph)
    assert pairs == 2 and len(equalization_pairs(graph)) == 2
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run(equalized, {"x": x})["y"], run(graph, {"x": x})["y"],
                               rtol=1e-4, atol=1e-5)
    first, depthwise, last = (n.name for n in graph.nodes if n.op == "Conv")
    before = _ranges(graph, first, 0).max() / _ranges(graph, first, 0).min()
    after = _ranges(equalized, first, 0).max() / _ranges(equalized, first, 0).min()
    assert before > 100 and after < before / 10
    # The depthwise filters sit between two pairs: their ranges meet both neighbours'.
    np.testing.assert_allclose(_ranges(equalized, depthwise, 0) ** 2,
                               _ranges(equalized, first, 0) * _ranges(equalized, last, 1),
                               rtol=1e-3)


def test_a_dead_channel_is_not_scaled_without_bound():
    graph = calibration_graph(_mobile_block(dead_channel=True))
    equalized, _ = equalize(graph)
    first = next(n.name for n in graph.nodes if n.op == "Conv")
    bias = lambda g: next(n for n in g.nodes if n.name == first).inputs[2].data  # noqa: E731
    assert abs(bias(equalized)[0]) <= abs(bias(graph)[0]) * MAX_SCALE * (1 + 1e-6)
    x = np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run(equalized, {"x": x})["y"], run(graph, {"x": x})["y"],
                               rtol=1e-4, atol=1e-5)


def test_an_equalized_profile_quantizes_its_own_graph(tmp_path):
    graph = _mobile_block()
    data = CalibrationData("x", np.random.default_rng(2).standard_normal((64, 1, 2, 6, 6))
                           .astype(np.float32).reshape(64, 1, 2, 6, 6)[:, 0], "random")
    profile = profile_model(graph, data, equalized=True)
    path = tmp_path / "p.json"
    profile.save(path)
    assert json.loads(path.read_text())["equalized"] is True and load_profile(path).equalized
    qdq = quantize(graph, load_profile(path))
    held = run(qdq, {"x": data.samples[:1]})["y"]
    plain = run(calibration_graph(graph), {"x": data.samples[:1]})["y"]
    assert np.abs(held - plain).max() < 0.1 * np.abs(plain).max()
    with pytest.raises(KilnError, match="cannot say the graph was equalized"):
        write_profile(profile, tmp_path / "p.yaml")
    unequalized = profile_model(graph, data)
    unequalized.graph_hash = profile.graph_hash  # a profile of one graph, applied to the other
    with pytest.raises(KilnError, match="another graph"):
        quantize(graph, unequalized)


@pytest.fixture(scope="module")
def digits():
    graph = load_model(SAMPLE_MODEL)
    train = load_calibration("digits:train", graph)
    return graph, profile_model(graph, train, bins=256), train


def _mean_errors(graph, profile, data, corrections):
    live = IncrementalEvaluator(graph, profile, data, samples=128)
    if corrections:
        live.set_corrections(corrections)
    errors = {}
    for node in live.qdq.nodes:
        if node.op == "Conv":
            diff = live.quantized_value(node.output.name) - live.float_value(node.output.name)
            errors[node.name] = np.abs(diff.mean(axis=(0, 1, 3, 4))).max()
    return errors


def test_bias_correction_takes_out_the_mean_error(digits):
    graph, profile, train = digits
    corrections = bias_corrections(graph, profile, train, samples=128)
    convs = [n.name for n in calibration_graph(graph).nodes if n.op in ("Conv", "Gemm")]
    assert set(corrections) == set(convs)
    before = _mean_errors(graph, profile, train, None)
    after = _mean_errors(graph, profile, train, corrections)
    for name in before:
        assert after[name] < 0.2 * before[name] or after[name] < 1e-6, name
    qdq = quantize(graph, profile, Options(), corrections)
    biases = {n.name: n.inputs[2].producer.inputs[0].data for n in qdq.nodes if n.op == "Conv"}
    plain = {n.name: n.inputs[2].producer.inputs[0].data
             for n in quantize(graph, profile).nodes if n.op == "Conv"}
    assert any((biases[k] != plain[k]).any() for k in biases)


def test_kiln_profile_and_quantize_take_both_options(tmp_path, capsys):
    profile = tmp_path / "p.json"
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:train", "--equalize",
                 "-o", str(profile)]) == 0
    assert load_profile(profile).equalized
    out = tmp_path / "q.onnx"
    assert main(["quantize", str(SAMPLE_MODEL), "--profile", str(profile), "--bias-correction",
                 "digits:train", "-o", str(out), "--report", "digits:test"]) == 0
    text = capsys.readouterr().out
    assert "equalized, 4 biases corrected" in text
    accuracy = [line for line in text.splitlines() if "accuracy" in line][0]
    floating, quantized = (float(part.split()[-2]) for part in accuracy.split(","))
    assert quantized >= floating - 0.5
