"""Shared helpers of the pass tests: build a small graph, run one pass, check it changed the graph
as claimed, and that the reference interpreter gives the same outputs before and after."""

from __future__ import annotations

from collections import Counter

import numpy as np

from compiler import ops
from compiler.inputs import random_inputs
from compiler.interpreter import run
from compiler.ir import Graph, TensorType
from compiler.ir.dump import dump
from compiler.ops.infer import infer_node
from compiler.ops.registry import REQUIRED
from compiler.passes import get_pass
from compiler.verify import verify
from tests.helpers import assert_close


class Builder:
    """A graph built a node at a time, every node typed by inference as the loader types it."""

    def __init__(self, name: str = "test"):
        self.graph = Graph(name, opset=17)
        self._rng = np.random.default_rng(0)
        self._known: dict[int, np.ndarray] = {}  # compile-time values, as inference computes them

    def input(self, name: str, shape, dtype: str = "float32"):
        return self.graph.add_input(name, TensorType(tuple(shape), dtype))

    def const(self, data, name: str = "c", dtype=None):
        array = np.asarray(data, dtype or (np.float32 if np.asarray(data).dtype.kind == "f"
                                           else None))
        return self.graph.add_constant(name, array)

    def weights(self, *shape, name: str = "w"):
        return self.const(self._rng.standard_normal(shape).astype(np.float32), name)

    def positive(self, *shape, name: str = "p"):
        """Random values in [0.5, 1.5): safe as divisors and variances."""
        return self.const(self._rng.random(shape).astype(np.float32) + 0.5, name)

    def ints(self, values, name: str = "i"):
        return self.const(np.asarray(values, np.int64), name)

    def node(self, op: str, inputs, outputs: int = 1, **attrs):
        """Add `op`; returns its output value (a tuple when it has several)."""
        schema = ops.lookup(op).attrs
        full = {k: a.default for k, a in schema.items() if a.default is not REQUIRED}
        full.update(attrs)
        pending = [TensorType((), "float32")] * outputs
        node = self.graph.add_node(op, inputs, pending, full)
        self._known.update((id(c), c.data) for c in self.graph.constants.values())
        types, values = infer_node(node, self._known)
        for out, t, v in zip(node.outputs, types, values):
            out.type = t
            if v is not None:
                self._known[id(out)] = v
        return node.outputs[0] if outputs == 1 else tuple(node.outputs)

    def build(self, *outputs) -> Graph:
        self.graph.outputs = list(outputs)
        verify(self.graph)
        return self.graph


def op_counts(graph: Graph) -> dict[str, int]:
    """Operators of `graph` with their counts."""
    return dict(Counter(n.op for n in graph.nodes))


def apply(graph: Graph, name: str, *, changed: bool = True, feeds=None, rtol=1e-5, atol=1e-6,
          then_dce: bool = True) -> Graph:
    """Run pass `name` on `graph` (then DCE) and check the pass's claim, the verifier and the
    outputs of the reference interpreter against the graph before the pass."""
    before = graph.snapshot()
    feeds = random_inputs(before, 0) if feeds is None else feeds
    want = run(before, feeds)
    assert get_pass(name)(graph).changed is changed, f"{name} should report changed={changed}"
    if not changed:
        assert dump(graph) == dump(before), f"{name} reported no change but changed the graph"
    elif then_dce:
        get_pass("dce")(graph)
    verify(graph)
    got = run(graph, feeds)
    assert [v.name for v in graph.outputs] == [v.name for v in before.outputs]
    for value in before.outputs:
        assert_close(got[value.name], want[value.name], rtol=rtol, atol=atol, what=value.name)
    return graph
