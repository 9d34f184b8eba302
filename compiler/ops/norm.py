"""Normalizations over channels: BatchNormalization (inference) and LRN."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType, is_float
from compiler.ops._spatial import activation_shape, from_nchw, layout_of, nchw_shape, to_nchw
from compiler.ops.registry import Attr, OpDef, fail, register


def _work_dtype(dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


# -- BatchNormalization -------------------------------------------------------------------------

_TRAINING = ("training mode (statistics of the batch, updated running statistics) is not "
             "supported: Kiln compiles inference graphs")


def _bn_infer(node, ins, values):
    if node.attrs["training_mode"] != 0:
        fail(f"training_mode={node.attrs['training_mode']}: {_TRAINING}")
    if ins[0].rank < 2:
        fail(f"input must have rank 2 or more (N, C, ...), got shape {list(ins[0].shape)}")
    shape = nchw_shape(ins[0].shape, layout_of(node))
    if not is_float(ins[0].dtype):
        fail(f"input must be a float tensor, got {ins[0].dtype}")
    names = ("scale", "B", "input_mean", "input_var")
    for name, t in zip(names, ins[1:]):
        if t.shape != (shape[1],) or not is_float(t.dtype):
            fail(f"{name} must be a float vector of the {shape[1]} channels, got {t}")
    return [TensorType(ins[0].shape, ins[0].dtype)]


def _batch_norm(node, x, scale, bias, mean, var):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    work = _work_dtype(x.dtype)
    # One multiply-add per element, as an inference runtime folds it.
    factor = scale.astype(work) / np.sqrt(var.astype(work) + work.type(node.attrs["epsilon"]))
    shift = bias.astype(work) - mean.astype(work) * factor
    axes = (-1, *([1] * (x.ndim - 2)))
    y = x.astype(work, copy=False) * factor.reshape(axes) + shift.reshape(axes)
    return from_nchw(y.astype(x.dtype, copy=False), layout)


def _bn_from_onnx(ctx, attrs, input_names, opset):
    """Opsets before 9 carry `spatial` (and files may carry `is_test`/`consumed_inputs`).

    Before opset 14, naming the mean and variance outputs is what selects training mode.
    """
    outputs = [name for name in ctx.outputs if name]
    if opset < 14 and len(outputs) > 1:
        fail(f"{len(outputs)} outputs select {_TRAINING} (at opset {opset}, only Y may be named)")
    if attrs.pop("spatial", 1) != 1:
        fail("spatial=0 (statistics per activation, not per channel) is not supported; only "
             "spatial=1 is")
    if attrs.pop("is_test", 1) != 1:
        fail(f"is_test=0 asks for {_TRAINING}")
    attrs.pop("consumed_inputs", None)  # a legacy in-place hint with no effect on the result
    if attrs.get("training_mode", 0) != 0:
        fail(f"training_mode={attrs['training_mode']}: {_TRAINING}")
    return attrs, input_names


register(OpDef("BatchNormalization", "norm", _bn_infer, _batch_norm,
               attrs={"epsilon": Attr("float", 1e-5, "added to the variance"),
                      "momentum": Attr("float", 0.9, "training only; ignored"),
                      "training_mode": Attr("int", 0, "must be 0 (inference)")},
               inputs=(5, 5), spatial=True, from_onnx=_bn_from_onnx,
               doc="per-channel normalization with stored statistics (inference mode)"))


# -- LRN ----------------------------------------------------------------------------------------

def _lrn_infer(node, ins, values):
    activation_shape(node, ins[0])
    if not is_float(ins[0].dtype):
        fail(f"input must be a float tensor, got {ins[0].dtype}")
    if node.attrs["size"] < 1:
        fail(f"size {node.attrs['size']} must be positive")
    return [TensorType(ins[0].shape, ins[0].dtype)]


def _lrn(node, x):
    layout = layout_of(node)
    x = to_nchw(x, layout)
    work = _work_dtype(x.dtype)
    size, channels = node.attrs["size"], x.shape[1]
    below, above = (size - 1) // 2, size // 2  # floor and ceil of (size - 1) / 2
    squares = np.square(x.astype(work))
    padded = np.pad(squares, [(0, 0), (below, above)] + [(0, 0)] * (x.ndim - 2))
    sums = np.zeros_like(squares)
    for offset in range(size):
        sums += padded[:, offset:offset + channels]
    alpha, beta, bias = (work.type(node.attrs[k]) for k in ("alpha", "beta", "bias"))
    y = x / (bias + alpha / work.type(size) * sums) ** beta
    return from_nchw(y.astype(x.dtype, copy=False), layout)


register(OpDef("LRN", "norm", _lrn_infer, _lrn,
               attrs={"alpha": Attr("float", 1e-4, "scale of the sum of squares"),
                      "beta": Attr("float", 0.75, "exponent"),
                      "bias": Attr("float", 1.0, "added to the scaled sum"),
                      "size": Attr("int", doc="channels summed, centred on each channel")},
               spatial=True, doc="local response normalization across channels"))
