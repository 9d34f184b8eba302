"""Accuracy control's rules on built models: the ranking's direction and the bound's edge.

The oracles are worked out here: each candidate's score with it alone kept float, from the
compiled host code (not the fake-quantized model the ranking runs on), and the drop of the
all-int8 model, which becomes the bound itself.
"""

from __future__ import annotations

import copy

import onnx
import pytest

from compiler.explore.accuracy_control import (
    ControlResult,
    Step,
    _subset,
    accuracy_control,
    readers,
)
from compiler.explore.measure import Measurement, feasible
from compiler.explore.problem import ProblemSpec, load_problem
from compiler.frontends.onnx import load_onnx
from compiler.quant.accuracy import answers
from compiler.quant.calibration_data import load_calibration
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import Options, quantize
from tests.conftest import SAMPLE_MODEL
from tests.helpers import hard_digits_model

SAMPLES = 120


def _setup(model: onnx.ModelProto):
    graph = load_onnx(model)
    profile = profile_model(graph, load_calibration("digits:train", graph))
    test = load_calibration("digits:test", graph)
    return graph, profile, _subset(test, SAMPLES)


def _score_alone(graph, profile, data, tensor: str | None) -> float:
    """Accuracy of the compiled int8 model with only `tensor` (and its readers) float."""
    keep = () if tensor is None else (tensor,)
    weights = () if tensor is None else readers(graph, tensor)
    qdq = quantize(graph, copy.deepcopy(profile), Options(keep_float=keep,
                                                           float_weights=weights))
    return answers(qdq, data).accuracy


def test_the_ranking_puts_what_gives_back_most_first():
    graph, profile, data = _setup(hard_digits_model())
    result = accuracy_control(graph, profile, data, 0.01)
    order = list(result.final.keep_float) + list(result.final.ranking)
    first, last = order[0], order[-1]
    scores = {t: _score_alone(graph, profile, data, t) for t in (first, last)}
    plain = _score_alone(graph, profile, data, None)
    # The scaled channel drowns relu1_out: keeping it float gives back most of the loss.
    assert scores[first] > scores[last] + 0.2, scores
    assert scores[first] > plain + 0.2
    assert result.feasible and result.final.keep_float == (first,)


def test_a_drop_exactly_at_the_bound_is_within_it():
    graph, profile, data = _setup(onnx.load(SAMPLE_MODEL))
    float_score = answers(graph, data).accuracy
    plain = _score_alone(graph, profile, data, None)
    bound = float_score - plain  # the all-int8 model loses exactly this much
    result = accuracy_control(graph, profile, data, bound)
    assert result.float_score == float_score
    assert len(result.steps) == 1 and result.final.keep_float == () and result.feasible
    # One sample more lost is over the bound.
    step = Step((), (), plain - 1 / len(data), None, None)
    assert not ControlResult(float_score, bound, [step]).feasible
    at = Step((), (), 0.98, None, None)  # 1.0 - 0.98 is 0.020000000000000018 in binary
    assert ControlResult(1.0, 0.02, [at]).feasible


def test_a_trial_exactly_at_the_bound_is_feasible():
    spec = ProblemSpec(str(SAMPLE_MODEL), "digits:train", "digits:test", max_drop=0.02)
    problem = load_problem(spec)

    def m(score: float) -> Measurement:
        return Measurement(score, 1000, 2000, 300, 0, True)
    one = 1 / len(problem.evaluation)
    assert feasible(problem, m(problem.float_score - 0.02))
    assert not feasible(problem, m(problem.float_score - 0.02 - one))
    assert not feasible(problem, Measurement(problem.float_score, 1, 1, 1, 0, False))


@pytest.mark.parametrize("samples, points, coarse", [(72, 1.0, True), (100, 1.0, False),
                                                     (50, 2.0, False), (49, 2.0, True),
                                                     (1000, 0.0, True)])
def test_the_coarse_evaluation_warning_follows_one_sample_in_points(samples, points, coarse):
    from compiler.explore.problem import coarse_evaluation

    said = coarse_evaluation(samples, points / 100)
    assert (said is not None) == (100 / samples > points), said  # one sample in points
    if said:
        assert f"{100 / samples:.2f} points" in said and f"{points:g}-point bound" in said
