"""Explore from its defaults on a user's model: calibrate, open Explore, press Start.

A new user calibrates KWS (float) or a ResNet-8 twice as wide on their own samples, opens
Quantize > Explore… and presses Start without touching a field. The form holds the document's
own samples; the tool runs as it ships (its own process, a local Ray instance); the test
times the first feasible point, checks accuracy control's progress lines reached the panel,
and that the warning for an evaluation set coarser than the bound fired (one sample is
100 / N points, worked out here). A click on a point through the window applies it, and so
does a click on a row of the front.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from compiler.explore.record import read_record
from compiler.quant.calibration_data import Normalization
from tests.conftest import require_module, shared_models
from tests.gui.conftest import (  # noqa: F401 - autouse fixtures
    message_boxes,
    no_window_outlives_its_test,
    recovery_home,
    settings_dir,
)
from tests.gui.helpers import make_window

FIRST_FEASIBLE = 60.0  # seconds: the bound on this machine
TIMEOUT = 180000


def _start_from_defaults(qtbot, model: Path, samples: Path):
    """The window on `model` calibrated on `samples`; Explore started untouched."""
    require_module("ray", "the explore extra installs it")
    window = make_window(qtbot, model)
    calibrate_now(window.quant, CalibrationRequest(str(samples), "", Normalization()))
    qtbot.wait(200)  # the window brings the Quantization dock forward, as after any calibration
    c = window.explore
    c.action.trigger()
    p = c.panel
    qtbot.waitUntil(p.scatter.isVisible, timeout=5000)
    assert (p.calibration.text(), p.evaluation.text()) == (str(samples), str(samples))
    assert p.hint.isVisibleTo(p) and "calibration samples" in p.hint.text()
    seen, texts = [], []
    c.progressed.connect(seen.append)
    c.progressed.connect(lambda _s: texts.append((p.progress.text(), p.warning.text())))
    started = time.perf_counter()
    qtbot.mouseClick(p.start, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(s["trial"] and s["trial"]["feasible"] for s in seen) or
                    not c.run.is_running(), timeout=TIMEOUT)
    seconds = time.perf_counter() - started
    assert c.run.is_running(), p.status.text()
    with qtbot.waitSignal(c.runEnded, timeout=60000) as ended:
        qtbot.mouseClick(p.cancel, Qt.MouseButton.LeftButton)
    assert ended.args == ["stopped"], p.status.text()  # Ray's own SIGTERM exit is a failure
    record = read_record(c.output())
    print(f"{model.name}: first feasible point {seconds:.1f} s after Start "
          f"({record['first_feasible_seconds']:.1f} s inside kiln explore)")
    assert seconds < FIRST_FEASIBLE
    count = len(np.load(samples, mmap_mode="r"))
    one_sample = 100 / count  # points of the score one sample is worth
    assert one_sample > p.max_drop.value()  # these sets are coarser than the default bound
    warned = [w for s in seen for w in s.get("warnings", [])]
    assert warned == [w for w in record["warnings"]] and len(warned) == 1
    assert f"{one_sample:.2f} points" in warned[0] and samples.name in warned[0]
    assert p.warning.isVisibleTo(p) and p.warning.text() == f"Warning: {warned[0]}"
    control = [s["control"] for s in seen if s.get("control")]
    assert control and control[0]["compiled"] and control[0]["float_tensors"] == 0
    assert [e["measured"] for e in control] == sorted(e["measured"] for e in control)
    said = [t for t, _ in texts if t.startswith("Accuracy control (")]
    assert all(w == f"Warning: {warned[0]}" for _, w in texts)  # from the first line on
    assert len(said) == len(control) and f"{control[-1]['measured']} measured" in said[-1]
    return window, c, record, control


def test_kws_explores_from_its_defaults_and_a_click_applies(qtbot, tmp_path):
    from tests.explore.data import _kws

    shared = shared_models()
    samples = tmp_path / "kws_samples.npy"
    np.save(samples, _kws(shared, np.random.default_rng(0), 48))
    model = shared / "onnx" / "kws_ref_model_float32.onnx"
    window, c, record, _ = _start_from_defaults(qtbot, model, samples)
    assert Path(record["problem"]["model"]).name == model.name
    scatter = c.panel.scatter
    number = next(t["number"] for t in record["trials"] if t["feasible"])
    at = scatter.position(number)
    assert scatter.point_at(at) == number and scatter.isVisible()
    # Through the window, as a mouse does: the press must be taken for the release to come.
    where = scatter.mapTo(window, QPoint(round(at.x()), round(at.y())))
    with qtbot.waitSignal(c.applied, timeout=60000) as applied:
        QTest.mouseClick(window.windowHandle(), Qt.MouseButton.LeftButton,
                         Qt.KeyboardModifier.NoModifier, where)
    assert applied.args == [number] and c.applied_number == number
    stack = window.document.undo_stack
    assert stack.undoText() == f"Apply exploration trial {number}"
    stack.undo()
    table = c.panel.table  # a row of the front applies its point too
    row = table.visualItemRect(table.item(0, 0)).center()
    with qtbot.waitSignal(c.applied, timeout=60000) as applied:
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=row)
    assert applied.args == [record["front"][0]]
    assert stack.undoText() == f"Apply exploration trial {record['front'][0]}"


def test_a_wider_resnet8_explores_from_its_defaults(qtbot, tmp_path):
    from tests.explore.wide_resnet import wide_resnet8

    shared = shared_models()
    model = tmp_path / "wide_resnet8.onnx"
    onnx.save(wide_resnet8(shared), model)
    samples = shared / "inputs" / "natural_rgb_uint8_Nx32x32x3.npy"
    _, _, record, control = _start_from_defaults(qtbot, model, samples)
    stages = {e["stage"] for e in control}
    assert {"checking", "ranking", "searching"} <= stages  # int8 alone loses samples here
    ranked = [e for e in control if e["stage"] == "ranking"]
    assert ranked[-1]["measured"] - ranked[0]["measured"] >= ranked[0]["candidates"] - 1
    first = record["trials"][0]
    assert first["source"] == "accuracy control" and first["feasible"]
