"""Autosave and recovery: a killed Kiln loses nothing; a normal close leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from app.document import recovery
from app.window.mainwindow import MainWindow
from tests.gui.helpers import CHILD_OPENS_MODEL, copy_sample, make_window, run_and_kill

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120000

# A Kiln window in another process: open the model, edit it, tune a range, let the autosave
# write, say so, then wait to be killed.
CHILD = CHILD_OPENS_MODEL + """
doc = window.document
node = next(n for n in doc.graph.nodes if n.name == "conv2")
doc.apply(edit.rename_node, "Rename", node.id, "conv_two")
calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test", Normalization()))
window.quant.set_range(0.0, 2.25, "relu1_out")
window.recovery.autosave()
print("saved", flush=True)
while True:
    app.processEvents(); time.sleep(0.05)
"""


def _restarted(qtbot, message_boxes):
    """The next start: a new window whose recovery offer is answered Open and restored."""
    window = MainWindow(remember=False)
    qtbot.addWidget(window, before_close_func=lambda w: w.document.undo_stack.setClean())
    window.show()
    message_boxes.answer = QMessageBox.StandardButton.Open
    with qtbot.waitSignal(window.sessions.restored, timeout=TIMEOUT):
        assert window.recovery.offer() == recovery.RESTORE
    return window


def test_after_a_kill_the_next_start_restores_the_graph_and_ranges(qtbot, tmp_path,
                                                                   message_boxes):
    model = copy_sample(tmp_path)
    pid = run_and_kill(CHILD, model)
    left = recovery.orphans()
    assert [p.name for p in left] == [f"{pid}.kiln"]
    saved = json.loads(left[0].read_text())
    overrides = saved["quantization"]["recipe"]["profile"]["overrides"]
    assert overrides["relu1_out"] == {"max": 2.25, "min": 0.0}

    window = _restarted(qtbot, message_boxes)
    assert message_boxes.kinds() == ["question"]
    doc = window.document
    assert any(n.name == "conv_two" for n in doc.graph.nodes)
    assert window.quant.session.profile.overrides["relu1_out"] == {"min": 0.0, "max": 2.25}
    assert doc.path == model and doc.is_dirty()  # unsaved changes to the model's own file
    qtbot.waitUntil(lambda: not recovery.orphans(), timeout=5000)  # taken back: gone


def test_discard_and_later_and_a_normal_close(qtbot, tmp_path, message_boxes):
    folder = recovery.recovery_dir()
    folder.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = folder / f"{dead}.kiln"
    stale.write_text("{}")
    window = make_window(qtbot)
    message_boxes.answer = QMessageBox.StandardButton.Ignore
    assert window.recovery.offer() == recovery.LATER and stale.exists()
    message_boxes.answer = QMessageBox.StandardButton.Discard
    assert window.recovery.offer() == recovery.DISCARD and not stale.exists()
    assert window.recovery.offer() is None

    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    from compiler import edit

    node = next(n for n in window.document.graph.nodes if n.name == "conv1")
    window.document.apply(edit.rename_node, "Rename", node.id, "first")  # autosaves at once
    mine = window.recovery.path
    qtbot.waitUntil(lambda: not window.recovery.is_busy(), timeout=5000)  # written by a worker
    assert mine.exists() and json.loads(mine.read_text())["edited"]
    assert window.save()  # nothing unsaved any more: the recovery file goes
    assert not mine.exists()
    window.document.apply(edit.rename_node, "Rename", node.id, "again")
    qtbot.waitUntil(mine.exists, timeout=5000)
    message_boxes.answer = QMessageBox.StandardButton.Discard
    window.close()  # a normal close (the question answered): nothing left to recover
    assert not mine.exists() and not list(folder.glob(f"{os.getpid()}.*"))


# A Kiln window that applies an exploration point with per-tensor weights, a layer in float
# and bias corrections (measured for real, written as EXPLORE.json), autosaves and is killed.
CHILD_APPLIES_POINT = CHILD_OPENS_MODEL + """
from pathlib import Path
from compiler.explore.config import Config
from compiler.explore.measure import measure
from compiler.explore.problem import ProblemSpec, load_problem
from compiler.explore.record import Record, Trial, write_record
calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test", Normalization()))
spec = ProblemSpec(sys.argv[1], "digits:train", "digits:test", "cortex-m7", None, 0.01)
problem = load_problem(spec)
config = Config(keep_float=("relu1_out",), float_weights=("conv2",), per_channel=False,
                bias_correction=True, lean_weights=False)
record = Record({"problem": spec.to_json(), "seed": 0, "sampler": "nsga2", "population": 8})
record.trials.append(Trial(0, config.key(), config.to_json(), {},
                           {"measurement": measure(problem, config).to_json()}, True))
path = Path(sys.argv[1]).with_name("EXPLORE.json")
write_record(record, path)
window.explore.use_file(path)
before = window.quant.session
window.explore.apply(0)
while window.quant.session is before:
    app.processEvents(); time.sleep(0.05)
window.recovery.autosave()
print("saved", flush=True)
while True:
    app.processEvents(); time.sleep(0.05)
"""


def test_after_a_kill_an_applied_exploration_point_comes_back_whole(qtbot, tmp_path,
                                                                      message_boxes):
    from compiler.explore.apply import apply_point
    from compiler.explore.record import read_record
    from compiler.ir.dump import dump

    model = copy_sample(tmp_path)
    run_and_kill(CHILD_APPLIES_POINT, model)
    window = _restarted(qtbot, message_boxes)
    session = window.quant.session
    assert not session.options.per_channel and session.options.float_weights == ("conv2",)
    assert session.profile.keep_float == ["relu1_out"] and session.corrections
    point = apply_point(read_record(model.with_name("EXPLORE.json")), 0)
    assert dump(window.document.quant.quantized()) == dump(point.qdq)
