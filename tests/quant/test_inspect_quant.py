"""`kiln inspect` says which tensors are quantized and how; `kiln run --dequantize`."""

import json

import onnx
import pytest

from app import cli
from tests.quant.int8_oracle import quantize_digits
from tests.quant.test_to_integer import _qdq_conv_relu


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


def test_run_keeps_int8_outputs_and_dequantizes_on_request(tmp_path, capsys):


    model, _ = _qdq_conv_relu(out_zero_point=-128)
    path = tmp_path / "conv.onnx"
    onnx.save(model, path)
    assert cli.main(["run", str(path), "--stage", "final", "--dequantize"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("y: int8[1, 4, 6, 6] ")
    assert lines[1].startswith("  real = 0.05 × (q − (-128)): [")
    q = [int(v) for v in lines[0].split("[", 2)[2].split("]")[0].split(",")]
    real = [float(v) for v in lines[1].split("[", 1)[1].split("]")[0].split(",")]
    assert real == pytest.approx([0.05 * (v + 128) for v in q], abs=1e-5)
