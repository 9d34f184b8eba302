"""`kiln explore` and `kiln explore-export` from the command line: output, errors, the extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import onnx
import pytest

from app.cli import main
from tests.conftest import ROOT, SAMPLE_MODEL


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_in_process_run_prints_the_front_and_exports_a_point(tmp_path, capsys):
    output = tmp_path / "EXPLORE.json"
    assert main(["explore", str(SAMPLE_MODEL), "--data", "digits:train", "--eval",
                 "digits:test", "--max-drop", "0.5", "--trials", "4", "--population", "4",
                 "--workers", "0", "-o", str(output)]) == 0
    out, err = capsys.readouterr()
    assert err.count("  trial ") == 4  # progress with stderr not a terminal (a CI log)
    doc = json.loads(output.read_text())
    assert f"{len(doc['front'])} points" in out and (tmp_path / "EXPLORE.png").is_file()
    number = doc["best_feasible"]["instructions"]
    assert main(["explore-export", str(output), "--point", str(number), "-o",
                 str(tmp_path / "bundle")]) == 0
    report = json.loads((tmp_path / "bundle" / "net.report.json").read_text())
    m = doc["trials"][number]["measurement"]
    assert report["sections"]["text"] + report["sections"]["rodata"] + \
        report["regions"]["constant"] == m["flash"]
    # The point's bundle records its recipe: kiln compile --build writes the same files.
    assert main(["compile", str(SAMPLE_MODEL), "--build",
                 str(tmp_path / "bundle" / "net.build.json"), "-o", str(tmp_path / "again")]) == 0
    first = {p.name: p.read_bytes() for p in (tmp_path / "bundle").iterdir()}
    assert first == {p.name: p.read_bytes() for p in (tmp_path / "again").iterdir()}
    assert main(["explore-export", str(output), "--point", str(number), "-o",
                 str(tmp_path / "point.onnx")]) == 0
    assert any(n.op_type == "QuantizeLinear"
               for n in onnx.load(tmp_path / "point.onnx").graph.node)
    capsys.readouterr()
    assert main(["explore-export", str(output), "--point", "99", "-o",
                 str(tmp_path / "b2")]) == 2
    assert "has no trial 99" in _one_line_error(capsys)


@pytest.mark.parametrize("args, words", [
    (["--eval", "missing.npz"], "missing.npz"),
    (["--max-drop", "150"], "--max-drop"),
    (["--target", "pdp11"], "unknown target"),
    (["--board", "nrf52840-dk"], "cortex-m4"),
    (["--trials", "0"], "--trials"),
])
def test_bad_arguments_are_one_sentence(args, words, tmp_path, capsys):
    base = {"--eval": "digits:test", "--max-drop": "0.5", "--target": "cortex-m7",
            "--trials": "2"}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = str(tmp_path / value) if value.endswith(".npz") else value
    argv = ["explore", str(SAMPLE_MODEL), "--data", "digits:train", "--workers", "0",
            "-o", str(tmp_path / "E.json")] + [x for kv in base.items() for x in kv]
    assert main(argv) == 2
    assert words in _one_line_error(capsys)
    assert not (tmp_path / "E.json").exists()


def test_without_the_extra_the_command_says_how_to_install_it(tmp_path):
    """Ray and Optuna hidden from the interpreter: one sentence naming the extra."""
    code = ("import sys; sys.modules['optuna'] = None; sys.modules['ray'] = None; "
            "from app.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run(
        [sys.executable, "-c", code, "explore", str(SAMPLE_MODEL), "--data", "digits:train",
         "--eval", "digits:test", "-o", str(tmp_path / "E.json")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=120)
    assert done.returncode == 2
    assert "pip install 'kiln[explore]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
