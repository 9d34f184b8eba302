"""Bad input: every kind gives one clear line on stderr (file, node, reason) and exit code 2."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from app.cli import main
from tests.conftest import ROOT, SAMPLE_MODEL


def _kiln(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"


def _save(path, nodes, inputs=(("x", [1, 4]),), outputs=(("y", [1, 4]),), inits=(), opset=13):
    graph = helper.make_graph(
        nodes, "bad", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path.write_bytes(model.SerializeToString())
    return path


def test_truncated_file(tmp_path, capsys):
    path = tmp_path / "truncated.onnx"
    path.write_bytes(SAMPLE_MODEL.read_bytes()[:5000])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "truncated.onnx", "not an ONNX model")


def test_garbage_file(tmp_path, capsys):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)))
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "garbage.onnx", "not an ONNX model")


NOT_ONNX = [b"hello, this is a text file\n", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, b""]


@pytest.mark.parametrize("content", NOT_ONNX)
def test_non_onnx_file(tmp_path, capsys, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "notes.txt", "not an ONNX model")


def test_missing_file(tmp_path, capsys):
    code, _, err = _kiln(capsys, "run", tmp_path / "nope.onnx")
    _assert_one_line_error(code, err, "nope.onnx", "no such file")


def test_cycle(tmp_path, capsys):
    path = _save(tmp_path / "cycle.onnx", [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Relu", ["b"], ["y"], name="third"),
    ])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "cycle.onnx", "cycle", "node first (Add)")


def test_duplicate_value_names(tmp_path, capsys):
    path = _save(tmp_path / "dup.onnx", [
        helper.make_node("Relu", ["x"], ["t"], name="one"),
        helper.make_node("Relu", ["x"], ["t"], name="two"),
        helper.make_node("Relu", ["t"], ["y"], name="three"),
    ])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "dup.onnx", "node two (Relu)",
                           "'t' is defined more than once")


def test_missing_input(tmp_path, capsys):
    path = _save(tmp_path / "missing.onnx", [helper.make_node("Add", ["x", "ghost"], ["y"],
                                                              name="adder")])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "missing.onnx", "node adder (Add)", "'ghost'",
                           "not produced")


def _external(path, location: str):
    tensor = helper.make_tensor("w", TensorProto.FLOAT, [1, 4], [1.0, 2.0, 3.0, 4.0])
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    return _save(path, [helper.make_node("Add", ["x", "w"], ["y"], name="adder")], inits=[tensor])


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin"])
def test_external_data_outside_the_model_folder(tmp_path, capsys, location):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    path = _external(folder / "ext.onnx", location)
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "ext.onnx", "'w'", "outside the model's folder")


def test_external_data_inside_the_folder_loads(tmp_path, capsys):
    (tmp_path / "weights.bin").write_bytes(np.arange(4, dtype="<f4").tobytes())
    path = _external(tmp_path / "ext.onnx", "weights.bin")
    code, out, _ = _kiln(capsys, "run", path)
    assert code == 0 and "y: float32[1, 4]" in out


def test_tensor_with_more_than_2_31_elements(tmp_path, capsys):
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[65536, 65537])
    path = _save(tmp_path / "huge.onnx", [helper.make_node("Add", ["x", "w"], ["y"])],
                 inits=[huge])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "huge.onnx", "'w'", "2**31")


def test_input_with_more_than_2_31_elements(tmp_path, capsys):
    path = _save(tmp_path / "bigin.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                 inputs=[("x", [70000, 70000])], outputs=[("y", [70000, 70000])])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "bigin.onnx", "'x'", "2**31")


def test_unsupported_operators_reported_all_at_once(tmp_path, capsys):
    path = _save(tmp_path / "exotic.onnx", [
        helper.make_node("Relu", ["x"], ["a"], name="fine"),
        helper.make_node("Bernoulli", ["a"], ["b"], name="hm"),
        helper.make_node("Relu", ["b"], ["c"], name="fine2"),
        helper.make_node("RandomUniformLike", ["c"], ["y"], name="cs"),
    ])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "exotic.onnx", "2 unsupported operators", "hm (Bernoulli)",
                           "cs (RandomUniformLike)")


def test_custom_domain_operator(tmp_path, capsys):
    node = helper.make_node("Fancy", ["x"], ["y"], name="custom", domain="com.example")
    path = _save(tmp_path / "custom.onnx", [node])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "custom.onnx", "custom (com.example::Fancy)")


def test_unsupported_opset(tmp_path, capsys):
    path = _save(tmp_path / "old.onnx", [helper.make_node("Relu", ["x"], ["y"])], opset=5)
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "old.onnx", "opset 5 is not supported")


def test_unknown_dimension_needs_shape(tmp_path, capsys):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "dyn.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "dyn.onnx", "'x'", "--shape x=")
    code, out, _ = _kiln(capsys, "inspect", path, "--json", "--shape", "x=3,4")
    assert code == 0 and '"shape": [3, 4]' in out


def test_symbolic_dimension_defaults_to_one_or_shape(tmp_path, capsys):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    path = tmp_path / "sym.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    code, out, _ = _kiln(capsys, "inspect", path, "--json")
    assert code == 0 and '"shape": [1, 4]' in out
    code, out, _ = _kiln(capsys, "inspect", path, "--json", "--shape", "x=5,4")
    assert code == 0 and '"shape": [5, 4]' in out
    code, _, err = _kiln(capsys, "inspect", path, "--shape", "nope=1")
    _assert_one_line_error(code, err, "nope")
    code, _, err = _kiln(capsys, "inspect", path, "--shape", "x=1,2,3")
    _assert_one_line_error(code, err, "3 dimensions")


def test_bad_command_line_arguments(capsys):
    code, _, err = _kiln(capsys, "run", SAMPLE_MODEL, "--input", "image")
    _assert_one_line_error(code, err, "NAME=FILE.npy")
    code, _, err = _kiln(capsys, "run", SAMPLE_MODEL, "--input", "nope=x.npy")
    _assert_one_line_error(code, err, "nope", "image")
    code, _, err = _kiln(capsys, "inspect")
    _assert_one_line_error(code, err, "model")


def test_bad_input_file(tmp_path, capsys):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not numpy")
    code, _, err = _kiln(capsys, "run", SAMPLE_MODEL, "--input", f"image={bad}")
    _assert_one_line_error(code, err, "bad.npy", "not a readable .npy")
    np.save(tmp_path / "wrong.npy", np.zeros((2, 2), np.float32))
    code, _, err = _kiln(capsys, "run", SAMPLE_MODEL, "--input", f"image={tmp_path / 'wrong.npy'}")
    _assert_one_line_error(code, err, "shape [2, 2]", "[1, 1, 8, 8]")


def test_console_script_prints_no_traceback(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\x07garbage" * 10)
    kiln = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
    result = subprocess.run(kiln + ["inspect", str(path)], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.startswith("kiln: error: garbage.onnx: ")
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_model_checker_rejects_nothing_we_save(tmp_path):
    from compiler.frontends.onnx import load_onnx, save_onnx

    target = tmp_path / "copy.onnx"
    save_onnx(load_onnx(SAMPLE_MODEL), target)
    onnx.checker.check_model(onnx.load(target), full_check=True)


def test_kiln_only_operators_and_attributes_are_not_read_from_files(tmp_path, capsys):
    path = _save(tmp_path / "fc.onnx", [helper.make_node("FullyConnected", ["x", "w"], ["y"],
                                                         name="fc")],
                 inits=[numpy_helper.from_array(np.ones((4, 4), np.float32), "w")])
    code, _, err = _kiln(capsys, "inspect", path)
    _assert_one_line_error(code, err, "fc.onnx", "node fc (FullyConnected)", "unsupported")
    path = _save(tmp_path / "layout.onnx",
                 [helper.make_node("Relu", ["x"], ["y"], name="r", activation="Relu")])
    code, _, err = _kiln(capsys, "inspect", path)
    assert code == 2  # Relu has no such attribute at all
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm", coerce_2d=1)
    code, _, err = _kiln(capsys, "inspect", _save(tmp_path / "sm.onnx", [node]))
    _assert_one_line_error(code, err, "sm.onnx", "node sm (Softmax)", "Kiln's own")


def test_input_values_that_do_not_fit_the_models_type_are_refused(tmp_path, capsys):
    """numpy wraps an int64 200 to int8 -56 and a float64 1e39 to float32 infinity, silently."""
    from onnx import helper

    from tests.helpers import make_model

    model = make_model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
                       [("x", np.int8, [4])], [("y", np.float32, None)],
                       {"s": np.float32(0.5), "z": np.int8(0)})
    path = tmp_path / "int8_in.onnx"
    path.write_bytes(model.SerializeToString())
    np.save(tmp_path / "wide.npy", np.array([1, 2, 200, 4], np.int64))
    code, _, err = _kiln(capsys, "run", path, "--input", f"x={tmp_path / 'wide.npy'}")
    _assert_one_line_error(code, err, "holds 200 at [2]", "int8's range [-128, 127]")
    np.save(tmp_path / "fits.npy", np.array([1, 2, -128, 127], np.int64))
    code, out, _ = _kiln(capsys, "run", path, "--input", f"x={tmp_path / 'fits.npy'}")
    assert code == 0 and "-64" in out
    np.save(tmp_path / "huge.npy", np.full((1, 1, 8, 8), 1e39))
    code, _, err = _kiln(capsys, "run", SAMPLE_MODEL, "--input", f"image={tmp_path / 'huge.npy'}")
    _assert_one_line_error(code, err, "holds 1e+39 at [0, 0, 0, 0]", "float32's largest value")
    np.save(tmp_path / "inf.npy", np.full((1, 1, 8, 8), np.inf))  # the file's own infinity
    code, _, _ = _kiln(capsys, "run", SAMPLE_MODEL, "--input", f"image={tmp_path / 'inf.npy'}")
    assert code == 0


def test_an_output_folder_that_is_not_writable_is_refused_before_any_work(tmp_path, capsys,
                                                                          monkeypatch):
    """As root a chmod does not stop writes, so the test makes os.access say what a read-only
    mount says; the command must refuse before it loads or calibrates anything."""
    import os
    from pathlib import Path

    import app.cli.profile as cli_profile
    import app.cli.quantize as cli_quantize

    real_access = os.access
    locked = tmp_path / "ro"
    locked.mkdir()
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != locked
                        and real_access(p, mode, **kw))
    for module in (cli_profile, cli_quantize):
        monkeypatch.setattr(module, "load_graph", lambda args: pytest.fail("loaded the model"))
    for command in (["profile", SAMPLE_MODEL, "--data", tmp_path, "-o", locked / "p.json"],
                    ["quantize", SAMPLE_MODEL, "--profile", tmp_path / "p.json", "-o",
                     locked / "q.onnx"]):
        code, _, err = _kiln(capsys, *command)
        _assert_one_line_error(code, err, "the folder", "is not writable")
    code, _, err = _kiln(capsys, "profile", SAMPLE_MODEL, "--data", tmp_path, "-o", tmp_path)
    _assert_one_line_error(code, err, "that is a folder")
    # Folders: a bundle, a walkthrough, a point's bundle (the model is never loaded).
    import compiler.frontends.load as loading

    monkeypatch.setattr(loading, "load_model", lambda *a, **k: pytest.fail("loaded the model"))
    for command in (["compile", SAMPLE_MODEL, "-o", locked / "bundle"],
                    ["compile", SAMPLE_MODEL, "-o", locked],
                    ["walkthrough", SAMPLE_MODEL, "-o", locked / "walk"],
                    ["explore-export", tmp_path / "EXPLORE.json", "--point", "0", "-o",
                     locked / "point"]):
        code, _, err = _kiln(capsys, *command)
        _assert_one_line_error(code, err, "the folder", "is not writable")
