"""Sessions from anywhere: `kiln X.kiln`, the desktop entry's `kiln %f`, and a recovery that is
offered once, named by its model and the time it was saved."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from app import main as kiln
from app.document import recovery
from app.document.sessions import save_session
from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from app.window.mainwindow import MainWindow
from compiler import edit
from compiler.passes import Pipeline
from compiler.quant.calibration_data import Normalization
from tests.conftest import ROOT
from tests.gui.helpers import copy_sample, make_window, node_id

TIMEOUT = 120000


def _day_of_work(qtbot, tmp_path: Path, session: Path) -> dict:
    """Edit the sample, change pipeline and target, tune a range, save `session`; what was set."""
    window = make_window(qtbot, copy_sample(tmp_path))
    doc = window.document
    doc.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    pipeline = Pipeline.from_json(doc.pipeline.to_json())
    pipeline.passes[1].enabled = False
    doc.set_pipeline(pipeline)
    doc.set_target("cortex-m4")
    calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test",
                                                   Normalization()))
    window.quant.set_range(0.0, 2.25, "relu1_out")
    save_session(window, session)
    doc.undo_stack.setClean()
    window.close()
    return {"pipeline": pipeline.to_json(), "target": "cortex-m4",
            "range": {"min": 0.0, "max": 2.25}}


def _dead_pid() -> int:
    """The id of a process that has ended (a crashed Kiln's, as far as recovery can tell)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


class _Running:
    """Stands for the running application in `run_gui`: runs events until `until` is emitted
    by the window the run made, then returns as `exec()` does when the user quits."""

    def __init__(self, qtbot, opened: list[MainWindow], until: str):
        self.qtbot, self.opened, self.until = qtbot, opened, until

    def exec(self) -> int:
        (window,) = self.opened
        self.qtbot.addWidget(window, before_close_func=lambda w: w.document.undo_stack.setClean())
        if self.until:
            with self.qtbot.waitSignal(getattr(window.sessions, self.until), timeout=TIMEOUT):
                pass
        return 0


def _recorded_windows(monkeypatch) -> list[MainWindow]:
    """Every main window `run_gui` makes from now on, kept for the test to look at."""
    opened: list[MainWindow] = []

    class Recorded(MainWindow):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr("app.window.mainwindow.MainWindow", Recorded)
    return opened


def test_kiln_with_a_session_file_opens_the_session(qtbot, tmp_path, monkeypatch, capsys):
    session = tmp_path / "day.kiln"
    saved = _day_of_work(qtbot, tmp_path, session)
    opened = _recorded_windows(monkeypatch)
    shots = tmp_path / "shots"
    assert kiln.main([str(session), "--screenshot", str(shots)]) == 0
    out = capsys.readouterr().out
    assert f"Screenshots of session day.kiln (digits_cnn.onnx) written to {shots}/" in out
    assert (shots / "main_window.png").is_file()
    (window,) = opened
    doc = window.document
    assert any(n.name == "conv_two" for n in doc.graph.nodes)  # the edits
    assert doc.pipeline.to_json() == saved["pipeline"]
    assert doc.target == saved["target"]
    assert window.quant.session.profile.overrides["relu1_out"] == saved["range"]


def test_with_a_display_the_window_opens_the_session(qtbot, tmp_path, monkeypatch,
                                                     message_boxes):
    session = tmp_path / "day.kiln"
    saved = _day_of_work(qtbot, tmp_path, session)
    opened = _recorded_windows(monkeypatch)
    monkeypatch.setattr("app.window.gui.has_display", lambda: True)
    monkeypatch.setattr("app.window.gui._application", lambda: _Running(qtbot, opened, "restored"))
    assert kiln.main([str(session)]) == 0
    (window,) = opened
    assert window.isVisible() and "digits_cnn" in window.windowTitle()
    assert any(n.name == "conv_two" for n in window.document.graph.nodes)
    assert window.document.target == saved["target"]
    assert window.quant.session.profile.overrides["relu1_out"] == saved["range"]
    assert message_boxes.shown == []


def test_with_a_display_a_corrupt_session_is_one_sentence_in_the_window(qtbot, tmp_path,
                                                                        monkeypatch,
                                                                        message_boxes):
    session = tmp_path / "broken.kiln"
    session.write_text("{\"kiln_session\": 1, \"view\": ")
    opened = _recorded_windows(monkeypatch)
    monkeypatch.setattr("app.window.gui.has_display", lambda: True)
    monkeypatch.setattr("app.window.gui._application", lambda: _Running(qtbot, opened, ""))
    assert kiln.main([str(session)]) == 0  # the window stays open, empty
    assert message_boxes.kinds() == ["critical"]
    text = message_boxes.shown[0][2]
    assert text.startswith(f"{session} is not a Kiln session") and "\n" not in text
    assert opened[0].document.graph is None


@pytest.mark.parametrize("content, reason", [
    (b"{\"kiln_session\": 1, \"model\"", "is not a Kiln session"),
    (b"\xff\xfe\x00garbage", "is not a Kiln session"),
    (b"[1, 2]", "is not a Kiln session of version 1"),
    (b"{\"kiln_session\": 1}", "is not a readable Kiln session (no 'model' entry)"),
    (b"{\"kiln_session\": 1, \"model\": {\"path\": null, \"sha256\": null}}",
     "is not a readable Kiln session (it names no model file)"),
])
def test_a_corrupt_session_file_is_one_sentence_naming_it(tmp_path, capsys, content, reason):
    session = tmp_path / "broken.kiln"
    session.write_bytes(content)
    assert kiln.main([str(session), "--screenshot", str(tmp_path / "shots")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"{session} {reason}"), err
    assert not (tmp_path / "shots").exists()  # refused before any window


def test_a_session_with_a_damaged_setting_is_refused_before_opening(qtbot, tmp_path, capsys):
    session = tmp_path / "day.kiln"
    _day_of_work(qtbot, tmp_path, session)
    doc = json.loads(session.read_text())
    doc["target"] = "cortex-z9"
    session.write_text(json.dumps(doc))
    assert kiln.main([str(session), "--screenshot", str(tmp_path / "shots")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{session} is not a readable Kiln session (unknown target "
                          f"'cortex-z9'"), err
    assert "\n" not in err


def _desktop_exec(entry: Path) -> list[str]:
    """The Exec line of a desktop entry's [Desktop Entry] group, split as a launcher does."""
    group = None
    for line in entry.read_text().splitlines():
        if line.startswith("["):
            group = line.strip()
        elif group == "[Desktop Entry]" and line.startswith("Exec="):
            return shlex.split(line.removeprefix("Exec="))
    raise AssertionError(f"{entry.name} has no Exec line")


def test_the_desktop_entry_opens_a_double_clicked_session(qtbot, tmp_path):
    """Run `Exec=kiln %f` as a file manager would, offscreen: the run ends on its own."""
    session = tmp_path / "day.kiln"
    _day_of_work(qtbot, tmp_path, session)
    command = _desktop_exec(ROOT / "packaging" / "kiln.desktop")
    assert command[0] == "kiln" and "%f" in command
    kiln = Path(sys.executable).parent / "kiln"  # the console script of this environment
    assert kiln.is_file(), f"no kiln script beside {sys.executable} (pip install -e .)"
    argv = [str(kiln)] + [str(session) if part == "%f" else part for part in command[1:]]
    cwd = tmp_path / "home"  # a file manager starts it in some folder; nothing lands there
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "ran offscreen on session day.kiln (digits_cnn.onnx)" in done.stdout, done.stdout
    written = tmp_path / "data" / "kiln" / "offscreen run"  # the user's data folder
    assert list(cwd.iterdir()) == [] and f"written to {written / 'bundle'}/" in done.stdout
    assert (written / "screenshots" / "main_window.png").is_file()
    header = (written / "bundle" / "net.h").read_text()
    assert "int net(" in header


def test_a_restored_recovery_is_not_offered_again_after_a_normal_quit(qtbot, tmp_path,
                                                                      message_boxes):
    crash = recovery.recovery_dir() / f"{_dead_pid()}.kiln"
    crash.parent.mkdir(parents=True, exist_ok=True)
    window = make_window(qtbot, copy_sample(tmp_path))
    doc = window.document
    doc.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test",
                                                   Normalization()))
    window.quant.set_range(0.0, 2.25, "relu1_out")
    save_session(window, crash)  # what the crashed Kiln's autosave left
    doc.undo_stack.setClean()
    window.close()

    again = MainWindow(remember=False)
    qtbot.addWidget(again, before_close_func=lambda w: w.document.undo_stack.setClean())
    again.show()
    message_boxes.answer = QMessageBox.StandardButton.Open
    with qtbot.waitSignal(again.modelLoaded, timeout=TIMEOUT):
        assert again.recovery.offer() == recovery.RESTORE
    assert any(n.name == "conv_two" for n in again.document.graph.nodes)
    # The user has the work back and quits at once (the ranges are still being restored).
    message_boxes.answer = QMessageBox.StandardButton.Discard
    again.close()
    assert recovery.orphans() == []

    later = make_window(qtbot, None)
    shown = len(message_boxes.shown)
    assert later.recovery.offer() is None
    assert len(message_boxes.shown) == shown  # no second question


def test_an_unreadable_recovery_is_reported_once_and_removed(qtbot, message_boxes):
    crash = recovery.recovery_dir() / f"{_dead_pid()}.kiln"
    crash.parent.mkdir(parents=True, exist_ok=True)
    crash.write_text("{\"kiln_session\": 1, \"edi")  # cut short by the crash
    window = make_window(qtbot, None)
    message_boxes.answer = QMessageBox.StandardButton.Open
    assert window.recovery.offer() == recovery.DISCARD  # so run_gui opens the model instead
    assert message_boxes.kinds() == ["question", "critical"]
    assert str(crash) in message_boxes.shown[1][2]
    assert not crash.exists() and window.recovery.offer() is None


def test_the_recovery_prompt_names_the_model_and_the_time(qtbot, tmp_path, message_boxes):
    crash = recovery.recovery_dir() / f"{_dead_pid()}.kiln"
    crash.parent.mkdir(parents=True, exist_ok=True)
    window = make_window(qtbot, copy_sample(tmp_path))
    window.document.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    save_session(window, crash)
    saved = datetime.now().replace(hour=14, minute=5, second=0, microsecond=0)
    os.utime(crash, (saved.timestamp(), saved.timestamp()))

    message_boxes.answer = QMessageBox.StandardButton.Ignore
    assert window.recovery.offer() == recovery.LATER
    kind, title, text = message_boxes.shown[-1]
    assert kind == "question" and title == recovery.TITLE
    assert "digits_cnn.onnx" in text and "today at 14:05" in text
    assert crash.name not in text and ".kiln" not in text  # not the PID file


def test_human_time_says_when_as_a_person_does():
    now = datetime(2025, 6, 12, 16, 40)  # a Thursday
    assert recovery.human_time(now - timedelta(minutes=3), now) == "today at 16:37"
    assert recovery.human_time(datetime(2025, 6, 11, 9, 5), now) == "yesterday at 9:05"
    assert recovery.human_time(datetime(2025, 6, 9, 23, 59), now) == "on Monday at 23:59"
    assert recovery.human_time(datetime(2025, 3, 2, 8, 0), now) == "on 2 March at 8:00"
    assert recovery.human_time(datetime(2024, 12, 31, 18, 30), now) == \
        "on 31 December 2024 at 18:30"
