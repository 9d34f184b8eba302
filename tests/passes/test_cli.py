"""`kiln passes` and `kiln run --stage` on the sample model."""

from __future__ import annotations

import json

import numpy as np

from app.cli import main
from compiler.passes import PassConfig, Pipeline, save_pipeline
from tests.conftest import SAMPLE_MODEL

KEYS = ["name", "changed", "nodes_before", "nodes_after", "added", "removed", "modified", "ms"]


def _json(capsys, *args) -> dict:
    assert main(["passes", str(SAMPLE_MODEL), "--json", *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


def test_passes_json_has_exactly_the_documented_keys(capsys):
    document = _json(capsys)
    assert list(document) == ["passes", "final"]
    assert all(list(entry) == KEYS for entry in document["passes"])
    assert list(document["final"]) == ["nodes", "ops"]
    assert document["final"]["nodes"] == sum(document["final"]["ops"].values())
    assert document["passes"][-1]["nodes_after"] == document["final"]["nodes"]
    assert all(isinstance(entry["added"], int) for entry in document["passes"])


def test_passes_verify_adds_the_error_fields(capsys):
    document = _json(capsys, "--verify")
    assert all(list(entry) == [*KEYS, "max_abs_err", "max_rel_err"]
               for entry in document["passes"])
    assert max(entry["max_rel_err"] for entry in document["passes"]) < 1e-4


def test_passes_with_a_pipeline_file(tmp_path, capsys):
    path = tmp_path / "mine.json"
    save_pipeline(Pipeline([PassConfig("lower_fully_connected"), PassConfig("dce")]), path)
    document = _json(capsys, "--pipeline", str(path))
    assert [e["name"] for e in document["passes"]] == ["lower_fully_connected", "dce",
                                                      "prepare_for_codegen"]
    assert "FullyConnected" in document["final"]["ops"]


def test_passes_text_and_dump_after(capsys):
    assert main(["passes", str(SAMPLE_MODEL), "--dump-after", "to_nhwc"]) == 0
    out = capsys.readouterr().out
    assert "sink_transposes" in out and "final:" in out
    dump = out.split("--- after to_nhwc (run 1) ---")[1]
    assert "layout='NHWC'" in dump and "Transpose" in dump


def test_passes_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "kiln-pipeline", "version": 1, "passes": [{"name": "zap"}]}')
    for args in (["--pipeline", str(bad)], ["--dump-after", "zap"],
                 ["--dump-after", "dce", "--json"]):
        assert main(["passes", str(SAMPLE_MODEL), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("kiln: error: ") and err.count("\n") == 1


def _run(tmp_path, capsys, stage: str) -> np.ndarray:
    out = tmp_path / f"{stage.replace('#', '_')}.npz"
    digit = SAMPLE_MODEL.parent / "digit_2.npy"
    assert main(["run", str(SAMPLE_MODEL), "--input", f"image={digit}", "--stage", stage,
                 "-o", str(out)]) == 0
    capsys.readouterr()
    with np.load(out) as saved:
        assert list(saved) == ["logits"]
        return saved["logits"]


def test_run_at_a_stage_gives_the_same_answer(tmp_path, capsys):
    loaded = _run(tmp_path, capsys, "loaded")
    for stage in ("to_nhwc", "dce#2", "15", "final"):
        np.testing.assert_allclose(_run(tmp_path, capsys, stage), loaded, rtol=1e-4, atol=1e-5)
    assert main(["run", str(SAMPLE_MODEL), "--stage", "nope"]) == 2
    assert "not in the pipeline" in capsys.readouterr().err


def test_passes_verify_fails_when_a_pass_breaks_numerics(tmp_path, capsys, monkeypatch):
    from compiler.passes import base

    def wrong(graph):
        conv = next(n for n in graph.nodes if n.op == "Conv")
        conv.inputs[1] = graph.add_constant("zeros", np.zeros(conv.inputs[1].type.shape,
                                                              np.float32))
        return True

    monkeypatch.setitem(base._PASSES, "wrong", base.Pass("wrong", "simplify", wrong))
    path = tmp_path / "wrong.json"
    save_pipeline(Pipeline([PassConfig("wrong")]), path)
    assert main(["passes", str(SAMPLE_MODEL), "--json", "--verify", "--pipeline", str(path)]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["passes"][0]["max_abs_err"] > 0
    assert err.startswith("kiln: error: after pass wrong the outputs differ")
    assert err.count("\n") == 1
