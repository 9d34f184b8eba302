"""Loss functions models export for evaluation: negative log-likelihood and softmax cross-entropy.

The class axis is 1; class weights and an ignored label are optional. The mean divides by the
summed weights of the counted targets (their number without weights), as ONNX defines it.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import TensorType
from compiler.ops.elementwise import FLOATS, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register

_REDUCTIONS = ("none", "sum", "mean")
_ATTRS = {"reduction": Attr("string", "mean", "none, sum or mean over the targets"),
          "ignore_index": Attr("int", None, "a label that counts for nothing")}


def _check(node, scores: TensorType, labels: TensorType, weights: TensorType | None) -> None:
    require_dtype(node, scores, FLOATS)
    require_dtype(node, labels, ("int32", "int64"), "label")
    if node.attrs["reduction"] not in _REDUCTIONS:
        fail(f"{node.op}'s reduction must be none, sum or mean, not {node.attrs['reduction']!r}")
    if scores.rank < 2 or labels.shape != scores.shape[:1] + scores.shape[2:]:
        fail(f"{node.op} needs scores (N, C, ...) and labels (N, ...), got "
             f"{list(scores.shape)} and {list(labels.shape)}")
    if weights is not None and weights.shape != (scores.shape[1],):
        fail(f"{node.op}'s weights must hold the {scores.shape[1]} classes")


def _loss_type(node, scores: TensorType, labels: TensorType) -> TensorType:
    shape = labels.shape if node.attrs["reduction"] == "none" else ()
    return TensorType(shape, scores.dtype)


def _nll_infer(node, ins, values):
    weights = ins[2] if len(ins) > 2 else None
    _check(node, ins[0], ins[1], weights)
    return [_loss_type(node, ins[0], ins[1])]


def _negative_log_likelihood(node, log_p, labels, weights, dtype) -> np.ndarray:
    classes = log_p.shape[1]
    ignored = node.attrs["ignore_index"]
    counted = np.ones(labels.shape, bool) if ignored is None else labels != ignored
    safe = np.where(counted, labels, 0).astype(np.int64)
    if np.any(safe < 0) or np.any(safe >= classes):
        raise ModelError(f"{node.op} has a label outside 0..{classes - 1}")
    picked = np.take_along_axis(log_p, safe[:, None], axis=1)[:, 0].astype(np.float64)
    weight = np.ones(labels.shape) if weights is None else weights.astype(np.float64)[safe]
    weight = np.where(counted, weight, 0.0)
    loss = -picked * weight
    reduction = node.attrs["reduction"]
    if reduction == "none":
        return loss.astype(dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(), dtype)
    total = weight.sum()
    return np.asarray(loss.sum() / total if total else 0.0, dtype)


@quiet
def _nll(node, log_p, labels, weights=None):
    return _negative_log_likelihood(node, log_p, labels, weights, log_p.dtype)


register(OpDef("NegativeLogLikelihoodLoss", "misc", _nll_infer, _nll, inputs=(2, 3), since=12,
               attrs=dict(_ATTRS), doc="minus the log-probability of each target's class"))


def _sce_infer(node, ins, values):
    weights = ins[2] if len(ins) > 2 else None
    _check(node, ins[0], ins[1], weights)
    outs = [_loss_type(node, ins[0], ins[1]), TensorType(ins[0].shape, ins[0].dtype)]
    return outs[:max(len(node.outputs), 1)]


@quiet
def _sce(node, scores, labels, weights=None):
    wide = scores.astype(np.float64)
    shifted = wide - wide.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return (_negative_log_likelihood(node, log_p, labels, weights, scores.dtype),
            log_p.astype(scores.dtype))


register(OpDef("SoftmaxCrossEntropyLoss", "misc", _sce_infer, _sce, inputs=(2, 3),
               outputs=(1, 2), since=12, attrs=dict(_ATTRS),
               doc="negative log-likelihood of the log-softmax of the scores over axis 1"))
