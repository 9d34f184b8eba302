"""`kiln --screenshot DIR` writes real pictures, then exits (the no-display fallback of `make
run`: tests/gui/test_export_whole.py)."""


import pytest
from PySide6.QtGui import QImage

from tests.conftest import ROOT
from tests.gui.helpers import DENSENET, check_pictures, run_gui_fresh

PANELS = ["main_window", "canvas_fit", "canvas_zoomed", "properties", "properties_full",
          "minimap", "palette", "problems", "search", "activations"]


def test_screenshot_option_writes_each_panel(tmp_path):
    folder = tmp_path / "shots"
    config = tmp_path / "config"
    result = run_gui_fresh(["--screenshot", str(folder)], ROOT,
                           {"QT_QPA_PLATFORM": "offscreen"}, config)
    assert result.returncode == 0, result.stderr
    check_pictures(folder, PANELS)
    assert f"written to {folder}" in result.stdout
    assert QImage(str(folder / "main_window.png")).width() >= 1000
    assert not (config / "Kiln").exists()  # a scripted run leaves the user's settings alone


@pytest.mark.slow
def test_screenshot_of_a_big_model(tmp_path):
    folder = tmp_path / "shots"
    result = run_gui_fresh([str(DENSENET), "--screenshot", str(folder)], ROOT,
                  {"QT_QPA_PLATFORM": "offscreen"}, tmp_path / "config")
    assert result.returncode == 0, result.stderr
    check_pictures(folder, PANELS)


def test_bad_model_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"nonsense")
    result = run_gui_fresh([str(bad), "--screenshot", str(tmp_path / "s")], tmp_path,
                  {"QT_QPA_PLATFORM": "offscreen"}, tmp_path / "config")
    assert result.returncode == 2
    lines = result.stderr.splitlines()  # the offscreen platform's notes are not shown
    assert len(lines) == 1 and lines[0].startswith("bad.onnx: ") and "Traceback" not in lines[0]


def test_bad_option_exits_2(tmp_path):
    result = run_gui_fresh(["--nope"], tmp_path, {"QT_QPA_PLATFORM": "offscreen"},
                           tmp_path / "config")
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr
