"""What TFLite's runtimes refuse before running a model, checked on each operator at load.

TFLite's int8 specification and TFLite Micro's kernel Prepare functions
(tensorflow/lite/micro/kernels/*_common.cc) refuse parameters that Kiln's integer operators
could compute anyway, but not as any runtime would: weights with a nonzero zero point, a layer
whose output type is not its input's, a MAX_POOL_2D or CONCATENATION that would have to rescale,
a per-channel QUANTIZE; scales whose multipliers TFLite Micro would shift by amounts C leaves
undefined (rescales.py). An operator version newer than LiteRT registers may mean something Kiln
does not know. Each is refused at its operator, in one sentence.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.flatbuffer import Model, Operator, Tensor
from compiler.frontends.tflite.rescales import check_rescales
from compiler.qmath.requant import quantize_multiplier

# The newest version of each builtin Kiln reads, as LiteRT's builtin op resolver registers it
# (ai-edge-litert 2.3.0; it refuses a newer one). TFLite Micro resolves builtins without looking
# at versions.
VERSIONS = {
    "ADD": 5, "AVERAGE_POOL_2D": 3, "CONCATENATION": 7, "CONV_2D": 8, "DEPTHWISE_CONV_2D": 6,
    "DEQUANTIZE": 9, "EXPAND_DIMS": 1, "FULLY_CONNECTED": 14, "HARD_SWISH": 1, "LEAKY_RELU": 2,
    "LOGISTIC": 3, "MAXIMUM": 4, "MAX_POOL_2D": 3, "MEAN": 3, "MINIMUM": 4, "MUL": 7, "PACK": 5,
    "PAD": 6, "PADV2": 6, "QUANTIZE": 6, "RELU": 3, "RELU6": 3, "RELU_N1_TO_1": 1, "RESHAPE": 1,
    "SHAPE": 1, "SOFTMAX": 3, "SQUEEZE": 1, "STRIDED_SLICE": 4, "SUB": 5, "TANH": 3,
    "TRANSPOSE": 8,
    # Probed from ai-edge-litert's resolver (a one-operator model per version).
    "BATCH_TO_SPACE_ND": 4, "DEPTH_TO_SPACE": 2, "GATHER": 8, "MIRROR_PAD": 3, "REDUCE_MAX": 3,
    "REDUCE_MIN": 3, "RESIZE_NEAREST_NEIGHBOR": 4, "REVERSE_V2": 4, "SLICE": 8,
    "SPACE_TO_BATCH_ND": 4, "SPACE_TO_DEPTH": 2, "SPLIT": 5, "SPLIT_V": 3, "UNPACK": 6,
    "ABS": 5, "ADD_N": 1, "CEIL": 1, "COS": 2, "DIV": 2, "ELU": 1, "EXP": 2, "FLOOR": 1,
    "FLOOR_DIV": 3, "FLOOR_MOD": 2, "L2_NORMALIZATION": 2, "LOG": 2, "LOG_SOFTMAX": 2, "NEG": 1,
    "PRELU": 1, "ROUND": 1, "RSQRT": 3, "SIN": 2, "SQRT": 2, "SQUARE": 1,
    "SQUARED_DIFFERENCE": 2, "SUM": 2,
    "EQUAL": 5, "NOT_EQUAL": 4, "GREATER": 2, "GREATER_EQUAL": 3, "LESS": 3, "LESS_EQUAL": 2,
    "LOGICAL_AND": 1, "LOGICAL_OR": 1, "LOGICAL_NOT": 1, "SELECT_V2": 2,
    "ARG_MAX": 3, "ARG_MIN": 3, "BROADCAST_TO": 4, "CAST": 9, "CUMSUM": 1,
    "EMBEDDING_LOOKUP": 5, "GATHER_ND": 6, "L2_POOL_2D": 1, "TRANSPOSE_CONV": 5,
    "RESIZE_BILINEAR": 4, "BATCH_MATMUL": 4, "BROADCAST_ARGS": 1, "FILL": 5, "REDUCE_ALL": 1,
    "ZEROS_LIKE": 1, "UNIDIRECTIONAL_SEQUENCE_LSTM": 4, "DYNAMIC_UPDATE_SLICE": 6,
    "VAR_HANDLE": 1, "READ_VARIABLE": 1, "ASSIGN_VARIABLE": 1, "CALL_ONCE": 1, "SVDF": 4,
    "IF": 1, "WHILE": 1,
}

_LAYERS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")
# Builtins whose data input is not their first (SPLIT takes the axis first).
_DATA_INPUT = {"SPLIT": 1, "SELECT_V2": 1, "EMBEDDING_LOOKUP": 1, "TRANSPOSE_CONV": 2,
               "FILL": 1}
# Builtins whose output type may differ from their first input's.
_CONVERTING = ("QUANTIZE", "DEQUANTIZE", "SHAPE", "EQUAL", "NOT_EQUAL", "GREATER",
               "GREATER_EQUAL", "LESS", "LESS_EQUAL", "ARG_MAX", "ARG_MIN", "CAST",
               "EMBEDDING_LOOKUP", "READ_VARIABLE", "IF", "WHILE")
# pooling_common.cc: input and output scales of a pool may differ by this much, no more.
_POOL_SCALE_TOLERANCE = 1.0e-6
# kernel_util.cc GetQuantizedConvolutionMultipler: |in * w - bias scale| / out scale at most.
_BIAS_SCALE_TOLERANCE = 0.02


def check_version(op: Operator) -> None:
    """Refuse an operator version newer than the newest Kiln knows for its builtin."""
    newest = VERSIONS.get(op.builtin)
    if newest is not None and op.version > newest:
        raise ModelError(f"it is version {op.version} of {op.builtin}, newer than any Kiln "
                         f"reads (up to {newest}, as LiteRT), so what it computes is unknown")


def check_operator(model: Model, op: Operator) -> None:
    """TFLite Micro's Prepare checks of `op` that Kiln's operators do not make themselves."""
    if not op.inputs or op.inputs[0] < 0 or not op.outputs:
        return  # the converter names the missing tensor
    data = op.inputs[_DATA_INPUT.get(op.builtin, 0)] if len(op.inputs) > 1 else op.inputs[0]
    x, out = model.tensors[data], model.tensors[op.outputs[0]]
    if op.builtin == "QUANTIZE" and out.quantized and out.scale.size != 1:
        raise ModelError(f"its output {out.name} has {out.scale.size} scales; TFLite Micro's "
                         "QUANTIZE writes one (per-tensor) scale")
    if (op.builtin not in _CONVERTING and out.dtype != x.dtype
            and (_is_8bit(x) or _is_8bit(out))):
        raise ModelError(f"its input {x.name} is {x.dtype} but its output {out.name} is "
                         f"{out.dtype}; TFLite Micro's {op.builtin} keeps the input's type")
    if not _is_8bit(x):
        return
    if op.builtin in _LAYERS and len(op.inputs) > 1 and op.inputs[1] >= 0:
        _check_weights(model, op, x, model.tensors[op.inputs[1]], out)
    elif op.builtin in ("AVERAGE_POOL_2D", "MAX_POOL_2D") and _is_8bit(out):
        _check_same_params(op, x, out, _POOL_SCALE_TOLERANCE)
    elif op.builtin == "CONCATENATION" and _is_8bit(out):
        for index in op.inputs:
            if index >= 0:
                _check_same_params(op, model.tensors[index], out, 0.0)
    elif op.builtin == "HARD_SWISH" and _is_8bit(out):
        _check_hard_swish(x, out)
    if _is_8bit(out):
        check_rescales(model, op, x, out)


def _is_8bit(t: Tensor) -> bool:
    return t.dtype in ("int8", "uint8") and t.quantized


def _check_weights(model: Model, op: Operator, x: Tensor, w: Tensor, out: Tensor) -> None:
    """int8 symmetric weights (zero point 0); a per-tensor FC's bias at in x w scale."""
    if w.dtype != "int8" or not w.quantized:
        quantized = "quantized " if w.quantized else ""
        raise ModelError(f"its weights {w.name} are {quantized}{w.dtype}; an 8-bit {op.builtin} "
                         "takes int8 quantized weights (TFLite Micro has no hybrid kernels)")
    nonzero = np.flatnonzero(w.zero_point)
    if nonzero.size:
        raise ModelError(f"its int8 weights {w.name} have zero point "
                         f"{int(w.zero_point[nonzero[0]])}; TFLite's int8 weights are symmetric "
                         "(zero point 0), which TFLite Micro's kernels assume")
    bias_index = op.inputs[2] if len(op.inputs) > 2 else -1
    if op.builtin != "FULLY_CONNECTED" or w.scale.size != 1 or bias_index < 0 or not out.quantized:
        return
    bias = model.tensors[bias_index]
    bias_scale = float(bias.scale[0]) if bias.quantized else 0.0
    product = float(x.scale[0]) * float(w.scale[0])
    if abs(product - bias_scale) / float(out.scale[0]) > _BIAS_SCALE_TOLERANCE:
        raise ModelError(f"its bias {bias.name} has scale {bias_scale:.9g}, not input x weight "
                         f"scale {product:.9g}: TFLite Micro refuses a per-tensor "
                         "FULLY_CONNECTED whose bias is at another scale")


def _check_same_params(op: Operator, t: Tensor, out: Tensor, tolerance: float) -> None:
    """An operator that moves 8-bit values without rescaling: equal scales and zero points."""
    t_scale, out_scale = float(t.scale[0]), float(out.scale[0])
    if abs(t_scale - out_scale) > tolerance or int(t.zero_point[0]) != int(out.zero_point[0]):
        raise ModelError(f"its input {t.name} has scale {t_scale:.9g} and zero point "
                         f"{int(t.zero_point[0])} but its output {out.name} {out_scale:.9g} and "
                         f"{int(out.zero_point[0])}; TFLite Micro's 8-bit {op.builtin} does not "
                         "rescale, so they must be equal")


def _check_hard_swish(x: Tensor, out: Tensor) -> None:
    """hard_swish_common.cc: the output multiplier (input scale / 128 / output scale) is < 1."""
    hires = np.float32(1.0 / 128.0) * np.float32(x.scale[0])
    _, exponent = quantize_multiplier(float(hires / np.float32(out.scale[0])))
    if int(exponent) > 0:
        raise ModelError(f"its output scale {float(out.scale[0]):.9g} is below its input scale "
                         f"{float(x.scale[0]):.9g} / 128, which TFLite Micro's 8-bit HARD_SWISH "
                         "refuses")
