"""Normalizations by statistics of the input itself (layer, RMS, group, instance, Lp, MVN).

Statistics are computed in float64 and the result cast back, so float32 results sit within a
few ulps of onnxruntime's (which stashes float32 statistics).
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops._util import normalize_axes, normalize_axis
from compiler.ops.elementwise import FLOATS, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register


def _trailing_axes(node, rank: int) -> tuple[int, ...]:
    return tuple(range(normalize_axis(node.attrs["axis"], rank), rank))


def _infer_layer_norm(node, ins, values):
    x = ins[0]
    require_dtype(node, x, FLOATS)
    axes = _trailing_axes(node, x.rank)
    normalized = x.shape[axes[0]:]
    for name, t in zip(("Scale", "B"), ins[1:]):
        if t is not None and np.broadcast_shapes(t.shape, normalized) != normalized:
            fail(f"{node.op}'s {name} {list(t.shape)} does not broadcast to {list(normalized)}")
    stats = x.shape[:axes[0]] + (1,) * len(axes)
    outs = [TensorType(x.shape, x.dtype)]
    if node.op == "LayerNormalization":
        outs += [TensorType(stats, "float32"), TensorType(stats, "float32")]
    return outs[:max(len(node.outputs), 1)]


@quiet
def _layer_norm(node, x, scale, bias=None):
    axes = _trailing_axes(node, x.ndim)
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((wide - mean) ** 2).mean(axis=axes, keepdims=True) + node.attrs["epsilon"])
    y = (wide - mean) * inv * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32)


@quiet
def _rms_norm(node, x, scale):
    axes = _trailing_axes(node, x.ndim)
    wide = x.astype(np.float64)
    rms = np.sqrt((wide * wide).mean(axis=axes, keepdims=True) + node.attrs["epsilon"])
    return (wide / rms * scale).astype(x.dtype)


_STAT_ATTRS = {"axis": Attr("int", -1, "the first normalized axis (it and all later ones)"),
               "epsilon": Attr("float", 1e-5, "added to the variance"),
               "stash_type": Attr("int", 1, "element type of the statistics (Kiln: float64)")}
register(OpDef("LayerNormalization", "norm", _infer_layer_norm, _layer_norm, inputs=(2, 3),
               outputs=(1, 3), since=17, attrs=dict(_STAT_ATTRS),
               doc="(x - mean) / sqrt(var + epsilon) * Scale + B over the trailing axes"))
register(OpDef("RMSNormalization", "norm", _infer_layer_norm, _rms_norm, inputs=(2, 2),
               since=23, attrs=dict(_STAT_ATTRS),
               doc="x / sqrt(mean(x^2) + epsilon) * scale over the trailing axes"))


def _channels(node, x: TensorType) -> int:
    require_dtype(node, x, FLOATS)
    if x.rank < 2:
        fail(f"{node.op} needs an (N, C, ...) input, got shape {list(x.shape)}")
    return x.shape[1]


def _infer_instance_norm(node, ins, values):
    c = _channels(node, ins[0])
    for name, t in zip(("scale", "B"), ins[1:]):
        if t.shape != (c,):
            fail(f"InstanceNormalization's {name} must hold the {c} channels, got {list(t.shape)}")
    return [TensorType(ins[0].shape, ins[0].dtype)]


def _standardized(x: np.ndarray, axes, epsilon: float) -> np.ndarray:
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    return (wide - mean) / np.sqrt(((wide - mean) ** 2).mean(axis=axes, keepdims=True) + epsilon)


def _per_channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.astype(np.float64).reshape((-1,) + (1,) * (rank - 2))


@quiet
def _instance_norm(node, x, scale, bias):
    y = _standardized(x, tuple(range(2, x.ndim)), node.attrs["epsilon"])
    return (y * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim)).astype(x.dtype)


register(OpDef("InstanceNormalization", "norm", _infer_instance_norm, _instance_norm,
               inputs=(3, 3), since=6, attrs={"epsilon": Attr("float", 1e-5, "added to the "
                                                                             "variance")},
               doc="each channel of each item standardized, then scaled and shifted"))


def _infer_group_norm(node, ins, values):
    c = _channels(node, ins[0])
    groups = node.attrs["num_groups"]
    if groups < 1 or c % groups:
        fail(f"GroupNormalization's {groups} groups do not divide {c} channels")
    want = groups if node.attrs["scale_per_group"] else c
    for name, t in zip(("scale", "bias"), ins[1:]):
        if t.shape != (want,):
            fail(f"GroupNormalization's {name} must hold {want} values, got {list(t.shape)}")
    return [TensorType(ins[0].shape, ins[0].dtype)]


@quiet
def _group_norm(node, x, scale, bias):
    n, c = x.shape[:2]
    groups = node.attrs["num_groups"]
    grouped = x.reshape((n, groups, -1))
    y = _standardized(grouped, (2,), node.attrs["epsilon"]).reshape(x.shape)
    if node.attrs["scale_per_group"]:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    return (y * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim)).astype(x.dtype)


def _group_norm_from_onnx(ctx, attrs, names, opset):
    """Before opset 21 scale and bias held one value per group, later one per channel."""
    return {**attrs, "scale_per_group": int(opset < 21)}, names


register(OpDef("GroupNormalization", "norm", _infer_group_norm, _group_norm, inputs=(3, 3),
               since=18, from_onnx=_group_norm_from_onnx, attrs={
                   "epsilon": Attr("float", 1e-5, "added to the variance"),
                   "num_groups": Attr("int", doc="channel groups sharing statistics"),
                   "stash_type": Attr("int", 1, "element type of the statistics (Kiln: "
                                                "float64)"),
                   "scale_per_group": Attr("int", 0, "Kiln only: 1 when scale and bias hold "
                                                     "one value per group (opsets 18-20)",
                                           onnx=False)},
               doc="channels standardized in groups, then scaled and shifted per channel"))


def _infer_mvn(node, ins, values):
    require_dtype(node, ins[0], FLOATS)
    normalize_axes(node.attrs["axes"], ins[0].rank)
    return [TensorType(ins[0].shape, ins[0].dtype)]


@quiet
def _mvn(node, x):
    axes = normalize_axes(node.attrs["axes"], x.ndim)
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    std = np.sqrt(((wide - mean) ** 2).mean(axis=axes, keepdims=True))
    return ((wide - mean) / (std + 1e-9)).astype(x.dtype)


register(OpDef("MeanVarianceNormalization", "norm", _infer_mvn, _mvn, since=9,
               attrs={"axes": Attr("ints", (0, 2, 3), "the axes the statistics cover")},
               doc="(x - mean) / standard deviation over axes"))


def _infer_lp_norm(node, ins, values):
    require_dtype(node, ins[0], FLOATS)
    normalize_axis(node.attrs["axis"], ins[0].rank)
    if node.attrs["p"] not in (1, 2):
        fail(f"LpNormalization's p must be 1 or 2, got {node.attrs['p']}")
    return [TensorType(ins[0].shape, ins[0].dtype)]


@quiet
def _lp_norm(node, x):
    axis = normalize_axis(node.attrs["axis"], x.ndim)
    wide = x.astype(np.float64)
    if node.attrs["p"] == 1:
        norm = np.abs(wide).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt((wide * wide).sum(axis=axis, keepdims=True))
    return np.where(norm == 0, 0, wide / np.where(norm == 0, 1, norm)).astype(x.dtype)


register(OpDef("LpNormalization", "norm", _infer_lp_norm, _lp_norm, attrs={
    "axis": Attr("int", -1, "the axis normalized"),
    "p": Attr("int", 2, "1 or 2: which norm")}, doc="x divided by its L1 or L2 norm along an axis"))
