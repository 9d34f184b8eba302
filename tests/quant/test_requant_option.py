"""The requantization rule as a pipeline option and as `--requant` on the command line."""

import numpy as np
import onnx
import pytest

from app import cli
from compiler.frontends.onnx import load_onnx
from compiler.passes import Pipeline, default_pipeline, load_pipeline, run_pipeline, save_pipeline
from compiler.passes.pipeline import PipelineError
from tests.quant.test_to_integer import _qdq_conv_relu


@pytest.fixture
def qdq_path(tmp_path):
    model, _ = _qdq_conv_relu(out_zero_point=-128)
    path = tmp_path / "conv.onnx"
    onnx.save(model, path)
    return path


def test_the_option_reaches_every_integer_operator(qdq_path):
    graph = load_onnx(qdq_path)
    for mode in ("onnx", "tflite"):
        final = run_pipeline(graph, Pipeline(default_pipeline().passes, mode),
                             snapshots=False).graph
        modes = {n.attrs["requant"] for n in final.nodes if n.op == "QLinearConv"}
        assert modes == {mode}
    # Without the option the ONNX front end's rule (onnx) holds.
    final = run_pipeline(graph, snapshots=False).graph
    assert {n.attrs["requant"] for n in final.nodes if n.op == "QLinearConv"} == {"onnx"}


def test_a_pipeline_file_keeps_the_option(tmp_path):
    path = tmp_path / "p.json"
    save_pipeline(Pipeline(default_pipeline().passes, "tflite"), path)
    assert load_pipeline(path).requant == "tflite"
    doc = Pipeline(default_pipeline().passes).to_json()
    doc["requant"] = "tf"
    with pytest.raises(PipelineError, match='"requant" must be one of onnx, tflite'):
        Pipeline.from_json(doc)


def test_the_command_line_switches_the_rule(qdq_path, tmp_path, capsys):
    x = np.random.default_rng(3).integers(-128, 128, (1, 3, 6, 6)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    outputs = {}
    for mode in ("onnx", "tflite"):
        out = tmp_path / f"{mode}.npz"
        assert cli.main(["run", str(qdq_path), "--stage", "final", "--requant", mode,
                         "--input", f"x={tmp_path / 'x.npy'}", "-o", str(out)]) == 0
        outputs[mode] = np.load(out)["y"]
    capsys.readouterr()
    assert outputs["onnx"].dtype == outputs["tflite"].dtype == np.int8
    step = np.abs(outputs["onnx"].astype(int) - outputs["tflite"].astype(int))
    assert step.max() <= 1  # one layer: the two rules differ by rounding only


def test_integer_operators_of_the_file_follow_the_option(tmp_path, capsys):
    """A QOperator file already holds QLinearConv and QGemm: --requant tflite retags them."""
    from tests.quant.int8_oracle import quantize_digits

    path = quantize_digits(tmp_path)["QOperator"]
    graph = load_onnx(path)
    final = run_pipeline(graph, Pipeline(default_pipeline().passes, "tflite"),
                         snapshots=False).graph
    rules = {n.op: n.attrs["requant"] for n in final.nodes if "requant" in n.attrs}
    assert set(rules.values()) == {"tflite"} and {"QLinearConv", "QGemm"} <= set(rules)
    assert cli.main(["passes", str(path), "--requant", "tflite"]) == 0
    assert "integer operators of the file follow the tflite rule" in capsys.readouterr().out
