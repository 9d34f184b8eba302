"""Scales at float32's edges: refused in one sentence, or computed as IEEE float32 says.

- A scale so large that its type's own values dequantize to infinity (1e30 on int32, 2e36 on
  int8) is refused at load, like a subnormal one; its largest admitted twin loads.
- Scales whose requantization ratio overflows float32 (onnx rule: in * w / out) are refused at
  load, and so are QLinearAdd/QLinearMul ratios that requantize beyond int32, where
  onnxruntime converts out of range (undefined in C); a QDQ unit with such scales stays float.
- A Clip folded into an integer operator whose bounds lie beyond the output's range clamps to
  the range's edge (a lower bound above the upper one gives the upper one, as Clip does).
- An infinite LeakyRelu alpha and products beyond float32 compute infinity and saturate, as C
  does, with no numpy warning.

Every case goes through `kiln` with warnings recorded: a warning or a traceback fails it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import helper

from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.passes import Pipeline, default_pipeline
from compiler.qmath.requant import requantize_onnx
from compiler.qmath.scales import largest_scale
from tests.helpers import make_model, ort_run
from tests.quant.test_hostile_quantized_engines import _compiled_equals_interpreter, _feeds
from tests.test_invalid_quantized import _accepted, _refused, _save

X_I8 = np.arange(-128, 128, 8, dtype=np.int8).reshape(1, 2, 4, 4)  # with 0: alpha * 0


def _no_warnings(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args)


def _int32_dequantize(scale: float):
    """x + DequantizeLinear(an int32 initializer): a bias dequantized on its own."""
    inits = {"b": np.array([2**31 - 1, -(2**31), 5, 0], np.int32), "s": np.float32(scale)}
    nodes = [helper.make_node("DequantizeLinear", ["b", "s"], ["bf"]),
             helper.make_node("Add", ["x", "bf"], ["y"])]
    return make_model(nodes, [("x", np.float32, [4])], [("y", np.float32, [4])], inits)


def _qlinear_conv(xs=0.05, ws=0.01, ys=0.3):
    inits = {"xs": np.float32(xs), "xz": np.int8(0), "w": np.ones((2, 2, 3, 3), np.int8),
             "ws": np.float32(ws), "wz": np.int8(0), "ys": np.float32(ys), "yz": np.int8(0)}
    node = helper.make_node("QLinearConv", ["x", *inits], ["y"], pads=[1, 1, 1, 1])
    return make_model([node], [("x", np.int8, [1, 2, 4, 4])], [("y", np.int8, None)], inits)


def _qlinear_binary(op: str, sa=0.05, sb=0.05, sc=0.1):
    inits = {"sa": np.float32(sa), "za": np.int8(0), "sb": np.float32(sb), "zb": np.int8(0),
             "sc": np.float32(sc), "zc": np.int8(0)}
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"],
                            domain="com.microsoft")
    model = make_model([node], [("a", np.int8, [8]), ("b", np.int8, [8])],
                       [("y", np.int8, [8])], inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _qdq(op_nodes, inits, scales=(0.05, 0.05, 0.1), shape=(1, 2, 4, 4)):
    """x and y int8 through Dequantize/Quantize pairs around `op_nodes`, which read xf (and cf,
    a dequantized constant of 7s, one per channel)."""
    sx, sc, sy = scales
    inits = {**inits, "sx": np.float32(sx), "sy": np.float32(sy), "z": np.int8(0)}
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "z"], ["xf"])]
    if any("cf" in n.input for n in op_nodes):
        inits.update(sc=np.float32(sc), c=np.full((1, shape[1], 1, 1), 7, np.int8))
        nodes.append(helper.make_node("DequantizeLinear", ["c", "sc", "z"], ["cf"]))
    nodes += [*op_nodes, helper.make_node("QuantizeLinear", ["yf", "sy", "z"], ["y"])]
    return make_model(nodes, [("x", np.int8, list(shape))], [("y", np.int8, None)], inits)


# -- scales whose type's values dequantize beyond float32 ----------------------------------------

@pytest.mark.parametrize("model,needle", [
    (lambda: _int32_dequantize(1e30), "(here int32)"),
    (lambda: _qlinear_conv(ws=2e36), "weight scale"),
    (lambda: _qlinear_conv(ys=3e38), "output scale"),
], ids=["int32-dequantize", "qlinear-conv-weight", "qlinear-conv-output"])
def test_a_scale_whose_values_dequantize_to_infinity_is_refused(model, needle, capsys,
                                                                 tmp_path):
    _refused(capsys, tmp_path, _save(tmp_path, model(), "huge.onnx"), needle, "float32")


def test_the_largest_admitted_scales_load_and_run_as_onnxruntime(capsys, tmp_path):
    model = _int32_dequantize(float(np.float32(largest_scale("int32")) * np.float32(0.999)))
    _accepted(capsys, _save(tmp_path, model, "edge.onnx"))
    feeds = {"x": np.array([1, -1, 2, 0], np.float32)}
    ours = _no_warnings(run, load_onnx(model), feeds)["y"]
    np.testing.assert_array_equal(ours, ort_run(model, feeds)[0])
    assert np.all(np.isfinite(ours))


# -- requantization ratios beyond float32 or int32 ------------------------------------------------

@pytest.mark.parametrize("model,needle", [
    (lambda: _qlinear_conv(xs=1e30, ws=1e30, ys=1e-3), "overflows float32"),
    (lambda: _qlinear_conv(xs=10.0, ws=10.0, ys=1.2e-38), "overflows float32"),
    (lambda: _qlinear_binary("QLinearMul", 1e10, 1e10, 1e-3), "beyond int32"),
    (lambda: _qlinear_binary("QLinearAdd", 1e4, 1e4, 1e-3), "beyond int32"),
], ids=["conv-product", "conv-tiny-output", "mul", "add"])
def test_a_requantization_ratio_beyond_the_engines_is_refused(model, needle, capsys, tmp_path):
    _refused(capsys, tmp_path, _save(tmp_path, model(), "ratio.onnx"), needle)


@pytest.mark.parametrize("op", ["QLinearMul", "QLinearAdd"])
def test_the_widest_binary_ratios_admitted_run_as_onnxruntime(op, capsys, tmp_path):
    """Ratios just inside int32's reach load, and the interpreter and compiled object agree
    with onnxruntime on the extreme inputs."""
    scales = (1.0, 1.0, 3.2e-5) if op == "QLinearMul" else (1.0, 1.0, 3.0e-7)
    model = _qlinear_binary(op, *scales)
    _accepted(capsys, _save(tmp_path, model, "wide.onnx"))
    edges = np.array([-128, 127, 0, -1, 1, 127, -128, 64], np.int8)
    feeds = {"a": edges, "b": edges[::-1].copy()}
    ours = _no_warnings(run, load_onnx(model), feeds)["y"]
    np.testing.assert_array_equal(ours, ort_run(model, feeds)[0])
    _compiled_equals_interpreter(load_onnx(model))


def test_a_qdq_mul_whose_ratio_reaches_beyond_int32_stays_float():
    model = _qdq([helper.make_node("Mul", ["xf", "cf"], ["yf"])], {},
                 scales=(1e10, 1e10, 1e-3))
    graph = load_onnx(model)
    prepared = _no_warnings(lambda: compilation(graph).prepared)
    assert "QLinearMul" not in {n.op for n in prepared.nodes}
    feeds = _feeds(prepared, 0)
    np.testing.assert_array_equal(run(prepared, feeds)["y"], run(graph, feeds)["y"])
    _compiled_equals_interpreter(graph)


# -- folded Clip bounds beyond the output range ---------------------------------------------------

@pytest.mark.parametrize("low,high", [(1e30, 6.0), (-1e30, 1e30), (5.0, 1.0), (-7.0, -1e30)])
def test_a_folded_clip_beyond_the_output_range_clamps_to_its_edge(low, high):
    inits = {"w": np.ones((2, 2, 1, 1), np.int8), "sw": np.float32(0.02), "lo": np.float32(low),
             "hi": np.float32(high)}
    nodes = [helper.make_node("DequantizeLinear", ["w", "sw"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf"], ["conv"]),
             helper.make_node("Clip", ["conv", "lo", "hi"], ["yf"])]
    model = _qdq(nodes, inits)
    graph = load_onnx(model)
    prepared = _no_warnings(lambda: compilation(graph).prepared)
    assert "QLinearConv" in {n.op for n in prepared.nodes}
    for seed in range(3):
        feeds = _feeds(graph, seed)
        want = run(graph, feeds)["y"]
        np.testing.assert_array_equal(run(prepared, feeds)["y"], want)
        np.testing.assert_array_equal(ort_run(model, feeds)[0], want)
    _compiled_equals_interpreter(graph)


# -- IEEE infinities saturate without warnings ---------------------------------------------------

def test_an_infinite_leaky_relu_alpha_saturates_as_onnxruntime():
    model = _qdq([helper.make_node("LeakyRelu", ["xf"], ["yf"], alpha=float("inf"))], {})
    graph = load_onnx(model)
    feeds = {"x": X_I8}
    want = ort_run(model, feeds)[0]
    np.testing.assert_array_equal(_no_warnings(run, graph, feeds)["y"], want)
    prepared = _no_warnings(lambda: compilation(graph).prepared)
    np.testing.assert_array_equal(_no_warnings(run, prepared, feeds)["y"], want)
    _compiled_equals_interpreter(graph)


def test_an_accumulator_times_a_huge_scale_saturates_as_mlas():
    acc = np.array([2**31 - 1, -(2**31), 0, 5], np.int64)
    got = _no_warnings(requantize_onnx, acc, np.float32(3e38), 0, -128, 127)
    np.testing.assert_array_equal(got, [127, -128, 0, 127])


# -- the long campaign's classes ------------------------------------------------------------------

def _qlinear_softmax(y_scale: float):
    inits = {"xs": np.float32(0.25), "xz": np.uint8(155), "ys": np.float32(y_scale),
             "yz": np.uint8(0)}
    node = helper.make_node("QLinearSoftmax", ["x", *inits], ["y"], axis=-1, opset=13,
                            domain="com.microsoft")
    model = make_model([node], [("x", np.uint8, [5, 7])], [("y", np.uint8, [5, 7])], inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def test_a_softmax_output_scale_whose_float32_products_overflow_saturates_as_onnxruntime():
    """entry * floor(1 / y_scale) overflows float32 for y_scale 2**-12 on rows of 7;
    onnxruntime divides in float64 and saturates at the top, and so do both of Kiln's engines."""
    for y_scale in (2**-12, 1 / 256):
        model = _qlinear_softmax(y_scale)
        feeds = {"x": np.random.default_rng(0).integers(0, 256, (5, 7)).astype(np.uint8)}
        graph = load_onnx(model)
        want = ort_run(model, feeds)[0]
        np.testing.assert_array_equal(_no_warnings(run, graph, feeds)["y"], want)
        if y_scale < 1 / 256:
            assert (want == 255).any()
        _compiled_equals_interpreter(graph)


@pytest.mark.parametrize("op", ["LeakyRelu", "QLinearLeakyRelu"])
def test_a_nan_alpha_is_refused(op, capsys, tmp_path):
    if op == "LeakyRelu":
        model = _qdq([helper.make_node("LeakyRelu", ["xf"], ["yf"], alpha=float("nan"))], {})
    else:
        inits = {"xs": np.float32(0.1), "xz": np.int8(0), "ys": np.float32(0.1),
                 "yz": np.int8(0)}
        node = helper.make_node(op, ["x", *inits], ["y"], alpha=float("nan"),
                                domain="com.microsoft")
        model = make_model([node], [("x", np.int8, [8])], [("y", np.int8, [8])], inits)
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _refused(capsys, tmp_path, _save(tmp_path, model, "nan.onnx"), "alpha is NaN")


def test_a_qdq_unit_with_empty_weights_stays_float_and_compiles_to_nothing():
    inits = {"w": np.zeros((0, 2, 1, 1), np.int8), "sw": np.float32(0.02)}
    nodes = [helper.make_node("DequantizeLinear", ["w", "sw"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf"], ["yf"])]
    graph = load_onnx(_qdq(nodes, inits))
    prepared = _no_warnings(lambda: compilation(graph).prepared)
    assert "QLinearConv" not in {n.op for n in prepared.nodes}
    assert _no_warnings(run, prepared, _feeds(prepared, 0))["y"].shape == (1, 0, 4, 4)
    _compiled_equals_interpreter(graph)  # an empty result: its node writes nothing


@pytest.mark.parametrize("op", ["QLinearAveragePool", "QLinearGlobalAveragePool"])
def test_an_average_requantized_beyond_int32_is_refused(op, capsys, tmp_path):
    """onnxruntime converts the float average to int32 before it saturates (undefined beyond
    int32: it answers the lowest code for +inf)."""
    inits = {"xs": np.float32(1e36), "xz": np.int8(0), "ys": np.float32(1e-30),
             "yz": np.int8(0)}
    attrs = {"kernel_shape": [2, 2]} if op == "QLinearAveragePool" else {}
    node = helper.make_node(op, ["x", *inits], ["y"], domain="com.microsoft", **attrs)
    model = make_model([node], [("x", np.int8, [1, 2, 4, 4])], [("y", np.int8, None)], inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _refused(capsys, tmp_path, _save(tmp_path, model, "avg.onnx"), "beyond int32")


def test_a_global_average_of_an_empty_image_is_refused(capsys, tmp_path):
    inits = {"xs": np.float32(0.1), "xz": np.int8(0), "ys": np.float32(0.1), "yz": np.int8(0)}
    node = helper.make_node("QLinearGlobalAveragePool", ["x", *inits], ["y"],
                            domain="com.microsoft")
    model = make_model([node], [("x", np.int8, [1, 2, 0, 3])], [("y", np.int8, None)], inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _refused(capsys, tmp_path, _save(tmp_path, model, "empty.onnx"), "empty image")


def test_a_float_convolution_of_infinities_computes_ieee_without_warnings():
    inits = {"w": np.array([1.0, -1.0, 0.0, 2.0], np.float32).reshape(1, 4, 1, 1)}
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])],
                       [("x", np.float32, [1, 4, 2, 2])], [("y", np.float32, None)], inits)
    x = np.full((1, 4, 2, 2), np.inf, np.float32)
    x[0, 1, 0, 0] = 1.0
    ours = _no_warnings(run, load_onnx(model), {"x": x})["y"]
    np.testing.assert_array_equal(ours, ort_run(model, {"x": x})[0])


def test_a_qdq_average_whose_integer_form_is_refused_stays_float():
    """The integer operator refuses the unit's scales; the unit keeps computing in float, and
    the pass says why."""
    model = _qdq([helper.make_node("AveragePool", ["xf"], ["yf"], kernel_shape=[2, 2])], {},
                 scales=(1e36, 0.1, 1e-30))
    graph = load_onnx(model)
    result = compilation(graph).passes()
    assert "QLinearAveragePool" not in {n.op for n in result.graph.nodes}
    (record,) = [r for r in result.records if r.name == "to_integer"]
    assert any("stays float" in note and "beyond int32" in note for note in record.notes)
    _compiled_equals_interpreter(graph)


def test_a_tflite_rule_multiplier_beyond_a_31_bit_shift_keeps_the_onnx_rule():
    """Asked for the tflite rule, an ONNX QLinearConv whose TFLite Micro multiplier would need a
    shift of 32 bits or more (undefined in C) keeps the onnx rule, and the pass says why."""
    graph = load_onnx(_qlinear_conv(xs=1e6, ws=1e6, ys=1e-3))
    result = compilation(graph, Pipeline(default_pipeline().passes, requant="tflite")).passes()
    (conv,) = [n for n in result.graph.nodes if n.op == "QLinearConv"]
    assert conv.attrs["requant"] == "onnx"
    notes = [n for r in result.records for n in r.notes]
    assert any("keeps the onnx rule" in n and "above 31" in n for n in notes), notes
