"""The quantization is the document's state: its commands, its signal, its calibration graph.

No Quantization dock takes part in the first two tests: a bare `Document` holds the calibrated
session, its range and Keep float edits are undo steps on it, and `edited` says which tensor
changed. The calibration graph is computed once per graph the history holds, never again on a
range drag.
"""

from __future__ import annotations

import pytest

from app.document.document import Document
from app.quant import state as quant_state
from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.session import session_from_profile
from compiler import edit
from compiler.frontends.load import load_model
from compiler.quant.calibration_data import Normalization, load_calibration
from compiler.quant.profiler import profile_model
from tests.conftest import SAMPLE_MODEL
from tests.gui.helpers import click_row, drag, make_window

TIMEOUT = 120000
DIGITS = CalibrationRequest("digits:train", "digits:test", Normalization())


@pytest.fixture(scope="module")
def measured():
    """(graph, profile) of the sample CNN profiled on the digits (once for the module)."""
    graph = load_model(SAMPLE_MODEL)
    return graph, profile_model(graph, load_calibration("digits:train", graph), bins=256)


def _calibrated_document(qtbot, measured) -> Document:
    graph, profile = measured
    document = Document()
    document.load(graph, SAMPLE_MODEL)
    with qtbot.waitSignal(document.quant.sessionChanged) as changed:
        document.quant.set_session(session_from_profile(graph, profile, DIGITS), measured=True)
    assert changed.args == [True]
    return document


def test_ranges_and_keep_float_are_undo_steps_on_the_document(qtbot, measured):
    document = _calibrated_document(qtbot, measured)
    state, stack = document.quant, document.undo_stack
    profile = state.session.profile
    with qtbot.waitSignal(state.edited) as edited:
        assert state.set_range("relu1_out", 0.0, 2.5)
    assert edited.args == ["relu1_out"] and stack.undoText() == "Range of relu1_out"
    assert profile.overrides == {"relu1_out": {"min": 0.0, "max": 2.5}}
    assert not state.set_range("relu1_out", 0.0, 2.5)  # no change: no step
    assert not state.set_range("relu1_out", 3.0, 1.0)  # empty: refused
    assert state.keep_float("pool1_out", True) and profile.keep_float == ["pool1_out"]
    assert stack.count() == 2 and document.is_dirty()
    stack.undo()
    assert profile.keep_float == [] and profile.overrides == {"relu1_out": {"min": 0.0,
                                                                           "max": 2.5}}
    with qtbot.waitSignal(state.edited) as edited:
        stack.undo()
    assert edited.args == ["relu1_out"] and profile.overrides == {}
    assert not document.is_dirty()
    stack.redo()
    assert profile.overrides == {"relu1_out": {"min": 0.0, "max": 2.5}}
    # What export and sessions read: the document's quantized graph, with the hand edit.
    recipe = state.recipe()
    assert recipe.profile.overrides == profile.overrides and recipe.profile is not profile
    assert (recipe.method, recipe.schema) == ("minmax", "tflite") and state.quantized().nodes
    stack.undo()  # a later edit leaves the recipe taken before it as it was
    assert profile.overrides == {} and recipe.profile.overrides["relu1_out"]["max"] == 2.5


def test_another_model_drops_the_session(qtbot, measured):
    document = _calibrated_document(qtbot, measured)
    with qtbot.waitSignal(document.quant.sessionChanged) as changed:
        document.load(load_model(SAMPLE_MODEL), SAMPLE_MODEL)
    assert changed.args == [False]
    assert document.quant.session is None and document.quant.quantized() is None


def test_the_calibration_graph_is_kept_per_graph(qtbot, monkeypatch, measured):
    calls = []
    real = quant_state.calibration_graph
    monkeypatch.setattr(quant_state, "calibration_graph",
                        lambda graph, equalized=False: calls.append(graph) or
                        real(graph, equalized))
    document = _calibrated_document(qtbot, measured)
    state, first = document.quant, document.graph
    base = state.calibration_graph(first)
    assert state.calibration_graph(first) is base and calls == [first]
    node = next(n for n in first.nodes if n.name == "conv2")
    document.apply(edit.rename_node, "Rename", node.id, "conv_two")  # an edit: a new graph
    edited = state.calibration_graph(document.graph)
    assert edited is not base and calls == [first, document.graph]
    document.undo_stack.undo()  # the first graph again: its calibration graph is still known
    assert state.calibration_graph(document.graph) is base and len(calls) == 2


def test_calibrating_and_dragging_compute_the_calibration_graph_once(qtbot, monkeypatch):
    calls = []
    real = quant_state.calibration_graph
    monkeypatch.setattr(quant_state, "calibration_graph",
                        lambda graph, equalized=False: calls.append(graph) or
                        real(graph, equalized))
    window = make_window(qtbot)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(DIGITS)
    click_row(qtbot, quant.panel, "relu2_out")
    view = quant.panel.histogram
    for fraction in (0.6, 0.3):  # two drags of the top handle
        with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
            drag(qtbot, view, view.x_of(view.high), view.x_of(view.high * fraction))
    assert window.document.undo_stack.count() == 2
    assert calls == [window.document.graph]  # once, for the session; not per drag
