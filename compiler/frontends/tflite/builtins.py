"""Every TFLite builtin Kiln reads, by name: its converter into Kiln operators, and its types."""

from __future__ import annotations

from compiler.frontends.tflite.arrange import ARRANGE
from compiler.frontends.tflite.batch_matmul import BATCH_MATMUL
from compiler.frontends.tflite.control import CONTROL
from compiler.frontends.tflite.elementwise import ELEMENTWISE
from compiler.frontends.tflite.indexing import INDEXING
from compiler.frontends.tflite.layers import LAYERS
from compiler.frontends.tflite.logic import LOGIC
from compiler.frontends.tflite.lstm import LSTM
from compiler.frontends.tflite.maths import MATHS
from compiler.frontends.tflite.movement import MOVEMENT
from compiler.frontends.tflite.svdf import SVDF
from compiler.frontends.tflite.transpose_conv import TRANSPOSE_CONV
from compiler.frontends.tflite.variables import VARIABLES

CONVERTERS = {**LAYERS, **ELEMENTWISE, **MOVEMENT, **ARRANGE, **MATHS, **LOGIC, **INDEXING,
              **TRANSPOSE_CONV, **BATCH_MATMUL, **LSTM, **VARIABLES, **SVDF,
              **CONTROL}

# The element types each builtin is read for: float32 and int8 unless listed here (the
# generated cases in tests/tflite check each).
FLOAT_ONLY = frozenset("""
    CEIL COS EXP FLOOR FLOOR_DIV FLOOR_MOD L2_POOL_2D LOG
    NEG ROUND SIN SQRT SQUARE
""".split())
BOOL_ONLY = frozenset(("LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR", "REDUCE_ALL"))
CONVERTING = {"DEQUANTIZE": ("int8",), "CAST": ("float32", "int8", "int32", "bool")}

# Builtins TFLite Micro registers that Kiln does not read, and why.
UNREAD: dict[str, str] = {}


def element_types(builtin: str) -> tuple[str, ...]:
    """The element types Kiln reads `builtin` for."""
    if builtin in CONVERTING:
        return CONVERTING[builtin]
    if builtin in BOOL_ONLY:
        return ("bool",)
    return ("float32",) if builtin in FLOAT_ONLY else ("float32", "int8")
