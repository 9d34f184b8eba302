"""Small int8 models the tuning tests build: every kernel family with a schedule space.

`tiny_dscnn`: a 3 x 3 convolution, a depthwise and a pointwise pair twice (two layers of one
workload), a global average pool and a fully connected layer, as TFLite writes them (per-channel
int8 weights, TFLite's rounding). `sharing` keeps three of its layers' shapes and types (so
three workloads) and changes the rest, for the log-sharing test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.tflite.oracles import quantized
from tests.tflite.writer import Model, Op, T, write

SAME, VALID = 0, 1


def _weights(rng, shape, out_axis: int, count: int) -> tuple:
    scales = rng.uniform(0.005, 0.03, count).tolist()
    return rng.integers(-127, 128, shape), scales


def _layers(rng, h: int, w: int, cin: int, plan: list[tuple]) -> tuple[list, list]:
    tensors = [quantized("x", (1, h, w, cin), 0.04, -3)]
    ops = []
    shape, scale = (1, h, w, cin), 0.04
    for i, (kind, channels) in enumerate(plan):
        x = len(tensors) - 1
        if kind == "conv3":
            wshape = (channels, 3, 3, shape[3])
        elif kind == "conv1":
            wshape = (channels, 1, 1, shape[3])
        else:  # depthwise
            channels = shape[3]
            wshape = (1, 3, 3, channels)
        data, ws = _weights(rng, wshape, 0, channels)
        out = (1, shape[1], shape[2], channels)
        tensors += [T(f"w{i}", wshape, "int8", data, scale=ws, zero_point=[0] * channels,
                      axis=3 if kind == "depthwise" else 0),
                    T(f"b{i}", (channels,), "int32", rng.integers(-600, 600, channels),
                      scale=[scale * s for s in ws], zero_point=[0] * channels),
                    quantized(f"y{i}", out, 0.05, -6)]
        n = len(tensors)
        if kind == "depthwise":
            ops.append(Op("DEPTHWISE_CONV_2D", [x, n - 3, n - 2], [n - 1],
                          ("DepthwiseConv2DOptions", {"Padding": SAME, "StrideH": 1,
                                                      "StrideW": 1, "DepthMultiplier": 1,
                                                      "FusedActivationFunction": 1})))
        else:
            ops.append(Op("CONV_2D", [x, n - 3, n - 2], [n - 1], ("Conv2DOptions", {
                "Padding": SAME, "StrideH": 1, "StrideW": 1, "FusedActivationFunction": 1})))
        shape, scale = out, 0.05
    return tensors, ops, shape


def _head(rng, tensors: list, ops: list, shape, units: int) -> None:
    x = len(tensors) - 1
    channels = shape[3]
    tensors.append(quantized("pooled", (1, 1, 1, channels), 0.05, -6))
    ops.append(Op("AVERAGE_POOL_2D", [x], [x + 1], ("Pool2DOptions", {
        "Padding": VALID, "StrideH": 1, "StrideW": 1, "FilterHeight": shape[1],
        "FilterWidth": shape[2], "FusedActivationFunction": 0})))
    tensors.append(T("shape", (2,), "int32", np.array([1, channels])))
    tensors.append(quantized("flat", (1, channels), 0.05, -6))
    ops.append(Op("RESHAPE", [x + 1, x + 2], [x + 3]))
    data = rng.integers(-127, 128, (units, channels))
    tensors += [T("wf", (units, channels), "int8", data, scale=[0.01], zero_point=[0]),
                T("bf", (units,), "int32", rng.integers(-3000, 3000, units),
                  scale=[0.0005], zero_point=[0]),
                quantized("logits", (1, units), 0.04, 2)]
    n = len(tensors)
    ops.append(Op("FULLY_CONNECTED", [x + 3, n - 3, n - 2], [n - 1],
                  ("FullyConnectedOptions", {"FusedActivationFunction": 0})))


TINY_PLAN = [("conv3", 16), ("depthwise", 0), ("conv1", 16), ("depthwise", 0), ("conv1", 16)]


def tiny_dscnn(folder: Path, plan=None, size=(10, 6), seed: int = 5, units: int = 8) -> Path:
    """The model written to `folder`/tiny_dscnn.tflite (or another plan's)."""
    rng = np.random.default_rng(seed)
    tensors, ops, shape = _layers(rng, size[0], size[1], 8, plan or TINY_PLAN)
    _head(rng, tensors, ops, shape, units)
    path = Path(folder) / ("tiny_dscnn.tflite" if plan is None else "other.tflite")
    path.write_bytes(write(Model(tensors, ops, [0], [len(tensors) - 1])))
    return path
