"""Whole models written by the tests, for the builtins breadth added.

`segmentation` (float and int8) is a small encoder-decoder as microcontroller segmentation
models are built: strided convolutions down, a transposed convolution and a bilinear resize back
up to the input's size, a per-pixel class score. `kws_lstm` (float and int8) is keyword spotting
with a recurrent layer: MFCC frames through an LSTM, its last step to a fully connected classifier.
`python -m tests.tflite.built_models DIR` writes every model into DIR (to open in the app or
run `kiln` on).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from tests.tflite.writer import Model, Op, T, write

RELU, RELU6 = 1, 3


class _Net:
    """Appends tensors and operators; quantization parameters walk along with the layers."""

    def __init__(self, integer: bool, seed: int):
        self.integer = integer
        self.rng = np.random.default_rng(seed)
        self.tensors: list[T] = []
        self.ops: list[Op] = []

    def tensor(self, name: str, shape, quant=None, dtype: str | None = None, data=None) -> int:
        if data is not None:
            self.tensors.append(T(name, tuple(shape), dtype or "float32", data,
                                  quant[0] if quant else None, quant[1] if quant else None,
                                  quant[2] if quant and len(quant) > 2 else 0))
        elif self.integer and dtype is None:
            self.tensors.append(T(name, tuple(shape), "int8", scale=[quant[0]],
                                  zero_point=[quant[1]]))
        else:
            self.tensors.append(T(name, tuple(shape), dtype or "float32"))
        return len(self.tensors) - 1

    def weights(self, name: str, shape, in_scale: float, axis: int, fan_in: int):
        """(weights, bias) tensor indices, per-channel int8 or float."""
        channels = shape[axis]
        real = self.rng.standard_normal(shape) / np.sqrt(fan_in)
        bias = self.rng.standard_normal(channels) * 0.1
        if not self.integer:
            return (self.tensor(name, shape, dtype="float32", data=real.astype(np.float32)),
                    self.tensor(f"{name}_b", (channels,), dtype="float32",
                                data=bias.astype(np.float32)))
        moved = np.moveaxis(real, axis, 0).reshape(channels, -1)
        scales = np.maximum(np.abs(moved).max(axis=1), 1e-3) / 127
        shaped = scales.reshape([-1 if i == axis else 1 for i in range(len(shape))])
        q = np.clip(np.round(real / shaped), -127, 127).astype(np.int8)
        bias_scales = in_scale * scales
        qb = np.round(bias / bias_scales).astype(np.int32)
        return (self.tensor(name, shape, (scales.tolist(), [0] * channels, axis), "int8", q),
                self.tensor(f"{name}_b", (channels,), (bias_scales.tolist(), [0] * channels),
                            "int32", qb))

    def op(self, builtin: str, inputs, outputs, options=None) -> None:
        self.ops.append(Op(builtin, list(inputs), list(outputs), options))

    def const(self, name: str, values) -> int:
        values = np.asarray(values, np.int32)
        return self.tensor(name, values.shape, dtype="int32", data=values)


def _conv(net: _Net, x: int, shape, cout: int, k: int, stride: int, q_in, q_out, name: str,
          depthwise: bool = False, activation: int = RELU6) -> tuple[int, tuple]:
    n, h, w, cin = shape
    oh, ow = -(-h // stride), -(-w // stride)
    if depthwise:
        wt, b = net.weights(name, (1, k, k, cin), q_in[0], 3, k * k)
        options = ("DepthwiseConv2DOptions", {"Padding": 0, "StrideH": stride, "StrideW": stride,
                                              "DepthMultiplier": 1, "DilationHFactor": 1,
                                              "DilationWFactor": 1,
                                              "FusedActivationFunction": activation})
        builtin, cout = "DEPTHWISE_CONV_2D", cin
    else:
        wt, b = net.weights(name, (cout, k, k, cin), q_in[0], 0, k * k * cin)
        options = ("Conv2DOptions", {"Padding": 0, "StrideH": stride, "StrideW": stride,
                                     "DilationHFactor": 1, "DilationWFactor": 1,
                                     "FusedActivationFunction": activation})
        builtin = "CONV_2D"
    out_shape = (n, oh, ow, cout)
    y = net.tensor(f"{name}_out", out_shape, q_out)
    net.op(builtin, [x, wt, b], [y], options)
    return y, out_shape


def segmentation(integer: bool) -> tuple[Model, dict]:
    """(model, input shapes): 32x32 RGB in, 4 class scores per pixel out."""
    net = _Net(integer, seed=21)
    # Ranges measured on the float model over inputs in [-2.5, 2.5] (the int8 input's range).
    q_in, q_enc1, q_dw, q_pw, q_up = (0.02, -1), (0.025, -128), (0.02, -128), (0.015, -128), (
        0.012, -10)
    x = net.tensor("image", (1, 32, 32, 3), q_in)
    y, shape = _conv(net, x, (1, 32, 32, 3), 8, 3, 2, q_in, q_enc1, "enc1")
    y, shape = _conv(net, y, shape, 8, 3, 1, q_enc1, q_dw, "enc2_dw", depthwise=True)
    y, shape = _conv(net, y, shape, 16, 1, 1, q_dw, q_pw, "enc2_pw")
    q_a = q_pw
    pooled = net.tensor("pool_out", (1, 8, 8, 16), q_a)
    net.op("MAX_POOL_2D", [y], [pooled], ("Pool2DOptions", {
        "Padding": 1, "StrideW": 2, "StrideH": 2, "FilterWidth": 2, "FilterHeight": 2,
        "FusedActivationFunction": 0}))
    # Decoder: a transposed convolution doubles the resolution, a bilinear resize restores it.
    wt, b = net.weights("up", (8, 3, 3, 16), q_a[0], 0, 9 * 16)
    q_c = q_up
    up = net.tensor("up_out", (1, 16, 16, 8), q_c)
    net.op("TRANSPOSE_CONV", [net.const("up_shape", [1, 16, 16, 8]), wt, pooled, b], [up],
           ("TransposeConvOptions", {"Padding": 0, "StrideH": 2, "StrideW": 2}))
    resized = net.tensor("resized", (1, 32, 32, 8), q_c)
    net.op("RESIZE_BILINEAR", [up, net.const("size", [32, 32])], [resized],
           ("ResizeBilinearOptions", {"AlignCorners": False, "HalfPixelCenters": True}))
    scores, _ = _conv(net, resized, (1, 32, 32, 8), 4, 1, 1, q_c, (0.008, 0), "classes",
                      activation=0)
    return Model(net.tensors, net.ops, [x], [scores]), {"image": (1, 32, 32, 3)}


def _per_tensor(net: _Net, name: str, real: np.ndarray, in_scale: float) -> tuple[int, float]:
    """A constant weight tensor: float, or int8 with one scale (the product scale returned)."""
    if not net.integer:
        return net.tensor(name, real.shape, dtype="float32", data=real.astype(np.float32)), 1.0
    scale = float(np.float32(np.abs(real).max() / 127))
    q = np.clip(np.round(real / scale), -127, 127).astype(np.int8)
    return net.tensor(name, real.shape, ([scale], [0]), "int8", q), in_scale * scale


def _bias(net: _Net, name: str, real: np.ndarray, scale: float) -> int:
    if not net.integer:
        return net.tensor(name, real.shape, dtype="float32", data=real.astype(np.float32))
    return net.tensor(name, real.shape, ([scale], [0]), "int32",
                      np.round(real / scale).astype(np.int32))


def kws_lstm(integer: bool) -> tuple[Model, dict]:
    """(model, input shapes): 49 frames of 10 MFCCs, an LSTM of 32 cells, 12 keyword scores.

    In int8 the LSTM is TFLite Micro's integer one: int8 weights with one scale per gate, an
    int8 hidden state and an int16 cell state of scale 2^-11 (the cell clip of 10 fits).
    """
    net = _Net(integer, seed=33)
    frames, features, cells, words = 49, 10, 32, 12
    q_x, q_h, q_logits, q_prob = (0.03, 0), (1 / 128, 0), (0.0625, 0), (1 / 256, -128)
    x = net.tensor("mfcc", (1, frames, features), q_x)
    weights, products = zip(*(_per_tensor(net, f"w_{g}", net.rng.standard_normal(
        (cells, features)) * 0.3, q_x[0]) for g in "ifco"))
    recurrent = [_per_tensor(net, f"r_{g}", net.rng.standard_normal((cells, cells)) * 0.15,
                             q_h[0])[0] for g in "ifco"]
    biases = [_bias(net, f"b_{g}", np.full(cells, 1.0 if g == "f" else 0.0), scale)
              for g, scale in zip("ifco", products)]
    state_h = len(net.tensors)
    if integer:
        net.tensors.append(T("state_h", (1, cells), "int8", scale=[q_h[0]],
                             zero_point=[q_h[1]], variable=True))
        net.tensors.append(T("state_c", (1, cells), "int16", scale=[2.0 ** -11],
                             zero_point=[0], variable=True))
    else:
        net.tensors.append(T("state_h", (1, cells), variable=True))
        net.tensors.append(T("state_c", (1, cells), variable=True))
    sequence = net.tensor("lstm_out", (1, frames, cells), q_h)
    net.op("UNIDIRECTIONAL_SEQUENCE_LSTM",
           [x, *weights, *recurrent, -1, -1, -1, *biases, -1, -1, state_h, state_h + 1,
            -1, -1, -1, -1], [sequence],
           ("UnidirectionalSequenceLSTMOptions", {"FusedActivationFunction": 4,
                                                  "CellClip": 10.0, "ProjClip": 0.0,
                                                  "TimeMajor": False}))
    last = net.tensor("last_step", (1, cells), q_h)
    net.op("STRIDED_SLICE", [sequence, net.const("begin", [0, -1, 0]),
                             net.const("end", [1, frames, cells]),
                             net.const("strides", [1, 1, 1])], [last],
           ("StridedSliceOptions", {"BeginMask": 0, "EndMask": 0, "ShrinkAxisMask": 2}))
    fc_w, product = _per_tensor(net, "fc_w", net.rng.standard_normal((words, cells)) * 0.3,
                                q_h[0])
    fc_b = _bias(net, "fc_b", np.zeros(words), product)
    logits = net.tensor("logits", (1, words), q_logits)
    net.op("FULLY_CONNECTED", [last, fc_w, fc_b], [logits],
           ("FullyConnectedOptions", {"FusedActivationFunction": 0}))
    probabilities = net.tensor("probabilities", (1, words), q_prob)
    net.op("SOFTMAX", [logits], [probabilities], ("SoftmaxOptions", {"Beta": 1.0}))
    return Model(net.tensors, net.ops, [x], [probabilities]), {"mfcc": (1, frames, features)}


BUILT = {"segmentation": segmentation, "kws_lstm": kws_lstm}
# The element types each model is built in (True: int8).
KINDS = {"segmentation": (False, True), "kws_lstm": (False, True)}


def main(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for name, build in BUILT.items():
        for integer in KINDS[name]:
            path = out / f"{name}_{'int8' if integer else 'float'}.tflite"
            path.write_bytes(write(build(integer)[0]))
            print(path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
