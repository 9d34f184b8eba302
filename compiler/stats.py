"""Model statistics shared by `kiln inspect`, the status bar and reports."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from compiler import ops
from compiler.errors import KilnError
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


def node_macs(graph: Graph) -> dict[int, int | None]:
    """Multiply-accumulates per node id; None for a node whose operator rejects its inputs.

    An edit in the GUI can leave such a node behind, and statistics must still show.
    """
    result: dict[int, int | None] = {}
    for node in graph.nodes:
        try:
            result[node.id] = ops.lookup(node.op).count_macs(node)
        except KilnError:
            result[node.id] = None
    return result


def compute_stats(graph: Graph) -> ModelStats:
    """Statistics of `graph`.

    Parameters are the elements of the constant weights the graph uses, including tensors held by
    Constant nodes. Invalid nodes (after an edit) count no MACs.
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
        macs=int(sum(m for m in node_macs(graph).values() if m is not None)),
        inputs=[{"name": v.name, "dtype": v.type.dtype, "shape": list(v.type.shape)}
                for v in graph.inputs],
        outputs=[{"name": v.name, "dtype": v.type.dtype, "shape": list(v.type.shape)}
                 for v in graph.outputs],
    )


@dataclass
class TensorStats:
    """What the properties panel shows for a weight: its range, spread, zeros and histogram.

    Values are computed over the finite elements; `nonfinite` counts NaN and infinities, which a
    trained weight should not hold and a user will want to know about.
    """

    shape: tuple[int, ...]
    dtype: str
    min: float
    max: float
    mean: float
    std: float
    sparsity: float  # fraction of elements exactly zero
    counts: np.ndarray  # histogram counts, len(edges) - 1 bins
    edges: np.ndarray
    nonfinite: int = 0

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))


def tensor_stats(array: np.ndarray, bins: int = 40) -> TensorStats:
    """Statistics of a tensor (any numeric or bool dtype), computed in float64.

    An empty tensor, or one with no finite element, gets NaN statistics and an empty histogram.
    """
    array = np.asarray(array)
    values = array.reshape(-1).astype(np.float64)
    finite = values[np.isfinite(values)]
    nonfinite = int(values.size - finite.size)
    sparsity = float(np.count_nonzero(values == 0) / values.size) if values.size else 0.0
    if finite.size == 0:
        nan = float("nan")
        return TensorStats(tuple(array.shape), array.dtype.name, nan, nan, nan, nan, sparsity,
                           np.zeros(0, np.int64), np.zeros(0), nonfinite)
    low, high = float(finite.min()), float(finite.max())
    counts, edges = np.histogram(finite, bins=bins, range=(low, high) if high > low else
                                 (low - 0.5, high + 0.5))
    return TensorStats(tuple(array.shape), array.dtype.name, low, high, float(finite.mean()),
                       float(finite.std()), sparsity, counts, edges, nonfinite)
