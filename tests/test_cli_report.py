"""`kiln report` on the sample model: its JSON, its quantized form, and bad input in one line."""

from __future__ import annotations

import json
import math

from app.cli import main
from tests.conftest import SAMPLE_MODEL


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


def test_json_totals_are_the_commands_own(capsys, tmp_path):
    report = _json(capsys, ["report", str(SAMPLE_MODEL), "--json"])
    memory = _json(capsys, ["memory", str(SAMPLE_MODEL), "--json"])
    compiled = _json(capsys, ["compile", str(SAMPLE_MODEL), "-o", str(tmp_path / "b"),
                              "--json"])
    inspect = _json(capsys, ["inspect", str(SAMPLE_MODEL), "--json"])
    warnings = memory.pop("warnings")  # what memory also says of the model: nothing here
    assert report["memory"] == memory and warnings == []
    assert report["bundle"]["sections"] == {k: compiled["sections"][k]
                                            for k in ("text", "rodata", "data", "bss")}
    assert [la["label"] for la in report["layers"]] == [la["symbol"] for la in
                                                         compiled["layers"]]
    assert [la["macs"] for la in report["layers"]] == [la["macs"] for la in compiled["layers"]]
    assert report["totals"]["macs"] == inspect["macs"]
    assert report["summary"]["params"] == inspect["params"]
    assert report["instructions"] is None and report["totals"]["instructions"] is None
    assert any("host is not one" in a for a in report["absent"])
    assert report["quantization"] is None
    changed = [p["name"] for p in report["passes"] if p["changed"]]
    assert changed and all(p["does"] for p in report["passes"])


def test_html_and_json_together(capsys, tmp_path):
    page = tmp_path / "r.html"
    doc = _json(capsys, ["report", str(SAMPLE_MODEL), "--board", "stm32f746g-disco",
                         "--no-count", "-o", str(page), "--json"])
    html = page.read_text()
    assert doc["target"] == "cortex-m7" and doc["bundle"]["board"]["name"] == "stm32f746g-disco"
    assert "http" not in html and "src=" not in html and "href=" not in html
    assert html.count('<tr class="layer">') == len(doc["layers"])
    assert f"{doc['bundle']['board']['flash_used']:,} B" in html


def test_profile_adds_quantization_and_sqnr(capsys, tmp_path):
    profile = tmp_path / "p.json"
    assert main(["profile", str(SAMPLE_MODEL), "--data", "digits:train", "-o",
                 str(profile)]) == 0
    capsys.readouterr()
    doc = _json(capsys, ["report", str(SAMPLE_MODEL), "--profile", str(profile), "--data",
                         "digits:test", "--json"])
    quant = doc["quantization"]
    assert quant["origin"] == "profile" and quant["samples"] == 64
    assert quant["per_channel"] > 0 and quant["method"] == "minmax"
    convs = [la for la in doc["layers"] if la["op"].startswith("QLinearConv")]
    assert len(convs) == 3
    for layer in convs:
        assert layer["dtype"] == "int8" and 20 < layer["sqnr_db"] < 80
        assert layer["float_weight_bytes"] > layer["weight_bytes"]
    assert math.isfinite(quant["output_sqnr"]["logits"])


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_bad_input_is_one_sentence(capsys, tmp_path):
    assert "no-such.onnx" in _error(capsys, ["report", str(tmp_path / "no-such.onnx"), "-o",
                                             str(tmp_path / "r.html")])
    assert "cortex-m99" in _error(capsys, ["report", str(SAMPLE_MODEL), "--target",
                                           "cortex-m99", "-o", str(tmp_path / "r.html")])
    assert "-o REPORT.html" in _error(capsys, ["report", str(SAMPLE_MODEL)])
    assert "--clock" in _error(capsys, ["report", str(SAMPLE_MODEL), "--json", "--clock", "0"])
    assert "does not exist" in _error(capsys, ["report", str(SAMPLE_MODEL), "-o",
                                               str(tmp_path / "nowhere" / "r.html")])
