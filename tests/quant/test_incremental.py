"""The quantization workbench's evaluator: a range change re-runs only what depends on it.

After any sequence of changes the errors must be exactly those of an evaluator built from
scratch with the same edits (the cache is never stale), must agree with the full report of
`evaluate`, and a change near the output must re-run only the nodes after it.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler import ops
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.frontends.onnx import load_onnx
from compiler.ir.graph import Node
from compiler.quant.batched import run_node
from compiler.quant.calibration_data import CalibrationData, load_calibration
from compiler.quant.evaluate import evaluate
from compiler.quant.incremental import IncrementalEvaluator
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import Options, quantize
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model


@pytest.fixture(scope="module")
def digits():
    graph = load_model(SAMPLE_MODEL)
    train = load_calibration("digits:train", graph)
    profile = profile_model(graph, train, "digits_cnn.onnx", bins=256)
    return graph, profile, load_calibration("digits:test", graph)


def _same(a, b):
    assert a.output_sqnr == b.output_sqnr and a.top1_agreement == b.top1_agreement
    assert a.tensors.keys() == b.tensors.keys()
    for name in a.tensors:
        assert a.tensors[name] == b.tensors[name], name


def test_every_change_gives_the_errors_of_a_fresh_evaluation(digits):
    graph, profile, test = digits
    live = IncrementalEvaluator(graph, profile, test, samples=40)
    for i, name in enumerate(live.evaluation.tensors):  # the tensors with a pair of their own
        low, high = profile.range_of(name)
        result = live.set_range(name, low * (0.5 + 0.1 * i), high * (0.6 + 0.05 * i))
        assert result.recomputed > 0 and name in live.profile.overrides
    edited = live.profile
    _same(live.evaluation, IncrementalEvaluator(graph, edited, test, samples=40).evaluation)
    first = next(iter(profile.tensors))
    live.clear_range(first)
    edited.overrides.pop(first, None)
    _same(live.evaluation, IncrementalEvaluator(graph, edited, test, samples=40).evaluation)


def test_a_change_near_the_output_reruns_only_what_follows(digits):
    graph, profile, test = digits
    live = IncrementalEvaluator(graph, profile, test, samples=20)
    total = len(live.qdq.nodes)
    names = list(live.evaluation.tensors)
    low, high = profile.range_of(names[-1])
    late = live.set_range(names[-1], low, high * 0.5)
    low, high = profile.range_of(names[0])
    early = live.set_range(names[0], low, high * 0.5)
    assert 0 < late.recomputed < early.recomputed <= total
    assert late.changed == [names[-1]] or set(late.changed) <= set(names[-2:])
    assert len(early.changed) == len(early.tensors)  # the input: everything after it


def test_the_errors_are_those_of_the_full_report(digits):
    graph, profile, test = digits
    live = IncrementalEvaluator(graph, profile, test, samples=60)
    full = evaluate(graph, quantize(graph, profile, Options()), test, limit=60)
    for t in full.tensors:
        mine = live.evaluation.tensors[t.name]
        assert (mine.low, mine.high, mine.scale) == (t.low, t.high, t.scale)
        assert mine.sqnr == pytest.approx(t.sqnr, rel=1e-3)  # float32 against float64 sums
        assert mine.clipped == pytest.approx(t.clipped, abs=1e-4)
    assert 0.9 <= live.evaluation.top1_agreement <= 1.0


def test_a_narrower_range_clips_more(digits):
    graph, profile, test = digits
    live = IncrementalEvaluator(graph, profile, test, samples=30)
    name = list(live.evaluation.tensors)[2]
    before = live.evaluation.tensors[name].clipped
    low, high = profile.range_of(name)
    after = live.set_range(name, low * 0.2, high * 0.2).tensors[name]
    assert after.clipped > before and after.high == pytest.approx(high * 0.2, rel=0.02)


def test_bad_ranges_are_clear_errors(digits):
    graph, profile, test = digits
    live = IncrementalEvaluator(graph, profile, test, samples=5)
    with pytest.raises(KilnError, match="no tensor named 'nope'"):
        live.set_range("nope", 0, 1)
    name = next(iter(profile.tensors))
    with pytest.raises(KilnError, match="min <= max"):
        live.set_range(name, 2.0, 1.0)
    with pytest.raises(KilnError, match="finite"):
        live.set_range(name, 0.0, float("inf"))


def _node(op, shape, shape_out, attrs=None):
    model = make_model([helper.make_node(op, ["x"], ["y"], **(attrs or {}))],
                       [("x", "float32", shape)], [("y", "float32", shape_out)])
    return load_onnx(model).nodes[0]


@pytest.mark.parametrize("op, shape, out, attrs", [
    ("Softmax", [1, 5], [1, 5], {"axis": 1}),
    ("Softmax", [1, 5], [1, 5], {"axis": 0}),  # over the batch axis: sample by sample
    ("ReduceMean", [1, 4, 3], [1, 1, 1], {"keepdims": 1}),
    ("Transpose", [1, 2, 3], [3, 2, 1], {"perm": [2, 1, 0]}),
    ("Transpose", [1, 2, 3], [1, 3, 2], {"perm": [0, 2, 1]}),
    ("Flatten", [1, 2, 3], [1, 6], {"axis": 1}),
    ("Flatten", [1, 2, 3], [1, 6], {"axis": 0}),
])
def test_a_batch_of_samples_gives_what_each_sample_gives(op, shape, out, attrs):
    node: Node = _node(op, shape, out, attrs)
    rng = np.random.default_rng(0)
    stacked = rng.standard_normal((7, *shape)).astype(np.float32)
    (got,) = run_node(node, [stacked], 7, [True])
    want = np.stack([ops.lookup(op).run(node, [s])[0] for s in stacked])
    assert got.shape == (7, *out)
    np.testing.assert_array_equal(got, want)


def test_the_workbench_evaluates_any_float_model():
    """A built model whose input has no batch axis: every node runs sample by sample."""
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        [("x", "float32", [2, 4])], [("y", "float32", [2, 3])], {"w": w})
    graph = load_onnx(model)
    data = CalibrationData("x", np.random.default_rng(1).standard_normal((30, 2, 4))
                           .astype(np.float32), "random")
    profile = profile_model(graph, data)
    live = IncrementalEvaluator(graph, profile, data, samples=30)
    again = live.set_range("h", -1.0, 1.0)
    assert set(again.changed) <= {"h", "y"} and again.output_sqnr["y"] > 0
