"""to_integer on models built here: the digits CNN quantized by onnxruntime, and QDQ graphs."""

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from app import cli
from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.passes import run_pipeline
from tests.helpers import ort_run
from tests.quant.int8_oracle import differing, integer_stage, ort_session, quantize_digits

SEEDS = range(20)


@pytest.fixture(scope="module")
def quantized_digits(tmp_path_factory):
    """The bundled digits CNN quantized by quantize_static: {format: path}."""
    return quantize_digits(tmp_path_factory.mktemp("digits"))


def _images():
    return [np.random.default_rng(seed).random((1, 1, 8, 8)).astype(np.float32)
            for seed in SEEDS]


@pytest.mark.parametrize("form", ["QDQ", "QOperator"])
def test_quantized_digits_run_in_integers_like_onnxruntime(quantized_digits, form):
    path = quantized_digits[form]
    compiled = compilation(load_onnx(path))
    final = compiled.final
    counts = Counter(n.op for n in final.nodes)
    assert counts["QLinearConv"] == 3 and counts["QGemm"] == 1, counts
    assert not {"Conv", "Gemm", "MatMul", "FullyConnected"} & set(counts), counts
    # One QuantizeLinear of the float input, one DequantizeLinear of the logits.
    assert counts["QuantizeLinear"] == counts["DequantizeLinear"] == 1, counts
    if form == "QDQ":
        session = ort_session(integer_stage(compiled))
        oracle = lambda x: session.run(None, {"image": x})[0]  # noqa: E731
    else:  # the file already holds the integer operators
        model = onnx.load(path)
        oracle = lambda x: ort_run(model, {"image": x})[0]  # noqa: E731
    total = 0
    for x in _images():
        ours = run(final, {"image": x})[final.outputs[0].name]
        want = oracle(x)
        assert ours.dtype == want.dtype == np.float32
        total += int(np.count_nonzero(ours != want))  # dequantized int8: equal or not
    assert total == 0


def test_both_forms_compute_the_same_integers(quantized_digits):
    finals = {form: compilation(load_onnx(path)).final
              for form, path in quantized_digits.items()}
    for x in _images()[:5]:
        outs = [run(g, {"image": x})[g.outputs[0].name] for g in finals.values()]
        assert np.array_equal(outs[0], outs[1])


def _qdq_model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    """An opset-13 model of `nodes` (value infos and initializer protos as given)."""
    model = helper.make_model(helper.make_graph(nodes, "qdq", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _qdq_conv_relu(out_zero_point: int, weights_as_input: bool = False):
    rng = np.random.default_rng(5)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    w_scale = rng.uniform(0.001, 0.01, 4).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(-3, np.int8), "xz"),
             numpy_helper.from_array(w_scale, "ws"),
             numpy_helper.from_array(np.zeros(4, np.int8), "wz"),
             numpy_helper.from_array(rng.integers(-500, 500, 4).astype(np.int32), "b"),
             numpy_helper.from_array(np.float32(0.02) * w_scale, "bs"),
             numpy_helper.from_array(np.array(0.05, np.float32), "ys"),
             numpy_helper.from_array(np.array(out_zero_point, np.int8), "yz")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 3, 6, 6])]
    if weights_as_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.INT8, [4, 3, 3, 3]))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["y"])]
    model = _qdq_model(nodes, inputs, [helper.make_tensor_value_info(
        "y", TensorProto.INT8, [1, 4, 6, 6])], inits)
    return model, w


def test_a_relu_becomes_the_output_range(tmp_path):
    model, _ = _qdq_conv_relu(out_zero_point=10)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    compiled = compilation(load_onnx(path))
    (conv,) = [n for n in compiled.final.nodes if n.op == "QLinearConv"]
    assert tuple(conv.attrs["output_range"]) == (10, 127)  # Q(0) is the zero point
    # Without the range, the same node is onnxruntime's QLinearConv; the Relu is a clamp at 10.
    stage = integer_stage(compiled)
    (node,) = [n for n in stage.nodes if n.op == "QLinearConv"]
    node.attrs["output_range"] = None
    session = ort_session(stage)
    for seed in SEEDS:
        x = np.random.default_rng(seed).integers(-128, 128, (1, 3, 6, 6)).astype(np.int8)
        want = np.maximum(session.run(None, {"x": x})[0], 10).astype(np.int8)
        assert differing(run(compiled.final, {"x": x})["y"], want) == 0


def test_a_unit_with_computed_weights_stays_float(tmp_path):
    model, w = _qdq_conv_relu(out_zero_point=-128, weights_as_input=True)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    compiled = compilation(load_onnx(path))
    ops = Counter(n.op for n in compiled.final.nodes)
    assert ops["QLinearConv"] == 0 and ops["Conv"] == 1, ops
    x = np.random.default_rng(0).integers(-128, 128, (1, 3, 6, 6)).astype(np.int8)
    want = ort_run(model, {"x": x, "w": w})[0]
    assert differing(run(compiled.final, {"x": x, "w": w})["y"], want) == 0


def test_an_inconsistent_bias_scale_is_one_line_naming_the_layer(tmp_path, capsys):
    model, _ = _qdq_conv_relu(out_zero_point=-128)
    for init in model.graph.initializer:
        if init.name == "bs":  # the bias scale, no longer input scale x weight scale
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 1.5, "bs"))
    path = tmp_path / "bad_bias.onnx"
    onnx.save(model, path)
    assert cli.main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad_bias.onnx" in err and "(Conv)" in err
    assert "int32 bias has scale" in err and "must be equal" in err


def test_verify_holds_every_stage_after_to_integer_to_its_integers(quantized_digits):
    result = run_pipeline(load_onnx(quantized_digits["QDQ"]), verify=True, snapshots=False)
    names = [r.name for r in result.records]
    start = names.index("to_integer")
    assert result.records[start].changed and result.records[start].matches
    later = [r for r in result.records[start + 1:] if r.verified]
    assert later and all(r.matches and r.max_abs_err == 0 for r in later)


def test_a_concat_of_equal_parameters_joins_the_integers(tmp_path):
    params = [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
              numpy_helper.from_array(np.array(5, np.int8), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["a", "s", "z"], ["af"]),
             helper.make_node("DequantizeLinear", ["b", "s", "z"], ["bf"]),
             helper.make_node("Concat", ["af", "bf"], ["c"], axis=1),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["y"])]
    model = _qdq_model(nodes, [
        helper.make_tensor_value_info("a", TensorProto.INT8, [1, 2, 3]),
        helper.make_tensor_value_info("b", TensorProto.INT8, [1, 4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 6, 3])], params)
    path = tmp_path / "cat.onnx"
    onnx.save(model, path)
    final = compilation(load_onnx(path)).final
    assert [n.op for n in final.nodes] == ["Concat"]
    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(-128, 128, (1, 2, 3)).astype(np.int8),
             "b": rng.integers(-128, 128, (1, 4, 3)).astype(np.int8)}
    assert differing(run(final, feeds)["y"], ort_run(model, feeds)[0]) == 0


def test_a_quantized_mul_becomes_qlinear_mul(tmp_path):
    names = ["as", "az", "bs", "bz", "ys", "yz"]
    values = [0.05, 3, 0.02, -7, 0.04, 1]
    params = [numpy_helper.from_array(np.array(v, np.float32 if isinstance(v, float)
                                                else np.int8), n) for v, n in zip(values, names)]
    nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["af"]),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"]),
             helper.make_node("Mul", ["af", "bf"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["y"])]
    model = _qdq_model(nodes, [
        helper.make_tensor_value_info(n, TensorProto.INT8, [2, 16]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [2, 16])], params)
    path = tmp_path / "mul.onnx"
    onnx.save(model, path)
    compiled = compilation(load_onnx(path))
    assert [n.op for n in compiled.final.nodes] == ["QLinearMul"]
    session = ort_session(integer_stage(compiled))
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        feeds = {n: rng.integers(-128, 128, (2, 16)).astype(np.int8) for n in ("a", "b")}
        ours = run(compiled.final, feeds)["y"]
        assert differing(ours, session.run(None, feeds)[0]) == 0


@pytest.mark.parametrize("op,attrs", [("Relu", {}), ("LeakyRelu", {"alpha": 0.2})])
def test_a_lone_activation_becomes_a_table(op, attrs, tmp_path):
    params = [numpy_helper.from_array(np.array(0.03, np.float32), "xs"),
              numpy_helper.from_array(np.array(10, np.int8), "xz"),
              numpy_helper.from_array(np.array(0.02, np.float32), "ys"),
              numpy_helper.from_array(np.array(-20, np.int8), "yz")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node(op, ["xf"], ["r"], **attrs),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["y"])]
    model = _qdq_model(nodes, [
        helper.make_tensor_value_info("x", TensorProto.INT8, [256])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [256])], params)
    path = tmp_path / "act.onnx"
    onnx.save(model, path)
    final = compilation(load_onnx(path)).final
    assert [n.op for n in final.nodes] == ["QLinearLeakyRelu"]
    x = np.arange(-128, 128).astype(np.int8)
    # The table is the QDQ model's own float arithmetic: onnxruntime without fusion agrees.
    assert differing(run(final, {"x": x})["y"], ort_run(model, {"x": x})[0]) == 0


@pytest.mark.parametrize("value", [None, 0.0, 0.5, 0.37])
def test_a_pad_runs_on_the_integers_when_its_value_has_one(value, tmp_path):
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(-5, np.int8), "z"),
             numpy_helper.from_array(np.array([0, 1, 2, 0, 1, 0], np.int64), "pads")]
    pad_inputs = ["xf", "pads"]
    if value is not None:
        inits.append(numpy_helper.from_array(np.array(value, np.float32), "c"))
        pad_inputs.append("c")
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
             helper.make_node("Pad", pad_inputs, ["p"]),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["y"])]
    model = _qdq_model(nodes, [
        helper.make_tensor_value_info("x", TensorProto.INT8, [1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 5, 5])], inits)
    path = tmp_path / "pad.onnx"
    onnx.save(model, path)
    final = compilation(load_onnx(path)).final
    integer = value != 0.37  # 0.37 is not a multiple of the scale: the Pad stays float
    assert ([n.op for n in final.nodes] == ["Pad"]) == integer
    x = np.random.default_rng(0).integers(-128, 128, (1, 3, 4)).astype(np.int8)
    assert differing(run(final, {"x": x})["y"], ort_run(model, {"x": x})[0]) == 0


def test_the_pass_says_which_unit_stays_float_and_why(tmp_path):
    model, w = _qdq_conv_relu(out_zero_point=-128, weights_as_input=True)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = run_pipeline(load_onnx(path), snapshots=False)
    record = next(r for r in result.records if r.name == "to_integer")
    assert not record.changed and len(record.notes) == 1
    assert record.notes[0].endswith("(Conv) stays float: its weights (wf) are computed at run "
                                    "time")
    assert record.to_json()["notes"] == record.notes


def test_a_sliding_average_pool_becomes_qlinear_average_pool(tmp_path):
    params = [numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
              numpy_helper.from_array(np.array(3, np.int8), "xz"),
              numpy_helper.from_array(np.array(0.04, np.float32), "ys"),
              numpy_helper.from_array(np.array(-2, np.int8), "yz")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("AveragePool", ["xf"], ["p"], kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["y"])]
    model = _qdq_model(nodes, [
        helper.make_tensor_value_info("x", TensorProto.INT8, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 3, 4, 4])], params)
    path = tmp_path / "avg.onnx"
    onnx.save(model, path)
    compiled = compilation(load_onnx(path))
    assert [n.op for n in compiled.final.nodes if n.op.startswith("Q")] == ["QLinearAveragePool"]
    session = ort_session(integer_stage(compiled))
    for seed in SEEDS:
        x = np.random.default_rng(seed).integers(-128, 128, (1, 3, 8, 8)).astype(np.int8)
        assert differing(run(compiled.final, {"x": x})["y"], session.run(None, {"x": x})[0]) == 0


@pytest.mark.parametrize("keepdims", [1, 0])
def test_a_spatial_mean_becomes_a_global_average_pool(keepdims, tmp_path):
    params = [numpy_helper.from_array(np.array(v, np.float32 if isinstance(v, float) else np.int8),
                                      n) for v, n in ((0.04, "xs"), (3, "xz"), (0.02, "ys"),
                                                      (-5, "yz"))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("ReduceMean", ["xf"], ["m"], axes=[2, 3], keepdims=keepdims),
             helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["y"])]
    out_shape = [1, 8, 1, 1] if keepdims else [1, 8]
    model = _qdq_model(nodes, [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 8, 5, 6])],
                       [helper.make_tensor_value_info("y", TensorProto.INT8, out_shape)], params)
    path = tmp_path / "mean.onnx"
    onnx.save(model, path)
    compiled = compilation(load_onnx(path))
    ops = [n.op for n in compiled.final.nodes]
    assert "QLinearGlobalAveragePool" in ops and "ReduceMean" not in ops, ops
    session = ort_session(integer_stage(compiled))
    for seed in SEEDS:
        x = np.random.default_rng(seed).integers(-128, 128, (1, 8, 5, 6)).astype(np.int8)
        ours = run(compiled.final, {"x": x})["y"]
        assert ours.shape == tuple(out_shape)
        assert differing(ours, session.run(None, {"x": x})[0]) == 0
