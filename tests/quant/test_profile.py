"""Profiling float models on calibration data: `kiln profile`, the profile file, its checks.

Ranges come from the compiled float code and must equal what the interpreter computes for the
same tensors on the same samples; the file round-trips, takes hand edits, and refuses another
graph or a malformed document in one clear line.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper

from app.cli import main
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.interpreter import run
from compiler.quant.binning import BufferHistograms, CompiledHistogram
from compiler.quant.calibration_data import Normalization, load_calibration
from compiler.quant.histogram import Histogram
from compiler.quant.profile import load_profile
from compiler.quant.profiler import Cancelled, calibration_graph, instrumented, profile_model
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model


def test_the_histogram_grows_as_glow_grows_it():
    hist = Histogram.empty(4)
    hist.add(np.array([0.0, 1.0, 2.0, 3.0, 4.0]))
    assert (hist.low, hist.high) == (0.0, 4.0) and list(hist.counts) == [1, 1, 1, 2]
    hist.add(np.array([-4.0, 8.0]))  # the range grows to [-4, 8]: bins of width 3
    assert (hist.low, hist.high) == (-4.0, 8.0)
    # Old bins [0,1) [1,2) start in new bin 1 ([-1, 2)), [2,3) [3,4] in bin 2 ([2, 5)), each
    # wholly inside its new bin: [0, 2, 3, 0]; then -4 and 8 land in the first and last bins.
    assert hist.counts.sum() == 7 and list(hist.counts) == [1, 2, 3, 1]
    split = Histogram(0.0, 4.0, np.array([4, 0]))
    split.add(np.array([-1.0]))  # to [-1, 4]: old bin [0, 2) straddles new bins [-1, 1.5) and
    assert list(split.counts) == [4, 1]  # [1.5, 4): 3 of its 4 stay (0.75), 1 moves; -1 joins
    with pytest.raises(KilnError, match="NaN or infinity"):
        hist.add(np.array([np.nan]), "t")


def test_ranges_are_those_of_the_interpreter_on_the_same_samples():
    graph = load_model(SAMPLE_MODEL)
    data = load_calibration("digits:test", graph)
    profile = profile_model(graph, data, "digits_cnn.onnx")
    probe = instrumented(calibration_graph(graph))
    seen: dict[str, list[np.ndarray]] = {}
    for feeds in data.feeds(0, len(data)):
        values = {**feeds, **run(probe, feeds)}
        for name in profile.tensors:
            seen.setdefault(name, []).append(values[name].reshape(-1))
    for name, entry in profile.tensors.items():
        values = np.concatenate(seen[name])
        assert entry.min == pytest.approx(float(values.min()), rel=1e-5, abs=1e-6), name
        assert entry.max == pytest.approx(float(values.max()), rel=1e-5, abs=1e-6), name
        assert sum(entry.histogram) == values.size
    assert profile.data == {"source": "digits:test", "samples": 450}


def test_the_profile_file_round_trips_and_takes_hand_edits(tmp_path, capsys):
    path = tmp_path / "p.json"
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:train", "-o", str(path),
                 "--bins", "16"]) == 0
    assert "1,347 samples of digits:train" in capsys.readouterr().out
    profile = load_profile(path)
    doc = json.loads(path.read_text())
    assert list(doc) == sorted(doc) and doc["schema"] == "kiln-profile-1"
    assert all(len(t["histogram"]) == 16 for t in doc["tensors"].values())
    name, entry = next((n, e) for n, e in sorted(profile.tensors.items()) if e.max > 0)
    doc["overrides"] = {name: {"max": entry.max / 2}}
    path.write_text(json.dumps(doc))
    edited = load_profile(path)
    assert edited.range_of(name) == (entry.min, entry.max / 2)
    assert all(edited.range_of(n) == profile.range_of(n) for n in profile.tensors if n != name)
    profile.check_graph(calibration_graph(load_model(SAMPLE_MODEL)))  # its own graph: fine


def test_a_profile_of_another_graph_is_refused(tmp_path):
    path = tmp_path / "p.json"
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:test", "-o", str(path)]) == 0
    model = onnx.load(SAMPLE_MODEL)
    weights = model.graph.initializer[0]
    array = onnx.numpy_helper.to_array(weights).copy()
    array.flat[0] += 1.0  # the same structure, other weights
    weights.CopyFrom(onnx.numpy_helper.from_array(array, weights.name))
    other = load_model(model.SerializeToString(), label="other.onnx")
    with pytest.raises(KilnError, match="measured on another graph") as caught:
        load_profile(path).check_graph(calibration_graph(other), str(path))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("content,message", [
    ("{not json", "not a JSON profile"),
    ("[]", "must hold a JSON object"),
    ('{"schema": "other"}', "schema 'other'"),
    ('{"schema": "kiln-profile-1", "graph_hash": "x", "bins": 2, "tensors": {"t": '
     '{"min": 1, "max": 0, "histogram": [0, 0]}}}', "min 1.0 above max 0.0"),
    ('{"schema": "kiln-profile-1", "graph_hash": "x", "bins": 2, "tensors": {"t": '
     '{"min": 0, "max": "big", "histogram": [0, 0]}}}', "must be a finite number"),
    ('{"schema": "kiln-profile-1", "graph_hash": "x", "bins": 2, "tensors": {}, '
     '"overrides": {"u": {"max": 1}}}', "does not have"),
    ('{"schema": "kiln-profile-1", "graph_hash": "x", "bins": 2, "tensors": {}}', None),
])
def test_a_malformed_profile_is_one_clear_line(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    if message is None:
        assert load_profile(path).tensors == {}
        return
    with pytest.raises(KilnError, match=message) as caught:
        load_profile(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def _image_model():
    """A 3-channel NCHW input, one conv: for image folders."""
    rng = np.random.default_rng(0)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    return make_model([node], [("x", np.float32, [1, 3, 6, 5])], [("y", np.float32, None)],
                      {"w": rng.standard_normal((2, 3, 3, 3)).astype(np.float32)})


def test_calibration_sources_and_their_errors(tmp_path):
    from PIL import Image

    path = tmp_path / "m.onnx"
    onnx.save(_image_model(), path)
    graph = load_model(path)
    images = tmp_path / "images"
    images.mkdir()
    Image.new("RGB", (10, 12), (255, 0, 51)).save(images / "a.png")
    Image.new("RGB", (5, 6), (0, 255, 0)).save(images / "b.jpg", quality=100)
    data = load_calibration(images, graph, Normalization(1 / 255, (0.5,), (0.5,)))
    assert data.samples.shape == (2, 3, 6, 5)
    assert np.allclose(data.samples[0, :, 0, 0], [1.0, -1.0, 51 / 255 * 2 - 1], atol=1e-6)
    stack = np.zeros((4, 1, 3, 6, 5), np.float32)
    np.savez(tmp_path / "d.npz", a=stack[:, 0], b=stack[0])
    assert len(load_calibration(tmp_path / "d.npz", graph)) == 5
    np.save(tmp_path / "bad.npy", np.zeros((3, 5, 6), np.float32))
    with pytest.raises(KilnError, match=r"bad.npy: shape \[3, 5, 6\] fits neither"):
        load_calibration(tmp_path / "bad.npy", graph)
    with pytest.raises(KilnError, match="no such file"):
        load_calibration(tmp_path / "missing", graph)
    (tmp_path / "empty").mkdir()
    with pytest.raises(KilnError, match="no .npy file and no image"):
        load_calibration(tmp_path / "empty", graph)
    (images / "c.png").write_bytes(b"not an image")
    with pytest.raises(KilnError, match="c.png: not a readable image"):
        load_calibration(images, graph)


def test_profiling_reports_progress_and_stops_when_cancelled():
    graph = load_model(SAMPLE_MODEL)
    data = load_calibration("digits:test", graph)
    seen = []
    profile_model(graph, data, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (450, 450) and len(seen) == 8  # batches of 64
    with pytest.raises(Cancelled):
        profile_model(graph, data, cancelled=lambda: True)


def test_glow_yaml_profiles_round_trip_and_are_checked(tmp_path, capsys):
    from compiler.quant.glow_yaml import read_profile

    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:test", "-o",
                 str(tmp_path / "p.json"), "--bins", "8"]) == 0
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:test", "-o",
                 str(tmp_path / "p.yaml"), "--bins", "8"]) == 0
    capsys.readouterr()
    ours, glow = read_profile(tmp_path / "p.json"), read_profile(tmp_path / "p.yaml")
    assert sorted(ours.tensors) == sorted(glow.tensors)
    for name, entry in ours.tensors.items():  # every decimal survives the text
        assert (glow.tensors[name].min, glow.tensors[name].max) == (entry.min, entry.max)
        assert glow.tensors[name].histogram == entry.histogram
    glow.check_graph(calibration_graph(load_model(SAMPLE_MODEL)))
    text = (tmp_path / "p.yaml").read_text().splitlines()
    text = [("GraphPreLowerHash: 0x00000000000012AB" if line.startswith("GraphPreLowerHash")
             else line) for line in text]
    (tmp_path / "other.yaml").write_text("\n".join(text) + "\n")
    with pytest.raises(KilnError, match="measured on another graph"):
        read_profile(tmp_path / "other.yaml").check_graph(
            calibration_graph(load_model(SAMPLE_MODEL)))
    # Glow writes a histogram as a block sequence of floats: read as well.
    (tmp_path / "block.yaml").write_text(
        "---\nGlowToolsVersion: ''\n...\n---\nGraphPreLowerHash: 0x1\n...\n---\n"
        "- NodeOutputName:  'x'\n  Min:             -1.5\n  Max:             2.0\n"
        "  Histogram:\n    - 1.0\n    - 2.0\n...\n")
    block = read_profile(tmp_path / "block.yaml")
    assert block.tensors["x"].histogram == [1, 2] and block.tensors["x"].min == -1.5
    (tmp_path / "bad.yaml").write_text("---\n- [unclosed\n")
    with pytest.raises(KilnError, match="bad.yaml: not a YAML profile"):
        read_profile(tmp_path / "bad.yaml")
    (tmp_path / "short.yaml").write_text("---\nGlowToolsVersion: ''\n")
    with pytest.raises(KilnError, match="expected three documents"):
        read_profile(tmp_path / "short.yaml")


@pytest.mark.parametrize("bins", [1, 3, 10, 12, 13, 512])
def test_the_compiled_histogram_counts_as_the_numpy_one(bins):
    """Same batches, same ranges and counts: the vector-counter path (few bins), the scatter
    path (many), growth, empty and constant batches."""
    rng = np.random.default_rng(bins)
    for _ in range(10):
        reference, compiled = Histogram.empty(bins), CompiledHistogram("t", bins)
        for _ in range(25):
            size = int(rng.integers(0, 300))
            values = (rng.standard_normal(size) * rng.uniform(0.1, 5)
                      + rng.uniform(-3, 3)).astype(np.float32)
            if rng.random() < 0.1:
                values[:] = 1.5
            reference.add(values)
            compiled.add(values)
        merged = compiled.histogram()
        assert (merged.low, merged.high) == (reference.low, reference.high)
        assert merged.counts.tolist() == reference.counts.tolist()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_the_compiled_histogram_refuses_nan_and_infinity(bad):
    values = np.linspace(-1, 1, 101, dtype=np.float32)
    values[57] = bad
    with pytest.raises(KilnError, match="'conv1' holds NaN or infinity"):
        CompiledHistogram("conv1", 10).add(values)


@pytest.mark.parametrize("bins", [10, 2048])
def test_rows_of_buffers_bin_as_one_buffer_at_a_time(bins):
    """kiln_bin_rows over fixed buffers equals kiln_bin per buffer, growth and all; a NaN in
    a later buffer names its tensor."""
    rng = np.random.default_rng(bins)
    buffers = [np.zeros(int(rng.integers(1, 400)), np.float32) for _ in range(7)]
    one = [CompiledHistogram(f"t{i}", bins) for i in range(len(buffers))]
    rows = BufferHistograms([(CompiledHistogram(f"t{i}", bins), b.ctypes.data, b.size)
                             for i, b in enumerate(buffers)])
    for _ in range(30):
        for b in buffers:
            b[:] = rng.standard_normal(b.size) * rng.uniform(0.1, 5) + rng.uniform(-3, 3)
        rows.add()
        for h, b in zip(one, buffers):
            h.add_buffer(b.ctypes.data, b.size)
    for h, r in zip(one, rows.histograms):
        a, b = h.histogram(), r.histogram()
        assert (a.low, a.high) == (b.low, b.high) and a.counts.tolist() == b.counts.tolist()
    buffers[4][3] = np.nan
    with pytest.raises(KilnError, match="'t4' holds NaN or infinity"):
        rows.add()


def _grown_bin_by_bin(hist: Histogram, low: float, high: float) -> list[int]:
    """Glow's `generateTensorHistogram` rebinning, one old bin at a time, as a reference."""
    bins = len(hist.counts)
    old_width, new_width = (hist.high - hist.low) / bins, (high - low) / bins
    grown = [0] * bins
    for i, count in enumerate(int(c) for c in hist.counts):
        if not count:
            continue
        start = hist.low + i * old_width
        dest = min(int((start - low) / new_width), bins - 1) if new_width else 0
        dest_end = low + (dest + 1) * new_width
        kept = int(round(count * (dest_end - start) / old_width)) if old_width else count
        kept = max(0, min(count, kept))
        grown[dest] += kept
        grown[min(dest + 1, bins - 1)] += count - kept
    return grown


@pytest.mark.parametrize("seed", range(40))
def test_growing_all_bins_at_once_equals_glow_bin_by_bin(seed):
    """The vectorized rebinning moves every count where Glow's loop moves it: ranges grown on
    one side, both sides, by a hair or a thousandfold, zero-width old ranges, many bins."""
    rng = np.random.default_rng(seed)
    bins = int(rng.choice([1, 2, 7, 10, 256, 2048]))
    low = float(rng.normal() * 10.0 ** rng.integers(-3, 4))
    high = low if seed % 9 == 0 else low + float(rng.exponential() * 10.0 ** rng.integers(-3, 4))
    counts = rng.integers(0, 1000, bins) * (rng.random(bins) < 0.7)
    hist = Histogram(low, high, counts.astype(np.int64))
    grow_low = low - float(rng.exponential() * 10.0 ** rng.integers(-6, 4)) * (seed % 3 != 1)
    grow_high = high + float(rng.exponential() * 10.0 ** rng.integers(-6, 4)) * (seed % 3 != 2)
    want = _grown_bin_by_bin(hist, grow_low, grow_high)
    hist.grow(grow_low, grow_high)
    assert hist.counts.tolist() == want and hist.counts.sum() == counts.sum()
    assert (hist.low, hist.high) == (grow_low, grow_high)
