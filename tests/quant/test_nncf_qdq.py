"""QDQ files shaped as NNCF writes them: float biases, and a pool or flatten quantized before only.

NNCF's ONNX backend keeps each bias float, quantizes activations as uint8 after a Relu, and
puts no QuantizeLinear after a MaxPool or a Flatten: DequantizeLinear -> MaxPool -> Conv.
Kiln must still run every such Conv and Gemm on the integers.
"""

from collections import Counter

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import compilation
from compiler.explore.measure import float_layer_count
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.ir.graph import Constant
from tests.helpers import ort_run

X_SCALE, R1_SCALE, R2_SCALE = np.float32(1 / 255), np.float32(0.05), np.float32(0.04)


def _params(rng):
    return {"w1": rng.integers(-127, 128, (4, 2, 3, 3)).astype(np.int8),
            "w1s": rng.uniform(0.002, 0.01, 4).astype(np.float32),
            "b1": rng.normal(0, 0.3, 4).astype(np.float32),
            "w2": rng.integers(-127, 128, (6, 4, 3, 3)).astype(np.int8),
            "w2s": rng.uniform(0.002, 0.01, 6).astype(np.float32),
            "b2": rng.normal(0, 0.3, 6).astype(np.float32),
            "fc": rng.integers(-127, 128, (5, 54)).astype(np.int8),
            "fcs": rng.uniform(0.002, 0.01, 5).astype(np.float32),
            "fcb": rng.normal(0, 0.3, 5).astype(np.float32)}


def _model(p, int32_bias: bool, stored_int8: bool = False) -> onnx.ModelProto:
    """NNCF's shape of a small CNN; with `int32_bias` the Convs' biases as a quantizer rounds
    them (the float classifier's stays float); with `stored_int8` the float model's weights
    were int8 already (DequantizeLinear), which NNCF quantizes again."""
    inits = {"xs": X_SCALE, "xz": np.uint8(0), "r1s": R1_SCALE, "r1z": np.uint8(0),
             "r2s": R2_SCALE, "r2z": np.uint8(0)}
    nodes = [helper.make_node("QuantizeLinear", ["image", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"])]

    def weight(name, scales, axis=0):
        inits.update({f"{name}_q": p[name], f"{name}_s": p[scales],
                      f"{name}_z": np.zeros(p[scales].size, np.int8)})
        if stored_int8:  # DequantizeLinear (the file's) -> QuantizeLinear (NNCF's) first
            inits.update({f"{name}_q0": p[name], f"{name}_s0": p[scales] * np.float32(0.5)})
            nodes.extend([
                helper.make_node("DequantizeLinear", [f"{name}_q0", f"{name}_s0"],
                                 [f"{name}_f"], axis=axis),
                helper.make_node("QuantizeLinear", [f"{name}_f", f"{name}_s", f"{name}_z"],
                                 [f"{name}_q"], axis=axis)])
            del inits[f"{name}_q"]
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s",
                                                           f"{name}_z"], [name], axis=axis))

    def bias(name, x_scale, scales, rounded=int32_bias):
        if not rounded:
            inits[name] = p[name]
            return name
        scale = np.float32(x_scale) * p[scales]
        inits.update({f"{name}_q": np.rint(p[name] / scale).astype(np.int32),
                      f"{name}_s": scale})
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s"],
                                      [f"{name}_dq"], axis=0))
        return f"{name}_dq"

    weight("w1", "w1s")
    nodes += [helper.make_node("Conv", ["x", "w1", bias("b1", X_SCALE, "w1s")], ["c1"],
                               pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c1"], ["r1"]),
              helper.make_node("QuantizeLinear", ["r1", "r1s", "r1z"], ["r1q"]),
              helper.make_node("DequantizeLinear", ["r1q", "r1s", "r1z"], ["r1d"]),
              helper.make_node("MaxPool", ["r1d"], ["pool"], kernel_shape=[2, 2],
                               strides=[2, 2])]
    weight("w2", "w2s")
    nodes += [helper.make_node("Conv", ["pool", "w2", bias("b2", R1_SCALE, "w2s")], ["c2"],
                               pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c2"], ["r2"]),
              helper.make_node("QuantizeLinear", ["r2", "r2s", "r2z"], ["r2q"]),
              helper.make_node("DequantizeLinear", ["r2q", "r2s", "r2z"], ["r2d"]),
              helper.make_node("Flatten", ["r2d"], ["flat"])]
    weight("fc", "fcs", axis=-2)  # NNCF's axis for a transposed Gemm weight
    nodes.append(helper.make_node("Gemm", ["flat", "fc", bias("fcb", R2_SCALE, "fcs", False)],
                                  ["logits"], transB=1))
    graph = helper.make_graph(
        nodes, "nncf_shaped",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_float_biases_and_pools_quantized_before_run_on_the_integers():
    p = _params(np.random.default_rng(3))
    model = _model(p, int32_bias=False)
    final = compilation(load_onnx(model)).final
    counts = Counter(n.op for n in final.nodes)
    assert counts["QLinearConv"] == 2, counts
    pool = next(n for n in final.nodes if n.op == "MaxPool")
    assert pool.inputs[0].type.dtype == "uint8"  # the pool runs on the integers
    # The classifier's logits are not quantized: it alone computes in float.
    assert float_layer_count(final) == 1 and counts["Gemm"] + counts["FullyConnected"] == 1
    # The float biases become exactly the int32 a quantizer writes at input x weight scale.
    rounded = compilation(load_onnx(_model(p, int32_bias=True))).final
    rng = np.random.default_rng(0)
    for _ in range(10):
        image = rng.random((1, 2, 6, 6)).astype(np.float32)
        ours = run(final, {"image": image})[final.outputs[0].name]
        same = run(rounded, {"image": image})[rounded.outputs[0].name]
        np.testing.assert_array_equal(ours, same)
        want = ort_run(model, {"image": image})[0]  # float biases, float arithmetic
        np.testing.assert_allclose(ours, want, atol=0.05 * np.abs(want).max())


def test_a_bias_beyond_int32_at_that_scale_keeps_its_layer_float():
    p = _params(np.random.default_rng(3))
    p["b2"][0] = 1e9  # over 2**31 steps of input x weight scale
    final = compilation(load_onnx(_model(p, int32_bias=False))).final
    counts = Counter(n.op for n in final.nodes)
    assert counts["QLinearConv"] == 1, counts


def test_int8_weights_quantized_again_fold_to_the_outer_integers():
    p = _params(np.random.default_rng(4))
    model = _model(p, int32_bias=False, stored_int8=True)
    final = compilation(load_onnx(model)).final
    assert Counter(n.op for n in final.nodes)["QLinearConv"] == 2
    assert not any(n.op == "QuantizeLinear" and isinstance(n.inputs[0], Constant)
                   for n in final.nodes)
    image = np.random.default_rng(1).random((1, 2, 6, 6)).astype(np.float32)
    ours = run(final, {"image": image})[final.outputs[0].name]
    want = ort_run(model, {"image": image})[0]
    np.testing.assert_allclose(ours, want, atol=0.05 * np.abs(want).max())
