"""TFLite's comparisons, logical operators and SELECT_V2.

Float and int32 comparisons compare values. TFLite Micro compares 8-bit values after mapping
each input through (q - zero point) * 256 times its scale as a fixed-point multiplier; when the
two inputs share their quantization that map is one function, so comparing its images is
comparing the stored integers through a 256-entry table of ranks (none at all when the map
keeps every code apart). Inputs quantized differently are refused by name. SELECT_V2 copies
stored values, 8-bit or float.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import is_integer
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator, Tensor
from compiler.ir.graph import Value
from compiler.qmath.requant import multiply_by_quantized_multiplier, quantize_multiplier
from compiler.qmath.tables import codes

_COMPARISONS = {"EQUAL": "Equal", "NOT_EQUAL": "Equal", "GREATER": "Greater",
                "GREATER_EQUAL": "GreaterOrEqual", "LESS": "Less", "LESS_EQUAL": "LessOrEqual"}
_LOGICAL = {"LOGICAL_AND": "And", "LOGICAL_OR": "Or", "LOGICAL_NOT": "Not"}
_LEFT_SHIFT = 8  # comparisons.cc: kLeftShift


def comparison_images(t: Tensor) -> np.ndarray:
    """What TFLite Micro compares for each int8 code (table order: bit pattern 0..255)."""
    multiplier, shift = quantize_multiplier(np.array([float(np.float32(t.scale[0]))]))
    shifted = (codes("int8") - int(t.zero_point[0])) * (1 << _LEFT_SHIFT)
    return multiply_by_quantized_multiplier(shifted, multiplier[0], shift[0])


def _ranked(b: Builder, index: int, images: np.ndarray) -> Value:
    """The input's codes replaced by the rank of their image (order and ties kept)."""
    ranks = np.searchsorted(np.unique(images), images) - 128
    table = ranks.astype(np.int8)
    return b.add("IntLookupTable", [b.value(index), b.constant("comparison_ranks", table),
                                    b.constant("rank_scale", np.array(1.0, np.float32)),
                                    b.constant("rank_zero_point", np.array(0, np.int8))],
                 {"function": "comparison rank"})


def _operands(b: Builder, op: Operator) -> list[Value]:
    a, c = b.tensor(op.inputs[0]), b.tensor(op.inputs[1])
    if not is_integer(a):
        return [b.value(op.inputs[0]), b.value(op.inputs[1])]
    if a.dtype != "int8" or c.dtype != "int8":
        raise ModelError(f"an 8-bit {op.builtin} of {a.dtype} and {c.dtype} is not supported "
                         "(int8 only, as TFLite Micro)")
    same = (np.float32(a.scale[0]) == np.float32(c.scale[0])
            and int(a.zero_point[0]) == int(c.zero_point[0]))
    if not same:
        raise ModelError(f"its inputs {a.name} and {c.name} are quantized differently; Kiln "
                         "compares 8-bit tensors of one scale and zero point")
    images = comparison_images(a)
    order = np.argsort(codes("int8"))
    if np.all(np.diff(images[order]) > 0):  # the map keeps every code apart: compare codes
        return [b.value(op.inputs[0]), b.value(op.inputs[1])]
    return [_ranked(b, op.inputs[0], images), _ranked(b, op.inputs[1], images)]


def comparison(b: Builder, op: Operator) -> None:
    """EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL: a bool tensor."""
    y = b.add(_COMPARISONS[op.builtin], _operands(b, op),
              out=None if op.builtin == "NOT_EQUAL" else op.outputs[0])
    if op.builtin == "NOT_EQUAL":
        b.add("Not", [y], out=op.outputs[0])


def logical(b: Builder, op: Operator) -> None:
    """LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT of bool tensors."""
    b.add(_LOGICAL[op.builtin], [b.value(i) for i in op.inputs], out=op.outputs[0])


def select_v2(b: Builder, op: Operator) -> None:
    """SELECT_V2(condition, x, y): x where the condition holds, else y, broadcasting."""
    x, y = b.tensor(op.inputs[1]), b.tensor(op.inputs[2])
    if is_integer(x) and (np.float32(x.scale[0]) != np.float32(y.scale[0])
                          or int(x.zero_point[0]) != int(y.zero_point[0])):
        raise ModelError(f"its inputs {x.name} and {y.name} are quantized differently; "
                         "TFLite Micro's SELECT_V2 copies stored values of one quantization")
    b.add("Where", [b.value(i) for i in op.inputs], out=op.outputs[0])


LOGIC = {**dict.fromkeys(_COMPARISONS, comparison), **dict.fromkeys(_LOGICAL, logical),
         "SELECT_V2": select_v2}
