"""Which operator of the source file a node comes from, for the canvas and Properties.

A TFLite builtin often becomes several Kiln nodes (a FULLY_CONNECTED a Reshape and a QGemm), and
its fused activation and options vanish into attributes; the loader records, per node id, the
builtin it converted and its options, and passes keep node ids in provenance.
"""

from __future__ import annotations

from compiler.ir.graph import Graph, Node

SOURCE_OPS = "source_ops"  # graph.metadata: node id -> {"op": "CONV_2D #3", "options": {...}}


def source_of(graph: Graph, node: Node) -> dict | None:
    """The source operator of `node` (or of the first node it was made from), if recorded."""
    sources = graph.metadata.get(SOURCE_OPS) or {}
    for node_id in (node.id, *node.provenance):
        found = sources.get(str(node_id))
        if found is not None:
            return found
    return None


def short_text(source: dict) -> str:
    """`CONV_2D #3 +RELU6`: the builtin and its fused activation, for a canvas box."""
    activation = source.get("options", {}).get("FusedActivationFunction")
    return source["op"] + (f" +{activation}" if activation not in (None, "NONE") else "")


def long_text(source: dict) -> str:
    """`CONV_2D #3 (Padding SAME, StrideH 2, ...)`: the builtin with every option."""
    options = ", ".join(f"{k} {v}" for k, v in source.get("options", {}).items())
    return source["op"] + (f" ({options})" if options else "")
