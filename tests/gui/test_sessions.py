"""Sessions: save the day's work as a .kiln file, close, open it again: everything is back."""

from __future__ import annotations

import json

import pytest

from app.document.sessions import read_session, save_session
from app.quant.calibrate_dialog import CalibrationRequest
from app.window.mainwindow import MainWindow
from compiler import edit
from compiler.errors import KilnError
from compiler.ir.dump import dump
from compiler.passes import Pipeline
from compiler.quant.calibrate import params_for
from compiler.quant.calibration_data import Normalization
from tests.gui.helpers import copy_sample, make_window, node_id

TIMEOUT = 120000


def _content(graph):
    """The graph's text and every constant's bytes (equal content, loaded twice)."""
    return dump(graph), {name: c.data.tobytes() for name, c in graph.constants.items()}


def _reopened(qtbot, session):
    """A new window with `session` opened and restored."""
    again = MainWindow(remember=False)
    qtbot.addWidget(again, before_close_func=lambda w: w.document.undo_stack.setClean())
    again.show()
    with qtbot.waitSignal(again.sessions.restored, timeout=TIMEOUT):
        assert again.sessions.open_session(session)
    return again


def test_a_session_brings_back_graph_pipeline_ranges_selection_and_zoom(qtbot, tmp_path):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    doc = window.document
    doc.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    pipeline = Pipeline.from_json(doc.pipeline.to_json())
    pipeline.passes[1].enabled = False
    doc.set_pipeline(pipeline)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    quant.set_range(0.0, 2.5, "relu1_out")
    qtbot.waitUntil(lambda: not quant.is_busy(), timeout=TIMEOUT)  # the table shows the range
    rows = list(quant.panel.model.rows)
    conv3 = node_id(window, "conv3")
    window.select_and_center(conv3)
    assert doc.selection == conv3  # the panel follows the canvas, not the reverse
    window.canvas.set_zoom(1.7)
    doc.set_target("cortex-m7")
    doc.set_lowering_enabled("in_place", False)  # a switched-off lowering pass is kept too
    window.memory.dock.hide()
    window.docks["minimap"].setFloating(True)
    session = save_session(window, tmp_path / "day")
    assert session.name == "day.kiln"
    saved = json.loads(session.read_text())
    assert saved["edited"]["file"].endswith(".edited.onnx")  # the edits, beside the session
    graph, overrides = _content(doc.graph), dict(quant.session.profile.overrides)
    doc.undo_stack.setClean()
    window.close()

    again = _reopened(qtbot, session)
    assert _content(again.document.graph) == graph
    assert again.document.pipeline.to_json() == pipeline.to_json()
    assert again.quant.session.profile.overrides == overrides
    conv3 = node_id(again, "conv3")  # ids are given at load: the session keeps the name
    assert again.document.selection == conv3 and again.canvas.selected_key() == conv3
    assert again.canvas.zoom_level() == pytest.approx(1.7)
    assert again.document.target == "cortex-m7"
    assert again.document.disabled_lowering == {"in_place"}
    assert again.document.options().disabled_lowering == {"in_place"}
    # The restored quantization is evaluated again: the same table, relu1_out quantized over
    # the hand-tuned [0, 2.5].
    qtbot.waitUntil(lambda: not again.quant.is_busy(), timeout=TIMEOUT)
    assert again.quant.panel.model.rows == rows
    params = params_for(0.0, 2.5, again.document.quant.session.options.schema)
    relu1 = rows[again.quant.panel.model.row_of("relu1_out")]
    assert (relu1.scale, relu1.zero_point, relu1.state) == (params.scale, params.zero_point, "")
    assert not again.memory.dock.isVisible() and again.docks["minimap"].isFloating()


def test_a_changed_or_missing_model_is_reported_with_its_hash(qtbot, tmp_path, message_boxes):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    session = save_session(window, tmp_path / "s.kiln")  # no edits: the model itself is kept
    want = json.loads(session.read_text())["model"]["sha256"]
    model.write_bytes(model.read_bytes() + b"\0")
    with pytest.raises(KilnError, match=f"changed since the session was saved .*{want}"):
        read_session(session)
    assert not window.sessions.open_session(session)
    assert message_boxes.kinds() == ["critical"] and want in message_boxes.shown[0][2]
    model.unlink()
    with pytest.raises(KilnError, match=f"is missing \\(it had SHA-256 {want}\\)"):
        read_session(session)
    (tmp_path / "bad.kiln").write_text("{not json")
    with pytest.raises(KilnError, match="is not a Kiln session"):
        read_session(tmp_path / "bad.kiln")


def test_the_file_menu_offers_sessions(qtbot):
    window = make_window(qtbot)
    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    texts = [a.text() for a in file_menu.actions()]
    assert texts.index("Open Sess&ion…") < texts.index("&Save")


def test_a_session_keeps_an_applied_points_weights(qtbot, tmp_path):
    """Per-tensor weights, layers left in float and bias corrections (what an exploration
    point applies) come back from the file: the same QDQ graph is rebuilt."""
    import numpy as np

    from app.quant.session import Weights, session_from_profile

    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    s = quant.session
    s.profile.keep_float = ["relu1_out"]
    bias = next(n for n in s.graph.nodes if n.name == "conv3").inputs[2]
    corrections = {"conv3": np.linspace(-0.01, 0.01, bias.type.shape[0])}
    applied = session_from_profile(s.graph, s.profile, s.request,
                                   weights=Weights(False, ("conv2",), corrections))
    window.document.quant.replace_session(applied, "Apply a point")
    graph = window.document.quant.quantized()
    assert dump(graph) != dump(session_from_profile(s.graph, s.profile, s.request).graph)
    wanted = dump(graph)
    session = save_session(window, tmp_path / "point")
    window.document.undo_stack.setClean()
    window.close()

    again = _reopened(qtbot, session)
    restored = again.document.quant.session
    assert not restored.options.per_channel and restored.options.float_weights == ("conv2",)
    assert np.array_equal(restored.corrections["conv3"], corrections["conv3"])
    assert dump(again.document.quant.quantized()) == wanted


def test_a_session_written_before_recipes_still_opens_with_its_weights(qtbot, tmp_path):
    """Sessions now keep the document's recipe; one of the earlier form (the profile and the
    weights' choices side by side) is still read, with the same choices."""
    from app.document.sessions import _quantization_parts
    from app.quant.screens import calibrate_now

    window = make_window(qtbot)
    calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test",
                                                   Normalization()))
    path = save_session(window, tmp_path / "new.kiln")
    doc, _ = read_session(path)
    quant = doc["quantization"]
    assert set(quant) == {"request", "recipe"}
    recipe = quant["recipe"]
    old = {"request": quant["request"], "profile": recipe["profile"], "per_channel": False,
           "float_weights": ["conv2"], "corrections": {"conv3": [0.5, -0.25]}}
    profile, request, weights = _quantization_parts(old)
    assert profile.to_json() == recipe["profile"] and request.method == recipe["method"]
    assert (weights.per_channel, weights.float_weights) == (False, ("conv2",))
    assert list(weights.corrections["conv3"]) == [0.5, -0.25]
