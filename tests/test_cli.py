"""`kiln inspect` and `kiln run` on the sample model."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import numpy_helper

from app.cli import main
from tests.conftest import SAMPLE_MODEL
from tests.helpers import ort_run


def _expected_stats() -> dict:
    """The inspect document computed independently from the ONNX file."""
    model = onnx.load(SAMPLE_MODEL)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    macs, spatial = 0, 8 * 8
    for node in model.graph.node:
        if node.op_type == "Conv":
            cout, cin, kh, kw = weights[node.input[1]].shape
            macs += cout * cin * kh * kw * spatial
        elif node.op_type == "MaxPool":
            spatial //= 4
        elif node.op_type == "Gemm":
            macs += weights[node.input[1]].size
    ops: dict[str, int] = {}
    for node in model.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    return {
        "nodes": len(model.graph.node),
        "ops": dict(sorted(ops.items())),
        "params": sum(w.size for w in weights.values()),
        "param_bytes": sum(w.nbytes for w in weights.values()),
        "macs": macs,
        "inputs": [{"name": "image", "dtype": "float32", "shape": [1, 1, 8, 8]}],
        "outputs": [{"name": "logits", "dtype": "float32", "shape": [1, 10]}],
        # Every tensor: the input, the weights and each node's outputs, all float32 here.
        "dtypes": {"float32": 1 + len(weights) + sum(len(n.output) for n in model.graph.node)},
        "quantized": {"per_tensor": 0, "per_channel": 0, "values": {}},
    }


def test_inspect_json_is_exactly_the_documented_document(capsys):
    assert main(["inspect", str(SAMPLE_MODEL), "--json"]) == 0
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert list(document) == ["nodes", "ops", "params", "param_bytes", "macs", "inputs",
                              "outputs", "dtypes", "quantized"]
    assert document == _expected_stats()
    assert err == ""


def test_inspect_text_and_dump(capsys):
    assert main(["inspect", str(SAMPLE_MODEL), "--dump"]) == 0
    out = capsys.readouterr().out
    assert "MACs" in out and "Conv" in out
    assert "= Conv(%image, $conv1.weight, $conv1.bias)" in out


def test_run_writes_outputs_matching_onnxruntime(tmp_path, capsys):
    image = np.random.default_rng(3).random((1, 1, 8, 8), dtype=np.float32)
    np.save(tmp_path / "image.npy", image)
    out_path = tmp_path / "out.npz"
    assert main(["run", str(SAMPLE_MODEL), "--input", f"image={tmp_path / 'image.npy'}",
                 "-o", str(out_path)]) == 0
    assert "logits: float32[1, 10]" in capsys.readouterr().out
    with np.load(out_path) as saved:
        assert list(saved) == ["logits"]
        np.testing.assert_allclose(saved["logits"],
                                   ort_run(onnx.load(SAMPLE_MODEL), {"image": image})[0],
                                   rtol=1e-4, atol=1e-5)


def test_run_without_inputs_is_seeded(tmp_path, capsys):
    for name in ("a.npz", "b.npz"):
        assert main(["run", str(SAMPLE_MODEL), "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        np.testing.assert_array_equal(a["logits"], b["logits"])
    assert main(["run", str(SAMPLE_MODEL), "--seed", "7", "-o", str(tmp_path / "c.npz")]) == 0
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "c.npz") as c:
        assert not np.array_equal(a["logits"], c["logits"])


def test_run_compiled_engine_matches_the_reference(tmp_path, capsys):
    image = np.load(SAMPLE_MODEL.parent / "digit_2.npy")
    np.save(tmp_path / "image.npy", image)
    for engine in ("reference", "compiled"):
        assert main(["run", str(SAMPLE_MODEL), "--input", f"image={tmp_path / 'image.npy'}",
                     "--engine", engine, "-o", str(tmp_path / f"{engine}.npz")]) == 0
        assert "argmax=2" in capsys.readouterr().out
    with np.load(tmp_path / "reference.npz") as ref, np.load(tmp_path / "compiled.npz") as got:
        assert list(got) == ["logits"]
        assert got["logits"].dtype == ref["logits"].dtype and got["logits"].shape == (1, 10)
        np.testing.assert_allclose(got["logits"], ref["logits"], rtol=1e-4, atol=1e-4)
    # Seeded random inputs are the same for both engines too.
    for engine in ("reference", "compiled"):
        assert main(["run", str(SAMPLE_MODEL), "--engine", engine, "--seed", "5", "-o",
                     str(tmp_path / f"seeded-{engine}.npz")]) == 0
    with np.load(tmp_path / "seeded-reference.npz") as ref, \
            np.load(tmp_path / "seeded-compiled.npz") as got:
        np.testing.assert_allclose(got["logits"], ref["logits"], rtol=1e-4, atol=1e-4)


def test_run_compiled_refuses_a_stage(capsys):
    assert main(["run", str(SAMPLE_MODEL), "--engine", "compiled", "--stage", "final"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--stage applies to the reference engine only" in err


def test_version_prints_and_writes_nothing(tmp_path, monkeypatch, capsys):
    from importlib import metadata

    monkeypatch.chdir(tmp_path)
    for flag in ("--version", "-V"):
        assert main([flag]) == 0
        assert capsys.readouterr().out == f"kiln {metadata.version('kiln')}\n"
    assert list(tmp_path.iterdir()) == []  # no window, no screenshots, no out/


def test_a_mistyped_command_is_refused_and_opens_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compil", str(SAMPLE_MODEL)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kiln: error: 'compil' is not a kiln command (did you mean compile? ")
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no window, no out/screenshots
