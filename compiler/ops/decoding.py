"""Operators of autoregressive sequence models: rotary embedding, causal conv, linear attention.

The stateful ones take the state of the previous step as an input and give the next one as an
output, so a compiled model keeps it wherever its caller wants (in a streaming bundle, the
persistent region).
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops.elementwise import FLOATS, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register

# -- RotaryEmbedding -----------------------------------------------------------------------------


def _infer_rotary(node, ins, values):
    x = ins[0]
    require_dtype(node, x, FLOATS)
    if x.rank == 3 and not node.attrs["num_heads"]:
        fail("RotaryEmbedding on a 3-D input needs num_heads")
    if x.rank not in (3, 4):
        fail(f"RotaryEmbedding needs a 3-D or 4-D input, got rank {x.rank}")
    return [TensorType(x.shape, x.dtype)]


@quiet
def _rotary(node, x, cos, sin, positions=None):
    shape = x.shape
    # Work on (batch, sequence, heads, head size).
    work = x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(
        shape[0], shape[1], node.attrs["num_heads"], -1)
    dim = node.attrs["rotary_embedding_dim"] or work.shape[3]
    if positions is not None:
        cos, sin = cos[positions], sin[positions]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    turned = work[..., :dim]
    if node.attrs["interleaved"]:
        first, second = turned[..., 0::2], turned[..., 1::2]
    else:
        first, second = turned[..., :dim // 2], turned[..., dim // 2:]
    real, imaginary = cos * first - sin * second, sin * first + cos * second
    if node.attrs["interleaved"]:
        turned = np.stack([real, imaginary], axis=-1).reshape(turned.shape)
    else:
        turned = np.concatenate([real, imaginary], axis=-1)
    out = np.concatenate([turned, work[..., dim:]], axis=-1).astype(x.dtype)
    return out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(shape)


register(OpDef("RotaryEmbedding", "misc", _infer_rotary, _rotary, inputs=(3, 4), since=23,
               attrs={"interleaved": Attr("int", 0, "1: pairs are neighbours, 0: halves"),
                      "num_heads": Attr("int", 0, "heads of a 3-D input"),
                      "rotary_embedding_dim": Attr("int", 0, "leading features rotated "
                                                             "(0: all)")},
               doc="rotary position embedding: feature pairs turned by position angles"))


# -- CausalConvWithState -------------------------------------------------------------------------

def _infer_causal_conv(node, ins, values):
    x, w = ins[:2]
    require_dtype(node, x, FLOATS)
    if node.attrs["activation"] not in ("none", "silu", "swish"):
        fail(f"CausalConvWithState's activation must be none, silu or swish, not "
             f"{node.attrs['activation']!r}")
    if x.rank != 3 or w.rank != 3 or w.shape[:2] != (x.shape[1], 1) or w.shape[2] < 1:
        fail(f"CausalConvWithState needs input (N, C, L) and weight (C, 1, k), got "
             f"{list(x.shape)} and {list(w.shape)}")
    state = (x.shape[0], x.shape[1], w.shape[2] - 1)
    return [TensorType(x.shape, x.dtype), TensorType(state, x.dtype)]


@quiet
def _causal_conv(node, x, w, bias=None, past=None):
    n, c, length = x.shape
    k = w.shape[2]
    if past is None:
        past = np.zeros((n, c, k - 1), x.dtype)
    padded = np.concatenate([past, x], axis=2).astype(np.float64)
    out = np.zeros((n, c, length))
    for j in range(k):
        out += w[None, :, 0, j, None] * padded[:, :, j:j + length]
    if bias is not None:
        out += bias[None, :, None]
    if node.attrs["activation"] in ("silu", "swish"):
        out = out / (1 + np.exp(-out))
    return out.astype(x.dtype), padded[:, :, padded.shape[2] - (k - 1):].astype(x.dtype)


register(OpDef("CausalConvWithState", "conv", _infer_causal_conv, _causal_conv, inputs=(2, 4),
               outputs=(1, 2), since=27,
               attrs={"activation": Attr("string", "none", "none, silu or swish")},
               doc="depthwise causal 1-D convolution carrying its last k-1 inputs as state"))


# -- LinearAttention -----------------------------------------------------------------------------

_RULES = ("linear", "gated", "delta", "gated_delta")


def _heads(node, q: TensorType, k: TensorType, v: TensorType) -> tuple[int, int, int, int]:
    hq, hkv = node.attrs["q_num_heads"], node.attrs["kv_num_heads"]
    if hq < 1 or hkv < 1 or hq % hkv or q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
        fail("LinearAttention needs q_num_heads a multiple of kv_num_heads, both dividing the "
             "packed feature sizes")
    return hq, hkv, q.shape[2] // hq, v.shape[2] // hkv


def _infer_linear_attention(node, ins, values):
    q, k, v = ins[:3]
    for t in (q, k, v):
        require_dtype(node, t, FLOATS)
        if t.rank != 3:
            fail(f"LinearAttention needs 3-D packed inputs (B, T, H*D), got {list(t.shape)}")
    if node.attrs["update_rule"] not in _RULES:
        fail(f"LinearAttention's update_rule must be one of {', '.join(_RULES)}")
    hq, hkv, dk, dv = _heads(node, q, k, v)
    rule = node.attrs["update_rule"]
    present = (ins + [None] * 6)
    if "gated" in rule and present[4] is None:
        fail(f"LinearAttention's {rule} rule needs the decay input")
    if "delta" in rule and present[5] is None:
        fail(f"LinearAttention's {rule} rule needs the beta input")
    return [TensorType((q.shape[0], q.shape[1], hq * dv), q.dtype),
            TensorType((q.shape[0], hkv, dk, dv), q.dtype)]


@quiet
def _linear_attention(node, q, k, v, past=None, decay=None, beta=None):
    batch, steps = q.shape[:2]
    hq, hkv = node.attrs["q_num_heads"], node.attrs["kv_num_heads"]
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    scale = node.attrs["scale"] or 1 / np.sqrt(dk)
    rule = node.attrs["update_rule"]
    q4 = q.reshape(batch, steps, hq, dk).astype(np.float64)
    k4 = k.reshape(batch, steps, hkv, dk).astype(np.float64)
    v4 = v.reshape(batch, steps, hkv, dv).astype(np.float64)
    state = np.zeros((batch, hkv, dk, dv)) if past is None else past.astype(np.float64)
    if decay is not None:  # per key feature (.., H*dk) or per head (.., H): rows of S scale
        gate = np.exp(decay.astype(np.float64)).reshape(batch, steps, hkv, -1)
    if beta is not None:
        rate = np.broadcast_to(beta.astype(np.float64).reshape(batch, steps, -1),
                               (batch, steps, hkv))
    out = np.zeros((batch, steps, hq, dv))
    group = hq // hkv
    for t in range(steps):
        decayed = state * gate[:, t, :, :, None] if "gated" in rule else state
        outer_v = v4[:, t]
        if "delta" in rule:  # correct what the decayed state already recalls for this key
            recalled = np.einsum("bhkv,bhk->bhv", decayed, k4[:, t])
            outer_v = rate[:, t, :, None] * (v4[:, t] - recalled)
        state = decayed + k4[:, t, :, :, None] * outer_v[:, :, None, :]
        shared = np.repeat(state, group, axis=1)
        out[:, t] = scale * np.einsum("bhk,bhkv->bhv", q4[:, t], shared)
    return out.reshape(batch, steps, hq * dv).astype(q.dtype), state.astype(q.dtype)


register(OpDef("LinearAttention", "matmul", _infer_linear_attention, _linear_attention,
               inputs=(3, 6), outputs=(1, 2), since=27, attrs={
                   "chunk_size": Attr("int", 64, "a speed hint of chunked prefill (no effect "
                                                 "on results)"),
                   "kv_num_heads": Attr("int", 0, "key and value heads"),
                   "q_num_heads": Attr("int", 0, "query heads"),
                   "scale": Attr("float", 0.0, "output factor (0: 1 / sqrt(key size))"),
                   "update_rule": Attr("string", "gated_delta", "linear, gated, delta or "
                                                                "gated_delta")},
               doc="recurrent linear attention (linear, gated, delta or gated delta state)"))
