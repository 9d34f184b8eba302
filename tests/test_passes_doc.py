"""docs/passes.md is generated from the passes' docstrings and must be current."""

from pathlib import Path

from compiler.passes.doc import render

DOC = Path(__file__).resolve().parents[1] / "docs" / "passes.md"


def test_passes_doc_is_up_to_date():
    assert DOC.exists(), "docs/passes.md is missing: run `make docs`"
    assert DOC.read_text() == render(), "docs/passes.md is out of date: run `make docs`"
