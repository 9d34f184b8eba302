"""A bundle's NET.build.json rebuilds it byte for byte; what a CI job needs of `kiln compile`.

Built models only, so a fresh clone tests it all: a small Conv/Gemm network quantized by Kiln
(with a hand-set range, a tensor kept float, per-tensor weights and bias corrections), a QDQ
file whose bias scales are one float32 ulp off input x weight scale (as tf2onnx writes them),
and a wide layer that fits no small board.
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from app import cli
from compiler.frontends.onnx import load_onnx
from compiler.frontends.onnx.export import save_onnx
from compiler.quant.calibration_data import CalibrationData
from compiler.quant.profiler import profile_model
from compiler.quant.recipe import QuantRecipe, quantize_with
from tests.helpers import make_model


def _model() -> onnx.ModelProto:
    """Conv -> Relu -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(11)
    inits = {"w1": rng.normal(0, 0.4, (8, 3, 3, 3)).astype(np.float32),
             "b1": rng.normal(0, 0.1, 8).astype(np.float32),
             "w2": rng.normal(0, 0.3, (8, 8, 3, 3)).astype(np.float32),
             "b2": rng.normal(0, 0.1, 8).astype(np.float32),
             "wg": rng.normal(0, 0.3, (10, 8)).astype(np.float32),
             "bg": rng.normal(0, 0.1, 10).astype(np.float32)}
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             n("Relu", ["c1"], ["r1"], name="relu1"),
             n("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             n("Relu", ["c2"], ["r2"], name="relu2"),
             n("GlobalAveragePool", ["r2"], ["g"], name="pool"),
             n("Flatten", ["g"], ["f"], name="flatten"),
             n("Gemm", ["f", "wg", "bg"], ["y"], transB=1, name="fc")]
    return make_model(nodes, [("x", np.float32, [1, 3, 8, 8])], [("y", np.float32, None)],
                      inits)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(model file, profile file) of the built model."""
    folder = tmp_path_factory.mktemp("built")
    model = folder / "small.onnx"
    onnx.save(_model(), model)
    graph = load_onnx(_model())
    data = np.random.default_rng(1).uniform(-1, 1, (16, 1, 3, 8, 8)).astype(np.float32)
    profile = profile_model(graph, CalibrationData("x", data, "drawn"), "small.onnx")
    profile.save(folder / "small.profile.json")
    return model, folder / "small.profile.json"


def _files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_tuned_recipe_survives_the_build_file(made, tmp_path, capsys):
    """Ranges by hand, a tensor float, per-tensor weights, corrections: all rebuilt."""
    from compiler.driver import BuildRequest, Options, compilation
    from compiler.quant.profile import load_profile

    model, profile_path = made
    graph = load_onnx(onnx.load(model))
    profile = load_profile(profile_path)
    profile.set_override("r1", 0.0, 1.5)
    rng = np.random.default_rng(5)
    recipe = QuantRecipe.of_profile(profile, graph, per_channel=False, keep_float=["g"],
                                    corrections={"conv2": rng.normal(0, 0.01, 8)})
    again = QuantRecipe.of_profile(profile, graph).but(per_channel=True)
    assert again.options != recipe.options
    request = BuildRequest(Options("cortex-m7"), None, None, recipe.to_json(), {},
                           recipe.model_hash)
    first = tmp_path / "first"
    compilation(quantize_with(graph, recipe)).export(first, request)
    second = tmp_path / "second"
    assert cli.main(["compile", str(model), "--build", str(first / "net.build.json"),
                     "-o", str(second)]) == 0
    assert _files(first) == _files(second)
    # A default recipe builds another bundle: the build file carried the choices.
    plain = tmp_path / "plain"
    assert cli.main(["compile", str(model), "--profile", str(profile_path), "--target",
                     "cortex-m7", "-o", str(plain)]) == 0
    assert _files(plain)["net.o"] != _files(first)["net.o"]
    capsys.readouterr()


@pytest.mark.parametrize("damage, says", [
    (lambda doc: doc.update(version=2), "written by a newer Kiln"),
    (lambda doc: doc["request"].update(model_hash="0" * 32), "the build of another model"),
    (lambda doc: doc["request"]["recipe"].update(keep_float=["nowhere"]),
     "keep_float names tensors its profile does not have"),
    (lambda doc: doc["request"]["recipe"].update(float_weights=["no_such_layer"]),
     "names layers the model does not have"),
    (lambda doc: doc["request"]["recipe"].update(version=9), "newer Kiln"),
    (lambda doc: doc["request"].update(weights="sideways"), "weights 'sideways'"),
    (None, "not a JSON build file"),
])
def test_a_bad_build_file_is_one_sentence_and_writes_nothing(made, tmp_path, capsys, damage,
                                                             says):
    model, profile = made
    bundle = tmp_path / "bundle"
    assert cli.main(["compile", str(model), "--profile", str(profile), "-o", str(bundle)]) == 0
    build = bundle / "net.build.json"
    if damage is None:
        build.write_text("{ not json")
    else:
        doc = json.loads(build.read_text())
        damage(doc)
        build.write_text(json.dumps(doc))
    capsys.readouterr()
    out = tmp_path / "out"
    assert cli.main(["compile", str(model), "--build", str(build), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_the_build_file_names_no_folder_of_this_machine(made, tmp_path, capsys):
    from compiler.quant.profile import load_profile

    model, profile_path = made
    profile = load_profile(profile_path)
    profile.data = {"source": str(tmp_path / "calibration" / "cal.npz"), "samples": 16}
    where = tmp_path / "moved.profile.json"
    profile.save(where)
    bundle = tmp_path / "bundle"
    assert cli.main(["compile", str(model), "--profile", str(where), "-o", str(bundle)]) == 0
    text = (bundle / "net.build.json").read_text()
    assert str(tmp_path) not in text
    assert json.loads(text)["request"]["recipe"]["profile"]["data"]["source"] == "cal.npz"
    capsys.readouterr()


def test_build_refuses_options_it_would_ignore(made, tmp_path, capsys):
    model, profile = made
    bundle = tmp_path / "bundle"
    assert cli.main(["compile", str(model), "-o", str(bundle)]) == 0
    capsys.readouterr()
    assert cli.main(["compile", str(model), "--build", str(bundle / "net.build.json"),
                     "--target", "cortex-m4", "-o", str(tmp_path / "x")]) == 2
    assert "drop --target" in capsys.readouterr().err


def _ulp_off_bias_file(made, folder) -> str:
    """The model quantized by Kiln (onnx rule), each bias scale nudged one float32 ulp up."""
    model, profile_path = made
    from compiler.quant.profile import load_profile

    graph = load_onnx(onnx.load(model))
    recipe = QuantRecipe.of_profile(load_profile(profile_path), graph, requant="onnx")
    path = folder / "ulp.onnx"
    save_onnx(quantize_with(graph, recipe), path)
    proto = onnx.load(path)
    nudged = 0
    for init in proto.graph.initializer:
        if init.name.endswith("_scale") and init.name.startswith(("b1", "b2", "bg")):
            scale = numpy_helper.to_array(init)
            init.CopyFrom(numpy_helper.from_array(
                np.nextafter(scale, np.float32(np.inf)).astype(np.float32), init.name))
            nudged += 1
    assert nudged == 3
    onnx.save(proto, path)
    return str(path)


def test_a_bias_scale_one_ulp_off_still_compiles_every_layer_integer(made, tmp_path, capsys):
    from compiler.driver import compilation, float_fallbacks
    from compiler.frontends.load import load_model
    from compiler.interpreter import run
    from tests.quant.int8_oracle import differing, qdq_session

    path = _ulp_off_bias_file(made, tmp_path)
    compiled = compilation(load_model(path))
    assert float_fallbacks(compiled) == []
    assert not [n.op for n in compiled.final.nodes if n.op in ("Conv", "Gemm")]
    session = qdq_session(path)  # onnxruntime fuses these units too: the oracle
    rng = np.random.default_rng(4)
    for _ in range(4):
        x = rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
        ours = run(compiled.reference, {"x": x})["y"]
        assert differing(ours, session.run(None, {"x": x})[0]) == 0
    assert cli.main(["compile", path, "--target", "cortex-m7", "--strict",
                     "-o", str(tmp_path / "m7")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_layer_left_float_is_a_warning_and_strict_fails(made, tmp_path, capsys):
    model, profile_path = made
    from compiler.quant.profile import load_profile

    profile = load_profile(profile_path)
    # r1 float: conv1 has no output pair (its Relu's is gone) and conv2 no input pair.
    profile.keep_float = ["r1"]
    kept = tmp_path / "kept.profile.json"
    profile.save(kept)
    out = tmp_path / "bundle"
    assert cli.main(["compile", str(model), "--profile", str(kept), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    weights = 8 * 8 * 3 * 3 * 4 + 8 * 4  # conv2's float32 weights and bias
    assert f"layer conv2 stays float in this int8 model: {weights:,} B of float32 weights " \
           f"({weights - weights // 4:,} B more than int8)" in err  # int8 takes a quarter
    assert "layer conv1 stays float" in err and "layer fc" not in err
    strict = tmp_path / "strict"
    assert cli.main(["compile", str(model), "--profile", str(kept), "--strict",
                     "-o", str(strict)]) == 1
    err = capsys.readouterr().err
    assert "--strict: layer conv1 stays float" in err and "(and 1 more)" in err
    assert not strict.exists()
    qdq = tmp_path / "kept.onnx"  # the same as a QDQ file: memory and bench warn too
    assert cli.main(["quantize", str(model), "--profile", str(profile_path), "--keep-float",
                     "r1", "-o", str(qdq)]) == 0
    capsys.readouterr()
    assert cli.main(["memory", str(qdq), "--json"]) == 0
    assert "layer conv2 stays float" in capsys.readouterr().err
    assert cli.main(["memory", str(qdq), "--strict"]) == 1
    assert cli.main(["bench", str(qdq), "--strict", "--repeats", "1", "--runs", "1"]) == 1
    assert "--strict: layer conv1 stays float" in capsys.readouterr().err


def _wide_model(path) -> str:
    weights = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W"], ["y"], name="wide_fc", transB=1)], "wide",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 512])],
        [numpy_helper.from_array(weights, "W")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return str(path)


def test_strict_fails_over_budget_and_memory_checks_the_board(tmp_path, capsys):
    model = _wide_model(tmp_path / "wide.onnx")  # 2 MiB of weights; the nRF52840 has 1 MiB
    assert cli.main(["compile", model, "--board", "nrf52840-dk", "-o",
                     str(tmp_path / "loose")]) == 0
    assert "flash over the nrf52840-dk budget" in capsys.readouterr().err
    assert cli.main(["compile", model, "--board", "nrf52840-dk", "--strict", "-o",
                     str(tmp_path / "strict")]) == 1
    assert "--strict: flash over" in capsys.readouterr().err
    assert not (tmp_path / "strict").exists()
    assert cli.main(["memory", model, "--board", "nrf52840-dk", "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["board"]["name"] == "nrf52840-dk" and not doc["board"]["fits"]
    assert doc["board"]["flash_used"] > doc["board"]["flash"] == 1 << 20
    assert "flash over the nrf52840-dk budget" in captured.err
    assert cli.main(["memory", model, "--board", "nrf52840-dk", "--strict"]) == 1


def test_a_board_file_is_the_budget(made, tmp_path, capsys):
    model, _ = made
    board = tmp_path / "acme.json"
    board.write_text(json.dumps({"name": "acme-sensor", "target": "cortex-m4", "regions": [
        {"name": "FLASH", "kind": "flash", "origin": 0x0800_0000, "size": 16 * 1024},
        {"name": "SRAM1", "kind": "ram", "origin": 0x2000_0000, "size": 8 * 1024},
        {"name": "SRAM2", "kind": "ram", "origin": 0x2000_2000, "size": 4 * 1024}]}))
    assert cli.main(["compile", str(model), "--board-file", str(board), "--json",
                     "-o", str(tmp_path / "b")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "cortex-m4"
    assert (doc["board"]["name"], doc["board"]["flash"], doc["board"]["ram"]) == \
        ("acme-sensor", 16 * 1024, 12 * 1024)
    rebuilt = tmp_path / "again"
    assert cli.main(["compile", str(model), "--build", str(tmp_path / "b" / "net.build.json"),
                     "-o", str(rebuilt)]) == 0
    assert _files(rebuilt) == _files(tmp_path / "b")
    capsys.readouterr()
    for bad, says in (({"name": "x", "target": "cortex-m4"}, "flash must be"),
                      ({"name": "x", "target": "pdp-11", "flash": 1, "ram": 1}, "pdp-11"),
                      ({"name": "nrf52840-dk", "target": "cortex-m4", "flash": 1, "ram": 1},
                       "known board with other sizes"),
                      ({"name": "x", "target": "cortex-m4", "regions": [
                          {"kind": "rom", "size": 4}]}, "not flash or ram")):
        board.write_text(json.dumps(bad))
        assert cli.main(["memory", str(model), "--board-file", str(board)]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err


def test_the_rounding_rule_travels_in_the_qdq_file(made, tmp_path, capsys):
    """kiln quantize's file compiles back to what `kiln compile --profile` builds."""
    model, profile = made
    qdq = tmp_path / "q.onnx"
    assert cli.main(["quantize", str(model), "--profile", str(profile), "-o", str(qdq)]) == 0
    assert {p.key: p.value for p in onnx.load(qdq).metadata_props}.get("kiln.requant") == \
        "tflite"
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli.main(["compile", str(qdq), "--target", "cortex-m4", "-o", str(a)]) == 0
    assert cli.main(["compile", str(model), "--profile", str(profile), "--target",
                     "cortex-m4", "-o", str(b)]) == 0
    assert _files(a)["net.o"] == _files(b)["net.o"]
    capsys.readouterr()


def test_files_follow_the_umask_and_the_build_file_is_not_executable(made, tmp_path):
    model, profile = made
    old = os.umask(0o022)
    try:
        assert cli.main(["compile", str(model), "--profile", str(profile), "-o",
                         str(tmp_path / "b")]) == 0
    finally:
        os.umask(old)
    assert (tmp_path / "b" / "net.build.json").stat().st_mode & 0o777 == 0o644
