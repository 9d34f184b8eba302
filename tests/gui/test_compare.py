"""The Compare window: two synced canvases, differences to step through, per-layer deltas."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.quant.calibrate_dialog import CalibrationRequest
from compiler.driver import Options, compilation
from compiler.quant.calibration_data import Normalization
from tests.conftest import shared_models
from tests.gui.helpers import make_window
from views.compare_view import STATUS_COLORS

TIMEOUT = 120000


def _click(qtbot, canvas, key) -> None:
    """Centre `key` on `canvas` and click its box with the mouse (double clicking the closed
    groups around it first, as a user opens them)."""
    while canvas.box_rect(key) is None:
        layout = canvas.graph_layout()
        group = layout.grouping.hierarchy.shown_as(key, layout.expanded)
        assert group != key and canvas.box_rect(group) is not None
        canvas.center_on(group)
        qtbot.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                          pos=canvas.mapFromScene(canvas.box_rect(group).center()))
    canvas.center_on(key)
    qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                     pos=canvas.mapFromScene(canvas.box_rect(key).center()))


def _run(qtbot, window, action):
    with qtbot.waitSignal(window.compare.shown, timeout=TIMEOUT):
        action.trigger()
    return window.compare


def test_float_model_against_its_int8_quantization(qtbot):
    window = make_window(qtbot)
    with qtbot.waitSignal(window.quant.calibrationEnded, timeout=TIMEOUT):
        window.quant.calibrate(CalibrationRequest("digits:train", "digits:test",
                                                  Normalization()))
    compare = _run(qtbot, window, window.compare.int8_action)
    d, view = compare.result.diff, compare.view
    c = d.correspondence
    # Every float layer of the final graph has its integer counterpart.
    assert c.removed == [] and len(c.pairs) == len(d.a.graph.nodes)
    ops = {(d.a.graph.node(x).op, d.b.graph.node(y).op) for x, y in c.pairs.items()}
    assert ("Conv", "QLinearConv") in ops and ("FullyConnected", "QGemm") in ops
    # Colours: every changed pair amber on both sides, the new boundary nodes green on B.
    overlay_a, overlay_b = view.canvas_a.overlay(), view.canvas_b.overlay()
    for x in d.changed():
        assert overlay_a[x][0] == overlay_b[c.pairs[x]][0] == STATUS_COLORS["changed"]
    assert c.added and all(overlay_b[i][0] == STATUS_COLORS["added"] for i in c.added)
    # A click on a float Conv selects and centres its QLinearConv, with the deltas shown.
    conv = next(x for x in c.pairs if d.a.graph.node(x).op == "Conv")
    _click(qtbot, view.canvas_a, conv)
    assert view.canvas_b.selected_key() == c.pairs[conv]
    assert view.canvas_b.visible_scene_rect().contains(
        view.canvas_b.box_rect(c.pairs[conv]).center())
    text = view.details.text()
    assert "QLinearConv" in text and "weight_bytes" in text and "arena_bytes" in text
    # The click chose the pair's row; Next (with the mouse) steps to the following difference.
    row = next(i for i, r in enumerate(d.differences) if r.a == conv)
    assert view.rows.currentRow() == row
    qtbot.mouseClick(view.next_button, Qt.MouseButton.LeftButton)
    following = d.differences[(row + 1) % len(d.differences)]
    assert view.rows.currentRow() == (row + 1) % len(d.differences)
    if following.a is not None:
        assert view.canvas_a.selected_key() == following.a
    if following.b is not None:
        assert view.canvas_b.selected_key() == following.b
    qtbot.mouseClick(view.previous_button, Qt.MouseButton.LeftButton)
    assert view.rows.currentRow() == row and view.canvas_a.selected_key() == conv


def test_zoom_follows_from_one_canvas_to_the_other(qtbot):
    window = make_window(qtbot)
    compare = _run(qtbot, window, window.compare.stage_action)
    view = compare.view
    view.canvas_a.set_zoom(0.5)
    assert abs(view.canvas_b.zoom_level() - 0.5) < 1e-9
    # Relu1 folded into the final graph's first Conv: clicking it selects that Conv.
    d = compare.result.diff
    relu = next(i for i, n in d.units_a.nodes.items() if n.name == "relu1")
    _click(qtbot, view.canvas_a, relu)
    assert view.canvas_b.selected_key() == d.correspondence.folded_a[relu]
    assert d.b.graph.node(view.canvas_b.selected_key()).op == "Conv"


def test_resnet8_final_graphs_for_cortex_m7_and_m55(qtbot):
    model = shared_models() / "tflite" / "pretrainedResnet_quant.tflite"
    window = make_window(qtbot, model)
    compare = _run(qtbot, window, window.compare.targets_action)
    d, view = compare.result.diff, compare.view
    final = compilation(window.document.graph).final
    assert len(d.correspondence.pairs) == len(final.nodes)
    assert d.counts()["changed"] == 0
    # Alike in structure, the layers whose arena bytes differ are the rows to step through.
    assert d.differences and {r.status for r in d.differences} == {"metrics"}
    assert all(d.deltas(r.a, r.b)["arena_bytes"][2] for r in d.differences)
    # The arena bytes per layer are each target's plan's.
    for target, metrics in (("cortex-m7", d.metrics_a), ("cortex-m55", d.metrics_b)):
        plan = compilation(window.document.graph).plan(Options(target))
        assert sum(v for v in metrics["arena_bytes"].values() if v) == sum(
            b.size for b in plan.arena.buffers)
    assert view.timeline_a.steps() > 0 and view.timeline_b.steps() > 0
    # Both networks' size reports, side by side: each its own target's.
    for widget, target in ((view.size_a, "cortex-m7"), (view.size_b, "cortex-m55")):
        assert widget.report["target"] == target
        assert widget.layers.rowCount() == len(widget.report["layers"]) > 0
    assert view.below.isTabEnabled(1)
    conv = next(n.id for n in final.nodes if n.op == "QLinearConv")
    _click(qtbot, view.canvas_b, conv)
    assert view.canvas_a.selected_key() == conv
    assert "cortex-m7" in view.title_a.text() and "cortex-m55" in view.title_b.text()


def test_loaded_graph_against_a_pass_stage_chosen_from_the_menu(qtbot, monkeypatch):
    """Compare > With a Pass Stage…: the pass is asked for; after the last dce, the Relus are
    folded into their Convs."""
    from PySide6.QtWidgets import QInputDialog

    window = make_window(qtbot)
    names = window.compare.stage_names()
    assert "fuse_activations" in names and "dce#2" in names
    asked = []

    def choose(parent, title, label, items, current, editable):
        asked.append(list(items))
        return "dce#2", True
    monkeypatch.setattr(QInputDialog, "getItem", staticmethod(choose))
    compare = _run(qtbot, window, window.compare.pass_action)
    assert asked == [names]
    d = compare.result.diff
    c = d.correspondence
    graph = window.document.graph
    relus = [n.id for n in graph.nodes if n.op == "Relu"]
    assert relus and all(r in c.folded_a for r in relus)
    assert set(c.how.values()) == {"provenance"}
    convs = [n.id for n in graph.nodes if n.op == "Conv"]
    fused = [d.b.graph.node(c.pairs[x]) for x in convs]
    assert all(n.attrs.get("activation") == "Relu" for n in fused)
    assert all(x in d.changed() for x in convs)  # the activation attribute changed


def test_with_a_file_read_in_the_background_and_a_bad_file_is_one_sentence(qtbot, tmp_path):
    import onnx

    from tests.conftest import SAMPLE_MODEL

    window = make_window(qtbot)
    model = onnx.load(SAMPLE_MODEL)
    for attr in next(n for n in model.graph.node if n.op_type == "Gemm").attribute:
        if attr.name == "alpha":
            attr.f = 0.5
            break
    else:
        next(n for n in model.graph.node if n.op_type == "Gemm").attribute.append(
            onnx.helper.make_attribute("alpha", 0.5))
    other = tmp_path / "other.onnx"
    onnx.save(model, other)
    with qtbot.waitSignal(window.compare.shown, timeout=TIMEOUT):
        window.compare.compare_file(other)
    d = window.compare.result.diff
    assert not d.correspondence.removed and not d.correspondence.added
    assert [d.a.graph.node(x).op for x in d.changed()] == ["FullyConnected"]
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    job = window.compare.compare_file(bad)
    with qtbot.waitSignal(job.failed, timeout=TIMEOUT) as failed:
        pass
    message = failed.args[0]
    assert "bad.onnx" in message and "\n" not in message and "Traceback" not in message


def test_two_targets_with_instructions_counted_per_layer(qtbot, monkeypatch, tmp_path):
    """Compare > Two Targets with Instructions…: each layer's count on both cores, the deltas
    between them, and each side's counts those of `kiln bench --target`."""
    from PySide6.QtWidgets import QInputDialog

    from compiler.harness.cortex_m_bench import bench_compilation
    from tests.codegen import firmware as test_firmware
    from tests.codegen.test_int8_kernels import _conv_tflite

    test_firmware.require_tools()
    model = tmp_path / "conv.tflite"
    model.write_bytes(_conv_tflite(False, 2, 1, 3))
    window = make_window(qtbot, model)
    answers = iter(["cortex-m4", "cortex-m55"])
    monkeypatch.setattr(QInputDialog, "getItem", staticmethod(
        lambda *args: (next(answers), True)))
    compare = _run(qtbot, window, window.compare.instructions_action)
    d = compare.result.diff
    assert "instructions" in d.metric_names()
    graph = window.document.graph
    compiled = compilation(graph)
    for target, metrics in (("cortex-m4", d.metrics_a), ("cortex-m55", d.metrics_b)):
        bench = bench_compilation(compiled, target, peer=False)
        counted = {n for layer in bench.kiln.layers for n in layer.nodes}
        shown = {v for v in metrics["instructions"].values() if v}
        assert counted and sum(shown) == sum(la.instructions for la in bench.kiln.layers)
    conv = next(x for x in d.correspondence.pairs if d.a.graph.node(x).op == "QLinearConv")
    before, after, delta = d.deltas(conv, d.correspondence.pairs[conv])["instructions"]
    assert before and after and delta == after - before
    _click(qtbot, compare.view.canvas_a, conv)
    assert "instructions" in compare.view.details.text()


def test_two_quantizations_with_their_sqnr(qtbot, monkeypatch):
    """Compare > With Another Quantization…: the same profile under another method; every
    layer's SQNR on both sides, the deltas between them."""
    from PySide6.QtWidgets import QInputDialog

    from compiler.quant.evaluate import evaluate
    from compiler.quant.quantize import Options as QuantOptions
    from compiler.quant.quantize import quantize

    window = make_window(qtbot)
    with qtbot.waitSignal(window.quant.calibrationEnded, timeout=TIMEOUT):
        window.quant.calibrate(CalibrationRequest("digits:train", "digits:test",
                                                  Normalization()))
    s = window.quant.session
    answers = iter(["percentile", "symmetric"])
    monkeypatch.setattr(QInputDialog, "getItem", staticmethod(
        lambda *args: (next(answers), True)))
    compare = _run(qtbot, window, window.compare.quant_action)
    d = compare.result.diff
    assert "sqnr" in d.metric_names()
    assert "minmax" in d.a.label and "percentile, symmetric" in d.b.label
    # Side B's SQNR per layer is what evaluating that quantization gives.
    qdq = quantize(s.graph, s.profile, QuantOptions(method="percentile", schema="symmetric"))
    report = evaluate(s.graph, qdq, s.live, limit=s.samples)
    by_node = {qdq.value(t.name).producer.id: t.sqnr for t in report.tensors
               if qdq.value(t.name).producer is not None}  # the graph input has none
    units = d.correspondence.units_b
    checked = 0
    for anchor, value in d.metrics_b["sqnr"].items():  # a layer shows its worst tensor
        known = [by_node[m] for m in units.members[anchor] if m in by_node]
        assert value == (pytest.approx(min(known)) if known else None)
        checked += bool(known)
    assert checked >= 5
    measured = [d.deltas(x, y)["sqnr"] for x, y in d.correspondence.pairs.items()]
    measured = [m for m in measured if m[0] is not None and m[1] is not None]
    assert len(measured) >= 5
    assert all(delta == pytest.approx(after - before) for before, after, delta in measured)
    # Scales differ between the two, so the quantization parameters differ somewhere.
    assert d.changed()


def test_a_qdq_side_shows_its_units_closed_and_coloured_and_opens_on_selection(qtbot):
    """KWS float against its QDQ file as loaded: B folds every QDQ unit into one box, a closed
    unit takes the colour of what changed inside it, and selecting a float Conv opens the
    unit holding its counterpart."""
    from compiler.frontends.load import load_model
    from compiler.graphdiff.stages import Operand

    folder = shared_models() / "onnx"
    window = make_window(qtbot, folder / "kws_ref_model_float32.onnx")
    graph = window.document.graph
    compare = window.compare
    with qtbot.waitSignal(compare.shown, timeout=TIMEOUT):
        compare.start(Operand(graph, "loaded", label="float"),
                      lambda: Operand(load_model(folder / "kws_ref_model.onnx"), "loaded",
                                      label="int8"), False)
    d, view = compare.result.diff, compare.view
    layout = view.canvas_b.graph_layout()
    hierarchy = layout.grouping.hierarchy
    closed = [k for k in layout.groups if k in layout.boxes]
    assert len(closed) < len(d.b.graph.nodes) / 3
    painted = view.canvas_b.overlay()
    changed = {m for x in d.changed() for m in d.units_b.members[d.correspondence.pairs[x]]}
    for key in closed:
        if changed & set(hierarchy.members(key)):
            assert painted[key][0] in (STATUS_COLORS["changed"], STATUS_COLORS["added"])
    conv = next(x for x in d.correspondence.pairs if d.a.graph.node(x).op == "Conv")
    counterpart = d.correspondence.pairs[conv]
    assert view.canvas_b.box_rect(counterpart) is None  # inside a closed unit or pair
    _click(qtbot, view.canvas_a, conv)
    assert view.canvas_b.selected_key() == counterpart
    assert view.canvas_b.box_rect(counterpart) is not None
