"""Each calibration method picks the range it should, and each error figure is its formula.

The methods run on histograms whose right answer is known: a long tail that entropy and MSE
must clip below min-max (checked against the square error of quantizing the samples
themselves, computed here without Kiln), percentile(p) cutting (100 - p) / 2 percent from each
end to the bin, and histograms where min-max is the best range. The figures (SQNR, RMS error
over scale, clipped fraction, top-1 agreement) are pinned to values worked out by hand, in the
report, the incremental evaluator and the estimate that follows a dragged range alike.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper

from compiler.frontends.onnx import load_onnx
from compiler.quant.calibrate import choose_range, histogram_error, params_for
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.evaluate import evaluate, tensor_report
from compiler.quant.incremental import IncrementalEvaluator
from compiler.quant.metrics import sqnr_db, top1_agreement
from compiler.quant.profile import TensorRange
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import Options, quantize
from tests.helpers import make_model


def _entry(samples: np.ndarray, bins: int) -> TensorRange:
    low, high = float(samples.min()), float(samples.max())
    counts, _ = np.histogram(samples, bins=bins, range=(low, high))
    return TensorRange(low, high, counts.tolist())


def _sample_mse(samples: np.ndarray, low: float, high: float) -> float:
    """The mean square error of rounding `samples` to 256 levels over [low, high], clipped."""
    step = (high - low) / 255
    levels = np.clip(np.round((samples - low) / step), 0, 255)
    return float(np.mean((samples - (low + levels * step)) ** 2))


def _long_tail(seed: int) -> np.ndarray:
    """A unit Gaussian with a sparse tail out to 40 standard deviations on both sides."""
    rng = np.random.default_rng(seed)
    tail = rng.uniform(6, 40, 12) * rng.choice([-1, 1], 12)
    return np.concatenate([rng.standard_normal(100_000), tail, [-40.0, 40.0]])


@pytest.mark.parametrize("seed", range(4))
def test_mse_clips_a_long_tail_to_the_least_square_error(seed):
    samples = _long_tail(seed)
    entry = _entry(samples, 2048)
    low, high = choose_range(entry, "mse")
    assert high < 0.9 * entry.max and low > 0.9 * entry.min
    # The best of a fine sweep of symmetric ranges, by the samples' own error.
    sweep = {t: _sample_mse(samples, -t, t) for t in np.linspace(1.0, 40.0, 391)}
    best = min(sweep.values())
    assert _sample_mse(samples, low, high) <= 1.1 * best
    assert _sample_mse(samples, low, high) < 0.9 * _sample_mse(samples, entry.min, entry.max)


@pytest.mark.parametrize("seed", range(4))
def test_entropy_clips_a_long_tail_and_keeps_the_body(seed):
    """TensorRT's method on a fine histogram: the tail goes, the Gaussian stays whole."""
    samples = _long_tail(seed)
    entry = _entry(samples, 2048)
    low, high = choose_range(entry, "entropy")
    assert 2.5 < high < 8 and -8 < low < -2.5
    body = np.abs(samples) < 6
    assert np.mean((samples[body] >= low) & (samples[body] <= high)) > 0.99
    # KL weighs how many values a range spoils, not by how much: the body is what it keeps.
    body_error = _sample_mse(samples[body], low, high)
    assert body_error < 0.1 * _sample_mse(samples[body], entry.min, entry.max)


def test_entropy_sees_rounding_only_in_a_histogram_finer_than_the_levels():
    """With fewer bins than levels nothing is merged: only clipping costs, so min-max stays."""
    samples = _long_tail(0)
    coarse = _entry(samples, 200)
    assert choose_range(coarse, "entropy") == (coarse.min, coarse.max)


@pytest.mark.parametrize("method", ["entropy", "mse"])
@pytest.mark.parametrize("shape", ["uniform", "two-spikes", "relu-uniform"])
def test_min_max_stays_where_it_is_the_best_range(method, shape):
    rng = np.random.default_rng(7)
    if shape == "uniform":
        samples = rng.uniform(-1.0, 3.0, 200_000)
    elif shape == "two-spikes":
        samples = np.repeat([-2.0, 5.0], 5000)
    else:
        samples = np.concatenate([np.zeros(50_000), rng.uniform(0, 6.0, 100_000)])
    entry = _entry(samples, 2048)
    assert choose_range(entry, method) == (entry.min, entry.max)


@pytest.mark.parametrize("p", [99.0, 99.9, 90.0, 50.0])
def test_percentile_cuts_half_the_rest_from_each_end_to_the_bin(p):
    rng = np.random.default_rng(3)
    counts = rng.integers(1, 50, 1000)
    entry = TensorRange(-5.0, 15.0, counts.tolist())
    low, high = choose_range(entry, "percentile", p)
    edges = np.linspace(entry.min, entry.max, len(counts) + 1)
    first = int(np.argmin(np.abs(edges - low)))
    last = int(np.argmin(np.abs(edges - high)))
    assert edges[first] == low and edges[last] == high
    total, cut = counts.sum(), (100 - p) / 200
    # As much as may go from each end, and not one bin more.
    assert counts[:first].sum() <= cut * total < counts[:first + 1].sum()
    assert counts[last:].sum() <= cut * total < counts[last - 1:].sum()


def test_percentile_of_a_flat_histogram_cuts_exactly():
    entry = TensorRange(0.0, 1000.0, [10] * 1000)
    assert choose_range(entry, "percentile", 99.0) == (5.0, 995.0)
    assert choose_range(entry, "percentile", 90.0) == (50.0, 950.0)
    assert choose_range(entry, "percentile", 100.0) == (0.0, 1000.0)


def test_sqnr_is_ten_log10_of_the_power_ratio():
    reference = np.array([1.0, 2.0, 3.0, 4.0])
    approximate = np.array([1.0, 2.0, 3.0, 5.0])  # signal 30, noise 1
    assert sqnr_db(reference, approximate) == pytest.approx(14.771212547196624, abs=1e-12)
    assert sqnr_db(reference, reference) == math.inf
    assert sqnr_db(np.zeros(3), np.ones(3)) == -math.inf
    assert sqnr_db(reference, 2 * reference) == pytest.approx(0.0, abs=1e-12)


def test_a_tensor_report_is_worked_out_by_hand():
    f = np.array([0.0, 0.1, 0.2, 1.0, 13.0])
    q = np.array([0.0, 0.1, 0.2, 0.9, 12.7])  # scale 0.1, zero 0: [-12.8, 12.7]
    report = tensor_report("t", f, q, 0.1, 0, "int8")
    noise, signal = 0.01 + 0.09, 0.01 + 0.04 + 1.0 + 169.0
    assert report.sqnr == pytest.approx(10 * math.log10(signal / noise), abs=1e-9)
    assert report.sqnr == pytest.approx(32.3058, abs=1e-4)
    assert report.rmse_over_scale == pytest.approx(math.sqrt(noise / 5) / 0.1, abs=1e-9)
    assert report.clipped == pytest.approx(1 / 5)
    assert (report.low, report.high) == pytest.approx((-12.8, 12.7))
    uint8 = tensor_report("t", f, q, 0.1, 10, "uint8")
    assert (uint8.low, uint8.high) == pytest.approx((-1.0, 24.5)) and uint8.clipped == 0


def test_the_drag_estimate_is_worked_out_by_hand():
    entry = TensorRange(-1.0, 3.0, [1, 0, 0, 1])  # one value at -0.5, one at 2.5
    clipped, sqnr = histogram_error(entry, -1.0, 3.0)
    rounding = 2 * (4 / 255) ** 2 / 12
    assert clipped == 0 and sqnr == pytest.approx(10 * math.log10(6.5 / rounding), abs=1e-9)
    assert sqnr == pytest.approx(52.0002, abs=1e-4)
    clipped, sqnr = histogram_error(entry, 0.0, 2.0)  # both clipped by 0.5
    assert clipped == 1.0 and sqnr == pytest.approx(10 * math.log10(13.0), abs=1e-9)


def test_top1_agreement_counts_the_rows_that_agree():
    f = np.array([[1, 2], [3, 0], [0, 1]])
    q = np.array([[2, 1], [3, 1], [0, 5]])
    assert top1_agreement(f, q) == pytest.approx(2 / 3)


def test_the_report_and_the_workbench_measure_what_numpy_measures():
    """A one-layer model: each tensor's SQNR and RMS error over scale, from the report and
    the incremental evaluator, equal the formulas applied here to a QuantizeLinear written out
    in numpy (round half to even, then clamp)."""
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [("x", "float32", [1, 4])], [("y", "float32", [1, 3])], {"w": w})
    graph = load_onnx(model)
    x = np.random.default_rng(5).standard_normal((40, 4)).astype(np.float32)
    data = CalibrationData("x", x, "random")
    profile = profile_model(graph, data, bins=64)
    report = {t.name: t for t in evaluate(graph, quantize(graph, profile, Options()), data)
              .tensors}
    p = params_for(profile.tensors["x"].min, profile.tensors["x"].max)
    q = (np.clip(np.round(x / np.float32(p.scale)) + p.zero_point, -128, 127)
         - p.zero_point) * np.float32(p.scale)
    noise = float(np.sum((x.astype(np.float64) - q) ** 2))
    want = 10 * math.log10(float(np.sum(x.astype(np.float64) ** 2)) / noise)
    assert report["x"].sqnr == pytest.approx(want, rel=1e-6)
    assert report["x"].rmse_over_scale == pytest.approx(math.sqrt(noise / x.size) / p.scale,
                                                        rel=1e-6)
    live = IncrementalEvaluator(graph, profile, data, samples=40).evaluation
    assert live.tensors["x"].sqnr == pytest.approx(want, rel=1e-6)
    assert live.tensors["y"].sqnr == pytest.approx(report["y"].sqnr, rel=1e-5)


def test_kiln_quantize_says_when_the_histogram_is_too_coarse_for_entropy(tmp_path, capsys):
    from app.cli import main
    from tests.conftest import SAMPLE_MODEL

    profile = tmp_path / "p.json"
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:test", "--bins", "64",
                 "-o", str(profile)]) == 0
    capsys.readouterr()
    for method, noted in (("entropy", True), ("mse", False)):
        assert main(["quantize", str(SAMPLE_MODEL), "--profile", str(profile), "--method",
                     method, "-o", str(tmp_path / "q.onnx")]) == 0
        err = capsys.readouterr().err
        assert ("entropy needs 512 histogram bins or more" in err
                and "this profile has 64" in err) == noted
