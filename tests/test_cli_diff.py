"""`kiln diff`: the correspondence and deltas of two models, as text and as JSON."""

from __future__ import annotations

import json

import onnx

from app.cli import main
from tests.conftest import SAMPLE_MODEL, shared_models


def _json(capsys, *argv) -> dict:
    assert main(["diff", *argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


def test_a_model_against_an_edited_copy(tmp_path, capsys):
    model = onnx.load(SAMPLE_MODEL)
    fc = next(n for n in model.graph.node if n.op_type == "Gemm")
    next(a for a in fc.attribute if a.name == "alpha").f = 2.0
    edited = tmp_path / "edited.onnx"
    onnx.save(model, edited)
    doc = _json(capsys, str(SAMPLE_MODEL), str(edited), "--stage", "loaded")
    assert doc["counts"]["matched"] == 9 and doc["counts"]["changed"] == 1
    (changed,) = [p for p in doc["pairs"] if p["status"] == "changed"]
    assert changed["a"]["name"] == changed["b"]["name"] == "fc"
    assert changed["changes"] == [{"what": "attribute", "name": "alpha", "before": "1",
                                   "after": "2"}]
    assert doc["totals"]["macs"][2] == 0


def test_a_model_against_its_final_stage_matches_by_provenance(capsys):
    doc = _json(capsys, str(SAMPLE_MODEL), str(SAMPLE_MODEL), "--stage", "loaded",
                "--stage-b", "final")
    assert doc["counts"]["by"]["provenance"] == doc["counts"]["matched"] == 6
    assert {f["name"] for f in doc["folded"]["a"]} == {"relu1", "relu2", "relu3"}


def test_text_output_counts_then_a_table(capsys):
    assert main(["diff", str(SAMPLE_MODEL), str(SAMPLE_MODEL), "--target", "cortex-m7"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal's width
    assert "7 layers matched (7 by provenance" in out and "7 unchanged" in out
    assert "arena_bytes" in out and "totals:" in out


def test_errors_are_one_sentence(tmp_path, capsys):
    assert main(["diff", str(SAMPLE_MODEL), str(tmp_path / "missing.onnx")]) == 2
    assert capsys.readouterr().err.strip() == "kiln: error: missing.onnx: no such file"
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    assert main(["diff", str(junk), str(SAMPLE_MODEL)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kiln: error: junk.onnx: ") and err.count("\n") == 1
    assert main(["diff", str(SAMPLE_MODEL), str(SAMPLE_MODEL), "--target", "z80"]) == 2
    assert capsys.readouterr().err.startswith("kiln: error: --target: unknown target 'z80'")


def test_kws_float_against_int8_matches_every_layer(capsys):
    onnx_dir = shared_models() / "onnx"
    float_model = str(onnx_dir / "kws_ref_model_float32.onnx")
    int8_model = str(onnx_dir / "kws_ref_model.onnx")
    for a, b in ((float_model, int8_model), (int8_model, float_model)):
        doc = _json(capsys, a, b)
        counts = doc["counts"]
        assert counts["matched"] == 13 and counts["removed"] == counts["added"] == 0
        ops = sorted({(p["a"]["op"], p["b"]["op"]) for p in doc["pairs"]})
        assert ("Conv", "QLinearConv") in ops or ("QLinearConv", "Conv") in ops
        loaded = _json(capsys, a, b, "--stage", "loaded")
        assert loaded["counts"]["matched"] == 24
        assert loaded["counts"]["removed"] == loaded["counts"]["added"] == 0
