"""Pass stepping on a real model: stages with diff colours, hiding, provenance, rerunning."""

import pytest
from PySide6.QtCore import Qt

from app.inspect import stepping
from compiler.driver import Compilation
from tests.conftest import shared_models
from tests.gui.helpers import make_window, open_and_wait


def _window_with_result(qtbot, name="pretrainedResnet"):
    """A window with `name` open and its pipeline run (the run starts on its own)."""
    window = make_window(qtbot, None)
    controller = window.stepping
    # The lowering passes follow the graph stages in the panel once planned.
    with qtbot.waitSignals([controller.resultReady, window.lowering.recordsReady],
                           timeout=120000):
        open_and_wait(qtbot, window, shared_models() / "onnx" / f"{name}.onnx")
    return window, controller


@pytest.fixture
def resnet(qtbot):
    return _window_with_result(qtbot)


def _expected_diff(record):
    want = {i: "added" for i in record.added}
    want.update({i: "modified" for i in record.modified})
    want.update({i: "removed" for i in record.removed})
    return want


def test_run_fills_the_panel(resnet):
    window, controller = resnet
    result = controller.result
    assert result is not None and result.initial.nodes and result.records
    rows = controller.panel.rows()
    assert len(rows) == len(result.records) + 1 and rows[0].name == "loaded"
    assert [r.name for r in rows[1:]] == [r.name for r in result.records]
    table = controller.panel.table
    fuse = next(i for i, r in enumerate(result.records, 1) if r.name == "fuse_activations")
    item = table.topLevelItem(fuse)
    assert item.text(2) == f"+{len(result.records[fuse - 1].added)}"
    assert item.text(6).startswith("✓")  # small model: verified after every pass
    assert "verified after every pass" in controller.panel.status.text()
    assert controller.index is None and window.canvas.isVisible()


def test_stepping_through_every_stage_shows_each_pass_diff(qtbot, resnet):
    window, controller = resnet
    records = controller.result.records
    with qtbot.waitSignal(controller.stageChanged) as blocker:
        controller.next_action.trigger()
    assert blocker.args == [0]
    assert controller.view.isVisible() and not window.canvas.isVisible()
    assert "read-only" in controller.banner.text() and "Esc" in controller.banner.text()
    assert controller.canvas.diff_state() == {}
    seen = [0]
    while controller.index < len(records) and controller.step(1):
        index = controller.index
        seen.append(index)
        record = records[index - 1]
        assert controller.canvas.diff_state() == _expected_diff(record), record.name
        assert controller.canvas.graph() is record.snapshot
        assert f"stage {index}/{len(records)}: {record.name}" in controller.banner.text()
        assert record.name in controller.panel.doc.toPlainText()
        assert controller.canvas.faded() == controller.stages[index].placed.dead
    assert seen == list(range(len(records) + 1))
    # After the last graph stage come the lowering passes, in their own view.
    assert controller.step(1) and controller.index == len(records) + 1
    assert window.lowering.view.isVisible() and not controller.view.isVisible()
    assert "Lowering pass 1/" in window.lowering.view.banner.text()
    controller.prev_action.trigger()
    assert controller.view.isVisible() and not window.lowering.view.isVisible()
    # The passes that matter were really checked: a fusion adds, the final dce removes.
    fuse = next(r for r in records if r.name == "fuse_activations")
    dce = max(i for i, r in enumerate(records) if r.name == "dce")
    assert fuse.added and fuse.modified and records[dce].removed
    # What the fusion replaced is faded until that dce removes it.
    assert controller.stages[dce].placed.dead == set(records[dce].removed)
    assert records[-1].name == "prepare_for_codegen"  # the driver's stage, shown last
    assert window.canvas.selected_key() is None  # no edit can act on the hidden canvas
    controller.prev_action.trigger()
    assert controller.index == len(records) - 1
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    qtbot.keyClick(controller.canvas, Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    assert controller.index == len(records) - 2
    qtbot.keyClick(controller.canvas, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)
    assert controller.index == len(records) - 1
    qtbot.keyClick(controller.canvas, Qt.Key.Key_Escape)
    assert controller.index is None and window.canvas.isVisible()
    assert not controller.view.isVisible()


def test_a_pass_that_only_modifies_keeps_every_box_in_place(resnet):
    _, controller = resnet
    records = controller.result.records
    index = next(i for i, r in enumerate(records, 1) if r.changed and not r.added)
    controller.show_stage(index - 1)
    before = {k: controller.canvas.box_rect(k) for k in controller.canvas.graph_layout().boxes}
    controller.show_stage(index)
    for key, rect in before.items():
        after = controller.canvas.box_rect(key)
        if after is not None:
            assert after.center().x() == pytest.approx(rect.center().x(), abs=1.0), key


def test_hide_unchanged_steps_over_passes_that_did_nothing(resnet):
    _, controller = resnet
    records = controller.result.records
    changed = [i for i, r in enumerate(records, 1) if r.changed]
    assert len(changed) < len(records)
    panel = controller.panel
    panel.hide_unchanged.setChecked(True)
    lowering = list(range(len(records) + 1, len(records) + 1 + len(panel.lowering_rows())))
    assert lowering, "the lowering passes are listed after the stages"
    assert panel.visible() == [0] + changed + lowering  # (a lowering row keeps its switch)
    assert all(panel.table.topLevelItem(i).isHidden() for i in range(1, len(records) + 1)
               if i not in changed)
    controller.show_stage(0)
    visited = []
    while controller.step(1) and controller.index <= len(records):
        visited.append(controller.index)
    assert visited == changed
    panel.hide_unchanged.setChecked(False)
    assert panel.visible() == list(range(len(records) + 1)) + lowering


def test_provenance_highlights_sources_and_results(qtbot, resnet):
    _, controller = resnet
    last = len(controller.stages) - 1
    final = controller.stages[last].graph
    fused = next(n for n in final.nodes if len(n.provenance) > 1)
    controller.show_stage(last)
    controller.select_on_stage(fused.id)
    assert fused.id in controller.canvas.related()
    assert "show on the loaded stage" in controller.panel.provenance.text()
    controller.panel.provenance.linkActivated.emit("sources")  # the link in the panel
    assert controller.index == 0
    assert controller.canvas.related() == set(fused.provenance)
    # The reverse: a loaded node lights up what it became in the final graph.
    source = fused.provenance[-1]
    controller.select_on_stage(source)
    controller.panel.provenance.linkActivated.emit("final")
    assert controller.index == last
    became = controller.canvas.related()
    assert fused.id in became
    assert became == {n.id for n in final.nodes if source in n.provenance}
    controller.select_on_stage(None)
    assert controller.canvas.related() == set()


def test_play_steps_to_the_end_and_stops(qtbot, resnet):
    window, controller = resnet
    controller._play_timer.setInterval(5)
    controller.panel.play_button.click()
    # The graph stages, then the lowering passes: the last lowering pass ends the play.
    last = len(controller.stages) - 1 + len(controller.panel.lowering_rows())
    qtbot.waitUntil(lambda: not controller.panel.play_button.isChecked(), timeout=20000)
    assert controller.index == last and window.lowering.view.isVisible()


def test_disabling_a_pass_and_rerunning_changes_the_record(qtbot, resnet):
    _, controller = resnet
    before = controller.result
    editor = controller.editor
    rows = [editor.list.item(i).data(Qt.ItemDataRole.UserRole).name
            for i in range(editor.list.count())]
    editor.set_enabled_at(rows.index("fuse_activations"), False)
    controller.show_stage(3)
    with qtbot.waitSignal(controller.resultReady, timeout=120000):
        editor.run_button.click()
    after = controller.result
    assert after is not before
    assert "fuse_activations" in [r.name for r in before.records]
    assert "fuse_activations" not in [r.name for r in after.records]
    assert len(after.records) == len(before.records) - 1
    assert len(after.graph.nodes) > len(before.graph.nodes)  # Relus are no longer fused
    assert len(controller.panel.rows()) == len(after.records) + 1
    assert controller.index == 3  # the stage view follows the new run


def test_editing_the_model_leaves_the_stage_view_and_runs_again(qtbot, resnet):
    window, controller = resnet
    controller.show_stage(2)
    node = next(n for n in window.document.graph.nodes if n.op == "Relu")
    with qtbot.waitSignal(controller.resultReady, timeout=120000):
        window.editing.rename_node(node.id, "renamed_relu")
    assert controller.index is None and window.canvas.isVisible()
    assert any(n.name == "renamed_relu" for n in controller.result.initial.nodes)


def test_a_failing_run_is_one_line_in_the_panel(qtbot, resnet, monkeypatch):
    _, controller = resnet

    def broken(*_args, **_kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(Compilation, "passes", broken)
    with qtbot.waitSignal(controller.runFailed, timeout=60000) as blocker:
        controller.run()
    assert "boom" in blocker.args[0] and "\n" not in blocker.args[0]
    assert "Pipeline failed" in controller.panel.status.text()
    assert controller.panel.run_button.isEnabled()


def test_screenshots_show_a_fusion_stage(qtbot, resnet):
    window, controller = resnet
    saved = []
    stepping.screenshots(window, lambda widget, name: saved.append(
        (name, widget.grab().width())))
    assert [name for name, _ in saved] == ["passes.png", "stage_diff.png",
                                           "pipeline_editor.png"]
    assert all(width > 100 for _, width in saved)
    assert controller.index is None  # back to the model afterwards


def test_big_models_run_without_verify_and_say_so(qtbot, monkeypatch):
    monkeypatch.setattr(stepping, "VERIFY_MACS", 1000)
    window, controller = _window_with_result(qtbot, "kws_ref_model_float32")
    assert not controller.run_info.verify
    assert all(r.matches is None for r in controller.result.records)
    assert "not verified" in controller.panel.status.text()
    assert controller.panel.table.topLevelItem(1).text(6) == ""


def test_the_stage_view_opens_where_the_document_view_was(qtbot, resnet):
    window, controller = resnet
    node = next(n for n in window.document.graph.nodes if n.op == "Add")
    window.select_and_center(node.id)
    zoom = window.canvas.zoom_level()
    centre = window.canvas.box_rect(node.id).center()
    controller.show_stage(0)
    qtbot.wait(10)
    assert controller.canvas.zoom_level() == pytest.approx(zoom)
    seen = controller.canvas.visible_scene_rect()
    assert seen.contains(controller.canvas.box_rect(node.id).center())
    # The node is where it was on screen (the document folds residual blocks into groups, so
    # the two canvases place it differently in their scenes).
    # Measured from the middle of each view (the stage's view has a banner above it).
    stage_view, document_view = controller.canvas, window.canvas
    on_screen = stage_view.mapFromScene(stage_view.box_rect(node.id).center()) \
        - stage_view.viewport().rect().center()
    before = document_view.mapFromScene(centre) - document_view.viewport().rect().center()
    assert abs(on_screen.y() - before.y()) <= 2
    bar = stage_view.horizontalScrollBar()  # unless the stage's scene ends before the view
    assert abs(on_screen.x() - before.x()) <= 2 or bar.value() in (bar.minimum(), bar.maximum())


def test_the_user_can_switch_verification_off(qtbot, resnet):
    _, controller = resnet
    box = controller.panel.verify_box
    assert box.isChecked() and controller.run_info.verify
    with qtbot.waitSignal(controller.resultReady, timeout=60000):
        box.click()
    assert not controller.run_info.verify and not box.isChecked()
    table = controller.panel.table
    assert all(table.topLevelItem(i).text(6) == "" for i in range(table.topLevelItemCount()))
    assert "switched off" in controller.panel.status.text()
