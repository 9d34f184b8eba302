"""Quantize all but one layer: the ranking `kiln quantize --report` gives of the layers."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.cli import main
from compiler.frontends.load import load_model
from compiler.quant.calibration_data import load_calibration
from compiler.quant.incremental import IncrementalEvaluator
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import Options
from compiler.quant.sensitivity import layer_sensitivity
from tests.conftest import SAMPLE_MODEL


@pytest.fixture(scope="module")
def digits():
    graph = load_model(SAMPLE_MODEL)
    return (graph, profile_model(graph, load_calibration("digits:train", graph), bins=256),
            load_calibration("digits:test", graph))


def test_each_layer_left_float_gives_the_output_error_of_that_model(digits):
    graph, profile, test = digits
    ranking = layer_sensitivity(graph, profile, test, samples=16)
    base = min(IncrementalEvaluator(graph, profile, test, samples=16).evaluation
               .output_sqnr.values())
    assert [s.gain for s in ranking] == sorted((s.gain for s in ranking), reverse=True)
    assert {s.layer for s in ranking} >= {"conv1", "conv2", "conv3", "fc"}
    for s in ranking:
        options = Options(keep_float=(s.tensor,), float_weights=(s.layer,) if s.layer else ())
        fresh = IncrementalEvaluator(graph, profile, test, options, samples=16)
        assert min(fresh.evaluation.output_sqnr.values()) == s.output_sqnr
        assert s.gain == pytest.approx(s.output_sqnr - base)
        assert s.tensor not in fresh.evaluation.tensors  # it really stayed float
    assert ranking[0].gain > 0


@pytest.mark.slow
def test_the_report_names_the_layer_that_hurts_most(digits, tmp_path, capsys):
    graph, profile, test = digits
    path = tmp_path / "p.json"
    replace(profile).save(path)
    out = tmp_path / "q.onnx"
    assert main(["quantize", str(SAMPLE_MODEL), "--profile", str(path), "-o", str(out),
                 "--report", "digits:test", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    first = doc["all_but_one"][0]
    assert first["gain_db"] >= doc["all_but_one"][-1]["gain_db"]
    assert main(["quantize", str(SAMPLE_MODEL), "--profile", str(path), "-o", str(out),
                 "--report", "digits:test"]) == 0
    text = capsys.readouterr().out
    assert f"hurts the output most (all but one quantized, first 16 samples): " \
           f"{first['float_tensor']}" in text
