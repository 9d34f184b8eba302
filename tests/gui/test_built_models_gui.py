"""The models the tests build (tests/tflite/built_models.py) open in the app: the canvas shows
their new operators, the Passes panel steps them, the Memory Timeline plans them as `kiln
memory` does, and the screenshot command renders them."""

from __future__ import annotations

import json

import pytest

from app import cli
from tests.gui.helpers import check_pictures, make_window, open_and_wait, run_gui_fresh
from tests.tflite.built_models import BUILT, KINDS
from tests.tflite.writer import write

MODELS = [pytest.param(name, integer, id=f"{name}-{'int8' if integer else 'float'}")
          for name in BUILT for integer in KINDS[name]]


# Operators each built model shows on the canvas (its resize, its unrolled LSTM gates).
EXPECTED = {("segmentation", False): {"Conv", "Resize"},
            ("segmentation", True): {"QLinearConv", "IntResizeBilinear"},
            ("kws_lstm", False): {"Sigmoid", "Tanh", "Gemm", "Softmax"},
            ("kws_lstm", True): {"IntLSTMStep", "QLinearSoftmax"}}


def _written(tmp_path, name: str, integer: bool):
    path = tmp_path / f"{name}_{'int8' if integer else 'float'}.tflite"
    path.write_bytes(write(BUILT[name](integer)[0]))
    return path


@pytest.mark.parametrize("name,integer", MODELS)
def test_a_built_model_opens_with_its_passes_and_memory_plan(qtbot, capsys, tmp_path, name,
                                                             integer):
    path = _written(tmp_path, name, integer)
    window = make_window(qtbot, None)
    controller = window.stepping
    with qtbot.waitSignals([controller.resultReady, window.lowering.recordsReady],
                           timeout=120000):
        open_and_wait(qtbot, window, path)
    ops = {n.op for n in window.document.graph.nodes}
    assert EXPECTED[name, integer] <= ops, f"{sorted(ops)}"
    rows = controller.panel.rows()
    assert rows[0].name == "loaded" and len(rows) == len(controller.result.records) + 1
    memory = window.memory
    qtbot.waitUntil(lambda: not memory.is_busy() and memory.current is not None
                    and memory.current.graph is window.document.graph, timeout=60000)
    assert cli.main(["memory", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    shown = sorted((b.name, b.size, b.offset) for b in memory.timeline.bars)
    assert shown == sorted((b["name"], b["size"], b["offset"]) for b in printed["buffers"])
    assert memory.timeline.arena == printed["activations"]


@pytest.mark.parametrize("name,integer", MODELS)
def test_the_screenshot_command_renders_a_built_model(tmp_path, name, integer):
    path = _written(tmp_path, name, integer)
    folder = tmp_path / "shots"
    result = run_gui_fresh([str(path), "--screenshot", str(folder)], tmp_path,
                  {"QT_QPA_PLATFORM": "offscreen"}, tmp_path / "config")
    assert result.returncode == 0, result.stderr
    check_pictures(folder, ["main_window", "passes", "memory_timeline", "canvas_fit"])
