"""Cross-layer equalization (Nagel et al., 2019): even out per-channel weight ranges.

In a convolution A followed (through a Relu or directly) by a convolution B, output channel c
of A may be scaled by 1/s and input channel c of B by s without changing the model, since
relu(x / s) = relu(x) / s for s > 0. With s = sqrt(r1 r2) / r2, where r1 is the range of A's
channel c weights and r2 that of B's input channel c, both become sqrt(r1 r2): a channel whose
weights dwarf the others' no longer forces a coarse scale on them. Depthwise convolutions,
whose per-channel ranges differ most, gain most. Chains (A, B, C, ...) are swept until the
scales settle.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.graph import Constant, Graph, Node

SWEEPS = 20  # passes over the chains; the scales settle in a few
MAX_SCALE = 64.0  # bound on a channel's accumulated scale (16: VWW 25.8 dB, 64: 27.1, none: 4)
_POSITIVE_HOMOGENEOUS = ("Relu",)


def _conv_kind(node: Node) -> str | None:
    """"dense" or "depthwise" for an NCHW convolution with constant weights, else None."""
    if node.op != "Conv" or node.attrs.get("layout", "NCHW") != "NCHW" or \
            node.attrs.get("activation") or not isinstance(node.inputs[1], Constant):
        return None
    if len(node.inputs) > 2 and node.inputs[2] is not None and \
            not isinstance(node.inputs[2], Constant):
        return None
    w = node.inputs[1].data
    group = node.attrs.get("group", 1)
    if group == 1:
        return "dense"
    if w.shape[1] == 1 and group == w.shape[0]:  # one filter per input channel
        return "depthwise"
    return None


def equalization_pairs(graph: Graph) -> list[tuple[Node, Node]]:
    """(A, B) convolution pairs whose A output reaches only B, at most through a Relu."""
    readers: dict[int, list[Node]] = {}
    for node in graph.nodes:
        for value in node.inputs:
            if value is not None:
                readers.setdefault(id(value), []).append(node)
    outputs = {id(v) for v in graph.outputs}
    pairs = []
    for a in graph.nodes:
        if _conv_kind(a) is None:
            continue
        value = a.output
        after = readers.get(id(value), [])
        if len(after) == 1 and after[0].op in _POSITIVE_HOMOGENEOUS and id(value) not in outputs:
            value = after[0].output
            after = readers.get(id(value), [])
        if id(value) in outputs or len(after) != 1:
            continue
        b = after[0]
        if _conv_kind(b) is not None and b.inputs[0] is value:
            pairs.append((a, b))
    return pairs


def _weight_range(w: np.ndarray, axis: int) -> np.ndarray:
    reduce = tuple(i for i in range(w.ndim) if i != axis)
    return np.max(np.abs(w), axis=reduce).astype(np.float64)


def equalize(graph: Graph) -> tuple[Graph, int]:
    """A copy of `graph` with its convolution pairs equalized, and how many pairs there were."""
    out = graph.snapshot()
    pairs = equalization_pairs(out)
    weights: dict[str, np.ndarray] = {}
    biases: dict[str, np.ndarray] = {}
    for a, b in pairs:
        for node in (a, b):
            weights.setdefault(node.name, np.asarray(node.inputs[1].data, np.float64))
            if len(node.inputs) > 2 and node.inputs[2] is not None:
                biases.setdefault(node.name, np.asarray(node.inputs[2].data, np.float64))
    total = [np.ones(len(_weight_range(weights[a.name], 0))) for a, _ in pairs]
    for _ in range(SWEEPS):
        moved = 0.0
        for k, (a, b) in enumerate(pairs):
            wa, wb = weights[a.name], weights[b.name]
            r1 = _weight_range(wa, 0)
            b_axis = 0 if _conv_kind(b) == "depthwise" else 1
            r2 = _weight_range(wb, b_axis)
            ok = (r1 > 0) & (r2 > 0)
            s = np.ones_like(r1)
            s[ok] = np.sqrt(r1[ok] * r2[ok]) / r2[ok]
            # A channel whose weights are all but zero (its output is its bias) would be
            # scaled up without bound, and its activations with it: the scale a channel
            # accumulates over the sweeps stays within MAX_SCALE either way.
            bounded = np.clip(total[k] * s, 1 / MAX_SCALE, MAX_SCALE)
            s, total[k] = bounded / total[k], bounded
            weights[a.name] = wa / s.reshape(-1, *([1] * (wa.ndim - 1)))
            if a.name in biases:
                biases[a.name] = biases[a.name] / s
            shape = [1] * wb.ndim
            shape[b_axis] = -1
            weights[b.name] = wb * s.reshape(shape)
            moved = max(moved, float(np.max(np.abs(np.log(s)))))
        if moved < 1e-6:
            break
    for node in {n.name: n for pair in pairs for n in pair}.values():
        node.inputs[1] = out.add_constant(f"{node.inputs[1].name}_equalized",
                                          weights[node.name].astype(np.float32))
        if node.name in biases:
            node.inputs[2] = out.add_constant(f"{node.inputs[2].name}_equalized",
                                              biases[node.name].astype(np.float32))
    if pairs:
        out.sort()
    return out, len(pairs)
