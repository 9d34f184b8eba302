"""Shape, constant and reduce operators against onnxruntime, at old and new opsets.

The conformance cases are mostly at opset 13 and later; these cover the older encodings (axes,
pads, starts, split and ratio as attributes), compile-time shape chains and the error messages.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler.errors import ModelError
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.ir.graph import Graph
from compiler.ir.types import QuantParams, TensorType
from compiler.ops.infer import reinfer
from tests.helpers import check_against_ort, make_model
from tests.helpers import make_typed_model as typed

RNG = np.random.default_rng(0)
I64 = np.int64


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def check(node, x, opset, inits=(), extra_inputs=()):
    """One node reading "x" (and `extra_inputs`) against onnxruntime; Kiln's outputs by name."""
    inputs = [("x", x.dtype, list(x.shape))]
    inputs += [(n, a.dtype, list(a.shape)) for n, a in extra_inputs]
    model = typed([node], inputs, [o for o in node.output if o], inits, opset)
    return check_against_ort(model, {"x": x, **dict(extra_inputs)})


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def load_error(model, match):
    with pytest.raises(ModelError, match=match):
        load_onnx(model)


# -- Reshape, Flatten, Transpose ----------------------------------------------------------------


@pytest.mark.parametrize("opset", [7, 13, 14])
@pytest.mark.parametrize("shape", [[4, -1], [0, 0, 4, 3], [-1], [2, 0, -1]])
def test_reshape(opset, shape):
    check(node("Reshape", ["x", "s"]), rand(2, 3, 12), opset, {"s": np.array(shape, I64)})


def test_reshape_allowzero():
    y = check(node("Reshape", ["x", "s"], allowzero=1), rand(2, 0, 3), 14,
              {"s": np.array([0, 6], I64)})
    assert y["y"].shape == (0, 6)


def test_reshape_shape_chain_is_known_at_compile_time():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write a flatten.
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Unsqueeze", ["n"], ["n1"], axes=[0]),
             node("Concat", ["n1", "minus1"], ["target"], axis=0),
             node("Reshape", ["x", "target"])]
    model = make_model(nodes, [("x", np.float32, [2, 3, 4])], [("y", np.float32, [2, 12])],
                       {"zero": np.array(0, I64), "minus1": np.array([-1], I64)}, opset=11)
    check_against_ort(model, {"x": rand(2, 3, 4)})


@pytest.mark.parametrize("opset,axis", [(9, 0), (9, 1), (9, 3), (13, 2), (13, -1), (13, -3)])
def test_flatten(opset, axis):
    check(node("Flatten", ["x"], axis=axis), rand(2, 3, 4), opset)


@pytest.mark.parametrize("perm", [None, [0, 2, 1, 3], [3, 1, 0, 2]])
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    check(node("Transpose", ["x"], **attrs), rand(2, 3, 4, 5), 9)


# -- Squeeze / Unsqueeze ------------------------------------------------------------------------


@pytest.mark.parametrize("opset,axes", [(9, [0, 2]), (11, [-1]), (9, None)])
def test_squeeze_attribute_axes(opset, axes):
    attrs = {} if axes is None else {"axes": axes}
    check(node("Squeeze", ["x"], **attrs), rand(1, 3, 1, 1)[..., 0:1], opset)


@pytest.mark.parametrize("axes", [[0], [-1, 0], None])
def test_squeeze_input_axes(axes):
    inputs = ["x"] if axes is None else ["x", "axes"]
    inits = {} if axes is None else {"axes": np.array(axes, I64)}
    check(node("Squeeze", inputs), rand(1, 3, 1), 13, inits)


@pytest.mark.parametrize("opset,axes", [(9, [1, 2]), (11, [-1, 0]), (13, [0, 3]), (21, [2])])
def test_unsqueeze(opset, axes):
    if opset < 13:
        check(node("Unsqueeze", ["x"], axes=axes), rand(3, 4), opset)
    else:
        check(node("Unsqueeze", ["x", "axes"]), rand(3, 4), opset, {"axes": np.array(axes, I64)})


def test_unsqueeze_attribute_saves_back_as_attribute():
    model = make_model([node("Unsqueeze", ["x"], axes=[0])], [("x", np.float32, [3])],
                       [("y", np.float32, [1, 3])], opset=9)
    saved = to_onnx(load_onnx(model))
    (proto,) = saved.graph.node
    assert list(proto.input) == ["x"]
    assert [a.name for a in proto.attribute] == ["axes"]


# -- Concat, Split ------------------------------------------------------------------------------


@pytest.mark.parametrize("opset,axis", [(7, 1), (11, -1), (13, 0)])
def test_concat(opset, axis):
    other = rand(2, 3, 4)
    check(node("Concat", ["x", "b", "c"], axis=axis), rand(2, 3, 4), opset,
          {"b": other, "c": other * 2})


@pytest.mark.parametrize("opset,split", [(9, [1, 4]), (11, None), (13, [2, 3]), (13, None)])
def test_split(opset, split):
    outs = ["a", "b"] if split else ["a", "b", "c"]
    x = rand(2, 5) if split else rand(2, 6)
    if split is None or opset < 13:
        attrs = {} if split is None else {"split": split}
        check(node("Split", ["x"], outs, axis=1, **attrs), x, opset)
    else:
        check(node("Split", ["x", "s"], outs, axis=-1), x, opset, {"s": np.array(split, I64)})


def test_split_opset18():
    check(node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3), rand(7, 2), 18)
    check(node("Split", ["x", "s"], ["a", "b"], axis=1), rand(2, 5), 18,
          {"s": np.array([0, 5], I64)})


# -- Slice --------------------------------------------------------------------------------------


@pytest.mark.parametrize("attrs", [
    {"starts": [1, 0], "ends": [3, 10], "axes": [0, 2]},
    {"starts": [-3], "ends": [2**31 - 1]},
    {"starts": [0, 1, 1], "ends": [-1, 1000, -1]},
])
def test_slice_attributes(attrs):
    check(node("Slice", ["x"], **attrs), rand(4, 3, 5), 9)


@pytest.mark.parametrize("opset", [10, 13])
@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0, 1], [3, -1], [0, 1], [2, 1]),
    ([-1], [-100], [2], [-2]),
    ([10, -20], [2**63 - 1, 2], None, None),
    ([3], [0], [-1], [-1]),
])
def test_slice_inputs(opset, starts, ends, axes, steps):
    inits = {"starts": np.array(starts, I64), "ends": np.array(ends, I64)}
    names = ["x", "starts", "ends"]
    if axes is not None:
        inits["axes"] = np.array(axes, I64)
        names.append("axes")
    if steps is not None:
        inits["steps"] = np.array(steps, I64)
        names.append("steps")
    check(node("Slice", names), rand(4, 6, 5), opset, inits)


# -- Pad ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_attributes(mode):
    attrs = {"value": 1.5} if mode == "constant" else {}
    check(node("Pad", ["x"], mode=mode, pads=[0, 1, 2, 0, 2, 1], **attrs), rand(2, 3, 4), 9)


@pytest.mark.parametrize("opset", [11, 13])
def test_pad_inputs_with_negative_pads(opset):
    check(node("Pad", ["x", "pads", "v"]), rand(2, 3, 4), opset,
          {"pads": np.array([1, -1, 0, 0, 2, -2], I64), "v": np.array(-3.0, np.float32)})


def test_pad_axes_and_wrap():
    check(node("Pad", ["x", "pads", "", "axes"], mode="edge"), rand(2, 3, 4), 18,
          {"pads": np.array([1, 2, 0, 3], I64), "axes": np.array([-1, 1], I64)})
    check(node("Pad", ["x", "pads"], mode="wrap"), rand(2, 3, 4), 19,
          {"pads": np.array([0, 1, 2, 0, 1, 1], I64)})


# -- Shape, Gather, Identity --------------------------------------------------------------------


@pytest.mark.parametrize("opset,attrs", [(9, {}), (15, {"start": 1}), (15, {"start": -2,
                                                                            "end": -1})])
def test_shape(opset, attrs):
    check(node("Shape", ["x"], **attrs), rand(2, 3, 4), opset)


@pytest.mark.parametrize("axis,indices", [(0, [[0, -1], [1, 1]]), (1, -2), (-1, [3, 0, -4])])
def test_gather(axis, indices):
    check(node("Gather", ["x", "i"], axis=axis), rand(3, 4, 4), 11,
          {"i": np.array(indices, I64)})


def test_gather_runtime_indices():
    check(node("Gather", ["x", "i"], axis=1), rand(3, 4), 13,
          extra_inputs=[("i", np.array([-1, 2], np.int32))])


def test_identity():
    check(node("Identity", ["x"]), rand(2, 3), 9)


# -- Dropout ------------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [7, 9, 10, 11])
def test_dropout_ratio_attribute_with_mask(opset):
    # Before opset 10 the mask has the data's type; before 12 onnxruntime makes it all zeros.
    mask_type = np.float32 if opset < 10 else bool
    model = make_model([node("Dropout", ["x"], ["y", "mask"], ratio=0.3)],
                       [("x", np.float32, [2, 3])],
                       [("y", np.float32, [2, 3]), ("mask", mask_type, [2, 3])], opset=opset)
    check_against_ort(model, {"x": rand(2, 3)})


def test_dropout_inputs():
    check(node("Dropout", ["x", "r", "t"], ["y", "mask"]), rand(2, 3), 13,
          {"r": np.array(0.4, np.float32), "t": np.array(False)})
    check(node("Dropout", ["x", "r", "t"]), rand(2, 3), 12,
          {"r": np.array(0.0, np.float32), "t": np.array(True)})


def test_dropout_training_mode_is_refused():
    model = make_model([node("Dropout", ["x", "r", "t"])], [("x", np.float32, [2])],
                       [("y", np.float32, [2])],
                       {"r": np.array(0.5, np.float32), "t": np.array(True)}, opset=13)
    load_error(model, "training mode.*ratio 0.5")


# -- Constant, ConstantOfShape ------------------------------------------------------------------


@pytest.mark.parametrize("attrs", [
    {"value": numpy_helper.from_array(np.arange(6, dtype=np.int32).reshape(2, 3))},
    {"value_float": 2.5}, {"value_floats": [1.0, 2.0]}, {"value_int": 7}, {"value_ints": [1, 2]},
])
def test_constant(attrs):
    nodes = [node("Constant", [], ["c"], **attrs), node("Identity", ["c"])]
    check_against_ort(typed(nodes, [], ["y"]), {})


def test_constant_string_is_refused():
    model = make_model([node("Constant", [], ["y"], value_string="hi")], [],
                       [("y", np.float32, None)], opset=13)
    load_error(model, "value_string.*not supported")


@pytest.mark.parametrize("value", [None, np.array([3], np.int32), np.array([0.5], np.float32)])
def test_constant_of_shape(value):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    nodes = [node("Shape", ["x"], ["s"]), node("ConstantOfShape", ["s"], ["c"], **attrs)]
    x = rand(2, 3)
    check_against_ort(typed(nodes, [("x", x.dtype, [2, 3])], ["c"], opset=9), {"x": x})


def test_constant_of_shape_from_initializer():
    model = typed([node("ConstantOfShape", ["s"])], [], ["y"], {"s": np.array([2, 0, 3], I64)}, 9)
    assert check_against_ort(model, {})["y"].shape == (2, 0, 3)


# -- Reductions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceSum"])
@pytest.mark.parametrize("opset", [9, 11])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0)])
def test_reduce_attribute_axes(op, opset, axes, keepdims):
    attrs = {} if axes is None else {"axes": axes}
    check(node(op, ["x"], keepdims=keepdims, **attrs), rand(2, 3, 4), opset)


@pytest.mark.parametrize("op,opset", [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18)])
@pytest.mark.parametrize("axes,keepdims,noop", [([1], 1, 0), ([-1, 0], 0, 0), ([], 1, 0),
                                                ([], 0, 1), (None, 1, 1)])
def test_reduce_input_axes(op, opset, axes, keepdims, noop):
    inputs = ["x"] if axes is None else ["x", "axes"]
    inits = {} if axes is None else {"axes": np.array(axes, I64)}
    check(node(op, inputs, keepdims=keepdims, noop_with_empty_axes=noop), rand(2, 3, 4), opset,
          inits)


def test_reduce_of_empty_axis():
    x = rand(2, 0, 3)
    for op, want in (("ReduceSum", 0.0), ("ReduceMax", -np.inf)):
        y = check(node(op, ["x", "axes"]), x, 18, {"axes": np.array([1], I64)})
        assert y["y"].shape == (2, 1, 3) and np.all(y["y"] == want)


def test_reduce_int_and_bool():
    check(node("ReduceSum", ["x", "axes"], keepdims=0), RNG.integers(-9, 9, (3, 4)), 13,
          {"axes": np.array([1], I64)})
    check(node("ReduceMean", ["x"], axes=[1]), RNG.integers(-9, 9, (3, 4)).astype(np.int32), 13)
    check(node("ReduceMax", ["x", "axes"]), RNG.integers(0, 2, (3, 4)).astype(bool), 20,
          {"axes": np.array([0], I64)})


# -- Errors -------------------------------------------------------------------------------------


def _one(op_node, shape=(2, 3), inputs=(), inits=(), opset=13):
    return make_model([op_node], [("x", np.float32, list(shape)), *inputs],
                      [("y", np.float32, None)], inits, opset=opset)


def test_runtime_shape_is_refused():
    model = _one(node("Reshape", ["x", "s"]), inputs=[("s", np.int64, [2])])
    load_error(model, "Reshape's shape input must be known at compile time")


@pytest.mark.parametrize("op_node,inits,match", [
    (node("Transpose", ["x"], perm=[0, 0]), {}, r"perm \[0, 0\] is not a permutation"),
    (node("Reshape", ["x", "s"]), {"s": np.array([4, -1], I64)}, "cannot reshape"),
    (node("Split", ["x", "s"], ["a", "b"], axis=1), {"s": np.array([1, 1], I64)},
     r"split sizes \[1, 1\] do not add up to the size 3"),
    (node("Squeeze", ["x", "a"]), {"a": np.array([1], I64)}, "cannot squeeze axis 1"),
    (node("Concat", ["x", "b"], axis=2), {"b": np.zeros((2, 3), np.float32)},
     "axis 2 is out of range for rank 2"),
    (node("Pad", ["x", "p"], mode="reflect"), {"p": np.array([0, 3, 0, 0], I64)},
     "reflect padding of 3"),
])
def test_bad_attributes_are_refused(op_node, inits, match):
    load_error(_one(op_node, inits=inits), match)


def test_old_encodings_that_cannot_be_saved():
    model = _one(node("Slice", ["x", "s", "e", "a", "st"]), opset=13, inits={
        "s": np.array([0], I64), "e": np.array([2], I64), "a": np.array([1], I64),
        "st": np.array([2], I64)})
    with pytest.raises(ModelError, match="steps other than 1"):
        to_onnx(load_onnx(model), opset=9)


def test_dropout_mask_convention_is_kept_per_opset():
    model = make_model([node("Dropout", ["x"], ["y", "m"])], [("x", np.float32, [2])],
                       [("y", np.float32, [2]), ("m", np.float32, [2])], opset=9)
    graph = load_onnx(model)
    assert graph.nodes[0].outputs[1].type.dtype == "float32"
    with pytest.raises(ModelError, match="mask follows another opset's convention"):
        to_onnx(graph, opset=13)


def test_reinfer_gives_one_type_per_declared_output():
    model = make_model([node("Dropout", ["x"], ["d"]), node("Split", ["d"], ["a", "b"], axis=1)],
                       [("x", np.float32, [2, 4])],
                       [("a", np.float32, [2, 2]), ("b", np.float32, [2, 2])], opset=13)
    graph = load_onnx(model)
    assert reinfer(graph) == []
    assert [str(v.type) for v in graph.nodes[1].outputs] == ["float32[2,2]", "float32[2,2]"]


def test_transpose_moves_the_quantization_axis():
    graph = Graph()
    quant = QuantParams((0.1, 0.2, 0.3), (0, 0, 0), axis=2)
    x = graph.add_input("x", TensorType((4, 5, 3), "int8", quant))
    node_ = graph.add_node("Transpose", [x], [TensorType((3, 4, 5), "int8")], {"perm": (2, 0, 1)})
    assert reinfer(graph) == []
    assert node_.output.type.quant == QuantParams((0.1, 0.2, 0.3), (0, 0, 0), axis=0)
