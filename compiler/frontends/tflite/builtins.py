"""Every TFLite builtin Kiln reads, by name: its converter into Kiln operators."""

from __future__ import annotations

from compiler.frontends.tflite.arrange import ARRANGE
from compiler.frontends.tflite.batch_matmul import BATCH_MATMUL
from compiler.frontends.tflite.elementwise import ELEMENTWISE
from compiler.frontends.tflite.indexing import INDEXING
from compiler.frontends.tflite.layers import LAYERS
from compiler.frontends.tflite.logic import LOGIC
from compiler.frontends.tflite.lstm import LSTM
from compiler.frontends.tflite.maths import MATHS
from compiler.frontends.tflite.movement import MOVEMENT
from compiler.frontends.tflite.transpose_conv import TRANSPOSE_CONV

CONVERTERS = {**LAYERS, **ELEMENTWISE, **MOVEMENT, **ARRANGE, **MATHS, **LOGIC, **INDEXING,
              **TRANSPOSE_CONV, **BATCH_MATMUL, **LSTM}
