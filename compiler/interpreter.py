"""The reference interpreter: runs any graph snapshot with the operators' numpy implementations.

It is the oracle that every later stage (passes, quantization, compiled code) is checked against,
so it checks as it goes: every output must have exactly the type the graph declares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from compiler import ops
from compiler.errors import KilnError, ModelError, VerifyError
from compiler.ir.graph import Graph, Node, Value
from compiler.ir.state import initial_feeds
from compiler.ir.types import TensorType

NodeObserver = Callable[[Node, list[np.ndarray]], None]


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Match the caller's arrays to the graph inputs by name, checking shape and element type."""
    env: dict[int, np.ndarray] = {}
    unknown = set(feeds) - {p.name for p in graph.inputs}
    if unknown:
        names = ", ".join(p.name for p in graph.inputs)
        raise ModelError(f"no graph input named {', '.join(sorted(unknown))} (inputs are: {names})")
    defaults = initial_feeds(graph)  # a state input not given starts from its initial value
    for placeholder in graph.inputs:
        if placeholder.name not in feeds and placeholder.name not in defaults:
            raise ModelError(f"no value given for graph input {placeholder.name!r}")
        array = np.asarray(feeds[placeholder.name] if placeholder.name in feeds
                           else defaults[placeholder.name])
        want = placeholder.type
        if array.dtype.name != want.dtype:
            raise ModelError(f"input {placeholder.name!r} must be {want.dtype}, got "
                             f"{array.dtype.name}")
        if tuple(array.shape) != want.shape:
            raise ModelError(f"input {placeholder.name!r} must have shape {list(want.shape)}, "
                             f"got {list(array.shape)}")
        env[id(placeholder)] = array
    return env


def run(graph: Graph, feeds: Mapping[str, np.ndarray], *,
        observer: NodeObserver | None = None, keep_all: bool = False) -> dict[str, np.ndarray]:
    """Evaluate `graph` on `feeds` (name -> array) and return its outputs by name.

    Args:
        graph: Any graph or snapshot.
        feeds: One array per graph input.
        observer: Called after each node with its output arrays (quantization profiling).
        keep_all: Return every value computed, not only the graph outputs.
    """
    env = check_feeds(graph, feeds)
    for const in graph.constants.values():
        env[id(const)] = const.data
    last_use = _last_uses(graph) if not keep_all else {}
    outputs = {id(v) for v in graph.outputs}
    for step, node in enumerate(graph.nodes):
        arrays = [None if v is None else env[id(v)] for v in node.inputs]
        try:
            results = ops.lookup(node.op).run(node, arrays)
        except KilnError as exc:
            raise ModelError(str(exc), node=f"{node.name} ({node.op})") from None
        _check_results(node, results)
        for value, array in zip(node.outputs, results):
            env[id(value)] = array
        if observer is not None:
            observer(node, results)
        for value in node.inputs:  # free intermediates early: big graphs stay small in memory
            if value is not None and last_use.get(id(value)) == step and id(value) not in outputs:
                env.pop(id(value), None)
    if keep_all:
        return {v.name: env[id(v)] for v in graph.values() if id(v) in env}
    return {v.name: env[id(v)] for v in graph.outputs}


def _last_uses(graph: Graph) -> dict[int, int]:
    last: dict[int, int] = {}
    for step, node in enumerate(graph.nodes):
        for value in node.inputs:
            if value is not None and value.producer is not None:
                last[id(value)] = step
    return last


def _check_results(node: Node, results: list[np.ndarray]) -> None:
    if len(results) < len(node.outputs):
        raise VerifyError(f"reference of {node.op} returned {len(results)} outputs for node "
                          f"{node.name}, the graph declares {len(node.outputs)}")
    for value, array in zip(node.outputs, results):
        _check_type(node, value, array)


def _check_type(node: Node, value: Value, array: np.ndarray) -> None:
    want: TensorType = value.type
    if array.dtype.name != want.dtype or tuple(array.shape) != want.shape:
        raise VerifyError(f"node {node.name} ({node.op}) computed {array.dtype.name}"
                          f"{list(array.shape)} for {value.name}, inference said {want}")
