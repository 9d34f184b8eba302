"""A graph's content hash: what a profile, a recipe and a bundle's build file are checked by."""

from __future__ import annotations

import hashlib

import numpy as np

from compiler.ir.graph import Graph


def graph_hash(graph: Graph) -> str:
    """A digest of the graph's structure and constants.

    The same model and pipeline give the same hash; a different graph, even one with other
    weights, another.
    """
    digest = hashlib.sha256()
    for value in graph.inputs:
        digest.update(f"in {value.name} {value.type.shape} {value.type.dtype}\n".encode())
    for name in sorted(graph.constants):
        data = np.ascontiguousarray(graph.constants[name].data)
        digest.update(f"const {name} {data.shape} {data.dtype}\n".encode())
        digest.update(hashlib.sha256(data.tobytes()).digest())
    for node in graph.nodes:
        attrs = sorted((k, repr(v)) for k, v in node.attrs.items())
        digest.update(f"node {node.op} {[v and v.name for v in node.inputs]} "
                      f"{[v.name for v in node.outputs]} {attrs}\n".encode())
    for value in graph.outputs:
        digest.update(f"out {value.name}\n".encode())
    return digest.hexdigest()[:32]
