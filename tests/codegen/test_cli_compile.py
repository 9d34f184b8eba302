"""`kiln compile` writes a bundle, reports it, and refuses bad targets and names in one line."""

from __future__ import annotations

import json

from app.cli import main
from tests.conftest import SAMPLE_MODEL


def test_compile_writes_bundle(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "--target", "cortex-m7", "-o", str(tmp_path),
                 "--name", "digits"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "digits.h", "digits.o", "digits.report.json"]
    assert "cortex-m7" in capsys.readouterr().out
    assert (tmp_path / "digits.o").read_bytes()[:4] == b"\x7fELF"


def test_compile_json_is_one_document(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["name"] == "net" and doc["target"] == "host"
    assert doc["outputs"][0]["name"] == "logits"


def test_compile_refuses_unknown_target_and_bad_name(tmp_path, capsys):
    assert main(["compile", str(SAMPLE_MODEL), "--target", "z80", "-o", str(tmp_path)]) == 2
    assert "unknown target 'z80'" in capsys.readouterr().err
    assert main(["compile", str(SAMPLE_MODEL), "-o", str(tmp_path), "--name", "1net"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "C identifier" in err
    assert not any(tmp_path.iterdir())
