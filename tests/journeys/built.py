"""Float graphs the project builds itself, covering every operator the quantizer quantizes.

The journeys run them beside the MLPerf Tiny models, so a fresh clone (no shared models) still
walks the whole path: binary operators with a constant or broadcast operand on either side,
concatenation, max, average and global pools, flatten and reshape, Gemm, MatMul with a bias,
LeakyRelu, Sigmoid, softmax, and a layer kept in float between int8 layers.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from tests.helpers import make_model

# The tensor the "kept float" journeys leave in float32 (a convolution between int8 layers).
KEPT_FLOAT = "kept_out"


def _rng_weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.3):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return {"w1": w(8, 3, 3, 3), "b1": w(8, scale=0.1), "c_left": w(1, 8, 1, 1),
            "c_scalar": np.array(0.75, np.float32), "c_first": np.array(1.5, np.float32),
            "w2": w(4, 16, 1, 1), "b2": w(4, scale=0.1), "shape": np.array([1, 16], np.int64),
            "wg": w(10, 16), "bg": w(10, scale=0.1), "wm": w(10, 10), "bm": w(10, scale=0.1),
            "c_row": w(1, 10)}


def operator_zoo(seed: int = 0):
    """A [1,3,8,8] -> [1,10] network with every operator the quantizer turns into int8."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["conv1"], pads=[1, 1, 1, 1], name="conv1"),
        n("Relu", ["conv1"], ["relu1"], name="relu1"),
        n("MaxPool", ["relu1"], ["pool1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        n("Add", ["c_left", "pool1"], ["add_const_left"], name="add_const_left"),
        n("Mul", ["add_const_left", "c_scalar"], ["mul_const_right"], name="mul_const_right"),
        n("GlobalAveragePool", ["mul_const_right"], ["gap"], name="gap"),
        n("Add", ["mul_const_right", "gap"], ["add_broadcast"], name="add_broadcast"),
        n("AveragePool", ["add_broadcast"], ["avg_a"], kernel_shape=[2, 2], strides=[2, 2],
          name="avg_a"),
        n("AveragePool", ["mul_const_right"], ["avg_b"], kernel_shape=[2, 2], strides=[2, 2],
          name="avg_b"),
        n("Concat", ["avg_a", "avg_b"], ["concat"], axis=1, name="concat"),
        n("LeakyRelu", ["concat"], ["leaky"], alpha=0.1, name="leaky"),
        n("Conv", ["leaky", "w2", "b2"], [KEPT_FLOAT], name="kept"),
        n("Sigmoid", [KEPT_FLOAT], ["sigmoid"], name="sigmoid"),
        n("Mul", ["c_first", "sigmoid"], ["mul_const_left"], name="mul_const_left"),
        n("Flatten", ["mul_const_left"], ["flat"], name="flat"),
        n("Reshape", ["flat", "shape"], ["reshaped"], name="reshaped"),
        n("Gemm", ["reshaped", "wg", "bg"], ["gemm"], transB=1, name="gemm"),
        n("MatMul", ["gemm", "wm"], ["matmul"], name="matmul"),
        n("Add", ["matmul", "bm"], ["bias"], name="bias"),
        n("Add", ["bias", "c_row"], ["add_const_row"], name="add_const_row"),
        n("Softmax", ["add_const_row"], ["y"], axis=-1, name="softmax"),
    ]
    return make_model(nodes, [("x", np.float32, [1, 3, 8, 8])], [("y", np.float32, [1, 10])],
                      _rng_weights(seed))


def zoo_samples(count: int, seed: int) -> np.ndarray:
    """Smooth positive-and-negative inputs for the zoo, [count, 3, 8, 8]."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(-1.0, 1.0, (count, 3, 4, 4))
    return np.repeat(np.repeat(coarse, 2, axis=2), 2, axis=3).astype(np.float32)
