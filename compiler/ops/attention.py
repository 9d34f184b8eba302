"""Attention (ONNX opsets 23-25): scaled dot-product attention with masks, caches and heads.

Scores are (Q * sqrt(scale)) (K * sqrt(scale))^T, soft-capped, plus a bias that collects every
mask: the attention mask (bool: allowed or not; float: added), the causal frontier (query i sees
key j when j <= i + offset, offset being the keys before the query block), the sliding window
and the padding given by nonpad_kv_seqlen. A query row that no key may attend gives zeros, not
NaN. Grouped-query attention repeats each key and value head for its group of query heads.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import DTYPE_OF_ONNX, TensorType
from compiler.ops.elementwise import FLOATS, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register

_ATTRS = {
    "is_causal": Attr("int", 0, "1: query i sees key j when j <= i + offset"),
    "kv_num_heads": Attr("int", None, "heads of K and V (3-D inputs only)"),
    "q_num_heads": Attr("int", None, "heads of Q (3-D inputs only)"),
    "qk_matmul_output_mode": Attr("int", 0, "what the fourth output holds: 0 scores, 1 soft-"
                                            "capped, 2 with the bias, 3 the probabilities"),
    "scale": Attr("float", None, "factor of Q K^T (default 1 / sqrt(head size))"),
    "softcap": Attr("float", 0.0, "softcap * tanh(scores / softcap) when positive"),
    "softmax_precision": Attr("int", None, "ONNX element type the softmax runs in (default Q's)"),
    "left_window_size": Attr("int", -1, "keys a query may see before its position (-1: all)"),
    "right_window_size": Attr("int", -1, "keys a query may see after its position (-1: all)"),
}


def _heads(node, q: TensorType, k: TensorType, v: TensorType) -> tuple[int, int, int, int]:
    """(query heads, key/value heads, head size, value head size), checked."""
    if not q.rank == k.rank == v.rank or q.rank not in (3, 4):
        fail(f"Attention needs Q, K and V all 3-D or all 4-D, got ranks {q.rank}, {k.rank}, "
             f"{v.rank}")
    if q.rank == 4:
        if node.attrs["q_num_heads"] is not None or node.attrs["kv_num_heads"] is not None:
            fail("Attention takes q_num_heads and kv_num_heads with 3-D inputs only")
        qh, kvh, size, vsize = q.shape[1], k.shape[1], q.shape[3], v.shape[3]
    else:
        qh, kvh = node.attrs["q_num_heads"] or 0, node.attrs["kv_num_heads"] or 0
        if qh < 1 or kvh < 1 or q.shape[2] % qh or k.shape[2] % kvh or v.shape[2] % kvh:
            fail("Attention on 3-D inputs needs q_num_heads and kv_num_heads dividing the "
                 "hidden sizes")
        size, vsize = q.shape[2] // qh, v.shape[2] // kvh
    if qh % kvh:
        fail(f"Attention's {qh} query heads are not a multiple of its {kvh} key/value heads")
    return qh, kvh, size, vsize


def _infer(node, ins, values):
    q, k, v = ins[:3]
    for t in (q, k, v):
        require_dtype(node, t, FLOATS)
    mask, past_key = (ins + [None] * 7)[3], (ins + [None] * 7)[4]
    qh, kvh, size, vsize = _heads(node, q, k, v)
    if mask is not None and mask.dtype not in ("bool",) + FLOATS:
        fail(f"Attention's mask must be bool or float, not {mask.dtype}")
    batch, q_len, kv_len = q.shape[0], q.shape[-2 if q.rank == 4 else 1], k.shape[-2 if k.rank
                                                                                  == 4 else 1]
    past = past_key.shape[2] if past_key is not None else 0
    total = past + kv_len
    y = (batch, qh, q_len, vsize) if q.rank == 4 else (batch, q_len, qh * vsize)
    return [TensorType(y, q.dtype), TensorType((batch, kvh, total, size), q.dtype),
            TensorType((batch, kvh, total, vsize), q.dtype),
            TensorType((batch, qh, q_len, total), q.dtype)][:max(len(node.outputs), 1)]


def _split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _frontier(q_len: int, kv_len: int, offset) -> tuple[np.ndarray, np.ndarray]:
    """(query position minus key position, whether the offset is per batch) on (.., q, kv)."""
    offset = np.asarray(offset).reshape(-1, 1, 1) if np.ndim(offset) else int(offset)
    return np.arange(q_len).reshape(-1, 1) + offset - np.arange(kv_len), np.ndim(offset) > 0


def _as_bias(allowed: np.ndarray, per_batch: bool, dtype) -> np.ndarray:
    bias = np.where(allowed, dtype.type(0), dtype.type(-np.inf))
    return bias.reshape(bias.shape[0], 1, *bias.shape[1:]) if per_batch else bias


def _bias(node, dtype, q_len: int, kv_len: int, batch: int, mask, past: int, nonpad):
    bias = np.zeros((q_len, kv_len), dtype)
    if mask is not None:
        missing = kv_len - mask.shape[-1]  # a shorter mask leaves the last keys out
        if missing > 0:
            fill = False if mask.dtype == np.bool_ else -np.inf
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, missing)], constant_values=fill)
        if mask.dtype == np.bool_:
            mask = np.where(mask, dtype.type(0), dtype.type(-np.inf))
        bias = bias + mask.astype(dtype)
    offset = nonpad.reshape(-1) - q_len if nonpad is not None and past == 0 else past
    distance, per_batch = _frontier(q_len, kv_len, offset)
    if node.attrs["is_causal"]:
        bias = bias + _as_bias(distance >= 0, per_batch, dtype)
    left, right = node.attrs["left_window_size"], node.attrs["right_window_size"]
    if left >= 0 or right >= 0:
        allowed = np.ones(distance.shape, bool)
        if left >= 0:
            allowed &= distance <= left
        if right >= 0:
            allowed &= -distance <= right
        bias = bias + _as_bias(allowed, per_batch, dtype)
    if nonpad is not None:
        padding = np.arange(kv_len) < nonpad.reshape(-1, 1)
        bias = bias + np.where(padding, dtype.type(0), dtype.type(-np.inf)).reshape(
            batch, 1, 1, kv_len)
    return bias


def _softmax_rows(scores: np.ndarray, empty: np.ndarray) -> np.ndarray:
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(top), 0, top))
    total = np.sum(e, axis=-1, keepdims=True)
    p = e / np.where(total == 0, 1, total)
    return np.where(empty, np.zeros((), p.dtype), p)


@quiet
def _attention(node, q, k, v, mask=None, past_key=None, past_value=None, nonpad=None):
    three_d = q.ndim == 3
    if three_d:
        q = _split_heads(q, node.attrs["q_num_heads"])
        k = _split_heads(k, node.attrs["kv_num_heads"])
        v = _split_heads(v, node.attrs["kv_num_heads"])
    scale = node.attrs["scale"]
    scale = 1 / np.sqrt(q.shape[3]) if scale is None else scale
    root = q.dtype.type(np.sqrt(scale))
    if past_key is not None:
        k, v = np.concatenate([past_key, k], axis=2), np.concatenate([past_value, v], axis=2)
    present_key, present_value = k, v
    batch, heads, q_len = q.shape[:3]
    past = past_key.shape[2] if past_key is not None else 0
    bias = _bias(node, q.dtype, q_len, k.shape[2], batch, mask, past, nonpad)
    group = heads // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scores = np.matmul(q * root, np.swapaxes(k * root, 2, 3))
    raw = scores
    cap = node.attrs["softcap"]
    if cap > 0:
        scores = cap * np.tanh(scores / cap)
    capped = scores
    scores = scores + bias
    mode = node.attrs["qk_matmul_output_mode"]
    precision = DTYPE_OF_ONNX.get(node.attrs["softmax_precision"] or 0) or q.dtype
    empty = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    probabilities = _softmax_rows(scores.astype(precision), empty).astype(q.dtype)
    y = np.matmul(probabilities, v)
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(batch, q_len, -1)
    exposed = {0: raw, 1: capped, 2: scores, 3: probabilities}.get(mode, raw)
    return y, present_key, present_value, np.broadcast_to(
        exposed, (batch, heads, q_len, k.shape[2])).astype(q.dtype)


def _infer_checked(node, ins, values):
    if node.attrs["qk_matmul_output_mode"] not in (0, 1, 2, 3):
        fail(f"Attention's qk_matmul_output_mode must be 0 to 3, got "
             f"{node.attrs['qk_matmul_output_mode']}")
    if min(node.attrs["left_window_size"], node.attrs["right_window_size"]) < -1:
        fail("Attention's window sizes must be -1 or nonnegative")
    return _infer(node, ins, values)


register(OpDef("Attention", "matmul", _infer_checked, _attention, inputs=(3, 7), outputs=(1, 4),
               since=23, attrs=_ATTRS,
               doc="softmax(Q K^T * scale + masks) V, with heads, caches and windows"))
