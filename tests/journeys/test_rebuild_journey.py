"""From the window to a firmware repository's CI: a tuned int8 export rebuilt byte for byte.

On KWS and ResNet-8 float, with the mouse: calibrate from the Calibrate dialog, drag a range,
keep a tensor float, apply an exploration point that uses per-tensor weights and bias
correction (clicked on the Explore panel's scatter), export for stm32f746g-disco. Then, in a
new process as a CI job runs it, `kiln compile MODEL --build DIR/net.build.json -o DIR2`:
every file has the SHA-256 of its twin. The same after Save Session, a new window (the old
one closed) and a second export. For that state the Activations panel's int8 output, the
Compare window's int8 side and the exported object run in firmware under QEMU give the same
bytes. The SHA-256 of every file is printed (`-s` shows them).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from app.document.sessions import save_session
from app.export.controller import driver_options
from compiler.activations.sample import SampleSpec
from compiler.codegen.targets import BOARDS
from compiler.driver import compilation
from compiler.explore.config import Config
from compiler.explore.front import best_per_objective, pareto
from compiler.explore.measure import measure
from compiler.explore.problem import ProblemSpec, load_problem
from compiler.explore.record import Record, Trial, write_record
from compiler.interpreter import run
from tests.codegen import firmware as firmware_tests
from tests.gui.helpers import click_row, make_window
from tests.journeys.data import model_path
from tests.journeys.window_steps import TIMEOUT, calibrate, drag, export, samples_folder
from views.export_dialog import ExportOptions

ROOT = Path(__file__).resolve().parents[2]
BOARD = "stm32f746g-disco"


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir())}


def _rebuild_in_a_new_process(model: Path, bundle: Path, out: Path,
                              float_layers: list[str]) -> dict[str, str]:
    """`kiln compile MODEL --build bundle/net.build.json -o out`, as a CI job runs it.

    Its only words on stderr are a warning for each layer the export said stays float.
    """
    done = subprocess.run([sys.executable, "-m", "app.cli", "compile", str(model), "--build",
                           str(bundle / "net.build.json"), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    warned = [line.removeprefix("kiln: warning: layer ").split(" stays float")[0]
              for line in done.stderr.splitlines()]
    assert warned == float_layers, done.stderr
    return _hashes(out)


def _one_point_exploration(model: Path, samples: Path, profile: Path, kept: str,
                           method: str, path: Path) -> int:
    """An EXPLORE.json with one measured point: per-tensor weights, bias correction, `kept`
    float, on the window's tuned profile (measured as `kiln explore` measures, under QEMU)."""
    spec = ProblemSpec(str(model), str(samples), str(samples), "cortex-m7", BOARD, 0.5,
                       str(profile))
    problem = load_problem(spec)
    config = Config(keep_float=(kept,), method=method, bias_correction=True,
                    per_channel=False).normalized()
    measured = measure(problem, config)
    trial = Trial(0, config.key(), config.to_json(), {},
                  {"measurement": measured.to_json(), "worker": {"pid": 0}, "seconds": 0.0},
                  True, "search")
    record = Record({"problem": spec.to_json(), "seed": 0, "sampler": "nsga",
                     "population": 1}, problem.float_score, problem.labelled, None, [trial],
                    complete=True)
    record.front = pareto([(0, measured)])
    record.best = best_per_objective([(0, measured)])
    write_record(record, path)
    return 0


def _click_point(qtbot, scatter, number: int) -> None:
    at = scatter.position(number)
    assert at is not None and scatter.point_at(at) == number
    qtbot.mouseClick(scatter, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPoint(round(at.x()), round(at.y())))


def _output_codes(graph, feeds) -> tuple[np.ndarray, object]:
    """The int8 tensor a final graph dequantizes into its output, on `feeds`, and its quant."""
    node = graph.outputs[0].producer
    assert node is not None and node.op == "DequantizeLinear", node
    codes = node.inputs[0]
    return np.asarray(run(graph, feeds, keep_all=True)[codes.name]), codes.type.quant


@pytest.mark.slow
@pytest.mark.parametrize("model", ["kws_ref_model_float32", "pretrainedResnet"])
def test_a_tuned_export_rebuilds_byte_for_byte_in_ci(model, qtbot, tmp_path, monkeypatch):
    from compiler.mcu import firmware

    firmware_tests.require_tools()
    path = model_path(model, tmp_path)
    samples = samples_folder(model, tmp_path / "samples")
    window = make_window(qtbot, path)
    window.resize(1400, 900)
    calibrate(qtbot, window, samples, model)
    quant, panel = window.quant, window.quant.panel
    names = [row.tensor for row in panel.model.rows]
    tuned, kept = names[len(names) // 2], names[1]
    click_row(qtbot, panel, tuned)
    view = panel.histogram
    qtbot.waitUntil(lambda: not window.dock_sizes.busy(), timeout=5000)
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        drag(qtbot, view, view.x_of(view.high), view.x_of(view.low + (view.high - view.low) / 3))
    assert tuned in quant.session.profile.overrides
    click_row(qtbot, panel, kept)
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        qtbot.mouseClick(panel.keep_float, Qt.MouseButton.LeftButton)
    assert kept in quant.session.profile.keep_float

    # An exploration point on that tuning: per-tensor weights and bias correction.
    profile = tmp_path / "tuned.profile.json"
    quant.session.profile.save(profile)
    exploration = tmp_path / "EXPLORE.json"
    number = _one_point_exploration(path, samples, profile, kept, quant.session.options.method,
                                    exploration)
    explore = window.explore
    explore.action.trigger()
    explore.use_file(exploration)
    with qtbot.waitSignal(explore.applied, timeout=TIMEOUT):
        _click_point(qtbot, explore.panel.scatter, number)
    recipe = window.document.quant.recipe()
    assert not recipe.per_channel and recipe.corrections and kept in recipe.profile.keep_float
    assert recipe.profile.overrides[tuned] == quant.session.profile.overrides[tuned]

    # Export for the board; a CI job rebuilds it in another process.
    first = tmp_path / "first"
    options = ExportOptions("cortex-m7", BOARD, "net", "embedded", False, first)
    dialog = export(qtbot, window, options, False)
    assert f"--build {first / 'net.build.json'}" in dialog.rebuild_line.text()
    float_layers = [layer for layer, _ in window.export.last.fallbacks]
    # The kept tensor leaves a layer in float: the dialog says so, naming it.
    assert dialog.fallback_label.isVisible() == bool(float_layers)
    assert all(layer in dialog.fallback_label.text() for layer in float_layers)
    dialog.close()
    exported = _hashes(first)
    # The bundle, and the firmware that builds and runs it (README.md says how).
    assert set(exported) == {"net.build.json", "net.h", "net.o", "net.report.json", "main.c",
                             "Makefile", "README.md", "board.ld", "sections.ld", "startup.c",
                             "net.input.bin"}
    # The build file goes into a firmware repository: no folder of this machine in it.
    assert str(tmp_path) not in (first / "net.build.json").read_text()
    assert _rebuild_in_a_new_process(path, first, tmp_path / "ci", float_layers) == exported
    print(f"\n{model}: exported and rebuilt in CI, SHA-256:")
    for name, digest in exported.items():
        print(f"  {name:18} {digest}")

    # The same bytes from the Activations panel, the Compare window and the firmware.
    sample = SampleSpec(str(samples), 0)
    activations = window.activations
    with qtbot.waitSignal(activations.ran, timeout=TIMEOUT):
        activations.run(sample)
    result = activations.result
    float_out = window.document.graph.outputs[0].name
    shown = result.int8[float_out]
    with qtbot.waitSignal(window.compare.shown, timeout=TIMEOUT):
        window.compare.int8_action.trigger()
    int8_side = window.compare.result.diff.b.graph
    x = result.values[window.document.graph.inputs[0].name]
    feeds = {int8_side.inputs[0].name: x}
    compared, quant_params = _output_codes(int8_side, feeds)
    qdq = window.document.quant.quantized()
    compiled = compilation(qdq, window.document.pipeline)
    chosen, _ = compiled.layout_that_fits(driver_options(options), BOARDS[BOARD])
    net = compiled.net(chosen)
    assert net.object == (first / "net.o").read_bytes()  # the exported object itself
    machine = firmware.board_for("cortex-m7").qemu_machine
    on_board = firmware_tests.outputs_on(net, feeds, machine, tmp_path / "qemu")
    (board_out,) = on_board.values()
    scale, zero = np.float32(quant_params.scale[0]), int(quant_params.zero_point[0])
    from_board = np.rint(board_out.astype(np.float64) / scale).astype(np.int64) + zero
    assert np.array_equal(shown.codes.reshape(-1), compared.reshape(-1))
    assert np.array_equal(compared.reshape(-1).astype(np.int64), from_board.reshape(-1))
    assert np.array_equal(board_out.reshape(-1), (scale * (compared.reshape(-1).astype(
        np.float32) - np.float32(zero))).astype(np.float32))

    # Save the session, quit (the quantization edits are in the session: discard them when
    # asked), reopen the session in a new window, export again.
    session = save_session(window, tmp_path / "tuned.kiln")
    from PySide6.QtWidgets import QMessageBox

    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[1]) or
                        QMessageBox.StandardButton.Discard)
    window.close()
    assert asked == ["Unsaved changes"] and not window.isVisible()
    again = make_window(qtbot, None)
    with qtbot.waitSignal(again.sessions.restored, timeout=TIMEOUT):
        assert again.sessions.open_session(session)
    qtbot.waitUntil(lambda: not again.quant.is_busy(), timeout=TIMEOUT)
    restored = again.document.quant.recipe()
    assert restored is not None and restored.to_json() == recipe.to_json()
    second = tmp_path / "second"
    dialog = export(qtbot, again, ExportOptions("cortex-m7", BOARD, "net", "embedded", False,
                                                second), False)
    dialog.close()
    assert _hashes(second) == exported
    assert _rebuild_in_a_new_process(path, second, tmp_path / "ci2", float_layers) == exported
