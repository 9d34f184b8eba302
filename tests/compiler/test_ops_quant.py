"""QuantizeLinear and DequantizeLinear against onnxruntime: rounding, saturation, axes, types."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from compiler.errors import ModelError
from compiler.frontends.onnx import load_onnx, to_onnx
from compiler.interpreter import run
from tests.compiler.opcheck import RNG, TP, check, ints, load_error, one_node, rand
from tests.conftest import shared_models
from tests.helpers import check_against_ort, ort_run

# -- QuantizeLinear, DequantizeLinear -------------------------------------------------------------

def _quant_data(shape=(2, 3, 4), scale=0.05):
    x = rand(*shape, scale=3)
    x.flat[:6] = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 1000], np.float32) * scale  # ties, saturation
    return x


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("zp", [None, np.uint8(128), np.int8(-3), np.int8(0)])
def test_quantize_per_tensor(opset, zp):
    inits = {"s": np.array(0.05, np.float32)}
    if zp is not None:
        inits["z"] = np.array(zp)
    check("QuantizeLinear", {"x": _quant_data()}, opset, inits)
    got = load_onnx(one_node("QuantizeLinear", {"x": _quant_data()}, opset, inits))
    quant = got.nodes[0].output.type.quant
    assert quant.scale == (np.float32(0.05),) and quant.zero_point == (int(zp or 0),)
    assert quant.axis is None


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("axis", [1, -1, 0])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantize_dequantize_per_axis(opset, axis, dtype):
    x = _quant_data()
    n = x.shape[axis]
    inits = {"s": (np.arange(1, n + 1) * 0.02).astype(np.float32),
             "z": ints(n, dtype=dtype, low=0, high=20)}
    check("QuantizeLinear", {"x": x}, opset, inits, axis=axis)
    quant = load_onnx(one_node("QuantizeLinear", {"x": x}, opset, inits, axis=axis)
                      ).nodes[0].output.type.quant
    assert quant.axis == axis % 3 and len(quant.scale) == n
    q = ints(*x.shape, dtype=dtype, low=0, high=120)
    check("DequantizeLinear", {"q": q}, opset, inits, axis=axis)


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("dtype,zp", [(np.int8, -5), (np.uint8, 130), (np.int32, None),
                                      (np.int8, None)])
def test_dequantize_per_tensor(opset, dtype, zp):
    info = np.iinfo(dtype)
    q = RNG.integers(max(info.min, -2**20), min(info.max, 2**20), (2, 3, 4), endpoint=True,
                     dtype=dtype)
    inits = {"s": np.array(0.037, np.float32)}
    if zp is not None:
        inits["z"] = np.array(zp, dtype)
    check("DequantizeLinear", {"q": q}, opset, inits, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16])
def test_sixteen_bit_quantization_is_refused_in_one_line(dtype):
    inits = {"s": np.array(0.001, np.float32), "z": np.array(7, dtype)}
    load_error(one_node("QuantizeLinear", {"x": _quant_data(scale=0.001) * 10}, 21, inits),
               r"node .*QuantizeLinear.*zero point is u?int16; Kiln quantizes to int8 or uint8")
    load_error(one_node("DequantizeLinear", {"q": ints(2, 3, dtype=dtype, low=0, high=300)}, 21,
                        inits), r"DequantizeLinear does not accept u?int16")


@pytest.mark.parametrize("scale", [0.0, -0.5, float("nan"), float("inf")])
@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_a_bad_scale_is_one_line_naming_the_node(op, scale):
    inits = {"s": np.array(scale, np.float32), "z": np.array(3, np.int8)}
    feeds = ({"x": rand(2, 3)} if op == "QuantizeLinear" else {"q": ints(2, 3, dtype=np.int8)})
    load_error(one_node(op, feeds, 13, inits), rf"node .*{op}.*scale is {scale}; a scale "
                                               r"must be positive and finite")


def test_a_per_axis_scale_of_the_wrong_length_is_one_line():
    inits = {"s": np.full(5, 0.1, np.float32), "z": np.zeros(5, np.int8)}
    load_error(one_node("DequantizeLinear", {"q": ints(2, 3, dtype=np.int8)}, 13, inits,
                        axis=1), r"per-axis scale must be 1-D of length 3 .* it has shape \[5\]")


@pytest.mark.parametrize("block,axis,scale_shape", [(2, 1, (3, 2)), (3, 1, (3, 2)),
                                                    (2, 0, (2, 4)), (4, -1, (3, 1))])
def test_blocked_quantization(block, axis, scale_shape):
    x = rand(3, 4, scale=2)
    inits = {"s": (RNG.random(scale_shape) * 0.1 + 0.01).astype(np.float32),
             "z": ints(*scale_shape, dtype=np.int8, low=-5, high=5)}
    check("QuantizeLinear", {"x": x}, 21, inits, axis=axis, block_size=block)
    graph = load_onnx(one_node("QuantizeLinear", {"x": x}, 21, inits, axis=axis,
                               block_size=block))
    assert graph.nodes[0].output.type.quant is None  # blocked scales are not QuantParams
    q = ints(3, 4, dtype=np.int8)
    check("DequantizeLinear", {"q": q}, 21, inits, axis=axis, block_size=block)


def test_blocked_scale_of_the_wrong_shape_refused():
    model = one_node("QuantizeLinear", {"x": rand(3, 4)}, 21,
                     {"s": np.ones((3, 3), np.float32)}, axis=1, block_size=2)
    load_error(model, r"blocked scale must have shape \[3, 2\] .* it has shape \[3, 3\]")


@pytest.mark.parametrize("out", [onnx.TensorProto.INT8, onnx.TensorProto.UINT8])
def test_quantize_output_dtype_saves_as_a_zero_point_before_opset_21(out):
    x = _quant_data()
    model = one_node("QuantizeLinear", {"x": x}, 21, {"s": np.array(0.05, np.float32)},
                     output_dtype=out)
    check_against_ort(model, {"x": x})
    graph = load_onnx(model)
    saved = to_onnx(graph, 19)
    assert len(saved.graph.node[0].input) == 3
    np.testing.assert_array_equal(ort_run(saved, {"x": x})[0], run(graph, {"x": x})["y"])


def test_quantize_saturate_attribute_is_accepted():
    check("QuantizeLinear", {"x": _quant_data()}, 19, {"s": np.array(0.05, np.float32),
                                                      "z": np.array(3, np.int8)}, saturate=0)


def test_quantize_float16_input():
    inits = {"s": np.array(0.05, np.float16), "z": np.array(3, np.int8)}
    check("QuantizeLinear", {"x": _quant_data().astype(np.float16)}, 19, inits)
    check("DequantizeLinear", {"q": ints(2, 3, dtype=np.int8)}, 19, inits, rtol=1e-3)


@pytest.mark.parametrize("precision", [TP.FLOAT, TP.FLOAT16, TP.DOUBLE])
def test_quantize_precision_follows_onnx(precision):
    """onnxruntime ignores `precision` (opset 23); ONNX's reference divides in that type."""
    x = _quant_data()
    model = one_node("QuantizeLinear", {"x": x}, 23, {"s": np.array(0.0371, np.float32),
                                                       "z": np.array(2, np.int8)},
                     precision=precision)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(run(load_onnx(model), {"x": x})["y"], want)


@pytest.mark.parametrize("out", [TP.FLOAT16, TP.FLOAT])
def test_dequantize_output_dtype(out):
    q = ints(2, 3, dtype=np.int8)
    model = one_node("DequantizeLinear", {"q": q}, 23, {"s": np.array(0.05, np.float32)},
                     output_dtype=out)
    check_against_ort(model, {"q": q}, rtol=1e-3)
    graph = load_onnx(model)
    if out == TP.FLOAT:
        assert "output_dtype" not in [a.name for a in to_onnx(graph, 21).graph.node[0].attribute]
    else:
        with pytest.raises(ModelError, match=r"cannot be saved at opset 21 because its output "
                                             r"type \(output_dtype=10\) differs"):
            to_onnx(graph, 21)


def test_quantize_unsupported_output_type_refused():
    model = one_node("QuantizeLinear", {"x": rand(3)}, 21, {"s": np.array(0.1, np.float32)},
                     output_dtype=onnx.TensorProto.INT4)
    load_error(model, "output_dtype=22 is not supported")


def test_quantize_per_axis_scale_of_the_wrong_length_refused():
    model = one_node("QuantizeLinear", {"x": rand(2, 3)}, 13,
                     {"s": np.ones(2, np.float32)}, axis=1)
    load_error(model, r"per-axis scale must be 1-D of length 3 \(axis 1 of \[2, 3\]\)")


@pytest.mark.parametrize("name", ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant",
                                  "vww_96_int8"])
def test_quantize_linear_exact_on_real_models(name):
    """Every QuantizeLinear's scale and zero point of the int8 models, on ties and extremes."""
    model = onnx.load(shared_models() / "onnx" / f"{name}.onnx")
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear":
            continue
        scale, zero = inits[node.input[1]], inits[node.input[2]]
        halves = (RNG.integers(-300, 300, 500) + 0.5).astype(np.float32) * scale
        x = np.concatenate([halves, rand(500, scale=50) * scale,
                            np.array([np.nan, np.inf, -np.inf, 0], np.float32)])
        check("QuantizeLinear", {"x": x.astype(np.float32)}, 13, {"s": scale, "z": zero})
