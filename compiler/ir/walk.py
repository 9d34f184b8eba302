"""Depth-first walks without recursion: graphs of any depth (a 20,000-node chain) are fine.

Python's recursion limit (1,000 frames) is a graph-size limit in disguise, so nothing in Kiln
walks a graph recursively; this is the one post-order every caller shares.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


class CycleError(Exception):
    """The walk came back to a key still on its path; `key` is where."""

    def __init__(self, key):
        super().__init__(f"cycle through {key!r}")
        self.key = key


def post_order(roots: Iterable[K], children: Callable[[K], Iterable[K]],
               done: set[K] | None = None) -> list[K]:
    """Every key reachable from `roots`, each after all of its children, roots in order.

    Children are visited in the order `children` gives. Keys in `done` (updated) are skipped.
    Raises CycleError when a key is reached again while it is still on the current path.
    """
    done = set() if done is None else done
    order: list[K] = []
    on_path: set[K] = set()
    for root in roots:
        if root in done:
            continue
        stack = [(root, iter(children(root)))]
        on_path.add(root)
        while stack:
            key, pending = stack[-1]
            for child in pending:
                if child in done:
                    continue
                if child in on_path:
                    raise CycleError(child)
                on_path.add(child)
                stack.append((child, iter(children(child))))
                break
            else:
                stack.pop()
                on_path.discard(key)
                done.add(key)
                order.append(key)
    return order
