"""Spatial operators (Conv, ConvTranspose, pools, norms, Resize) against onnxruntime.

The conformance cases are mostly at opset 19 and later; these cover the older encodings (Resize
at opset 10 and 11, BatchNormalization's `spatial`, MaxPool's Indices), every attribute form, the
NHWC layout, MAC counts and the error messages.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler import ops
from compiler.errors import ModelError
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.interpreter import run
from compiler.ops._spatial import layout_shape
from compiler.ops.infer import reinfer
from tests.helpers import assert_close, check_against_ort, make_model, ort_run

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def model_of(op, x, opset=13, inits=(), outputs=(("y", np.float32),), inputs=None, **attrs):
    """One `op` node reading graph input "x" then the initializers (or `inputs` names).

    Output shapes come from onnx's shape inference (the checker needs them).
    """
    inits = list(inits)
    names = inputs if inputs is not None else ["x", *[n for n, _ in inits]]
    node = helper.make_node(op, names, [n for n, _ in outputs], **attrs)
    model = make_model([node], [("x", x.dtype, list(x.shape))],
                       [(n, t, None) for n, t in outputs], inits, opset)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError:
        return model  # a model meant to be refused
    types = {v.name: v.type for v in inferred.graph.output}
    for out in model.graph.output:
        out.type.CopyFrom(types[out.name])
    return model


def check(op, x, opset=13, inits=(), rtol=1e-4, atol=1e-5, **kwargs):
    """One node against onnxruntime (and its saved copy); Kiln's outputs by name."""
    model = model_of(op, x, opset, inits, **kwargs)
    return check_against_ort(model, {"x": x}, rtol=rtol, atol=atol)


def load_error(model, match):
    with pytest.raises(ModelError, match=match):
        load_onnx(model)


def check_nhwc(model, x):
    """Switching the node to NHWC (input and output channels last) gives the transposed result."""
    graph = load_onnx(model)
    want = run(graph, {"x": x})
    node = graph.nodes[0]
    node.attrs["layout"] = "NHWC"
    graph.inputs[0].type = graph.inputs[0].type.with_shape(layout_shape(x.shape, "NHWC"))
    assert not reinfer(graph)
    got = run(graph, {"x": np.ascontiguousarray(np.moveaxis(x, 1, -1))})
    for value in graph.outputs:
        assert_close(got[value.name], np.moveaxis(want[value.name], 1, -1), what=value.name)


# -- Conv ---------------------------------------------------------------------------------------

CONV_CASES = [
    # (x shape, w shape, attrs)
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 3, 9, 8), (4, 3, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 4, 10, 10), (6, 2, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [1, 1, 1, 1]}),
    ((1, 6, 8, 8), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 4, 8, 8), (8, 1, 3, 3), {"group": 4, "strides": [2, 2]}),  # depthwise, multiplier 2
    ((1, 3, 10, 9), (2, 3, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [3, 2]}),
    ((1, 3, 10, 9), (2, 3, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ((1, 3, 10, 9), (2, 3, 2, 2), {"auto_pad": "SAME_LOWER"}),
    ((1, 3, 10, 9), (2, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 3, 10, 9), (2, 3, 3, 3), {"auto_pad": "NOTSET", "kernel_shape": [3, 3]}),
    ((2, 3, 17), (5, 3, 4), {"pads": [2, 1], "strides": [3], "dilations": [2]}),  # 1-D
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 2]}),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape, w_shape, attrs", CONV_CASES)
def test_conv(x_shape, w_shape, attrs, bias):
    inits = [("w", rand(*w_shape))] + ([("b", rand(w_shape[0]))] if bias else [])
    check("Conv", rand(*x_shape), 11, inits, **attrs)


@pytest.mark.parametrize("opset", [7, 9, 13, 22])
def test_conv_opsets_and_nhwc(opset):
    inits = [("w", rand(6, 2, 3, 3)), ("b", rand(6))]
    model = model_of("Conv", rand(1, 4, 7, 6), opset, inits, group=2, pads=[1, 1, 1, 1],
                     strides=[2, 1])
    check_against_ort(model, {"x": rand(1, 4, 7, 6)})
    check_nhwc(model, rand(1, 4, 7, 6))


def test_conv_macs():
    graph = load_onnx(model_of("Conv", rand(2, 4, 8, 8), 13, [("w", rand(6, 2, 3, 3))], group=2,
                               strides=[2, 2], pads=[1, 1, 1, 1]))
    # N * Cout * out_h * out_w * (Cin / group) * kh * kw
    assert ops.lookup("Conv").count_macs(graph.nodes[0]) == 2 * 6 * 4 * 4 * 2 * 3 * 3


def test_conv_errors():
    load_error(model_of("Conv", rand(1, 4, 5, 5), 13, [("w", rand(6, 2, 3, 3))], group=3),
               "group 3 must be positive and divide the 4 input channels")
    load_error(model_of("Conv", rand(1, 4, 5, 5), 13, [("w", rand(6, 4, 3, 3))],
                        auto_pad="SAME"), "auto_pad 'SAME' is not one of")
    load_error(model_of("Conv", rand(1, 4, 5, 5), 13, [("w", rand(6, 4, 3, 3))],
                        pads=[1, 1]), "pads has 2 values")
    load_error(model_of("Conv", rand(1, 4, 5, 5), 13, [("w", rand(6, 4, 3, 3))],
                        kernel_shape=[2, 2]), "kernel_shape \\[2, 2\\] does not match")
    load_error(model_of("Conv", rand(1, 4, 2, 2), 13, [("w", rand(6, 4, 3, 3))]),
               "larger than the padded input")


# -- ConvTranspose ------------------------------------------------------------------------------

TRANSPOSE_CASES = [
    ((1, 3, 4, 5), (3, 2, 3, 3), {}),
    ((2, 3, 4, 5), (3, 2, 3, 2), {"strides": [2, 3], "output_padding": [1, 2]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [3, 2], "output_shape": [12, 11]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [8, 8]}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [8, 8],
                                  "auto_pad": "SAME_UPPER"}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 4, 5), (3, 2, 4, 4), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 4, 5), (3, 2, 3, 3), {"auto_pad": "VALID", "dilations": [2, 3]}),
    ((1, 4, 4, 5), (4, 3, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 4, 4, 5), (4, 1, 2, 2), {"group": 4, "strides": [2, 2], "kernel_shape": [2, 2]}),
    ((2, 3, 7), (3, 2, 3), {"strides": [2], "pads": [1, 2]}),  # 1-D
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "output_padding": [1, 0, 0]}),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape, w_shape, attrs", TRANSPOSE_CASES)
def test_conv_transpose(x_shape, w_shape, attrs, bias):
    groups = attrs.get("group", 1)
    inits = [("w", rand(*w_shape))] + ([("b", rand(w_shape[1] * groups))] if bias else [])
    check("ConvTranspose", rand(*x_shape), 11, inits, **attrs)


@pytest.mark.parametrize("opset", [7, 11, 22])
def test_conv_transpose_opsets_and_nhwc(opset):
    model = model_of("ConvTranspose", rand(1, 2, 4, 3), opset, [("w", rand(2, 3, 3, 3))],
                     strides=[2, 2], pads=[1, 1, 0, 0])
    check_against_ort(model, {"x": rand(1, 2, 4, 3)})
    check_nhwc(model, rand(1, 2, 4, 3))


def test_conv_transpose_macs():
    graph = load_onnx(model_of("ConvTranspose", rand(2, 4, 5, 5), 13, [("w", rand(4, 3, 3, 3))],
                               group=2, strides=[2, 2]))
    # N * Cin * in_h * in_w * (Cout / group) * kh * kw
    assert ops.lookup("ConvTranspose").count_macs(graph.nodes[0]) == 2 * 4 * 5 * 5 * 3 * 3 * 3


def test_conv_transpose_errors():
    load_error(model_of("ConvTranspose", rand(1, 2, 4, 4), 13, [("w", rand(2, 3, 3, 3))],
                        strides=[2, 2], output_padding=[2, 0]),
               "output_padding \\[2, 0\\] must be smaller")
    load_error(model_of("ConvTranspose", rand(1, 2, 4, 4), 13, [("w", rand(3, 3, 3, 3))]),
               "expect 3 input channels, the input has 2")


# -- MaxPool ------------------------------------------------------------------------------------

POOL_CASES = [
    ((1, 3, 9, 8), {"kernel_shape": [3, 3]}),
    ((2, 3, 9, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 9, 8), {"kernel_shape": [2, 4], "strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 10, 9), {"kernel_shape": [2, 3], "dilations": [2, 2], "pads": [1, 2, 1, 0]}),
    ((1, 2, 10, 9), {"kernel_shape": [2, 2], "dilations": [3, 2], "strides": [2, 1],
                     "ceil_mode": 1}),
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),  # 1-D
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 1], "pads": [0, 1, 0] * 2}),
]


@pytest.mark.parametrize("x_shape, attrs", POOL_CASES)
def test_max_pool(x_shape, attrs):
    check("MaxPool", rand(*x_shape), 12, **attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("x_shape, attrs", [POOL_CASES[1], POOL_CASES[5], POOL_CASES[7]])
def test_max_pool_indices(x_shape, attrs, storage_order):
    check("MaxPool", rand(*x_shape), 12, outputs=(("y", np.float32), ("i", np.int64)),
          storage_order=storage_order, **attrs)


@pytest.mark.parametrize("opset", [7, 8, 10, 11])
def test_max_pool_old_opsets(opset):
    outputs = (("y", np.float32),) + ((("i", np.int64),) if opset >= 8 else ())
    check("MaxPool", rand(1, 3, 8, 7), opset, outputs=outputs, kernel_shape=[3, 2],
          strides=[2, 2], pads=[1, 0, 1, 1])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pool_integers(dtype):
    x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (1, 2, 7, 7)).astype(dtype)
    model = model_of("MaxPool", x, 12, outputs=(("y", dtype),), kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], strides=[2, 2])
    check_against_ort(model, {"x": x})


def test_max_pool_nhwc_and_errors():
    model = model_of("MaxPool", rand(1, 3, 8, 7), 12, kernel_shape=[3, 2], strides=[2, 2],
                     pads=[1, 0, 1, 1], ceil_mode=1)
    check_nhwc(model, rand(1, 3, 8, 7))
    load_error(model_of("MaxPool", rand(1, 3, 8, 7), 12, kernel_shape=[3]),
               "kernel_shape \\[3\\] must give a positive size for each of the 2 spatial axes")
    load_error(model_of("MaxPool", rand(1, 3, 8, 7), 12, kernel_shape=[3, 3], storage_order=2),
               "storage_order 2 must be 0")
    load_error(model_of("MaxPool", rand(1, 3, 8, 7), 12, kernel_shape=[2, 2], strides=[0, 1]),
               "strides \\[0, 1\\] must be at least 1")


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_ceil_mode_last_window_starts_inside(op):
    # Rounding up would give a last window entirely in the end padding: it is dropped. onnx's
    # shape inference does not know this rule, so the saved model would fail its full check.
    model = model_of(op, rand(1, 2, 10, 9), 19, kernel_shape=[2, 2], strides=[2, 2],
                     pads=[1, 1, 1, 1], ceil_mode=1)
    graph = load_onnx(model)
    assert graph.outputs[0].type.shape == (1, 2, 6, 5)
    check_against_ort(model, {"x": rand(1, 2, 10, 9)}, roundtrip=False)


# -- AveragePool --------------------------------------------------------------------------------

@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("x_shape, attrs", POOL_CASES)
def test_average_pool(x_shape, attrs, count_include_pad):
    check("AveragePool", rand(*x_shape), 19, count_include_pad=count_include_pad, **attrs)


@pytest.mark.parametrize("opset", [7, 10, 11])
def test_average_pool_old_opsets(opset):
    attrs = {"ceil_mode": 1} if opset >= 10 else {}
    check("AveragePool", rand(1, 3, 8, 7), opset, kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 0, 1, 1], count_include_pad=1, **attrs)


def test_average_pool_nhwc():
    model = model_of("AveragePool", rand(1, 3, 8, 7), 11, kernel_shape=[3, 2], strides=[2, 2],
                     pads=[1, 0, 1, 1])
    check_nhwc(model, rand(1, 3, 8, 7))


# -- global pooling -----------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pool(op, shape):
    model = model_of(op, rand(*shape), 7)
    check_against_ort(model, {"x": rand(*shape)})
    check_nhwc(model, rand(*shape))


# -- BatchNormalization -------------------------------------------------------------------------

def bn_params(channels):
    return [("scale", rand(channels)), ("bias", rand(channels)), ("mean", rand(channels)),
            ("var", RNG.uniform(0.5, 2, channels).astype(np.float32))]


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
def test_batch_norm(opset):
    attrs = {"spatial": 1} if opset < 9 else {}
    model = model_of("BatchNormalization", rand(2, 3, 4, 5), opset, bn_params(3), epsilon=1e-3,
                     **attrs)
    check_against_ort(model, {"x": rand(2, 3, 4, 5)})
    check_nhwc(model, rand(2, 3, 4, 5))


def test_batch_norm_rank2_and_legacy_attributes():
    check("BatchNormalization", rand(4, 3), 9, bn_params(3))
    # is_test / consumed_inputs are legacy hints that old exporters left in; ORT rejects them.
    model = model_of("BatchNormalization", rand(1, 3, 2, 2), 7, bn_params(3), is_test=1,
                     consumed_inputs=[0, 0, 0, 1, 1])
    graph = load_onnx(model)
    assert set(graph.nodes[0].attrs) == {"epsilon", "momentum", "training_mode", "layout"}


def test_batch_norm_errors():
    load_error(model_of("BatchNormalization", rand(1, 3, 2, 2), 15, bn_params(3),
                        outputs=(("y", np.float32), ("m", np.float32), ("v", np.float32)),
                        training_mode=1), "training_mode=1: training mode .* is not supported")
    load_error(model_of("BatchNormalization", rand(1, 3, 2, 2), 9, bn_params(3),
                        outputs=(("y", np.float32), ("m", np.float32), ("v", np.float32))),
               "3 outputs select training mode .* only Y may be named")
    load_error(model_of("BatchNormalization", rand(1, 3, 2, 2), 7, bn_params(3), spatial=0),
               "spatial=0 .* is not supported")
    load_error(model_of("BatchNormalization", rand(1, 3, 2, 2), 7, bn_params(3), is_test=0),
               "is_test=0 asks for training mode")
    load_error(model_of("BatchNormalization", rand(1, 4, 2, 2), 9, bn_params(3)),
               "scale must be a float vector of the 4 channels")


# -- LRN ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 13])
@pytest.mark.parametrize("size", [1, 3, 5])  # onnxruntime refuses even sizes
def test_lrn(opset, size):
    model = model_of("LRN", rand(2, 6, 3, 4), opset, size=size, alpha=2e-3, beta=0.6, bias=1.5)
    check_against_ort(model, {"x": rand(2, 6, 3, 4)})
    check_nhwc(model, rand(2, 6, 3, 4))


# -- Resize -------------------------------------------------------------------------------------

def resize(x, opset=13, roi=None, scales=None, sizes=None, rtol=1e-4, atol=1e-5, **attrs):
    """A Resize node with constant roi / scales / sizes, against onnxruntime."""
    inits, names = [], ["x"]
    for name, value, dtype in (("roi", roi, np.float32), ("scales", scales, np.float32),
                               ("sizes", sizes, np.int64)):
        if value is not None:
            inits.append((name, np.asarray(value, dtype)))
        names.append(name if value is not None else "")
    while not names[-1]:
        names.pop()
    outputs = (("y", x.dtype),)
    return check("Resize", x, opset, inits, rtol, atol, inputs=names, outputs=outputs, **attrs)


COORDINATES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
ROUNDINGS = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.4], [1, 1, 1.5, 0.75]])
@pytest.mark.parametrize("nearest_mode", ROUNDINGS)
@pytest.mark.parametrize("coordinates", COORDINATES)
def test_resize_nearest(coordinates, nearest_mode, scales):
    resize(rand(1, 2, 4, 6), scales=scales, coordinate_transformation_mode=coordinates,
           nearest_mode=nearest_mode)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales, sizes", [([1, 1, 2, 2.5], None), ([1, 1, 0.5, 0.5], None),
                                           (None, [1, 2, 7, 3])])
@pytest.mark.parametrize("coordinates", COORDINATES)
def test_resize_interpolating(coordinates, scales, sizes, mode):
    resize(rand(1, 2, 4, 6), scales=scales, sizes=sizes, mode=mode,
           coordinate_transformation_mode=coordinates)


def test_resize_cubic_variants():
    resize(rand(1, 1, 5, 4), scales=[1, 1, 1.6, 2], mode="cubic", cubic_coeff_a=-0.5,
           exclude_outside=1)
    resize(rand(2, 3, 4, 5), scales=[1, 1, 1, 2.5], mode="cubic",
           coordinate_transformation_mode="asymmetric")


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_tf_crop_and_resize(mode):
    resize(rand(1, 1, 6, 5), roi=[0, 0, 0.2, 0.4, 1, 1, 0.7, 1.3], sizes=[1, 1, 4, 6], mode=mode,
           coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_resize_integers(dtype):
    x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (1, 2, 4, 4)).astype(dtype)
    resize(x, scales=[1, 1, 2, 3], coordinate_transformation_mode="align_corners")
    # Linear: Kiln rounds to nearest (as onnx's reference does); onnxruntime's fixed-point
    # arithmetic may end one lower.
    model = model_of("Resize", x, 13, [("scales", np.array([1, 1, 2, 3], np.float32))],
                     inputs=["x", "", "scales"], outputs=(("y", dtype),), mode="linear")
    ours = run(load_onnx(model), {"x": x})["y"]
    theirs = ort_run(model, {"x": x})[0]
    assert ours.dtype == dtype and np.abs(ours.astype(int) - theirs).max() <= 1


def test_resize_opset18_and_19_forms():
    x = rand(1, 2, 6, 8)
    resize(x, 18, scales=[2, 0.5], axes=[3, 2], mode="linear")
    resize(x, 18, sizes=[4, 5], axes=[2, 3], keep_aspect_ratio_policy="not_larger")
    resize(x, 18, sizes=[4, 5], axes=[2, 3], keep_aspect_ratio_policy="not_smaller")
    # onnxruntime ignores negative axes; they are the same axes.
    negative = model_of("Resize", x, 18, [("sizes", np.array([5, 3], np.int64))],
                        inputs=["x", "", "", "sizes"], axes=[-1, -2], mode="linear")
    positive = model_of("Resize", x, 18, [("sizes", np.array([5, 3], np.int64))],
                        inputs=["x", "", "", "sizes"], axes=[3, 2], mode="linear")
    assert_close(run(load_onnx(negative), {"x": x})["y"], ort_run(positive, {"x": x})[0])
    resize(x, 19, scales=[1, 1, 1.7, 0.7], mode="linear",
           coordinate_transformation_mode="half_pixel_symmetric")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias(mode):
    resize(rand(1, 2, 16, 12), 18, scales=[1, 1, 0.3, 0.5], mode=mode, antialias=1, atol=1e-4)


@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.6, 0.35], [1, 1, 1, 1.7]])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_opset10(mode, scales):
    x = rand(1, 2, 5, 10)
    model = model_of("Resize", x, 10, [("scales", np.array(scales, np.float32))], mode=mode)
    check_against_ort(model, {"x": x})


def test_resize_opset11_empty_inputs_and_legacy_mode():
    x = rand(1, 2, 4, 5)
    empty = np.zeros(0, np.float32)
    model = model_of("Resize", x, 11, [("roi", empty), ("scales", empty),
                                       ("sizes", np.array([1, 2, 7, 3], np.int64))],
                     mode="linear")
    check_against_ort(model, {"x": x})
    model = model_of("Resize", x, 11, [("roi", empty), ("scales", np.array([1, 1, 2, 1.5],
                                                                            np.float32))],
                     coordinate_transformation_mode="tf_half_pixel_for_nn")
    check_against_ort(model, {"x": x})


def test_resize_saved_at_opset11_gets_required_inputs():
    graph = load_onnx(model_of("Resize", rand(1, 1, 2, 2), 13,
                               [("sizes", np.array([1, 1, 3, 3], np.int64))],
                               inputs=["x", "", "", "sizes"]))
    saved = to_onnx(graph, 11)
    node = saved.graph.node[0]
    assert all(node.input) and len(node.input) == 4


def test_resize_errors():
    x = rand(1, 1, 4, 4)
    runtime = make_model([helper.make_node("Resize", ["x", "", "s"], ["y"])],
                         [("x", np.float32, [1, 1, 4, 4]), ("s", np.float32, [4])],
                         [("y", np.float32, None)], opset=13)
    load_error(runtime, "scales must be known at compile time")
    both = [("scales", np.ones(4, np.float32)), ("sizes", np.ones(4, np.int64))]
    load_error(model_of("Resize", x, 13, both, inputs=["x", "", "scales", "sizes"]),
               "exactly one of the scales and sizes")
    load_error(model_of("Resize", x, 13, [("scales", np.ones(3, np.float32))],
                        inputs=["x", "", "scales"]), "scales has shape \\[3\\], expected \\[4\\]")
    load_error(model_of("Resize", x, 13, [("scales", np.ones(4, np.float32))],
                        inputs=["x", "", "scales"], mode="bicubic"),
               "mode 'bicubic' is not one of")
    load_error(model_of("Resize", x, 18, [("scales", np.ones(4, np.float32))],
                        inputs=["x", "", "scales"], antialias=1), "antialias=1 needs mode")
    mixed = model_of("Resize", x, 10, [("scales", np.array([1, 1, 2, 0.5], np.float32))])
    load_error(mixed, "enlarges some axes and shrinks others")
    graph = load_onnx(model_of("Resize", x, 13, [("scales", np.full(4, 2, np.float32))],
                               inputs=["x", "", "scales"]))
    with pytest.raises(ModelError, match="cannot be saved at opset 10 because opset 10 only"):
        to_onnx(graph, 10)


# -- float16 ------------------------------------------------------------------------------------

F16_CASES = [
    ("Conv", [("w", rand(4, 3, 3, 3, dtype=np.float16))], {"pads": [1, 1, 1, 1]}),
    ("ConvTranspose", [("w", rand(3, 2, 3, 3, dtype=np.float16))], {"strides": [2, 2]}),
    ("MaxPool", [], {"kernel_shape": [2, 2]}),
    ("AveragePool", [], {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}),
    ("GlobalAveragePool", [], {}),
    ("LRN", [], {"size": 3}),
    ("BatchNormalization", [(n, np.abs(rand(3, dtype=np.float16))) for n in "sbmv"], {}),
    ("Resize", [("scales", np.array([1, 1, 2, 1.5], np.float32))],
     {"mode": "linear", "inputs": ["x", "", "scales"]}),
]


@pytest.mark.parametrize("op, inits, attrs", F16_CASES, ids=[c[0] for c in F16_CASES])
def test_float16(op, inits, attrs):
    x = rand(1, 3, 5, 6, dtype=np.float16)
    model = model_of(op, x, 19, inits, outputs=(("y", np.float16),), **attrs)
    check_against_ort(model, {"x": x}, rtol=1e-2, atol=1e-2)
