"""The float models a campaign quantizes: built here (every quantized operator) and shared.

Built: the journeys' operator zoo (every operator the quantizer turns into int8), the app's
digits CNN, a depthwise-separable block with a residual Add, a Relu6 clamp and a Tanh table,
and a wide classifier whose 1,024-deep sums reach far past what calibration saw. Shared: the
MLPerf Tiny float models and MNIST (`../shared/models/onnx`).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import onnx
from onnx import helper

from compiler.frontends.onnx import load_onnx
from compiler.ir.graph import Graph
from tests.conftest import SHARED_MODELS
from tests.helpers import make_model
from tests.journeys.data import graph_of

BUILT = ("operator_zoo", "digits_cnn", "separable_block", "wide_classifier")
SHARED = ("kws_ref_model_float32", "pretrainedResnet", "mnist-8", "ad01_fp32", "vww_96_float")


def separable_block(seed: int = 3) -> onnx.ModelProto:
    """[1,4,8,8] -> [1,6]: conv, depthwise conv, Relu6, pointwise conv, residual Add, Relu,
    Tanh, global pool and Gemm."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.4):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
        n("Relu", ["c1"], ["r1"], name="relu"),
        n("Conv", ["r1", "wd", "bd"], ["d1"], pads=[1, 1, 1, 1], group=8, name="depthwise"),
        n("Clip", ["d1", "lo", "hi"], ["d2"], name="relu6"),
        n("Conv", ["d2", "wp", "bp"], ["p1"], name="pointwise"),
        n("Add", ["p1", "r1"], ["s1"], name="residual"),
        n("Relu", ["s1"], ["s2"], name="relu_sum"),
        n("Tanh", ["s2"], ["t1"], name="tanh"),
        n("GlobalAveragePool", ["t1"], ["g1"], name="gap"),
        n("Flatten", ["g1"], ["f1"], name="flat"),
        n("Gemm", ["f1", "wg", "bg"], ["y"], transB=1, name="classifier"),
    ]
    weights = {"w1": w(8, 4, 3, 3), "b1": w(8, scale=0.1), "wd": w(8, 1, 3, 3),
               "bd": w(8, scale=0.1), "lo": np.array(0.0, np.float32),
               "hi": np.array(6.0, np.float32), "wp": w(8, 8, 1, 1), "bp": w(8, scale=0.1),
               "wg": w(6, 8), "bg": w(6, scale=0.1)}
    return make_model(nodes, [("x", np.float32, [1, 4, 8, 8])], [("y", np.float32, [1, 6])],
                      weights)


def wide_classifier(seed: int = 5) -> onnx.ModelProto:
    """[1,1024] -> [1,12]: two Gemms and a MatMul with bias; the first sums 1,024 products."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    n = helper.make_node
    nodes = [
        n("Gemm", ["x", "w1", "b1"], ["h1"], transB=1, name="wide"),
        n("Relu", ["h1"], ["r1"], name="relu"),
        n("Gemm", ["r1", "w2", "b2"], ["h2"], transB=1, name="narrow"),
        n("LeakyRelu", ["h2"], ["l2"], alpha=0.2, name="leaky"),
        n("MatMul", ["l2", "w3"], ["m3"], name="matmul"),
        n("Add", ["m3", "b3"], ["y"], name="bias"),
    ]
    weights = {"w1": w(48, 1024, scale=0.05), "b1": w(48, scale=0.1), "w2": w(16, 48),
               "b2": w(16, scale=0.1), "w3": w(16, 12), "b3": w(12, scale=0.1)}
    return make_model(nodes, [("x", np.float32, [1, 1024])], [("y", np.float32, [1, 12])],
                      weights)


def available(name: str) -> bool:
    """Whether the model's file is here (a shared model may be absent from a fresh clone)."""
    return name in BUILT or (SHARED_MODELS / "onnx" / f"{name}.onnx").is_file()


@cache
def float_graph(name: str) -> Graph:
    """The loaded float graph of a campaign model (the journeys' loader for theirs)."""
    if name in ("separable_block", "wide_classifier"):
        return load_onnx({"separable_block": separable_block,
                          "wide_classifier": wide_classifier}[name]())
    return graph_of(name)
