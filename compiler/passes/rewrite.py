"""What every pass shares: a use index kept current while a pass rewrites, and small helpers."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from compiler import ops
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Graph, Node, Placeholder, Value
from compiler.ir.types import TensorType
from compiler.ops.infer import infer_node
from compiler.ops.registry import REQUIRED

_PENDING = TensorType((), "float32")  # an output's type until inference has run


def live_nodes(graph: Graph) -> set[int]:
    """id() of every node some graph output depends on."""
    # Values hash by identity; a stray None among the inputs is harmless in the set.
    needed: set = set(graph.outputs)
    live: set[int] = set()
    for node in reversed(graph.nodes):
        # Written out rather than with any(): this runs once per pass over every node.
        for out in node.outputs:
            if out in needed:
                live.add(id(node))
                needed.update(node.inputs)
                break
    return live


def merged_provenance(nodes: Iterable[Node]) -> tuple[int, ...]:
    """The source-model node ids behind all of `nodes` (a new node replacing them keeps these)."""
    return tuple(sorted({p for node in nodes for p in node.provenance}))


def const(value: Value | None) -> np.ndarray | None:
    """The payload of a constant value, None for anything computed at run time."""
    return value.data if isinstance(value, Constant) else None


def scalar(value: Value | None) -> float | None:
    """The single element of a one-element constant, else None."""
    data = const(value)
    return float(data.reshape(-1)[0]) if data is not None and data.size == 1 else None


def is_splat(data: np.ndarray) -> bool:
    """True for an array that repeats one value through zero strides (a folded ConstantOfShape)."""
    return data.size > 1 and all(s == 0 for s, d in zip(data.strides, data.shape) if d > 1)


def splat(value, shape: Sequence[int], dtype) -> np.ndarray:
    """`shape` filled with one value at the cost of one element (numpy broadcasting)."""
    return np.broadcast_to(np.asarray(value, dtype), tuple(shape))


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    """The permutation that undoes `perm`."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def perm_of(node: Node) -> tuple[int, ...]:
    """A Transpose node's permutation (the default reverses the axes)."""
    perm = node.attrs.get("perm")
    return tuple(perm) if perm is not None else tuple(reversed(range(node.inputs[0].type.rank)))


def transposed_type(t: TensorType, perm: Sequence[int]) -> TensorType | None:
    """The type a Transpose by `perm` gives `t`; None for per-axis quantization (inferred)."""
    if t.quant is not None and t.quant.axis is not None:
        return None
    shape = t.shape
    return TensorType(tuple(shape[p] for p in perm), t.dtype, t.quant)


def shape_constant(graph: Graph, hint: str, shape: Sequence[int]) -> Constant:
    """An int64 shape vector for a Reshape."""
    return graph.add_constant(hint, np.array(list(shape), np.int64))


def reshape_attrs(shape: Sequence[int]) -> dict:
    """Reshape attributes for an explicit target shape (a 0 in it must mean a zero-sized dim)."""
    return {"allowzero": 1 if 0 in shape else 0}


@functools.cache
def _defaults(op: str) -> dict:
    """The attributes of `op` that have schema defaults (copied by every caller)."""
    return {k: a.default for k, a in ops.lookup(op).attrs.items() if a.default is not REQUIRED}


class Rewriter:
    """One pass's working view of a graph.

    It indexes who reads each value among the live nodes and keeps that index current as the
    pass rewires values, so "is this the value's only user?" is cheap and ignores the nodes the
    pass has just made dead. Dead nodes stay in the graph for DCE; new nodes go at the end and
    `finish()` restores the topological order.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self._dead_ids: set[int] | None = None
        self._use_index: dict[int, list[tuple[Node, int]]] | None = None
        self.inserted = False
        self.notes: list[str] = []  # what the pass tells the user about this run

    @property
    def _dead(self) -> set[int]:
        """id() of the nodes no graph output depends on, found on first use.

        A pass looking for operators the graph lacks (see `nodes(*ops)`) never pays for it.
        """
        if self._dead_ids is None:
            live = live_nodes(self.graph)
            self._dead_ids = {i for i in map(id, self.graph.nodes) if i not in live}
        return self._dead_ids

    @property
    def _uses(self) -> dict[int, list[tuple[Node, int]]]:
        """Readers of each value among the live nodes, built on first use.

        Most passes find nothing to rewrite in most graphs; they never pay for the index.
        Built later, it is the same as built at the start and kept current: until then the
        only changes are appended nodes and released ones, which a scan in graph order sees.
        """
        if self._use_index is None:
            self._use_index = {}
            for node in self.graph.nodes:
                if id(node) not in self._dead:
                    self._add_uses(node)
        return self._use_index

    def _add_uses(self, node: Node) -> None:
        for i, value in enumerate(node.inputs):
            if value is not None:
                self._use_index.setdefault(id(value), []).append((node, i))

    def _index(self, node: Node) -> None:
        """Record a new live node's reads (nothing to do while the index is not built)."""
        if self._use_index is not None:
            self._add_uses(node)

    # -- queries ----------------------------------------------------------------------------

    def nodes(self, *ops: str) -> Iterator[Node]:
        """The nodes present when called (of `ops` if given), in order, minus those since dead."""
        present = [n for n in self.graph.nodes if n.op in ops] if ops else list(self.graph.nodes)
        if not present:
            return
        dead = self._dead  # one set, updated in place as the pass releases nodes
        for node in present:
            if id(node) not in dead:
                yield node

    def live(self, node: Node) -> bool:
        """False once no graph output depends on `node` any more."""
        return id(node) not in self._dead

    def users(self, value: Value) -> list[Node]:
        """The distinct live nodes reading `value`."""
        seen: dict[int, Node] = {}
        for node, _ in self._uses.get(id(value), ()):
            seen.setdefault(id(node), node)
        return list(seen.values())

    def is_output(self, value: Value) -> bool:
        """True when `value` is a graph output."""
        return any(v is value for v in self.graph.outputs)

    def is_used(self, value: Value) -> bool:
        """True when a live node or a graph output reads `value`."""
        return bool(self._uses.get(id(value))) or self.is_output(value)

    def sole_user(self, value: Value | None) -> Node | None:
        """The one node reading `value`, if exactly one does and it is not a graph output."""
        if value is None or self.is_output(value):
            return None
        users = self.users(value)
        return users[0] if len(users) == 1 else None

    def producer(self, value: Value | None, op: str | None = None) -> Node | None:
        """The node computing `value` (of type `op` when given), None for inputs and constants."""
        node = value.producer if value is not None else None
        return node if node is not None and (op is None or node.op == op) else None

    def can_replace(self, old: Value, new: Value) -> bool:
        """False when `old` is a graph output that `new` cannot stand in for under its name.

        Model outputs keep their names through every pass (users read results by name), so a
        graph output can only be replaced by a computed value that is not already an output.
        """
        if not self.is_output(old):
            return True
        return not isinstance(new, (Placeholder, Constant)) and not self.is_output(new)

    # -- edits ------------------------------------------------------------------------------

    def replace(self, old: Value, new: Value) -> None:
        """Make every reader of `old` read `new`; a graph output passes its name on to `new`."""
        if old is new:
            return
        if not self.can_replace(old, new):
            raise ValueError(f"graph output {old.name} cannot be replaced by {new.name}")
        for node, i in self._uses.pop(id(old), []):
            node.inputs[i] = new
            self._uses.setdefault(id(new), []).append((node, i))
        for i, value in enumerate(self.graph.outputs):
            if value is old:
                self.graph.outputs[i] = new
                name = old.name
                old.name = self.graph.unique_name(f"{name}_replaced")
                new.name = name
        self._release(old.producer)

    def set_input(self, node: Node, index: int, value: Value | None) -> None:
        """Rewire one input of a live node."""
        old = node.inputs[index]
        if old is not None:
            self._uses[id(old)] = [(n, i) for n, i in self._uses.get(id(old), ())
                                   if not (n is node and i == index)]
        node.inputs[index] = value
        if value is not None:
            self._uses.setdefault(id(value), []).append((node, index))
        if old is not None:
            self._release(old.producer)

    def _release(self, node: Node | None) -> None:
        """Mark `node` dead if nothing reads its outputs any more, then its producers likewise."""
        stack = [node]
        dead, uses = self._dead, self._uses
        while stack:
            node = stack.pop()
            if node is None or id(node) in dead:
                continue
            if any(uses.get(id(out)) or self.is_output(out) for out in node.outputs):
                continue
            dead.add(id(node))
            for i, value in enumerate(node.inputs):
                if value is None:
                    continue
                readers = uses.get(id(value))
                if readers:
                    uses[id(value)] = [(n, k) for n, k in readers if not (n is node and k == i)]
                stack.append(value.producer)

    def add(self, op: str, inputs: Sequence[Value | None], attrs: dict | None = None, *,
            replaces: Iterable[Node], outputs: int = 1,
            types: Sequence[TensorType] | None = None) -> Node:
        """A new node after the others, typed by inference, with the provenance of `replaces`.

        Attributes not given take their schema defaults, as in a loaded graph. `types`, when
        the caller knows the output types for certain, skips inference.
        """
        full = dict(_defaults(op))
        full.update(attrs or {})
        node = self.graph.add_node(op, inputs, types or [_PENDING] * outputs, full,
                                   provenance=merged_provenance(replaces))
        if types is None:
            try:
                self.retype(node)
            except KilnError:  # the caller may keep its unit as it was: leave no trace
                self.graph.remove_node(node)
                raise
        self._index(node)
        self.inserted = True
        return node

    def copy(self, node: Node, inputs: Sequence[Value | None] | None = None,
             attrs: dict | None = None, *, replaces: Iterable[Node] = (),
             types: Sequence[TensorType] | None = None) -> Node:
        """A new node like `node` with some inputs or attributes changed (it replaces `node`).

        `types`, when the caller knows the new output types for certain (an activation fused
        in keeps them), saves inferring them again.
        """
        return self.add(node.op, list(node.inputs if inputs is None else inputs),
                        {**node.attrs, **(attrs or {})}, replaces=[node, *replaces],
                        outputs=len(node.outputs), types=types)

    def transpose(self, value: Value, perm: Sequence[int], *, replaces: Iterable[Node]) -> Node:
        """A new Transpose of `value` by `perm`, typed without inference where it can be."""
        t = transposed_type(value.type, perm)
        return self.add("Transpose", [value], {"perm": tuple(perm)}, replaces=replaces,
                        types=None if t is None else [t])

    def insert_after(self, value: Value, op: str, attrs: dict, *, replaces: Iterable[Node],
                     types: Sequence[TensorType] | None = None) -> Node:
        """A new one-input node reading `value`, which every former reader of `value` now reads.

        A graph output moves to the new node's output, keeping its name.
        """
        readers = self._uses.pop(id(value), [])
        node = self.add(op, [value], attrs, replaces=replaces, types=types)
        for reader, i in readers:
            reader.inputs[i] = node.output
            self._uses.setdefault(id(node.output), []).append((reader, i))
        for i, out in enumerate(self.graph.outputs):
            if out is value:
                self.graph.outputs[i] = node.output
                name = value.name
                value.name = self.graph.unique_name(f"{name}_inner")
                node.output.name = name
        return node

    def retype(self, node: Node) -> None:
        """Recompute a node's output types after its inputs or attributes changed."""
        known = {id(v): v.data for v in node.inputs if isinstance(v, Constant)}
        types, _ = infer_node(node, known)
        for out, t in zip(node.outputs, types):
            out.type = t

    def constant(self, hint: str, data: np.ndarray, type: TensorType | None = None) -> Constant:
        """A new constant (named after `hint`)."""
        return self.graph.add_constant(hint, data, type)

    def note(self, text: str) -> None:
        """Tell the user something about this run of the pass (its PassResult carries it)."""
        self.notes.append(text)

    def finish(self) -> None:
        """Restore topological order if the pass inserted nodes."""
        if self.inserted:
            self.graph.sort()
