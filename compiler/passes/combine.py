"""Passes that combine several nodes into one: element-wise chains, fully connected siblings."""

from __future__ import annotations

import numpy as np

from compiler import ops
from compiler.ir.graph import Constant, Graph, Node, Value
from compiler.ir.types import is_float
from compiler.ops.kiln import FUSABLE, parse_step
from compiler.passes.base import register_pass
from compiler.passes.rewrite import Rewriter, const


def _fusable(node: Node) -> bool:
    if node.op != "FusedElementwise" and node.op not in FUSABLE:
        return False
    return len(node.outputs) == 1 and is_float(node.output.type.dtype)


class _Chain:
    """The inputs and steps of a FusedElementwise being built, node by node."""

    def __init__(self, rw: Rewriter):
        self.rw = rw
        self.inputs: list[Value] = []
        self.steps: list[str] = []
        self.nodes: list[Node] = []

    def _ref(self, value: Value | None, running: Value | None) -> str:
        if value is None:
            return "_"
        if value is running:
            return "x"
        for k, known in enumerate(self.inputs):
            if known is value:
                return f"${k}"
        self.inputs.append(value)
        return f"${len(self.inputs) - 1}"

    def extend(self, node: Node, running: Value | None) -> bool:
        """Append `node`'s steps, reading `running` (the chain so far) as x; False if it can't."""
        if node.op == "FusedElementwise":
            return self._extend_fused(node, running)
        words = [node.op, *(self._ref(v, running) for v in node.inputs)]
        schema = ops.lookup(node.op).attrs
        words += [f"{k}={float(node.attrs[k])!r}" for k, a in schema.items() if a.kind == "float"]
        self.steps.append(" ".join(words))
        name = node.attrs.get("activation")
        if name:  # an Add carrying a fused activation
            params = node.attrs.get("activation_params") or ()
            if name == "LeakyRelu":
                self.steps.append(f"LeakyRelu x alpha={params[0]!r}")
            elif name == "Clip":
                dtype = node.output.type.dtype
                bounds = [self._ref(self.rw.constant(f"{node.name}_{k}", np.array(v, dtype)), None)
                          for k, v in zip(("min", "max"), params)]
                self.steps.append(f"Clip x {bounds[0]} {bounds[1]}")
            else:
                self.steps.append("Relu x")
        self.nodes.append(node)
        return True

    def _extend_fused(self, node: Node, running: Value | None) -> bool:
        parsed = [parse_step(text) for text in node.attrs["steps"]]
        for index, (_, refs, _) in enumerate(parsed):
            reads = any(r.startswith("$") and node.inputs[int(r[1:])] is running for r in refs)
            if reads and index > 0:
                return False  # x would mean that step's own predecessor there
        for op, refs, attrs in parsed:
            words = [op]
            for r in refs:
                words.append(r if r in ("x", "_") else self._ref(node.inputs[int(r[1:])], running))
            words += [f"{k}={v!r}" for k, v in attrs.items()]
            self.steps.append(" ".join(words))
        self.nodes.append(node)
        return True


@register_pass("fuse_elementwise", "fuse")
def fuse_elementwise(graph: Graph) -> bool:
    """Fuse a chain of element-wise nodes into one FusedElementwise node that lists its steps.

    Each node of the chain is read only by the next. One loop then computes every step per
    element ("stacked kernels"), so the intermediate tensors are never written to memory; each
    step runs exactly the operator it replaces.
    """
    rw = Rewriter(graph)
    changed = False
    taken: set[int] = set()
    for head in rw.nodes():
        if id(head) in taken or not _fusable(head):
            continue
        chain = _Chain(rw)
        chain.extend(head, None)
        last = head
        while True:
            nxt = rw.sole_user(last.output)
            if nxt is None or id(nxt) in taken or not _fusable(nxt):
                break
            if not chain.extend(nxt, last.output):
                break
            last = nxt
        taken.update(id(n) for n in chain.nodes)
        if len(chain.nodes) < 2:
            continue
        fused = rw.add("FusedElementwise", chain.inputs, {"steps": tuple(chain.steps)},
                       replaces=chain.nodes)
        rw.replace(last.output, fused.output)
        changed = True
    rw.finish()
    return changed


# -- affine chains --------------------------------------------------------------------------------

def _affine(rw: Rewriter, node: Node | None) -> tuple[Value, np.ndarray] | None:
    """(x, c) of a float Add or Mul of a computed value x and a constant c, else None."""
    if node is None or node.op not in ("Add", "Mul") or node.attrs.get("activation"):
        return None
    if not is_float(node.output.type.dtype):
        return None
    a, b = node.inputs
    if const(b) is not None and const(a) is None:
        return a, const(b)
    if const(a) is not None and const(b) is None:
        return b, const(a)
    return None


@register_pass("merge_affine", "simplify")
def merge_affine(graph: Graph) -> bool:
    """Merge chains of multiplications and additions by constants into one Mul and one Add.

    (x * a) * b is x * (a * b), (x + a) + b is x + (a + b), and (x + a) * b is x * b + a * b,
    so a scale-and-shift after a scale-and-shift (a lowered BatchNormalization followed by
    another one) costs one of each. The constants are combined at compile time.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes():
        outer = _affine(rw, node)
        inner_node = rw.producer(outer[0]) if outer is not None else None
        inner = _affine(rw, inner_node)
        if inner is None or rw.sole_user(outer[0]) is not node:
            continue
        (x, a), (_, b) = inner, outer
        dtype = node.output.type.dtype
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
        if inner_node.op == node.op:
            combined = wide_a * wide_b if node.op == "Mul" else wide_a + wide_b
            new = rw.add(node.op, [x, rw.constant(f"{node.name}_c", combined.astype(dtype))],
                         replaces=[node, inner_node])
        elif node.op == "Mul":  # (x + a) * b: scale first, then the scaled shift
            scaled = rw.add("Mul", [x, rw.constant(f"{node.name}_scale", b)], replaces=[node])
            shift = rw.constant(f"{node.name}_shift", (wide_a * wide_b).astype(dtype))
            new = rw.add("Add", [scaled.output, shift], replaces=[node, inner_node])
        else:
            continue  # (x * a) + b is already a scale then a shift
        rw.replace(node.output, new.output)
        changed = True
    rw.finish()
    return changed


# -- fully connected siblings ---------------------------------------------------------------------

def _fc_parts(node: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """(weights, bias) of a FullyConnected with known parameters (zero bias when it has none)."""
    w = const(node.inputs[1])
    has_bias = len(node.inputs) > 2 and node.inputs[2] is not None
    b = const(node.inputs[2]) if has_bias else np.zeros(w.shape[0] if w is not None else 0)
    if w is None or b is None:
        return None
    return w, b.astype(w.dtype)


@register_pass("merge_fully_connected", "fuse")
def merge_fully_connected(graph: Graph) -> bool:
    """Merge FullyConnected nodes that read one input into a wider one, followed by Slices.

    The input is then read once and the kernel called once. This is done only for a single row
    of input, where each slice of the result is a contiguous piece of memory (a free view).
    """
    rw = Rewriter(graph)
    groups: dict[tuple, list[Node]] = {}
    for node in rw.nodes("FullyConnected"):
        if _fc_parts(node) is None:
            continue
        x = node.inputs[0]
        if x.type.numel != x.type.shape[-1]:
            continue  # several rows: the slices would be strided copies
        key = (id(x), node.attrs.get("activation"), node.attrs.get("activation_params"))
        groups.setdefault(key, []).append(node)
    changed = False
    for group in groups.values():
        if len(group) < 2:
            continue
        parts = [_fc_parts(node) for node in group]
        weights = rw.constant(f"{group[0].name}_merged_weights",
                              np.concatenate([w for w, _ in parts]))
        bias = rw.constant(f"{group[0].name}_merged_bias", np.concatenate([b for _, b in parts]))
        merged = rw.copy(group[0], [group[0].inputs[0], weights, bias], replaces=group[1:])
        axis = merged.output.type.rank - 1
        offset = 0
        for node, (w, _) in zip(group, parts):
            bounds = [rw.constant(f"{node.name}_{k}", np.array([v], np.int64))
                      for k, v in (("start", offset), ("end", offset + w.shape[0]),
                                   ("axis", axis))]
            piece = rw.add("Slice", [merged.output, *bounds], replaces=[node])
            rw.replace(node.output, piece.output)
            offset += w.shape[0]
        changed = True
    rw.finish()
    return changed


def _slice_range(node) -> dict[int, tuple[int, int]] | None:
    """{axis: (start, stop)} of a constant, step-1 Slice, normalized, or None."""
    inputs = list(node.inputs) + [None] * (5 - len(node.inputs))
    data, starts, ends, axes, steps = inputs[:5]
    if not all(isinstance(v, Constant) for v in (starts, ends)):
        return None
    if axes is not None and not isinstance(axes, Constant):
        return None
    if steps is not None and (not isinstance(steps, Constant) or np.any(steps.data != 1)):
        return None
    rank = data.type.rank
    axis_list = (list(range(len(starts.data))) if axes is None
                 else [int(a) % rank for a in axes.data.reshape(-1)])
    out = {}
    for a, s, e in zip(axis_list, starts.data.reshape(-1), ends.data.reshape(-1)):
        size = data.type.shape[a]
        s = int(s) + size if s < 0 else int(s)
        e = int(e) + size if e < 0 else int(e)
        out[a] = (min(max(s, 0), size), min(max(e, 0), size))
    return out


@register_pass("slice_of_concat", "simplify")
def slice_of_concat(graph: Graph) -> bool:
    """A Slice that takes exactly one input of a Concat (along the Concat's axis) is that input.

    An unrolled recurrent layer joins every step's state and a classifier then slices out the
    last step: read from the step itself, the join and the other steps' copies die (dce), and
    the arena holds a few states instead of all of them.
    """
    rw = Rewriter(graph)
    changed = False
    for node in rw.nodes("Slice"):
        concat = rw.producer(node.inputs[0], "Concat")
        if concat is None:
            continue
        axis = int(concat.attrs["axis"]) % concat.output.type.rank
        ranges = _slice_range(node)
        if ranges is None or any(a != axis and r != (0, concat.output.type.shape[a])
                                 for a, r in ranges.items()):
            continue
        start, stop = ranges.get(axis, (0, concat.output.type.shape[axis]))
        offset = 0
        for part in concat.inputs:
            length = part.type.shape[axis]
            if (start, stop) == (offset, offset + length) and part.type == node.output.type:
                rw.replace(node.output, part)
                changed = True
                break
            offset += length
    rw.finish()
    return changed
