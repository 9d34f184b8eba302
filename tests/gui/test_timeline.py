"""The memory timeline dock: the same plan as `kiln memory --json`, synced with the canvas."""

import json

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from app import cli
from compiler import edit
from compiler.frontends.onnx import load_onnx
from compiler.memory.report import plan_memory
from compiler.memory.strategies import STRATEGIES, arena_size
from compiler.passes.runner import run_pipeline
from tests.conftest import SAMPLE_MODEL, shared_models
from tests.gui.helpers import make_window, node_id, open_and_wait
from views.timeline import MemoryTimeline, _nice_step, kib

KEYS = ("name", "node", "size", "offset", "first", "last")


def _model(which: str):
    if which == "sample":
        return SAMPLE_MODEL
    return shared_models() / "onnx" / f"{which}.onnx"


def _wait_plan(qtbot, window, io_in_arena=False):
    """Wait until the panel shows the plan of the document's current graph."""
    memory = window.memory

    def ready():
        current = memory.current
        return (not memory.is_busy() and current is not None
                and current.graph is window.document.graph
                and current.options.io_in_arena == io_in_arena)
    qtbot.waitUntil(ready, timeout=60000)
    return memory.current


def _shown(window):
    return [{"name": b.name, "node": b.node, "size": b.size, "offset": b.offset,
             "first": b.first, "last": b.last} for b in window.memory.timeline.bars]


def _by_name(rows):
    return sorted(({k: r[k] for k in KEYS} for r in rows), key=lambda r: r["name"])


@pytest.mark.parametrize("which", ["sample", "pretrainedResnet"])
def test_timeline_matches_kiln_memory_json(qtbot, capsys, which):
    model = _model(which)
    window = make_window(qtbot, model)
    planned = _wait_plan(qtbot, window)
    expected = plan_memory(run_pipeline(load_onnx(model), snapshots=False).graph).to_json()
    assert cli.main(["memory", str(model), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert _by_name(_shown(window)) == _by_name(expected["buffers"]) \
        == _by_name(printed["buffers"])
    timeline = window.memory.timeline
    assert timeline.live == printed["live_bytes"] == expected["live_bytes"]
    assert timeline.arena == printed["activations"] and \
        timeline.lower_bound == printed["lower_bound"]
    assert planned.doc["strategies"] == printed["strategies"]
    # The kept strategy is selected, and the selector names every strategy with its size.
    combo = window.memory.panel.strategy
    assert combo.count() == len(printed["strategies"])
    kept = combo.currentText()
    assert "(kept)" in kept and kib(printed["activations"]) in kept
    # Rectangles sit where the plan says: a buffer's top edge at a higher offset is higher up.
    bars = sorted(timeline.bars, key=lambda b: b.offset)
    low, high = bars[0], bars[-1]
    assert timeline.bar_rect(low).bottom() >= timeline.bar_rect(high).bottom()
    assert timeline.bar_rect(high).bottom() < timeline.bar_rect(low).bottom() or \
        high.offset == low.offset
    assert timeline.peak_step() == printed["live_bytes"].index(max(printed["live_bytes"]))
    assert "Arena" in window.memory.panel.summary.text()


def _provenance(window, buffer_name):
    """The loaded graph's node ids behind a buffer (through the final graph's provenance)."""
    final = run_pipeline(window.document.graph, snapshots=False).graph
    node = next(b["node"] for b in window.memory.current.doc["buffers"]
                if b["name"] == buffer_name)
    return next(n for n in final.nodes if n.name == node)


def test_selection_syncs_both_ways(qtbot):
    window = make_window(qtbot)
    _wait_plan(qtbot, window)
    timeline = window.memory.timeline
    # Click the rectangle of the buffer conv2 (fused with relu2) writes.
    conv2 = node_id(window, "conv2")
    bar = next(b for b in timeline.bars
               if conv2 in _provenance(window, b.name).provenance)
    assert bar.op == "Conv"
    timeline.resize(900, 300)
    centre = timeline.bar_rect(bar).center().toPoint()
    with qtbot.waitSignal(timeline.bufferSelected) as blocker:
        qtbot.mouseClick(timeline, Qt.MouseButton.LeftButton, pos=centre)
    assert blocker.args == [bar.name]
    assert timeline.selected() == bar.name
    assert window.canvas.selected_key() == conv2
    assert window.properties.name_edit.text() == "conv2"
    # The reverse: selecting relu1 on the canvas selects the buffer its fused Conv writes.
    relu1 = node_id(window, "relu1")
    window.canvas.select(relu1)
    chosen = timeline.selected()
    assert chosen is not None and chosen != bar.name
    assert relu1 in _provenance(window, chosen).provenance
    # Hovering a rectangle tells what the buffer is.
    move = QMouseEvent(QEvent.Type.MouseMove, QPointF(centre),
                       QPointF(timeline.mapToGlobal(centre)), Qt.MouseButton.NoButton,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(timeline, move)
    assert bar.name in timeline.toolTip()
    assert f"{bar.size:,} bytes" in timeline.toolTip() and "offset" in timeline.toolTip()
    # Clearing the canvas selection clears the timeline's.
    window.canvas.select(None)
    assert timeline.selected() is None
    # The graph input's buffer exists only with io-in-arena; it selects the input pill.
    window.memory.set_io_in_arena(True)
    _wait_plan(qtbot, window, io_in_arena=True)
    window.memory.select_buffer("image")
    assert window.canvas.selected_key() == "in:image"
    assert "graph input" in timeline.tooltip(timeline.bar("image"))


def test_strategy_selector_moves_the_rectangles(qtbot):
    window = make_window(qtbot)
    planned = _wait_plan(qtbot, window)
    memory = window.memory
    final = run_pipeline(load_onnx(SAMPLE_MODEL), snapshots=False).graph
    arena = plan_memory(final).arena
    # Independently: each ordering strategy's own offsets, from the compiler's packers.
    direct = {name: fn(arena.buffers, arena.alignment) for name, fn in STRATEGIES.items()}
    assert planned.offsets == arena.strategy_offsets
    for name, offsets in planned.offsets.items():
        assert arena_size(arena.buffers, offsets, arena.alignment) == arena.strategies[name]
    kept = memory.strategy()
    assert planned.offsets[kept] == arena.offsets
    other = next(name for name in direct if direct[name] != arena.offsets)
    before = {b.name: memory.timeline.bar_rect(b) for b in memory.timeline.bars}
    memory.set_strategy(other)
    assert memory.strategy() == other
    shown = {b.name: b.offset for b in memory.timeline.bars}
    assert shown == direct[other] != arena.offsets
    after = {b.name: memory.timeline.bar_rect(b) for b in memory.timeline.bars}
    assert any(after[n] != before[n] for n in before)
    assert memory.timeline.arena == arena.strategies[other]
    # A strategy with a bigger arena moves the arena line, not the lower bound.
    open_and_wait(qtbot, window, shared_models() / "onnx" / "vww_96_float.onnx")
    planned = _wait_plan(qtbot, window)
    sizes = planned.doc["strategies"]
    worst = max(sizes, key=sizes.get)
    assert sizes[worst] > planned.arena
    memory.set_strategy(worst)
    assert memory.timeline.arena == sizes[worst]
    assert memory.timeline.lower_bound == planned.doc["lower_bound"]
    assert f"{sizes[worst]:,} B" in memory.panel.summary.text()


def test_io_in_arena_toggle_changes_the_plan(qtbot):
    window = make_window(qtbot)
    without = _wait_plan(qtbot, window)
    window.memory.panel.io_in_arena.click()
    with_io = _wait_plan(qtbot, window, io_in_arena=True)
    final = run_pipeline(load_onnx(SAMPLE_MODEL), snapshots=False).graph
    expected = plan_memory(final, io_in_arena=True).to_json()
    assert with_io.doc["io_in_arena"] is True
    assert _by_name(_shown(window)) == _by_name(expected["buffers"])
    names = {b.name for b in window.memory.timeline.bars}
    assert {"image", "logits"} <= names
    assert len(names) == len(without.doc["buffers"]) + 2
    # Back off: the first plan comes back (cached), inputs and outputs leave the arena.
    window.memory.panel.io_in_arena.click()
    assert _wait_plan(qtbot, window) is without
    assert "image" not in {b.name for b in window.memory.timeline.bars}


def test_an_edit_shows_the_arena_delta(qtbot):
    window = make_window(qtbot)
    before = _wait_plan(qtbot, window)
    assert window.memory.delta is None and window.memory.panel.delta.text() == ""
    # A real Transpose after relu2 needs its own buffer while conv3 reads it: +2 KiB.
    window.document.apply(edit.insert_operator, "Insert Transpose", "relu2_out", "Transpose",
                          {"perm": (0, 1, 3, 2)})
    after = _wait_plan(qtbot, window)
    assert after.arena == before.arena + 2048
    assert window.memory.delta == 2048
    text = window.memory.panel.delta.text()
    assert "+2,048 B" in text and f"{before.arena:,}" in text and f"{after.arena:,}" in text
    assert "Transpose" in {b.op for b in window.memory.timeline.bars}
    window.document.undo_stack.undo()
    _wait_plan(qtbot, window)
    assert window.memory.delta == -2048 and "−2,048 B" in window.memory.panel.delta.text()


def test_an_invalid_graph_says_why_there_is_no_plan(qtbot):
    window = make_window(qtbot)
    _wait_plan(qtbot, window)
    window.document.apply(edit.delete_node, "Delete pool1", node_id(window, "pool1"))
    qtbot.waitUntil(lambda: "invalid node" in window.memory.panel.summary.text(), timeout=5000)
    assert window.memory.timeline.bars == []
    assert "\n" not in window.memory.panel.summary.text()
    window.document.undo_stack.undo()
    _wait_plan(qtbot, window)
    assert window.memory.timeline.bars


def test_the_widget_alone(qtbot):
    timeline = MemoryTimeline()
    qtbot.addWidget(timeline)
    timeline.resize(600, 240)
    assert timeline.bar_at(timeline.plot_rect().center()) is None
    assert timeline.peak_step() is None
    assert [_nice_step(x) for x in (0.5, 3, 7, 300, 1500, 20000)] == \
        [1, 5, 10, 500, 2048, 32768]
    assert kib(131072) == "128 KiB" and kib(1536) == "1.5 KiB"


def test_the_timeline_follows_the_pipeline_editor(qtbot):
    """Disable fuse_activations and rerun: the timeline plans the graph those passes make."""
    window = make_window(qtbot, SAMPLE_MODEL)
    before = _wait_plan(qtbot, window)
    stepping = window.stepping
    qtbot.waitUntil(lambda: stepping.result is not None, timeout=60000)
    editor = stepping.editor
    names = [editor.list.item(i).data(Qt.ItemDataRole.UserRole).name
             for i in range(editor.list.count())]
    editor.set_enabled_at(names.index("fuse_activations"), False)
    with qtbot.waitSignal(stepping.resultReady, timeout=60000):
        editor.run_button.click()

    def replanned():
        current = window.memory.current
        return not window.memory.is_busy() and current is not None and current is not before
    qtbot.waitUntil(replanned, timeout=60000)
    after = window.memory.current
    unfused = run_pipeline(load_onnx(SAMPLE_MODEL), stepping.pipeline, snapshots=False).graph
    assert any(n.op == "Relu" for n in unfused.nodes)
    assert after.doc == plan_memory(unfused).to_json()
    assert after.doc != before.doc  # the Relus run as steps of their own now


def test_a_streaming_layer_shows_the_bytes_it_shares_with_its_input(qtbot, tmp_path):
    """A chain of int8 convolutions: each output overlaps the input it streams from; hovering
    the shared bytes says so, and the rows' direction agrees with `kiln memory --json`."""
    from tests.memory.test_streams import _chain_model
    from tests.tflite.writer import write

    model = tmp_path / "chain.tflite"
    model.write_bytes(write(_chain_model()[0]))
    window = make_window(qtbot, model)
    _wait_plan(qtbot, window)
    # Whole tensors streaming over their inputs: no row-streamed chain takes the layers.
    window.document.set_disabled_lowering(frozenset({"row_chains"}))
    qtbot.waitUntil(lambda: window.memory.current.options.disabled_lowering == {"row_chains"}
                    and not window.memory.is_busy(), timeout=60000)
    planned = _wait_plan(qtbot, window)
    timeline = window.memory.timeline
    timeline.resize(900, 300)
    rows = {b["name"]: b["streams_from"] for b in planned.doc["buffers"]}
    streaming = [b for b in timeline.bars if rows[b.name]]
    assert len(streaming) >= 3
    for bar in streaming:
        source = timeline.bar(bar.streams_from)
        shared = timeline._overlap(bar, source)
        assert shared is not None and shared.height() > 0
        # The middle of the shared bytes, on the step where both are live.
        at = timeline.bar_rect(bar).center()
        at.setY(shared.center().y())
        move = QMouseEvent(QEvent.Type.MouseMove, at, QPointF(timeline.mapToGlobal(at)),
                           Qt.MouseButton.NoButton, Qt.MouseButton.NoButton,
                           Qt.KeyboardModifier.NoModifier)
        QApplication.sendEvent(timeline, move)
        tip = timeline.toolTip()
        way = "downwards" if rows[bar.name]["rows"] == "down" else "upwards"
        # The smaller rectangle answers: either side of the pair names the other.
        assert (f"overlaps {source.name}" in tip or f"overlapped by {bar.name}" in tip) \
            and way in tip, tip
