"""Layout passes: spatial operators go channels-last (NHWC), then Transposes sink and cancel."""

from __future__ import annotations

import numpy as np

from compiler import ops
from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.ir.types import TensorType
from compiler.passes.base import register_pass
from compiler.passes.reshape import (
    hoist_through_reshape,
    moves_only_unit_axes,
    sink_through_reshape,
)
from compiler.passes.rewrite import (
    Rewriter,
    const,
    inverse,
    is_splat,
    perm_of,
    reshape_attrs,
    shape_constant,
    splat,
    transposed_type,
)


def to_channels_last(rank: int) -> tuple[int, ...]:
    """The Transpose permutation from NCHW to NHWC (for any number of spatial axes)."""
    return (0, *range(2, rank), 1)


def to_channels_first(rank: int) -> tuple[int, ...]:
    """The Transpose permutation from NHWC back to NCHW."""
    return (0, rank - 1, *range(1, rank - 1))


@register_pass("to_nhwc", "layout")
def to_nhwc(graph: Graph) -> bool:
    """Switch spatial operators (convolution, pooling, normalization) to channels-last layout.

    A Transpose to NHWC goes before each and one back to NCHW after it, so the graph computes
    exactly what it did; NHWC is what microcontroller kernels (CMSIS-NN, TFLite Micro) expect.
    sink_transposes then removes the Transposes between neighbours.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes():
        if not ops.lookup(node.op).spatial or node.attrs.get("layout") != "NCHW":
            continue
        x = node.inputs[0]
        if x is None or x.type.rank < 3:
            continue  # [N, C] has no spatial axes: both layouts are the same
        before = rw.transpose(x, to_channels_last(x.type.rank), replaces=[node])
        rw.set_input(node, 0, before.output)
        node.attrs["layout"] = "NHWC"
        was = [out.type for out in node.outputs]
        moved = [transposed_type(t, to_channels_last(t.rank)) if t.rank == x.type.rank else None
                 for t in was]
        if None in moved:
            rw.retype(node)
        else:  # the same tensor, channels last: nothing to infer again
            for out, t in zip(node.outputs, moved):
                out.type = t
        for out, kept in zip(node.outputs, was):
            if rw.is_used(out):  # transposed back, it is the value it was
                rw.insert_after(out, "Transpose", {"perm": to_channels_first(out.type.rank)},
                                replaces=[node], types=[kept])
        changed = True
    rw.finish()
    return changed


# -- sinking ------------------------------------------------------------------------------------

# One-input operators that act on each element alone; their other inputs are scalars.
_UNARY = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Neg", "Abs",
          "Sqrt", "Exp", "Log", "Erf", "Clip", "Cast", "QuantizeLinear", "DequantizeLinear",
          "QLinearLeakyRelu", "QLinearSigmoid", "IntLookupTable")
# Operators combining inputs element by element, with broadcasting.
_BROADCASTING = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu",
                 "FusedElementwise")


def _sole_transpose(rw: Rewriter, value: Value | None, reader: Node) -> Node | None:
    """The Transpose producing `value`, if `reader` is the only node reading it."""
    node = rw.producer(value, "Transpose")
    return node if node is not None and rw.sole_user(value) is reader else None


def _untransposed(rw: Rewriter, value: Value | None, perm, rank: int) -> Value | None:
    """`value` seen through the inverse of `perm`, when a live Transpose already computes it.

    A residual chain fed from an NCHW input adds each block's transposed output to a value
    that some later Conv reads through exactly that inverse Transpose: the Add can run on the
    untransposed side, and the Transpose after it then cancels with the next one.
    """
    if value is None or isinstance(value, Constant) or value.type.rank != rank:
        return None
    back = inverse(perm)
    return next((u.output for u in rw.users(value)
                 if u.op == "Transpose" and perm_of(u) == back and u.inputs[0] is value), None)


def _accepts(rw: Rewriter, node: Node, t: Node) -> bool:
    """Whether `t` can sink through its reader `node` (the rules of sink_transposes)."""
    value, perm, rank = t.output, perm_of(t), t.output.type.rank
    if node.op == "Transpose":
        return True
    if node.op in _UNARY or node.op in ("Pad", "Reshape"):
        if node.inputs[0] is not value or any(v is value for v in node.inputs[1:]):
            return False
        if node.op == "Pad":
            return const(node.inputs[1]) is not None and (len(node.inputs) < 4
                                                          or node.inputs[3] is None)
        if node.op == "Reshape":
            return sink_through_reshape(t.inputs[0].type.shape, perm,
                                        node.output.type.shape) is not None
        return all(v is None or v.type.numel == 1 for v in _parameters(node))
    if node.op in _DATA_INPUTS:
        data = [node.inputs[i] for i in _DATA_INPUTS[node.op]]
        return value in data and all(
            (rw.producer(v, "Transpose") is not None and perm_of(rw.producer(v)) == perm)
            or _untransposed(rw, v, perm, rank) is not None for v in data)
    if node.op in _BROADCASTING or node.op == "Concat":
        for v in node.inputs:
            other = rw.producer(v, "Transpose")
            if isinstance(v, Constant) and v.data.ndim <= node.output.type.rank:
                continue
            if other is None and _untransposed(rw, v, perm, rank) is not None:
                continue
            if other is None or perm_of(other) != perm or v.type.rank != rank:
                return False
            if other is not t and rw.sole_user(v) is not node:
                return False  # that Transpose would have to stay for its other readers
        return node.output.type.rank == rank
    return False


def _movable(rw: Rewriter, value: Value | None, reader: Node) -> Node | None:
    """The Transpose producing `value`, if it can sink below `reader`.

    When other nodes read it too, every one of them must let it through as well, so that it
    ends up dead rather than duplicated.
    """
    t = rw.producer(value, "Transpose")
    if t is None or rw.is_output(value):
        return None
    users = rw.users(value)
    if users == [reader] or all(_accepts(rw, user, t) for user in users):
        return t
    return None


def _after(rw: Rewriter, node: Node, new: Node, perm, replaces: list[Node]) -> None:
    """Finish a sink: `new` computes `node` on untransposed data; transpose its result back."""
    # Transposed back, it is what `node` computed: no inference needed.
    back = rw.add("Transpose", [new.output], {"perm": tuple(perm)}, replaces=replaces,
                  types=[node.output.type])
    rw.replace(node.output, back.output)


def _elementwise_type(node: Node, source: Value) -> list[TensorType] | None:
    """`node`'s output type on `source`'s shape: an element-wise operator keeps the shape."""
    out = node.output.type
    if out.quant is not None and out.quant.axis is not None:
        return None
    return [TensorType(source.type.shape, out.dtype, out.quant)]


def _parameters(node: Node) -> list[Value | None]:
    """A one-input operator's per-tensor parameters (an IntLookupTable's table is not one)."""
    return node.inputs[2:] if node.op == "IntLookupTable" else node.inputs[1:]


def _sink_unary(rw: Rewriter, node: Node) -> bool:
    t = _movable(rw, node.inputs[0], node)
    if t is None or any(v is not None and v.type.numel != 1 for v in _parameters(node)):
        return False  # per-axis quantization parameters would need their axis renamed
    new = rw.copy(node, [t.inputs[0], *node.inputs[1:]], replaces=[t],
                  types=_elementwise_type(node, t.inputs[0]))
    _after(rw, node, new, perm_of(t), [node, t])
    return True


def _inverse_constant(rw: Rewriter, value: Constant, perm, rank: int, hint: str) -> Constant:
    """A constant operand seen through the inverse Transpose (broadcast to `rank` first)."""
    data = value.data.reshape((1,) * (rank - value.data.ndim) + value.data.shape)
    moved = np.transpose(data, inverse(perm))
    if is_splat(data):
        moved = splat(data.flat[0], moved.shape, data.dtype)
    return rw.constant(hint, moved)


def _sink_through_all(rw: Rewriter, node: Node, axis_attr: str | None = None) -> bool:
    """Sink through an operator whose non-constant inputs all come from one kind of Transpose."""
    rank = node.output.type.rank
    transposes = [_movable(rw, v, node) for v in node.inputs]
    perms = {perm_of(t) for t in transposes if t is not None}
    if len(perms) != 1:
        return False  # no Transpose, or Transposes that disagree
    (perm,) = perms
    inputs = []
    for value, t in zip(node.inputs, transposes):
        if t is not None:
            if t.inputs[0].type.rank != rank:
                return False  # a transposed input that broadcasts to a higher rank
            inputs.append(t.inputs[0])
        elif isinstance(value, Constant) and value.data.ndim <= rank:
            inputs.append(value)  # transposed below, once the node is known to sink
        else:
            seen = _untransposed(rw, value, perm, rank)
            if seen is None:
                return False  # a computed input without the Transpose
            inputs.append(seen)
    inputs = [_inverse_constant(rw, v, perm, rank, f"{node.name}_operand")
              if isinstance(v, Constant) and t is None else v
              for v, t in zip(inputs, transposes)]
    attrs = {axis_attr: perm[node.attrs[axis_attr] % rank]} if axis_attr else {}
    used = [t for t in transposes if t is not None]
    new = rw.copy(node, inputs, attrs, replaces=used)
    _after(rw, node, new, perm, [node, *used])
    return True


# Integer element-wise operators: their data inputs (the rest are scalar parameters).
_DATA_INPUTS = {"QLinearAdd": (0, 3), "QLinearMul": (0, 3)}


def _sink_data_inputs(rw: Rewriter, node: Node) -> bool:
    """Sink through an integer element-wise operator whose data inputs share one Transpose."""
    rank = node.output.type.rank
    inputs, used, perms = list(node.inputs), [], set()
    for index in _DATA_INPUTS[node.op]:
        t = _movable(rw, node.inputs[index], node)
        if t is not None:
            if t.inputs[0].type.rank != rank:
                return False
            inputs[index] = t.inputs[0]
            used.append(t)
            perms.add(perm_of(t))
    if len(perms) != 1:
        return False
    (perm,) = perms
    for index in _DATA_INPUTS[node.op]:
        if inputs[index] is node.inputs[index] and not any(t.output is node.inputs[index]
                                                          for t in used):
            seen = _untransposed(rw, node.inputs[index], perm, rank)
            if seen is None:
                return False  # a computed input without the Transpose
            inputs[index] = seen
    new = rw.copy(node, inputs, replaces=used)
    _after(rw, node, new, perm, [node, *used])
    return True


def _sink_pad(rw: Rewriter, node: Node) -> bool:
    t = _movable(rw, node.inputs[0], node)
    pads = const(node.inputs[1])
    if t is None or pads is None or (len(node.inputs) > 3 and node.inputs[3] is not None):
        return False  # the pads must be known (and given for every axis)
    perm, rank = perm_of(t), node.output.type.rank
    begin, end = [0] * rank, [0] * rank
    for j, p in enumerate(perm):  # output axis j is axis p of the untransposed input
        begin[p], end[p] = int(pads[j]), int(pads[j + rank])
    moved = rw.constant(f"{node.name}_pads", np.array(begin + end, np.int64))
    new = rw.copy(node, [t.inputs[0], moved, *node.inputs[2:]], replaces=[t])
    _after(rw, node, new, perm, [node, t])
    return True


def _sink_reshape(rw: Rewriter, node: Node) -> bool:
    t = _movable(rw, node.inputs[0], node)
    if t is None:
        return False
    x, target = t.inputs[0], node.output.type.shape
    found = sink_through_reshape(x.type.shape, perm_of(t), target)
    if found is None:
        return False  # the Reshape merges axes the Transpose took from apart
    shape, perm = found
    if moves_only_unit_axes(shape, perm):  # the Transpose left is only a reshape
        shape = target
    hint = f"{node.name}_shape"
    new = rw.add("Reshape", [x, shape_constant(rw.graph, hint, shape)], reshape_attrs(shape),
                 replaces=[node, t])
    if shape == target:
        rw.replace(node.output, new.output)
    else:
        _after(rw, node, new, perm, [node, t])
    return True


def _merge_transposes(rw: Rewriter, node: Node) -> bool:
    """A Transpose of a Transpose is one Transpose (none when they cancel)."""
    inner = rw.producer(node.inputs[0], "Transpose")
    if inner is None:
        return _hoist_over_reshape(rw, node)
    first, second = perm_of(inner), perm_of(node)
    perm = tuple(first[p] for p in second)
    x = inner.inputs[0]
    if perm == tuple(range(len(perm))):
        if not rw.can_replace(node.output, x):
            return False  # a model output would lose its name
        rw.replace(node.output, x)
    else:
        new = rw.add("Transpose", [x], {"perm": perm}, replaces=[node, inner])
        rw.replace(node.output, new.output)
    return True


def _hoist_over_reshape(rw: Rewriter, node: Node) -> bool:
    """Transpose(Reshape(Transpose(x))): move the outer Transpose above the Reshape to merge.

    This is the channel shuffle of ShuffleNet seen from NHWC: the two Transposes around it
    become one.
    """
    reshape = rw.producer(node.inputs[0], "Reshape")
    if reshape is None or rw.sole_user(reshape.output) is not node:
        return False
    inner = _sole_transpose(rw, reshape.inputs[0], reshape)
    if inner is None:
        return False
    z = reshape.inputs[0]
    found = hoist_through_reshape(z.type.shape, reshape.output.type.shape, perm_of(node))
    if found is None:
        return False
    hoisted, shape = found
    x, first = inner.inputs[0], perm_of(inner)
    perm = tuple(first[p] for p in hoisted)
    if not moves_only_unit_axes(x.type.shape, perm):  # else the Reshape alone does it
        x = rw.add("Transpose", [x], {"perm": perm}, replaces=[node, inner]).output
    target = shape_constant(rw.graph, f"{node.name}_shape", shape)
    new = rw.add("Reshape", [x, target], reshape_attrs(shape), replaces=[node, reshape, inner])
    rw.replace(node.output, new.output)
    return True


def _release_outputs(graph: Graph) -> bool:
    """Outputs made by a Transpose become its input, under the output's name.

    Only for graphs whose outputs may come in any order: the Transpose is then free to sink
    and cancel like any other.
    """
    changed = False
    for i, value in enumerate(graph.outputs):
        node = value.producer
        if node is None or node.op != "Transpose":
            continue
        source = node.inputs[0]
        if source is None or source.producer is None or source in graph.outputs:
            continue
        source.name, value.name = value.name, source.name
        graph.outputs[i] = source
        changed = True
    return changed


@register_pass("sink_transposes", "layout")
def sink_transposes(graph: Graph) -> bool:
    """Move Transposes below the element-wise operators, Pad, Concat and Reshape reading them.

    An element-wise operator gives the same result on transposed data (constant operands are
    transposed at compile time), and a Reshape lets a Transpose through when it only splits or
    merges axes that stay together. A Transpose meeting the next one merges with it, and inverse
    pairs cancel: run to a fixed point, this removes the Transposes to_nhwc put between layers.
    """
    changed = _release_outputs(graph) if graph.free_output_order else False
    rw = Rewriter(graph)
    for node in rw.nodes():
        if not rw.live(node):
            continue
        if node.op == "Transpose":
            changed |= _merge_transposes(rw, node)
        elif node.op in _UNARY:
            changed |= _sink_unary(rw, node)
        elif node.op in _BROADCASTING:
            changed |= _sink_through_all(rw, node)
        elif node.op == "Concat":
            changed |= _sink_through_all(rw, node, "axis")
        elif node.op in _DATA_INPUTS:
            changed |= _sink_data_inputs(rw, node)
        elif node.op == "Pad":
            changed |= _sink_pad(rw, node)
        elif node.op == "Reshape":
            changed |= _sink_reshape(rw, node)
    rw.finish()
    return changed


# -- folding into weights -----------------------------------------------------------------------

@register_pass("fold_transpose_into_fc", "layout")
def fold_transpose_into_fc(graph: Graph) -> bool:
    """Fold a Transpose that is flattened into a FullyConnected into the weights' column order.

    A classifier that flattens an NCHW image needs the channels-first order; permuting the
    weight columns once at compile time gives the same sums straight from the NHWC image, so
    the Transpose disappears.
    """
    rw = Rewriter(graph)
    changed = False
    for fc in rw.nodes():
        if fc.op != "FullyConnected" or const(fc.inputs[1]) is None:
            continue
        reshape = rw.producer(fc.inputs[0], "Reshape")
        if reshape is None or rw.sole_user(reshape.output) is not fc:
            continue
        t = _sole_transpose(rw, reshape.inputs[0], reshape)
        if t is None:
            continue
        perm, a = perm_of(t), t.output.type.shape
        b = reshape.output.type.shape
        if len(b) != 2 or perm[0] != 0 or b[0] != a[0]:
            continue  # only the flattening of everything after the batch axis
        w = fc.inputs[1].data
        inv = inverse(perm)
        if is_splat(w):
            moved = w  # every column holds the same value
        else:
            columns = w.reshape(w.shape[0], *a[1:]).transpose(0, *inv[1:])
            moved = np.ascontiguousarray(columns).reshape(w.shape)
        x = t.inputs[0]
        flat = rw.add("Reshape", [x, shape_constant(graph, f"{reshape.name}_shape", b)],
                      reshape_attrs(b), replaces=[reshape, t])
        weights = rw.constant(f"{fc.name}_weights", moved)
        new = rw.copy(fc, [flat.output, weights, *fc.inputs[2:]], replaces=[reshape, t])
        rw.replace(fc.output, new.output)
        changed = True
    rw.finish()
    return changed


# Index arithmetic on tensors bigger than this would cost more than the Transpose it removes.
_SHUFFLE_LIMIT = 1 << 22


def single_axis_order(shape, middle, perm) -> tuple[int, list[int]] | None:
    """(axis, order) when Reshape -> Transpose -> Reshape back only reorders one axis' slices.

    `middle` is the shape between the Reshapes, `shape` the outer one; None otherwise. It
    follows every element's flat index through the three nodes and checks that the result
    equals taking the slices of that axis in `order`.
    """
    size = int(np.prod(shape))
    if size > _SHUFFLE_LIMIT or size == 0:
        return None
    moved = np.arange(size).reshape(middle).transpose(perm).reshape(shape)
    source = np.arange(size).reshape(shape)
    for axis, length in enumerate(shape):
        if length < 2:
            continue
        line = moved[tuple(slice(None) if a == axis else 0 for a in range(len(shape)))]
        order = np.unravel_index(line, shape)[axis]
        if np.array_equal(moved, np.take(source, order, axis=axis)):
            return axis, [int(i) for i in order]
    return None


@register_pass("lower_channel_shuffle", "layout")
def lower_channel_shuffle(graph: Graph) -> bool:
    """Turn a Reshape -> Transpose -> Reshape that only reorders channels into one Gather.

    ShuffleNet mixes its channel groups this way: split the channels into groups, swap the two
    axes, flatten again. The net effect is a fixed reordering of whole channel slices, so one
    Gather along the channel axis with constant indices does it, and no Transpose is left.
    """
    rw = Rewriter(graph)
    changed = False
    for last in rw.nodes("Reshape"):
        t = rw.producer(last.inputs[0], "Transpose")
        if t is None or rw.sole_user(t.output) is not last:
            continue
        first = rw.producer(t.inputs[0], "Reshape")
        if first is None or rw.sole_user(first.output) is not t:
            continue
        x = first.inputs[0]
        if x.type.shape != last.output.type.shape:
            continue  # only a round trip back to the input's own shape reorders in place
        found = single_axis_order(x.type.shape, first.output.type.shape, perm_of(t))
        if found is None:
            continue  # the elements move across more than one axis
        axis, order = found
        indices = rw.constant(f"{t.name}_order", np.asarray(order, np.int64))
        gather = rw.add("Gather", [x, indices], {"axis": axis}, replaces=[first, t, last])
        rw.replace(last.output, gather.output)
        changed = True
    rw.finish()
    return changed
