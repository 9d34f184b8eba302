"""Lookup-table activations: onnxruntime's float32 functions and the 8-bit tables built from them.

A QDQ Sigmoid, Tanh, HardSwish or Clip becomes one table lookup; its 256 entries must be what
onnxruntime computes for DequantizeLinear -> function -> QuantizeLinear, every code, for many
quantizations, so the float32 functions themselves are compared bit for bit first.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from app import cli
from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.qmath import ort_float
from tests.helpers import ort_run
from tests.quant.int8_oracle import differing


def _float_model(op: str) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "f",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _inputs() -> np.ndarray:
    """Wide and narrow random floats, the clamp bounds, zeros and the neighbours of both."""
    rng = np.random.default_rng(0)
    edges = np.array([0.0, -0.0, 18, -18, 9, -9, 5, -5, 3, -3, 1e-30, -1e-30, 100, -100],
                     np.float32)
    near = np.concatenate([np.nextafter(edges, np.float32(np.inf)),
                           np.nextafter(edges, np.float32(-np.inf))])
    return np.concatenate([rng.uniform(-20, 20, 300_000), rng.uniform(-2, 2, 300_000),
                           edges, near]).astype(np.float32)


@pytest.mark.parametrize("op", sorted(ort_float.FUNCTIONS))
def test_the_float_functions_are_onnxruntimes_bit_for_bit(op):
    x = _inputs()
    ours = ort_float.FUNCTIONS[op](x)
    want = ort_run(_float_model(op), {"x": x})[0]
    assert ours.dtype == np.float32
    assert np.count_nonzero(ours.view(np.int32) != want.view(np.int32)) == 0


def test_fma_rounds_once():
    a = np.float32(1 + 2 ** -12)  # a * a = 1 + 2**-11 + 2**-24: halfway between two float32
    assert ort_float.fma(a, a, np.float32(0)) == np.float32(1 + 2 ** -11)  # ties to even
    # A tail far below float64's precision still decides the way, as one rounding does.
    assert ort_float.fma(a, a, np.float32(2 ** -60)) == np.float32(1 + 2 ** -11 + 2 ** -23)
    assert ort_float.fma(a, a, np.float32(-2 ** -60)) == np.float32(1 + 2 ** -11)


def _qdq(op: str, dtype, params, extra=(), **attrs) -> onnx.ModelProto:
    """DequantizeLinear -> op -> QuantizeLinear on 256 codes (extra: Clip's bound constants)."""
    elem = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    names = ["xs", "xz", "ys", "yz"]
    inits = [numpy_helper.from_array(p, n) for p, n in zip(params, names)]
    inits += [numpy_helper.from_array(np.array(v, np.float32), f"b{i}")
              for i, v in enumerate(extra)]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node(op, ["xf", *(f"b{i}" for i in range(len(extra)))], ["f"],
                              **attrs),
             helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", elem, [256])],
                              [helper.make_tensor_value_info("y", elem, [256])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def _params(rng, dtype, out_low, out_high) -> list[np.ndarray]:
    info = np.iinfo(dtype)
    zp = lambda: np.array(rng.integers(info.min // 2, info.max // 2), dtype)  # noqa: E731
    return [np.array(np.float32(rng.uniform(0.01, 0.12))), zp(),
            np.array(np.float32(rng.uniform(out_low, out_high))), zp()]


CASES = {  # op: (Kiln's integer operator, output scale range, Clip bounds)
    "Sigmoid": ("QLinearSigmoid", (0.002, 0.006), ()),
    "Tanh": ("IntLookupTable", (0.004, 0.012), ()),
    "HardSwish": ("IntLookupTable", (0.01, 0.1), ()),
    "Clip": ("IntLookupTable", (0.01, 0.1), (0.0, 6.0)),
}


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_a_quantized_activation_becomes_onnxruntimes_table(op, dtype, tmp_path):
    integer_op, (low, high), bounds = CASES[op]
    x = np.arange(np.iinfo(dtype).min, np.iinfo(dtype).max + 1).astype(dtype)
    total = 0
    for seed in range(12):
        model = _qdq(op, dtype, _params(np.random.default_rng(seed), dtype, low, high), bounds)
        path = tmp_path / f"{op}.onnx"
        onnx.save(model, path)
        final = compilation(load_onnx(path)).final
        assert [n.op for n in final.nodes] == [integer_op]
        total += differing(run(final, {"x": x})["y"], ort_run(model, {"x": x})[0])
    assert total == 0


def test_a_concat_of_other_parameters_becomes_qlinear_concat(tmp_path):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(np.array(np.float32(s)), n) for s, n in
             ((0.05, "as"), (0.11, "bs"), (0.07, "ys"))]
    inits += [numpy_helper.from_array(np.array(z, np.int8), n) for z, n in
              ((4, "az"), (-9, "bz"), (2, "yz"))]
    nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["af"]),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"]),
             helper.make_node("Concat", ["af", "bf"], ["c"], axis=0),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "c", [
        helper.make_tensor_value_info(n, TensorProto.INT8, [256]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [512])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "cat.onnx"
    onnx.save(model, path)
    final = compilation(load_onnx(path)).final
    assert [n.op for n in final.nodes] == ["QLinearConcat"]
    codes = np.arange(-128, 128).astype(np.int8)
    feeds = {"a": codes, "b": rng.permutation(codes)}
    assert differing(run(final, feeds)["y"], ort_run(model, feeds)[0]) == 0


def test_with_the_tflite_rule_a_sigmoid_stays_float_and_the_pass_says_why(tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = tmp_path / "sigmoid.onnx"
    onnx.save(_qdq("Sigmoid", np.int8, _params(rng, np.int8, 0.002, 0.006)), path)
    assert cli.main(["passes", str(path), "--requant", "tflite"]) == 0
    out = capsys.readouterr().out
    assert "stays float" in out and "TFLite front end" in out
