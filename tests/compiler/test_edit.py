"""Hand edits: each returns a new graph, leaves the old one intact, and reports what breaks."""

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler import edit
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.interpreter import run
from compiler.ir.dump import dump
from compiler.verify import verify
from tests.conftest import SAMPLE_MODEL
from tests.helpers import make_model


@pytest.fixture(scope="module")
def sample():
    return load_onnx(SAMPLE_MODEL)


def _by_name(graph, name):
    return next(n for n in graph.nodes if n.name == name)


def _unchanged(graph, before_text):
    assert dump(graph) == before_text


def _feeds(graph, seed=0):
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.type.shape).astype(v.type.dtype) for v in graph.inputs}


def _saves(graph):
    onnx.checker.check_model(to_onnx(graph), full_check=True)


# -- delete ---------------------------------------------------------------------------------------


def test_delete_bypasses_a_single_input_node(sample):
    before = dump(sample)
    relu = _by_name(sample, "relu1")
    new = edit.delete_node(sample, relu.id)
    _unchanged(sample, before)
    assert "relu1" not in {n.name for n in new.nodes}
    conv2 = _by_name(new, "conv2")
    assert conv2.inputs[0].name == "conv1_out"
    assert edit.problems(new) == {}
    verify(new)
    _saves(new)


def test_delete_conv_takes_its_weights_and_reports_the_shape_break(sample):
    new = edit.delete_node(sample, _by_name(sample, "conv2").id)
    assert "conv2.weight" not in new.constants and "conv2.bias" not in new.constants
    assert "conv1.weight" in new.constants
    problems = edit.problems(new)
    assert list(problems) == [_by_name(new, "conv3").id]
    assert "input channels" in problems[_by_name(new, "conv3").id]


def test_delete_the_last_node_keeps_the_output_name(sample):
    new = edit.delete_node(sample, _by_name(sample, "fc").id)
    assert [v.name for v in new.outputs] == ["logits"]
    assert new.outputs[0].producer.name == "flatten"
    assert new.outputs[0].type.shape == (1, 256)
    _saves(new)


def test_delete_refuses_a_used_node_with_two_data_inputs():
    model = make_model([helper.make_node("Add", ["a", "b"], ["s"]),
                        helper.make_node("Relu", ["s"], ["y"])],
                       [("a", "float32", [2]), ("b", "float32", [2])], [("y", "float32", [2])])
    graph = load_onnx(model)
    with pytest.raises(KilnError, match="2 data inputs"):
        edit.delete_node(graph, graph.nodes[0].id)


def test_delete_an_unused_node_removes_only_it():
    model = make_model([helper.make_node("Relu", ["x"], ["y"]),
                        helper.make_node("Neg", ["x"], ["z"])],
                       [("x", "float32", [2])], [("y", "float32", [2])])
    graph = load_onnx(model)
    new = edit.delete_node(graph, graph.nodes[1].id)
    assert [n.op for n in new.nodes] == ["Relu"]


def test_delete_removes_a_constant_subgraph_that_only_fed_the_node():
    model = make_model(
        [helper.make_node("ConstantOfShape", ["wshape"], ["w"],
                          value=helper.make_tensor("v", 1, [1], [0.5])),
         helper.make_node("Mul", ["x", "w"], ["y"]),
         helper.make_node("Relu", ["y"], ["z"])],
        [("x", "float32", [2])], [("z", "float32", [2])],
        {"wshape": np.array([2], np.int64)})
    graph = load_onnx(model)
    mul = _by_name(graph, graph.nodes[1].name)
    new = edit.delete_node(graph, mul.id)
    assert [n.op for n in new.nodes] == ["Relu"]
    assert new.constants == {}
    _saves(new)


def test_delete_unknown_node(sample):
    with pytest.raises(KilnError, match="no node with id 999"):
        edit.delete_node(sample, 999)


# -- attributes -----------------------------------------------------------------------------------


def test_set_attribute_reinfers_shapes(sample):
    before = dump(sample)
    pool = _by_name(sample, "pool1")
    new = edit.set_attribute(sample, pool.id, "strides", [1, 1])
    _unchanged(sample, before)
    assert _by_name(new, "pool1").attrs["strides"] == (1, 1)
    assert _by_name(new, "pool1").output.type.shape == (1, 16, 7, 7)
    # The shape change reaches Gemm, whose weights no longer fit: one problem, the Gemm.
    assert list(edit.problems(new)) == [_by_name(new, "fc").id]


def test_bad_attribute_value_marks_the_node_invalid(sample):
    conv = _by_name(sample, "conv1")
    new = edit.set_attribute(sample, conv.id, "kernel_shape", (5, 5))
    problems = edit.problems(new)
    assert list(problems) == [conv.id]
    assert "does not match the weights" in problems[conv.id]
    fixed = edit.set_attribute(new, conv.id, "kernel_shape", (3, 3))
    assert edit.problems(fixed) == {}
    assert dump(fixed) == dump(sample)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("kernel_shape", "3", "list of integers"),
    ("group", 1.5, "an integer"),
    ("group", True, "an integer"),
    ("nonsense", 1, "no attribute"),
    ("layout", "NHWC", "set by the compiler"),
    ("kernel_shape", None, None),  # optional: resets to the default (inferred from weights)
])
def test_set_attribute_checks_the_kind(sample, name, value, message):
    conv = _by_name(sample, "conv1")
    if message is None:
        new = edit.set_attribute(sample, conv.id, name, value)
        assert _by_name(new, "conv1").attrs[name] is None
        return
    with pytest.raises(KilnError, match=message):
        edit.set_attribute(sample, conv.id, name, value)


def test_parse_and_format_attribute_round_trip():
    assert edit.parse_attribute("ints", "[1, 2]") == (1, 2)
    assert edit.parse_attribute("ints", "3,4") == (3, 4)
    assert edit.parse_attribute("int", " 7 ") == 7
    assert edit.parse_attribute("float", "0.5") == 0.5
    assert edit.parse_attribute("floats", "[]") == ()
    assert edit.parse_attribute("string", "NOTSET") == "NOTSET"
    assert edit.parse_attribute("ints", "") is None
    for kind, value in [("ints", (1, -2)), ("int", 4), ("floats", (0.5, 2.0)), ("string", "x")]:
        assert edit.parse_attribute(kind, edit.format_attribute(value)) == value
    with pytest.raises(KilnError, match="an integer"):
        edit.parse_attribute("ints", "[1, x]")


# -- renames --------------------------------------------------------------------------------------


def test_rename_node(sample):
    new = edit.rename_node(sample, _by_name(sample, "conv1").id, "first conv")
    assert _by_name(new, "first conv").op == "Conv"
    assert "conv1" in {n.name for n in sample.nodes}
    with pytest.raises(KilnError, match="already named"):
        edit.rename_node(new, _by_name(new, "conv2").id, "first conv")
    with pytest.raises(KilnError, match="empty"):
        edit.rename_node(new, _by_name(new, "conv2").id, "  ")
    with pytest.raises(KilnError, match="control characters"):
        edit.rename_node(new, _by_name(new, "conv2").id, "a\nb")


def test_rename_value_of_each_kind(sample):
    new = edit.rename_value(sample, "relu1_out", "activations")
    assert _by_name(new, "conv2").inputs[0].name == "activations"
    new = edit.rename_value(new, "conv1.weight", "w1")
    assert list(new.constants)[0] == "w1"
    assert _by_name(new, "conv1").inputs[1].name == "w1"
    new = edit.rename_value(new, "image", "pixels")
    assert new.inputs[0].name == "pixels"
    verify(new)
    _saves(new)
    feeds = _feeds(sample)
    want = run(sample, feeds)["logits"]
    got = run(new, {"pixels": feeds["image"]})["logits"]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(KilnError, match="already named"):
        edit.rename_value(new, "pixels", "logits")
    with pytest.raises(KilnError, match="no tensor"):
        edit.rename_value(new, "nope", "x")


# -- insert ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", edit.PALETTE)
def test_insert_palette_ops_keep_the_graph_valid(sample, op):
    before = dump(sample)
    new = edit.insert_operator(sample, "conv1_out", op)
    _unchanged(sample, before)
    inserted = [n for n in new.nodes if n.op == op and n.id >= sample.next_id]
    assert len(inserted) == 1
    assert _by_name(new, "relu1").inputs[0] is inserted[0].output
    assert edit.problems(new) == {}
    verify(new)
    _saves(new)
    feeds = _feeds(sample)
    got, want = run(new, feeds)["logits"], run(sample, feeds)["logits"]
    if op in ("Identity", "Transpose", "Reshape"):
        np.testing.assert_array_equal(got, want)


def test_insert_clip_bounds_and_reshape_target(sample):
    new = edit.insert_operator(sample, "conv1_out", "Clip", {"min": -1, "max": 1})
    clip = next(n for n in new.nodes if n.op == "Clip")
    assert [float(v.data) for v in clip.inputs[1:]] == [-1.0, 1.0]
    new = edit.insert_operator(sample, "flatten_out", "Reshape", {"shape": [1, 16, 16]})
    problems = edit.problems(new)
    assert list(problems) == [_by_name(new, "fc").id]
    assert "2-D" in problems[_by_name(new, "fc").id]


def test_insert_transpose_with_a_permutation_breaks_downstream(sample):
    new = edit.insert_operator(sample, "relu1_out", "Transpose", {"perm": [0, 2, 3, 1]})
    transpose = next(n for n in new.nodes if n.op == "Transpose")
    assert transpose.output.type.shape == (1, 8, 8, 8)
    new = edit.insert_operator(sample, "conv2_out", "Transpose", {"perm": [0, 3, 2, 1]})
    assert _by_name(new, "relu2").output.type.shape == (1, 8, 8, 16)


def test_insert_before_one_consumer_only():
    model = make_model([helper.make_node("Relu", ["x"], ["a"]),
                        helper.make_node("Neg", ["a"], ["b"]),
                        helper.make_node("Abs", ["a"], ["c"])],
                       [("x", "float32", [2])], [("b", "float32", [2]), ("c", "float32", [2])])
    graph = load_onnx(model)
    neg = _by_name(graph, graph.nodes[1].name)
    new = edit.insert_operator(graph, "a", "Sigmoid", consumer=neg.id)
    ops_of = {n.op: n for n in new.nodes}
    assert ops_of["Neg"].inputs[0].producer.op == "Sigmoid"
    assert ops_of["Abs"].inputs[0].producer.op == "Relu"
    with pytest.raises(KilnError, match="does not feed"):
        edit.insert_operator(graph, "a", "Sigmoid", consumer=ops_of["Relu"].id)


def test_insert_on_the_model_output_keeps_its_name(sample):
    new = edit.insert_operator(sample, "logits", "Softmax", consumer=edit.GRAPH_OUTPUT)
    assert new.outputs[0].name == "logits"
    assert new.outputs[0].producer.op == "Softmax"
    assert _by_name(new, "fc").output.name != "logits"
    _saves(new)
    out = run(new, _feeds(sample))["logits"]
    np.testing.assert_allclose(out.sum(), 1.0, rtol=1e-5)


def test_insert_refuses_unknown_ops_and_attributes(sample):
    with pytest.raises(KilnError, match="cannot be inserted"):
        edit.insert_operator(sample, "conv1_out", "Conv")
    with pytest.raises(KilnError, match="no attribute"):
        edit.insert_operator(sample, "conv1_out", "Relu", {"alpha": 1.0})
    with pytest.raises(KilnError, match="no tensor"):
        edit.insert_operator(sample, "missing", "Relu")


def test_insertable_ops_start_with_the_palette():
    names = edit.insertable_ops()
    assert names[:5] == list(edit.PALETTE)
    assert "Sigmoid" in names and "Conv" not in names and "Shape" not in names


# -- input shape ----------------------------------------------------------------------------------


def test_set_input_shape_reinfers(sample):
    new = edit.set_input_shape(sample, "image", (4, 1, 8, 8))
    assert new.inputs[0].type.shape == (4, 1, 8, 8)
    assert _by_name(new, "conv1").output.type.shape == (4, 8, 8, 8)
    assert sample.inputs[0].type.shape == (1, 1, 8, 8)
    bigger = edit.set_input_shape(sample, "image", (1, 1, 16, 16))
    assert list(edit.problems(bigger)) == [_by_name(bigger, "fc").id]


@pytest.mark.parametrize(("name", "shape", "message"), [
    ("image", (1, -1, 8, 8), "negative"),
    ("image", (1 << 20, 1 << 20, 8), "limit"),
    ("conv1_out", (1,), "not a graph input"),
    ("image", ("a",), "integers"),
])
def test_set_input_shape_refuses(sample, name, shape, message):
    with pytest.raises(KilnError, match=message):
        edit.set_input_shape(sample, name, shape)


def test_problems_of_a_loaded_graph_are_empty(sample):
    assert edit.problems(sample) == {}


def test_parse_insert_parameters():
    assert edit.parse_insert_parameters("Clip", "-1, 1") == {"min": -1.0, "max": 1.0}
    assert edit.parse_insert_parameters("Reshape", "1, 256") == {"shape": (1, 256)}
    assert edit.parse_insert_parameters("Transpose", "[0, 2, 3, 1]") == {"perm": (0, 2, 3, 1)}
    assert edit.parse_insert_parameters("LeakyRelu", "0.1") == {"alpha": 0.1}
    assert edit.parse_insert_parameters("Relu", " ") == {}
    with pytest.raises(KilnError, match="two numbers"):
        edit.parse_insert_parameters("Clip", "1")
    with pytest.raises(KilnError, match="no parameter"):
        edit.parse_insert_parameters("Relu", "3")
