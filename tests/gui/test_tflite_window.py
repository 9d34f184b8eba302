"""A .tflite model in the window: the canvas names its builtins, Properties their options, and
saving writes ONNX beside it, never into the .tflite."""

import numpy as np

from compiler.frontends.load import load_model
from compiler.interpreter import run
from tests.gui.helpers import make_window, node_id
from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, T, write


def _tflite(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (4, 3, 3, 2))
    model = Model([quantized("x", (1, 6, 6, 2), 0.05, 1),
                   T("w", (4, 3, 3, 2), "int8", w, scale=[0.01] * 4, zero_point=[0] * 4),
                   quantized("y", (1, 6, 6, 4), 0.1, -3)],
                  [Op("CONV_2D", [0, 1, -1], [2], ("Conv2DOptions", {
                      "StrideH": 1, "StrideW": 1, "FusedActivationFunction": 3}))], [0], [2])
    path = tmp_path / "conv.tflite"
    path.write_bytes(write(model))
    return path


def test_the_canvas_and_properties_show_the_tflite_builtin(qtbot, tmp_path, message_boxes):
    path = _tflite(tmp_path)
    window = make_window(qtbot, path)
    conv = node_id(window, "CONV_2D_0")
    box = window.canvas._boxes[conv]
    assert box.label.title == "QLinearConv"
    assert box.label.lines[0] == "CONV_2D #0 +RELU6"
    window.select_and_center(conv)
    provenance = window.properties.info_labels["Provenance"].text()
    assert "CONV_2D #0" in provenance and "Padding SAME" in provenance


def test_saving_a_tflite_model_writes_onnx_beside_it(qtbot, tmp_path, message_boxes):
    path = _tflite(tmp_path)
    before = path.read_bytes()
    window = make_window(qtbot, path)
    assert window.save_as(tmp_path / "conv.tflite") is True  # asked for .tflite: gets .onnx
    assert path.read_bytes() == before
    saved = tmp_path / "conv.onnx"
    graph = load_model(saved)
    assert graph.metadata["requant"] == "tflite"
    x = np.random.default_rng(1).integers(-128, 128, (1, 6, 6, 2)).astype(np.int8)
    want = run(window.document.graph, {"x": x})
    assert np.array_equal(run(graph, {"x": x})["y"], want["y"])
    assert not message_boxes.shown
