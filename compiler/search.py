"""Find nodes by name, operator type or tensor name, for the GUI's search bar and scripts."""

from __future__ import annotations

import re

from compiler.errors import KilnError, one_line
from compiler.ir.graph import Graph, Node


class SearchError(KilnError):
    """A query that cannot be used (a malformed regular expression)."""


def _fields(node: Node) -> list[str]:
    return [node.name, node.op, *(v.name for v in node.outputs)]


def find_nodes(graph: Graph, query: str, *, regex: bool = False) -> list[int]:
    """Ids of the nodes whose name, op type or an output tensor name matches, in graph order.

    Matching ignores case: a substring test, or with `regex` a `re.search`. An empty query
    matches nothing, so clearing the search bar clears the highlight.
    """
    if not query:
        return []
    if regex:
        try:
            pattern = re.compile(query, re.IGNORECASE)
        except re.error as exc:
            raise SearchError(one_line(f"bad regular expression {query!r}: {exc}")) from None
        return [n.id for n in graph.nodes if any(pattern.search(f) for f in _fields(n))]
    needle = query.casefold()
    return [n.id for n in graph.nodes if any(needle in f.casefold() for f in _fields(n))]
