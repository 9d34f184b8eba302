"""docs/operators.md is generated from the registry and must be current."""

from pathlib import Path

from compiler.opdoc import render

DOC = Path(__file__).resolve().parents[1] / "docs" / "operators.md"


def test_operators_doc_is_up_to_date():
    assert DOC.exists(), "docs/operators.md is missing: run `make docs`"
    assert DOC.read_text() == render(), "docs/operators.md is out of date: run `make docs`"
