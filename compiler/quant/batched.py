"""Running one node of a graph on many samples at once, for the quantization workbench.

Every runtime value is kept stacked: shape [N, *declared shape], sample i at index i. A value
whose declared shape starts with a batch of 1 is then also a batch of N (the same memory,
reshaped), so the operators that treat their first axis as a batch run once on all samples;
any other node runs sample by sample. Which operators may run batched is a list, not a guess
from shapes: a Softmax or a reduction over axis 0 would give the right shape and wrong values.
Convolutions sum in float32 here (the reference sums in float64), for speed.
"""

from __future__ import annotations

import threading

import numpy as np

from compiler import ops
from compiler.errors import KilnError, ModelError
from compiler.ir.graph import Node
from compiler.ops._spatial import layout_of, padded_input
from compiler.ops.conv import conv_window, convolve

# Operators that treat axis 0 as a batch whatever their attributes.
_BATCH_SAFE = {
    "Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid",
    "HardSwish", "Identity", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "BatchNormalization", "Erf", "Exp", "Sqrt", "Abs", "Neg",
}


def _batch_safe(node: Node) -> bool:
    """Whether `node` computes each sample of a batch independently of the others."""
    op, attrs = node.op, node.attrs
    rank = len(node.inputs[0].type.shape) if node.inputs and node.inputs[0] is not None else 0
    if op in _BATCH_SAFE:
        return True
    if op in ("QuantizeLinear", "DequantizeLinear"):
        scale = node.inputs[1]
        return scale.type.shape in ((), (1,)) or attrs.get("axis", 1) % max(rank, 1) != 0
    if op in ("Softmax", "LogSoftmax", "Concat", "Flatten"):
        return attrs.get("axis", 1) % max(rank, 1) != 0
    if op == "Transpose":
        perm = attrs.get("perm")
        return bool(perm) and perm[0] == 0
    if op == "Gemm":
        return not attrs.get("transA") and node.inputs[1].producer is None
    if op == "MatMul":
        return rank >= 2 and node.inputs[1].producer is None
    return False


def run_node(node: Node, arrays: list[np.ndarray | None], count: int,
             runtime: list[bool]) -> list[np.ndarray]:
    """The node's outputs, stacked, from its stacked runtime inputs and plain constants.

    `runtime[i]` says whether input i is stacked (computed per sample) or a constant.
    """
    if not any(runtime):  # constants only (a weight's DequantizeLinear): once, then shared
        return _run(node, arrays)
    batched = all(v.type.shape[:1] == (1,) for v, r in zip(node.inputs, runtime) if r) and \
        all(v.type.shape[:1] == (1,) for v in node.outputs) and _batch_safe(node)
    if batched:
        flat = [a.reshape(count, *a.shape[2:]) if r else a for a, r in zip(arrays, runtime)]
        results = _run(node, flat)
        return [r.reshape(count, *v.type.shape) for r, v in zip(results, node.outputs)]
    per_sample = [_run(node, [a[i] if r else a for a, r in zip(arrays, runtime)])
                  for i in range(count)]
    return [np.stack([outs[k] for outs in per_sample]) for k in range(len(node.outputs))]


def fake_quantize(x: np.ndarray, quantize: Node, dequantize: Node) -> np.ndarray | None:
    """DequantizeLinear(QuantizeLinear(x)) in a few float32 passes, or None.

    None when the pair is not the plain per-tensor, round-half-to-even kind (then both nodes
    run as they are).

    saturate(rint(x / s) + z) - z equals clip(rint(x / s), qmin - z, qmax - z): small integers,
    exact in float32; the product with s is the one DequantizeLinear makes.
    """
    scale, zero = quantize.inputs[1], quantize.inputs[2] if len(quantize.inputs) > 2 else None
    if (x.dtype != np.float32 or scale.type.shape not in ((), (1,)) or zero is None
            or quantize.attrs.get("precision") or quantize.attrs.get("requant") == "tflite"
            or dequantize.inputs[1] is not scale and not _same(dequantize.inputs[1], scale)
            or len(dequantize.inputs) < 3 or not _same(dequantize.inputs[2], zero)
            or scale.data.dtype != np.float32 or zero.data.dtype.name not in ("int8", "uint8")
            or dequantize.attrs.get("output_dtype")):
        return None
    s = np.float32(scale.data.reshape(-1)[0])
    z = float(zero.data.reshape(-1)[0])
    info = np.iinfo(zero.data.dtype)
    with np.errstate(all="ignore"):
        t = np.divide(x, s, dtype=np.float32)
        np.rint(t, out=t)
        np.fmax(t, info.min - z, out=t)  # fmax and fmin take NaN to the low end, as
        np.fmin(t, info.max - z, out=t)  # QuantizeLinear saturates it
        t *= s
    return t


def _same(a, b) -> bool:
    return a is b or (hasattr(a, "data") and hasattr(b, "data") and a.data.dtype == b.data.dtype
                      and np.array_equal(a.data, b.data))


def _conv2d(node: Node, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
            ) -> np.ndarray | None:
    """A plain NCHW 2-D convolution in float32 with the patches gathered channels-last.

    Each patch row is then kh * kw runs of C contiguous values rather than C * kh runs of kw:
    the one big copy of im2col reads memory in order. None for other convolutions.
    """
    if (x.ndim != 4 or node.attrs.get("group", 1) != 1 or node.attrs.get("activation")
            or layout_of(node) != "NCHW"):
        return None
    win = conv_window(node, x.shape, w.shape)
    n, m = x.shape[0], w.shape[0]
    nhwc = np.ascontiguousarray(padded_input(x, win, 0).transpose(0, 2, 3, 1))
    view = np.lib.stride_tricks.sliding_window_view(nhwc, win.extent, axis=(1, 2))
    (sh, sw), (dh, dw) = win.strides, win.dilations
    view = view[:, ::sh, ::sw, :, ::dh, ::dw].transpose(0, 1, 2, 4, 5, 3)  # [N,H',W',kh,kw,C]
    cols = _scratch(view.shape)
    np.copyto(cols, view)  # into memory already mapped: no page faults for a fresh 50 MB
    cols = cols.reshape(n * win.out[0] * win.out[1], -1)
    kernels = w.transpose(2, 3, 1, 0).reshape(cols.shape[1], m)
    y = cols @ kernels
    if b is not None:
        y += b
    return y.reshape(n, *win.out, m).transpose(0, 3, 1, 2)


_SCRATCH = threading.local()


def _scratch(shape: tuple[int, ...]) -> np.ndarray:
    """A float32 buffer of `shape`, reused by later convolutions of this thread."""
    size = int(np.prod(shape))
    held = getattr(_SCRATCH, "buffer", None)
    if held is None or held.size < size:
        held = _SCRATCH.buffer = np.empty(size, np.float32)
    return held[:size].reshape(shape)


def _run(node: Node, arrays: list) -> list[np.ndarray]:
    try:
        if node.op == "Conv" and arrays[0].dtype == np.float32:
            fast = _conv2d(node, *arrays)
            return [fast if fast is not None else convolve(node, *arrays, work=np.float32)]
        return ops.lookup(node.op).run(node, arrays)
    except KilnError as exc:
        raise ModelError(str(exc), node=f"{node.name} ({node.op})") from None
