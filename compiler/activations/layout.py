"""Which axis of an activation holds its channels, and its per-channel heat-map arrays.

A loaded ONNX graph computes in NCHW, the compiler's graphs (and TFLite models) in NHWC; a
spatial operator says which in its `layout` attribute. The layout of the other 4-D values is
carried through operators that keep their input's shape (Relu, Add, a QuantizeLinear) and
through the two layout Transposes, forwards and backwards. A value nothing decides keeps no
layout here, and `layout_of` guesses it from the graph's spatial operators.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from compiler.ir.graph import Graph

_TO_NHWC, _TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)
CHANNEL_AXIS = {"NCHW": 1, "NHWC": 3}


def derived_layouts(graph: Graph) -> dict[str, str]:
    """Value name -> "NCHW" or "NHWC" for the 4-D values whose operators decide it."""
    known: dict[str, str] = {}

    def put(value, layout: str) -> bool:
        if value is None or len(value.type.shape) != 4 or value.name in known:
            return False
        known[value.name] = layout
        return True

    for node in graph.nodes:  # what the spatial operators and the layout transposes say
        layout = node.attrs.get("layout")
        if layout in CHANNEL_AXIS:
            put(node.inputs[0] if node.inputs else None, layout)
            for value in node.outputs:
                put(value, layout)
        elif node.op == "Transpose" and tuple(node.attrs.get("perm") or ()) in (_TO_NHWC,
                                                                                 _TO_NCHW):
            to_nhwc = tuple(node.attrs["perm"]) == _TO_NHWC
            put(node.inputs[0], "NCHW" if to_nhwc else "NHWC")
            put(node.output, "NHWC" if to_nhwc else "NCHW")
    changed = True
    while changed:  # carried through shape-keeping operators, both ways, until nothing moves
        changed = False
        for node in graph.nodes:
            if node.op == "Transpose" or not node.inputs or node.inputs[0] is None:
                continue
            first = node.inputs[0]
            for value in node.outputs:
                if value.type.shape != first.type.shape:
                    continue
                if first.name in known:
                    changed |= put(value, known[first.name])
                elif value.name in known:
                    changed |= put(first, known[value.name])
    return known


def graph_layout(graph: Graph) -> str:
    """The layout most of the graph's spatial operators use ("" when it has none)."""
    counts = Counter(n.attrs["layout"] for n in graph.nodes
                     if n.attrs.get("layout") in CHANNEL_AXIS)
    return counts.most_common(1)[0][0] if counts else ""


def layout_of(graph: Graph, name: str, known: dict[str, str] | None = None) -> str:
    """The layout of 4-D value `name` ("" for other ranks): derived, else the graph's own.

    A graph without spatial operators gets NCHW when axis 1 is small (1 or 3 channels, the
    usual image input) and NHWC otherwise.
    """
    value = graph.value(name)
    shape = value.type.shape
    if len(shape) != 4:
        return ""
    known = derived_layouts(graph) if known is None else known
    if name in known:
        return known[name]
    return graph_layout(graph) or ("NCHW" if shape[1] in (1, 3) and shape[3] not in (1, 3)
                                   else "NHWC")


def channel_maps(array: np.ndarray, layout: str) -> np.ndarray:
    """The heat maps of `array`: [channels, rows, columns], views of the tensor's own elements.

    A 4-D tensor gives one map per channel of its first batch element (the channel axis from
    `layout`); a 3-D one ([batch, channels, length]) one strip per channel; a 2-D tensor is one
    map; a 1-D tensor or a scalar one strip.
    """
    array = np.asarray(array)
    if array.ndim == 4:
        first = array[0]
        return first if layout != "NHWC" else np.moveaxis(first, -1, 0)
    if array.ndim == 3:
        return array[0][:, None, :]
    if array.ndim == 2:
        return array[None]
    if array.ndim <= 1:
        return array.reshape(1, 1, -1)
    rows = array.reshape(array.shape[0], array.shape[1], -1)[0]  # 5-D and up: channels, rest
    return rows[:, None, :]


def to_layout(array: np.ndarray, source: str, target: str) -> np.ndarray:
    """A 4-D `array` laid out as `source` rearranged to `target` (unchanged when they agree)."""
    if array.ndim != 4 or not source or not target or source == target:
        return array
    return np.transpose(array, _TO_NHWC if target == "NHWC" else _TO_NCHW)
