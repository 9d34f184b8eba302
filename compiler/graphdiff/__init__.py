"""Compare two graphs: which layer is which, what changed, and by how much."""

from compiler.graphdiff.changes import Change
from compiler.graphdiff.diff import Difference, GraphDiff, arena_by_node, diff_graphs
from compiler.graphdiff.match import Correspondence, Side, correspond

__all__ = ["Change", "Correspondence", "Difference", "GraphDiff", "Side", "arena_by_node",
           "correspond", "diff_graphs"]
