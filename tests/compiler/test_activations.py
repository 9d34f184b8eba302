"""One sample's activations: every value, its statistics and heat maps, and its int8 pair."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.activations.layout import channel_maps, derived_layouts, layout_of
from compiler.activations.pairs import dequantize, quantized_names
from compiler.activations.sample import (
    RANDOM,
    SampleSpec,
    activation,
    export_npy,
    run_sample,
    sample_feeds,
)
from compiler.driver import compilation
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.quant.calibration_data import load_calibration
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import Options, quantize
from tests.conftest import SAMPLE_MODEL
from tests.helpers import ort_run


@pytest.fixture(scope="module")
def digits():
    return load_model(SAMPLE_MODEL)


@pytest.fixture(scope="module")
def int8(digits):
    """The sample quantized as the workbench does it: (QDQ graph, integer graph)."""
    profile = profile_model(digits, load_calibration("digits:train", digits), bins=128)
    qdq = quantize(digits, profile, Options(schema="tflite"))
    return qdq, compilation(qdq).final


def test_every_value_is_the_interpreters_and_onnxruntimes(digits):
    spec = SampleSpec("digits:test", 7)
    result = run_sample(digits, spec)
    feeds = sample_feeds(digits, spec)
    np.testing.assert_array_equal(feeds["image"],
                                  load_calibration("digits:test", digits).samples[7:8])
    assert result.values["logits"].tobytes() == run(digits, feeds)["logits"].tobytes()
    # onnxruntime, asked for every intermediate value, is an oracle the interpreter is not.
    model = onnx.load(SAMPLE_MODEL)
    names = [v.name for n in digits.nodes for v in n.outputs]
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    for name, want in zip(names, ort_run(model, feeds)):
        np.testing.assert_allclose(result.values[name], want, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert set(names) <= set(result.values) and "image" in result.values


def test_statistics_and_histogram_describe_the_tensor(digits):
    result = run_sample(digits, SampleSpec("digits:test", 2))
    shown = activation(result, "relu2_out", bins=30)
    array = result.values["relu2_out"].astype(np.float64)
    assert shown.array is result.values["relu2_out"]
    s = shown.stats
    assert (s.min, s.max) == (array.min(), array.max())
    assert s.mean == pytest.approx(array.mean()) and s.std == pytest.approx(array.std())
    assert s.sparsity == np.count_nonzero(array == 0) / array.size > 0  # a Relu's zeros
    assert len(s.counts) == 30 and s.counts.sum() == array.size
    assert s.edges[0] == array.min() and s.edges[-1] == array.max()
    assert shown.int8 is None and shown.difference is None  # no quantized model given


def test_heat_maps_are_the_channels_of_either_layout(digits):
    """The loaded graph computes NCHW, the compiled one NHWC: both give the same maps."""
    spec = SampleSpec("digits:test", 4)
    loaded = activation(run_sample(digits, spec), "pool1_out")
    assert loaded.layout == "NCHW" and loaded.maps.shape == (16, 4, 4)
    for c in range(16):
        np.testing.assert_array_equal(loaded.maps[c], loaded.array[0, c])
    final = compilation(digits).final
    compiled = activation(run_sample(final, spec), "pool1_out")
    assert compiled.layout == "NHWC" and compiled.array.shape == (1, 4, 4, 16)
    np.testing.assert_array_equal(compiled.maps[5], compiled.array[0, :, :, 5])
    np.testing.assert_allclose(compiled.maps, loaded.maps, rtol=1e-5, atol=1e-6)


def test_other_ranks_become_one_map_or_strips():
    assert channel_maps(np.arange(12.0).reshape(3, 4), "").shape == (1, 3, 4)
    np.testing.assert_array_equal(channel_maps(np.arange(5.0), "")[0, 0], np.arange(5.0))
    assert channel_maps(np.float32(2.0), "").shape == (1, 1, 1)
    strips = channel_maps(np.arange(24.0).reshape(1, 4, 6), "")
    assert strips.shape == (4, 1, 6) and strips[2, 0, 1] == 13.0


def test_layouts_come_from_the_operators(digits):
    known = derived_layouts(digits)
    assert {known[n] for n in ("image", "conv1_out", "relu1_out", "relu3_out")} == {"NCHW"}
    assert "flatten_out" not in known and layout_of(digits, "flatten_out") == ""
    final = compilation(digits).final
    assert derived_layouts(final)["pool1_out"] == "NHWC"


def test_int8_values_pair_with_the_float_values_they_quantize(digits, int8):
    qdq, integer = int8
    spec = SampleSpec("digits:test", 11)
    result = run_sample(digits, spec, integer, qdq)
    assert set(result.int8) == {"image", "relu1_out", "relu2_out", "pool1_out", "relu3_out",
                                "flatten_out", "logits"}
    feeds = sample_feeds(digits, spec)
    ints = run(integer, feeds, keep_all=True)
    # The logits' pair dequantized is what the integer graph's own DequantizeLinear gives.
    logits = activation(result, "logits")
    np.testing.assert_allclose(logits.int8.dequantized, ints["logits"], rtol=1e-6)
    np.testing.assert_array_equal(logits.difference,
                                  logits.int8.dequantized - result.values["logits"])
    assert logits.error.max_abs == np.abs(logits.difference).max() > 0
    # relu1_out: the integer graph's NHWC tensor, transposed back to NCHW.
    relu1 = activation(result, "relu1_out")
    nhwc = ints[relu1.int8.name]
    assert nhwc.shape == (1, 8, 8, 8) and relu1.layout == "NCHW"
    np.testing.assert_array_equal(relu1.int8.codes, nhwc.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(relu1.int8_maps[3], dequantize(nhwc, relu1.int8.quant)[0, ..., 3])
    # The QDQ simulation (rounding half to even) puts every code within one step of the
    # integer kernels' (TFLite's rounding): a wrongly arranged tensor would be far off.
    simulated = run(qdq, feeds, keep_all=True)
    for name, pair in result.int8.items():
        q = next(n.output.name for n in qdq.nodes if n.op == "QuantizeLinear"
                 and quantized_names(digits, qdq).get(n.id) == name)
        step = np.abs(pair.codes.astype(int) - simulated[q].reshape(pair.codes.shape))
        assert step.max() <= 1, name
    assert 30 < relu1.error.sqnr_db < 80


def test_a_sample_that_does_not_exist_is_one_clear_error(digits, tmp_path):
    with pytest.raises(KilnError, match=r"digits:test: there is no sample 450 \(it holds 450"):
        sample_feeds(digits, SampleSpec("digits:test", 450))
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((3, 5), np.float32))
    with pytest.raises(KilnError, match="wrong.npy: shape"):
        sample_feeds(digits, SampleSpec(str(wrong)))


def test_npy_and_npz_files_and_random_inputs(digits, tmp_path):
    stack = np.random.default_rng(1).random((4, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", stack)
    np.testing.assert_array_equal(sample_feeds(digits, SampleSpec(str(tmp_path / "x.npy"), 2))
                                  ["image"], stack[2:3])
    np.savez(tmp_path / "d.npz", x=stack, y=np.arange(4))
    np.testing.assert_array_equal(sample_feeds(digits, SampleSpec(str(tmp_path / "d.npz"), 3))
                                  ["image"], stack[3:4])
    one = sample_feeds(digits, SampleSpec(RANDOM, 5))["image"]
    assert one.shape == (1, 1, 8, 8) and one.dtype == np.float32
    np.testing.assert_array_equal(one, sample_feeds(digits, SampleSpec(RANDOM, 5))["image"])


def test_export_writes_the_exact_tensor_atomically(digits, tmp_path):
    result = run_sample(digits, SampleSpec("digits:test", 0))
    target = export_npy(tmp_path / "conv2_out.npy", result.values["conv2_out"])
    back = np.load(target)
    assert back.dtype == np.float32 and back.tobytes() == result.values["conv2_out"].tobytes()
    assert [p.name for p in tmp_path.iterdir()] == ["conv2_out.npy"]  # no temporary left
    with pytest.raises(KilnError, match="cannot write x.npy"):
        export_npy(tmp_path / "missing" / "x.npy", back)


def test_a_quantized_models_int8_values_show_their_real_values(tmp_path):
    """onnxruntime's QOperator digits model: its int8 edges dequantize as its own last node."""
    from tests.quant.int8_oracle import quantize_digits

    graph = load_model(quantize_digits(tmp_path)["QOperator"])
    result = run_sample(graph, SampleSpec("digits:test", 1))
    last = next(n for n in graph.nodes if n.op == "DequantizeLinear"
                and n.output.name == graph.outputs[0].name)
    codes = last.inputs[0].name
    shown = activation(result, codes)
    assert shown.array.dtype == np.int8 and shown.real is not None
    np.testing.assert_allclose(shown.real, result.values[graph.outputs[0].name], rtol=1e-6)
    np.testing.assert_array_equal(shown.maps[0], shown.real)  # [1, 10]: one map of reals
    conv = next(n for n in graph.nodes if n.op == "QLinearConv")
    maps = activation(result, conv.output.name)
    assert maps.layout == "NCHW" and maps.channels == conv.output.type.shape[1]
    np.testing.assert_array_equal(maps.maps, dequantize(maps.array, conv.output.type.quant)[0])
    assert maps.stats.min == maps.array.min() and maps.real_stats.max == maps.real.max()
