"""What makes two nodes of different models the same layer: normalised names, operator kinds."""

from __future__ import annotations

import re

QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})

# Suffixes converters and quantizers append to a layer's name: tf2onnx's `__NN` counters and
# `:0` outputs, the QDQ wrappers' `_quantize` / `_dequant` / `_prequant`, onnxruntime's
# `_QuantizeLinear` / `_DequantizeLinear`, TFLite's `;...` fused names stay whole.
_SUFFIXES = re.compile(
    r"(:\d+|__\d+|_(?:Dequantize|Quantize)Linear|_(?:dequant|dequantize|quant|quantize|prequant|"
    r"requant|quantized|int8|uint8|fp32|float32))$")

# Operator kinds a float layer and its integer form share.
_KINDS = {"MatMul": "Dense", "Gemm": "Dense", "FullyConnected": "Dense",
          "GlobalAveragePool": "AveragePool", "GlobalMaxPool": "MaxPool",
          "Flatten": "Reshape", "Squeeze": "Reshape", "Unsqueeze": "Reshape"}


def name_forms(name: str) -> list[str]:
    """`name`, then each form with one more converter or quantizer suffix taken off.

    `conv1_prequant__7` gives `conv1_prequant__7`, `conv1_prequant`, `conv1`. The shorter the
    form, the more nodes may share it (`Relu__5` and `Relu__8` share `Relu`), so a match
    prefers the longest form two nodes share and only forms one node of a kind holds.
    """
    forms = [name]
    while True:
        stripped = _SUFFIXES.sub("", forms[-1])
        if stripped == forms[-1] or not stripped:
            return forms
        forms.append(stripped)


def kind(op: str) -> str:
    """The operator's kind with its integer form mapped back (`QLinearConv` -> `Conv`).

    `QLinear*`, `Q*` and `*Integer` operators are the quantized forms of their float operator;
    matrix products (MatMul, Gemm, FullyConnected) are one kind, as are global and windowed
    pools and the operators that only reshape, because passes and quantizers turn one into
    the other.
    """
    if op in QDQ:
        return op
    if op.startswith("QLinear"):
        op = op[len("QLinear"):]
    elif len(op) > 1 and op[0] == "Q" and op[1].isupper():
        op = op[1:]
    if op.endswith("Integer"):
        op = op[:-len("Integer")]
    return _KINDS.get(op, op)
