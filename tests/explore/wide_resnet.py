"""A wider ResNet-8: MLPerf Tiny's trained CIFAR-10 ResNet-8 with every layer twice as wide.

Each channel of a hidden tensor gets a twin (Net2Net's widening): a convolution computes its
output channels twice, and the next layer splits each input weight between a channel and its
twin at a seeded random ratio, so the float function is the trained model's while no two
weights repeat. The model then answers natural photos as the trained one does, on 32 to 128
channels (four times the multiply-accumulates) and the same [1, 32, 32, 3] input.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

WIDEN = 2


def _split(weights: np.ndarray, axis: int, rng) -> np.ndarray:
    """`weights` over twice the channels on `axis`, each channel's weight shared with its twin."""
    share = rng.uniform(0.25, 0.75, weights.shape).astype(np.float32)
    return np.concatenate([weights * share, weights * (1 - share)], axis=axis)


def wide_resnet8(shared: Path) -> onnx.ModelProto:
    """The widened float ResNet-8 (NHWC input [1, 32, 32, 3], ten classes)."""
    model = onnx.load(shared / "onnx" / "pretrainedResnet.onnx")
    rng = np.random.default_rng(8)
    inits = {i.name: i for i in model.graph.initializer}

    def put(name: str, array: np.ndarray) -> None:
        inits[name].CopyFrom(numpy_helper.from_array(array.astype(np.float32), name))
    for node in model.graph.node:
        if node.op_type == "Conv":
            weights = numpy_helper.to_array(inits[node.input[1]])
            if weights.shape[1] != 3:  # every input but the image has a twin per channel
                weights = _split(weights, 1, rng)
            put(node.input[1], np.concatenate([weights] * WIDEN, axis=0))
            put(node.input[2], np.tile(numpy_helper.to_array(inits[node.input[2]]), WIDEN))
        elif node.op_type == "MatMul":
            put(node.input[1], _split(numpy_helper.to_array(inits[node.input[1]]), 0, rng))
        elif node.op_type == "Reshape":
            shape = numpy_helper.to_array(inits[node.input[1]]).copy()
            shape[-1] *= WIDEN
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(shape, node.input[1]))
    model.graph.name = "wide_resnet8"
    onnx.checker.check_model(model)
    return model
