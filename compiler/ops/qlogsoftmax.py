"""IntLogSoftmax (Kiln only): TFLite Micro's 8-bit LOG_SOFTMAX over the last axis.

Its arithmetic is compiler.qmath.tflite_log_softmax's; the attributes are the input scale's
fixed-point parameters (PreprocessLogSoftmaxScalingExp, CalculateInputRadius).
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath import tflite_log_softmax as lsm

PARAMS = ("multiplier", "shift", "diff_min", "reverse_multiplier", "reverse_shift")


def _infer(node, ins, values):
    x = ins[0]
    if x.dtype != "int8" or x.rank < 1:
        fail(f"IntLogSoftmax takes an int8 tensor of rank 1 or more, got {x}")
    return [TensorType(x.shape, "int8", QuantParams((lsm.OUTPUT_SCALE,),
                                                    (lsm.OUTPUT_ZERO_POINT,)))]


def _reference(node, x):
    p = {name: node.attrs[name] for name in PARAMS}
    distance = x.max(axis=-1, keepdims=True).astype(np.int64) - x.astype(np.int64)
    log_sum = lsm.log_of_sum(lsm.exp_terms(distance, p).sum(axis=-1, keepdims=True))
    return lsm.output_codes(distance, log_sum, p).astype(np.int8)


register(OpDef("IntLogSoftmax", "activation", _infer, _reference, inputs=(1, 1), onnx=False,
               attrs={name: Attr("int", doc=f"Kiln only: the input scale's {name}")
                      for name in PARAMS},
               doc="Kiln only: TFLite's 8-bit LOG_SOFTMAX over the last axis (gemmlowp's "
                   "exp and log, output at 16/256 and 127)"))
