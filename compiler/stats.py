"""Model statistics shared by `kiln inspect`, the status bar and reports."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from compiler import ops
from compiler.ir.graph import Graph


@dataclass
class ModelStats:
    """Counts a user asks for first: how big, how much arithmetic, what goes in and out."""

    nodes: int
    ops: dict[str, int]
    params: int
    param_bytes: int
    macs: int
    inputs: list[dict] = field(default_factory=list)
    outputs: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        """The document `kiln inspect --json` prints, keys in the documented order."""
        return {"nodes": self.nodes, "ops": self.ops, "params": self.params,
                "param_bytes": self.param_bytes, "macs": self.macs, "inputs": self.inputs,
                "outputs": self.outputs}


def node_macs(graph: Graph) -> dict[int, int]:
    """Multiply-accumulates per node id."""
    return {n.id: ops.lookup(n.op).count_macs(n) for n in graph.nodes}


def compute_stats(graph: Graph) -> ModelStats:
    """Statistics of `graph`.

    Parameters are the elements of the constant weights the graph uses, including tensors held by
    Constant nodes.
    """
    counts = Counter(n.op for n in graph.nodes)
    tensors = [c.data for c in graph.used_constants()]
    tensors += [n.attrs["value"] for n in graph.nodes
                if n.op == "Constant" and isinstance(n.attrs.get("value"), np.ndarray)]
    return ModelStats(
        nodes=len(graph.nodes),
        ops=dict(sorted(counts.items())),
        params=int(sum(t.size for t in tensors)),
        param_bytes=int(sum(t.nbytes for t in tensors)),
        macs=int(sum(node_macs(graph).values())),
        inputs=[{"name": v.name, "dtype": v.type.dtype, "shape": list(v.type.shape)}
                for v in graph.inputs],
        outputs=[{"name": v.name, "dtype": v.type.dtype, "shape": list(v.type.shape)}
                 for v in graph.outputs],
    )
