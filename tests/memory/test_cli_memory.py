"""`kiln memory`: the JSON document and the text report."""

from __future__ import annotations

import json

from app.cli import main
from tests.conftest import SAMPLE_MODEL

KEYS = {"lower_bound", "activations", "mutable", "constant", "efficiency", "schedule_peak",
        "topological_peak", "strategies", "buffers"}


def test_memory_json(capsys):
    assert main(["memory", str(SAMPLE_MODEL), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert KEYS <= set(doc)
    assert doc["efficiency"] == doc["lower_bound"] / doc["activations"] or \
        abs(doc["efficiency"] - doc["lower_bound"] / doc["activations"]) < 1e-6
    assert doc["mutable"] > 0 and doc["constant"] > 0
    assert {"greedy_by_size", "glow_size", "glow_lifetime", "glow_request",
            "hill_climb"} <= set(doc["strategies"])
    for b in doc["buffers"]:
        assert {"name", "node", "size", "offset", "first", "last"} <= set(b)
        assert b["offset"] % 64 == 0 and b["first"] <= b["last"]


def test_memory_io_in_arena_moves_inputs_into_the_arena(capsys):
    assert main(["memory", str(SAMPLE_MODEL), "--json", "--io-in-arena",
                 "--alignment", "16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mutable"] == 0
    assert any(b["first"] == 0 and b["node"] == "" for b in doc["buffers"])


def test_memory_text_and_errors(capsys):
    assert main(["memory", str(SAMPLE_MODEL), "--dump"]) == 0
    out = capsys.readouterr().out
    assert "efficiency" in out and "alloc" in out
    assert main(["memory", str(SAMPLE_MODEL), "--alignment", "48"]) == 2
    assert "power of two" in capsys.readouterr().err
    assert main(["memory", "missing.onnx", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
