"""Benchmark: the quantization workbench's histogram while a handle moves, and re-evaluation.

The window runs offscreen with ResNet-8 (the digits CNN when the shared models are missing),
calibrated on 100 inputs (seeded smooth random images for ResNet-8, as the quantizer benchmark
makes them; the digits training split for the digits CNN) with 2,048-bin histograms. For the
tensor with the most values, a scripted drag moves the upper handle across the plot in 240
mouse-move events, each painted before the next (`repaint`): frames per second of the whole
handler + paint. Then each quantized tensor's range is narrowed in turn by a release of the
handle, and the time until the panel shows the new errors is taken (the worker's incremental
re-evaluation, plus the int8 accuracy when the samples have labels). Goals: at least 30 frames
per second, re-evaluation within 0.5 s.
Run `python tests/bench/bench_workbench.py` from the project root.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # for app.* and compiler.* when run as a script

import numpy as np  # noqa: E402
from PySide6.QtCore import QEventLoop, QPoint, Qt, QTimer  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

SHARED = ROOT.parent / "shared" / "models"
SAMPLE = ROOT / "app" / "resources" / "models" / "digits_cnn.onnx"
MOVES = 240


def _wait(signal, seconds: float = 120.0) -> None:
    loop = QEventLoop()
    signal.connect(loop.quit)
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)


def main() -> int:
    """Print frames per second and re-evaluation times; exit 1 when a goal is missed."""
    from app.quant.calibrate_dialog import CalibrationRequest
    from app.quant.screens import calibrate_now
    from app.window.mainwindow import MainWindow
    from compiler.quant.calibration_data import Normalization

    app = QApplication.instance() or QApplication([])
    window = MainWindow(remember=False)
    window.resize(1600, 1000)
    window.show()
    resnet = SHARED / "onnx" / "pretrainedResnet.onnx"
    model = resnet if resnet.exists() else SAMPLE
    window.open_file(model)
    _wait(window.modelLoaded)
    if model == resnet:
        rng = np.random.default_rng(0)
        coarse = rng.uniform(0, 255, (100, 4, 4, 3))
        images = np.repeat(np.repeat(coarse, 8, axis=1), 8, axis=2).astype(np.float32)
        data = Path(os.environ.get("TMPDIR", "/tmp")) / "kiln_bench_resnet_inputs.npy"
        np.save(data, images)
        request = CalibrationRequest(str(data), "", Normalization(), samples=100)
    else:
        request = CalibrationRequest("digits:train", "digits:test", Normalization(), samples=100)
    quant = window.quant
    calibrate_now(quant, request)
    quant.dock.show()
    quant.dock.setFloating(True)
    quant.dock.resize(900, 900)
    app.processEvents()
    session = quant.session
    biggest = max(session.evaluation.tensors,
                  key=lambda t: sum(session.profile.tensors[t].histogram))
    quant.show_tensor(biggest)
    view = quant.panel.histogram
    y = int(view.plot_rect().center().y())
    x_high = int(round(view.x_of(view.high)))
    QTest.mousePress(view, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPoint(x_high, y))
    start = time.perf_counter()
    for x in np.linspace(x_high, view.plot_rect().left() + 20, MOVES):
        QTest.mouseMove(view, QPoint(int(round(x)), y))
        view.repaint()
    fps = MOVES / (time.perf_counter() - start)
    QTest.mouseRelease(view, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                       QPoint(int(view.plot_rect().left() + 20), y))
    _wait(quant.evaluated)
    bins = len(session.profile.tensors[biggest].histogram)
    print(f"{model.name}: histogram of {biggest[:40]} ({bins:,} bins), {MOVES} moves while "
          f"dragging: {fps:.0f} frames per second")
    seconds = []
    for tensor in list(session.evaluation.tensors):
        quant.show_tensor(tensor)
        low, high = view.low, view.high
        start = time.perf_counter()
        quant.set_range(low, low + (high - low) * 0.8)
        _wait(quant.evaluated)
        seconds.append((time.perf_counter() - start, tensor))
    (worst, which), middle = max(seconds), statistics.median(s for s, _ in seconds)
    print(f"re-evaluation after a release, {len(seconds)} tensors on "
          f"{session.evaluator.count} inputs: median {1000 * middle:.0f} ms, worst "
          f"{1000 * worst:.0f} ms ({which[:40]})")
    met = fps >= 30 and worst <= 0.5
    print("goal (>= 30 frames per second, re-evaluation <= 0.5 s):", "met" if met else "MISSED")
    window.document.undo_stack.setClean()
    window.close()
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
