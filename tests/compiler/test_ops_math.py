"""Arithmetic, activation, matrix and Cast operators against onnxruntime (see also test_ops_quant).

The conformance cases are mostly at opset 13 and later; these cover the older encodings (Clip's
bounds as attributes, Softmax's 2-D coercion, Gemm's required C), integer semantics, the
attribute variants, MAC counts and the error messages.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler import ops
from compiler.errors import ModelError
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.interpreter import run
from compiler.ops.elementwise import erf64
from tests.compiler.opcheck import RNG, TP, check, ints, load_error, one_node, rand
from tests.helpers import check_against_ort, make_model, ort_run

# -- binary arithmetic ----------------------------------------------------------------------------

BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2)),
              ((2, 1, 4), (3, 1))]


@pytest.mark.parametrize("opset", [7, 13, 14])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_binary_float_broadcasting(op, opset, shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1]) + 3
    check(op, {"a": a, "b": b}, opset)


@pytest.mark.parametrize("dtype,opset", [(np.int32, 7), (np.int64, 13), (np.int8, 14),
                                         (np.uint8, 14), (np.int16, 14), (np.uint64, 14),
                                         (np.float64, 7), (np.float16, 13)])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
def test_binary_types_wrap(op, dtype, opset):
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    if info is not None:
        a = RNG.integers(info.min, info.max, (3, 5), dtype=dtype, endpoint=True)
        b = RNG.integers(info.min, info.max, (5,), dtype=dtype, endpoint=True)
    else:
        a, b = rand(3, 5, dtype=dtype), rand(5, dtype=dtype)
    check(op, {"a": a, "b": b}, opset)


@pytest.mark.parametrize("dtype,opset", [(np.int32, 7), (np.int64, 13), (np.int8, 14),
                                         (np.int16, 14), (np.uint8, 14), (np.uint32, 14)])
def test_integer_div_truncates_toward_zero(dtype, opset):
    signed = np.issubdtype(dtype, np.signedinteger)
    a = np.array([7, -7, 7, -7, 6, -6, 0, 1] if signed else [7, 9, 200, 5, 6, 1, 0, 1], dtype)
    b = np.array([2, 2, -2, -2, 3, -3, 5, 7] if signed else [2, 3, 7, 9, 6, 2, 5, 7], dtype)
    got = check("Div", {"a": a, "b": b}, opset)
    if signed:
        assert got.tolist() == [3, -3, -3, 3, 2, 2, 0, 0]


def test_integer_div_by_zero_is_an_error():
    model = one_node("Div", {"a": ints(3)}, 13, {"b": np.array([1, 0, 2], np.int32)})
    with pytest.raises(ModelError, match="division by zero"):
        run(load_onnx(model), {"a": ints(3)})


def test_binary_mixed_types_refused():
    model = one_node("Add", {"a": rand(3)}, 13, {"b": np.ones(3, np.int32)})
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    load_error(model, "one element type, got float32 and int32")


def test_binary_shapes_that_do_not_broadcast_refused():
    model = make_model([helper.make_node("Mul", ["a", "b"], ["y"])],
                       [("a", np.float32, [2, 3]), ("b", np.float32, [4])],
                       [("y", np.float32, None)])
    load_error(model, r"shapes \[2, 3\] and \[4\] do not broadcast")


# -- Pow ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 12, 13, 15])
def test_pow_float(opset):
    base = np.abs(rand(2, 3, 4)) + 0.1
    check("Pow", {"b": base, "e": rand(4)}, opset)
    check("Pow", {"b": rand(2, 3), "e": np.array([2.0, 3.0, -1.0], np.float32)}, opset)


@pytest.mark.parametrize("base,exponent", [(np.int32, np.int32), (np.int64, np.int64),
                                           (np.int32, np.float32), (np.int64, np.float32),
                                           (np.float32, np.int32), (np.float32, np.int64),
                                           (np.float64, np.float32),
                                           (np.float16, np.float16)])
@pytest.mark.parametrize("opset", [12, 15])
def test_pow_mixed_types_keep_the_base_type(base, exponent, opset):
    b = np.array([[2, 3, -2, 5], [1, 0, 7, -3]], base)
    if np.issubdtype(exponent, np.integer):
        e = np.array([3, -1, 3, 0], exponent)
    else:
        e = np.array([0.5, 1.5, 2, 2.9], exponent)
    got = check("Pow", {"b": b, "e": e}, opset, rtol=1e-3)
    assert got.dtype == base


def test_pow_integer_overflow_like_onnxruntime():
    check("Pow", {"b": np.array([3, 5, 2], np.int64), "e": np.array([39, 40, 62], np.int64)}, 15)


# -- variadic -------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 8, 13])
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic(op, opset):
    shapes = [(2, 3), (2, 3), (2, 3)] if opset < 8 else [(2, 3), (3,), (4, 1, 1)]
    feeds = {f"x{i}": rand(*s) for i, s in enumerate(shapes)}
    check(op, feeds, opset)
    check(op, {"x0": rand(2, 3)}, opset)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float16])
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_types(op, dtype):
    feeds = {"a": ints(3, 4, dtype=dtype, low=0, high=100), "b": ints(4, dtype=dtype, low=0,
                                                                      high=100)}
    check(op, feeds, 13)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_nan_propagates(op):
    check(op, {"a": np.array([np.nan, 1, 2], np.float32),
               "b": np.array([0, np.nan, 1], np.float32)}, 13)


def test_variadic_refuses_integers_for_sum():
    model = one_node("Sum", {"a": ints(3)}, 13)
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.INT32
    load_error(model, "Sum does not accept int32 inputs")


# -- unary ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 13])
@pytest.mark.parametrize("op", ["Sqrt", "Exp", "Log", "Neg", "Abs"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_unary_float(op, opset, dtype):
    x = rand(2, 3, 4, dtype=dtype, scale=2)
    if op in ("Sqrt", "Log"):
        x = np.abs(x) + dtype(0.01)
    check(op, {"x": x}, opset)


@pytest.mark.parametrize("op,dtype", [("Neg", np.int8), ("Neg", np.int64), ("Abs", np.int32),
                                      ("Abs", np.uint8), ("Abs", np.int8)])
def test_unary_integers(op, dtype):
    x = np.array([-128, -5, 0, 7, 127] if dtype != np.uint8 else [0, 5, 200, 255, 1], dtype)
    check(op, {"x": x}, 13)


def test_unary_special_values():
    x = np.array([0, -0.0, -1, np.inf, -np.inf, np.nan], np.float32)
    for op in ("Sqrt", "Exp", "Log", "Neg", "Abs", "Erf"):
        check(op, {"x": x}, 13)


@pytest.mark.parametrize("opset", [9, 13])
def test_erf(opset):
    check("Erf", {"x": rand(3, 50, scale=2.5)}, opset, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])  # onnxruntime has float32 only
def test_erf_other_float_types(dtype):
    x = rand(40, dtype=np.float64, scale=3).astype(dtype)
    graph = load_onnx(one_node("Erf", {"x": x}, 13))
    want = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(dtype)
    np.testing.assert_allclose(run(graph, {"x": x})["y"], want, rtol=1e-15, atol=0)


def test_erf64_accuracy():
    xs = np.concatenate([np.linspace(-8, 8, 20001), np.geomspace(1e-300, 8, 2001),
                         -np.geomspace(1e-8, 8, 201)])
    want = np.array([math.erf(v) for v in xs])
    assert np.max(np.abs(erf64(xs) - want)) < 1e-14
    assert np.all(np.abs(erf64(xs) - want) <= 1e-14 * np.abs(want))


def test_unary_float_ops_refuse_integers():
    model = one_node("Sqrt", {"x": ints(3)}, 13)
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.INT32
    load_error(model, "Sqrt does not accept int32 inputs")


# -- activations ----------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 13])
@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_sigmoid_tanh(op, opset, dtype):
    x = np.concatenate([rand(40, dtype=dtype, scale=4), np.array([-800, 800, 0], dtype)])
    check(op, {"x": x}, opset)


@pytest.mark.parametrize("opset", [7, 16])
@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.3}])
def test_leaky_relu(opset, attrs):
    check("LeakyRelu", {"x": rand(2, 3, 4)}, opset, **attrs)
    check("LeakyRelu", {"x": rand(5, dtype=np.float16)}, opset, **attrs)


@pytest.mark.parametrize("opset", [7, 22])
@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5, "beta": 0.1}])
def test_hard_sigmoid(opset, attrs):
    check("HardSigmoid", {"x": rand(2, 3, 4, scale=4)}, opset, **attrs)


@pytest.mark.parametrize("opset", [14, 22])
def test_hard_swish(opset):
    x = np.concatenate([rand(20, scale=4), np.array([-3, 3, 0], np.float32)])
    check("HardSwish", {"x": x}, opset)


@pytest.mark.parametrize("opset", [7, 9, 16])
@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (5,), (2, 3, 4, 5)])
def test_prelu_broadcasts_the_slope(opset, slope_shape):
    check("PRelu", {"x": rand(2, 3, 4, 5)}, opset, {"slope": rand(*slope_shape)})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_prelu_integers(dtype):
    check("PRelu", {"x": ints(2, 3, dtype=dtype)}, 16, {"slope": ints(3, dtype=dtype)})


def test_prelu_slope_must_broadcast_to_the_input():
    model = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])],
                       [("x", np.float32, [2, 3])], [("y", np.float32, None)],
                       {"s": np.ones((2, 2, 3), np.float32)})
    load_error(model, r"slope of shape \[2, 2, 3\] does not broadcast to the input's shape")


# -- Clip -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 10])
@pytest.mark.parametrize("attrs", [{}, {"min": -0.5}, {"max": 0.3}, {"min": -0.2, "max": 0.7}])
def test_clip_bounds_as_attributes(opset, attrs):
    check("Clip", {"x": rand(3, 4)}, opset, **attrs)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])  # onnxruntime's Clip-6: float only
def test_clip_attribute_bounds_take_the_input_type(dtype):
    x = rand(3, 4, dtype=dtype)
    graph = load_onnx(one_node("Clip", {"x": x}, 10, min=1.0, max=0.25))
    assert [v.type.dtype for v in graph.nodes[0].inputs] == [np.dtype(dtype).name] * 3
    np.testing.assert_array_equal(run(graph, {"x": x})["y"], np.full(x.shape, 0.25, dtype))


def test_clip_attributes_save_back_as_attributes():
    model = one_node("Clip", {"x": rand(3, 4)}, 10, min=-0.5, max=0.5)
    graph = load_onnx(model)
    assert [v.name for v in graph.nodes[0].inputs[1:]] == ["clip_min", "clip_max"]
    saved = to_onnx(graph).graph.node[0]
    assert list(saved.input) == ["x"]
    assert {a.name: a.f for a in saved.attribute} == {"min": -0.5, "max": 0.5}


@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("bounds", [("lo", "hi"), ("", "hi"), ("lo",), (), ("hi", "lo")])
def test_clip_bounds_as_inputs(opset, bounds):
    inits = {"lo": np.array(-0.4, np.float32), "hi": np.array(0.6, np.float32)}
    inits = {k: v for k, v in inits.items() if k in bounds}
    check("Clip", {"x": rand(3, 4)}, opset, inits, input_names=["x", *bounds])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint64])
def test_clip_integers(dtype):
    inits = {"lo": np.array(3, dtype), "hi": np.array(60, dtype)}
    check("Clip", {"x": ints(20, dtype=dtype, low=0, high=100)}, 12, inits)


def test_clip_runtime_bounds_cannot_be_saved_before_opset_11():
    feeds = {"x": rand(3), "lo": np.array(-0.1, np.float32)}
    graph = load_onnx(one_node("Clip", feeds, 11))
    with pytest.raises(ModelError, match="cannot be saved at opset 10 because its min input"):
        to_onnx(graph, 10)


def test_clip_bounds_must_be_scalars():
    model = one_node("Clip", {"x": rand(3)}, 13, {"lo": np.zeros(2, np.float32)})
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    load_error(model, r"Clip's min must be a scalar, it has shape \[2\]")


# -- Softmax, LogSoftmax --------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [7, 11])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2])
def test_softmax_coerced_to_2d_before_opset_13(op, opset, axis):
    attrs = {} if axis is None else {"axis": axis}
    x = rand(2, 3, 4, scale=3)
    model = one_node(op, {"x": x}, opset, **attrs)
    check_against_ort(model, {"x": x})
    node = load_onnx(model).nodes[0]
    assert node.attrs == {"axis": 1 if axis is None else axis, "coerce_2d": 1}


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [13])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_softmax_single_axis(op, opset, axis, dtype):
    attrs = {} if axis is None else {"axis": axis}
    x = np.concatenate([rand(2, 3, 4, dtype=dtype, scale=3), np.full((1, 3, 4), 1000, dtype)])
    check(op, {"x": x}, opset, **attrs)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_refuses_to_save_across_opset_13_when_not_equivalent(op):
    x = rand(2, 3, 4)
    old = load_onnx(one_node(op, {"x": x}, 11, axis=1))
    with pytest.raises(ModelError, match="cannot be saved at opset 13 because it normalizes over "
                                         "axis 1 and all later axes"):
        to_onnx(old, 13)
    new = load_onnx(one_node(op, {"x": x}, 13, axis=1))
    with pytest.raises(ModelError, match=r"cannot be saved at opset 11 because it normalizes over "
                                         r"axis 1 of \[2, 3, 4\] alone"):
        to_onnx(new, 11)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis,opset,target", [
    ((2, 3, 4), -1, 13, 11), ((2, 3, 4), 2, 11, 13), ((2, 3, 1, 1), 1, 13, 9),
    ((2, 3, 1, 1), -3, 11, 13)])
def test_softmax_saves_across_opset_13_when_equivalent(op, shape, axis, opset, target):
    x = rand(*shape)
    graph = load_onnx(one_node(op, {"x": x}, opset, axis=axis))
    saved = to_onnx(graph, target)
    onnx.checker.check_model(saved, full_check=True)
    np.testing.assert_allclose(ort_run(saved, {"x": x})[0], run(graph, {"x": x})["y"], rtol=1e-5)


def test_softmax_refuses_a_scalar():
    model = make_model([helper.make_node("Softmax", ["x"], ["y"])], [("x", np.float32, [])],
                       [("y", np.float32, None)])
    load_error(model, "Softmax needs an input of rank 1 or more")


# -- Gemm, MatMul ---------------------------------------------------------------------------------

GEMM_VARIANTS = [
    ({}, (3, 5), (5, 4), (3, 4)),
    ({"transA": 1}, (5, 3), (5, 4), (4,)),
    ({"transB": 1}, (3, 5), (4, 5), (1, 4)),
    ({"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, (5, 3), (4, 5), (3, 1)),
    ({"alpha": 1.5}, (3, 5), (5, 4), ()),
    ({"beta": 0.0}, (3, 5), (5, 4), (3, 4)),
]


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
@pytest.mark.parametrize("attrs,a,b,c", GEMM_VARIANTS)
def test_gemm(opset, attrs, a, b, c):
    check("Gemm", {"a": rand(*a)}, opset, {"b": rand(*b), "c": rand(*c)}, **attrs)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_without_c(opset, dtype):
    check("Gemm", {"a": rand(3, 5, dtype=dtype)}, opset, {"b": rand(4, 5, dtype=dtype)},
          transB=1, alpha=2.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_macs_and_missing_c_before_opset_11(dtype):
    a = rand(5, 3, dtype=dtype)
    graph = load_onnx(one_node("Gemm", {"a": a}, 11, {"b": rand(4, 5, dtype=dtype)}, transA=1,
                               transB=1))
    assert ops.lookup("Gemm").count_macs(graph.nodes[0]) == 3 * 4 * 5
    saved = to_onnx(graph, 9)  # C was required before opset 11: a scalar zero stands in
    onnx.checker.check_model(saved, full_check=True)
    assert len(saved.graph.node[0].input) == 3
    np.testing.assert_allclose(ort_run(saved, {"a": a})[0], run(graph, {"a": a})["y"], rtol=1e-6)


def test_gemm_refuses_mismatched_inner_dimensions():
    model = make_model([helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)],
                       [("a", np.float32, [3, 5])], [("y", np.float32, None)],
                       {"b": np.ones((5, 4), np.float32)})
    load_error(model, "Gemm's inner dimensions differ: A gives 5, B gives 4")


MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 6)), ((6, 4), (3, 4, 2))]


@pytest.mark.parametrize("opset", [7, 9, 13])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
def test_matmul(opset, shapes):
    check("MatMul", {"a": rand(*shapes[0]), "b": rand(*shapes[1])}, opset)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64, np.float64,
                                   np.float16])
def test_matmul_types(dtype):
    a, b = ints(2, 3, 4, dtype=dtype, low=0, high=9), ints(4, 5, dtype=dtype, low=0, high=9)
    check("MatMul", {"a": a, "b": b}, 13)


@pytest.mark.parametrize("shapes,macs", [(((3, 4), (4, 5)), 60), (((4,), (4,)), 4),
                                         (((2, 1, 3, 4), (5, 4, 2)), 2 * 5 * 3 * 2 * 4)])
def test_matmul_macs(shapes, macs):
    graph = load_onnx(one_node("MatMul", {"a": rand(*shapes[0]), "b": rand(*shapes[1])}, 13))
    assert ops.lookup("MatMul").count_macs(graph.nodes[0]) == macs


def test_matmul_refuses_mismatched_inner_dimensions():
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [("a", np.float32, [3, 4]), ("b", np.float32, [5, 2])],
                       [("y", np.float32, None)])
    load_error(model, r"MatMul's inner dimensions differ: \[3, 4\] times \[5, 2\]")


# -- Cast -----------------------------------------------------------------------------------------

CAST_SOURCES = {
    "float32": np.array([-2.7, -0.5, 0, 0.5, 2.7, 100.9, -100.9, 127.4], np.float32),
    "float64": np.array([-2.7, 0.3, 1e6, 65504.0, 3.4e38, -1e-8], np.float64),
    "int32": np.array([0, 1, -1, 200, 256, -129, 70000, -2**31], np.int32),
    "int64": np.array([0, 1, -1, 2**40 + 3, -2**63, 255], np.int64),
    "uint8": np.array([0, 1, 127, 128, 255], np.uint8),
    "bool": np.array([True, False, True], np.bool_),
    "float16": np.array([-2.5, 0.1, 65504, -0.0], np.float16),
}
CAST_TARGETS = [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT8, TP.UINT8, TP.INT16, TP.UINT16,
                TP.INT32, TP.INT64, TP.UINT32, TP.BOOL]


@pytest.mark.parametrize("source", list(CAST_SOURCES))
@pytest.mark.parametrize("to", CAST_TARGETS)
def test_cast(source, to):
    x = CAST_SOURCES[source]
    if to == TP.FLOAT16 and source == "float64":
        x = x[:4]  # 3.4e38 -> inf, fine; keep the comparison finite
    check("Cast", {"x": x}, 13, to=to)


@pytest.mark.parametrize("opset", [7, 9, 19, 21, 24])
def test_cast_opsets(opset):
    check("Cast", {"x": CAST_SOURCES["float32"]}, opset, to=TP.INT32)
    check("Cast", {"x": CAST_SOURCES["int32"]}, opset, to=TP.FLOAT)


@pytest.mark.parametrize("attrs,match", [({"saturate": 0}, "saturate=0 only applies to float8"),
                                         ({"round_mode": "down"}, "round_mode='down' only")])
def test_cast_float8_attributes_refused(attrs, match):
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=TP.INT8, **attrs)],
                       [("x", np.float32, [3])], [("y", np.int8, None)], opset=24)
    load_error(model, match)


@pytest.mark.parametrize("to,name", [(TP.BFLOAT16, "BFLOAT16"), (TP.FLOAT8E4M3FN, "FLOAT8E4M3FN"),
                                     (TP.STRING, "STRING"), (TP.INT4, "INT4")])
def test_cast_to_unsupported_types_refused(to, name):
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=to)],
                       [("x", np.float32, [3])], [("y", np.float32, None)], opset=21)
    load_error(model, f"Cast to={to} \\({name}\\) is not supported")
