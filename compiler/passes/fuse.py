"""Fusion passes: per-channel arithmetic, padding and activations absorbed by a layer."""

from __future__ import annotations

import math

import numpy as np

from compiler.ir.graph import Graph, Node, Value
from compiler.ops._spatial import layout_of
from compiler.passes.base import register_pass
from compiler.passes.lower import batchnorm_factors
from compiler.passes.rewrite import Rewriter, const, scalar

# Producers whose weights and bias absorb per-channel work.
_LAYERS = ("Conv", "FullyConnected", "Gemm")


def _layer(rw: Rewriter, value: Value, reader: Node) -> Node | None:
    """The Conv/FullyConnected/Gemm producing `value` with known weights, read only by `reader`."""
    node = rw.producer(value)
    if node is None or node.op not in _LAYERS or rw.sole_user(value) is not reader:
        return None
    if node.attrs.get("activation") or const(node.inputs[1]) is None:
        return None  # an activation sits between; or the weights are computed
    if len(node.inputs) > 2 and node.inputs[2] is not None and const(node.inputs[2]) is None:
        return None
    if node.op == "Gemm" and node.attrs["alpha"] != 1.0:
        return None  # the scale would have to go into alpha too
    if node.output.type.dtype not in ("float32", "float64"):
        return None
    return node


def _channel_axis(node: Node) -> int:
    """Axis of the layer's output channels."""
    rank = node.output.type.rank
    return 1 if node.op == "Conv" and layout_of(node) == "NCHW" and rank > 2 else rank - 1


def _weight_axis(node: Node) -> int:
    """Axis of the weights indexed by output channel (a Gemm's B is [K, N] unless transB)."""
    return 1 if node.op == "Gemm" and not node.attrs["transB"] else 0


def _refold(rw: Rewriter, layer: Node, scale: np.ndarray | None, shift: np.ndarray,
            reader: Node) -> None:
    """Replace `reader(layer(x))` by a layer with weights * scale and bias * scale + shift."""
    w = const(layer.inputs[1])
    dtype, axis = w.dtype, _weight_axis(layer)
    given = layer.inputs[2] if len(layer.inputs) > 2 else None
    bias = np.zeros(w.shape[axis]) if given is None else const(given).astype(np.float64)
    attrs = {}
    if layer.op == "Gemm":  # its C is scaled by beta: fold that in too
        bias, attrs = bias * layer.attrs["beta"], {"beta": 1.0}
    if scale is not None:
        shape = [1] * w.ndim
        shape[axis] = -1
        w = (w.astype(np.float64) * scale.reshape(shape)).astype(dtype)
        bias = bias * scale
    inputs = [layer.inputs[0], rw.constant(f"{layer.name}_weights", w) if scale is not None
              else layer.inputs[1],
              rw.constant(f"{layer.name}_bias", (bias + shift).astype(dtype))]
    new = rw.copy(layer, inputs, attrs, replaces=[reader])
    rw.replace(reader.output, new.output)


@register_pass("fold_batchnorm", "fuse")
def fold_batchnorm(graph: Graph) -> bool:
    """Fold a BatchNormalization into the Conv, FullyConnected or Gemm that feeds it.

    At inference the normalization is y = x * factor + shift per channel, and a layer's output
    channel c is a dot product with weight row c plus bias c; scaling row c by factor[c] and
    adjusting the bias gives the normalized result directly, so the BatchNormalization costs
    nothing at run time.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("BatchNormalization"):
        layer = _layer(rw, node.inputs[0], node)
        if layer is None:
            continue
        rank = node.output.type.rank
        if _channel_axis(layer) != (1 if layout_of(node) == "NCHW" else rank - 1):
            continue  # the layer's channels are not the ones normalized
        found = batchnorm_factors(node, np.float64)
        if found is None:
            continue
        _refold(rw, layer, found[0], found[1], node)
        changed = True
    rw.finish()
    return changed


def _per_channel(data: np.ndarray, rank: int, axis: int, channels: int) -> np.ndarray | None:
    """A constant operand as one value per channel, if it varies along `axis` only."""
    if data.ndim > rank:
        return None
    full = data.reshape((1,) * (rank - data.ndim) + data.shape)
    if any(d != 1 for i, d in enumerate(full.shape) if i != axis):
        return None
    if full.shape[axis] not in (1, channels):
        return None
    return np.broadcast_to(full.reshape(-1).astype(np.float64), (channels,))


@register_pass("fold_channel_affine", "fuse")
def fold_channel_affine(graph: Graph) -> bool:
    """Fold a Mul, Div, Add or Sub by a per-channel constant into the layer that feeds it.

    Scaling output channel c scales weight row c and bias c; a shift only changes bias c. This
    absorbs bias Adds exported as separate nodes and the scale/shift pairs some models put
    after a BatchNormalization.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Mul", "Div", "Add", "Sub"):
        if node.attrs.get("activation"):
            continue
        for index, value in enumerate(node.inputs):
            layer = _layer(rw, value, node)
            other = const(node.inputs[1 - index])
            if layer is None or other is None:
                continue
            if node.op in ("Div", "Sub") and index != 0:
                continue  # c / x and c - x are not affine in x's channels this way
            out = layer.output.type
            channels = const(layer.inputs[1]).shape[_weight_axis(layer)]
            vector = _per_channel(other, out.rank, _channel_axis(layer), channels)
            if vector is None or node.output.type != out:
                continue
            if node.op == "Div" and not vector.all():
                continue  # a division by zero stays visible where it is
            if node.op == "Mul":
                _refold(rw, layer, vector, np.zeros_like(vector), node)
            elif node.op == "Div":
                _refold(rw, layer, 1.0 / vector, np.zeros_like(vector), node)
            else:
                _refold(rw, layer, None, vector if node.op == "Add" else -vector, node)
            changed = True
            break
    rw.finish()
    return changed


# -- Pad into Conv and pooling ------------------------------------------------------------------

def _spatial_axes(node: Node) -> list[int]:
    rank = node.inputs[0].type.rank
    return list(range(2, rank)) if layout_of(node) == "NCHW" else list(range(1, rank - 1))


def _own_pads(node: Node) -> tuple[int, ...] | None:
    """The explicit pads of a windowed operator (None when it has none or pads VALID)."""
    return node.attrs.get("pads") if node.attrs["auto_pad"] == "NOTSET" else None


def _merged_pads(pad: Node, reader: Node) -> tuple[int, ...] | None:
    """The reader's pads plus the Pad node's, or None if the Pad also pads batch or channels."""
    pads = const(pad.inputs[1])
    if pads is None or (len(pad.inputs) > 3 and pad.inputs[3] is not None) or (pads < 0).any():
        return None
    rank = pad.inputs[0].type.rank
    spatial = _spatial_axes(reader)
    if any(pads[a] or pads[a + rank] for a in range(rank) if a not in spatial):
        return None
    n = len(spatial)
    own = _own_pads(reader) or (0,) * (2 * n)
    begin = [own[i] + int(pads[a]) for i, a in enumerate(spatial)]
    end = [own[n + i] + int(pads[a + rank]) for i, a in enumerate(spatial)]
    return tuple(begin + end)


@register_pass("merge_pad", "fuse")
def merge_pad(graph: Graph) -> bool:
    """Merge a Pad of the spatial axes into the Conv, AveragePool or MaxPool that reads it.

    These operators pad their input themselves (with zeros, or -inf for MaxPool), so a separate
    Pad only costs a copy of the padded image; an AveragePool then counts the padding in its
    divisor, as the padded zeros were counted before.
    """
    rw = Rewriter(graph)
    changed = False
    for pad in rw.nodes("Pad"):
        if pad.attrs["mode"] != "constant":
            continue
        reader = rw.sole_user(pad.output)
        if reader is None or reader.op not in ("Conv", "AveragePool", "MaxPool"):
            continue
        if reader.inputs[0] is not pad.output or reader.attrs["auto_pad"] not in ("NOTSET",
                                                                                  "VALID"):
            continue
        fill = scalar(pad.inputs[2]) if len(pad.inputs) > 2 and pad.inputs[2] else 0.0
        if fill is None or fill != (-math.inf if reader.op == "MaxPool" else 0.0):
            continue  # the reader's own padding value differs
        if reader.op == "MaxPool" and len(reader.outputs) > 1 and rw.is_used(reader.outputs[1]):
            continue  # its indices count positions of the padded image
        attrs: dict = {"auto_pad": "NOTSET"}
        if reader.op == "AveragePool" and not reader.attrs["count_include_pad"]:
            if any(_own_pads(reader) or ()):
                continue  # its own padding must stay out of the divisor, the Pad's must not
            attrs["count_include_pad"] = 1
        merged = _merged_pads(pad, reader)
        if merged is None:
            continue
        attrs["pads"] = merged
        new = rw.copy(reader, [pad.inputs[0], *reader.inputs[1:]], attrs, replaces=[pad])
        for old, out in zip(reader.outputs, new.outputs):
            if rw.is_used(old):
                rw.replace(old, out)
        changed = True
    rw.finish()
    return changed


# -- activations ----------------------------------------------------------------------------------

def clip_bounds(node: Node) -> tuple[float, float] | None:
    """(min, max) of a Relu or a Clip with constant bounds (infinite when omitted), else None."""
    if node.op == "Relu":
        return 0.0, math.inf
    if node.op != "Clip":
        return None
    bounds = []
    for index, default in ((1, -math.inf), (2, math.inf)):
        value = node.inputs[index] if len(node.inputs) > index else None
        bounds.append(default if value is None else scalar(value))
    return None if None in bounds else (bounds[0], bounds[1])


def _activation_of(node: Node) -> tuple[str, tuple[float, ...]] | None:
    if node.op == "LeakyRelu":
        return "LeakyRelu", (float(node.attrs["alpha"]),)
    bounds = clip_bounds(node)
    if bounds is None:
        return None
    return ("Relu", ()) if node.op == "Relu" else ("Clip", bounds)


@register_pass("fuse_activations", "fuse")
def fuse_activations(graph: Graph) -> bool:
    """Fuse a Relu, Clip (Relu6) or LeakyRelu into the Conv, FullyConnected or Add before it.

    The producer applies the activation to each result before storing it, which saves writing
    and re-reading the whole tensor; the fused node records which activation it carries.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Relu", "Clip", "LeakyRelu"):
        producer = rw.producer(node.inputs[0])
        if producer is None or producer.op not in ("Conv", "FullyConnected", "Add"):
            continue
        if producer.attrs.get("activation") or rw.sole_user(producer.output) is not node:
            continue  # it already has one, or another node reads the value before activation
        if producer.output.type.dtype not in ("float16", "float32", "float64"):
            continue
        found = _activation_of(node)
        if found is None:
            continue  # Clip bounds computed at run time
        new = rw.copy(producer, attrs={"activation": found[0],
                                       "activation_params": found[1] or None},
                      replaces=[node], types=[out.type for out in producer.outputs])
        rw.replace(node.output, new.output)
        changed = True
    rw.finish()
    return changed


@register_pass("merge_clips", "simplify")
def merge_clips(graph: Graph) -> bool:
    """Merge a Relu or Clip applied to the result of another Relu or Clip into one Clip.

    Clamping to [a, b] and then to [c, d] is clamping to [clamp(a, c, d), clamp(b, c, d)], and a
    Relu is a clamp to [0, inf); a Relu after a Relu6 simply disappears.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Relu", "Clip"):
        outer = clip_bounds(node)
        inner_node = rw.producer(node.inputs[0]) if outer is not None else None
        inner = clip_bounds(inner_node) if inner_node is not None else None
        if inner is None or rw.sole_user(node.inputs[0]) is not node:
            continue
        x = inner_node.inputs[0]
        if x.type.dtype not in ("float16", "float32", "float64"):
            continue
        (a, b), (c, d) = inner, outer
        a, c = min(a, b), min(c, d)  # a clamp with min > max gives max everywhere
        low, high = min(max(a, c), d), min(max(b, c), d)
        if (low, high) == (0.0, math.inf):
            new = rw.add("Relu", [x], replaces=[node, inner_node])
        else:
            bounds = [rw.constant(f"{node.name}_{k}", np.array(v, x.type.dtype))
                      for k, v in (("min", low), ("max", high))]
            new = rw.add("Clip", [x, *bounds], replaces=[node, inner_node])
        rw.replace(node.output, new.output)
        changed = True
    rw.finish()
    return changed
