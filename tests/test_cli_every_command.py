"""Every `kiln` command, walked from the command table: `--json` prints one JSON document and
nothing else on stdout, `--quiet` keeps stdout to the result, and a command added without an
entry here fails the walk."""

from __future__ import annotations

import json

import pytest

from app import cli
from tests.conftest import SAMPLE_MODEL

MODEL = str(SAMPLE_MODEL)


def _arguments(tmp) -> dict[str, list[str]]:
    """The smallest useful invocation of each command (files it needs made first)."""
    profile, explore = str(tmp / "p.json"), str(tmp / "EXPLORE.json")
    return {
        "inspect": [MODEL],
        "run": [MODEL],
        "passes": [MODEL],
        "memory": [MODEL, "--board", "stm32f746g-disco"],
        "compile": [MODEL, "-o", str(tmp / "bundle")],
        "bench": [MODEL, "--repeats", "1", "--runs", "1"],
        "profile": [MODEL, "--data", "digits:train", "-o", profile],
        "quantize": [MODEL, "--profile", profile, "-o", str(tmp / "q.onnx")],
        "diff": [MODEL, MODEL],
        "walkthrough": [MODEL, "-o", str(tmp / "walk")],
        "report": [MODEL, "-o", str(tmp / "report.html")],
        "explore": [MODEL, "--data", "digits:train", "--eval", "digits:test", "--trials", "2",
                    "--population", "2", "--workers", "0", "-o", explore],
        "explore-export": [explore, "--point", "0", "-o", str(tmp / "point")],
        "firmware": [MODEL, "--target", "cortex-m7", "-o", str(tmp / "firmware")],
        "validate": [MODEL, "--target", "cortex-m7", "--port", "qemu", "-n", "1"],
        "tune": [str(tmp / "q.onnx"), "--target", "cortex-m7", "--trials", "2", "--workers",
                 "0", "--log", str(tmp / "tuning.jsonl")],
    }


ORDER = ["inspect", "run", "passes", "memory", "compile", "bench", "profile", "quantize",
         "diff", "walkthrough", "report", "explore", "explore-export", "firmware", "validate",
         "tune"]


def test_the_walk_covers_the_command_table(tmp_path):
    assert sorted(_arguments(tmp_path)) == sorted(cli.COMMANDS) == sorted(ORDER)


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """command -> (exit code, stdout, stderr) of each command run with --json, in order."""
    pytest.importorskip("optuna")
    tmp = tmp_path_factory.mktemp("walk")
    args = _arguments(tmp)
    results = {}
    import contextlib
    import io

    for name in ORDER:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main([name, *args[name], "--json"])
        results[name] = (code, out.getvalue(), err.getvalue())
    return results


@pytest.mark.parametrize("name", ORDER)
def test_json_is_one_document_on_stdout(walked, name):
    code, out, err = walked[name]
    assert code == 0, err
    doc = json.loads(out)  # one document, nothing else
    assert isinstance(doc, dict) and doc, out[:200]


def test_quiet_leaves_only_the_result(tmp_path, capsys):
    assert cli.main(["compile", MODEL, "-o", str(tmp_path / "b"), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    assert cli.main(["compile", MODEL, "-o", str(tmp_path / "b"), "--verbose"]) == 0
    out, err = capsys.readouterr()
    assert "wrote" in out and "kiln: compile took" in err and "peak memory" in err
    assert cli.main(["compile", MODEL, "-o", str(tmp_path / "b"), "-q", "-v"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
