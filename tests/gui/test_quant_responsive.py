"""Tuning ranges on ResNet-8 never stalls the window: the slow work runs in workers.

A 5 ms timer ticks on the GUI thread while a user's mouse drags a range handle on the
histogram (and the evaluation that follows comes back), while a saved profile loads, and while
the entropy method's range is searched. What is asserted is the work the GUI thread itself does
between two ticks (its processor time, `StallMeter.worst_busy_ms`): under 50 ms, so no search,
load or evaluation runs on it. The wall-clock gap, and that gap without the time the kernel gave
the processor to other programs (`worst_own_ms`), are printed and recorded (`record_property`)
but not asserted: on a shared two-core machine running the suite in two processes, a worker of
the same process holding the interpreter lock has blocked the GUI thread for 97 ms of wall
clock while it did 16 ms of work, and a test that fails with the machine's load is no test.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.quant.calibrate_dialog import CalibrationRequest
from compiler.quant.calibrate import METHODS
from compiler.quant.calibration_data import Normalization
from compiler.quant.profile import load_profile
from tests.conftest import shared_models
from tests.gui.helpers import StallMeter, click_row, drag, make_window, open_and_wait

TIMEOUT = 120000
STALL_MS = 50.0
MOVE_MS = 16  # a mouse reports about 60 moves a second


def _resnet8(qtbot, tmp_path):
    """A window on the float ResNet-8 and a calibration request for 48 smooth random images."""
    from tests.bench.bench_quantizer import _data

    path = shared_models() / "onnx" / "pretrainedResnet.onnx"
    window = make_window(qtbot, path)
    calibration, _ = _data("pretrainedResnet", window.document.graph)
    samples = tmp_path / "resnet_calibration.npy"
    np.save(samples, calibration.samples)
    return window, path, CalibrationRequest(str(samples), "", Normalization(), samples=48)


def _settle(qtbot, window):
    """Wait until no panel has work under way (the code and memory panels follow selections)."""
    qtbot.waitUntil(lambda: not any((window.quant.is_busy(), window.recovery.is_busy(),
                                     window.dock_sizes.busy(), window.code.is_busy(),
                                     window.memory.is_busy())), timeout=TIMEOUT)


def _select_widest(qtbot, window) -> str:
    """Click the row of the tensor with the widest range (its handles far apart on screen)."""
    quant = window.quant
    rows = [r for r in quant.panel.model.rows if r.high > r.low and r.state == ""]
    tensor = max(rows, key=lambda r: r.high - r.low).tensor
    click_row(qtbot, quant.panel, tensor)
    _settle(qtbot, window)
    return tensor


def _drag_top_down(qtbot, quant, meter: StallMeter) -> tuple[float, float]:
    """Drag the selected tensor's top handle to 40 % of its range; wait for the evaluation."""
    view = quant.panel.histogram
    start, end = view.x_of(view.high), view.x_of(view.low + 0.4 * (view.high - view.low))
    with meter, qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        drag(qtbot, view, start, end, steps=24, pause_ms=MOVE_MS)
    return view.low, view.high


def _report(record_property, name: str, meter: StallMeter) -> None:
    """Print and record the worst stall of `name` (what is asserted is the GUI thread's work)."""
    record_property(f"{name}_ms", round(meter.worst_own_ms, 1))
    record_property(f"{name}_wall_ms", round(meter.worst_ms, 1))
    record_property(f"{name}_gui_cpu_ms", round(meter.worst_busy_ms, 1))
    print(f"{name}: worst stall {meter.worst_own_ms:.1f} ms (wall clock {meter.worst_ms:.1f} "
          f"ms, GUI thread's processor time {meter.worst_busy_ms:.1f} ms) over {meter.ticks} "
          f"ticks")


def _assert_responsive(meter: StallMeter, what: str, figure: str = "worst_busy_ms") -> None:
    assert meter.ticks > 1, f"the timer never ran while {what}"
    worst = getattr(meter, figure)
    assert worst < STALL_MS, f"the GUI thread worked {worst:.1f} ms between ticks ({figure}) " \
                             f"while {what}"


@pytest.mark.slow
def test_dragging_a_resnet8_range_never_stalls_the_window(qtbot, tmp_path, record_property):
    window, _, request = _resnet8(qtbot, tmp_path)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        quant.calibrate(request)
    assert ended.args == [True]
    _settle(qtbot, window)
    tensor = _select_widest(qtbot, window)
    before = quant.session.profile.tensors[tensor]
    meter = StallMeter()
    low, high = _drag_top_down(qtbot, quant, meter)
    _report(record_property, "worst_stall_drag", meter)
    # The drag was one undo step on the document's state, and the dock shows its evaluation.
    assert window.document.quant.session.profile.overrides[tensor] == {"min": low, "max": high}
    assert high < before.max and window.document.undo_stack.count() == 1
    row = quant.panel.model.rows[quant.panel.model.row_of(tensor)]
    assert row.high == pytest.approx(high, rel=0.02) and row.clipped > 0
    _assert_responsive(meter, "a range handle was dragged")


@pytest.mark.slow
def test_loading_a_profile_and_searching_a_range_never_stall(qtbot, tmp_path, record_property):
    window, path, request = _resnet8(qtbot, tmp_path)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(request)
    saved = tmp_path / "resnet.profile.json"
    quant.session.profile.save(saved)
    open_and_wait(qtbot, window, path)  # opened again: nothing calibrated
    assert window.document.quant.session is None
    _settle(qtbot, window)

    loading = StallMeter()
    with loading, qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        quant.load_profile(saved)
    _report(record_property, "worst_stall_load_profile", loading)
    assert ended.args == [True]
    assert window.document.quant.session.profile.to_json() == load_profile(saved).to_json()
    _settle(qtbot, window)

    tensor = _select_widest(qtbot, window)
    searching = StallMeter()
    with searching, qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        quant.panel.method.setCurrentText("entropy")
        quant.panel.method.activated.emit(quant.panel.method.currentIndex())  # as a user picks it
    _report(record_property, "worst_stall_entropy_search", searching)
    session = quant.session
    entropy = session.method_ranges[tensor, "entropy"]
    assert session.profile.overrides[tensor] == {"min": entropy[0], "max": entropy[1]}
    # The box names the first method known to give that range (minmax may give it too).
    assert quant.panel.method.currentText() == next(
        m for m in METHODS if session.method_ranges.get((tensor, m)) == entropy)
    _settle(qtbot, window)

    dragging = StallMeter()
    _drag_top_down(qtbot, quant, dragging)
    _report(record_property, "worst_stall_drag_after_load", dragging)
    assert quant.panel.method.currentText() == "manual"
    _assert_responsive(loading, "a profile loaded")
    _assert_responsive(searching, "the entropy range was searched")
    _assert_responsive(dragging, "a range handle was dragged")
