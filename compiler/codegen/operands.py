"""Which inputs of a node its kernel reads as tensors, and which it needs at compile time.

A kernel reads its operands (the data) through pointers, from the arena when they are computed
at run time and from the weights when they are constants. Its parameters (scales, zero points,
weights, 8-bit biases) are compiled into its code or arranged into weights of its own, so they
must be constants: ONNX lets a graph input feed them, and the reference interpreter runs such a
graph, but no kernel of it can be compiled.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node

_BINARY = ("QLinearAdd", "QLinearSub", "QLinearMul")
# Operand slots by operator; any other operator's operand is slot 0 (QLinearConcat's are every
# third slot from 2, after its output's scale and zero point).
_OPERANDS = {**{op: (0, 3) for op in _BINARY}, "MatMulInteger": (0, 1), "IntDiv": (0, 1),
             "IntSquaredDifference": (0, 1)}

_UNARY_PARAMETERS = {1: "input scale", 2: "input zero point", 3: "output scale",
                     4: "output zero point"}
_BINARY_PARAMETERS = {1: "A scale", 2: "A zero point", 4: "B scale", 5: "B zero point",
                      6: "output scale", 7: "output zero point"}
_QUANTIZE_PARAMETERS = {1: "scale", 2: "zero point"}
# Slot -> what the input is, for every input a kernel needs at compile time.
COMPILE_TIME: dict[str, dict[int, str]] = {
    # Float layers whose kernels read their weights re-arranged (a bias is read as it is).
    "Conv": {1: "weights"},
    "FullyConnected": {1: "weights"},
    "QLinearConv": {1: "input scale", 2: "input zero point", 3: "weights", 4: "weight scale",
                    5: "weight zero point", 6: "output scale", 7: "output zero point",
                    8: "bias"},
    "QLinearMatMul": {**_BINARY_PARAMETERS, 3: "weights B"},
    "QGemm": {1: "A scale", 2: "A zero point", 3: "weights B", 4: "B scale",
              5: "B zero point", 6: "bias", 7: "output scale", 8: "output zero point"},
    **{op: _BINARY_PARAMETERS for op in _BINARY},
    **{op: _UNARY_PARAMETERS for op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax",
                                        "QLinearGlobalAveragePool", "QLinearAveragePool")},
    "IntLookupTable": {1: "table", 2: "output scale", 3: "output zero point"},
    "QuantizeLinear": _QUANTIZE_PARAMETERS,
    "DequantizeLinear": _QUANTIZE_PARAMETERS,
    "ConvInteger": {1: "weights", 2: "input zero point", 3: "weight zero point"},
    "MatMulInteger": {2: "A zero point", 3: "B zero point"},
    "IntLSTMStep": {1: "input weights", 2: "recurrent weights", 3: "bias"},
    "IntSVDF": {1: "feature weights", 2: "time weights", 3: "bias"},
}


def operand_slots(node: Node) -> tuple[int, ...]:
    """The input slots `node`'s kernel reads as tensors."""
    if node.op == "QLinearConcat":
        return tuple(range(2, len(node.inputs), 3))
    return _OPERANDS.get(node.op, (0,))


def constant_operands(node: Node) -> dict[int, np.ndarray]:
    """The operands of `node` known at compile time, by slot: weights read as they are."""
    return {i: np.asarray(node.inputs[i].data) for i in operand_slots(node)
            if i < len(node.inputs) and isinstance(node.inputs[i], Constant)}


def refuse_runtime_parameters(node: Node) -> None:
    """Refuse a node whose kernel needs an input at compile time that is computed at run time."""
    if node.op == "QLinearConcat":
        needed = {0: "output scale", 1: "output zero point"}
        for i in range(3, len(node.inputs)):
            kind = ("", "scale", "zero point")[(i - 2) % 3]
            if kind:
                needed[i] = f"input {(i - 2) // 3}'s {kind}"
    else:
        needed = COMPILE_TIME.get(node.op, {})
    for slot, what in needed.items():
        value = node.inputs[slot] if slot < len(node.inputs) else None
        if value is not None and not isinstance(value, Constant):
            raise KilnError(f"cannot generate {node.op} {node.name}: input {slot} "
                            f"({value.name}), its {what}, is computed at run time, but its "
                            "kernel needs it at compile time")
