"""Recurrent layers: RNN, GRU and LSTM as ONNX defines them (forward, reverse, bidirectional).

Gates come packed in W (input weights), R (recurrent weights) and B (both biases): LSTM in the
order input, output, forget, cell; GRU update, reset, hidden. Each batch item runs for its own
sequence length (steps beyond it output zeros), and Y_h / Y_c hold each item's last state. The
reference steps in float64 and casts back, so float32 results sit within a few ulps of
onnxruntime's.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ops.elementwise import FLOATS, quiet, require_dtype
from compiler.ops.registry import Attr, OpDef, fail, register

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"),
                        "LSTM": ("Sigmoid", "Tanh", "Tanh")}
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


# name -> (function of x, alpha, beta; default alpha; default beta). None: takes neither.
_ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x < 0, a * x, x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x < 0, a * np.expm1(np.minimum(x, 0)), x), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))), None, None),
}


def _activations(node) -> list:
    """One callable per activation slot and direction, alphas and betas consumed in order."""
    names = list(node.attrs["activations"] or ())
    per_direction = _DEFAULT_ACTIVATIONS[node.op]
    directions = _DIRECTIONS.get(node.attrs["direction"], 1)
    if not names:
        names = list(per_direction) * directions
    if len(names) != len(per_direction) * directions:
        fail(f"{node.op} needs {len(per_direction) * directions} activations, got {len(names)}")
    alphas = list(node.attrs["activation_alpha"] or ())
    betas = list(node.attrs["activation_beta"] or ())
    out = []
    for name in names:
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            fail(f"{node.op} activation {name!r} is not one ONNX defines")
        fn, alpha, beta = entry
        a = alphas.pop(0) if alpha is not None and alphas else alpha
        b = betas.pop(0) if beta is not None and betas else beta
        out.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    return out


def _infer(node, ins, values):
    x, w, r = ins[:3]
    require_dtype(node, x, FLOATS)
    if node.attrs["direction"] not in _DIRECTIONS:
        fail(f"{node.op}'s direction must be forward, reverse or bidirectional")
    _activations(node)
    dirs = _DIRECTIONS[node.attrs["direction"]]
    hidden = node.attrs["hidden_size"] or (r.shape[-1] if r.rank == 3 else 0)
    gates = _GATES[node.op]
    if x.rank != 3 or w.shape != (dirs, gates * hidden, x.shape[2]) or \
            r.shape != (dirs, gates * hidden, hidden):
        fail(f"{node.op} needs X of rank 3, W {[dirs, gates * hidden, 'input']} and R "
             f"{[dirs, gates * hidden, hidden]}, got {list(w.shape)} and {list(r.shape)}")
    batch_first = node.attrs["layout"] == 1
    seq, batch = (x.shape[1], x.shape[0]) if batch_first else x.shape[:2]
    y = (batch, seq, dirs, hidden) if batch_first else (seq, dirs, batch, hidden)
    state = (batch, dirs, hidden) if batch_first else (dirs, batch, hidden)
    outs = [TensorType(y, x.dtype)] + [TensorType(state, x.dtype)] * (2 if node.op == "LSTM"
                                                                      else 1)
    return outs[:max(len(node.outputs), 1)]


def _step(node, fns, x_t, h, c, w, r, b, p):
    """One time step of one direction: the new hidden state and (LSTM) cell state."""
    clip = node.attrs["clip"]

    def act(i, v):
        return fns[i](np.clip(v, -clip, clip) if clip is not None else v)

    hidden = h.shape[-1]
    wb, rb = b[:b.size // 2], b[b.size // 2:]
    xw = x_t @ w.T + wb
    if node.op == "RNN":
        return act(0, xw + h @ r.T + rb), None
    if node.op == "GRU":
        hr = h @ r.T + rb
        z = act(0, xw[:, :hidden] + hr[:, :hidden])
        reset = act(0, xw[:, hidden:2 * hidden] + hr[:, hidden:2 * hidden])
        rh, rbh = r[2 * hidden:], rb[2 * hidden:]
        if node.attrs["linear_before_reset"]:
            cand = act(1, xw[:, 2 * hidden:] + reset * (h @ rh.T + rbh))
        else:
            cand = act(1, xw[:, 2 * hidden:] + (reset * h) @ rh.T + rbh)
        return (1 - z) * cand + z * h, None
    gates = xw + h @ r.T + rb
    pi, po, pf = p[:hidden], p[hidden:2 * hidden], p[2 * hidden:]
    i = act(0, gates[:, :hidden] + pi * c)
    f = act(0, gates[:, 2 * hidden:3 * hidden] + pf * c)
    if node.attrs["input_forget"]:
        f = 1 - i
    c_new = f * c + i * act(1, gates[:, 3 * hidden:])
    o = act(0, gates[:, hidden:2 * hidden] + po * c_new)
    return o * act(2, c_new), c_new


@quiet
def _recurrent(node, x, w, r, b=None, lengths=None, h0=None, c0=None, p=None):
    batch_first = node.attrs["layout"] == 1
    if batch_first:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    seq, batch = x.shape[:2]
    dirs, hidden = r.shape[0], r.shape[2]
    gates = _GATES[node.op]
    x64 = x.astype(np.float64)
    b = np.zeros((dirs, 2 * gates * hidden)) if b is None else b.astype(np.float64)
    p = np.zeros((dirs, 3 * hidden)) if p is None else p.astype(np.float64)
    lengths = np.full(batch, seq) if lengths is None else lengths.astype(np.int64)
    fns = _activations(node)
    per = len(_DEFAULT_ACTIVATIONS[node.op])
    y = np.zeros((seq, dirs, batch, hidden))
    y_h = np.zeros((dirs, batch, hidden))
    y_c = np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        reverse = node.attrs["direction"] == "reverse" or d == 1
        h = np.zeros((batch, hidden)) if h0 is None else h0[d].astype(np.float64)
        c = np.zeros((batch, hidden)) if c0 is None else c0[d].astype(np.float64)
        for step in range(seq):
            # A reversed item starts at its own last step; items past their length stand still.
            t = np.where(reverse, lengths - 1 - step, step)
            live = step < lengths
            x_t = x64[np.clip(t, 0, seq - 1), np.arange(batch)]
            h_new, c_new = _step(node, fns[d * per:(d + 1) * per], x_t, h, c,
                                 w[d].astype(np.float64), r[d].astype(np.float64), b[d], p[d])
            h = np.where(live[:, None], h_new, h)
            if c_new is not None:
                c = np.where(live[:, None], c_new, c)
            for i in np.nonzero(live)[0]:
                y[t[i], d, i] = h[i]
        y_h[d], y_c[d] = h, c
    out = [y.astype(x.dtype), y_h.astype(x.dtype), y_c.astype(x.dtype)]
    if batch_first:
        out = [out[0].transpose(2, 0, 1, 3), out[1].transpose(1, 0, 2), out[2].transpose(1, 0, 2)]
    return tuple(out[:3 if node.op == "LSTM" else 2])


_COMMON = {
    "activation_alpha": Attr("floats", None, "alphas of the activations that take one"),
    "activation_beta": Attr("floats", None, "betas of the activations that take one"),
    "activations": Attr("strings", None, "activation per gate function and direction"),
    "clip": Attr("float", None, "pre-activations are clipped to [-clip, clip]"),
    "direction": Attr("string", "forward", "forward, reverse or bidirectional"),
    "hidden_size": Attr("int", None, "units of the hidden state"),
    "layout": Attr("int", 0, "0: (sequence, batch, ...), 1: (batch, sequence, ...)"),
}
register(OpDef("RNN", "matmul", _infer, _recurrent, inputs=(3, 6), outputs=(0, 2), since=7,
               attrs=dict(_COMMON), doc="Elman recurrent layer: H = f(X W^T + H R^T + b)"))
register(OpDef("GRU", "matmul", _infer, _recurrent, inputs=(3, 6), outputs=(0, 2), since=7,
               attrs={**_COMMON, "linear_before_reset": Attr(
                   "int", 0, "1: the reset gate scales H R^T + b, not H")},
               doc="gated recurrent unit (update, reset and hidden gates)"))
register(OpDef("LSTM", "matmul", _infer, _recurrent, inputs=(3, 8), outputs=(0, 3), since=7,
               attrs={**_COMMON, "input_forget": Attr("int", 0, "1: forget gate = 1 - input "
                                                                "gate")},
               doc="long short-term memory layer (input, output, forget, cell gates; peepholes)"))
