"""Calibration data with labels: class folders, an .npz with x and y, labels.npy beside samples.

Each labelled form must give every sample its own class (the tests shuffle nothing, so a label
off by one sample or one class shows), reach `kiln quantize --report` as an accuracy, and bad
labels must be refused in one sentence naming the file. The model input's layout, as the
Calibrate dialog states it, comes from the operators reading the input.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper
from PIL import Image

from app.cli import main
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.quant.calibration_data import input_spec, load_calibration
from compiler.quant.calibration_preview import preview_calibration
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model
from tests.quant.labelled_data import (
    WORDS,
    held_out_digits,
    write_class_folders,
    write_labels_npy,
    write_npz,
)


@pytest.fixture(scope="module")
def graph():
    return load_model(SAMPLE_MODEL)


def test_class_folders_number_the_classes_by_name(tmp_path, graph):
    expected = write_class_folders(tmp_path / "classes", names=WORDS)
    data = load_calibration(tmp_path / "classes", graph)
    assert len(data) == 40 and data.labels.dtype == np.int64
    np.testing.assert_array_equal(data.labels, expected)
    # "eight" sorts first: its digits are class 0, "zero"'s class 9.
    eights = data.labels == 0
    assert eights.sum() == (held_out_digits()[1] == 8).sum()
    assert (data.labels == 9).sum() == (held_out_digits()[1] == 0).sum()


def test_class_folders_of_images(tmp_path, graph):
    for name, value in (("bright", 255), ("dark", 0)):
        (tmp_path / "images" / name).mkdir(parents=True)
        for i in range(2):
            Image.new("L", (8, 8), value).save(tmp_path / "images" / name / f"{i}.png")
    data = load_calibration(tmp_path / "images", graph)
    assert data.samples.shape == (4, 1, 8, 8)
    np.testing.assert_array_equal(data.labels, [0, 0, 1, 1])  # bright < dark by name
    assert data.samples[:2].min() == 1.0 and data.samples[2:].max() == 0.0


def test_npz_with_x_and_y(tmp_path, graph):
    labels = write_npz(tmp_path / "d.npz")
    data = load_calibration(tmp_path / "d.npz", graph)
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_array_equal(data.samples, held_out_digits()[0])


def test_labels_npy_beside_the_samples(tmp_path, graph):
    labels = write_labels_npy(tmp_path / "flat")
    data = load_calibration(tmp_path / "flat", graph)
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_array_equal(data.samples, held_out_digits()[0])  # labels.npy is no sample


def test_whole_float_labels_are_taken(tmp_path, graph):
    images, labels = held_out_digits(10)
    np.savez(tmp_path / "f.npz", x=images, y=labels.astype(np.float32).reshape(-1, 1))
    np.testing.assert_array_equal(load_calibration(tmp_path / "f.npz", graph).labels, labels)


@pytest.mark.parametrize("labels, message", [
    (np.arange(39) % 10, r"labels.npy: 39 labels for 40 samples"),
    (np.full(40, 2.5), r"labels.npy: labels are whole class numbers, not values like 2.5"),
    (np.array(["a"] * 40), r"labels.npy: labels are whole class numbers, not <U1 values"),
    (np.full(40, 10), r"labels.npy: label 10 is not one of the model's 10 classes \(0 to 9\)"),
    (np.zeros((40, 10)), r"labels.npy: labels are one class number per sample"),
])
def test_bad_labels_npy_is_refused_naming_the_file(tmp_path, graph, labels, message):
    write_labels_npy(tmp_path / "flat")
    np.save(tmp_path / "flat" / "labels.npy", labels)
    with pytest.raises(KilnError, match=message) as error:
        load_calibration(tmp_path / "flat", graph)
    assert str(tmp_path / "flat" / "labels.npy") in str(error.value)
    assert "\n" not in str(error.value)


def test_bad_npz_labels_are_refused_naming_the_file(tmp_path, graph):
    images, labels = held_out_digits(10)
    np.savez(tmp_path / "d.npz", x=images, y=labels[:9])
    with pytest.raises(KilnError, match=r"d.npz \(array y\): 9 labels for 10 samples"):
        load_calibration(tmp_path / "d.npz", graph)
    np.savez(tmp_path / "d.npz", x=images, y=labels - 1)  # a -1 among them
    with pytest.raises(KilnError, match=r"d.npz \(array y\): label -1 is not one of"):
        load_calibration(tmp_path / "d.npz", graph)


def test_more_class_folders_than_the_model_has_classes(tmp_path, graph):
    for i in range(11):
        (tmp_path / "c" / f"k{i:02d}").mkdir(parents=True)
        np.save(tmp_path / "c" / f"k{i:02d}" / "s.npy", np.zeros((1, 8, 8), np.float32))
    with pytest.raises(KilnError, match=r"c: 11 class folders, but the model tells 10 classes"):
        load_calibration(tmp_path / "c", graph)


@pytest.mark.parametrize("form", ["classes", "npz", "labels"])
def test_every_labelled_form_reaches_the_report_as_accuracy(tmp_path, capsys, form):
    source = {"classes": lambda: tmp_path / "classes",
              "npz": lambda: tmp_path / "d.npz", "labels": lambda: tmp_path / "flat"}[form]()
    {"classes": write_class_folders, "npz": write_npz, "labels": write_labels_npy}[form](source)
    profile, out = tmp_path / "p.json", tmp_path / "q.onnx"
    assert main(["profile", str(SAMPLE_MODEL), "--data", str(source), "-o", str(profile)]) == 0
    capsys.readouterr()
    assert main(["quantize", str(SAMPLE_MODEL), "--profile", str(profile), "-o", str(out),
                 "--report", str(source), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["samples"] == 40
    # The sample CNN knows the held-out digits: a label off by a sample or a class shows.
    assert report["accuracy_float"] > 0.9 and report["accuracy_quantized"] > 0.85


def test_the_input_layout_comes_from_its_readers(tmp_path):
    assert input_spec(load_model(SAMPLE_MODEL)).layout == "NCHW"
    # tf2onnx's form: an NHWC input transposed to NCHW before the convolution. Its shape
    # [1, 3, 4, 3] alone would not tell (3 on both axes).
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w"], ["y"])]
    model = make_model(nodes, [("x", np.float32, [1, 3, 4, 3])], [("y", np.float32, None)],
                       {"w": np.ones((2, 3, 1, 1), np.float32)})
    onnx.save(model, tmp_path / "nhwc.onnx")
    graph = load_model(tmp_path / "nhwc.onnx")
    spec = input_spec(graph)
    assert (spec.layout, spec.shape, spec.dtype) == ("NHWC", (1, 3, 4, 3), "float32")
    Image.new("RGB", (3, 3), (255, 0, 0)).save(tmp_path / "red.png")
    (tmp_path / "imgs").mkdir()
    (tmp_path / "red.png").rename(tmp_path / "imgs" / "red.png")
    sample = load_calibration(tmp_path / "imgs", graph).samples[0]
    assert sample.shape == (3, 4, 3)  # height 3, width 4, channels last
    np.testing.assert_allclose(sample[..., 0], 1.0)
    np.testing.assert_allclose(sample[..., 1:], 0.0)


def test_the_preview_reads_one_sample_and_says_where_labels_are(tmp_path, graph):
    write_class_folders(tmp_path / "classes", names=WORDS)
    write_npz(tmp_path / "d.npz")
    write_labels_npy(tmp_path / "flat")
    found = {}
    for source in ("digits:train", tmp_path / "classes", tmp_path / "d.npz", tmp_path / "flat",
                   tmp_path / "flat" / "first.npy"):
        preview = preview_calibration(source, graph)
        assert preview.sample.shape == (1, 1, 8, 8) and preview.sample.dtype == np.float32
        assert preview.image().shape == (8, 8, 1) and preview.image().dtype == np.uint8
        found[str(source)] = preview.labels
    assert found[str(tmp_path / "classes")] == "10 class folders (eight, five, four, …)"
    assert found[str(tmp_path / "d.npz")] == "array y"
    assert found[str(tmp_path / "flat")] == "labels.npy"
    assert found[str(tmp_path / "flat" / "first.npy")] == ""
    text = preview_calibration(tmp_path / "flat" / "first.npy", graph).describe()
    first = held_out_digits(1)[0]
    assert text == (f"First sample: [1, 1, 8, 8] float32, min {first.min():.4g}, max "
                    f"{first.max():.4g}; no labels (no accuracy)")
    np.save(tmp_path / "zeros.npy", np.zeros((4, 1, 8, 8), np.float32))  # a blank file
    assert preview_calibration(tmp_path / "zeros.npy", graph).describe().endswith(
        "no labels (no accuracy); warning: every value is 0, so ranges calibrated on it "
        "will clip real inputs")
    np.save(tmp_path / "wrong.npy", np.zeros((5, 3, 8), np.float32))
    with pytest.raises(KilnError, match=r"wrong.npy: shape \[5, 3, 8\] fits neither"):
        preview_calibration(tmp_path / "wrong.npy", graph)
