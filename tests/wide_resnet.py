"""A wider float ResNet-8 (CIFAR-10, [1, 32, 32, 3]) as ONNX, built by the tests.

MLPerf Tiny's ResNet-8 topology as `pretrainedResnet.onnx` lays it out (an NHWC input
transposed to NCHW, a 3 x 3 stem, one residual block per stack, the second and third stacks
halving the image with a 1 x 1 shortcut, average pool, MatMul, Softmax) at stack widths
`width`, 2 x and 4 x `width`. The weights are He-initialised from a fixed seed, so a fresh
clone builds it without the shared folder. Its answers mean nothing: figures of sizes,
arenas and exactness use it. Where accuracy matters, `tests.explore.wide_resnet` widens the
trained ResNet-8 of the shared models instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIDE = 32
CLASSES = 10


def wide_resnet8(width: int = 32, seed: int = 8) -> onnx.ModelProto:
    """The float model at stack widths `width`, 2 x `width`, 4 x `width`."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv(x: str, cin: int, cout: int, size: int, stride: int, relu: bool = True) -> str:
        k = len(nodes)
        w = rng.normal(0, np.sqrt(2.0 / (cin * size * size)), (cout, cin, size, size))
        b = rng.normal(0, 0.05, cout)
        out = f"conv{k}"
        pad = size // 2
        nodes.append(helper.make_node(
            "Conv", [x, const(f"w{k}", w), const(f"b{k}", b)], [out], name=f"Conv{k}",
            kernel_shape=[size, size], strides=[stride, stride], pads=[pad] * 4))
        if not relu:
            return out
        nodes.append(helper.make_node("Relu", [out], [f"relu{k}"], name=f"Relu{k}"))
        return f"relu{k}"

    def add(a: str, b: str) -> str:
        k = len(nodes)
        nodes.append(helper.make_node("Add", [a, b], [f"sum{k}"], name=f"Add{k}"))
        nodes.append(helper.make_node("Relu", [f"sum{k}"], [f"act{k}"], name=f"Relu{k}"))
        return f"act{k}"

    nodes.append(helper.make_node("Transpose", ["input_1"], ["nchw"], name="Transpose",
                                  perm=[0, 3, 1, 2]))
    x = conv("nchw", 3, width, 3, 1)
    x = add(conv(conv(x, width, width, 3, 1), width, width, 3, 1, relu=False), x)
    cin = width
    for cout in (2 * width, 4 * width):
        down = conv(x, cin, cout, 3, 2)
        shortcut = conv(x, cin, cout, 1, 2, relu=False)
        x = add(conv(down, cout, cout, 3, 1, relu=False), shortcut)
        cin = cout
    nodes.append(helper.make_node("AveragePool", [x], ["pooled"], name="AveragePool",
                                  kernel_shape=[8, 8], strides=[8, 8]))
    nodes.append(helper.make_node("Reshape", ["pooled", const_shape(inits)], ["flat"],
                                  name="Reshape"))
    fc = rng.normal(0, np.sqrt(1.0 / cin), (cin, CLASSES))
    nodes.append(helper.make_node("MatMul", ["flat", const("fc", fc)], ["logits"],
                                  name="MatMul"))
    nodes.append(helper.make_node("Softmax", ["logits"], ["Identity"], name="Softmax",
                                  axis=-1))
    graph = helper.make_graph(
        nodes, f"resnet8_w{width}",
        [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, [1, SIDE, SIDE, 3])],
        [helper.make_tensor_value_info("Identity", TensorProto.FLOAT, [1, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="kiln-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def const_shape(inits: list) -> str:
    inits.append(numpy_helper.from_array(np.array([1, -1], np.int64), "flat_shape"))
    return "flat_shape"


def write_wide_resnet8(folder: Path, width: int = 32) -> Path:
    """The model saved as `folder`/resnet8_wide.onnx (its path)."""
    path = Path(folder) / "resnet8_wide.onnx"
    onnx.save(wide_resnet8(width), path)
    return path


def smooth_images(count: int, seed: int = 0) -> np.ndarray:
    """`count` [32, 32, 3] images of smooth random colour fields in [0, 1] (NHWC, float32).

    Smooth like photos, not white noise: calibration on them gives ranges a photo would.
    """
    rng = np.random.default_rng(seed)
    coarse = rng.random((count, 4, 4, 3))
    images = coarse.repeat(8, axis=1).repeat(8, axis=2)
    kernel = np.ones(5) / 5
    for axis in (1, 2):
        images = np.apply_along_axis(lambda r: np.convolve(r, kernel, "same"), axis, images)
    return images.astype(np.float32).reshape(count, 1, SIDE, SIDE, 3)
