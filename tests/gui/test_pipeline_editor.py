"""The pipeline editor: enable, disable, reorder, save and load; the controller runs the result."""

import json

from PySide6.QtCore import Qt

from compiler.passes.pipeline import default_pipeline, load_pipeline
from tests.gui.helpers import make_window
from views.pipeline_editor import PipelineEditor


def _editor(qtbot):
    editor = PipelineEditor()
    qtbot.addWidget(editor)
    editor.set_pipeline(default_pipeline())
    editor.show()
    return editor


def _names(pipeline):
    return [c.name for c in pipeline]


def test_the_editor_shows_the_pipeline_and_edits_a_copy(qtbot):
    default = default_pipeline()
    editor = _editor(qtbot)
    assert editor.list.count() == len(default)
    assert _names(editor.pipeline()) == _names(default)
    assert all(c.enabled for c in editor.pipeline())
    with qtbot.waitSignal(editor.edited):
        editor.set_enabled_at(0, False)
    edited = editor.pipeline()
    assert not edited.passes[0].enabled and edited.passes[0].name == default.passes[0].name
    assert edited.passes[0].note == default.passes[0].note
    assert len(edited.enabled()) == len(default) - 1


def test_up_and_down_reorder(qtbot):
    editor = _editor(qtbot)
    first, second = _names(editor.pipeline())[:2]
    editor.list.setCurrentRow(0)
    with qtbot.waitSignal(editor.edited):
        editor.down_button.click()
    assert _names(editor.pipeline())[:2] == [second, first]
    assert editor.list.currentRow() == 1
    editor.up_button.click()
    assert _names(editor.pipeline())[:2] == [first, second]
    editor.up_button.click()  # already first: nothing moves
    assert _names(editor.pipeline())[:2] == [first, second]


def test_fixpoint_entries_say_so(qtbot):
    editor = _editor(qtbot)
    rows = [editor.list.item(i).text() for i in range(editor.list.count())]
    modes = [c.mode for c in default_pipeline()]
    assert [("fixed point" in r) for r in rows] == [m == "fixpoint" for m in modes]


def test_save_and_load_through_the_controller(qtbot, tmp_path):
    window = make_window(qtbot)
    controller = window.stepping
    editor = controller.editor
    editor.set_enabled_at(1, False)
    editor.list.setCurrentRow(3)
    editor.move_current(-1)
    path = tmp_path / "mine.json"
    assert controller.save_pipeline_file(path)
    assert "Saved mine.json" in editor.message.text()
    saved = load_pipeline(path)
    assert _names(saved) == _names(editor.pipeline()) and not saved.passes[1].enabled

    editor.set_pipeline(default_pipeline())
    with qtbot.waitSignal(controller.resultReady, timeout=60000):
        assert controller.load_pipeline_file(path)
    assert _names(editor.pipeline()) == _names(saved)
    assert not editor.list.item(1).checkState() == Qt.CheckState.Checked
    ran = [r.name for r in controller.result.records]
    assert ran == [c.name for c in saved.enabled()] + ["prepare_for_codegen"]


def test_a_bad_pipeline_file_is_a_message_not_a_dialog(qtbot, tmp_path, message_boxes):
    window = make_window(qtbot)
    controller = window.stepping
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "kiln-pipeline", "version": 1,
                               "passes": [{"name": "no_such_pass"}]}))
    assert not controller.load_pipeline_file(bad)
    text = controller.editor.message.text()
    assert "no_such_pass" in text and "\n" not in text
    assert controller.editor.list.count() == len(default_pipeline())  # unchanged
    assert not controller.load_pipeline_file(tmp_path / "missing.json")
    assert "no such file" in controller.editor.message.text()
    assert not controller.save_pipeline_file(tmp_path / "no_dir" / "x.json")
    assert "Cannot save" in controller.editor.message.text()
    assert message_boxes.shown == []


def test_default_button_restores_the_default_pipeline(qtbot):
    window = make_window(qtbot)
    controller = window.stepping
    editor = controller.editor
    editor.set_enabled_at(0, False)
    with qtbot.waitSignal(controller.resultReady, timeout=60000):
        editor.reset_button.click()
    assert all(c.enabled for c in editor.pipeline())
    assert len(controller.result.records) == len(default_pipeline().enabled()) + 1  # + prepare
