"""Range edits in the Quantization dock undo and redo one at a time, each to its exact state.

Seven edits on the digits CNN: ranges dragged on the histogram and typed in the spin boxes, on
three tensors (two of them edited two and three times), with a Keep float between them. After
each edit the whole visible state is recorded: every table row in order (low, high, scale, zero
point, clipped, SQNR, state), the readouts, the overlay's edge labels and colours, and for each
edited tensor its editor (spin boxes, histogram handles and step, method, Keep float, live
readout). Undo then walks back one step at a time and every intermediate state must equal the
one recorded, the selected tensor's handles moving back at once (before the re-evaluation);
redo walks forward the same way. So an undo that restores the newest range instead of the
previous one, restores only one bound, two edits merged into one step, or an undo that pushes
edits of its own all fail here.
"""

from __future__ import annotations

import copy
import math
from dataclasses import astuple

import pytest
from PySide6.QtCore import Qt

from app.quant.calibrate_dialog import CalibrationRequest
from compiler.quant.calibrate import params_for
from compiler.quant.calibration_data import Normalization
from tests.gui.helpers import click_row, drag, make_window

TIMEOUT = 120000
EDITED = ("relu1_out", "relu2_out", "pool1_out", "logits")


def _calibrated(qtbot):
    window = make_window(qtbot)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    assert ended.args == [True]
    qtbot.mouseClick(quant.panel.overlay, Qt.MouseButton.LeftButton)  # labels on the edges
    assert window.canvas.edge_labels()
    return window, quant


def _row(panel, tensor):
    return panel.model.rows[panel.model.row_of(tensor)]


def _comparable(row) -> tuple:
    """A table row with NaN (a float tensor's figures) made equal to itself."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in astuple(row))


def _state(qtbot, window) -> dict:
    """Everything the user can see of the quantization, and the profile behind it."""
    quant, panel, canvas = window.quant, window.quant.panel, window.canvas
    stack = window.document.undo_stack
    state = {
        "overrides": copy.deepcopy(quant.session.profile.overrides),
        "keep_float": sorted(quant.session.profile.keep_float),
        "rows": [_comparable(row) for row in panel.model.rows],
        "readouts": (panel.output_sqnr.text(), panel.agreement.text(), panel.accuracy.text()),
        "edge labels": canvas.edge_labels(),
        "colours": canvas.overlay(),
        "undo stack": (stack.index(), stack.undoText()),
    }
    for tensor in EDITED:  # each tensor's editor, as selecting it shows it (logits last)
        click_row(qtbot, panel, tensor)
        state[f"editor of {tensor}"] = _editor(panel)
    return state


def _editor(panel) -> tuple:
    """The range editor of the selected tensor: boxes, handles and step, method, live text."""
    view = panel.histogram
    return (panel.low.value(), panel.high.value(), view.low, view.high, view.step,
            panel.method.currentText(), panel.keep_float.isChecked(), panel.live.text())


def _assert_same(got: dict, want: dict, when: str) -> None:
    differ = [key for key in want if got[key] != want[key]]
    assert not differ, f"{when}: {', '.join(differ)} differ: " + "; ".join(
        f"{key}: {got[key]!r} != {want[key]!r}" for key in differ)


def _assert_quantized_over(window, tensor: str, low: float, high: float) -> None:
    """The row, the editor and the edge label show [low, high]'s scale and zero point."""
    quant = window.quant
    params = params_for(low, high, quant.session.options.schema)
    row = _row(quant.panel, tensor)
    assert quant.session.profile.overrides[tensor] == {"min": low, "max": high}
    assert (row.scale, row.zero_point) == (params.scale, params.zero_point)
    assert row.low == pytest.approx((-128 - params.zero_point) * params.scale, rel=1e-6)
    assert row.high == pytest.approx((127 - params.zero_point) * params.scale, rel=1e-6)
    label = f"scale {params.scale:.4g} · zp {params.zero_point}"
    assert window.canvas.edge_labels()[tensor] == label


def _edit(qtbot, quant, action) -> None:
    """Do `action` (one user edit) and wait until the dock shows its evaluation."""
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        action()


def _drag_handle(qtbot, quant, tensor: str, handle: str, to: float) -> tuple[float, float]:
    """Drag `tensor`'s low or high handle to the real value `to`; the range it released at."""
    click_row(qtbot, quant.panel, tensor)
    view = quant.panel.histogram
    start = view.x_of(view.low if handle == "low" else view.high)
    _edit(qtbot, quant, lambda: drag(qtbot, view, start, view.x_of(to)))
    return view.low, view.high


def _type(qtbot, quant, tensor: str, box: str, text: str) -> None:
    """Type `text` and Enter into `tensor`'s Min or Max box."""
    click_row(qtbot, quant.panel, tensor)
    spin = getattr(quant.panel, box)

    def typing():
        spin.setFocus()
        spin.selectAll()
        qtbot.keyClicks(spin, text)
        qtbot.keyClick(spin, Qt.Key.Key_Return)

    _edit(qtbot, quant, typing)


@pytest.mark.slow
def test_seven_edits_undo_and_redo_one_at_a_time(qtbot):
    window, quant = _calibrated(qtbot)
    panel, stack = quant.panel, window.document.undo_stack
    states = [_state(qtbot, window)]
    assert states[0]["overrides"] == {} and stack.count() == 0
    relu2_high = _row(panel, "relu2_out").high

    # 1. drag relu2_out's top down to half its range
    low, high = _drag_handle(qtbot, quant, "relu2_out", "high", relu2_high * 0.45)
    assert low == 0.0 and high == pytest.approx(relu2_high * 0.45, rel=0.05)
    _assert_quantized_over(window, "relu2_out", low, high)
    states.append(_state(qtbot, window))

    # 2. type a bottom for logits (the top stays the calibrated one, as the box shows it)
    click_row(qtbot, panel, "logits")
    logits_high = panel.high.value()
    _type(qtbot, quant, "logits", "low", "-20")
    _assert_quantized_over(window, "logits", -20.0, logits_high)
    states.append(_state(qtbot, window))

    # 3. type a top for logits: a second edit of the same tensor, its own undo step
    _type(qtbot, quant, "logits", "high", "12.5")
    _assert_quantized_over(window, "logits", -20.0, 12.5)
    states.append(_state(qtbot, window))

    # 4. another kind of edit between them: keep pool1_out in float
    click_row(qtbot, panel, "pool1_out")
    _edit(qtbot, quant, lambda: qtbot.mouseClick(panel.keep_float, Qt.MouseButton.LeftButton))
    assert _row(panel, "pool1_out").state == "float"
    assert window.canvas.edge_labels()["pool1_out"] == "float (kept)"
    states.append(_state(qtbot, window))

    # 5. drag logits' bottom up: only the low bound moves
    low, high = _drag_handle(qtbot, quant, "logits", "low", -8.0)
    assert high == 12.5 and low == pytest.approx(-8.0, abs=0.5)
    _assert_quantized_over(window, "logits", low, 12.5)
    states.append(_state(qtbot, window))

    # 6. drag relu2_out's top again, up this time
    first = quant.session.profile.overrides["relu2_out"]["max"]
    low, high = _drag_handle(qtbot, quant, "relu2_out", "high", relu2_high * 0.8)
    assert low == 0.0 and high > first * 1.5
    _assert_quantized_over(window, "relu2_out", 0.0, high)
    states.append(_state(qtbot, window))

    # 7. type a top for relu1_out
    _type(qtbot, quant, "relu1_out", "high", "2.5")
    _assert_quantized_over(window, "relu1_out", 0.0, 2.5)
    states.append(_state(qtbot, window))

    assert stack.count() == 7  # seven steps: no two edits merged
    for i in range(1, len(states)):  # each step changed what is shown
        assert states[i]["rows"] != states[i - 1]["rows"], f"edit {i} changed no row"

    for i in range(len(states) - 1, 0, -1):
        assert stack.canUndo()
        with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
            window.actions_.undo.trigger()
            # At once, before the re-evaluation: the selected tensor's handles are back.
            assert _editor(panel) == states[i - 1]["editor of logits"], f"undo of edit {i}"
        _assert_same(_state(qtbot, window), states[i - 1], f"undo of edit {i}")
        assert stack.redoText() == states[i]["undo stack"][1]  # redo offers that edit back
    assert not stack.canUndo()

    for i in range(1, len(states)):
        assert stack.canRedo()
        with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
            window.actions_.redo.trigger()
            assert _editor(panel) == states[i]["editor of logits"], f"redo of edit {i}"
        _assert_same(_state(qtbot, window), states[i], f"redo of edit {i}")
    assert not stack.canRedo()
