"""TFLite's builtins about indices and types: arg-extremes, CAST, lookups, CUMSUM, L2 pooling.

ARG_MAX and ARG_MIN compare stored values (8 bits too: quantization keeps order) and write the
first extreme's index as the output's integer type. CAST converts as C does. GATHER_ND with
constant indices becomes one Gather of flattened rows; EMBEDDING_LOOKUP is a Gather of rows by
indices that may arrive at run time. L2_POOL_2D is sqrt(mean(x^2)) over each window's taps
inside the image, float, as TFLite Micro computes it.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.frontends.tflite.activation import float_activation
from compiler.frontends.tflite.builder import Builder
from compiler.frontends.tflite.flatbuffer import Operator
from compiler.frontends.tflite.layers import pool_attributes
from compiler.frontends.tflite.maths import rescaled_sum
from compiler.ir.types import ONNX_ELEM_TYPES


def _constant(b: Builder, op: Operator, i: int, what: str) -> np.ndarray:
    """Input `i` known at load time: stored in the file, or computed from such values.

    A SHAPE or BROADCAST_ARGS before the operator computes such a value.
    """
    index = op.inputs[i] if i < len(op.inputs) else -1
    if index >= 0 and b.tensor(index).data is not None:
        return np.asarray(b.tensor(index).data)
    value = b.values.get(index) if index >= 0 else None
    if value is not None and id(value) in b.known:
        return np.asarray(b.known[id(value)])
    raise ModelError(f"its {what} must be a constant")


def arg_extreme(b: Builder, op: Operator) -> None:
    """ARG_MAX / ARG_MIN over one constant axis, as int32 or int64."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    axis = int(_constant(b, op, 1, "axis").reshape(-1)[0]) % max(len(x.shape), 1)
    if out.dtype not in ("int32", "int64"):
        raise ModelError(f"its output is {out.dtype}; TFLite writes int32 or int64 indices")
    kind = "ArgMax" if op.builtin == "ARG_MAX" else "ArgMin"
    y = b.add(kind, [b.value(op.inputs[0])], {"axis": axis, "keepdims": 0},
              out=op.outputs[0] if out.dtype == "int64" else None)
    if out.dtype == "int32":
        b.add("Cast", [y], {"to": ONNX_ELEM_TYPES["int32"]}, out=op.outputs[0])


def cast(b: Builder, op: Operator) -> None:
    """CAST between float32, int8, uint8, int32, int64 and bool (stored values, C's rules)."""
    out = b.tensor(op.outputs[0])
    if out.dtype not in ONNX_ELEM_TYPES:
        raise ModelError(f"CAST to {out.dtype} is not supported")
    b.add("Cast", [b.value(op.inputs[0])], {"to": ONNX_ELEM_TYPES[out.dtype]},
          out=op.outputs[0])


def broadcast_to(b: Builder, op: Operator) -> None:
    """BROADCAST_TO a constant shape."""
    shape = _constant(b, op, 1, "shape").astype(np.int64).reshape(-1)
    b.add("Expand", [b.value(op.inputs[0]), b.constant("shape", shape)], out=op.outputs[0])


def gather_nd(b: Builder, op: Operator) -> None:
    """GATHER_ND with constant indices: rows of the flattened leading axes, one Gather."""
    params = b.tensor(op.inputs[0])
    indices = _constant(b, op, 1, "indices").astype(np.int64)
    depth = indices.shape[-1]
    lead = params.shape[:depth]
    if depth > len(params.shape) or np.any(indices < 0) or np.any(indices >= np.array(lead)):
        raise ModelError(f"its indices do not address the leading axes {list(lead)}")
    flat = np.ravel_multi_index(tuple(np.moveaxis(indices, -1, 0)), lead)
    rows = b.add("Reshape", [b.value(op.inputs[0]), b.constant("shape", np.array(
        [int(np.prod(lead, dtype=np.int64)), *params.shape[depth:]], np.int64))])
    y = b.add("Gather", [rows, b.constant("rows", flat.reshape(-1))], {"axis": 0})
    b.add("Reshape", [y, b.constant("shape", np.array(b.tensor(op.outputs[0]).shape,
                                                       np.int64))], out=op.outputs[0])


def embedding_lookup(b: Builder, op: Operator) -> None:
    """EMBEDDING_LOOKUP(ids, params): the params rows the ids name.

    int8 rows with a float output are the hybrid form: each row dequantized by the params'
    one scale (zero point 0), as TFLite Micro's EvalHybrid does.
    """
    params, out = b.tensor(op.inputs[1]), b.tensor(op.outputs[0])
    if params.dtype not in ("float32", "int8"):
        raise ModelError(f"an EMBEDDING_LOOKUP of {params.dtype} rows is not supported")
    hybrid = params.dtype == "int8" and out.dtype == "float32"
    rows = b.add("Gather", [b.value(op.inputs[1]), b.value(op.inputs[0])], {"axis": 0},
                 out=None if hybrid else op.outputs[0])
    if hybrid:
        if not params.quantized or params.scale.size != 1:
            raise ModelError("its int8 rows need one scale (TFLite Micro's hybrid lookup)")
        b.add("DequantizeLinear", [rows, b.constant("scale", np.array(params.scale[0],
                                                                      np.float32)),
                                   b.constant("zero_point", np.array(0, np.int8))],
              out=op.outputs[0])


def cumsum(b: Builder, op: Operator) -> None:
    """CUMSUM over a constant axis, exclusive and reverse as the options say.

    8 bits run TFLite Micro's rescaled running sum.
    """
    axis = _constant(b, op, 1, "axis").astype(np.int64).reshape(())
    o = op.options
    attrs = {"exclusive": int(bool(o.Exclusive())) if o else 0,
             "reverse": int(bool(o.Reverse())) if o else 0}
    if b.tensor(op.inputs[0]).dtype == "int8":
        rescaled_sum(b, op, op.inputs[:1], {**attrs, "mode": "cumsum", "axis": int(axis)})
        return
    if b.tensor(op.inputs[0]).dtype != "float32":
        raise ModelError(f"the {b.tensor(op.inputs[0]).dtype} CUMSUM is not supported")
    b.add("CumSum", [b.value(op.inputs[0]), b.constant("axis", axis)], attrs,
          out=op.outputs[0])


def l2_pool_2d(b: Builder, op: Operator) -> None:
    """L2_POOL_2D: sqrt of the mean square over each window's taps inside the image, float."""
    x = b.tensor(op.inputs[0])
    if x.dtype != "float32":
        raise ModelError(f"the {x.dtype} L2_POOL_2D is not supported (TFLite Micro runs it on "
                         "float32 only)")
    value = b.value(op.inputs[0])
    squares = b.add("Mul", [value, value])
    mean = b.add("AveragePool", [squares], {**pool_attributes(op, x), "count_include_pad": 0})
    fused = int(op.options.FusedActivationFunction()) != 0 if op.options else False
    root = b.add("Sqrt", [mean], out=None if fused else op.outputs[0])
    if fused:
        float_activation(b, op, root, op.outputs[0])


def zeros_like(b: Builder, op: Operator) -> None:
    """ZEROS_LIKE: stored zeros of the input's shape and type (a constant)."""
    x = b.tensor(op.inputs[0])
    b.add("Identity", [b.constant("zeros", np.zeros(x.shape, x.dtype))], out=op.outputs[0])


def fill(b: Builder, op: Operator) -> None:
    """FILL(dims, value), both constants: a constant tensor."""
    dims = _constant(b, op, 0, "dims").astype(np.int64).reshape(-1)
    value = _constant(b, op, 1, "value").reshape(-1)[:1]
    out = b.tensor(op.outputs[0])
    b.add("Identity", [b.constant("filled", np.full(dims, value[0], out.dtype))],
          out=op.outputs[0])


def broadcast_args(b: Builder, op: Operator) -> None:
    """BROADCAST_ARGS of two constant shapes: the broadcast shape (a constant)."""
    shapes = [tuple(int(v) for v in _constant(b, op, i, "shape").reshape(-1)) for i in (0, 1)]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ModelError(f"the shapes {list(shapes[0])} and {list(shapes[1])} do not "
                         "broadcast") from None
    out = b.tensor(op.outputs[0])
    b.add("Identity", [b.constant("shape", np.array(shape, out.dtype))], out=op.outputs[0])


def reduce_all(b: Builder, op: Operator) -> None:
    """REDUCE_ALL of bools over constant axes: their minimum."""
    rank = len(b.tensor(op.inputs[0]).shape)
    axes = sorted({int(a) % max(rank, 1) for a in _constant(b, op, 1, "axes").reshape(-1)})
    keep = bool(op.options.KeepDims()) if op.options is not None else False
    b.add("ReduceMin", [b.value(op.inputs[0]), b.constant("axes", np.array(axes, np.int64))],
          {"keepdims": int(keep)}, out=op.outputs[0])


def dynamic_update_slice(b: Builder, op: Operator) -> None:
    """DYNAMIC_UPDATE_SLICE with a constant start: the update written over the operand there.

    The start is clamped so the update fits, as TFLite Micro clamps it. It becomes a Where
    between the update padded to the operand's shape and the operand, by a constant mask of
    the written region: stored values are copied, 8-bit or float.
    """
    operand, update = b.tensor(op.inputs[0]), b.tensor(op.inputs[1])
    start = _constant(b, op, 2, "start indices").astype(np.int64).reshape(-1)
    if len(start) != len(operand.shape) or len(update.shape) != len(operand.shape) or any(
            u > o for u, o in zip(update.shape, operand.shape)):
        raise ModelError(f"its update {list(update.shape)} does not fit its operand "
                         f"{list(operand.shape)} at {list(start)}")
    start = np.clip(start, 0, np.array(operand.shape) - np.array(update.shape))
    end = np.array(operand.shape) - start - np.array(update.shape)
    fill = np.array(0, update.dtype)
    padded = b.add("Pad", [b.value(op.inputs[1]), b.constant("pads", np.concatenate([start, end])),
                           b.constant("zero", fill)])
    mask = np.zeros(operand.shape, bool)
    mask[tuple(slice(s, s + u) for s, u in zip(start, update.shape))] = True
    b.add("Where", [b.constant("written", mask), padded, b.value(op.inputs[0])],
          out=op.outputs[0])


INDEXING = {"ARG_MAX": arg_extreme, "ARG_MIN": arg_extreme, "CAST": cast,
            "BROADCAST_TO": broadcast_to, "GATHER_ND": gather_nd,
            "EMBEDDING_LOOKUP": embedding_lookup, "CUMSUM": cumsum, "L2_POOL_2D": l2_pool_2d,
            "ZEROS_LIKE": zeros_like, "FILL": fill, "BROADCAST_ARGS": broadcast_args,
            "REDUCE_ALL": reduce_all, "DYNAMIC_UPDATE_SLICE": dynamic_update_slice}
