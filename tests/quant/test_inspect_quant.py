"""`kiln inspect` says which tensors are quantized and how."""

import json

from app import cli
from tests.quant.int8_oracle import quantize_digits


def test_inspect_counts_and_lists_quantized_tensors(tmp_path, capsys):
    paths = quantize_digits(tmp_path)
    assert cli.main(["inspect", str(paths["QDQ"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    quantized = doc["quantized"]
    assert doc["dtypes"]["int8"] > 0 and doc["dtypes"]["int32"] > 0
    assert quantized["per_channel"] >= 4  # the conv and dense weights
    assert quantized["per_tensor"] >= 5  # activations
    per_channel = [q for q in quantized["values"].values() if len(q["scale"]) > 1]
    assert all(q["axis"] is not None and len(q["zero_point"]) == len(q["scale"])
               for q in per_channel)
    assert cli.main(["inspect", str(paths["QDQ"])]) == 0
    text = capsys.readouterr().out
    assert f"quantized: {quantized['per_tensor']} per tensor, {quantized['per_channel']} per " \
           "channel" in " ".join(text.split())
