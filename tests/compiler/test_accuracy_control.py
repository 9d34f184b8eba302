"""Accuracy control: the layer whose quantization costs the accuracy goes back to float."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.errors import KilnError
from compiler.explore.accuracy_control import accuracy_control
from compiler.frontends.onnx import load_onnx
from compiler.quant.calibration_data import CalibrationData, load_calibration
from compiler.quant.profiler import profile_model
from tests.conftest import SAMPLE_MODEL
from tests.helpers import hard_digits_model

SAMPLES = 200


def _hard_digits():
    return load_onnx(hard_digits_model())


def _setup(graph):
    profile = profile_model(graph, load_calibration("digits:train", graph))
    return profile, load_calibration("digits:test", graph)


def test_the_layer_that_costs_the_accuracy_goes_back_to_float():
    graph = _hard_digits()
    profile, test = _setup(graph)
    scores = []
    result = accuracy_control(graph, profile, test, 0.01, limit=SAMPLES,
                              report=lambda step, score: scores.append(score))
    assert result.steps[0].score < 0.5 < result.float_score  # plain int8 falls apart
    assert result.feasible and len(result.steps) == 2
    assert result.final.keep_float == ("relu1_out",)  # the tensor conv2 reads...
    assert result.final.float_weights == ("conv2",)  # ...and conv2 computes in float
    assert result.final.score >= result.float_score - 0.01
    assert scores == [s.score for s in result.steps]
    doc = result.to_json()
    assert doc["feasible"] and doc["steps"][-1]["keep_float"] == ["relu1_out"]


def test_a_model_within_bounds_keeps_every_layer_int8():
    graph = load_onnx(onnx.load(SAMPLE_MODEL))
    profile, test = _setup(graph)
    result = accuracy_control(graph, profile, test, 0.02, limit=SAMPLES)
    assert result.feasible and len(result.steps) == 1
    assert result.final.keep_float == () and result.final.float_weights == ()


def test_without_labels_top1_agreement_is_the_score():
    graph = _hard_digits()
    profile, test = _setup(graph)
    unlabelled = CalibrationData(test.input_name, test.samples[:SAMPLES], "digits:test")
    result = accuracy_control(graph, profile, unlabelled, 0.02)
    assert result.float_score == 1.0 and result.feasible
    assert "relu1_out" in result.final.keep_float


def test_no_data_is_one_sentence():
    graph = load_onnx(onnx.load(SAMPLE_MODEL))
    profile, test = _setup(graph)
    empty = CalibrationData(test.input_name, np.zeros((0, *test.samples.shape[1:]),
                                                      test.samples.dtype), "none")
    with pytest.raises(KilnError, match="at least one evaluation sample"):
        accuracy_control(graph, profile, empty, 0.01)
